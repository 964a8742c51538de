"""C++ emitters of argsort and argsort_grad (ops/tensor.py): a stable merge sort of each
line along `axis` in arena scratch (no allocation per run), in the kernel's order: ascending
with NaN last; descending with NaN first; equal values (and NaNs) in their original order
either way, as the kernel's stable sort of the flipped line gives them."""
from ....errors import ShapeError
from ....ops.common import norm_axis
from .. import register
from ..checks import dense_only

# whether line value a goes strictly before b (a NaN is the largest value)
_BEFORE = {False: "(a < b || (b != b && a == a))", True: "(a > b || (a != a && b == b))"}


def _line(e, x):
    """(pre, n, post) of X around `axis`."""
    if x.ndim == 0:
        e.fail("X is 0-D")
    try:
        a = norm_axis(int(e.attr("axis")), x.ndim)
    except ShapeError as err:
        e.fail(str(err))
    return e.prod(x.dims[:a]), x.dims[a], e.prod(x.dims[a + 1:])


@register("argsort", "cpu")
def argsort(e):
    x = e.input("X")
    dense_only(e, x)
    if x.ctype == "bool":
        e.fail("bool X")
    pre, n, post = _line(e, x)
    out = e.output("Out", x.dims, x.ctype)
    ids = e.output("Indices", x.dims, "int64_t")
    s, t = e.scratch([n], "int64_t"), e.scratch([n], "int64_t")
    before = _BEFORE[bool(e.attr("descending"))]
    e.code(
        f"for (int64_t p = 0; p < {pre}; ++p) for (int64_t q = 0; q < {post}; ++q) {{ "
        f"const int64_t n = {n}, st = {post}, base = p * n * st + q; const {x.ctype}* v = "
        f"{x} + base; int64_t* idx = {s}; int64_t* tmp = {t}; "
        f"for (int64_t i = 0; i < n; ++i) idx[i] = i; "
        f"for (int64_t w = 1; w < n; w *= 2) {{ for (int64_t lo = 0; lo < n; lo += 2 * w) {{ "
        f"const int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n; "
        f"int64_t i = lo, j = mid, o = lo; while (i < mid && j < hi) {{ "
        f"const {x.ctype} a = v[idx[j] * st], b = v[idx[i] * st]; "
        f"tmp[o++] = {before} ? idx[j++] : idx[i++]; }} while (i < mid) tmp[o++] = idx[i++]; "
        f"while (j < hi) tmp[o++] = idx[j++]; }} int64_t* sw = idx; idx = tmp; tmp = sw; }} "
        f"for (int64_t i = 0; i < n; ++i) {{ {ids}[base + i * st] = idx[i]; "
        f"{out}[base + i * st] = v[idx[i] * st]; }} }}")


@register("argsort_grad", "cpu")
def argsort_grad(e):
    """X@GRAD: Out@GRAD put back where each sorted value came from; every index checked in
    C first (out of range: the run stops naming the op, the index and the bound)."""
    x, ids, d = e.input("X"), e.input("Indices"), e.input("Out@GRAD")
    dense_only(e, x, ids, d)
    if ids.ctype != "int64_t":
        e.fail(f"Indices is {ids.ctype}")
    e.same_dims(x, ids)
    e.same_dims(x, d)
    pre, n, post = _line(e, x)
    g = e.output("X@GRAD", x.dims, d.ctype)
    msg = e.c_string(f"{e.op.type}: Indices holds %lld, outside [0, %lld)")
    e.code(f"for (int64_t i = 0; i < {ids.numel()}; ++i) if ({ids}[i] < 0 || {ids}[i] >= "
           f"{n}) {{ std::snprintf(err, 512, {msg}, (long long){ids}[i], (long long)({n})); "
           f"return {2 + e.k}; }}")
    e.code(f"std::memset({g}, 0, {g.nbytes()}); for (int64_t p = 0; p < {pre}; ++p) "
           f"for (int64_t q = 0; q < {post}; ++q) {{ const int64_t st = {post}, base = p * "
           f"{n} * st + q; for (int64_t i = 0; i < {n}; ++i) {g}[base + {ids}[base + i * st] "
           f"* st] = {d}[base + i * st]; }}")
