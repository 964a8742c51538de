"""User-facing layer functions (`fluid.layers.fc`, ...). Each module declares `__all__`;
everything listed there is re-exported here."""
from . import math_op_patch

math_op_patch.monkey_patch_variable()

from . import (control_flow, io, learning_rate_scheduler, loss, manip, metric, nn, ops,
               rnn, sequence, tensor)

_MODULES = [io, nn, ops, tensor, manip, loss, metric, sequence, control_flow,
            learning_rate_scheduler, rnn]
__all__ = []
for _mod in _MODULES:
    for _n in _mod.__all__:
        globals()[_n] = getattr(_mod, _n)
    __all__ += list(_mod.__all__)

# Fluid 1.x image layers
from . import vision  # noqa: E402

for _n in vision.__all__:
    globals()[_n] = getattr(vision, _n)
__all__ += list(vision.__all__)

# Fluid 1.8 multi-way branches
from . import case as _case  # noqa: E402

for _n in _case.__all__:
    globals()[_n] = getattr(_case, _n)
__all__ += list(_case.__all__)

# Fluid 1.x probability distributions
from . import distributions  # noqa: E402

for _n in distributions.__all__:
    globals()[_n] = getattr(distributions, _n)
__all__ += list(distributions.__all__)

# names not built: NotImplementedError saying why, unless a module above builds them
from . import declined as _declined  # noqa: E402

for _n in _declined.__all__:
    if _n not in globals():
        globals()[_n] = getattr(_declined, _n)
        __all__.append(_n)
