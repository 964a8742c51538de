"""User-facing layer functions (`fluid.layers.fc`, ...). Each module declares `__all__`;
everything listed there is re-exported here."""
from . import math_op_patch

math_op_patch.monkey_patch_variable()

from . import (beam, control_flow, crf, debug, detection, distributions, io,
               learning_rate_scheduler, loss, lstmp, manip, metric, nn, ops, rnn, roi,
               sampled_loss, sequence, tensor, vision)
from . import case as _case
from . import device  # noqa: F401  (fluid.layers.device.get_places; exports nothing here)
from . import ctr
from . import similarity

# in this order: a later module's name wins (Fluid 1.x image layers, case/switch_case,
# distributions, sequence labelling, sampled losses, beam search, Print)
_MODULES = [io, nn, ops, tensor, manip, loss, metric, sequence, control_flow,
            learning_rate_scheduler, rnn, vision, _case, distributions, beam, crf,
            sampled_loss, debug, roi, detection, lstmp, ctr, similarity]
__all__ = []
for _mod in _MODULES:
    for _n in _mod.__all__:
        globals()[_n] = getattr(_mod, _n)
    __all__ += list(_mod.__all__)

# Fluid 1.8's argument checks (TypeError for a wrong argument type or dtype), one table
from . import arg_checks as _arg_checks  # noqa: E402

for _n in _arg_checks.CHECKS:
    if _n in globals():
        _plain = globals()[_n]
        globals()[_n] = _arg_checks.checked(_n, _plain)
        for _mod in _MODULES:      # fluid.layers.nn.fc is fluid.layers.fc, checked alike
            if getattr(_mod, _n, None) is _plain:
                setattr(_mod, _n, globals()[_n])

# names not built: NotImplementedError saying why, unless a module above builds them. A
# module's name is no layer: `rnn` is Fluid's function (fluid.layers.rnn(cell, inputs)), as
# in Fluid, where `from .rnn import *` rebinds it; `import fluidity.layers.rnn` still works.
from . import declined as _declined  # noqa: E402

for _n in _declined.__all__:
    if _n not in globals() or isinstance(globals()[_n], type(_declined)):
        globals()[_n] = getattr(_declined, _n)
        __all__.append(_n)

# Fluid 1.8's module paths: fluid.layers.nn.reduce_max, fluid.layers.tensor.concat, ...
from . import (device, layer_function_generator, metric_op, sequence_lod,  # noqa: E402,F401
               utils)
from . import layout as _layout  # noqa: E402

_layout.bind(globals())
