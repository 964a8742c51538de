"""C++ emitters of dropout, prelu, pad3d, bilinear_interp_v2, nearest_interp_v2, row_conv
and their gradients."""
import numpy as np

from ....core import philox
from ....errors import ShapeError
from ....ops.common import channel_last
from ....ops.nn import Pad3D
from .. import register
from ..checks import check_dims, random_seed, same_dim, sequences
from ..literals import double_literal


def _prelu_alpha_index(e, x, alpha):
    """The C expression of the Alpha element that X's flat element i uses: (i / inner) %
    count, by mode (one value; one per channel, channels at dim 1 or last; one per element
    of a sample); checks that Alpha has `count` values."""
    mode, dims = e.attr("mode"), x.dims
    last = channel_last(e.attr("data_format")) and x.ndim > 2
    inner_count = {
        "all": ("1", "1"),
        "channel": ("1", dims[-1]) if last else (e.prod(dims[2:]), dims[1] if x.ndim > 1
                                                  else "1"),
        "element": ("1", e.prod(dims[1:])),
    }
    if mode not in inner_count:
        e.fail(f"mode {mode!r}")
    inner, count = inner_count[mode]
    n = alpha.numel()
    if n != count:
        if e.is_lit(n) and e.is_lit(count):
            e.fail(f"Alpha has {n} values, mode {mode!r} wants {count}")
        e.check(f"{n} != {count}", f"prelu: Alpha does not fit mode {mode!r}")
    return "0" if count == "1" else f"(i / {inner}) % {count}"


@register("dropout", "cpu")
def dropout(e):
    """Test mode: a copy or a scaling. Training: the mask from the op's Philox stream
    (runtime/philox.h's philox_dropout, bit for bit the kernel's core.philox.keep_mask), the
    seed from Seed, else `seed` when fix_seed, else the op's [key, run] state."""
    x = e.input("X")
    e.require_float(x)
    out = e.output("Out", x.dims)
    p = float(e.attr("dropout_prob"))
    upscale = e.attr("dropout_implementation") == "upscale_in_train"
    if e.attr("is_test"):
        if upscale:
            e.code(f"std::memcpy({out}, {x}, sizeof(float) * {x.numel()});")
        else:
            k = e.literal(1.0 - p)
            e.code(f"for (int64_t i = 0; i < {x.numel()}; ++i) {out}[i] = {x}[i] * {k};")
        return
    seed = random_seed(e, "Seed", int(e.attr("seed")) if e.attr("fix_seed") else 0)
    state, stream = e.random_state()
    mask = e.output("Mask", x.dims, "uint8_t") if e.has_output("Mask") else None
    keep = double_literal(1.0 - p)
    e.code(f"{{ const fl::Philox g = fl::philox_for({seed}, {state}, {stream}u); "
           f"fl::philox_dropout(g, {x}, {out}, {mask if mask is not None else 'nullptr'}, "
           f"{x.numel()}, {philox.keep_threshold(p)}u, {e.literal(upscale)}, "
           f"(float)({keep}), {e.literal(p >= 1.0)}); }}")


@register("dropout_grad", "cpu")
def dropout_grad(e):
    """dX = dOut * Mask * k in float32 as the kernel's numpy (k, a double, rounded to
    float32 as numpy takes a Python scalar); at test time dOut * k."""
    mask, d = e.input("Mask"), e.input("Out@GRAD")
    e.require_float(d)
    p = float(e.attr("dropout_prob"))
    upscale = e.attr("dropout_implementation") == "upscale_in_train"
    out = e.output("X@GRAD", d.dims)
    if e.attr("is_test"):
        k = 1.0 if upscale else 1.0 - p
        e.code(f"const float k = (float)({double_literal(k)}); for (int64_t i = 0; "
               f"i < {d.numel()}; ++i) {out}[i] = {d}[i] * k;")
        return
    if mask is None or mask.ctype != "uint8_t":
        e.fail("training dropout_grad without its uint8 Mask")
    e.same_dims(mask, d)
    k = (1.0 / (1.0 - p) if p < 1.0 else 0.0) if upscale else 1.0
    e.code(f"const float k = (float)({double_literal(k)}); for (int64_t i = 0; "
           f"i < {d.numel()}; ++i) {out}[i] = ({d}[i] * (float){mask}[i]) * k;")


@register("prelu", "cpu")
def prelu(e):
    x, alpha = e.input("X"), e.input("Alpha")
    e.require_float(x, alpha)
    at = _prelu_alpha_index(e, x, alpha)
    out = e.output("Out", x.dims)
    e.code(f"for (int64_t i = 0; i < {x.numel()}; ++i) {{ const float v = {x}[i]; "
           f"{out}[i] = v > 0 ? v : {alpha}[{at}] * v; }}")


@register("prelu_grad", "cpu")
def prelu_grad(e):
    """dX elementwise; dAlpha sums x * d where x <= 0: pairwise over all of X for mode
    'all' (numpy's sum of one contiguous array), else in X's order per Alpha value."""
    x, alpha, d = e.input("X"), e.input("Alpha"), e.input("Out@GRAD")
    e.require_float(x, alpha, d)
    e.same_dims(x, d)
    at = _prelu_alpha_index(e, x, alpha)
    n = x.numel()
    if e.has_output("X@GRAD"):
        dx = e.output("X@GRAD", x.dims, lod_from=x)
        e.code(f"for (int64_t i = 0; i < {n}; ++i) {dx}[i] = {x}[i] > 0 ? {d}[i] : "
               f"{alpha}[{at}] * {d}[i];")
    if e.has_output("Alpha@GRAD"):
        da = e.output("Alpha@GRAD", alpha.dims, lod_from=False)
        term = f"{x}[i] > 0 ? 0.0f : {x}[i] * {d}[i]"
        if at == "0":
            t = e.scratch(x.dims)
            e.code(f"for (int64_t i = 0; i < {n}; ++i) {t}[i] = {term}; "
                   f"{da}[0] = fl::pairwise_sum({t}, {n}, 1);")
        else:
            e.code(f"for (int64_t i = 0; i < {alpha.numel()}; ++i) {da}[i] = 0.0f; "
                   f"for (int64_t i = 0; i < {n}; ++i) {da}[{at}] += {term};")


@register("pad3d", "cpu")
def pad3d(e):
    """Out from per-axis source tables (-1: the constant): each output position reads
    X at its (d, h, w) sources, as the kernel's three gathers compose."""
    x = e.input("X")
    plan = _Pad3DPlan(e, x)
    out = e.output("Out", plan.out_dims)
    value = e.literal(float(e.attr("value")))
    e.code(plan.tables)
    e.code(plan.walk(x, out, "const float* src", "float* dst",
                       f"dst[o * ES] = (sd[d] < 0 || sh[h] < 0 || sw[w] < 0) ? {value} : "
                       "src[((sd[d] * H + sh[h]) * W + sw[w]) * ES];"))


@register("pad3d_grad", "cpu")
def pad3d_grad(e):
    """The adjoint: each Out@GRAD element that read X added to its source (float, in
    Out's order; the kernel adds axis by axis, so sums of repeated sources may round
    differently)."""
    x, d = e.input("X"), e.input("Out@GRAD")
    plan = _Pad3DPlan(e, x)
    e.require_float(d)
    check_dims(e, d, plan.out_dims, "Out")
    dx = e.output("X@GRAD", x.dims)
    e.code(plan.tables)
    e.code(f"std::memset({dx}, 0, sizeof(float) * {dx.numel()});")
    e.code(plan.walk(dx, d, "float* src", "const float* dst",
                       "if (sd[d] >= 0 && sh[h] >= 0 && sw[w] >= 0) "
                       "src[((sd[d] * H + sh[h]) * W + sw[w]) * ES] += dst[o * ES];"))


@register("bilinear_interp_v2", "cpu")
@register("nearest_interp_v2", "cpu")
def interp_v2(e):
    x = e.input("X")
    emit_resize(e, x, InterpPlan(e, e.opdef, x))


@register("bilinear_interp_v2_grad", "cpu")
@register("nearest_interp_v2_grad", "cpu")
def interp_v2_grad(e):
    x = e.input("X")
    emit_resize_grad(e, x, InterpPlan(e, e.opdef.fwd, x))


def emit_resize(e, x, plan):
    """A resize's Out (every resize op's compiled form, `plan` its geometry): each output
    the float64 sum of its taps (the kernels' einsum is float64 over the same weights),
    rounded to float."""
    out = e.output("Out", plan.out_dims)
    e.code(plan.tables)
    e.code(plan.walk(x, out, "const float* src", "float* dst",
                     "double v = 0.0; for (int64_t a = 0; a < T; ++a) for (int64_t b = 0; "
                     "b < T; ++b) v += wh[k * T + a] * (double)src[(ih[k * T + a] * W + "
                     "iw[l * T + b]) * ES] * ww[l * T + b]; dst[(k * OW + l) * ES] = "
                     "(float)v;"))


def emit_resize_grad(e, x, plan):
    """A resize's X@GRAD, the adjoint: each Out@GRAD element spread over its taps in
    float64, then rounded to float."""
    d = e.input("Out@GRAD")
    e.require_float(d)
    check_dims(e, d, plan.out_dims, "Out")
    dx = e.output("X@GRAD", x.dims)
    acc = e.scratch(x.dims, "double")
    e.code(plan.tables)
    e.code(f"std::memset({acc}, 0, sizeof(double) * {acc.numel()});")
    e.code(plan.walk(acc, d, "double* g", "const float* dd",
                     "const double v = (double)dd[(k * OW + l) * ES]; for (int64_t a = 0; "
                     "a < T; ++a) for (int64_t b = 0; b < T; ++b) g[(ih[k * T + a] * W + "
                     "iw[l * T + b]) * ES] += wh[k * T + a] * v * ww[l * T + b];"))
    e.code(f"for (int64_t i = 0; i < {dx.numel()}; ++i) {dx}[i] = (float){acc}[i];")


# ---- row_conv (ops/sequence_context.py)


def _emit_row_conv_inputs(e):
    """row_conv(_grad)'s X (LoD [T, D], or padded [B, T, D]) and Filter [K, D] Bufs, C macros
    SEQ_S(b) / SEQ_E(b) for sequence b's rows, the number of sequences and D."""
    x, f = e.input("X"), e.input("Filter")
    e.require_float(x, f)
    if f.ndim != 2:
        e.fail("Filter is not [K, D]")
    d = f.dims[1]
    if x.lod is not None and x.ndim == 2:
        n = sequences(e, x, "X")
        seqs = (f"auto SEQ_S = [&](int64_t b) {{ return {x.lod}[b]; }}; "
                f"auto SEQ_E = [&](int64_t b) {{ return {x.lod}[b + 1]; }};")
    elif x.lod is None and x.ndim == 3:
        n, t = x.dims[0], x.dims[1]
        seqs = (f"auto SEQ_S = [&](int64_t b) {{ return b * {t}; }}; "
                f"auto SEQ_E = [&](int64_t b) {{ return (b + 1) * {t}; }};")
    else:
        e.fail("X is neither LoD [T, D] nor padded [B, T, D]")
    same_dim(e, x.dims[-1], d, "Filter has X's width")
    return x, f, seqs, n, d


@register("row_conv", "cpu")
def row_conv(e):
    """Per sequence, Out[t] adds X[t + i] * Filter[i] for i in order (the kernel's)."""
    x, f, seqs, n, d = _emit_row_conv_inputs(e)
    out = e.output("Out", x.dims, lod_from=x)
    e.code(f"std::memset({out}, 0, {out.nbytes()}); {seqs} for (int64_t b = 0; b < {n}; ++b) "
           f"{{ const int64_t s = SEQ_S(b), t = SEQ_E(b); for (int64_t i = 0; i < {f.dims[0]} "
           f"&& i < t - s; ++i) for (int64_t r = s; r < t - i; ++r) for (int64_t k = 0; k < "
           f"{d}; ++k) {out}[r * {d} + k] += {x}[(r + i) * {d} + k] * {f}[i * {d} + k]; }}")


@register("row_conv_grad", "cpu")
def row_conv_grad(e):
    """The kernel's loops: dX adds dOut * Filter[i]; dFilter[i] adds each sequence's
    column sums (row by row, as numpy's axis-0 sum) of dOut * X."""
    x, f, seqs, n, d = _emit_row_conv_inputs(e)
    g = e.input("Out@GRAD")
    e.require_float(g)
    same_dim(e, g.numel(), x.numel(), "Out@GRAD has X's size")
    dx = e.output("X@GRAD", x.dims, lod_from=x) if e.has_output("X@GRAD") else None
    dw = e.output("Filter@GRAD", f.dims, lod_from=False) if e.has_output("Filter@GRAD") \
        else None
    col = e.scratch([d])
    body = ""
    if dx is not None:
        body += (f"for (int64_t r = s + i; r < t; ++r) for (int64_t k = 0; k < {d}; ++k) "
                 f"{dx}[r * {d} + k] += {g}[(r - i) * {d} + k] * {f}[i * {d} + k]; ")
    if dw is not None:
        body += (f"for (int64_t k = 0; k < {d}; ++k) {col}[k] = {g}[s * {d} + k] * "
                 f"{x}[(s + i) * {d} + k]; for (int64_t r = s + 1; r < t - i; ++r) for "
                 f"(int64_t k = 0; k < {d}; ++k) {col}[k] += {g}[r * {d} + k] * {x}[(r + i) "
                 f"* {d} + k]; for (int64_t k = 0; k < {d}; ++k) {dw}[i * {d} + k] += "
                 f"{col}[k]; ")
    if not body:
        return
    zero = "".join(f"std::memset({b}, 0, {b.nbytes()}); " for b in (dx, dw) if b is not None)
    e.code(f"{zero}{seqs} for (int64_t b = 0; b < {n}; ++b) {{ const int64_t s = SEQ_S(b), "
           f"t = SEQ_E(b); for (int64_t i = 0; i < {f.dims[0]} && i < t - s; ++i) "
           f"{{ {body}}} }}")



class _Planes:
    """What the pad3d and resize plans share: C++ pointing at plane p (a sample's channel)
    of a buffer whose planes hold `size` elements; channel-last (`last`) planes interleave,
    their elements ES = C apart."""

    def _plane_at(self, buf, size):
        return (f"{buf} + (p / ES) * {size} * ES + p % ES" if self.last
                else f"{buf} + p * {size}")


class _Pad3DPlan(_Planes):
    """A compiled pad3d's geometry (float X, literal spatial dims, attribute paddings):
    `tables`, C++ declaring the per-axis source tables sd, sh, sw (the kernel's _pad_index,
    -1 where the constant goes), and `out_dims`."""

    def __init__(self, e, x):
        if e.op.input("Paddings"):
            e.fail("paddings from a tensor")
        e.require_float(x)
        if x.ndim != 5:
            e.fail(f"X is {x.ndim}-D")
        self.last = channel_last(e.attr("data_format"))
        n, self.c = (x.dims[0], x.dims[4]) if self.last else x.dims[:2]
        sp = x.dims[1:4] if self.last else x.dims[2:]
        if not all(e.is_lit(v) for v in sp):
            e.fail("spatial dims not known when compiling")
        shape = [1] * 5
        for ax, v in zip([1, 2, 3] if self.last else [2, 3, 4], sp):
            shape[ax] = int(v)
        try:
            _, maps = Pad3D.maps(e.attrs, shape, None)
        except ShapeError as err:
            e.fail(str(err))
        tables = []
        for name, (src, valid) in zip(("sd", "sh", "sw"), maps):
            vals = ", ".join(str(int(i)) if ok else "-1" for i, ok in zip(src, valid))
            tables.append(f"static const int64_t {name}[] = {{{vals}}};")
        self.tables = " ".join(tables)
        self.in_sp = [int(v) for v in sp]
        self.out_sp = [len(src) for src, _ in maps]
        out_sp = [str(v) for v in self.out_sp]
        self.out_dims = [n] + out_sp + [self.c] if self.last else [n, self.c] + out_sp
        self.planes = e.mul(n, self.c)

    def walk(self, x, out, x_decl, out_decl, body):
        """C++ running `body` over every Out position (d, h, w; o its flat index in the
        plane) of every (sample, channel) plane, `x_decl` / `out_decl` pointing into the
        plane of X / Out (channel-last planes: elements ES = C apart)."""
        (dd, hh, ww), (od, oh, ow) = self.in_sp, self.out_sp
        at = self._plane_at
        return (f"const int64_t H = {hh}, W = {ww}, ES = {self.c if self.last else 1}; "
                f"for (int64_t p = 0; p < {self.planes}; ++p) {{ {x_decl} = "
                f"{at(x, dd * hh * ww)}; {out_decl} = {at(out, od * oh * ow)}; "
                f"for (int64_t d = 0; d < {od}; ++d) for (int64_t h = 0; h < {oh}; ++h) "
                f"for (int64_t w = 0; w < {ow}; ++w) {{ const int64_t o = (d * {oh} + h) * "
                f"{ow} + w; {body} }} }}")


class InterpPlan(_Planes):
    """A compiled resize's geometry (float X, literal H and W, the output size from the
    attributes): per axis the taps of the kernel's interpolation matrix, T per output row
    (index table and float64 weight table, unused taps weight 0), and X's plane layout
    (NCHW planes, or NHWC with elements C apart, as pooling's)."""

    def __init__(self, e, fwd, x):
        e.require_float(x)
        if x.ndim != 4:
            e.fail(f"X is {x.ndim}-D")
        self.last = channel_last(e.attr("data_layout"))
        n, self.c, h, w = (x.dims[0], x.dims[3], x.dims[1], x.dims[2]) if self.last \
            else x.dims
        if not (e.is_lit(h) and e.is_lit(w)):
            e.fail("image size not known when compiling")
        self.h, self.w = int(h), int(w)
        try:
            ah, aw = self.matrices(e, fwd)
        except ShapeError as err:
            e.fail(str(err))
        self.oh, self.ow = ah.shape[0], aw.shape[0]
        self.taps = max(int((ah != 0).sum(1).max()), int((aw != 0).sum(1).max()), 1)
        self.tables = " ".join(self._table(name, a) for name, a in (("h", ah), ("w", aw)))
        oh, ow = str(self.oh), str(self.ow)
        self.out_dims = [n, oh, ow, self.c] if self.last else [n, self.c, oh, ow]
        self.planes = e.mul(n, self.c)

    def matrices(self, e, fwd):
        """The [out, in] interpolation matrices of H and W, as the kernel builds them;
        an output size from a tensor refuses (the v2 rule reads its values at run time).
        A subclass (interp.py, Fluid 1.x's resize) gives its own rule."""
        if any(e.op.input(s) for s in ("OutSize", "SizeTensor", "Scale")):
            e.fail("the output size comes from a tensor")
        return fwd._mats(e.attrs, self.h, self.w, None, None, None)

    def _table(self, axis, a):
        idx, wt = [], []
        for row in a:
            cols = np.nonzero(row)[0].tolist()
            cols += [0] * (self.taps - len(cols))
            idx += cols
            wt += [repr(float(row[c])) if k < np.count_nonzero(row) else "0.0"
                   for k, c in enumerate(cols)]
        return (f"static const int64_t i{axis}[] = {{{', '.join(map(str, idx))}}}; "
                f"static const double w{axis}[] = {{{', '.join(wt)}}};")

    def walk(self, x, out, x_decl, out_decl, body):
        """C++ running `body` for every output position (k, l) of every plane, with the
        tap loops' bounds T; `x_decl` / `out_decl` point into the planes of X / Out."""
        at = self._plane_at
        return (f"const int64_t W = {self.w}, OW = {self.ow}, T = {self.taps}, ES = "
                f"{self.c if self.last else 1}; for (int64_t p = 0; p < {self.planes}; ++p) "
                f"{{ {x_decl} = {at(x, self.h * self.w)}; {out_decl} = "
                f"{at(out, self.oh * self.ow)}; for (int64_t k = 0; k < {self.oh}; ++k) "
                f"for (int64_t l = 0; l < OW; ++l) {{ {body} }} }}")



@register("random_crop", "cpu")
def random_crop(e):
    """Each instance's crop at offsets from the op's Philox stream (runtime/philox.h's
    philox_random_crop, bit for bit the kernel's); a crop larger than X runs interpreted,
    where the kernel names it."""
    x = e.input("X")
    shape = [int(d) for d in e.attr("shape")]
    k = len(shape)
    if not 0 < k <= min(x.ndim, 16) or any(d < 1 for d in shape):
        e.fail(f"shape {shape} for X of rank {x.ndim}")
    lead, tail = x.dims[:x.ndim - k], x.dims[x.ndim - k:]
    for c, d in zip(shape, tail):
        if e.is_lit(d) and int(d) < c:
            e.fail(f"crop {shape} exceeds X's dims {list(tail)}")
        e.check(f"{d} < {c}", "random_crop: the crop exceeds X's dims")
    seed = random_seed(e, "Seed", int(e.attr("startup_seed")))
    state, stream = e.random_state()
    out = e.output("Out", list(lead) + [str(c) for c in shape], x.ctype, lod_from=False)
    seed_out = e.output("SeedOut", ["1"], "int64_t", lod_from=False) \
        if e.has_output("SeedOut") else None
    m = e.prod(lead) if lead else "1"
    nxt = (f"{seed_out}[0] = " if seed_out is not None else "(void)")
    e.code(f"{{ const fl::Philox g = fl::philox_for({seed}, {state}, {stream}u); "
           f"const int64_t tail[] = {{{', '.join(str(d) for d in tail)}}}; "
           f"const int64_t crop[] = {{{', '.join(f'{c}LL' for c in shape)}}}; "
           f"{nxt}fl::philox_random_crop(g, {x}, {out}, {m}, {k}, tail, crop); }}")
