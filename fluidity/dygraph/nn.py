"""`fluid.dygraph.nn`: Fluid's dygraph Layers, which Fluidity does not build (its eager mode
runs static ops one at a time, as OpTest needs); each name raises NotImplementedError saying
so. Write the model with `fluid.layers` as a static program."""
from ..errors import declined_class

__all__ = ["Conv2D", "Conv3D", "Pool2D", "Linear", "BatchNorm", "Dropout", "Embedding",
           "GRUUnit", "InstanceNorm", "LayerNorm", "NCE", "PRelu", "BilinearTensorProduct",
           "Conv2DTranspose", "Conv3DTranspose", "GroupNorm", "SpectralNorm", "TreeConv"]

WHY = ("Fluidity's eager mode runs static ops one at a time (fluid.dygraph.guard, "
       "to_variable, backward); the dygraph framework of Layers, dygraph optimizers and "
       "checkpoints is not built: write the model as a static program")

for _name in __all__:
    globals()[_name] = declined_class(f"dygraph.{_name}", WHY)
del _name
