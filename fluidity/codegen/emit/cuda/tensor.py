"""CUDA emitters of concat and its gradient (runtime/cuda_ops.h concat_part)."""
from .. import register
from ..tensor import emit_concat, emit_concat_grad


@register("concat", "cuda")
def concat(e):
    return emit_concat(e, lambda out, b, pre, n: (
        f"fl::cu::concat_part({out}, {b}, {pre}, {n}, row, at);"))


@register("concat_grad", "cuda")
def concat_grad(e):
    return emit_concat_grad(e, lambda g, d, pre, n: (
        f"fl::cu::concat_part_grad({g}, {d}, {pre}, {n}, row, at);"))
