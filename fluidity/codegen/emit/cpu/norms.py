"""C++ emitters of frobenius_norm and p_norm (ops/reduce.py) and their gradients: the
elementwise steps in float32 as numpy takes them, the sums by fl::reduce, which walks X as
numpy's sum does; the gradients spread Out and Out@GRAD back over the reduced dims with
fl::reduce_grad's sum form (a broadcast), then one elementwise pass."""
import math

from ....errors import ShapeError
from .. import register
from ..checks import dense_only
from ..literals import c_ints, f32
from .reduce import reduce_axes_plan

# np.sign of a float, as a C expression over `v`: 0 for either zero, NaN for NaN
SIGN = "(v > 0.0f ? 1.0f : v < 0.0f ? -1.0f : v == 0.0f ? 0.0f : v)"


def _axes_plan(e, x, axes, keep):
    """reduce_axes_plan's tuple for explicit `axes` (p_norm's axis or every dim)."""
    dims = x.dims or ["1"]
    red = [x.ndim == 0 or k in axes for k in range(len(dims))]
    out = (["1" if r else d for d, r in zip(x.dims, red)] if keep
           else [d for d, r in zip(x.dims, red) if not r])
    count = e.prod([d for d, r in zip(dims, red) if r])
    kept = e.prod([d for d, r in zip(dims, red) if not r])
    arrays = (f"const int64_t dims[] = {c_ints(dims)}; "
              f"const bool red[] = {c_ints('true' if r else 'false' for r in red)};")
    return arrays, len(dims), out, count, kept


def _p_norm_plan(e, x):
    if x.ndim == 0:
        e.fail("0-D X")
    if e.attr("asvector"):
        axes = tuple(range(x.ndim))
    else:
        axis = e.attr("axis")
        if not -x.ndim <= axis < x.ndim:
            e.fail(f"axis {axis} for X{x.dims}")
        axes = (axis % x.ndim,)
    return _axes_plan(e, x, axes, e.attr("keepdim"))


def _reduce_elementwise(e, x, plan, kind, elem, finish, lod_from=None):
    """Out = fl::reduce<kind> over the elements `elem` (a C expression of v = X[i]) then
    `finish` (of s = the reduced value) on each output."""
    arrays, nd, out_dims, _, kept = plan
    tmp = e.scratch(x.dims or ["1"])
    out = e.output("Out", out_dims, lod_from=lod_from)
    e.code(f"for (int64_t i = 0; i < {x.numel()}; ++i) {{ const float v = {x}[i]; "
           f"{tmp}[i] = {elem}; }}")
    e.code(f"{{ {arrays} fl::reduce<{kind}>({tmp}, {out}, nullptr, {nd}, dims, red); }}")
    if finish:
        e.code(f"for (int64_t j = 0; j < {kept}; ++j) {{ const float s = {out}[j]; "
               f"{out}[j] = {finish}; }}")


def _spread(e, x, plan, bufs):
    """Scratch copies of each Buf in `bufs` (Out-sized) spread over X's dims."""
    arrays, nd, _, _, kept = plan
    out = []
    for b in bufs:
        n = b.numel()
        if str(n) != str(kept):
            if e.is_lit(n) and e.is_lit(kept):
                e.fail(f"{b.var} has {n} elements, not {kept}")
            e.check(f"{n} != {kept}", f"{e.op.type}: {b.var} is not Out's size")
        s = e.scratch(x.dims or ["1"])
        e.code(f"{{ {arrays} fl::reduce_grad<fl::R_SUM>({x}, {b}, {b}, {s}, {nd}, dims, red); }}")
        out.append(s)
    return out


def _grad_inputs(e):
    x, o, d = e.input("X"), e.input("Out"), e.input("Out@GRAD")
    if o is None:
        e.fail("Out is absent")
    dense_only(e, x, o, d)
    e.require_float(x, o, d)
    return x, o, d


@register("frobenius_norm", "cpu")
def frobenius_norm(e):
    """Out = sqrt(sum of X^2) over `dim`: the squares in float32, numpy's sum, sqrt."""
    x = e.input("X")
    dense_only(e, x)
    e.require_float(x)
    try:
        plan = reduce_axes_plan(e, x)
    except ShapeError as err:
        e.fail(str(err))
    _reduce_elementwise(e, x, plan, "fl::R_SUM", "v * v", "std::sqrt(s)")


@register("frobenius_norm_grad", "cpu")
def frobenius_norm_grad(e):
    """X@GRAD = Out@GRAD * X / (Out, or 1 where Out is 0)."""
    x, o, d = _grad_inputs(e)
    plan = reduce_axes_plan(e, x)
    ds, os_ = _spread(e, x, plan, (d, o))
    dx = e.output("X@GRAD", x.dims)
    e.code(f"for (int64_t i = 0; i < {x.numel()}; ++i) {{ const float w = {os_}[i]; "
           f"{dx}[i] = {ds}[i] * {x}[i] / (w == 0.0f ? 1.0f : w); }}")


@register("p_norm", "cpu")
def p_norm(e):
    """porder 0: the count of nonzeros; +-inf: the max / min of |X|; else (sum |X|^p)^(1/p)
    with numpy's float32 powers (the exponents rounded to float32 as numpy takes them)."""
    x = e.input("X")
    dense_only(e, x)
    e.require_float(x)
    p = float(e.attr("porder", nonfinite=True))
    if math.isnan(p):
        e.fail("porder NaN")
    plan = _p_norm_plan(e, x)
    if p == 0:
        _reduce_elementwise(e, x, plan, "fl::R_SUM", "v != 0.0f ? 1.0f : 0.0f", "", False)
    elif math.isinf(p):
        if e.is_lit(plan[3]) and int(plan[3]) == 0:
            e.fail("no element to take the extreme of")
        e.check(f"{plan[3]} == 0", "p_norm: no element to take the extreme of")
        _reduce_elementwise(e, x, plan, "fl::R_MAX" if p > 0 else "fl::R_MIN",
                            "std::fabs(v)", "", False)
    else:
        _reduce_elementwise(e, x, plan, "fl::R_SUM", f"std::pow(std::fabs(v), {f32(p)})",
                            f"std::pow(s, {f32(1.0 / p)})", False)


@register("p_norm_grad", "cpu")
def p_norm_grad(e):
    """porder 0: zeros; +-inf: Out@GRAD * sign(X) where |X| is Out; else Out@GRAD *
    sign(X) |X|^(p-1) / max(Out, epsilon)^(p-1), float32 in the kernel's order."""
    x, o, d = _grad_inputs(e)
    p = float(e.attr("porder", nonfinite=True))
    if math.isnan(p):
        e.fail("porder NaN")
    plan = _p_norm_plan(e, x)
    dx = e.output("X@GRAD", x.dims, lod_from=False)
    if p == 0:
        e.code(f"std::memset({dx}, 0, sizeof(float) * {dx.numel()});")
        return
    ds, os_ = _spread(e, x, plan, (d, o))
    if math.isinf(p):
        g = f"{ds}[i] * {SIGN} * (std::fabs(v) == {os_}[i] ? 1.0f : 0.0f)"
    else:
        q, eps = f32(p - 1.0), f32(e.attr("epsilon"))
        g = (f"{ds}[i] * ({SIGN} * std::pow(std::fabs(v), {q}) / "
             f"std::pow(fl::fmaxnp({os_}[i], {eps}), {q}))")
    e.code(f"for (int64_t i = 0; i < {x.numel()}; ++i) {{ const float v = {x}[i]; "
           f"{dx}[i] = {g}; }}")
