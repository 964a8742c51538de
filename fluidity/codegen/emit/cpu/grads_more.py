"""C++ emitters of gradient ops that cut training programs: softshrink_grad, elu_grad_grad
(elu's second order) and elementwise_div_grad_grad (Y of Out's shape: the broadcast case,
whose Y@GRAD the kernel sums back to Y's shape, runs interpreted), each element in float32
in its numpy kernel's order (a Python float attribute rounded to float32 as numpy meets a
float32 array with it)."""
from .. import register
from ..checks import dense_only
from ..literals import f32


def _loop(e, n, loads, stores):
    """C: for every element i, the `loads` (C type, name, Buf) as consts, then `stores`."""
    decl = " ".join(f"const float {name} = {buf}[i];" for name, buf in loads if buf is not None)
    e.code(f"for (int64_t i = 0; i < {n}; ++i) {{ {decl} {' '.join(stores)} }}")


@register("softshrink_grad", "cpu")
def softshrink_grad(e):
    """X@GRAD = Out@GRAD * (|X| > lambda)."""
    x, d = e.input("X"), e.input("Out@GRAD")
    if x is None:
        e.fail("no X")
    dense_only(e, x, d)
    e.require_float(x, d)
    e.same_dims(x, d)
    dx = e.output("X@GRAD", x.dims, lod_from=False)
    lam = f32(e.attr("lambda"))
    _loop(e, x.numel(), [("x", x), ("d", d)],
          [f"{dx}[i] = d * (std::fabs(x) > {lam} ? 1.0f : 0.0f);"])


@register("elu_grad_grad", "cpu")
def elu_grad_grad(e):
    """neg = alpha * exp(min(X, 0)) * (X <= 0); DX = DDX * DOut * neg; DDOut = DDX * (X > 0 ?
    1 : neg)."""
    x, dout, ddx = e.input("X"), e.input("DOut"), e.input("DDX")
    dense_only(e, x, dout, ddx)
    e.require_float(x, dout, ddx)
    e.same_dims(x, dout)
    e.same_dims(x, ddx)
    stores = []
    if e.has_output("DX"):
        stores.append(f"{e.output('DX', x.dims, lod_from=False)}[i] = ddx * dout * neg;")
    if e.has_output("DDOut"):
        stores.append(f"{e.output('DDOut', x.dims, lod_from=False)}[i] = "
                      f"ddx * (x > 0.0f ? 1.0f : neg);")
    _loop(e, x.numel(), [("x", x), ("dout", dout), ("ddx", ddx)],
          [f"const float neg = {f32(e.attr('alpha'))} * std::exp(fl::fminnp(x, 0.0f)) * "
           f"(x <= 0.0f ? 1.0f : 0.0f);"] + stores)


@register("elementwise_div_grad_grad", "cpu")
def elementwise_div_grad_grad(e):
    """The kernel's steps with Y of Out's shape: DDOut = DDX / Y - DDY * Out / Y, DOut =
    -DX * DDY, Y@GRAD = 0 + Out * DX * DDY / Y - DX * DDX / Y (each term only where its
    input is given)."""
    y, o, dx = e.input("Y"), e.input("Out"), e.input("DX")
    ddx, ddy = e.input("DDX"), e.input("DDY")
    dense_only(e, y, o, dx, ddx, ddy)
    e.require_float(y, o, dx, ddx, ddy)
    for b in (y, dx, ddx, ddy):
        if b is not None:
            if b.ndim != o.ndim:
                e.fail(f"{b.var}{b.dims} is broadcast to Out{o.dims}")
            e.same_dims(o, b)
    ddout = "(ddx / y)" if ddx is not None else "(0.0f / y)"
    if ddy is not None:
        ddout = f"{ddout} - ddy * o / y"
    gy = "0.0f" + (" + o * dx * ddy / y" if ddy is not None else "") + \
        (" - dx * ddx / y" if ddx is not None else "")
    outs = {"DDOut": ddout, "DOut": "-dx * ddy" if ddy is not None else "0.0f", "Y@GRAD": gy}
    stores = [f"{e.output(slot, o.dims, lod_from=False)}[i] = {expr};"
              for slot, expr in outs.items() if e.has_output(slot)]
    _loop(e, o.numel(), [("y", y), ("o", o), ("dx", dx), ("ddx", ddx), ("ddy", ddy)], stores)
