"""Layers' ops other than convolution, pooling (conv.py) and normalization (norm.py): dropout,
prelu, pad3d, bilinear_interp_v2 and nearest_interp_v2 (resize). All but dropout are Paddle 2.x
vision ops: formulas and attributes as Paddle 2.6 writes and runs them.
"""
import numpy as np

from ..errors import ShapeError
from .common import channel_last, check_dims, reduce_to_shape
from .compiled import double_literal
from .registry import In, OpDef, Out, floats, ints


# --- dropout -------------------------------------------------------------------------------
class Dropout(OpDef):
    type = "dropout"
    inputs = (In("X"), In("Seed", dispensable=True, no_grad=True))
    outputs = (Out("Out"), Out("Mask", intermediate=True))
    attrs = {"dropout_prob": 0.5, "is_test": False, "fix_seed": False, "seed": 0,
             "dropout_implementation": "downgrade_in_infer"}
    doc = ("Training: Mask ~ Bernoulli(1 - dropout_prob) (uint8), Out = X * Mask, divided by "
           "(1 - dropout_prob) for upscale_in_train. Test: Out = X * (1 - dropout_prob) for "
           "downgrade_in_infer, X for upscale_in_train. fix_seed: the same mask every run.")

    @staticmethod
    def infer_shape(ctx):
        p = ctx.attr("dropout_prob")
        if not 0.0 <= p <= 1.0:
            ctx.fail(f"dropout_prob must be in [0, 1], got {p}")
        impl = ctx.attr("dropout_implementation")
        if impl not in ("downgrade_in_infer", "upscale_in_train"):
            ctx.fail(f"dropout_implementation must be 'downgrade_in_infer' or "
                     f"'upscale_in_train', got {impl!r}")
        ctx.share("X", "Out")
        if ctx.has_output("Mask"):
            ctx.set_output("Mask", ctx.input_shape("X"), "uint8")

    @classmethod
    def prepare(cls, attrs, outputs):
        p, upscale = attrs["dropout_prob"], attrs["dropout_implementation"] == "upscale_in_train"
        fixed = attrs["seed"] if attrs["fix_seed"] else None
        rng = np.random.default_rng(attrs["seed"] or None)   # advances from run to run

        if attrs["is_test"]:
            return lambda x, seed_t: (x if upscale else (x * (1.0 - p)).astype(x.dtype), None)

        def kernel(x, seed_t):
            if seed_t is not None:
                r = np.random.default_rng(int(np.asarray(seed_t).reshape(-1)[0]))
            elif fixed is not None:
                r = np.random.default_rng(fixed)
            else:
                r = rng
            mask = (r.random(x.shape) >= p).astype(np.uint8)
            out = x * mask
            if upscale:
                out = out / (1.0 - p) if p < 1.0 else np.zeros_like(x)
            return out.astype(x.dtype, copy=False), mask
        return kernel

    grad = staticmethod(lambda g: g.op(
        "dropout_grad", {"Mask": g.output("Mask"), "Out@GRAD": g.output_grad("Out")},
        {"X@GRAD": g.input_grad("X")}, g.attrs()))

    @staticmethod
    def emit(e):
        """Test mode only (training draws its mask from numpy's generator)."""
        if not e.attr("is_test"):
            e.fail("training dropout draws a random mask")
        x = e.input("X")
        e.require_float(x)
        out = e.output("Out", x.dims)
        if e.attr("dropout_implementation") == "upscale_in_train":
            e.code(f"std::memcpy({out}, {x}, sizeof(float) * {x.numel()});")
        else:
            k = e.literal(1.0 - float(e.attr("dropout_prob")))
            e.code(f"for (int64_t i = 0; i < {x.numel()}; ++i) {out}[i] = {x}[i] * {k};")


class DropoutGrad(OpDef):
    type = "dropout_grad"
    inputs = (In("Mask"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = Dropout.attrs
    share_lod = "Out@GRAD"
    infer_shape = None
    inplace = {"X@GRAD": "Out@GRAD"}

    @classmethod
    def prepare(cls, attrs, outputs):
        p, upscale = attrs["dropout_prob"], attrs["dropout_implementation"] == "upscale_in_train"
        if attrs["is_test"]:
            k = 1.0 if upscale else 1.0 - p
            return lambda mask, d: (d * k).astype(d.dtype, copy=False)
        k = (1.0 / (1.0 - p) if p < 1.0 else 0.0) if upscale else 1.0
        return lambda mask, d: (d * mask * k).astype(d.dtype, copy=False)

    @staticmethod
    def emit(e):
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


# --- prelu ---------------------------------------------------------------------------------
def _prelu_alpha(alpha, x, mode, fmt):
    if mode == "all":
        return alpha.reshape(())
    if mode == "channel":
        shape = [1] * x.ndim
        shape[-1 if channel_last(fmt) and x.ndim > 2 else 1] = -1
        return alpha.reshape(shape)
    return alpha.reshape((1,) + x.shape[1:])      # element


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


class PRelu(OpDef):
    type = "prelu"
    inputs = (In("X"), In("Alpha"))
    outputs = (Out("Out"),)
    attrs = {"mode": "all", "data_format": "NCHW"}
    doc = ("Out = X if X > 0 else alpha * X; Alpha one value (mode 'all'), one per channel "
           "('channel') or one per element of a sample ('element').")

    @classmethod
    def prepare(cls, attrs, outputs):
        mode, fmt = attrs["mode"], attrs["data_format"]

        def kernel(x, alpha):
            a = _prelu_alpha(alpha, x, mode, fmt)
            return np.where(x > 0, x, a * x).astype(x.dtype, copy=False)
        return kernel

    @staticmethod
    def emit(e):
        x, alpha = e.input("X"), e.input("Alpha")
        e.require_float(x, alpha)
        at = _prelu_alpha_index(e, x, alpha)
        out = e.output("Out", x.dims)
        e.code(f"for (int64_t i = 0; i < {x.numel()}; ++i) {{ const float v = {x}[i]; "
               f"{out}[i] = v > 0 ? v : {alpha}[{at}] * v; }}")

    grad = staticmethod(lambda g: g.op(
        "prelu_grad", {"X": g.input("X"), "Alpha": g.input("Alpha"),
                       "Out@GRAD": g.output_grad("Out")},
        {"X@GRAD": g.input_grad("X"), "Alpha@GRAD": g.input_grad("Alpha")}, g.attrs()))


class PReluGrad(OpDef):
    type = "prelu_grad"
    inputs = (In("X"), In("Alpha"), In("Out@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True), Out("Alpha@GRAD", dispensable=True))
    attrs = PRelu.attrs
    infer_shape = None

    @classmethod
    def prepare(cls, attrs, outputs):
        mode, fmt = attrs["mode"], attrs["data_format"]

        def kernel(x, alpha, dout):
            a = _prelu_alpha(alpha, x, mode, fmt)
            dx = np.where(x > 0, dout, a * dout).astype(x.dtype, copy=False)
            da = np.where(x > 0, 0, x * dout)
            da = reduce_to_shape(da, np.shape(a)) if np.ndim(a) else da.sum()
            return dx, np.reshape(da, alpha.shape).astype(alpha.dtype)
        return kernel

    @staticmethod
    def emit(e):
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


# --- pad3d ---------------------------------------------------------------------------------
def _pad_index(n, p0, p1, mode):
    """Source index of each of the n + p0 + p1 output positions along one axis, and whether
    it reads the input (False: the constant)."""
    o = np.arange(-p0, n + p1)
    if mode == "reflect":
        if n == 1:
            src = np.zeros_like(o)
        else:
            period = 2 * (n - 1)
            src = np.abs(o) % period
            src = np.where(src >= n, period - src, src)
        return src, np.ones(o.shape, bool)
    if mode == "replicate":
        return np.clip(o, 0, n - 1), np.ones(o.shape, bool)
    if mode == "circular":
        return o % n, np.ones(o.shape, bool)
    valid = (o >= 0) & (o < n)
    return np.clip(o, 0, n - 1), valid


class Pad3D(OpDef):
    type = "pad3d"
    inputs = (In("X"), In("Paddings", dispensable=True, no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"paddings": ints([0, 0, 0, 0, 0, 0]), "mode": "constant", "value": 0.0,
             "data_format": "NCDHW"}
    share_lod = None
    doc = ("Pad the 3 spatial dims of a 5-D X: paddings [left, right, top, bottom, front, "
           "back]; mode constant (value), reflect, replicate or circular.")

    @staticmethod
    def infer_shape(ctx):
        xs, p = ctx.input_shape("X"), list(ctx.attr("paddings"))
        if len(xs) != 5:
            ctx.fail(f"X must be 5-D, got {xs}")
        if ctx.has_input("Paddings") or len(p) != 6:
            out = list(xs[:2]) + [-1, -1, -1] if not channel_last(ctx.attr("data_format")) \
                else [xs[0], -1, -1, -1, xs[4]]
        else:
            sp = [2, 3, 4] if not channel_last(ctx.attr("data_format")) else [1, 2, 3]
            out = list(xs)
            for k, ax in enumerate(sp):      # paddings go W, H, D
                pp = p[2 * (2 - k)] + p[2 * (2 - k) + 1]
                out[ax] = xs[ax] + pp if xs[ax] >= 0 else -1
        ctx.set_output("Out", out, ctx.input_dtype("X"))

    @staticmethod
    def _maps(attrs, x_shape, pad_t):
        p = [int(v) for v in (np.asarray(pad_t).reshape(-1) if pad_t is not None
                              else attrs["paddings"])]
        if len(p) != 6:
            raise ShapeError(f"pad3d: paddings must have 6 values, got {p}")
        last = channel_last(attrs["data_format"])
        sp = [1, 2, 3] if last else [2, 3, 4]
        maps = []
        for k, ax in enumerate(sp):
            p0, p1 = p[2 * (2 - k)], p[2 * (2 - k) + 1]
            if attrs["mode"] == "reflect" and (p0 >= x_shape[ax] or p1 >= x_shape[ax]):
                raise ShapeError(f"pad3d: reflect padding {p0, p1} must be less than the "
                                 f"input size {x_shape[ax]}")
            maps.append(_pad_index(x_shape[ax], p0, p1, attrs["mode"]))
        return sp, maps

    @classmethod
    def prepare(cls, attrs, outputs):
        value = attrs["value"]

        def kernel(x, pad_t):
            sp, maps = Pad3D._maps(attrs, x.shape, pad_t)
            out = x
            for ax, (src, valid) in zip(sp, maps):
                out = np.take(out, src, axis=ax)
                if not valid.all():
                    shape = [1] * x.ndim
                    shape[ax] = -1
                    out = np.where(valid.reshape(shape), out, value)
            return np.ascontiguousarray(out, dtype=x.dtype)
        return kernel

    @staticmethod
    def emit(e):
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

    grad = staticmethod(lambda g: g.op(
        "pad3d_grad", {"X": g.input("X"), "Paddings": g.input("Paddings"),
                       "Out@GRAD": g.output_grad("Out")}, {"X@GRAD": g.input_grad("X")}, g.attrs()))


class Pad3DGrad(OpDef):
    type = "pad3d_grad"
    inputs = (In("X"), In("Paddings", dispensable=True), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = Pad3D.attrs
    infer_shape = None

    @classmethod
    def prepare(cls, attrs, outputs):
        def kernel(x, pad_t, dout):
            sp, maps = Pad3D._maps(attrs, x.shape, pad_t)
            d = dout
            for ax, (src, valid) in zip(sp, maps):    # adjoint of each gather, in turn
                d = np.moveaxis(d, ax, 0)
                acc = np.zeros((x.shape[ax],) + d.shape[1:], dtype=d.dtype)
                np.add.at(acc, src[valid], d[valid])
                d = np.moveaxis(acc, 0, ax)
            return np.ascontiguousarray(d, dtype=x.dtype)
        return kernel

    @staticmethod
    def emit(e):
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
            _, maps = Pad3D._maps(e.attrs, shape, None)
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


# --- bilinear_interp_v2, nearest_interp_v2 -------------------------------------------------
# resize: out = A_h @ X @ A_w^T per (sample, channel), A the [out, in] interpolation matrix
def _interp_out_hw(attrs, h, w, out_size, size_list, scale_t):
    """Paddle's interpolate_v2 output size: SizeTensor, else OutSize, else a scale (Scale
    tensor or `scale` attribute), else out_h/out_w. Returns (out_h, out_w, scale_h, scale_w)."""
    sh = sw = -1.0
    if size_list:
        return int(np.asarray(size_list[0]).reshape(-1)[0]), \
            int(np.asarray(size_list[1]).reshape(-1)[0]), sh, sw
    oh, ow = attrs["out_h"], attrs["out_w"]
    if scale_t is not None:
        s = np.asarray(scale_t, np.float32).reshape(-1)
        sh, sw = float(s[0]), float(s[-1])
    elif len(attrs["scale"]) > 1:
        sh, sw = float(attrs["scale"][0]), float(attrs["scale"][1])
    elif len(attrs["scale"]) == 1:
        sh = sw = float(attrs["scale"][0])
    if sh > 0 and sw > 0:
        oh, ow = int(h * np.float32(sh)), int(w * np.float32(sw))
    if out_size is not None:
        oh, ow = (int(v) for v in np.asarray(out_size).reshape(-1)[:2])
    if oh <= 0 or ow <= 0:
        raise ShapeError(f"interpolate: output size {[oh, ow]} is not positive")
    return oh, ow, sh, sw


def _interp_ratio(n_in, n_out, scale, align_corners):
    if n_out <= 1:
        return np.float32(0)
    if align_corners:
        return np.float32(n_in - 1) / np.float32(n_out - 1)
    return np.float32(1.0 / scale) if scale > 0 else np.float32(n_in) / np.float32(n_out)


def _interp_matrix(method, n_in, n_out, scale, align_corners, align_mode):
    """[n_out, n_in] weights of Paddle's bilinear (per axis) or nearest interpolation,
    computed in float32 as its kernels do (the floor of a float32 product picks the taps)."""
    ratio = _interp_ratio(n_in, n_out, scale, align_corners)
    k = np.arange(n_out, dtype=np.float32)
    a = np.zeros((n_out, n_in), np.float64)
    rows = np.arange(n_out)
    if method == "nearest":
        src = (ratio * k + np.float32(0.5)) if align_corners else ratio * k
        a[rows, np.minimum(src.astype(np.int64), n_in - 1)] = 1
        return a
    half = align_mode == 0 and not align_corners
    pos = (ratio * (k + np.float32(0.5)) - np.float32(0.5)) if half else ratio * k
    lo = np.maximum(pos.astype(np.int64), 0)      # int() truncates toward zero, then >= 0
    hi = np.minimum(lo + 1, n_in - 1)
    frac = (np.maximum(pos, 0) if half else pos) - lo.astype(np.float32)
    np.add.at(a, (rows, lo), 1 - frac.astype(np.float64))
    np.add.at(a, (rows, hi), frac.astype(np.float64))
    return a


# the public name other op families build their resizes from (volume.py's trilinear_interp)
interp_matrix = _interp_matrix


class _InterpPlan(_Planes):
    """A compiled resize's geometry (float X, literal H and W, the output size from the
    attributes): per axis the taps of the kernel's interpolation matrix, T per output row
    (index table and float64 weight table, unused taps weight 0), and X's plane layout
    (NCHW planes, or NHWC with elements C apart, as pooling's)."""

    def __init__(self, e, fwd, x):
        if any(e.op.input(s) for s in ("OutSize", "SizeTensor", "Scale")):
            e.fail("the output size comes from a tensor")
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
            ah, aw = fwd._mats(e.attrs, self.h, self.w, None, None, None)
        except ShapeError as err:
            e.fail(str(err))
        self.oh, self.ow = ah.shape[0], aw.shape[0]
        self.taps = max(int((ah != 0).sum(1).max()), int((aw != 0).sum(1).max()), 1)
        self.tables = " ".join(self._table(name, a) for name, a in (("h", ah), ("w", aw)))
        oh, ow = str(self.oh), str(self.ow)
        self.out_dims = [n, oh, ow, self.c] if self.last else [n, self.c, oh, ow]
        self.planes = e.mul(n, self.c)

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


class _InterpV2(OpDef):
    inputs = (In("X"), In("OutSize", dispensable=True, no_grad=True),
              In("SizeTensor", duplicable=True, dispensable=True, no_grad=True),
              In("Scale", dispensable=True, no_grad=True))
    outputs = (Out("Out"),)
    share_lod = None
    method = None

    @classmethod
    def infer_shape(cls, ctx):
        xs = ctx.input_shape("X")
        if len(xs) != 4:
            ctx.fail(f"X must be 4-D (NCHW or NHWC), got {xs}")
        last = channel_last(ctx.attr("data_layout"))
        h, w = (xs[1], xs[2]) if last else (xs[2], xs[3])
        if any(ctx.has_input(s) for s in ("OutSize", "SizeTensor", "Scale")) or h < 0 or w < 0:
            oh = ow = -1
        else:
            attrs = {k: ctx.attr(k) for k in ("out_h", "out_w", "scale")}
            try:
                oh, ow, _, _ = _interp_out_hw(attrs, h, w, None, None, None)
            except ShapeError as e:
                ctx.fail(str(e))
        out = [xs[0], oh, ow, xs[3]] if last else [xs[0], xs[1], oh, ow]
        ctx.set_output("Out", out, ctx.input_dtype("X"))

    @classmethod
    def _mats(cls, attrs, h, w, out_size, size_list, scale_t):
        oh, ow, sh, sw = _interp_out_hw(attrs, h, w, out_size, size_list, scale_t)
        ac, am = attrs["align_corners"], attrs["align_mode"]
        return (_interp_matrix(cls.method, h, oh, sh, ac, am),
                _interp_matrix(cls.method, w, ow, sw, ac, am))

    @classmethod
    def prepare(cls, attrs, outputs):
        last = channel_last(attrs["data_layout"])

        def kernel(x, out_size, size_list, scale_t):
            xc = x.transpose(0, 3, 1, 2) if last else x
            ah, aw = cls._mats(attrs, xc.shape[2], xc.shape[3], out_size, size_list, scale_t)
            out = np.einsum("kh,nchw,lw->nckl", ah, xc, aw, optimize=True)
            if last:
                out = out.transpose(0, 2, 3, 1)
            return np.ascontiguousarray(out, dtype=x.dtype)
        return kernel

    @classmethod
    def emit(cls, e):
        """Each output the float64 sum of its taps (the kernel's einsum is float64 over the
        same weights), rounded to float."""
        x = e.input("X")
        plan = _InterpPlan(e, cls, x)
        out = e.output("Out", plan.out_dims)
        e.code(plan.tables)
        e.code(plan.walk(x, out, "const float* src", "float* dst",
                         "double v = 0.0; for (int64_t a = 0; a < T; ++a) for (int64_t b = 0; "
                         "b < T; ++b) v += wh[k * T + a] * (double)src[(ih[k * T + a] * W + "
                         "iw[l * T + b]) * ES] * ww[l * T + b]; dst[(k * OW + l) * ES] = "
                         "(float)v;"))


class _InterpV2Grad(OpDef):
    inputs = (In("X"), In("OutSize", dispensable=True),
              In("SizeTensor", duplicable=True, dispensable=True),
              In("Scale", dispensable=True), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    infer_shape = None
    fwd = None

    @classmethod
    def prepare(cls, attrs, outputs):
        last = channel_last(attrs["data_layout"])

        def kernel(x, out_size, size_list, scale_t, dout):
            xc = x.transpose(0, 3, 1, 2) if last else x
            d = dout.transpose(0, 3, 1, 2) if last else dout
            ah, aw = cls.fwd._mats(attrs, xc.shape[2], xc.shape[3], out_size, size_list,
                                   scale_t)
            dx = np.einsum("kh,nckl,lw->nchw", ah, d, aw, optimize=True)
            if last:
                dx = dx.transpose(0, 2, 3, 1)
            return np.ascontiguousarray(dx, dtype=x.dtype)
        return kernel

    @classmethod
    def emit(cls, e):
        """The adjoint: each Out@GRAD element spread over its taps in float64, then rounded
        to float."""
        x, d = e.input("X"), e.input("Out@GRAD")
        plan = _InterpPlan(e, cls.fwd, x)
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


_INTERP_ATTRS = {"data_layout": "NCHW", "out_d": 0, "out_h": 0, "out_w": 0, "scale": floats(),
                 "interp_method": "bilinear", "align_corners": True, "align_mode": 1}


def _interp_grad(g):
    ins = {"X": g.input("X"), "Out@GRAD": g.output_grad("Out")}
    for slot in ("OutSize", "SizeTensor", "Scale"):
        if g.input(slot):
            ins[slot] = g.input(slot)
    g.op(g.fwd.type + "_grad", ins, {"X@GRAD": g.input_grad("X")}, g.attrs())


for _t, _m in (("bilinear_interp_v2", "bilinear"), ("nearest_interp_v2", "nearest")):
    _c = "".join(p.title() for p in _t.split("_"))
    _f = type(_c, (_InterpV2,), {"type": _t, "method": _m, "__module__": __name__,
                                 "attrs": {**_INTERP_ATTRS, "interp_method": _m},
                                 "doc": f"Resize the H, W of X by {_m} interpolation "
                                        f"(paddle.nn.functional.interpolate).",
                                 "grad": staticmethod(_interp_grad)})
    type(_c + "Grad", (_InterpV2Grad,), {"type": _t + "_grad", "fwd": _f, "attrs": _f.attrs,
                                         "__module__": __name__})
