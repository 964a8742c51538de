"""Layers' ops other than convolution, pooling (conv.py) and normalization (norm.py): dropout,
prelu, pad3d, bilinear_interp_v2 and nearest_interp_v2 (resize). All but dropout are Paddle 2.x
vision ops: formulas and attributes as Paddle 2.6 writes and runs them.
"""
import numpy as np

from ..core import philox
from ..errors import ShapeError
from .common import channel_last, reduce_to_shape
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

    random_stream = "Out"
    random_off = "is_test"

    @classmethod
    def prepare(cls, attrs, outputs, stream):
        """The mask from the op's Philox stream (core/philox.py's keep_mask): the Seed
        input's value when given, else `seed` when fix_seed, else the op's state (seed 0:
        new masks every run); a seeded op draws the same mask every run, as Fluid's."""
        p, upscale = attrs["dropout_prob"], attrs["dropout_implementation"] == "upscale_in_train"
        fixed = attrs["seed"] if attrs["fix_seed"] else 0

        if attrs["is_test"]:
            return lambda x, seed_t: (
                x if upscale else (x * (1.0 - p)).astype(x.dtype), None)

        def kernel(x, seed_t, state):
            seed = int(np.asarray(seed_t).reshape(-1)[0]) if seed_t is not None else fixed
            key, ks, run = philox.key_and_run(seed, state, stream)
            mask = philox.keep_mask(x.shape, p, key, ks, run)
            out = x * mask
            if upscale:
                out = out / (1.0 - p) if p < 1.0 else np.zeros_like(x)
            return out.astype(x.dtype, copy=False), mask
        return kernel

    grad = staticmethod(lambda g: g.op(
        "dropout_grad", {"Mask": g.output("Mask"), "Out@GRAD": g.output_grad("Out")},
        {"X@GRAD": g.input_grad("X")}, g.attrs()))


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


# --- prelu ---------------------------------------------------------------------------------
def _prelu_alpha(alpha, x, mode, fmt):
    if mode == "all":
        return alpha.reshape(())
    if mode == "channel":
        shape = [1] * x.ndim
        shape[-1 if channel_last(fmt) and x.ndim > 2 else 1] = -1
        return alpha.reshape(shape)
    return alpha.reshape((1,) + x.shape[1:])      # element


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
    def maps(attrs, x_shape, pad_t):
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
            sp, maps = Pad3D.maps(attrs, x.shape, pad_t)
            out = x
            for ax, (src, valid) in zip(sp, maps):
                out = np.take(out, src, axis=ax)
                if not valid.all():
                    shape = [1] * x.ndim
                    shape[ax] = -1
                    out = np.where(valid.reshape(shape), out, value)
            return np.ascontiguousarray(out, dtype=x.dtype)
        return kernel


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
            sp, maps = Pad3D.maps(attrs, x.shape, pad_t)
            d = dout
            for ax, (src, valid) in zip(sp, maps):    # adjoint of each gather, in turn
                d = np.moveaxis(d, ax, 0)
                acc = np.zeros((x.shape[ax],) + d.shape[1:], dtype=d.dtype)
                np.add.at(acc, src[valid], d[valid])
                d = np.moveaxis(acc, 0, ax)
            return np.ascontiguousarray(d, dtype=x.dtype)
        return kernel


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
