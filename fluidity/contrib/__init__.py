"""`fluid.contrib`: the parts of Fluid 1.x's contrib package that Fluidity builds —
`contrib.layers` (the basic LSTM/GRU layers and units) and `contrib.decoder` (the 1.0-1.5
beam search decoder)."""
from . import decoder, layers
from . import mixed_precision  # noqa: F401,E402  (Fluid 1.8's automatic mixed precision)
from .decoder import *  # noqa: F401,F403
from .layers import *  # noqa: F401,F403

__all__ = list(decoder.__all__) + list(layers.__all__)
