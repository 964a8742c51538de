"""C++ emitters of slice and strided_slice and their gradients (fl::strided_box), with
bounds known when compiling or from known values, and gather_nd."""
from ....errors import ShapeError
from ....ops.common import norm_axis
from ....ops.indexing import slice_plan, strided_plan
from ...dim import Dim
from .. import register
from ..checks import dense_only, same_dim
from ..known_values import known_ints, known_values, set_known_values
from ..literals import c_ints, lit_int


_BIG = 1 << 62          # bounds past any dim clamp alike; kept in int64 range for C


def _box(e, x, starts, ends, strides=None):
    """(begin, len, step) per dim of X (C expressions) of slice (strides None) or
    strided_slice on `axes`, and Out's dims after `decrease_axis`. Literal bounds on literal
    dims are worked out here by the kernel's own plan; others by the runtime's twins of it."""
    axes, decrease = list(e.attr("axes")), list(e.attr("decrease_axis"))
    if x.ndim == 0:
        e.fail("X is 0-D")
    steps = strides if strides is not None else ["1"] * len(axes)
    if not len(axes) == len(starts) == len(ends) == len(steps):
        e.fail(f"axes {axes}, starts {starts}, ends {ends} differ in length")
    begin, size, step = ["0"] * x.ndim, list(x.dims), ["1"] * x.ndim
    try:
        for a, s, t, st in zip(axes, map(_bound, starts), map(_bound, ends), steps):
            a = norm_axis(a, x.ndim, "axes entry")
            dim = x.dims[a]
            lits = [lit_int(v) for v in (dim, s, t, st)]
            if lits[3] == 0:
                e.fail("a stride is 0")
            if None not in lits:
                dim, s, t, st = lits
                if strides is None:
                    index, _, _ = slice_plan([dim], [0], [s], [t], [])
                    b, n = index[0].start, index[0].stop - index[0].start
                else:
                    index, _, _ = strided_plan([dim], [0], [s], [t], [st], [])
                    b, n = (int(index[0][0]) if len(index[0]) else 0), len(index[0])
                begin[a], size[a], step[a] = str(b), str(n), str(st)
            elif strides is None:
                begin[a] = Dim.call("fl::slice_bound", s, dim)
                size[a] = Dim.call("fl::slice_len", s, t, dim)
            else:
                if lits[3] is None:
                    e.check(f"{st} == 0", f"{e.op.type}: a stride is 0")
                begin[a] = Dim.call("fl::strided_begin", s, t, st, dim)
                size[a] = Dim.call("fl::strided_len", s, t, st, dim)
                step[a] = st
        drop = {norm_axis(a, x.ndim, "decrease_axis entry") for a in decrease}
    except ShapeError as exc:
        e.fail(str(exc))
    for a in sorted(drop):
        n = lit_int(size[a])
        if n is None:
            e.check(f"{size[a]} != 1", f"{e.op.type}: a dim in decrease_axis is not 1")
        elif n != 1:
            e.fail(f"decrease_axis {sorted(drop)}: dim {a} has size {n}, not 1")
    out = [d for k, d in enumerate(size) if k not in drop]
    arrays = (f"const int64_t dims[] = {c_ints(x.dims)}, begin[] = {c_ints(begin)}, "
              f"len[] = {c_ints(size)}, step[] = {c_ints(step)};")
    return begin, size, step, out, arrays


def _emit_box(e, strided):
    x = e.input("Input")
    dense_only(e, x)
    bounds = _bounds_of(e, strided)
    begin, size, step, out_dims, arrays = _box(e, x, *bounds)
    out = e.output("Out", out_dims, x.ctype)
    e.code(f"{arrays} fl::strided_box({x}, {out}, {x.ndim}, dims, begin, len, step, false);")
    vals = known_values(e, x)
    b, n, st = (lit_int(v) for v in (begin[0], size[0], step[0]))
    if vals is not None and x.ndim == 1 and None not in (b, n, st):
        set_known_values(e, out, [vals[b + k * st] for k in range(n)])


def _emit_box_grad(e, strided):
    """dX: zeros, Out@GRAD put back in the box."""
    x, d = e.input("Input"), e.input("Out@GRAD")
    dense_only(e, x, d)
    if d.ctype != x.ctype:
        e.fail("Input and Out@GRAD differ in type")
    bounds = _bounds_of(e, strided)
    _, size, _, _, arrays = _box(e, x, *bounds)
    n = e.prod(size)
    if n != d.numel():
        if e.is_lit(n) and e.is_lit(d.numel()):
            e.fail(f"Out@GRAD has {d.numel()} elements, the slice {n}")
        e.check(f"{n} != {d.numel()}", f"{e.op.type}: Out@GRAD is not the slice's size")
    dx = e.output("Input@GRAD", x.dims, x.ctype)
    e.code(f"std::memset({dx}, 0, {dx.nbytes()}); {arrays} "
           f"fl::strided_box({dx}, {d}, {x.ndim}, dims, begin, len, step, true);")


@register("slice", "cpu")
def slice_(e):
    return _emit_box(e, False)


@register("slice_grad", "cpu")
def slice_grad(e):
    return _emit_box_grad(e, False)


@register("strided_slice", "cpu")
def strided_slice(e):
    return _emit_box(e, True)


@register("strided_slice_grad", "cpu")
def strided_slice_grad(e):
    return _emit_box_grad(e, True)


def _bound(v):
    n = lit_int(v)
    return str(max(-_BIG, min(_BIG, n))) if n is not None else v


def _bounds_of(e, strided):
    """starts, ends (, strides) as the kernel takes them: tensors whose values compiled code
    knows (known_values.py), else the attributes (a tensor giving none: the attribute too)."""
    keys = ("starts", "ends", "strides") if strided else ("starts", "ends")
    out = []
    for key in keys:
        t = key.title()
        given = known_ints(e, f"{t}Tensor", f"{t}TensorList")
        out.append(given or [str(v) for v in e.attr(key)])
    return out


@register("gather_nd", "cpu")
def gather_nd(e):
    """Out = the slices of X that Index's rows address (fl::gather_nd: an index out of
    range stops the run with the kernel's message). Index's last dim must be known here."""
    x, index = e.input("X"), e.input("Index")
    dense_only(e, x)
    if index.ctype not in ("int64_t", "int32_t"):
        e.fail(f"Index is {index.ctype}")
    if index.ndim < 1 or not index.dims[-1].is_literal:
        e.fail(f"Index{index.dims}: its last dim must be known when compiling")
    k = int(index.dims[-1])
    if k > x.ndim or x.ndim > 8:
        e.fail(f"Index's last dim {k} for X{x.dims}")
    rows, slice_ = e.prod(index.dims[:-1]), e.prod(x.dims[k:])
    out = e.output("Out", list(index.dims[:-1]) + list(x.dims[k:]), x.ctype)
    xdims = c_ints(x.dims[:k] or [0])
    e.code(f"const int64_t xdims[] = {xdims}; if (int rc = fl::gather_nd({x}, {index}, {out}, "
           f"{rows}, {k}, xdims, {slice_}, err, {e.k})) return rc;")


# --- gather, index_select, index_sample: indices checked in C before any is used -------------
_INDEX_CTYPES = ("int64_t", "int32_t")


def _index_input(e, slot):
    """Index input `slot`: an int32/int64 dense tensor (NotCompilable otherwise)."""
    idx = e.input(slot)
    dense_only(e, idx)
    if idx.ctype not in _INDEX_CTYPES:
        e.fail(f"{slot} is {idx.ctype}")
    return idx


def emit_index_check(e, idx, n, lo, bound, message):
    """C stopping the run with the op's error code when one of `n` entries of index Buf
    `idx` is outside [lo, bound): `message` (a printf format taking the index and the bound
    as long longs) names the first, as the kernel does."""
    e.code(f"if (int rc = fl::check_index({idx}, {n}, {lo}, {bound}, "
           f"{e.c_string(message)}, err, {2 + e.k})) return rc;")


def _take_plan(e, x, axis, idx):
    """(pre, n, post, m, Out's dims) of np.take(X, Index, axis): Index 1-D or [N, 1], or
    0-D (one slice, the axis dropped); its entries checked in [-n, n) with the kernels'
    message."""
    try:
        a = norm_axis(axis, x.ndim)
    except ShapeError as exc:
        e.fail(str(exc))
    if idx.ndim > 2 or idx.ndim == 2 and str(idx.dims[1]) != "1":
        e.fail(f"Index{idx.dims} is not 1-D or [N, 1]")
    m = idx.numel()
    n = x.dims[a]
    out = list(x.dims[:a]) + ([idx.dims[0]] if idx.ndim else []) + list(x.dims[a + 1:])
    emit_index_check(e, idx, m, f"-{n}" if e.is_lit(n) else f"-({n})", n,
                     f"{e.op.type}: index %lld is out of range for a dim of size %lld")
    return e.prod(x.dims[:a]), n, e.prod(x.dims[a + 1:]), m, out


def _gather_axis(e):
    if e.op.input("Axis"):
        e.fail("an Axis tensor")
    return e.attr("axis")


def _take(e, axis):
    x, idx = e.input("X"), _index_input(e, "Index")
    dense_only(e, x)
    pre, n, post, m, dims = _take_plan(e, x, axis, idx)
    out = e.output("Out", dims, x.ctype)
    e.code(f"fl::take_axis({x}, {idx}, {out}, {pre}, {n}, {post}, {m});")


def _take_grad(e, axis):
    """X@GRAD: zeros, Out@GRAD's slices added where Index took them."""
    x, idx, d = e.input("X"), _index_input(e, "Index"), e.input("Out@GRAD")
    dense_only(e, x, d)
    e.require_float(d)
    pre, n, post, m, dims = _take_plan(e, x, axis, idx)
    same_dim(e, d.numel(), e.prod(dims), "Out@GRAD is not Out's size")
    dx = e.output("X@GRAD", x.dims, d.ctype, lod_from=False)
    e.code(f"fl::take_axis_grad({d}, {idx}, {dx}, {pre}, {n}, {post}, {m});")


@register("gather", "cpu")
def gather(e):
    _take(e, _gather_axis(e))


@register("gather_grad", "cpu")
def gather_grad(e):
    _take_grad(e, _gather_axis(e))


@register("index_select", "cpu")
def index_select(e):
    _take(e, e.attr("dim"))


@register("index_select_grad", "cpu")
def index_select_grad(e):
    _take_grad(e, e.attr("dim"))


def _sample_operands(e):
    """X [N, C] and Index [N, K] (same rows, checked), Index's entries checked in [0, C)."""
    x, idx = e.input("X"), _index_input(e, "Index")
    dense_only(e, x)
    if x.ndim != 2 or idx.ndim != 2:
        e.fail(f"X{x.dims} and Index{idx.dims} are not both 2-D")
    same_dim(e, x.dims[0], idx.dims[0], "X and Index differ in rows")
    emit_index_check(e, idx, idx.numel(), 0, x.dims[1],
                     "index_sample: Index holds %lld, outside [0, %lld) (X's columns)")
    return x, idx, x.dims[0], x.dims[1], idx.dims[1]


@register("index_sample", "cpu")
def index_sample(e):
    """Out[i, j] = X[i, Index[i, j]]."""
    x, idx, n, c, k = _sample_operands(e)
    out = e.output("Out", idx.dims, x.ctype)
    e.code(f"for (int64_t i = 0; i < {n}; ++i) for (int64_t j = 0; j < {k}; ++j) "
           f"{out}[i * {k} + j] = {x}[i * {c} + (int64_t){idx}[i * {k} + j]];")


@register("index_sample_grad", "cpu")
def index_sample_grad(e):
    """X@GRAD: zeros, each Out@GRAD added at its column (repeats sum, in row order)."""
    x, idx, n, c, k = _sample_operands(e)
    d = e.input("Out@GRAD")
    dense_only(e, d)
    e.require_float(d)
    e.same_dims(d, idx)
    dx = e.output("X@GRAD", x.dims, d.ctype, lod_from=False)
    e.code(f"std::memset({dx}, 0, {dx.nbytes()}); "
           f"for (int64_t i = 0; i < {n}; ++i) for (int64_t j = 0; j < {k}; ++j) "
           f"{dx}[i * {c} + (int64_t){idx}[i * {k} + j]] += {d}[i * {k} + j];")


# --- scatter: Ids checked in C, a negative one counting from the end -------------------------
def _scatter_rows(e, ids, n):
    """C defining `row(j)`, the row Ids[j] addresses among `n` (every id checked in
    [-n, n) first, named as the kernel names it)."""
    emit_index_check(e, ids, ids.numel(), f"-({n})", n,
                     f"{e.op.type}: id %lld is out of range for %lld rows")
    e.code(f"auto row = [&](int64_t j) {{ const int64_t c = (int64_t){ids}[j]; "
           f"return c < 0 ? c + ({n}) : c; }};")


@register("scatter", "cpu")
def scatter(e):
    """Out = X with the rows Ids address set to Updates' rows: the last duplicate wins
    (overwrite), or the sum of their rows from zero (overwrite=False, in Ids' order)."""
    x, ids, upd = e.input("X"), _index_input(e, "Ids"), e.input("Updates")
    dense_only(e, x, upd)
    if upd.ctype != x.ctype or x.ndim < 1:
        e.fail(f"X {x.ctype}{x.dims} and Updates {upd.ctype}")
    m, d = ids.numel(), e.prod(x.dims[1:])
    if upd.ndim != x.ndim:
        e.fail(f"Updates{upd.dims} are not rows of X{x.dims}")
    same_dim(e, upd.dims[0], m, "Updates has one row per id")
    for a, b in zip(upd.dims[1:], x.dims[1:]):
        same_dim(e, a, b, "Updates' rows are not X's")
    out = e.output("Out", x.dims, x.ctype)
    _scatter_rows(e, ids, x.dims[0])
    size = f"sizeof({x.ctype}) * {d}"
    e.code(f"std::memcpy({out}, {x}, {out.nbytes()});")
    if e.attr("overwrite"):
        e.code(f"for (int64_t j = 0; j < {m}; ++j) "
               f"std::memcpy({out} + row(j) * {d}, {upd} + j * {d}, {size});")
        return
    e.code(f"for (int64_t j = 0; j < {m}; ++j) std::memset({out} + row(j) * {d}, 0, {size}); "
           f"for (int64_t j = 0; j < {m}; ++j) for (int64_t q = 0; q < {d}; ++q) "
           f"{out}[row(j) * {d} + q] += {upd}[j * {d} + q];")


@register("scatter_grad", "cpu")
def scatter_grad(e):
    """X@GRAD = Out@GRAD with the scattered rows zeroed; Updates@GRAD = the Out@GRAD rows
    its rows reached: each id's (overwrite=False), or the last duplicate's only (zeros for
    the others)."""
    ids, upd, dout = _index_input(e, "Ids"), e.input("Updates"), e.input("Out@GRAD")
    dense_only(e, upd, dout)
    e.require_float(upd, dout)
    if dout.ndim < 1 or upd.ndim != dout.ndim:
        e.fail(f"Updates{upd.dims} are not rows of Out@GRAD{dout.dims}")
    m, n, d = ids.numel(), dout.dims[0], e.prod(dout.dims[1:])
    same_dim(e, upd.dims[0], m, "Updates has one row per id")
    for a, b in zip(upd.dims[1:], dout.dims[1:]):
        same_dim(e, a, b, "Updates' rows are not Out@GRAD's")
    size = f"sizeof(float) * {d}"
    dx = e.output("X@GRAD", dout.dims, lod_from=False) if e.has_output("X@GRAD") else None
    du = e.output("Updates@GRAD", upd.dims, lod_from=False) \
        if e.has_output("Updates@GRAD") else None
    if dx is None and du is None:
        e.fail("no output")
    _scatter_rows(e, ids, n)
    if dx is not None:
        e.code(f"std::memcpy({dx}, {dout}, {dx.nbytes()}); for (int64_t j = 0; j < {m}; ++j) "
               f"std::memset({dx} + row(j) * {d}, 0, {size});")
    if du is None:
        return
    if not e.attr("overwrite"):
        e.code(f"for (int64_t j = 0; j < {m}; ++j) "
               f"std::memcpy({du} + j * {d}, {dout} + row(j) * {d}, {size});")
        return
    last = e.scratch([n], "int64_t")
    e.code(f"for (int64_t j = 0; j < {m}; ++j) {last}[row(j)] = j; "
           f"for (int64_t j = 0; j < {m}; ++j) {{ if ({last}[row(j)] == j) "
           f"std::memcpy({du} + j * {d}, {dout} + row(j) * {d}, {size}); "
           f"else std::memset({du} + j * {d}, 0, {size}); }}")
