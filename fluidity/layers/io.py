"""Input layers."""
from ..core.dtypes import VarType
from ..framework import default_main_program

__all__ = ["data"]


def data(name, shape, append_batch_size=True, dtype="float32", lod_level=0, type=None,
         stop_gradient=True):
    """A fed input variable (Fluid 1.x's `fluid.layers.data`, its argument order). With
    append_batch_size, a -1 batch dim is prepended unless a dim is already None or -1;
    `fluid.data` (fluidity/layers/input.py) passes the full shape without it.

    Fluid 1.x does not check what is fed to a `layers.data` variable; Fluidity checks it
    against the shape but, as Fluid's ops would read it, accepts a value of the same batch
    and the same number of elements per sample (`[6]` for shape `[1]`: read as `[6, 1]`);
    see `Executor._check_feed`."""
    shape = [-1 if d is None else int(d) for d in shape]
    if append_batch_size and all(d >= 0 for d in shape):   # a None or -1 anywhere: as given
        shape = [-1] + shape
    block = default_main_program().global_block()
    return block.create_var(name=name, shape=shape, dtype=dtype, lod_level=lod_level,
                            type=type if type is not None else VarType.LOD_TENSOR,
                            stop_gradient=stop_gradient, need_check_feed=True)
