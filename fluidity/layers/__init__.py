"""User-facing layer functions (`fluid.layers.fc`, ...). Each module declares `__all__`;
everything listed there is re-exported here."""
from . import math_op_patch

math_op_patch.monkey_patch_variable()

from . import (beam, control_flow, crf, debug, distributions, io, learning_rate_scheduler,
               loss, manip, metric, nn, ops, rnn, sampled_loss, sequence, tensor, vision)
from . import case as _case

# in this order: a later module's name wins (Fluid 1.x image layers, case/switch_case,
# distributions, sequence labelling, sampled losses, beam search, Print)
_MODULES = [io, nn, ops, tensor, manip, loss, metric, sequence, control_flow,
            learning_rate_scheduler, rnn, vision, _case, distributions, beam, crf,
            sampled_loss, debug]
__all__ = []
for _mod in _MODULES:
    for _n in _mod.__all__:
        globals()[_n] = getattr(_mod, _n)
    __all__ += list(_mod.__all__)

# Fluid 1.8's argument checks (TypeError for a wrong argument type or dtype), one table
from . import arg_checks as _arg_checks  # noqa: E402

for _n in _arg_checks.CHECKS:
    if _n in globals():
        globals()[_n] = _arg_checks.checked(_n, globals()[_n])

# names not built: NotImplementedError saying why, unless a module above builds them
from . import declined as _declined  # noqa: E402

for _n in _declined.__all__:
    if _n not in globals():
        globals()[_n] = getattr(_declined, _n)
        __all__.append(_n)
