"""CUDA emitters of sequence_pool and its gradient (runtime/cuda_ops.h; the executor checks
each LoD against its rows before copying it to the device)."""
from .. import register
from ..sequence import pool_grad_operands, pool_operands


def _pooltype(ptype):
    return f"fl::cu::POOL_{ptype}"


@register("sequence_pool", "cuda")
def sequence_pool(e):
    """One device thread per output element, pooling its sequence's rows."""
    x, out, idx, ptype, b, w, pad = pool_operands(e)
    e.code(f"fl::cu::sequence_pool({x}, {x.lod}, {out}, "
           f"{idx if idx is not None else 'nullptr'}, {b}, {w}, {x.dims[0]}, "
           f"{_pooltype(ptype)}, {pad});")


@register("sequence_pool_grad", "cuda")
def sequence_pool_grad(e):
    """One device thread per element of X@GRAD: its row's sequence found by a binary
    search of the LoD, then the C++ target's rule for that pooltype."""
    x, d, ptype, g, b, w = pool_grad_operands(e)
    e.code(f"fl::cu::sequence_pool_grad({x}, {x.lod}, {d}, {g}, {b}, {w}, {g.numel()}, "
           f"{_pooltype(ptype)});")
