"""C++ emitters of the reductions (reduce_sum, _mean, _max, _min, _prod, _all, _any) and
their gradients: fl::reduce walks X as numpy's reduction does (runtime/reduce.h); and of
cumsum (+ _grad), running sums in numpy's order (fl::cumsum)."""
from ....errors import ShapeError
from ....ops.reduce import reduced_axes
from .. import register
from ..checks import dense_only
from ..literals import c_ints


# --- compiled forms (fl::reduce in codegen/runtime/reduce.h) ------------------------------
# op type -> the runtime's reduction: it walks X as numpy's reduction does (so a float sum adds
# pairwise along a contiguous reduced run and row by row across one), in numpy's accumulator
# types (int64 for integer sums and products, double for integer means)
C_REDUCE = {"reduce_sum": "fl::R_SUM", "reduce_mean": "fl::R_MEAN", "reduce_max": "fl::R_MAX",
            "reduce_min": "fl::R_MIN", "reduce_prod": "fl::R_PROD", "reduce_all": "fl::R_ALL",
            "reduce_any": "fl::R_ANY"}


_FLOATS = ("float", "double")


def reduce_axes_plan(e, x):
    """(C arrays `dims` and `red`: the dims the runtime walks and which it reduces, their
    number, Out's dims, the count of elements reduced into each output, Out's size) of the
    op's reduction of Buf x (C expressions)."""
    try:
        axes = reduced_axes(x.ndim, e.attr("dim"), e.attr("reduce_all"))
    except ShapeError as exc:
        e.fail(str(exc))
    dims = x.dims or ["1"]                     # a 0-D X is one element
    red = [x.ndim == 0 or k in axes for k in range(len(dims))]
    if e.attr("keep_dim"):
        out = ["1" if r else d for d, r in zip(x.dims, red)]
    else:
        out = [d for d, r in zip(x.dims, red) if not r]
    count = e.prod([d for d, r in zip(dims, red) if r])
    kept = e.prod([d for d, r in zip(dims, red) if not r])
    arrays = (f"const int64_t dims[] = {c_ints(dims)}; "
              f"const bool red[] = {c_ints('true' if r else 'false' for r in red)};")
    return arrays, len(dims), out, count, kept


def _no_empty(e, count, why):
    """The kernel raises (or makes garbage) where no element is reduced: interpreted."""
    if e.is_lit(count):
        if int(count) == 0:
            e.fail(why)
    else:
        e.check(f"{count} == 0", f"{e.op.type}: {why}")


@register("reduce_max", "cpu")
@register("reduce_mean", "cpu")
@register("reduce_min", "cpu")
@register("reduce_prod", "cpu")
@register("reduce_sum", "cpu")
def _emit_reduce(e):
    """Out = the reduction of X (taken as out_dtype, where set) over `dim`: fl::reduce."""
    x = e.input("X")
    dense_only(e, x)
    kind = C_REDUCE[e.op.type]
    out_dtype = e.attr("out_dtype")
    et = e.ctype_of(out_dtype) if out_dtype >= 0 else x.ctype
    if kind in ("fl::R_ALL", "fl::R_ANY") and (x.ctype, et) != ("bool", "bool"):
        e.fail("compiled for bool X only")
    arrays, nd, out_dims, count, _ = reduce_axes_plan(e, x)
    if kind in ("fl::R_MAX", "fl::R_MIN"):
        _no_empty(e, count, "no element to take the extreme of")
    if kind == "fl::R_MEAN" and et not in _FLOATS:
        _no_empty(e, count, "the mean of no integers")
    # the accumulator type (runtime's ReduceAcc): Out itself where it is Out's type
    if kind in ("fl::R_ALL", "fl::R_ANY") or et in _FLOATS or kind in ("fl::R_MAX",
                                                                          "fl::R_MIN"):
        acc_type = et
    else:
        acc_type = "double" if kind == "fl::R_MEAN" else "int64_t"
    out = e.output("Out", out_dims, et)
    acc = "nullptr" if acc_type == et else e.scratch(out_dims, acc_type).name
    e.code(f"{arrays} fl::reduce<{kind}>({x}, {out}, {acc}, {nd}, dims, red);")


@register("reduce_max_grad", "cpu")
@register("reduce_mean_grad", "cpu")
@register("reduce_min_grad", "cpu")
@register("reduce_sum_grad", "cpu")
def _emit_reduce_grad(e):
    """dX = Out@GRAD spread back over the reduced dims (/ count for the mean, * (X == Out)
    for max/min): fl::reduce_grad, in X's float type."""
    x, d = e.input("X"), e.input("Out@GRAD")
    dense_only(e, x, d)
    kind = C_REDUCE[e.op.type[:-len("_grad")]]
    o = None
    if kind in ("fl::R_MAX", "fl::R_MIN"):
        o = e.input("Out")
        if o is None:
            e.fail("Out is absent")
    if x.ctype not in _FLOATS or any(b.ctype != x.ctype for b in (d, o) if b is not None):
        e.fail("compiled for float X, Out and Out@GRAD of one type")
    arrays, nd, _, _, kept = reduce_axes_plan(e, x)
    for b in (d, o):
        if b is not None:
            n = b.numel()
            if n != kept:
                if e.is_lit(n) and e.is_lit(kept):
                    e.fail(f"{b.var} has {n} elements, not {kept}")
                e.check(f"{n} != {kept}", f"{e.op.type}: {b.var} is not Out's size")
    dx = e.output("X@GRAD", x.dims, x.ctype)
    e.code(f"{arrays} fl::reduce_grad<{kind}>({x}, {o if o is not None else d}, {d}, {dx}, "
           f"{nd}, dims, red);")


@register("reduce_prod_grad", "cpu")
def reduce_prod_grad(e):
    """dX = Out@GRAD times the product of the other elements of each reduced group
    (fl::reduce_prod_grad: prefix and suffix products, exact where a group holds zeros)."""
    x, d = e.input("X"), e.input("Out@GRAD")
    dense_only(e, x, d)
    if x.ctype not in _FLOATS or d.ctype != x.ctype:
        e.fail("compiled for float X and Out@GRAD of one type")
    arrays, nd, _, count, kept = reduce_axes_plan(e, x)
    if str(d.numel()) != str(kept):
        if e.is_lit(d.numel()) and e.is_lit(kept):
            e.fail(f"Out@GRAD has {d.numel()} elements, not {kept}")
        e.check(f"{d.numel()} != {kept}", f"{e.op.type}: Out@GRAD is not Out's size")
    dx = e.output("X@GRAD", x.dims, x.ctype)
    before, roff = e.scratch([count], x.ctype), e.scratch([count], "int64_t")
    e.code(f"{arrays} fl::reduce_prod_grad({x}, {d}, {dx}, {nd}, dims, red, {before}, {roff});")


register("reduce_all", "cpu")(_emit_reduce)


register("reduce_any", "cpu")(_emit_reduce)


# --- cumsum (ops/math.py _cumsum) -----------------------------------------------------------------
_CUMSUM_CTYPES = ("float", "double", "int32_t", "int64_t")


def _emit_cumsum(e, src, x, out_slot, reverse, lod_from):
    """`out_slot` = the running sums of Buf `src` (laid out as X, or flattened) along the
    op's axis (fl::cumsum), X's dims unless `flatten` (then [numel])."""
    dense_only(e, src)
    if src.ctype not in _CUMSUM_CTYPES:
        e.fail(f"{src.var} is {src.ctype}")
    if e.attr("flatten") or x.ndim == 0:
        pre, n, post = "1", x.numel(), "1"
    else:
        axis = e.attr("axis")
        if not -x.ndim <= axis < x.ndim:
            e.fail(f"axis {axis} for X{x.dims}")
        axis %= x.ndim
        pre, n, post = e.prod(x.dims[:axis]), x.dims[axis], e.prod(x.dims[axis + 1:])
    dims = [x.numel()] if e.attr("flatten") and out_slot == "Out" else x.dims
    out = e.output(out_slot, dims, src.ctype, lod_from=lod_from)
    e.code(f"fl::cumsum({src}, {out}, {pre}, {n}, {post}, "
           f"{'true' if e.attr('exclusive') else 'false'}, {'true' if reverse else 'false'});")


@register("cumsum", "cpu")
def cumsum(e):
    x = e.input("X")
    _emit_cumsum(e, x, x, "Out", bool(e.attr("reverse")), None)


@register("cumsum_grad", "cpu")
def cumsum_grad(e):
    """The running sums of Out@GRAD the other way (the kernel's rule), in X's dims."""
    x, d = e.input("X"), e.input("Out@GRAD")
    if str(d.numel()) != str(x.numel()):
        e.check(f"{d.numel()} != {x.numel()}", "cumsum_grad: Out@GRAD is not X's size")
    _emit_cumsum(e, d, x, "X@GRAD", not e.attr("reverse"), False)
