"""C++ emitters of Fluid 1.x's row-wise differences and norms (ops/distance.py,
ops/vector_norm.py): minus, squared_l2_distance (+ _grad), l1_norm (+ _grad), float32 in the
kernels' order (numpy's pairwise sums along a row)."""
from .. import register
from ..checks import dense_only, same_dim


@register("minus", "cpu")
def minus(e):
    """Out = X - Y, one shape (no broadcasting: a run where they differ runs interpreted,
    where the kernel names the shapes); its gradient is two scale ops."""
    x, y = e.input("X"), e.input("Y")
    dense_only(e, x, y)
    if x.ctype not in ("float", "double") or y.ctype != x.ctype:
        e.fail(f"X {x.ctype} and Y {y.ctype}: compiled for floats of one type")
    e.same_dims(x, y)
    out = e.output("Out", x.dims, x.ctype)
    e.code(f"for (int64_t i = 0; i < {x.numel()}; ++i) {out}[i] = {x}[i] - {y}[i];")


def _rows_of(e):
    """X as [N, D], Y's rows (1 or N, checked) and Y's row stride in elements (0 for one
    row, broadcast to all)."""
    x, y = e.input("X"), e.input("Y")
    dense_only(e, x, y)
    e.require_float(x, y)
    if x.ndim < 1 or y.ndim != x.ndim:
        e.fail(f"X{x.dims} and Y{y.dims} (one rank, at least 1)")
    n, d = x.dims[0], e.prod(x.dims[1:])
    same_dim(e, e.prod(y.dims[1:]), d, "Y's rows are not X's")
    m = y.dims[0]
    if str(m) == "1":
        return x, y, n, d, m, "0"
    if str(m) == str(n):
        return x, y, n, d, m, d
    if e.is_lit(m) and e.is_lit(n):
        e.fail(f"Y{y.dims} has neither 1 row nor X's {n}")
    e.check(f"{m} != 1 && {m} != {n}", f"{e.op.type}: Y has neither 1 row nor X's")
    return x, y, n, d, m, f"({m} == 1 ? 0 : {d})"


@register("squared_l2_distance", "cpu")
def squared_l2_distance(e):
    """sub_result = X - Y over rows [N, D]; Out[i] = row i's squares summed pairwise."""
    x, y, n, d, _, ystep = _rows_of(e)
    sub = e.output("sub_result", [n, d], lod_from=False) if e.has_output("sub_result") \
        else e.scratch([n, d])
    sq, out = e.scratch([d]), e.output("Out", [n, "1"])
    e.code(f"for (int64_t i = 0; i < {n}; ++i) {{ for (int64_t j = 0; j < {d}; ++j) {{ "
           f"const float s = {x}[i * {d} + j] - {y}[i * {ystep} + j]; {sub}[i * {d} + j] = s; "
           f"{sq}[j] = s * s; }} {out}[i] = fl::pairwise_sum({sq}, {d}, 1); }}")


@register("squared_l2_distance_grad", "cpu")
def squared_l2_distance_grad(e):
    """X@GRAD = 2 Out@GRAD[i] sub_result[i, j]; Y@GRAD its negation, or (Y one row of
    several) minus its column sums, row by row as numpy sums axis 0."""
    x, y, n, d, m, _ = _rows_of(e)
    sub, dout = e.input("sub_result"), e.input("Out@GRAD")
    e.require_float(sub, dout)
    same_dim(e, sub.numel(), e.mul(n, d), "sub_result is not X's rows")
    same_dim(e, dout.numel(), n, "Out@GRAD has one value per row")
    grad = e.scratch([n, d])
    e.code(f"for (int64_t i = 0; i < {n}; ++i) {{ const float k = 2.0f * {dout}[i]; "
           f"for (int64_t j = 0; j < {d}; ++j) {grad}[i * {d} + j] = k * {sub}[i * {d} + j]; }}")
    if e.has_output("X@GRAD"):
        dx = e.output("X@GRAD", x.dims, lod_from=False)
        e.code(f"std::memcpy({dx}, {grad}, sizeof(float) * {x.numel()});")
    if e.has_output("Y@GRAD"):
        dy = e.output("Y@GRAD", y.dims, lod_from=False)
        e.code(f"if ({m} == {n}) {{ for (int64_t i = 0; i < {y.numel()}; ++i) "
               f"{dy}[i] = -{grad}[i]; }} else {{ for (int64_t j = 0; j < {d}; ++j) {{ "
               f"float acc = {n} > 0 ? {grad}[j] : 0.0f; for (int64_t i = 1; i < {n}; ++i) "
               f"acc += {grad}[i * {d} + j]; {dy}[j] = -acc; }} }}")


@register("l1_norm", "cpu")
def l1_norm(e):
    """Out = [sum |X|], summed pairwise in float32 (numpy's sum over a contiguous X)."""
    x = e.input("X")
    dense_only(e, x)
    e.require_float(x)
    n = x.numel()
    a, out = e.scratch([n]), e.output("Out", ["1"], lod_from=False)
    e.code(f"for (int64_t i = 0; i < {n}; ++i) {a}[i] = std::fabs({x}[i]); "
           f"{out}[0] = fl::pairwise_sum({a}, {n}, 1);")


@register("l1_norm_grad", "cpu")
def l1_norm_grad(e):
    """X@GRAD = Out@GRAD's one value times sign(X) (numpy's sign: 0 at 0, NaN at NaN)."""
    x, d = e.input("X"), e.input("Out@GRAD")
    dense_only(e, x, d)
    e.require_float(x, d)
    same_dim(e, d.numel(), 1, "Out@GRAD holds one value")
    g = e.output("X@GRAD", x.dims, lod_from=False)
    e.code(f"const float k = {d}[0]; for (int64_t i = 0; i < {x.numel()}; ++i) {{ "
           f"const float v = {x}[i]; {g}[i] = k * (v > 0.0f ? 1.0f : v < 0.0f ? -1.0f : "
           f"v == 0.0f ? 0.0f : v); }}")
