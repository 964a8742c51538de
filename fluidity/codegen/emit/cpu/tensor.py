"""C++ emitters of cast, concat (and its gradient), one_hot, range, expand, tile and expand_as
(and their gradients), stack and unstack (and their gradients)."""
import numpy as np

from ....core.names import EMPTY_VAR_NAME
from ....errors import ShapeError
from ....ops.common import norm_axis
from ...dim import Dim, dim
from .. import register
from ..checks import dense_only, same_dim
from ..known_values import known_ints, known_values, set_known_values
from ..literals import c_ints, lit_int, NUMPY_OF_CTYPE
from ..tensor import emit_concat, emit_concat_grad


@register("cast", "cpu")
def cast(e):
    """C conversions are numpy's astype: round to nearest between floats, truncation
    toward zero to integers, != 0 to bool."""
    x = e.input("X")
    out = e.output("Out", x.dims, e.ctype_of(e.attr("out_dtype")))
    e.code(f"for (int64_t i = 0; i < {x.numel()}; ++i) {out}[i] = ({out.ctype}){x}[i];")
    known = cast_known(e, x, out.ctype)
    if known is not None:
        set_known_values(e, out, known)


# integer C types, narrowest first: a cast to one at least as wide keeps every value
_WIDTHS = {"int32_t": 0, "int64_t": 1}


def cast_known(e, x, ctype):
    """The values a cast of `x` to `ctype` holds where compiled code knows them (a shape's
    dims cast to the int64 a range takes): constants converted as numpy's astype, dims
    (known only at run time) only into an integer type at least as wide as X's. None
    otherwise."""
    vals = known_values(e, x)
    if vals is None or ctype not in _WIDTHS or x.ctype not in _WIDTHS:
        return None
    if any(isinstance(v, Dim) for v in vals) and _WIDTHS[ctype] < _WIDTHS[x.ctype]:
        return None
    want = NUMPY_OF_CTYPE[ctype]
    return [v if isinstance(v, Dim) else np.asarray(v).astype(want)[()] for v in vals]


@register("concat", "cpu")
def concat(e):
    return emit_concat(e, lambda out, b, pre, n: (
    f"for (int64_t p = 0; p < {pre}; ++p) std::memcpy({out} + p * row + at, "
    f"{b} + p * {n}, sizeof(*{b}) * {n});"))


@register("concat_grad", "cpu")
def concat_grad(e):
    return emit_concat_grad(e, lambda g, d, pre, n: (
    f"for (int64_t p = 0; p < {pre}; ++p) std::memcpy({g} + p * {n}, "
    f"{d} + p * row + at, sizeof(*{d}) * {n});"))


@register("one_hot", "cpu")
@register("one_hot_v2", "cpu")
def one_hot(e):
    """Every id checked first (the kernel fails before it writes), then the rows."""
    x = e.input("X")
    if e.op.input("depth_tensor"):
        e.fail("depth comes from a tensor")
    if x.ctype not in ("int64_t", "int32_t"):
        e.fail(f"ids are {x.ctype}")
    depth = int(e.attr("depth"))
    if depth < 0:
        e.fail(f"depth {depth}")
    if e.opdef.last_is_one:
        if not x.dims or x.dims[-1] not in ("1",):
            e.fail(f"X{x.dims} has no trailing dim of 1")
        lead = x.dims[:-1]
    else:
        lead = x.dims
    out = e.output("Out", lead + [str(depth)], e.ctype_of(e.attr("dtype")))
    n, ct = e.prod(lead), out.ctype
    check = "" if e.attr("allow_out_of_range") else (
        f"for (int64_t i = 0; i < n; ++i) if ({x}[i] < 0 || {x}[i] >= {depth}) {{ "
        f"std::snprintf(err, 512, " + e.c_string(
            f"{e.opdef.type}: id %lld is outside [0, {depth}) (set allow_out_of_range to get "
            f"a zero row)") + f", (long long){x}[i]); return {2 + e.k}; }} ")
    e.code(f"const int64_t n = {n}; {check}"
           f"std::memset({out}, 0, sizeof({ct}) * n * {depth}); "
           f"for (int64_t i = 0; i < n; ++i) if ({x}[i] >= 0 && {x}[i] < {depth}) "
           f"{out}[i * {depth} + {x}[i]] = ({ct})1;")


@register("range", "cpu")
def range_(e):
    """Start, End and Step must hold values compiled code knows (known_values.py: a
    constant, a dim). Constants: the kernel's np.arange itself, here, its values a table
    in the code; integer dims: Start + i * Step, fl::arange_len of them."""
    bufs = [e.input(s) for s in ("Start", "End", "Step")]
    vals = []
    for slot, b in zip(("Start", "End", "Step"), bufs):
        v = known_values(e, b)
        if not v:
            e.fail(f"{slot} '{b.var}' holds a value known only at run time")
        vals.append(lit_int(v[0]) if isinstance(v[0], Dim) and v[0].is_literal else v[0])
    ct = bufs[0].ctype
    if not any(isinstance(v, Dim) for v in vals):
        s, end, st = (NUMPY_OF_CTYPE[b.ctype](v) for b, v in zip(bufs, vals))
        if st == 0:
            e.fail("Step is 0")
        try:
            got = np.arange(s, end, st).astype(NUMPY_OF_CTYPE[ct], copy=False)
        except (ValueError, OverflowError) as exc:     # the kernel raises it too
            e.fail(str(exc))
        if got.size > e.opdef.MAX_CONSTANTS:
            e.fail(f"{got.size} values")
        out = e.output("Out", [str(got.size)], ct)
        if got.size:
            items = ", ".join(_c_item(e, v, ct) for v in got)
            e.code(f"static const {ct} vals[] = {{{items}}}; "
                   f"for (int64_t i = 0; i < {got.size}; ++i) {out}[i] = vals[i];")
        if got.size <= 64:
            set_known_values(e, out, list(got))
        return
    if any(b.ctype not in ("int64_t", "int32_t") for b in bufs):
        e.fail("a bound known only as a C expression is not an integer")
    s, end, st = (dim(v) for v in vals)
    if st.is_literal:
        if int(st) == 0:
            e.fail("Step is 0")
    else:
        e.check(f"{st} == 0", "range: Step is 0")
    out = e.output("Out", [Dim.call("fl::arange_len", s, end, st)], ct)
    e.code(f"for (int64_t i = 0; i < {out.dims[0]}; ++i) "
           f"{out}[i] = ({ct})(({s}) + i * ({st}));")


def _c_item(e, v, ctype):
    """One value of a numpy array as a C literal of its element type (exact)."""
    if ctype == "float":
        return e.literal(float(v))
    if ctype == "double":
        return repr(float(v))
    return f"{int(v)}LL"


# --- expand (np.tile) and its gradient -----------------------------------------------------
MAX_TILE_DIMS = 4      # expand_grad walks dOut as [t0, d0, t1, d1, ...]: fl::reduce's 8 dims


def expand_times(e, x):
    """expand's times as Dims: expand_times_tensor / ExpandTimes where compiled code knows
    their values (the kernel's ints_from: the list first), else the attribute; one per dim
    of X. A time known only at run time is checked positive there (the kernel's ShapeError,
    interpreted, where it is not)."""
    times = known_ints(e, "ExpandTimes", "expand_times_tensor")
    if times is None:
        times = [dim(t) for t in e.attr("expand_times")]
    if len(times) != x.ndim or not 1 <= x.ndim <= MAX_TILE_DIMS:
        e.fail(f"expand_times {times} for X{x.dims} (one per dim, 1 to {MAX_TILE_DIMS} dims)")
    for t in times:
        if t.is_literal and int(t) < 1:
            e.fail(f"expand_times {times} must be positive")
        if not t.is_literal:
            e.check(f"{t} < 1", f"{e.op.type}: expand_times must be positive")
    if x.has_lod and times[0] != 1:
        # the kernel keeps X's LoD only where the rows stay: a batch of no rows would too
        e.fail("X has LoD and its rows are expanded")
    return times


def _tile_arrays(xdims, times):
    return (f"const int64_t dims[] = {c_ints(xdims)}; "
            f"const int64_t times[] = {c_ints(times)};")


def emit_tile(e, x, xdims, times, lod_from):
    """Out = np.tile(X viewed as `xdims`, `times`): fl::tile copies X's rows into place,
    then each finished block after itself (runtime/indexing.h). expand, tile and expand_as
    are this with their own times."""
    out = e.output("Out", [d * t for d, t in zip(xdims, times)], x.ctype, lod_from=lod_from)
    e.code(f"{_tile_arrays(xdims, times)} fl::tile({x}, {out}, {len(xdims)}, dims, times);")


def emit_untile(e, x, xdims, times, lod_from):
    """X@GRAD = the sum of Out@GRAD's tiles (ops.common.untile) for X viewed as `xdims`:
    Out@GRAD as [t0, d0, t1, d1, ...] reduced over the t axes by fl::reduce, which walks it
    as numpy's sum does, so the float sums are numpy's."""
    d = e.input("Out@GRAD")
    dense_only(e, d)
    if d.ctype not in ("float", "double"):
        e.fail(f"Out@GRAD is {d.ctype}")
    if d.ndim != len(xdims):
        e.fail(f"Out@GRAD{d.dims} for X{list(xdims)}")
    for have, a, t in zip(d.dims, xdims, times):
        same_dim(e, have, a * t, "Out@GRAD is not X tiled")
    split = [n for t, a in zip(times, xdims) for n in (t, a)]
    red = ", ".join("true" if k % 2 == 0 else "false" for k in range(len(split)))
    g = e.output("X@GRAD", x.dims, d.ctype, lod_from=lod_from)
    e.code(f"const int64_t dims[] = {c_ints(split)}; const bool red[] = {{{red}}}; "
           f"fl::reduce<fl::R_SUM>({d}, {g}, nullptr, {len(split)}, dims, red);")


def _kept_lod(x):
    return x if x.has_lod else False


@register("expand", "cpu")
def expand(e):
    x = e.input("X")
    dense_only(e, x)
    emit_tile(e, x, x.dims, expand_times(e, x), _kept_lod(x))


@register("expand_grad", "cpu")
def expand_grad(e):
    x = e.input("X")
    emit_untile(e, x, x.dims, expand_times(e, x), _kept_lod(x))


def tile_plan(e, x):
    """(X's dims padded with leading 1s, times) of tile (ops/tensor.py _tile_plan): times
    from RepeatTimes / repeat_times_tensor where compiled code knows them (the kernel's
    ints_from), else the attribute, padded alike; each checked positive."""
    times = known_ints(e, "RepeatTimes", "repeat_times_tensor") or \
        [dim(t) for t in e.attr("repeat_times")]
    times = [dim(t) for t in times]
    rank = max(x.ndim, len(times))
    if not 1 <= rank <= MAX_TILE_DIMS:
        e.fail(f"repeat_times {times} for X{x.dims} (1 to {MAX_TILE_DIMS} dims)")
    for t in times:
        if t.is_literal and int(t) < 1:
            e.fail(f"repeat_times {times} must be positive")
        if not t.is_literal:
            e.check(f"{t} < 1", f"{e.op.type}: repeat_times must be positive")
    return ["1"] * (rank - x.ndim) + list(x.dims), [dim(1)] * (rank - len(times)) + times


@register("tile", "cpu")
def tile(e):
    x = e.input("X")
    dense_only(e, x)
    xdims, times = tile_plan(e, x)
    emit_tile(e, x, xdims, times, False)


@register("tile_grad", "cpu")
def tile_grad(e):
    x = e.input("X")
    xdims, times = tile_plan(e, x)
    emit_untile(e, x, xdims, times, False)


def ratio_times(e, x, target):
    """expand_as's times: target's dims over X's, each a whole multiple (the kernel's
    rule). A literal ratio is worked out here; over a literal dim of X, checked at run time
    (the kernel, interpreted, names a dim that does not divide); X's dims must otherwise
    equal target's."""
    if x.ndim != target.ndim or not 1 <= x.ndim <= MAX_TILE_DIMS:
        e.fail(f"X{x.dims} and {target.var}{target.dims} (one rank, 1 to {MAX_TILE_DIMS} dims)")
    times = []
    for a, b in zip(x.dims, target.dims):
        a, b = dim(a), dim(b)
        if a == b and not (a.is_literal and int(a) == 0):
            times.append(dim(1))
        elif a.is_literal and int(a) > 0:
            if b.is_literal and int(b) % int(a):
                e.fail(f"{target.var}{target.dims} is not a multiple of X{x.dims}")
            if not b.is_literal:
                e.check(f"{b} % {a} != 0", f"{e.op.type}: target dims are not multiples of X's")
            times.append(b // a)
        else:
            e.fail(f"X{x.dims} to {target.var}{target.dims}: a ratio known only at run time")
    return times


@register("expand_as", "cpu")
def expand_as(e):
    x, target = e.input("X"), e.input("target_tensor")
    dense_only(e, x)
    emit_tile(e, x, x.dims, ratio_times(e, x, target), False)


@register("expand_as_grad", "cpu")
def expand_as_grad(e):
    """The kernel's times are Out@GRAD's dims over X's (target_tensor is not read)."""
    x = e.input("X")
    emit_untile(e, x, x.dims, ratio_times(e, x, e.input("Out@GRAD")), False)


def emit_stack(e, xs, out_slot, lod_from=None):
    """`out_slot` = Bufs `xs` (one shape, one type) stacked along a new dim `axis`: each
    input's runs of prod(dims[axis:]) elements interleaved."""
    if not xs:
        e.fail("no input")
    x0 = xs[0]
    for b in xs[1:]:
        if b.ctype != x0.ctype:
            e.fail(f"inputs of types {x0.ctype} and {b.ctype}")
        e.same_dims(x0, b)
    try:
        axis = norm_axis(e.attr("axis"), x0.ndim + 1)
    except ShapeError as exc:
        e.fail(str(exc))
    n, pre, post = len(xs), e.prod(x0.dims[:axis]), e.prod(x0.dims[axis:])
    y = e.output(out_slot, list(x0.dims[:axis]) + [n] + list(x0.dims[axis:]), x0.ctype,
                 lod_from=lod_from)
    srcs = ", ".join(str(b) for b in xs)
    e.code(f"const {x0.ctype}* const xs[] = {{{srcs}}}; "
           f"for (int64_t p = 0; p < {pre}; ++p) for (int64_t i = 0; i < {n}; ++i) "
           f"std::memcpy({y} + (p * {n} + i) * {post}, xs[i] + p * {post}, "
           f"sizeof({x0.ctype}) * {post});")


def emit_unstack(e, x, out_slot):
    """Each output of `out_slot` (one per slice of X along `axis`; an empty name skipped) =
    that slice, the dim removed: stack's inverse."""
    dense_only(e, x)
    try:
        axis = norm_axis(e.attr("axis"), x.ndim)
    except ShapeError as exc:
        e.fail(str(exc))
    names = e.op.output(out_slot)
    n, pre, post = len(names), e.prod(x.dims[:axis]), e.prod(x.dims[axis + 1:])
    same_dim(e, x.dims[axis], n, f"one {out_slot} a slice along axis {axis}")
    dims = list(x.dims[:axis]) + list(x.dims[axis + 1:])
    for i, name in enumerate(names):
        if name == EMPTY_VAR_NAME:
            continue
        y = e.output(out_slot, dims, x.ctype, i=i, lod_from=False)
        e.code(f"for (int64_t p = 0; p < {pre}; ++p) std::memcpy({y} + p * {post}, "
               f"{x} + (p * {n} + {i}) * {post}, sizeof({x.ctype}) * {post});")


@register("stack", "cpu")
def stack(e):
    emit_stack(e, e.inputs("X"), "Y")


@register("stack_grad", "cpu")
def stack_grad(e):
    emit_unstack(e, e.input("Y@GRAD"), "X@GRAD")


@register("unstack", "cpu")
def unstack(e):
    emit_unstack(e, e.input("X"), "Y")


@register("unstack_grad", "cpu")
def unstack_grad(e):
    emit_stack(e, e.inputs("Y@GRAD"), "X@GRAD", lod_from=False)
