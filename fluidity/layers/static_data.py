"""`fluid.data` (Fluid 1.6+): a fed input variable whose shape is given in full.

Unlike Fluid 1.x's `fluid.layers.data`, no batch dimension is prepended: the shape includes
it, and `None` or -1 marks a dimension known only when fed (usually the batch). The fed
value is checked against that shape and dtype (Fluid's `check_feed_shape_type`; a mismatch
is a ValueError).
"""
from .io import data as _layers_data

__all__ = []   # reached as fluid.data, not fluid.layers.data (which is Fluid 1.x's own)


def data(name, shape, dtype="float32", lod_level=0):
    if not isinstance(name, str):
        raise TypeError(f"fluid.data: name must be a str, got {type(name).__name__}")
    if not isinstance(shape, (list, tuple)):
        raise TypeError(f"fluid.data '{name}': shape must be a list or tuple, got "
                        f"{type(shape).__name__}")
    for d in shape:
        if d is not None and (not isinstance(d, int) or isinstance(d, bool) or d < -1):
            raise ValueError(f"fluid.data '{name}': shape {list(shape)} may hold ints >= 0, "
                             f"-1 or None only")
    return _layers_data(name, [-1 if d is None else d for d in shape],
                        append_batch_size=False, dtype=dtype, lod_level=lod_level)
