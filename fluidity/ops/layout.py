"""Ops that move elements around (Fluid 1.x): pad, pad2d, pad_constant_like, crop,
crop_tensor, space_to_depth, pixel_shuffle, shuffle_channel, temporal_shift — and maxout,
affine_channel, lrn.

The movers are one rule: each says, for every element of Out, which element of X it copies
(an index map, -1 where Out gets a fill value). The forward gathers through the map; the
gradient `<type>_grad` (X, Out@GRAD -> X@GRAD) adds Out@GRAD back through it. So padding
modes (reflect, edge), crops and channel shuffles share one tested kernel and gradient.
"""
import numpy as np

from ..errors import ExecutionError, ShapeError
from .common import channel_last, ints_from
from .registry import In, OpDef, Out, ints


def _ids(shape):
    return np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)


def _nchw(x_shape, data_format):
    """(N, C, H, W) positions of a 4-D layout."""
    if data_format not in ("NCHW", "NHWC"):
        raise ShapeError(f"data_format must be NCHW or NHWC, got {data_format}")
    return (0, 1, 2, 3) if data_format == "NCHW" else (0, 3, 1, 2)


class _Mover(OpDef):
    """A subclass gives `index_map(x_shape, attrs, extra inputs) -> int64 array` (Out's
    shape; -1 where Out is the fill value) and `fill(attrs)`; `out_shape(ctx)` at build
    time."""
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    share_lod = None

    @staticmethod
    def fill(attrs):
        return 0

    @classmethod
    def prepare(cls, attrs, outputs):
        fill = cls.fill(attrs)

        def kernel(x, *extra):
            m = cls.index_map(x.shape, attrs, *extra)
            out = x.reshape(-1)[np.maximum(m, 0)]
            if (m < 0).any():
                out = np.where(m >= 0, out, np.asarray(fill, x.dtype))
            return out.astype(x.dtype, copy=False)
        return kernel

    @classmethod
    def grad(cls, g):
        ins = {s.name: g.input(s.name) for s in cls.inputs if g.input(s.name)}
        ins["Out@GRAD"] = g.output_grad("Out")
        g.op(cls.type + "_grad", ins, {"X@GRAD": g.input_grad("X")}, g.attrs())


def _mover_grad(fwd):
    """The gradient op of mover `fwd`: Out@GRAD summed back into X's positions."""
    class Grad(OpDef):
        type = fwd.type + "_grad"
        inputs = fwd.inputs + (In("Out@GRAD"),)
        outputs = (Out("X@GRAD"),)
        attrs = fwd.attrs
        infer_shape = None
        share_lod = None

        @classmethod
        def prepare(cls, attrs, outputs):
            def kernel(x, *rest):
                *extra, dout = rest
                m = fwd.index_map(x.shape, attrs, *extra).reshape(-1)
                dx = np.zeros(x.size, dout.dtype)
                keep = m >= 0
                np.add.at(dx, m[keep], dout.reshape(-1)[keep])
                return dx.reshape(x.shape)
            return kernel
    Grad.__name__ = Grad.__qualname__ = fwd.__name__ + "Grad"
    return Grad


# --- padding -----------------------------------------------------------------------------------
_PAD_MODES = ("constant", "edge", "reflect")   # numpy.pad's names too


def _pad_map(shape, pads, mode):
    """Index map of np.pad of X's ids with `pads` [(before, after)] per dim."""
    if any(b < 0 or a < 0 for b, a in pads):
        raise ShapeError(f"paddings must be >= 0, got {pads}")
    if mode not in _PAD_MODES:
        raise ShapeError(f"mode must be one of {list(_PAD_MODES)}, got '{mode}'")
    if mode == "constant":
        return np.pad(_ids(shape), pads, mode="constant", constant_values=-1)
    if mode == "reflect" and any(max(b, a) >= d for (b, a), d in zip(pads, shape) if b or a):
        raise ShapeError(f"reflect padding {pads} must be smaller than the dims {list(shape)}")
    return np.pad(_ids(shape), pads, mode=mode)


class Pad(_Mover):
    type = "pad"
    share_lod = "X"
    lod_outputs = ("Out",)
    attrs = {"paddings": ints(), "pad_value": 0.0}
    doc = "Out = X padded with pad_value; paddings = [before_0, after_0, before_1, ...]."

    @staticmethod
    def infer_shape(ctx):
        xs, p = ctx.input_shape("X"), ctx.attr("paddings")
        if len(p) != 2 * len(xs):
            ctx.fail(f"paddings needs 2 values per dim of X{xs}, got {p}")
        ctx.set_output("Out", [d + p[2 * i] + p[2 * i + 1] if d >= 0 else -1
                               for i, d in enumerate(xs)], ctx.input_dtype("X"))

    @staticmethod
    def fill(attrs):
        return attrs["pad_value"]

    @staticmethod
    def index_map(shape, attrs):
        p = attrs["paddings"]
        return _pad_map(shape, [(p[2 * i], p[2 * i + 1]) for i in range(len(shape))],
                        "constant")


def _pad2d_pads(shape, paddings, data_format):
    n, c, h, w = _nchw(shape, data_format)
    pads = [(0, 0)] * 4
    pads[h] = (paddings[0], paddings[1])
    pads[w] = (paddings[2], paddings[3])
    return pads


class Pad2d(_Mover):
    type = "pad2d"
    share_lod = "X"
    lod_outputs = ("Out",)
    inputs = (In("X"), In("Paddings", dispensable=True, no_grad=True))
    attrs = {"paddings": ints([0, 0, 0, 0]), "mode": "constant", "pad_value": 0.0,
             "data_format": "NCHW"}
    doc = ("Out = X's H and W padded by paddings [top, bottom, left, right] (or the "
           "Paddings tensor): mode constant (pad_value), reflect or edge.")

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        if len(xs) != 4:
            ctx.fail(f"X must be 4-D, got {xs}")
        out = list(xs)
        if ctx.has_input("Paddings"):
            n, c, h, w = _nchw(xs, ctx.attr("data_format"))
            out[h] = out[w] = -1
        else:
            pads = _pad2d_pads(xs, ctx.attr("paddings"), ctx.attr("data_format"))
            out = [d + b + a if d >= 0 else -1 for d, (b, a) in zip(xs, pads)]
        ctx.set_output("Out", out, ctx.input_dtype("X"))

    @staticmethod
    def fill(attrs):
        return attrs["pad_value"]

    @staticmethod
    def index_map(shape, attrs, paddings_t=None):
        p = ints_from(paddings_t) if paddings_t is not None else list(attrs["paddings"])
        return _pad_map(shape, _pad2d_pads(shape, p, attrs["data_format"]), attrs["mode"])


class PadConstantLike(_Mover):
    type = "pad_constant_like"
    share_lod = "X"
    lod_outputs = ("Out",)
    inputs = (In("X", no_grad=True), In("Y"))
    attrs = {"pad_value": 0.0}
    doc = "Out = Y padded at the end of each dim with pad_value to X's shape."

    @staticmethod
    def infer_shape(ctx):
        xs, ys = ctx.input_shape("X"), ctx.input_shape("Y")
        if len(xs) != len(ys):
            ctx.fail(f"X{xs} and Y{ys} must have the same rank")
        ctx.set_output("Out", xs, ctx.input_dtype("Y"))

    @staticmethod
    def fill(attrs):
        return attrs["pad_value"]

    @classmethod
    def prepare(cls, attrs, outputs):
        v = attrs["pad_value"]

        def kernel(x, y):
            m = cls._map(x.shape, y.shape)
            return np.where(m >= 0, y.reshape(-1)[np.maximum(m, 0)], v).astype(y.dtype)
        return kernel


    @staticmethod
    def _map(x_shape, y_shape):
        if any(a < b for a, b in zip(x_shape, y_shape)):
            raise ShapeError(f"pad_constant_like: Y{list(y_shape)} must fit in "
                             f"X{list(x_shape)}")
        return _pad_map(y_shape, [(0, a - b) for a, b in zip(x_shape, y_shape)], "constant")

    grad = staticmethod(lambda g: g.op(
        "pad_constant_like_grad", {"Y": g.input("Y"), "Out@GRAD": g.output_grad("Out")},
        {"Y@GRAD": g.input_grad("Y")}, g.attrs()))


class PadConstantLikeGrad(OpDef):
    type = "pad_constant_like_grad"
    inputs = (In("Y"), In("Out@GRAD"))
    outputs = (Out("Y@GRAD"),)
    attrs = PadConstantLike.attrs
    infer_shape = None
    share_lod = None

    @staticmethod
    def kernel(y, dout):
        return dout[tuple(slice(0, d) for d in y.shape)].copy()


# --- crops ------------------------------------------------------------------------------------
def _crop_map(shape, out_shape, offsets, op):
    if len(out_shape) != len(shape) or len(offsets) != len(shape):
        raise ShapeError(f"{op}: shape {out_shape} and offsets {offsets} need one value per "
                         f"dim of X{list(shape)}")
    out_shape = [d if s == -1 else s for s, d in zip(out_shape, shape)]
    for o, s, d in zip(offsets, out_shape, shape):
        if o < 0 or s < 0 or o + s > d:
            raise ExecutionError(f"{op}: the crop of {out_shape} at {offsets} leaves "
                                 f"X{list(shape)}")
    return _ids(shape)[tuple(slice(o, o + s) for o, s in zip(offsets, out_shape))]


class Crop(_Mover):
    type = "crop"
    inputs = (In("X"), In("Y", dispensable=True, no_grad=True),
              In("Offsets", dispensable=True, no_grad=True))
    attrs = {"shape": ints(), "offsets": ints()}
    doc = "Out = the block of X at `offsets` (or Offsets) of `shape` (or Y's shape)."

    @staticmethod
    def infer_shape(ctx):
        shape = ctx.input_shape("Y") if ctx.has_input("Y") else ctx.attr("shape")
        if len(shape) != len(ctx.input_shape("X")):
            ctx.fail(f"the crop shape {shape} must have X's rank")
        ctx.set_output("Out", shape, ctx.input_dtype("X"))

    @staticmethod
    def index_map(shape, attrs, y=None, offsets=None):
        out = list(y.shape) if y is not None else list(attrs["shape"])
        offs = ints_from(offsets) if offsets is not None else list(attrs["offsets"]) or \
            [0] * len(shape)
        return _crop_map(shape, out, offs, "crop")


class CropTensor(_Mover):
    type = "crop_tensor"
    share_lod = "X"
    lod_outputs = ("Out",)
    inputs = (In("X"), In("Shape", dispensable=True, no_grad=True),
              In("Offsets", dispensable=True, no_grad=True),
              In("ShapeTensor", duplicable=True, dispensable=True, no_grad=True),
              In("OffsetsTensor", duplicable=True, dispensable=True, no_grad=True))
    attrs = {"shape": ints(), "offsets": ints()}
    doc = ("Out = the block of X at offsets of shape (-1 in shape: to the end of that dim); "
           "each may come from a 1-D tensor or a list of [1] tensors.")

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        shape = list(ctx.attr("shape"))
        if ctx.has_input("Shape"):
            shape = [-1] * len(xs)
        if shape and len(shape) != len(xs):
            ctx.fail(f"shape {shape} must have X's rank {len(xs)}")
        ctx.set_output("Out", shape or [-1] * len(xs), ctx.input_dtype("X"))

    @staticmethod
    def index_map(shape, attrs, shape_t=None, offsets_t=None, shape_list=None,
                  offsets_list=None):
        out = ints_from(shape_t, shape_list) or list(attrs["shape"])
        offs = ints_from(offsets_t, offsets_list) or list(attrs["offsets"]) or [0] * len(shape)
        out = [d - o if s == -1 else s for s, d, o in zip(out, shape, offs)]
        return _crop_map(shape, out, offs, "crop_tensor")


# --- channel movers ---------------------------------------------------------------------------
class SpaceToDepth(_Mover):
    type = "space_to_depth"
    share_lod = "X"
    lod_outputs = ("Out",)
    attrs = {"blocksize": 1}
    doc = ("Fluid's (Darknet's reorg) order: with oc = C / b^2 (b = blocksize), X[n, c, h, w] "
           "goes to [n, c % oc, h * b + (c // oc) // b, w * b + (c // oc) % b] of an "
           "[N, oc, H * b, W * b] buffer, which is Out [N, C * b^2, H / b, W / b] read flat.")

    @staticmethod
    def infer_shape(ctx):
        xs, b = ctx.input_shape("X"), ctx.attr("blocksize")
        if len(xs) != 4 or b < 1 or any(d >= 0 and d % b for d in xs[2:]) or (
                xs[1] >= 0 and xs[1] % (b * b)):
            ctx.fail(f"X must be NCHW with C divisible by blocksize^2 and H, W divisible by "
                     f"blocksize {b}, got {xs}")
        ctx.set_output("Out", [xs[0], xs[1] * b * b if xs[1] >= 0 else -1] +
                       [d // b if d >= 0 else -1 for d in xs[2:]], ctx.input_dtype("X"))

    @staticmethod
    def index_map(shape, attrs):
        n, c, h, w = shape
        b = attrs["blocksize"]
        if c % (b * b) or h % b or w % b:
            raise ShapeError(f"space_to_depth: X {list(shape)} needs C divisible by "
                             f"blocksize^2 and H, W by blocksize ({b})")
        ids = _ids(shape).reshape(n, b, b, c // (b * b), h, w)   # c = (bh * b + bw) * oc + c2
        buf = ids.transpose(0, 3, 4, 1, 5, 2)                     # [n, c2, h, bh, w, bw]
        return buf.reshape(n, c * b * b, h // b, w // b)


class PixelShuffle(_Mover):
    type = "pixel_shuffle"
    attrs = {"upscale_factor": 1, "data_format": "NCHW"}
    doc = "Out[n, c, h * r + i, w * r + j] = X[n, c * r * r + i * r + j, h, w]."

    @staticmethod
    def infer_shape(ctx):
        xs, r = ctx.input_shape("X"), ctx.attr("upscale_factor")
        if len(xs) != 4 or r < 1 or (xs[1] >= 0 and xs[1] % (r * r)):
            ctx.fail(f"X must be NCHW with C divisible by upscale_factor^2 = {r * r}")
        ctx.set_output("Out", [xs[0], xs[1] // (r * r) if xs[1] >= 0 else -1] +
                       [d * r if d >= 0 else -1 for d in xs[2:]], ctx.input_dtype("X"))

    @staticmethod
    def index_map(shape, attrs):
        n, c, h, w = shape
        r = attrs["upscale_factor"]
        ids = _ids(shape).reshape(n, c // (r * r), r, r, h, w)
        return ids.transpose(0, 1, 4, 2, 5, 3).reshape(n, c // (r * r), h * r, w * r)


class ShuffleChannel(_Mover):
    type = "shuffle_channel"
    attrs = {"group": 1}
    lod_outputs = ("Out",)     # none, as Fluid's (share_lod None)
    doc = "Out's channels are X's viewed as [group, C / group], transposed (ShuffleNet)."

    @staticmethod
    def infer_shape(ctx):
        xs, gr = ctx.input_shape("X"), ctx.attr("group")
        if len(xs) != 4 or gr < 1 or (xs[1] >= 0 and xs[1] % gr):
            ctx.fail(f"X must be NCHW with C divisible by group {gr}, got {xs}")
        ctx.share("X", "Out")

    @staticmethod
    def index_map(shape, attrs):
        n, c, h, w = shape
        gr = attrs["group"]
        return _ids(shape).reshape(n, gr, c // gr, h, w).transpose(0, 2, 1, 3, 4).reshape(shape)


class TemporalShift(_Mover):
    type = "temporal_shift"
    share_lod = "X"
    lod_outputs = ("Out",)
    attrs = {"seg_num": 1, "shift_ratio": 0.25}
    doc = ("X [N*T, C, H, W] (T = seg_num): the first C*shift_ratio channels take the "
           "previous frame's values, the next as many the next frame's, 0 past the ends.")

    @staticmethod
    def infer_shape(ctx):
        if len(ctx.input_shape("X")) != 4:
            ctx.fail("X must be 4-D [N * seg_num, C, H, W]")
        ctx.share("X", "Out")

    @staticmethod
    def index_map(shape, attrs):
        nt, c, h, w = shape
        t = attrs["seg_num"]
        if nt % t:
            raise ExecutionError(f"temporal_shift: dim 0 ({nt}) is not a multiple of "
                                 f"seg_num {t}")
        ids = _ids(shape).reshape(nt // t, t, c, h, w)
        c1 = int(c * attrs["shift_ratio"])
        c2 = int(c * 2 * attrs["shift_ratio"])
        out = ids.copy()
        out[:, :, :c1] = -1
        out[:, 1:, :c1] = ids[:, :-1, :c1]
        out[:, :, c1:c2] = -1
        out[:, :-1, c1:c2] = ids[:, 1:, c1:c2]
        return out.reshape(shape)


for _cls in (Pad, Pad2d, Crop, CropTensor, SpaceToDepth, PixelShuffle, ShuffleChannel,
             TemporalShift):
    globals()[_cls.__name__ + "Grad"] = _mover_grad(_cls)


class Maxout(OpDef):
    type = "maxout"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    attrs = {"groups": 1, "axis": 1}
    share_lod = None
    doc = ("Out[.., i, ..] = max of X's channels i * groups ... (i + 1) * groups - 1 along "
           "`axis` (1 for NCHW, 3 for NHWC; any rank, as Paddle 1.8 infers it).")

    @staticmethod
    def infer_shape(ctx):
        xs, gr, ax = ctx.input_shape("X"), ctx.attr("groups"), ctx.attr("axis")
        if not -len(xs) <= ax < len(xs):
            ctx.fail(f"axis {ax} is out of range for X{xs}")
        ax %= len(xs)
        if gr < 1 or (xs[ax] >= 0 and xs[ax] % gr):
            ctx.fail(f"X's dim {ax} ({xs[ax]}) must be divisible by groups {gr}")
        out = list(xs)
        out[ax] = xs[ax] // gr if xs[ax] >= 0 else -1
        ctx.set_output("Out", out, ctx.input_dtype("X"))

    @staticmethod
    def _grouped(x, groups, axis):
        ax = axis % x.ndim
        shape = x.shape[:ax] + (x.shape[ax] // groups, groups) + x.shape[ax + 1:]
        return x.reshape(shape), ax + 1

    @staticmethod
    def kernel(x, *, groups, axis):
        xg, gax = Maxout._grouped(x, groups, axis)
        return xg.max(axis=gax)


    grad = staticmethod(lambda g: g.default())


class MaxoutGrad(OpDef):
    type = "maxout_grad"
    inputs = (In("X"), In("Out"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = Maxout.attrs
    infer_shape = None
    share_lod = None

    @staticmethod
    def kernel(x, out, dout, *, groups, axis):
        xg, gax = Maxout._grouped(x, groups, axis)
        first = np.cumsum(xg == np.expand_dims(out, gax), axis=gax) == 1
        hit = (xg == np.expand_dims(out, gax)) & first
        return (hit * np.expand_dims(dout, gax)).reshape(x.shape).astype(x.dtype)


def _channel_view(x, layout):
    """Shape that broadcasts a [C] vector against X along its channel dim."""
    shape = [1] * x.ndim
    shape[1 if layout == "NCHW" or x.ndim == 2 else x.ndim - 1] = -1
    return shape


class AffineChannel(OpDef):
    type = "affine_channel"
    inputs = (In("X"), In("Scale"), In("Bias"))
    outputs = (Out("Out"),)
    attrs = {"data_layout": "NCHW"}
    doc = "Out = X * Scale[c] + Bias[c] per channel c."

    @staticmethod
    def infer_shape(ctx):
        ctx.share("X", "Out")

    @staticmethod
    def kernel(x, scale, bias, *, data_layout):
        v = _channel_view(x, data_layout)
        return (x * scale.reshape(v) + bias.reshape(v)).astype(x.dtype)


    grad = staticmethod(lambda g: g.op(
        "affine_channel_grad", {"X": g.input("X"), "Scale": g.input("Scale"),
                                "Out@GRAD": g.output_grad("Out")},
        {"X@GRAD": g.input_grad("X"), "Scale@GRAD": g.input_grad("Scale"),
         "Bias@GRAD": g.input_grad("Bias")}, g.attrs()))


class AffineChannelGrad(OpDef):
    type = "affine_channel_grad"
    inputs = (In("X"), In("Scale"), In("Out@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True), Out("Scale@GRAD", dispensable=True),
               Out("Bias@GRAD", dispensable=True))
    attrs = AffineChannel.attrs
    infer_shape = None
    share_lod = None

    @staticmethod
    def kernel(x, scale, dout, *, data_layout):
        v = _channel_view(x, data_layout)
        axes = tuple(i for i, d in enumerate(v) if d == 1)
        return ((dout * scale.reshape(v)).astype(x.dtype),
                (dout * x).sum(axis=axes).astype(scale.dtype),
                dout.sum(axis=axes).astype(scale.dtype))


def _window_sum(a, n):
    """Sum over channels c - n//2 ... c + (n-1)//2 (zero outside) of NCHW `a`."""
    pre = n // 2
    pad = np.pad(a, [(0, 0), (pre, n - 1 - pre), (0, 0), (0, 0)])
    cs = np.concatenate([np.zeros_like(pad[:, :1]), np.cumsum(pad, axis=1)], axis=1)
    return cs[:, n:] - cs[:, :-n]


class Lrn(OpDef):
    type = "lrn"
    inputs = (In("X"),)
    outputs = (Out("Out"), Out("MidOut", intermediate=True))
    attrs = {"n": 5, "k": 2.0, "alpha": 0.0001, "beta": 0.75, "data_format": "AnyLayout",
             "is_test": False}
    doc = ("Local response normalization across channels: MidOut = k + alpha * sum of X^2 "
           "over the n channels around c; Out = X * MidOut^-beta (NCHW; NHWC by "
           "data_format, MidOut in X's layout).")

    @staticmethod
    def infer_shape(ctx):
        if len(ctx.input_shape("X")) != 4:
            ctx.fail("X must be 4-D NCHW or NHWC")
        ctx.share("X", "Out")
        ctx.share("X", "MidOut")

    @staticmethod
    def kernel(x, *, n, k, alpha, beta, data_format):
        last = channel_last(data_format)
        xc = x.transpose(0, 3, 1, 2) if last else x
        mid = k + alpha * _window_sum(xc * xc, n)
        out = xc * mid ** -beta
        if last:
            out, mid = out.transpose(0, 2, 3, 1), mid.transpose(0, 2, 3, 1)
        return (np.ascontiguousarray(out, dtype=x.dtype),
                np.ascontiguousarray(mid, dtype=x.dtype))


    grad = staticmethod(lambda g: g.default())


class LrnGrad(OpDef):
    type = "lrn_grad"
    inputs = (In("X"), In("Out"), In("MidOut"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = Lrn.attrs
    infer_shape = None
    share_lod = None

    @staticmethod
    def kernel(x, out, mid, dout, *, n, alpha, beta, data_format):
        if channel_last(data_format):     # the NCHW gradient, between two transposes
            to_first = (0, 3, 1, 2)
            dx = LrnGrad.kernel(x.transpose(to_first), None, mid.transpose(to_first),
                                dout.transpose(to_first), n=n, alpha=alpha, beta=beta,
                                data_format="NCHW")
            return np.ascontiguousarray(dx.transpose(0, 2, 3, 1))
        # c is in the window of c' for c' in [c - (n - 1 - pre), c + pre]
        pre = n // 2
        t = np.pad(dout * x * mid ** (-beta - 1), [(0, 0), (n - 1 - pre, pre), (0, 0), (0, 0)])
        back = sum(t[:, i:i + x.shape[1]] for i in range(n))
        return (dout * mid ** -beta - 2 * alpha * beta * x * back).astype(x.dtype)

