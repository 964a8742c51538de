"""C++ emitters of the layout ops: the movers (pads, crops, channel shuffles: Out gathers X
through an index map compiled in as a table) and their gradients, maxout, affine_channel,
lrn, flip and reverse."""
import numpy as np

from ....errors import ExecutionError, ShapeError
from ....ops import registry
from ....ops.common import channel_last
from .. import register
from ..checks import same_dim
from ..literals import c_ints, f32, value_literal


# --- maxout, affine_channel, lrn --------------------------------------------------------------
def _emit_maxout_dims(e):
    """maxout(_grad)'s X Buf and (dims before the axis, its channels, dims after, groups)."""
    x = e.input("X")
    e.require_float(x)
    g = int(e.attr("groups"))
    if not x.ndim or g < 1:
        e.fail(f"groups {g}")
    ax = int(e.attr("axis")) % x.ndim
    c = x.dims[ax]
    if e.is_lit(c) and int(c) % g:
        e.fail(f"{c} channels in groups of {g}")
    e.check(f"{c} % {g} != 0", f"{e.op.type}: channels do not divide into groups")
    return x, e.prod(x.dims[:ax]), c, e.prod(x.dims[ax + 1:]), g


def _emit_channel_dims(e):
    """affine_channel(_grad)'s X Buf and (dims before its channel dim, channels, after)."""
    x = e.input("X")
    e.require_float(x)
    if x.ndim < 2:
        e.fail("X has no channel dim")
    ax = 1 if e.attr("data_layout") == "NCHW" or x.ndim == 2 else x.ndim - 1
    return x, e.prod(x.dims[:ax]), x.dims[ax], e.prod(x.dims[ax + 1:])


def _emit_lrn_dims(e):
    """lrn(_grad)'s X Buf (4-D NCHW), window n, the channels before c in it, and H * W."""
    x = e.input("X")
    e.require_float(x)
    n = int(e.attr("n"))
    if x.ndim != 4 or n < 1:
        e.fail("X is not NCHW, or n < 1")
    if channel_last(e.attr("data_format")):
        e.fail(f"data_format {e.attr('data_format')}: the compiled lrn is NCHW")
    return x, n, n // 2, e.prod(x.dims[2:])


MAP_LIMIT = 1 << 16     # entries of an index map compiled in as a table


def static_map(cls, e, x):
    """The index map of mover `cls` for X as a C table: (declaration of `m`, Out's dims,
    units, X's stride per unit). X's dims past the first must be known and the op's extra
    inputs absent (the map then follows from the attributes). With dim 0 known the map
    covers all of X (one unit); else it is computed for 1 and for 2 rows of dim 0, and used
    per row only when the second row's map is the first's shifted by one row of X (the op
    never mixes rows), which the two maps prove."""
    index_map = getattr(cls, "index_map", None)
    extra = [s.name for s in cls.inputs[1:] if e.op.input(s.name)]
    if index_map is None or extra or not x.ndim:
        e.fail(f"the map depends on {extra or 'other inputs'}")
    if not all(e.is_lit(d) for d in x.dims[1:]):
        e.fail("X's dims past the first are not known")
    rest = tuple(int(d) for d in x.dims[1:])

    def made(n, why=""):
        try:
            return np.asarray(index_map((n,) + rest, e.attrs), np.int64)
        except (ShapeError, ExecutionError, ValueError) as exc:
            e.fail(f"{why}{exc}")
    if e.is_lit(x.dims[0]):
        whole = made(int(x.dims[0]))
        table, dims, units, stride = whole.reshape(-1), list(whole.shape), "1", x.numel()
    else:
        why = "dim 0 is known only at run time and the map of 1 or 2 rows fails: "
        one, two = made(1, why), made(2, why)
        stride = int(np.prod(rest))
        if one.shape[:1] != (1,) or two.shape[:1] != (2,) or \
                not np.array_equal(two[0], one[0]) or \
                not np.array_equal(two[1], np.where(one[0] >= 0, one[0] + stride, -1)):
            e.fail("dim 0 is known only at run time and the map mixes its rows")
        table, dims, units = one.reshape(-1), [x.dims[0]] + list(one.shape[1:]), x.dims[0]
    if not 0 < table.size <= MAP_LIMIT or table.max(initial=0) >= 1 << 31:
        e.fail(f"an index map of {table.size} entries")
    return (f"static const int32_t m[] = {{{', '.join(map(str, table.tolist()))}}};", dims,
            units, stride)


_MOVERS = ("crop", "crop_tensor", "pad", "pad2d", "pixel_shuffle", "shuffle_channel",
           "space_to_depth", "temporal_shift")


@register("crop_grad", "cpu")
@register("crop_tensor_grad", "cpu")
@register("pad_grad", "cpu")
@register("pad2d_grad", "cpu")
@register("pixel_shuffle_grad", "cpu")
@register("shuffle_channel_grad", "cpu")
@register("space_to_depth_grad", "cpu")
@register("temporal_shift_grad", "cpu")
def mover_grad(e):
    """Out@GRAD added back through the forward's table, in its order (np.add.at)."""
    fwd = registry.get(e.op.type[:-len("_grad")])
    x, d = e.input("X"), e.input("Out@GRAD")
    e.require_float(d)
    table, out_dims, units, stride = static_map(fwd, e, x)
    same_dim(e, d.numel(), e.prod(out_dims), "Out@GRAD has Out's size")
    dx = e.output("X@GRAD", x.dims, d.ctype)
    e.code(f"{table} std::memset({dx}, 0, {dx.nbytes()}); const int64_t p = "
           f"(int64_t)(sizeof(m) / sizeof(m[0])); for (int64_t u = 0; u < {units}; "
           f"++u) for (int64_t i = 0; i < p; ++i) {{ const int32_t s = m[i]; if (s >= 0) "
           f"{dx}[u * {stride} + s] += {d}[u * p + i]; }}")


@register("crop", "cpu")
@register("crop_tensor", "cpu")
@register("pad", "cpu")
@register("pad2d", "cpu")
@register("pixel_shuffle", "cpu")
@register("shuffle_channel", "cpu")
@register("space_to_depth", "cpu")
@register("temporal_shift", "cpu")
def mover(e):
    """A gather through the op's own index map, computed now and compiled in as a table
    (static_map says when that is sound)."""
    x = e.input("X")
    table, out_dims, units, stride = static_map(e.opdef, e, x)
    out = e.output("Out", out_dims, x.ctype)
    fill = value_literal(e, e.opdef.fill(e.attrs), x.ctype)
    e.code(f"{table} for (int64_t u = 0; u < {units}; ++u) for (int64_t i = 0; i < "
           f"(int64_t)(sizeof(m) / sizeof(m[0])); ++i) {{ const int32_t s = m[i]; "
           f"{out}[u * (int64_t)(sizeof(m) / sizeof(m[0])) + i] = s >= 0 ? "
           f"{x}[u * {stride} + s] : {fill}; }}")





@register("maxout", "cpu")
def maxout(e):
    """Out[p, i, q] = the max (NaN-propagating, numpy's) of X[p, i * groups + j, q]."""
    x, pre, c, post, g = _emit_maxout_dims(e)
    out_dims = list(x.dims)
    out_dims[int(e.attr("axis")) % x.ndim] = c // g
    out = e.output("Out", out_dims)
    e.code(f"for (int64_t p = 0; p < {pre}; ++p) for (int64_t i = 0; i < {c} / {g}; ++i) "
           f"for (int64_t q = 0; q < {post}; ++q) {{ const float* xs = {x} + (p * {c} + i * "
           f"{g}) * {post} + q; float v = xs[0]; for (int64_t j = 1; j < {g}; ++j) v = "
           f"fl::fmaxnp(v, xs[j * {post}]); {out}[(p * ({c} / {g}) + i) * {post} + q] = v; }}")


@register("maxout_grad", "cpu")
def maxout_grad(e):
    """Each group's dOut to its first element equal to Out, zeros elsewhere."""
    x, pre, c, post, g = _emit_maxout_dims(e)
    out, d = e.input("Out"), e.input("Out@GRAD")
    e.require_float(out, d)
    e.same_dims(out, d)
    dx = e.output("X@GRAD", x.dims)
    e.code(f"for (int64_t p = 0; p < {pre}; ++p) for (int64_t i = 0; i < {c} / {g}; ++i) "
           f"for (int64_t q = 0; q < {post}; ++q) {{ const int64_t o = (p * ({c} / {g}) + i) "
           f"* {post} + q, base = (p * {c} + i * {g}) * {post} + q; bool hit = false; "
           f"for (int64_t j = 0; j < {g}; ++j) {{ const bool first = !hit && {x}[base + j * "
           f"{post}] == {out}[o]; hit = hit || first; {dx}[base + j * {post}] = first ? "
           f"{d}[o] : 0.0f; }} }}")


@register("affine_channel", "cpu")
def affine_channel(e):
    x, pre, c, post = _emit_channel_dims(e)
    s, b = e.input("Scale"), e.input("Bias")
    e.require_float(s, b)
    for t in (s, b):
        same_dim(e, t.numel(), c, f"{t.var} has one value per channel")
    out = e.output("Out", x.dims)
    e.code(f"for (int64_t p = 0; p < {pre}; ++p) for (int64_t j = 0; j < {c}; ++j) "
           f"for (int64_t q = 0; q < {post}; ++q) {{ const int64_t i = (p * {c} + j) * "
           f"{post} + q; {out}[i] = {x}[i] * {s}[j] + {b}[j]; }}")


@register("affine_channel_grad", "cpu")
def affine_channel_grad(e):
    """dX = dOut * Scale; the per-channel sums in double, rounded once (numpy's pairwise
    float sums differ from that by rounding only)."""
    x, pre, c, post = _emit_channel_dims(e)
    s, d = e.input("Scale"), e.input("Out@GRAD")
    e.require_float(s, d)
    e.same_dims(x, d)
    same_dim(e, s.numel(), c, "Scale has one value per channel")
    outs = {slot: e.output(slot, dims) for slot, dims in (
        ("X@GRAD", x.dims), ("Scale@GRAD", s.dims), ("Bias@GRAD", s.dims))
        if e.has_output(slot)}
    dx, ds, db = (outs.get(k) for k in ("X@GRAD", "Scale@GRAD", "Bias@GRAD"))
    e.code(f"for (int64_t j = 0; j < {c}; ++j) {{ double ss = 0.0, sb = 0.0; "
           f"for (int64_t p = 0; p < {pre}; ++p) for (int64_t q = 0; q < {post}; ++q) {{ "
           f"const int64_t i = (p * {c} + j) * {post} + q; const float g = {d}[i]; "
           + (f"{dx}[i] = g * {s}[j]; " if dx is not None else "")
           + f"ss += (double)(g * {x}[i]); sb += (double)g; }} "
           + (f"{ds}[j] = (float)ss; " if ds is not None else "")
           + (f"{db}[j] = (float)sb; " if db is not None else "") + "}")


@register("lrn", "cpu")
def lrn(e):
    """The window sums as the kernel forms them (a running float sum over the zero-padded
    channels, then differences), MidOut = k + alpha * that, Out = X * MidOut^-beta."""
    x, n, pre, hw = _emit_lrn_dims(e)
    out = e.output("Out", x.dims)
    mid = e.output("MidOut", x.dims) if e.has_output("MidOut") else e.scratch(x.dims)
    c = x.dims[1]
    cs = e.scratch([c + n])
    e.code(f"for (int64_t b = 0; b < {x.dims[0]}; ++b) for (int64_t q = 0; q < {hw}; ++q) "
           f"{{ const int64_t base = b * {c} * {hw} + q; float run = 0.0f; {cs}[0] = 0.0f; "
           f"for (int64_t i = 0; i < {c} + {n} - 1; ++i) {{ const int64_t ch = i - {pre}; "
           f"float v = 0.0f; if (ch >= 0 && ch < {c}) {{ const float xv = {x}[base + ch * "
           f"{hw}]; v = xv * xv; }} run = run + v; {cs}[i + 1] = run; }} "
           f"for (int64_t ch = 0; ch < {c}; ++ch) {{ const int64_t i = base + ch * {hw}; "
           f"const float m = {f32(e.attr('k'))} + {f32(e.attr('alpha'))} * ({cs}[ch + {n}] - "
           f"{cs}[ch]); {mid}[i] = m; {out}[i] = {x}[i] * std::pow(m, {f32(-e.attr('beta'))}); "
           f"}} }}")


@register("lrn_grad", "cpu")
def lrn_grad(e):
    """back[c] = the sum, in the kernel's order, of dOut X MidOut^(-beta-1) over the
    channels whose window holds c; dX = dOut MidOut^-beta - 2 alpha beta X back."""
    x, n, pre, hw = _emit_lrn_dims(e)
    mid, d = e.input("MidOut"), e.input("Out@GRAD")
    e.require_float(mid, d)
    e.same_dims(x, mid)
    e.same_dims(x, d)
    beta, alpha = float(e.attr("beta")), float(e.attr("alpha"))
    dx = e.output("X@GRAD", x.dims)
    c = x.dims[1]
    t = e.scratch([c + n - 1])
    e.code(f"for (int64_t b = 0; b < {x.dims[0]}; ++b) for (int64_t q = 0; q < {hw}; ++q) "
           f"{{ const int64_t base = b * {c} * {hw} + q; for (int64_t i = 0; i < {c} + {n} "
           f"- 1; ++i) {{ const int64_t ch = i - ({n} - 1 - {pre}); {t}[i] = 0.0f; if (ch >= "
           f"0 && ch < {c}) {{ const int64_t k = base + ch * {hw}; {t}[i] = {d}[k] * {x}[k] * "
           f"std::pow({mid}[k], {f32(-beta - 1)}); }} }} for (int64_t ch = 0; ch < {c}; ++ch) "
           f"{{ const int64_t k = base + ch * {hw}; float back = 0.0f; for (int64_t i = 0; "
           f"i < {n}; ++i) back = back + {t}[ch + i]; {dx}[k] = {d}[k] * std::pow({mid}[k], "
           f"{f32(-beta)}) - {f32(2 * alpha * beta)} * {x}[k] * back; }} }}")


# --- flip, reverse ------------------------------------------------------------------------------
@register("flip", "cpu")
@register("reverse", "cpu")
def flip(e):
    """Out = X reversed along each dim in `axis` (fl::flip); each op is its own gradient."""
    x = e.input("X")
    if x.rows is not None:
        e.fail("X is SelectedRows")
    if not 1 <= x.ndim <= 8:
        e.fail(f"X{x.dims}: 1 to 8 dims")
    rev = [False] * x.ndim
    for a in e.attr("axis"):
        if not -x.ndim <= a < x.ndim or rev[a % x.ndim]:   # numpy refuses a repeated axis
            e.fail(f"axis {list(e.attr('axis'))} for X{x.dims}")
        rev[a % x.ndim] = True
    out = e.output("Out", x.dims, x.ctype)
    flags = ", ".join("true" if r else "false" for r in rev)
    e.code(f"const int64_t dims[] = {c_ints(x.dims)}; const bool rev[] = {{{flags}}}; "
           f"fl::flip({x}, {out}, {x.ndim}, dims, rev);")
