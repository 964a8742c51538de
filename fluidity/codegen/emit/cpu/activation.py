"""C++ emitters of softmax, log_softmax, round, softshrink and sqrt_grad_grad (the other
activations are rows of the elementwise table)."""
from .. import register
from ..activation import softmax_grad_operands, softmax_operands
from ..checks import dense_only
from ..literals import f32


def _along(e, x):
    """(pre, n, post) of Buf x seen as [pre, n, post] along the op's `axis`."""
    if x.ndim == 0:
        e.fail("X is 0-D")
    axis = e.attr("axis")
    if not -x.ndim <= axis < x.ndim:
        e.fail(f"axis {axis} is out of range for rank {x.ndim}")
    axis %= x.ndim
    return e.prod(x.dims[:axis]), x.dims[axis], e.prod(x.dims[axis + 1:])


@register("round", "cpu")
def round_(e):
    n, body = rounded_element(e, "std::nearbyint")
    e.code(f"for (int64_t i = 0; i < {n}; ++i) {body}")


@register("softmax", "cpu")
def softmax(e):
    x, out = softmax_operands(e)
    e.code(f"fl::softmax_rows({x}, {out}, {e.prod(x.dims[:-1])}, {x.dims[-1]});")


@register("softmax_grad", "cpu")
def softmax_grad(e):
    o, d, dx = softmax_grad_operands(e)
    e.code(f"fl::softmax_rows_grad({o}, {d}, {dx}, {e.prod(o.dims[:-1])}, {o.dims[-1]});")


@register("log_softmax", "cpu")
def log_softmax(e):
    """fl::log_softmax over X as [pre, n, post] along `axis` (numpy's sums: pairwise
    along a contiguous axis, in order across rows)."""
    x = e.input("X")
    dense_only(e, x)
    e.require_float(x)
    pre, n, post = _along(e, x)
    out = e.output("Out", x.dims)
    e.code(f"fl::log_softmax({x}, {out}, {pre}, {n}, {post});")


@register("log_softmax_grad", "cpu")
def log_softmax_grad(e):
    o, d = e.input("Out"), e.input("Out@GRAD")
    dense_only(e, o, d)
    e.require_float(o, d)
    e.same_dims(o, d)
    pre, n, post = _along(e, o)
    dx = e.output("X@GRAD", o.dims)
    e.code(f"fl::log_softmax_grad({o}, {d}, {dx}, {pre}, {n}, {post});")


def rounded_element(e, rint):
    """round's arithmetic, with `rint` the target's round half to even (std::nearbyint,
    CUDA's rint): (elements, the statement storing Out[i]). decimals 0: rint(x); else
    numpy's x * 10^n, rint, / 10^n."""
    x = e.input("X")
    e.require_float(x)
    out = e.output("Out", x.dims, x.ctype, lod_from=x)
    n = int(e.attr("decimals"))
    f = "float" if x.ctype == "float" else "double"
    if n == 0:
        return x.numel(), f"{out}[i] = {rint}({x}[i]);"
    if n > 0:
        return x.numel(), f"{out}[i] = ({f})({rint}({x}[i] * ({f})1e{n}) / ({f})1e{n});"
    return x.numel(), f"{out}[i] = ({f})({rint}({x}[i] / ({f})1e{-n}) * ({f})1e{-n});"


@register("softshrink", "cpu")
def softshrink(e):
    """Out element by element, in float32 as the kernel computes it (docs/ops.md's worked
    example of adding an emitter)."""
    x = e.input("X")
    e.require_float(x)
    lam = f32(e.attr("lambda"))         # the attribute as the float32 numpy makes of it
    out = e.output("Out", x.dims, lod_from=x)
    e.code(f"for (int64_t i = 0; i < {x.numel()}; ++i) {{ const float v = {x}[i]; "
           f"{out}[i] = v > {lam} ? v - {lam} : (v < -{lam} ? v + {lam} : 0.0f); }}")


# the gradient of sqrt_grad (ops/activation.py SqrtGradGrad): output slot -> its element, in
# float32 in the kernel's order
SQRT_GRAD_GRAD = {"DOut": "-dx * ddx / o", "DDOut": "0.5f * ddx / o"}


@register("sqrt_grad_grad", "cpu")
def sqrt_grad_grad(e):
    o, dx, ddx = e.input("Out"), e.input("DX"), e.input("DDX")
    dense_only(e, o, dx, ddx)
    e.require_float(o, dx, ddx)
    e.same_dims(o, dx)
    e.same_dims(o, ddx)
    for slot, expr in SQRT_GRAD_GRAD.items():
        if e.has_output(slot):
            g = e.output(slot, o.dims)
            e.code(f"for (int64_t i = 0; i < {o.numel()}; ++i) {{ const float o = {o}[i], "
                   f"dx = {dx}[i], ddx = {ddx}[i]; {g}[i] = {expr}; }}")
