"""CUDA emitters of softmax and round (runtime/cuda_ops.h); the other activations are rows
of the elementwise table."""
from .. import register
from ..activation import softmax_grad_operands, softmax_operands


@register("round", "cuda")
def round_(e):
    """One thread per element: rint(x), or numpy's x * 10^n, rint, / 10^n (decimals n > 0),
    x / 10^-n, rint, * 10^-n (n < 0)."""
    x = e.input("X")
    e.require_float(x)
    out = e.output("Out", x.dims, x.ctype, lod_from=x)
    n = int(e.attr("decimals"))
    mode, scale = (0, "1") if n == 0 else ((1, f"1e{n}") if n > 0 else (-1, f"1e{-n}"))
    e.code(f"fl::cu::round_elements({x}, {out}, {x.numel()}, {mode}, ({x.ctype}){scale});")


@register("softmax", "cuda")
def softmax(e):
    x, out = softmax_operands(e)
    e.code(f"fl::cu::softmax_rows({x}, {out}, {e.prod(x.dims[:-1])}, {x.dims[-1]});")


@register("softmax_grad", "cuda")
def softmax_grad(e):
    o, d, dx = softmax_grad_operands(e)
    e.code(f"fl::cu::softmax_rows_grad({o}, {d}, {dx}, {e.prod(o.dims[:-1])}, "
           f"{o.dims[-1]});")
