"""The C target's mul and matmul_v2 (plain loops, fl_matmul), scale, mean and softmax."""
from .. import register
from ..checks import same_dim
from ..literals import f32


@register("mul", "c")
def mul(e):
    """Out = flatten(X) @ flatten(Y), each output summed over k in order."""
    x, y = e.input("X"), e.input("Y")
    e.require_float(x, y)
    xn, yn = e.attr("x_num_col_dims"), e.attr("y_num_col_dims")
    m, k, k2, n = e.prod(x.dims[:xn]), e.prod(x.dims[xn:]), e.prod(y.dims[:yn]), \
        e.prod(y.dims[yn:])
    same_dim(e, k, k2, "X's columns and Y's rows")
    out = e.output("Out", x.dims[:xn] + y.dims[yn:])
    e.code(f"fl_matmul({x}, {y}, {out}, {m}, {n}, {k});")


@register("matmul_v2", "c")
def matmul_v2(e):
    """2-D operands without transposes."""
    x, y = e.input("X"), e.input("Y")
    e.require_float(x, y)
    if x.ndim != 2 or y.ndim != 2 or e.attr("trans_x") or e.attr("trans_y"):
        e.fail("the C target multiplies 2-D operands without transposes")
    same_dim(e, x.dims[1], y.dims[0], "X's columns and Y's rows")
    out = e.output("Out", [x.dims[0], y.dims[1]])
    e.code(f"fl_matmul({x}, {y}, {out}, {x.dims[0]}, {y.dims[1]}, {x.dims[1]});")


@register("scale", "c")
def scale(e):
    """Out = X * scale + bias (or (X + bias) * scale), float32."""
    if e.op.input("ScaleTensor"):
        e.fail("the scale comes from a tensor")
    x = e.input("X")
    e.require_float(x)
    s, b = f32(e.attr("scale")), f32(e.attr("bias"))
    expr = f"v * {s} + {b}" if e.attr("bias_after_scale") else f"(v + {b}) * {s}"
    out = e.output("Out", x.dims)
    e.code(f"for (int64_t i = 0; i < {x.numel()}; ++i) {{ const float v = {x}[i]; "
           f"{out}[i] = {expr}; }}")


@register("mean", "c")
def mean(e):
    """The mean of X's elements, summed in order."""
    x = e.input("X")
    e.require_float(x)
    out = e.output("Out", [])
    e.code(f"{{ float s = 0.0f; for (int64_t i = 0; i < {x.numel()}; ++i) s += {x}[i]; "
           f"{out}[0] = s / (float)({x.numel()}); }}")


@register("softmax", "c")
def softmax(e):
    """Over the last axis."""
    x = e.input("X")
    e.require_float(x)
    if e.attr("axis") % max(x.ndim, 1) != x.ndim - 1:
        e.fail("softmax over another axis than the last")
    out = e.output("Out", x.dims)
    e.code(f"fl_softmax_rows({x}, {out}, {e.prod(x.dims[:-1])}, {x.dims[-1]});")
