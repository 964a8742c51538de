"""C++ emitters of the sequence ops: sequence_pool, _expand, _expand_as, _reverse, _pad,
_softmax, _reshape, _mask, _enumerate, _conv, _scatter, lod_reset and their gradients."""
from ...dim import Dim, dim
from .. import register
from ..checks import same_dim, sequences
from ..known_values import known_ints
from ..sequence import pool_grad_operands, pool_operands


def _emit_repeat(e, x, y, lod_from):
    """sequence_expand(_as)'s Out: row i of X (no LoD) once per row of sequence i of Y."""
    if x.lod is not None:
        e.fail("X has LoD (Out's LoD would be made here)")
    n = sequences(e, y, "Y")
    same_dim(e, x.dims[0], n, "X has a row per sequence of Y")
    out = e.output("Out", [y.dims[0]] + x.dims[1:], x.ctype, lod_from=lod_from)
    e.code(f"fl::seq_repeat_rows({x}, {y.lod}, {n}, {e.prod(x.dims[1:])}, {out});")


@register("sequence_expand_as_grad", "cpu")
@register("sequence_expand_grad", "cpu")
def _emit_repeat_grad(e):
    x, y, d = e.input("X"), e.input("Y"), e.input("Out@GRAD")
    e.require_float(x, d)
    if x.lod is not None or (e.op.type == "sequence_expand" and e.attr("ref_level") not in (-1, 0)):
        e.fail("X has LoD, or a ref_level past Y's one level")
    n = sequences(e, y, "Y")
    same_dim(e, x.dims[0], n, "X has a row per sequence of Y")
    same_dim(e, d.dims[0], y.dims[0], "Out@GRAD has Y's rows")
    dx = e.output("X@GRAD", x.dims, lod_from=False)
    e.code(f"fl::seq_repeat_rows_grad({d}, {y.lod}, {n}, {e.prod(x.dims[1:])}, {dx});")


def _emit_pad_width(e, x):
    """sequence_pad(_grad)'s number of sequences and padded width, as C expressions."""
    n = sequences(e, x, "X")
    longest = Dim.call("fl::seq_max_len", x.lod, x.lod_len)
    width = int(e.attr("padded_length"))
    if width == -1:
        return n, longest
    e.check(f"{width} < {longest}", "sequence_pad: padded_length is shorter than a sequence")
    return n, str(width)


# --- row-local ops ---------------------------------------------------------------------------
def _emit_one_per_row(e, x):
    """sequence_softmax's X: [T] or [T, 1] with LoD; its number of sequences."""
    if x.ndim > 2 or (x.ndim == 2 and x.dims[1] != "1"):
        e.fail("X is not [T] or [T, 1]")
    return sequences(e, x, "X")


def _emit_conv_inputs(e):
    """sequence_conv(_grad)'s X [T, M] (LoD), Filter [contextLength * M, N] and PaddingData
    (trainable: [up + down, M], else None) Bufs and its window (k, contextStart, up, down)."""
    x, f = e.input("X"), e.input("Filter")
    e.require_float(x, f)
    k, cs = int(e.attr("contextLength")), int(e.attr("contextStart"))
    if e.attr("contextStride") != 1 or x.ndim != 2 or f.ndim != 2:
        e.fail("contextStride other than 1, or X or Filter not a matrix")
    same_dim(e, f.dims[0], e.mul(k, x.dims[1]), "Filter has contextLength x M rows")
    up, down = max(0, -cs), max(0, cs + k - 1)
    pad = None
    if e.attr("paddingTrainable"):
        pad = e.input("PaddingData")
        if pad is None:
            e.fail("paddingTrainable without PaddingData")
        e.require_float(pad)
        same_dim(e, pad.dims[0], up + down, "PaddingData has up + down rows")
        same_dim(e, e.prod(pad.dims[1:]), x.dims[1], "PaddingData has X's width")
    return x, f, pad, k, cs, up, down


# --- sequence_scatter: sparse updates of each row of X by one sequence of (id, value) --------
def _emit_scatter_inputs(e):
    """sequence_scatter(_grad)'s X [N, ...], Ids (int64, one sequence per row of X) and
    Updates (one per id) Bufs, N and X's row width."""
    x, ids, upd = e.input("X"), e.input("Ids"), e.input("Updates")
    e.require_float(x, upd)
    if ids.ctype != "int64_t":
        e.fail(f"Ids are {ids.ctype}")
    n = sequences(e, ids, "Ids")
    same_dim(e, x.dims[0], n, "X has a row per sequence of Ids")
    same_dim(e, upd.numel(), ids.dims[0], "Updates has one value per id")
    same_dim(e, ids.numel(), ids.dims[0], "Ids has one id per row")
    return x, ids, upd, n, e.prod(x.dims[1:])


# per pooltype: C over a sequence's rows [s, t) of width w at column j, as the numpy
# kernel rounds: reduceat adds rows in order; AVERAGE and SQRT divide in double (numpy
# promotes float32 / int64 lengths to float64) and round once
POOL = {
    "SUM": "float v = x[s * w + j]; for (int64_t r = s + 1; r < t; ++r) v += x[r * w + j];",
    "AVERAGE": "float v = x[s * w + j]; for (int64_t r = s + 1; r < t; ++r) "
               "v += x[r * w + j]; v = (float)((double)v / (double)(t - s));",
    "SQRT": "float v = x[s * w + j]; for (int64_t r = s + 1; r < t; ++r) v += x[r * w + j]; "
            "v = (float)((double)v / std::sqrt((double)(t - s)));",
    "MAX": "float v = x[s * w + j]; int32_t a = (int32_t)s; for (int64_t r = s + 1; r < t; "
           "++r) if (x[r * w + j] > v || x[r * w + j] != x[r * w + j]) { v = x[r * w + j]; "
           "a = (int32_t)r; }",
    "MIN": "float v = x[s * w + j]; int32_t a = (int32_t)s; for (int64_t r = s + 1; r < t; "
           "++r) if (x[r * w + j] < v || x[r * w + j] != x[r * w + j]) { v = x[r * w + j]; "
           "a = (int32_t)r; }",
    "FIRST": "float v = x[s * w + j];",
    "LAST": "float v = x[(t - 1) * w + j];",
}

# the share of a sequence's gradient d each of its rows [s, t) gets
# (divided in double as numpy does); the other pooltypes give it to one row
SPREAD = {"SUM": "d", "AVERAGE": "(float)((double)d / (double)(t - s))",
            "SQRT": "(float)((double)d / sqrt((double)(t - s)))"}


def pooled_element(e):
    """The pooling: (X, its sequences b, the row width w, the C statements storing Out[i, j]
    and MaxIndex[i, j] from sequence i's rows [s, t))."""
    x, out, idx, ptype, b, w, pad = pool_operands(e)
    arg = ptype in ("MAX", "MIN")
    put_idx = f" {idx}[i * w + j] = a;" if arg else ""
    # an empty sequence pools to pad_value; its MaxIndex is X's row count (the kernel's)
    empty_idx = f" {idx}[i * w + j] = (int32_t)({x.dims[0]});" if arg else ""
    return x, b, w, (f"if (t <= s) {{ {out}[i * w + j] = {pad};{empty_idx} continue; }} "
                     f"{POOL[ptype]} {out}[i * w + j] = v;{put_idx}")


@register("sequence_pool", "cpu")
def sequence_pool(e):
    x, b, w, element = pooled_element(e)
    e.check(f"{x.lod}[{x.lod_len} - 1] != {x.dims[0]}", "sequence_pool: X's LoD ends "
            "elsewhere than its number of rows")
    e.code(f"const float* x = {x}; const int64_t w = {w}; for (int64_t i = 0; i < {b}; "
           f"++i) {{ const int64_t s = {x.lod}[i], t = {x.lod}[i + 1]; for (int64_t j = 0; "
           f"j < w; ++j) {{ {element} }} }}")


@register("sequence_pool_grad", "cpu")
def sequence_pool_grad(e):
    """SUM/AVERAGE/SQRT spread each sequence's gradient over its rows (divided in double
    as numpy does), FIRST/LAST/MAX/MIN give it to one row of each; empty sequences get
    none."""
    x, d, ptype, g, b, w = pool_grad_operands(e)
    spread = SPREAD
    head = (f"const float* x = {x}; const int64_t w = {w}; for (int64_t i = 0; i < {b}; "
            f"++i) {{ const int64_t s = {x.lod}[i], t = {x.lod}[i + 1]; for (int64_t j = 0; "
            f"j < w; ++j) {{ const float d = {d}[i * w + j];")
    if ptype in spread:
        e.code(f"{head} for (int64_t r = s; r < t; ++r) {g}[r * w + j] = {spread[ptype]}; }} }}")
        return
    e.code(f"std::memset({g}, 0, sizeof(float) * {g.numel()});")
    pick = {"FIRST": "s", "LAST": "t - 1"}.get(ptype)
    if pick is None:   # MAX/MIN: the first extreme row, found again as the kernel does
        e.code(f"{head} if (t <= s) continue; {POOL[ptype]} "
               f"{g}[(int64_t)a * w + j] = d; }} }}")
    else:
        e.code(f"{head} if (t <= s) continue; {g}[({pick}) * w + j] = d; }} }}")


@register("sequence_expand", "cpu")
def sequence_expand(e):
    """X without LoD (Out then has none): its row i repeated per row of Y's sequence i
    (ref_level Y's finest level, -1: the level that indexes rows)."""
    y = e.input("Y")
    if e.attr("ref_level") not in (-1, max(len(y.levels) - 1, 0)):
        e.fail("ref_level is not Y's finest level")
    _emit_repeat(e, e.input("X"), y.finest(), False)





@register("sequence_expand_as", "cpu")
def sequence_expand_as(e):
    """Row i of X per row of Y's sequence i; Out takes Y's LoD."""
    y = e.input("Y")
    _emit_repeat(e, e.input("X"), y, y)





@register("sequence_reverse", "cpu")
def sequence_reverse(e):
    x = e.input("X")
    n = sequences(e, x, "X")
    y = e.output("Y", x.dims, x.ctype, lod_from=x)
    e.code(f"fl::seq_reverse({x}, {x.lod}, {n}, {e.prod(x.dims[1:])}, {y});")


@register("sequence_reverse_grad", "cpu")
def sequence_reverse_grad(e):
    """Reversal is a permutation: the gradient is Y@GRAD reversed (adds into zeros)."""
    x, d = e.input("X"), e.input("Y@GRAD")
    e.require_float(x, d)
    e.same_dims(x, d)
    n = sequences(e, x, "X")
    dx = e.output("X@GRAD", x.dims, lod_from=x)
    e.code(f"fl::seq_reverse({d}, {x.lod}, {n}, {e.prod(x.dims[1:])}, {dx});")


@register("sequence_pad", "cpu")
def sequence_pad(e):
    """Out [N, width, ...]: width is padded_length, else the longest sequence (from the
    LoD before the segment runs); a padded_length shorter than a sequence runs the op
    interpreted (its kernel says so)."""
    x, pv = e.input("X"), e.input("PadValue")
    n, width = _emit_pad_width(e, x)
    if pv.ctype != x.ctype:
        e.fail("PadValue and X differ in dtype")
    w = e.prod(x.dims[1:])
    row = pv.numel() != "1"
    if row:
        same_dim(e, pv.numel(), w, "PadValue is one value or one row of X")
    out = e.output("Out", [n, width] + x.dims[1:], x.ctype, lod_from=False)
    length = e.output("Length", [n], "int64_t", lod_from=False)
    e.code(f"fl::seq_pad({x}, {x.lod}, {n}, {width}, {w}, {pv}, {e.literal(row)}, {out}, "
           f"{length});")


@register("sequence_pad_grad", "cpu")
def sequence_pad_grad(e):
    x, d = e.input("X"), e.input("Out@GRAD")
    e.require_float(x, d)
    n, width = _emit_pad_width(e, x)
    same_dim(e, d.numel(), e.prod([n, width] + x.dims[1:]),
                      "Out@GRAD is the padded Out")
    dx = e.output("X@GRAD", x.dims, lod_from=x)
    e.code(f"fl::seq_pad_grad({d}, {x.lod}, {n}, {width}, {e.prod(x.dims[1:])}, {dx});")


@register("sequence_softmax", "cpu")
def sequence_softmax(e):
    x = e.input("X")
    e.require_float(x)
    n = _emit_one_per_row(e, x)
    out = e.output("Out", x.dims, lod_from=x)
    e.code(f"fl::seq_softmax({x}, {x.lod}, {n}, {out});")


@register("sequence_softmax_grad", "cpu")
def sequence_softmax_grad(e):
    out, d, x = e.input("Out"), e.input("Out@GRAD"), e.input("X")
    e.require_float(out, d, x)
    n = _emit_one_per_row(e, x)
    for b in (out, d):
        same_dim(e, b.numel(), x.dims[0], f"{b.var} has one value per row of X")
    dx = e.output("X@GRAD", x.dims, lod_from=x)
    e.code(f"fl::seq_softmax_grad({out}, {d}, {x.lod}, {n}, {dx});")


@register("sequence_reshape", "cpu")
def sequence_reshape(e):
    """Only where new_dim is X's width (the LoD stays X's; any other new_dim makes a new
    LoD here): a copy."""
    x = e.input("X")
    if x.ndim != 2 or x.dims[1] != str(e.attr("new_dim")):
        e.fail("new_dim other than X's width (a new LoD)")
    sequences(e, x, "X")
    out = e.output("Out", x.dims, x.ctype, lod_from=x)
    e.code(f"std::memcpy({out}, {x}, {x.nbytes()});")


@register("sequence_reshape_grad", "cpu")
def sequence_reshape_grad(e):
    """dOut's values in X's shape (and LoD)."""
    x, d = e.input("X"), e.input("Out@GRAD")
    same_dim(e, d.numel(), x.numel(), "Out@GRAD has X's size")
    dx = e.output("X@GRAD", x.dims, d.ctype, lod_from=x)
    e.code(f"std::memcpy({dx}, {d}, {dx.nbytes()});")


@register("lod_reset", "cpu")
def lod_reset(e):
    """Only Y's own LoD (Out takes it, every level; a LoD from Y's values or target_lod
    would be made here): a copy of X."""
    x, y = e.input("X"), e.input("Y")
    if y is None or not y.has_lod or e.attr("append"):
        e.fail("a new LoD (target_lod, Y's values or append)")
    out = e.output("Out", x.dims, x.ctype, lod_from=y)
    e.code(f"std::memcpy({out}, {x}, {x.nbytes()});")


@register("lod_reset_grad", "cpu")
def lod_reset_grad(e):
    x, d = e.input("X"), e.input("Out@GRAD")
    dx = e.output("X@GRAD", d.dims, d.ctype, lod_from=x)
    e.code(f"std::memcpy({dx}, {d}, {d.nbytes()});")


@register("sequence_mask", "cpu")
def sequence_mask(e):
    """Y[..., j] = j < X[...] for j < maxlen, maxlen the attribute or MaxLenTensor's first
    value where compiled code knows it (a `shape` op's dim, as the cell API's
    `sequence_mask(len, maxlen=shape(x)[1])`: known_values.py). A maxlen from X's values
    (maxlen < 0) would size Y by data no bound known on entry covers: interpreted."""
    x = e.input("X")
    maxlen = mask_maxlen(e)
    if x.ctype not in ("int64_t", "int32_t", "float", "double"):
        e.fail(f"X is {x.ctype}")
    ct = e.ctype_of(e.attr("out_dtype"))
    y = e.output("Y", x.dims + [maxlen], ct, lod_from=False)
    e.code(f"for (int64_t i = 0; i < {x.numel()}; ++i) for (int64_t j = 0; j < {maxlen}; "
           f"++j) {y}[i * {maxlen} + j] = ({ct})(j < {x}[i]);")


def mask_maxlen(e):
    """sequence_mask's maxlen as a Dim: MaxLenTensor's first value (the kernel's rule: the
    tensor over the attribute), else the attribute; NotCompilable where it comes from X's
    values (a negative one) or from a tensor whose values only the run knows."""
    maxlen = e.attr("maxlen")
    if e.op.input("MaxLenTensor"):
        vals = known_ints(e, "MaxLenTensor", None)
        if not vals:
            e.fail("MaxLenTensor is empty")
        maxlen = vals[0]
    maxlen = dim(maxlen)
    if maxlen.is_literal and int(maxlen) < 0:
        e.fail("maxlen from X's values (Y's width is data no bound known on entry covers)")
    return maxlen


@register("sequence_enumerate", "cpu")
def sequence_enumerate(e):
    x = e.input("X")
    if x.ctype not in ("int64_t", "int32_t"):
        e.fail(f"X is {x.ctype}")
    if x.ndim > 2 or (x.ndim == 2 and x.dims[1] != "1"):
        e.fail("X is not [T] or [T, 1]")
    n = sequences(e, x, "X")
    win = int(e.attr("win_size"))
    if win < 1:
        e.fail(f"win_size {win}")
    out = e.output("Out", [x.dims[0], str(win)], x.ctype, lod_from=x)
    pad = f"({x.ctype})({int(e.attr('pad_value'))}LL)"
    e.code(f"fl::seq_enumerate({x}, {x.lod}, {n}, {win}, {pad}, {out});")


@register("sequence_conv", "cpu")
def sequence_conv(e):
    """fl::seq_context builds the [T, contextLength * M] context matrix the kernel
    gathers, then one gemm by Filter."""
    x, f, pad, k, cs, up, down = _emit_conv_inputs(e)
    out = e.output("Out", [x.dims[0], f.dims[1]], lod_from=x)
    n = sequences(e, x, "X")
    col = e.scratch([x.dims[0], f.dims[0]])
    e.code(f"fl::seq_context({x}, {x.lod}, {n}, {x.dims[1]}, {k}, {cs}, "
           f"{pad or 'nullptr'}, {up}, {col});")
    e.code(f"fl::matmul({x.dims[0]}, {f.dims[1]}, {f.dims[0]}, {col}, {f}, {out});")


@register("sequence_conv_grad", "cpu")
def sequence_conv_grad(e):
    """The kernel's backward: Filter@GRAD = col^T @ dOut, then dOut @ Filter^T added
    back through the context (fl::seq_context_grad, np.add.at's order)."""
    x, f, pad, k, cs, up, down = _emit_conv_inputs(e)
    d = e.input("Out@GRAD")
    e.require_float(d)
    same_dim(e, d.dims[0], x.dims[0], "Out@GRAD has X's rows")
    same_dim(e, e.prod(d.dims[1:]), f.dims[1], "Out@GRAD has Filter's columns")
    n = sequences(e, x, "X")
    rows, km = x.dims[0], f.dims[0]
    if e.has_output("Filter@GRAD"):
        col = e.scratch([rows, km])
        df = e.output("Filter@GRAD", f.dims, lod_from=False)
        e.code(f"fl::seq_context({x}, {x.lod}, {n}, {x.dims[1]}, {k}, {cs}, "
               f"{pad or 'nullptr'}, {up}, {col});")
        e.code(f"fl::at_b({rows}, {km}, {f.dims[1]}, {col}, {d}, {df});")
    dx = e.output("X@GRAD", x.dims, lod_from=x) if e.has_output("X@GRAD") else None
    dpad = (e.output("PaddingData@GRAD", pad.dims, lod_from=False)
            if pad is not None and e.has_output("PaddingData@GRAD") else None)
    if dx is None and dpad is None:
        return
    dcol = e.scratch([rows, km])
    e.code(f"fl::gemm(false, true, {rows}, {km}, {f.dims[1]}, 1.0f, {d}, {f.dims[1]}, "
           f"{f}, {f.dims[1]}, 0.0f, {dcol}, {km});")
    e.code(f"fl::seq_context_grad({dcol}, {x.lod}, {n}, {rows}, {x.dims[1]}, {k}, {cs}, "
           f"{dx or 'nullptr'}, {dpad or 'nullptr'}, {up}, {up + down});")


@register("sequence_scatter", "cpu")
def sequence_scatter(e):
    """fl::seq_scatter: every id checked first, then the adds in the kernel's order."""
    x, ids, upd, n, w = _emit_scatter_inputs(e)
    out = e.output("Out", x.dims, lod_from=x)
    e.code(f"{{ const int64_t bad = fl::seq_scatter({x}, {ids}, {upd}, {ids.lod}, {n}, {w}, "
           f"{out}); if (bad >= 0) {{ std::snprintf(err, 512, \"sequence_scatter: id %lld "
           f"is out of range for rows of %lld\", (long long){ids}[bad], (long long)({w})); "
           f"return {2 + e.k}; }} }}")


@register("sequence_scatter_grad", "cpu")
def sequence_scatter_grad(e):
    x, ids, upd, n, w = _emit_scatter_inputs(e)
    d = e.input("Out@GRAD")
    e.require_float(d)
    e.same_dims(d, x)
    if e.has_output("X@GRAD"):
        dx = e.output("X@GRAD", x.dims, lod_from=x)
        e.code(f"std::memcpy({dx}, {d}, {d.nbytes()});")
    if e.has_output("Updates@GRAD"):
        du = e.output("Updates@GRAD", upd.dims, lod_from=upd)
        e.code(f"for (int64_t i = 0; i < {n}; ++i) for (int64_t j = {ids.lod}[i]; "
               f"j < {ids.lod}[i + 1]; ++j) {{ const int64_t c = {ids}[j]; if (c < 0 || "
               f"c >= {w}) {{ std::snprintf(err, 512, \"sequence_scatter_grad: id %lld is "
               f"out of range for rows of %lld\", (long long)c, (long long)({w})); "
               f"return {2 + e.k}; }} {du}[j] = {d}[i * {w} + c]; }}")
