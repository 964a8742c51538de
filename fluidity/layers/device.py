"""fluid.layers.device: Fluid 1.8 keeps this module for old imports and exports nothing (its
`get_places` was deprecated with ParallelDo); `from fluid.layers.device import *` works."""

__all__ = []
