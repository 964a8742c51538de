"""`fluid.dygraph`: the minimal eager mode (base.py, tracer.py) in which Fluid's static ops
run as they are appended and `backward()` runs their gradients, which is what Fluid 1.8's
OpTest needs of dygraph; and Fluid 1.8's Layer classes (layers.py, nn.py, container.py) as
they build static programs. The rest of Fluid's dygraph framework (dygraph optimizers and
checkpoints, learning-rate schedulers, data parallelism, dygraph-to-static) is not built:
those names raise NotImplementedError saying so (docs/api.md)."""
from ..errors import declined, declined_class
from . import base  # noqa: F401
from .base import (disable_dygraph, enable_dygraph, enabled, grad, guard,  # noqa: F401
                   no_grad, to_variable)
from .tracer import Tracer, VarBase  # noqa: F401
from . import container, layers, nn, parallel  # noqa: F401
from .container import LayerList, ParameterList, Sequential  # noqa: F401
from .layers import Layer  # noqa: F401
from .nn import *  # noqa: F401,F403  (the Layers, at fluid.dygraph.X as in Fluid)
from .parallel import DataParallel, Env, ParallelEnv, prepare_context  # noqa: F401

_WHY = ("Fluidity's eager mode runs static ops one at a time (fluid.dygraph.guard, "
        "to_variable, backward); dygraph optimizers, learning-rate schedulers and "
        "checkpoints are not built: write the model as a static program")
_CLASSES = ("NoamDecay", "PiecewiseDecay", "NaturalExpDecay",
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
