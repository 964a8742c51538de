"""C++ emitters of Fluid 1.x's CTR ops (ops/ctr.py): cvm and data_norm and their gradients,
float32, in the kernels' arithmetic (one float operation at a time, in their order; column
sums row by row, as numpy's axis-0 sum of a row-major matrix)."""
from ...dim import dim
from .. import register
from ..checks import check_dims, dense_only, same_dim


# ---- cvm


def _cvm_operands(e):
    """X as [rows, D] (C expressions) for cvm(_grad): float, dense, D >= 2 (checked at run
    time where symbolic: a narrower X runs interpreted, where the kernel fails)."""
    x = e.input("X")
    e.require_float(x)
    dense_only(e, x)
    if x.ndim < 1:
        e.fail("X is 0-D")
    d = x.dims[-1]
    if e.is_lit(d) and int(d) < 2:
        e.fail(f"X's last dim {d} holds no show and click columns")
    if not e.is_lit(d):
        e.check(f"{d} < 2", "cvm: X's last dim holds no show and click columns")
    return x, e.prod(x.dims[:-1]), d


@register("cvm", "cpu")
def cvm(e):
    """use_cvm: Y = X with columns 0, 1 made log(show + 1), log(click + 1) - log(show + 1)
    (float logs, as numpy's); else Y = X without them."""
    x, rows, d = _cvm_operands(e)
    if e.attr("use_cvm"):
        y = e.output("Y", x.dims)
        e.code(f"for (int64_t r = 0; r < {rows}; ++r) {{ const float* a = {x} + r * {d}; "
               f"float* b = {y} + r * {d}; const float s = std::log(a[0] + 1.0f); "
               f"b[0] = s; b[1] = std::log(a[1] + 1.0f) - s; for (int64_t k = 2; k < {d}; "
               f"++k) b[k] = a[k]; }}")
        return
    w = dim(d) - 2
    y = e.output("Y", list(x.dims[:-1]) + [w])
    e.code(f"for (int64_t r = 0; r < {rows}; ++r) std::memcpy({y} + r * {w}, {x} + r * {d} "
           f"+ 2, sizeof(float) * {w});")


@register("cvm_grad", "cpu")
def cvm_grad(e):
    """X@GRAD: Y@GRAD on the embedding columns; the show and click columns the CVM values
    (each row's two, as the kernel's reshape reads them)."""
    x, rows, d = _cvm_operands(e)
    c, dy = e.input("CVM"), e.input("Y@GRAD")
    e.require_float(c, dy)
    dense_only(e, c, dy)
    use = e.attr("use_cvm")
    check_dims(e, dy, x.dims if use else list(x.dims[:-1]) + [dim(d) - 2], "Y")
    same_dim(e, c.numel(), e.mul(rows, 2), "CVM holds two values a row of X")
    dx = e.output("X@GRAD", x.dims)
    w, skip = (d, 2) if use else (dim(d) - 2, 0)
    e.code(f"for (int64_t r = 0; r < {rows}; ++r) {{ float* g = {dx} + r * {d}; "
           f"g[0] = {c}[2 * r]; g[1] = {c}[2 * r + 1]; std::memcpy(g + 2, {dy} + r * {w} + "
           f"{skip}, sizeof(float) * ({d} - 2)); }}")
