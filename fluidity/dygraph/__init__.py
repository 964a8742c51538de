"""`fluid.dygraph`: the minimal eager mode (base.py, tracer.py) in which Fluid's static ops
run as they are appended and `backward()` runs their gradients, which is what Fluid 1.8's
OpTest needs of dygraph. Fluid's dygraph framework itself (Layers, dygraph optimizers and
checkpoints, data parallelism, dygraph-to-static) is not built: those names raise
NotImplementedError saying so (docs/api.md)."""
from ..errors import declined, declined_class
from . import base  # noqa: F401
from .base import (disable_dygraph, enable_dygraph, enabled, grad, guard,  # noqa: F401
                   no_grad, to_variable)
from .tracer import Tracer, VarBase  # noqa: F401
from . import nn, parallel  # noqa: F401
from .nn import *  # noqa: F401,F403  (the declined Layers, at fluid.dygraph.X as in Fluid)
from .nn import WHY as _WHY
from .parallel import DataParallel, Env, ParallelEnv, prepare_context  # noqa: F401

_CLASSES = ("Layer", "Sequential", "ParameterList", "LayerList", "NoamDecay", "PiecewiseDecay", "NaturalExpDecay",
            "ExponentialDecay", "InverseTimeDecay", "PolynomialDecay", "CosineDecay",
            "LinearLrWarmup", "ReduceLROnPlateau", "BackwardStrategy", "TracedLayer",
            "ProgramTranslator", "StaticModelRunner")
_FUNCTIONS = ("save_dygraph", "load_dygraph", "declarative",
              "dygraph_to_static_func")

for _name in _CLASSES:
    globals()[_name] = declined_class(f"dygraph.{_name}", _WHY)
for _name in _FUNCTIONS:
    globals()[_name] = declined(f"dygraph.{_name}", _WHY)
del _name
