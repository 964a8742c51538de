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

# Fluid 1.x image layers, multi-way branches (case, switch_case), distributions
from . import case as _case, distributions, vision  # noqa: E402

for _mod in (vision, _case, distributions):
    for _n in _mod.__all__:
        globals()[_n] = getattr(_mod, _n)
    __all__ += list(_mod.__all__)

# h6-book: sequence labelling, sampled losses and beam search layers
from . import beam, crf, sampled_loss  # noqa: E402

for _mod in (beam, crf, sampled_loss):
    for _n in _mod.__all__:
        globals()[_n] = getattr(_mod, _n)
    __all__ += list(_mod.__all__)

from . import debug  # noqa: E402  (Print)

for _n in debug.__all__:
    globals()[_n] = getattr(debug, _n)
__all__ += list(debug.__all__)

# names not built: NotImplementedError saying why, unless a module above builds them
from . import declined as _declined  # noqa: E402

for _n in _declined.__all__:
    if _n not in globals():
        globals()[_n] = getattr(_declined, _n)
        __all__.append(_n)
