"""Quantization-aware training and int8 inference ops of Fluid 1.x (the ops Paddle 1.8's
QuantizationTransformPass and its freeze pass write): the fake quantizers (abs_max,
channel-wise abs_max, range_abs_max, moving_average_abs_max, and the quantize-dequantize
form), moving_average_abs_max_scale, and the dequantizers (fake_dequantize_max_abs,
fake_channel_wise_dequantize_max_abs, dequantize_abs_max, dequantize_log).

Paddle 1.8's arithmetic: range = 2^(bit_length-1) - 1; Out = round((range * inv(scale)) *
clip(X, -scale, scale)) with round half away from zero (C's round), inv(s) = 1 / (s + 1e-6)
when s <= 1e-30 (an all-zero X quantizes to zeros, not NaN), everything in X's type. As in
Paddle 1.8 none of them has a gradient op (its pass rewires the backward itself).
"""
import numpy as np

from ..core import dtypes
from ..core.tensor import LoDTensor
from ..errors import ExecutionError, ShapeError
from .common import is_empty
from .registry import In, OpDef, Out, ints


def _bin_count(bits, op):
    if not 1 <= bits <= 16:
        raise ShapeError(f"{op}: bit_length must be in [1, 16], got {bits}")
    return (1 << (bits - 1)) - 1


def _inverse(s):
    s = np.asarray(s)
    t = s.dtype.type
    return np.where(s <= t(1e-30), t(1) / (s + t(1e-6)), t(1) / np.where(s == 0, t(1), s)) \
        .astype(s.dtype)


def round_half_away(v):
    """C's round: halves go away from zero (numpy's round goes to the even neighbour)."""
    r = np.round(v)
    t = np.trunc(v)
    tie = np.abs(v - t) == 0.5
    return np.where(tie, t + np.sign(v), r).astype(v.dtype, copy=False)


def abs_max(x):
    return np.abs(x).max() if x.size else x.dtype.type(0)


def quantize(x, scale, bins):
    """round((bins * inv(scale)) * clip(x, -scale, scale)); `scale` a scalar or an array that
    broadcasts against x (one per channel)."""
    t = x.dtype.type
    s = np.asarray(scale, x.dtype)
    clipped = np.clip(x, -s, s)
    return round_half_away((t(bins) * _inverse(s)) * clipped)


def _scalar_in(v, what):
    a = np.asarray(v)
    if a.size < 1:
        raise ExecutionError(f"{what} is empty")
    return a.reshape(-1)[0]


def _check_bits(ctx):
    """Paddle's attribute checker: bit_length in [1, 16], refused when the op is built."""
    bits = ctx.attr("bit_length")
    if not 1 <= bits <= 16:
        ctx.fail(f"bit_length must be in [1, 16], got {bits}")


class _Quant(OpDef):
    share_lod = "X"

    @staticmethod
    def _shapes(ctx, scale_shape):
        _check_bits(ctx)
        ctx.share("X", "Out")
        ctx.set_output("OutScale", scale_shape, ctx.input_dtype("X"), 0)


class FakeQuantizeAbsMax(_Quant):
    type = "fake_quantize_abs_max"
    inputs = (In("X"),)
    outputs = (Out("Out"), Out("OutScale"))
    attrs = {"bit_length": 8}
    doc = "OutScale = [max|X|]; Out = round(X / OutScale * (2^(bit_length-1) - 1))."

    @classmethod
    def infer_shape(cls, ctx):
        cls._shapes(ctx, [1])

    @staticmethod
    def kernel(x, *, bit_length):
        bins = _bin_count(bit_length, "fake_quantize_abs_max")
        s = x.dtype.type(abs_max(x))
        return quantize(x, s, bins), np.array([s], x.dtype)


class FakeChannelWiseQuantizeAbsMax(_Quant):
    type = "fake_channel_wise_quantize_abs_max"
    inputs = (In("X"),)
    outputs = (Out("Out"), Out("OutScale"))
    attrs = {"bit_length": 8}
    doc = ("One scale per slice of X's dim 0 (a conv filter's output channel): OutScale[c] = "
           "max|X[c]|; Out[c] = round(X[c] / OutScale[c] * (2^(bit_length-1) - 1)).")

    @classmethod
    def infer_shape(cls, ctx):
        cls._shapes(ctx, ctx.input_shape("X")[:1])

    @staticmethod
    def kernel(x, *, bit_length):
        bins = _bin_count(bit_length, "fake_channel_wise_quantize_abs_max")
        if x.ndim < 1:
            raise ShapeError("fake_channel_wise_quantize_abs_max: X needs a channel dim")
        flat = x.reshape(x.shape[0], -1)
        s = np.abs(flat).max(axis=1) if flat.shape[1] else np.zeros(x.shape[0], x.dtype)
        s = s.astype(x.dtype)
        return quantize(flat, s[:, None], bins).reshape(x.shape), s


class FakeQuantizeRangeAbsMax(OpDef):
    type = "fake_quantize_range_abs_max"
    inputs = (In("X"), In("InScale"), In("Iter", dispensable=True))
    outputs = (Out("Out"), Out("OutScale"), Out("OutScales", dispensable=True))
    attrs = {"window_size": 10000, "bit_length": 8, "is_test": False}
    kind = "ctx"
    doc = ("Training: OutScale = the largest max|X| of the last window_size steps (OutScales "
           "is that window, a persistable buffer the op updates in place at Iter % "
           "window_size); is_test: X quantized by InScale.")

    @staticmethod
    def infer_shape(ctx):
        _check_bits(ctx)
        ctx.share("X", "Out")
        ctx.set_output("OutScale", [1], ctx.input_dtype("X"), 0)
        if ctx.has_output("OutScales"):
            ctx.set_output("OutScales", [ctx.attr("window_size")], ctx.input_dtype("X"), 0)

    @staticmethod
    def make_step(p):
        a = p.attrs
        bins = _bin_count(a["bit_length"], "fake_quantize_range_abs_max")
        window, is_test = a["window_size"], a["is_test"]
        if window <= 0 and not is_test:
            raise ShapeError(f"fake_quantize_range_abs_max: window_size must be positive, "
                             f"got {window}")
        xi, si, ii = p.in_one("X"), p.in_one("InScale"), p.in_one("Iter")
        oi, osi, ossi = p.out_one("Out"), p.out_one("OutScale"), p.out_one("OutScales")

        def step(frame, env):
            xv = frame[xi].value
            x = np.asarray(xv._array)
            last = np.asarray(frame[si].value._array, x.dtype)
            if is_test:
                frame[oi].value = LoDTensor(quantize(x, _scalar_in(last, "InScale"), bins),
                                            xv._lod)
                return
            if ii is None or is_empty(frame[ii].value):
                raise ExecutionError("fake_quantize_range_abs_max: training (is_test False) "
                                     "needs the Iter input")
            it = int(_scalar_in(frame[ii].value._array, "Iter"))
            cur = x.dtype.type(abs_max(x))
            held = frame[ossi].value if ossi is not None else None
            arr = np.asarray(held._array, x.dtype).reshape(-1).copy() \
                if not is_empty(held) and np.asarray(held._array).size == window \
                else np.zeros(window, x.dtype)
            idx = it % window
            removed, arr[idx] = arr[idx], cur
            top = x.dtype.type(_scalar_in(last, "InScale"))
            if top < cur:
                top = cur
            elif abs(removed - top) < 1e-6:    # the window's largest left it: look again
                size = window if it > window else it
                top = x.dtype.type(np.abs(arr[:size]).max()) if size > 0 else \
                    x.dtype.type(abs(arr[0]))
            frame[oi].value = LoDTensor(quantize(x, top, bins), xv._lod)
            frame[osi].value = LoDTensor(np.array([top], x.dtype))
            if ossi is not None:
                frame[ossi].value = LoDTensor(arr)
        return step


def _moving_average(x, accum, state, rate):
    """Paddle's FindMovingAverageAbsMax: state = rate*state + 1, accum = rate*accum + max|X|,
    scale = accum / state (in X's type)."""
    t = x.dtype.type
    rate = t(rate)
    st = rate * t(_scalar_in(state, "InState")) + t(1)
    ac = rate * t(_scalar_in(accum, "InAccum")) + t(abs_max(x))
    one = lambda v: np.array([v], x.dtype)  # noqa: E731
    return one(ac / st), one(st), one(ac)


class _MovingAverageQuant(OpDef):
    inputs = (In("X"), In("InScale"), In("InAccum", dispensable=True),
              In("InState", dispensable=True))
    outputs = (Out("Out"), Out("OutScale"), Out("OutState", dispensable=True),
               Out("OutAccum", dispensable=True))
    attrs = {"moving_rate": 0.9, "bit_length": 8, "is_test": False}
    dequantize = False

    @staticmethod
    def infer_shape(ctx):
        if ctx.opdef.declares("bit_length"):
            _check_bits(ctx)
        ctx.share("X", "Out")
        dt = ctx.input_dtype("X")
        for slot in ("OutScale", "OutState", "OutAccum"):
            if ctx.has_output(slot):
                ctx.set_output(slot, [1], dt, 0)

    @classmethod
    def prepare(cls, attrs, outputs):
        bins = _bin_count(attrs["bit_length"], cls.type)
        rate, is_test = attrs["moving_rate"], attrs["is_test"]

        def kernel(x, in_scale, accum, state):
            if is_test:
                scale = np.asarray(in_scale, x.dtype).reshape(-1)[:1]
                return cls.finish(x, scale, bins), scale.copy(), None, None
            if accum is None or state is None:
                raise ExecutionError(f"{cls.type}: training (is_test False) needs InAccum and "
                                     f"InState")
            scale, st, ac = _moving_average(x, accum, state, rate)
            return cls.finish(x, scale, bins), scale, st, ac
        return kernel

    @classmethod
    def finish(cls, x, scale, bins):
        s = scale.reshape(-1)[0]
        q = quantize(x, s, bins)
        if cls.dequantize:
            return (s / x.dtype.type(bins)) * q
        return q


class FakeQuantizeMovingAverageAbsMax(_MovingAverageQuant):
    type = "fake_quantize_moving_average_abs_max"
    doc = ("Training: OutScale = the moving average of max|X| (OutAccum / OutState, rate "
           "moving_rate); Out = X quantized by it. is_test: by InScale.")


class FakeQuantizeDequantizeMovingAverageAbsMax(_MovingAverageQuant):
    type = "fake_quantize_dequantize_moving_average_abs_max"
    dequantize = True
    doc = ("fake_quantize_moving_average_abs_max followed by its dequantization: Out = "
           "scale / range * round(range / scale * clip(X)).")


class MovingAverageAbsMaxScale(OpDef):
    type = "moving_average_abs_max_scale"
    inputs = (In("X"), In("InAccum", dispensable=True), In("InState", dispensable=True))
    outputs = (Out("Out"), Out("OutScale", dispensable=True),
               Out("OutState", dispensable=True), Out("OutAccum", dispensable=True))
    attrs = {"moving_rate": 0.9, "is_test": False}
    doc = "Out = X; in training OutScale = the moving average of max|X| (as the quantizers)."

    @staticmethod
    def infer_shape(ctx):
        _MovingAverageQuant.infer_shape(ctx)

    @staticmethod
    def kernel(x, accum, state, *, moving_rate, is_test):
        if is_test:
            return x.copy(), None, None, None
        if accum is None or state is None:
            raise ExecutionError("moving_average_abs_max_scale: training (is_test False) needs "
                                 "InAccum and InState")
        scale, st, ac = _moving_average(x, accum, state, moving_rate)
        return x.copy(), scale, st, ac


# --- dequantizers -----------------------------------------------------------------------------
class FakeDequantizeMaxAbs(OpDef):
    type = "fake_dequantize_max_abs"
    inputs = (In("X"), In("Scale"))
    outputs = (Out("Out"),)
    attrs = {"max_range": 0.0}
    doc = "Out = Scale[0] * X / max_range."

    @staticmethod
    def infer_shape(ctx):
        ctx.share("X", "Out")

    @staticmethod
    def kernel(x, scale, *, max_range):
        t = x.dtype.type
        return (t(_scalar_in(scale, "Scale")) * x / t(max_range)).astype(x.dtype)


class FakeChannelWiseDequantizeMaxAbs(OpDef):
    type = "fake_channel_wise_dequantize_max_abs"
    inputs = (In("X"), In("Scales", duplicable=True))
    outputs = (Out("Out"),)
    attrs = {"quant_bits": ints([8])}
    doc = ("One Scales tensor: a scale per slice of X's dim 0, Out[c] = Scales[0][c] * X[c] / "
           "(2^(bits0-1) - 1). Two: Scales[0] per slice of dim 1 (channels) and Scales[1] one "
           "scale, Out[:, c] = Scales[0][c] * Scales[1][0] * X[:, c] / (range0 * range1).")

    @staticmethod
    def infer_shape(ctx):
        ctx.share("X", "Out")

    @staticmethod
    def kernel(x, scales, *, quant_bits):
        t = x.dtype.type
        n = len(scales)
        if n not in (1, 2) or len(quant_bits) < n:
            raise ShapeError(f"fake_channel_wise_dequantize_max_abs: takes 1 or 2 Scales with "
                             f"as many quant_bits, got {n} Scales and quant_bits {quant_bits}")
        ranges = [(1 << (b - 1)) - 1 for b in quant_bits[:n]]
        s0 = np.asarray(scales[0], x.dtype).reshape(-1)
        axis = 0 if n == 1 else 1
        if x.ndim <= axis or s0.size != x.shape[axis]:
            raise ShapeError(f"fake_channel_wise_dequantize_max_abs: Scales[0] holds "
                             f"{s0.size} scales for dim {axis} of X{list(x.shape)}")
        shape = [1] * x.ndim
        shape[axis] = -1
        s = s0.reshape(shape)
        if n == 2:
            s2 = np.asarray(scales[1], x.dtype).reshape(-1)
            if s2.size != 1:
                raise ShapeError("fake_channel_wise_dequantize_max_abs: Scales[1] must hold "
                                 "one scale")
            s = s * s2[0]
        return (s * x / t(np.prod(ranges))).astype(x.dtype)


class DequantizeAbsMax(OpDef):
    type = "dequantize_abs_max"
    inputs = (In("X"), In("Scale"))
    outputs = (Out("Out"),)
    attrs = {"max_range": 0.0}
    doc = "int8 X to float: Out = Scale[0] * X / max_range."

    @staticmethod
    def infer_shape(ctx):
        ctx.share("X", "Out", dtype=dtypes.VarType.FP32)

    @staticmethod
    def kernel(x, scale, *, max_range):
        s = np.float32(_scalar_in(scale, "Scale"))
        return (s * x.astype(np.float32) / np.float32(max_range)).astype(np.float32)


class DequantizeLog(OpDef):
    type = "dequantize_log"
    inputs = (In("X"), In("Dict"))
    outputs = (Out("Out"),)
    doc = ("int8 X to float by a table of 128 base-2 exponents: Out = 2^Dict[X] for X >= 0, "
           "-2^Dict[X + 128] for X < 0.")

    @staticmethod
    def infer_shape(ctx):
        ctx.share("X", "Out", dtype=dtypes.VarType.FP32)

    @staticmethod
    def kernel(x, table):
        d = np.asarray(table, np.float32).reshape(-1)
        idx = x.astype(np.int64)
        idx = np.where(idx < 0, idx + 128, idx)
        if idx.size and (idx.min() < 0 or idx.max() >= d.size):
            raise ExecutionError(f"dequantize_log: X indexes Dict (of {d.size}) out of range")
        mag = np.power(2.0, d[idx].astype(np.float64)).astype(np.float32)
        return np.where(x < 0, -mag, mag).astype(np.float32)
