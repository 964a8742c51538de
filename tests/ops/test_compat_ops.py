"""Ops and attributes added for Paddle compatibility (what Paddle 2.x's static graph emits
for common models; see tests/fixtures/paddle_zoo): forward against numpy, gradients against
finite differences."""
import numpy as np
import pytest
from op_test import check_grad, check_output, run_op

from fluidity.core import dtypes

RNG = np.random.default_rng(0)


def rand(*shape, lo=-1.0, hi=1.0, dtype="float32"):
    return RNG.uniform(lo, hi, size=shape).astype(dtype)


# --- attributes added to existing ops ----------------------------------------------------
@pytest.mark.parametrize("beta,threshold", [(1.0, 20.0), (2.0, 3.0), (0.5, 1.0)])
def test_softplus_beta_threshold(beta, threshold):
    x = np.array([[-30, -3, -0.5, 0.0], [0.5, 1.9, 2.1, 40]], "float32")
    xb = beta * x.astype(np.float64)
    want = np.where(xb > threshold, x, np.log1p(np.exp(np.minimum(xb, 50))) / beta)
    check_output("softplus", {"X": x}, {"Out": want.astype("float32")},
                 {"beta": beta, "threshold": threshold})
    xg = np.array([[-2.0, -0.3, 0.4, 1.2], [2.6, 3.3, -1.1, 0.7]])   # away from the kink
    check_grad("softplus", {"X": xg}, ["X"], {"beta": beta, "threshold": threshold})


def test_softplus_defaults_unchanged():
    x = rand(3, 4, lo=-5, hi=5)
    check_output("softplus", {"X": x}, {"Out": np.logaddexp(0, x)})


@pytest.mark.parametrize("place_type", [-1, 0, 1])
def test_fill_constant_place_type_ignored(place_type):
    out = run_op("fill_constant", {}, {"shape": [2, 3], "value": 1.5, "dtype": dtypes.VarType.FP32,
                                       "place_type": place_type})
    np.testing.assert_array_equal(out["Out"], np.full((2, 3), 1.5, "float32"))


# --- activations ---------------------------------------------------------------------------
def _sig(x):
    return 1 / (1 + np.exp(-x))


def _erf_ref(x):
    import math
    return np.vectorize(math.erf)(x)


ACTS = [  # type, attrs, numpy reference
    ("relu6", {}, lambda x: np.minimum(np.maximum(x, 0), 6)),
    ("relu6", {"threshold": 2.0}, lambda x: np.minimum(np.maximum(x, 0), 2)),
    ("brelu", {"t_min": -0.5, "t_max": 0.5}, lambda x: np.clip(x, -0.5, 0.5)),
    ("hard_sigmoid", {}, lambda x: np.clip(0.2 * x + 0.5, 0, 1)),
    ("hard_sigmoid", {"slope": 1 / 6, "offset": 0.5}, lambda x: np.clip(x / 6 + 0.5, 0, 1)),
    ("hard_swish", {}, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    ("swish", {}, lambda x: x * _sig(x)),
    ("swish", {"beta": 2.0}, lambda x: x * _sig(2 * x)),
    ("mish", {}, lambda x: x * np.tanh(np.log1p(np.exp(x)))),
    ("mish", {"threshold": 1.0}, lambda x: x * np.tanh(np.where(x > 1, x, np.log1p(np.exp(x))))),
    ("elu", {"alpha": 0.5}, lambda x: np.where(x > 0, x, 0.5 * (np.exp(x) - 1))),
    ("selu", {}, lambda x: 1.0507009873554805 * np.where(
        x > 0, x, 1.6732632423543772 * (np.exp(x) - 1))),
    ("log1p", {}, np.log1p),
    ("erf", {}, _erf_ref),
]
# points away from every kink (0, +-0.5, 1, 2, +-3, 6) so finite differences are smooth
GRAD_X = np.array([[-7.1, -3.4, -2.6, -1.3, -0.7, -0.2], [0.3, 0.8, 1.4, 2.4, 4.1, 7.3]])


@pytest.mark.parametrize("op,attrs,ref", ACTS, ids=[f"{a[0]}{a[1] or ''}" for a in ACTS])
def test_paddle_activations(op, attrs, ref):
    x = rand(3, 5, lo=-8, hi=8)
    if op == "log1p":
        x = np.abs(x)
    check_output(op, {"X": x}, {"Out": ref(x.astype(np.float64)).astype("float32")}, attrs)
    xg = np.abs(GRAD_X) if op == "log1p" else GRAD_X
    check_grad(op, {"X": xg}, ["X"], attrs)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_log_softmax(axis):
    x = rand(3, 4, lo=-5, hi=5)
    x64 = x.astype(np.float64)
    want = x64 - np.log(np.exp(x64).sum(axis=axis, keepdims=True))
    check_output("log_softmax", {"X": x}, {"Out": want.astype("float32")}, {"axis": axis})
    check_grad("log_softmax", {"X": x}, ["X"], {"axis": axis})


# --- vision ops ----------------------------------------------------------------------------
def _convt_ref(x, w, stride, pads, dil, groups, out_hw):
    """Scatter each input pixel times the filter into the output (the definition)."""
    n, c, h, wd = x.shape
    _, mg, kh, kw = w.shape
    t, _, l, _ = pads
    oh, ow = out_hw
    out = np.zeros((n, mg * groups, oh, ow))
    cg = c // groups
    for ci in range(c):
        g = ci // cg
        for i in range(h):
            for j in range(wd):
                for ki in range(kh):
                    for kj in range(kw):
                        oi, oj = i * stride[0] + ki * dil[0] - t, j * stride[1] + kj * dil[1] - l
                        if 0 <= oi < oh and 0 <= oj < ow:
                            out[:, g * mg:(g + 1) * mg, oi, oj] += \
                                x[:, ci, i, j][:, None] * w[ci, :, ki, kj][None, :]
    return out


CONVT = [  # x shape, filter shape, attrs, output hw
    ((2, 3, 4, 4), (3, 2, 3, 3), {"strides": [1, 1], "paddings": [0, 0]}, (6, 6)),
    ((1, 2, 3, 4), (2, 3, 3, 2), {"strides": [2, 1], "paddings": [1, 0]}, (5, 5)),
    ((1, 4, 3, 3), (4, 1, 2, 2), {"strides": [2, 2], "paddings": [0, 0], "groups": 2}, (6, 6)),
    ((1, 2, 3, 3), (2, 2, 3, 3), {"strides": [2, 2], "paddings": [1, 1],
                                  "output_padding": [1, 1]}, (6, 6)),
    ((1, 2, 3, 3), (2, 1, 2, 2), {"strides": [1, 1], "paddings": [0, 0],
                                  "dilations": [2, 2]}, (5, 5)),
    ((1, 2, 3, 3), (2, 2, 3, 3), {"strides": [2, 2], "paddings": [1, 1],
                                  "output_size": [6, 5]}, (6, 5)),
]


@pytest.mark.parametrize("xs,fs,attrs,out_hw", CONVT)
def test_conv2d_transpose(xs, fs, attrs, out_hw):
    x, w = rand(*xs), rand(*fs)
    p = attrs["paddings"]
    want = _convt_ref(x.astype(np.float64), w.astype(np.float64), attrs["strides"],
                      [p[0], p[0], p[1], p[1]], attrs.get("dilations", [1, 1]),
                      attrs.get("groups", 1), out_hw)
    check_output("conv2d_transpose", {"Input": x, "Filter": w},
                 {"Output": want.astype("float32")}, attrs)
    check_grad("conv2d_transpose", {"Input": x, "Filter": w}, ["Input", "Filter"], attrs)


def test_conv2d_transpose_bias_nhwc_and_bad_output_size():
    x, w, b = rand(1, 3, 3, 2), rand(2, 3, 2, 2), rand(3)
    want = _convt_ref(x.transpose(0, 3, 1, 2).astype(np.float64), w.astype(np.float64),
                      [1, 1], [0, 0, 0, 0], [1, 1], 1, (4, 4)) + b.reshape(1, 3, 1, 1)
    check_output("conv2d_transpose", {"Input": x, "Filter": w, "Bias": b},
                 {"Output": want.transpose(0, 2, 3, 1).astype("float32")},
                 {"data_format": "NHWC"})
    check_grad("conv2d_transpose", {"Input": x, "Filter": w, "Bias": b},
               ["Input", "Filter", "Bias"], {"data_format": "NHWC"})
    with pytest.raises(Exception, match="output_size"):
        run_op("conv2d_transpose", {"Input": rand(1, 2, 3, 3), "Filter": rand(2, 2, 3, 3)},
               {"strides": [2, 2], "output_size": [9, 9]})


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_group_norm(layout):
    x, s, b = rand(2, 6, 3, 2, lo=-3, hi=3), rand(6, lo=0.5, hi=1.5), rand(6)
    xc = x.astype(np.float64)
    g = xc.reshape(2, 3, 2, 3, 2)
    m = g.mean(axis=(2, 3, 4), keepdims=True)
    v = g.var(axis=(2, 3, 4), keepdims=True)
    y = ((g - m) / np.sqrt(v + 1e-5)).reshape(xc.shape) * s.reshape(1, 6, 1, 1) \
        + b.reshape(1, 6, 1, 1)
    feed_x = np.ascontiguousarray(x.transpose(0, 2, 3, 1)) if layout == "NHWC" else x
    want_y = y.transpose(0, 2, 3, 1) if layout == "NHWC" else y
    attrs = {"groups": 3, "epsilon": 1e-5, "data_layout": layout}
    check_output("group_norm", {"X": feed_x, "Scale": s, "Bias": b},
                 {"Y": want_y.astype("float32"), "Mean": m.reshape(2, 3).astype("float32"),
                  "Variance": v.reshape(2, 3).astype("float32")}, attrs)
    check_grad("group_norm", {"X": feed_x, "Scale": s, "Bias": b}, ["X", "Scale", "Bias"],
               attrs, output_slots=["Y"])


def test_instance_norm():
    x, s, b = rand(2, 3, 4, 3, lo=-3, hi=3), rand(3, lo=0.5, hi=1.5), rand(3)
    xc = x.astype(np.float64)
    m = xc.mean(axis=(2, 3), keepdims=True)
    inv = 1 / np.sqrt(xc.var(axis=(2, 3), keepdims=True) + 1e-5)
    y = (xc - m) * inv * s.reshape(1, 3, 1, 1) + b.reshape(1, 3, 1, 1)
    check_output("instance_norm", {"X": x, "Scale": s, "Bias": b},
                 {"Y": y.astype("float32"), "SavedMean": m.reshape(-1).astype("float32"),
                  "SavedVariance": inv.reshape(-1).astype("float32")})
    check_output("instance_norm", {"X": x}, {"Y": ((xc - m) * inv).astype("float32")})
    check_grad("instance_norm", {"X": x, "Scale": s, "Bias": b}, ["X", "Scale", "Bias"],
               output_slots=["Y"])


@pytest.mark.parametrize("mode,alpha_shape,fmt", [
    ("all", (1,), "NCHW"), ("channel", (3,), "NCHW"), ("channel", (3,), "NHWC"),
    ("element", (1, 3, 2, 2), "NCHW")])
def test_prelu(mode, alpha_shape, fmt):
    x = rand(2, 3, 2, 2) if fmt == "NCHW" else rand(2, 2, 2, 3)
    x[np.abs(x) < 0.05] = 0.3
    a = rand(*alpha_shape, lo=0.1, hi=0.4)
    if mode == "all":
        ab = a.reshape(())
    elif mode == "channel":
        ab = a.reshape(1, 3, 1, 1) if fmt == "NCHW" else a.reshape(1, 1, 1, 3)
    else:
        ab = a
    attrs = {"mode": mode, "data_format": fmt}
    check_output("prelu", {"X": x, "Alpha": a}, {"Out": np.where(x > 0, x, ab * x)}, attrs)
    check_grad("prelu", {"X": x, "Alpha": a}, ["X", "Alpha"], attrs)


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad3d(mode):
    x = rand(1, 2, 2, 3, 4)
    p = [2, 1, 1, 0, 1, 1]      # W left/right, H top/bottom, D front/back
    np_mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge",
               "circular": "wrap"}[mode]
    width = ((0, 0), (0, 0), (p[4], p[5]), (p[2], p[3]), (p[0], p[1]))
    kw = {"constant_values": 0.5} if mode == "constant" else {}
    want = np.pad(x, width, mode=np_mode, **kw)
    attrs = {"paddings": p, "mode": mode, "value": 0.5}
    check_output("pad3d", {"X": x}, {"Out": want}, attrs)
    check_output("pad3d", {"X": x.transpose(0, 2, 3, 4, 1)},
                 {"Out": want.transpose(0, 2, 3, 4, 1)}, dict(attrs, data_format="NDHWC"))
    check_output("pad3d", {"X": x, "Paddings": np.array(p, "int32")}, {"Out": want},
                 {"mode": mode, "value": 0.5})
    check_grad("pad3d", {"X": x}, ["X"], attrs)


def _interp_ref(x, oh, ow, method, align_corners, align_mode, scale=None):
    """Paddle's interpolate_v2 CPU kernel, loop by loop, in float32 index arithmetic."""
    n, c, h, w = x.shape

    def ratio(i, o, s):
        if o <= 1:
            return np.float32(0)
        if align_corners:
            return np.float32(i - 1) / np.float32(o - 1)
        return np.float32(1.0 / s) if s else np.float32(i) / np.float32(o)

    rh, rw = ratio(h, oh, scale), ratio(w, ow, scale)
    out = np.zeros((n, c, oh, ow))
    half = align_mode == 0 and not align_corners
    for k in range(oh):
        for l in range(ow):
            if method == "nearest":
                yi = int(rh * np.float32(k) + np.float32(0.5)) if align_corners else int(rh * np.float32(k))
                xi = int(rw * np.float32(l) + np.float32(0.5)) if align_corners else int(rw * np.float32(l))
                out[:, :, k, l] = x[:, :, min(yi, h - 1), min(xi, w - 1)]
                continue
            sy = rh * (np.float32(k) + np.float32(0.5)) - np.float32(0.5) if half else rh * np.float32(k)
            sx = rw * (np.float32(l) + np.float32(0.5)) - np.float32(0.5) if half else rw * np.float32(l)
            yn, xw = max(int(sy), 0), max(int(sx), 0)
            ys, xe = min(yn + 1, h - 1), min(xw + 1, w - 1)
            dn = (max(sy, 0) if half else sy) - yn
            dw = (max(sx, 0) if half else sx) - xw
            out[:, :, k, l] = (x[:, :, yn, xw] * (1 - dn) * (1 - dw) + x[:, :, ys, xw] * dn * (1 - dw)
                               + x[:, :, yn, xe] * (1 - dn) * dw + x[:, :, ys, xe] * dn * dw)
    return out


INTERP = [  # method, in hw, attrs, out hw, scale used for the ratio
    ("bilinear", (4, 5), {"out_h": 7, "out_w": 3, "align_corners": False, "align_mode": 0},
     (7, 3), None),
    ("bilinear", (4, 5), {"out_h": 7, "out_w": 9, "align_corners": True}, (7, 9), None),
    ("bilinear", (4, 5), {"out_h": 2, "out_w": 8, "align_corners": False, "align_mode": 1},
     (2, 8), None),
    ("bilinear", (3, 4), {"scale": [2.0, 2.0], "align_corners": False, "align_mode": 0},
     (6, 8), 2.0),
    ("nearest", (3, 4), {"scale": [2.0, 2.0], "align_corners": False}, (6, 8), 2.0),
    ("nearest", (5, 5), {"out_h": 3, "out_w": 7, "align_corners": False}, (3, 7), None),
    ("nearest", (5, 5), {"out_h": 3, "out_w": 7, "align_corners": True}, (3, 7), None),
]


@pytest.mark.parametrize("method,hw,attrs,out_hw,scale", INTERP)
def test_interp_v2(method, hw, attrs, out_hw, scale):
    op = method + "_interp_v2"
    x = rand(2, 3, *hw)
    want = _interp_ref(x.astype(np.float64), *out_hw, method, attrs["align_corners"],
                       attrs.get("align_mode", 1), scale)
    check_output(op, {"X": x}, {"Out": want.astype("float32")}, attrs)
    check_output(op, {"X": x.transpose(0, 2, 3, 1)},
                 {"Out": want.transpose(0, 2, 3, 1).astype("float32")},
                 dict(attrs, data_layout="NHWC"))
    check_grad(op, {"X": x}, ["X"], attrs)


def test_interp_v2_size_inputs():
    x = rand(1, 2, 4, 4)
    want = _interp_ref(x.astype(np.float64), 6, 3, "bilinear", True, 1)
    attrs = {"out_h": 2, "out_w": 2, "align_corners": True}     # overridden by the tensors
    check_output("bilinear_interp_v2", {"X": x, "OutSize": np.array([6, 3], "int32")},
                 {"Out": want.astype("float32")}, attrs)
    check_output("bilinear_interp_v2", {"X": x, "SizeTensor": [
        ("sz_h", np.array([6], "int32")), ("sz_w", np.array([3], "int32"))]},
        {"Out": want.astype("float32")}, attrs)


def _max_pool_index_ref(x, oh, ow, windows):
    n, c, h, w = x.shape
    out = np.zeros((n, c, oh, ow), x.dtype)
    mask = np.zeros((n, c, oh, ow), np.int32)
    for i in range(oh):
        for j in range(ow):
            (r0, r1), (c0, c1) = windows(i, j)
            for a in range(n):
                for b in range(c):
                    best, idx = -np.inf, -1
                    for r in range(r0, r1):
                        for q in range(c0, c1):
                            if x[a, b, r, q] > best:
                                best, idx = x[a, b, r, q], r * w + q
                    out[a, b, i, j], mask[a, b, i, j] = best, idx
    return out, mask


def test_max_pool2d_with_index():
    x = rand(2, 2, 5, 7)
    h, w = 5, 7
    out, mask = _max_pool_index_ref(x, 2, 3, lambda i, j: (
        ((i * h) // 2, -((-(i + 1) * h) // 2)), ((j * w) // 3, -((-(j + 1) * w) // 3))))
    attrs = {"ksize": [2, 3], "adaptive": True}
    check_output("max_pool2d_with_index", {"X": x}, {"Out": out, "Mask": mask}, attrs)
    check_grad("max_pool2d_with_index", {"X": x}, ["X"], attrs)
    attrs = {"ksize": [2, 2], "strides": [2, 2], "paddings": [1, 1]}
    out, mask = _max_pool_index_ref(x, 3, 4, lambda i, j: (
        (max(2 * i - 1, 0), min(2 * i + 1, h)), (max(2 * j - 1, 0), min(2 * j + 1, w))))
    check_output("max_pool2d_with_index", {"X": x}, {"Out": out, "Mask": mask}, attrs)
    check_grad("max_pool2d_with_index", {"X": x}, ["X"], attrs)


def test_global_and_adaptive_pooling_keeps_the_input_size():
    # Fluid 1.8: global_pooling makes ksize the input's size, adaptive then makes ksize the
    # output size: one-pixel cells, Out = X, Mask = each pixel's own index
    x = rand(2, 2, 3, 4)
    attrs = {"ksize": [2, 2], "global_pooling": True, "adaptive": True}
    mask = np.broadcast_to(np.arange(12, dtype=np.int32).reshape(3, 4), x.shape)
    check_output("max_pool2d_with_index", {"X": x}, {"Out": x, "Mask": mask}, attrs)
    check_output("pool2d", {"X": x}, {"Out": x}, dict(attrs, pooling_type="avg"))
    out = run_op("max_pool2d_with_index", {"X": x},
                 {"ksize": [2, 2], "global_pooling": True})["Out"]
    np.testing.assert_allclose(out, x.max(axis=(2, 3), keepdims=True))


def test_max_pool2d_with_index_ceil_mode():
    """ceil_mode (Paddle 3.x's version 1 of the op): a last, partial window per dim."""
    x = rand(2, 2, 5, 7)
    h, w = 5, 7
    attrs = {"ksize": [2, 2], "strides": [2, 2], "paddings": [0, 0], "ceil_mode": True}
    out, mask = _max_pool_index_ref(x, 3, 4, lambda i, j: (
        (2 * i, min(2 * i + 2, h)), (2 * j, min(2 * j + 2, w))))
    check_output("max_pool2d_with_index", {"X": x}, {"Out": out, "Mask": mask}, attrs)
    check_grad("max_pool2d_with_index", {"X": x}, ["X"], attrs)
    floor = run_op("max_pool2d_with_index", {"X": x}, {**attrs, "ceil_mode": False})
    assert floor["Out"].shape == (2, 2, 2, 3)


# --- tensor ops ----------------------------------------------------------------------------
@pytest.mark.parametrize("times", [[2, 1], [1, 3], [2, 2, 2], [3]])
def test_tile(times):
    x = rand(2, 3)
    check_output("tile", {"X": x}, {"Out": np.tile(x, times)}, {"repeat_times": times})
    check_grad("tile", {"X": x}, ["X"], {"repeat_times": times})


def test_tile_tensor_times():
    x = rand(2, 3)
    check_output("tile", {"X": x, "RepeatTimes": np.array([2, 2], "int32")},
                 {"Out": np.tile(x, [2, 2])}, {"repeat_times": [9, 9]})


@pytest.mark.parametrize("axis", [[0], [1, 2], [-1]])
def test_flip(axis):
    x = rand(2, 3, 4)
    check_output("flip", {"X": x}, {"Out": np.flip(x, axis)}, {"axis": axis})
    check_grad("flip", {"X": x}, ["X"], {"axis": axis})


@pytest.mark.parametrize("shifts,axis", [([2], [1]), ([1, -1], [0, 1]), ([5], [])])
def test_roll(shifts, axis):
    x = rand(3, 4)
    want = np.roll(x.reshape(-1), shifts[0]).reshape(x.shape) if not axis else \
        np.roll(x, shifts, axis)
    check_output("roll", {"X": x}, {"Out": want}, {"shifts": shifts, "axis": axis})
    check_grad("roll", {"X": x}, ["X"], {"shifts": shifts, "axis": axis})
    if len(shifts) == 1:
        check_output("roll", {"X": x, "ShiftsTensor": np.array(shifts, "int64")},
                     {"Out": want}, {"shifts": [0], "axis": axis})


STRIDED = [  # axes, starts, ends, strides, decrease, numpy index on a [4, 6, 5] array
    ([1], [1], [6], [2], [], (slice(None), slice(1, 6, 2))),
    ([0, 2], [-1, 0], [-5, 5], [-1, 2], [], (slice(None, None, -1), slice(None), slice(0, 5, 2))),
    ([1], [10], [-10], [-2], [], (slice(None), slice(5, None, -2))),
    ([0, 1], [1, -100], [2, 100], [1, 3], [0], (1, slice(0, 6, 3))),
    ([2], [3], [1], [1], [], (slice(None), slice(None), slice(3, 1))),
]


@pytest.mark.parametrize("axes,starts,ends,strides,decrease,index", STRIDED)
def test_strided_slice(axes, starts, ends, strides, decrease, index):
    x = rand(4, 6, 5)
    attrs = {"axes": axes, "starts": starts, "ends": ends, "strides": strides,
             "decrease_axis": decrease}
    check_output("strided_slice", {"Input": x}, {"Out": x[index]}, attrs)
    if x[index].size:
        check_grad("strided_slice", {"Input": x}, ["Input"], attrs)


def test_strided_slice_tensor_bounds():
    x = rand(4, 6)
    check_output("strided_slice", {"Input": x, "StartsTensor": np.array([0], "int32"),
                                   "EndsTensor": np.array([6], "int32"),
                                   "StridesTensor": np.array([4], "int32")},
                 {"Out": x[:, 0:6:4]}, {"axes": [1], "starts": [9], "ends": [9],
                                        "strides": [9]})


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_unstack(axis):
    x = rand(2, 3, 2)
    n = x.shape[axis]
    want = [np.take(x, i, axis=axis) for i in range(n)]
    check_output("unstack", {"X": x}, {"Y": want}, {"axis": axis, "num": n},
                 outputs={"Y": n})
    check_grad("unstack", {"X": x}, ["X"], {"axis": axis, "num": n}, outputs={"Y": n})


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_select(dim):
    x = rand(3, 4, 2)
    idx = np.array([1, 0, 1, 2], "int64") % x.shape[dim]
    check_output("index_select", {"X": x, "Index": idx}, {"Out": np.take(x, idx, axis=dim)},
                 {"dim": dim})
    check_grad("index_select", {"X": x, "Index": idx}, ["X"], {"dim": dim})
    check_output("index_select", {"X": x, "Index": idx.astype("int32")},
                 {"Out": np.take(x, idx, axis=dim)}, {"dim": dim})


@pytest.mark.parametrize("axis,descending", [(-1, False), (0, True), (1, True)])
def test_argsort(axis, descending):
    x = np.array([[3, 1, 2, 1], [0, 5, 5, -1], [2, 2, 7, 0]], "float32") + rand(3, 4) * 0
    if descending:   # stable: equal values keep their order
        idx = np.argsort(-x, axis=axis, kind="stable")
    else:
        idx = np.argsort(x, axis=axis, kind="stable")
    check_output("argsort", {"X": x}, {"Out": np.take_along_axis(x, idx, axis),
                                       "Indices": idx.astype("int64")},
                 {"axis": axis, "descending": descending})
    check_grad("argsort", {"X": rand(3, 4)}, ["X"], {"axis": axis, "descending": descending})
    # Paddle 3.x writes `stable`; a stable sort meets stable=False as well
    for stable in (True, False):
        check_output("argsort", {"X": x}, {"Out": np.take_along_axis(x, idx, axis),
                                           "Indices": idx.astype("int64")},
                     {"axis": axis, "descending": descending, "stable": stable})


@pytest.mark.parametrize("diagonal,lower", [(0, True), (1, True), (-1, False), (1, False)])
def test_tril_triu(diagonal, lower):
    x = rand(2, 3, 4)
    want = np.tril(x, diagonal) if lower else np.triu(x, diagonal)
    check_output("tril_triu", {"X": x}, {"Out": want}, {"diagonal": diagonal, "lower": lower})
    check_grad("tril_triu", {"X": x}, ["X"], {"diagonal": diagonal, "lower": lower})


def test_masked_select():
    x = rand(3, 4)
    mask = x > 0.1
    check_output("masked_select", {"X": x, "Mask": mask}, {"Y": x[mask]})
    row = np.array([True, False, True, True])   # broadcast over rows
    check_output("masked_select", {"X": x, "Mask": row},
                 {"Y": x[np.broadcast_to(row, x.shape)]})
    check_grad("masked_select", {"X": x, "Mask": mask}, ["X"])


def test_size():
    out = run_op("size", {"Input": rand(3, 4, 2)})["Out"]
    assert out.shape == (1,) and out.dtype == np.int64 and out == 24     # Fluid 1.x's [1]


# --- math, reductions, creation, logic ---------------------------------------------------
def test_bmm():
    x, y = rand(2, 3, 4), rand(2, 4, 5)
    check_output("bmm", {"X": x, "Y": y}, {"Out": np.matmul(x, y)})
    check_grad("bmm", {"X": x, "Y": y}, ["X", "Y"])


@pytest.mark.parametrize("attrs", [{"axis": 1}, {"axis": 0, "reverse": True},
                                   {"axis": -1, "exclusive": True},
                                   {"axis": 1, "exclusive": True, "reverse": True},
                                   {"flatten": True}])
def test_cumsum(attrs):
    x = rand(3, 4)
    ax = attrs.get("axis", -1)
    v = x.reshape(-1) if attrs.get("flatten") else x
    ax = 0 if attrs.get("flatten") else ax
    if attrs.get("reverse"):
        v = np.flip(v, ax)
    want = np.cumsum(v, ax)
    if attrs.get("exclusive"):
        want = want - v
    if attrs.get("reverse"):
        want = np.flip(want, ax)
    check_output("cumsum", {"X": x}, {"Out": want}, attrs)
    check_grad("cumsum", {"X": x}, ["X"], attrs)


@pytest.mark.parametrize("op,f", [("reduce_all", np.all), ("reduce_any", np.any)])
def test_reduce_all_any(op, f):
    x = rand(3, 4) > 0
    x[0] = True
    for attrs, axes in (({"dim": [1]}, 1), ({"dim": [0], "keep_dim": True}, 0),
                        ({"reduce_all": True}, None)):
        want = f(x, axis=axes, keepdims=attrs.get("keep_dim", False))
        out = run_op(op, {"X": x}, attrs)["Out"]
        assert out.dtype == np.bool_
        np.testing.assert_array_equal(out.reshape(np.shape(want)), want)


@pytest.mark.parametrize("porder", [2.0, 1.0, 3.0, 0.0, float("inf"), float("-inf")])
def test_p_norm(porder):
    x = rand(3, 4)
    x[0, 1] = 0.0
    a = np.abs(x.astype(np.float64))
    if porder == 0:
        want = (a != 0).sum(axis=1)
    elif np.isinf(porder):
        want = a.max(axis=1) if porder > 0 else a.min(axis=1)
    else:
        want = (a ** porder).sum(axis=1) ** (1 / porder)
    check_output("p_norm", {"X": x}, {"Out": want.astype("float32")},
                 {"porder": porder, "axis": 1})
    kept = run_op("p_norm", {"X": x}, {"porder": porder, "axis": 1, "keepdim": True})["Out"]
    assert kept.shape == (3, 1)
    if porder in (2.0, 3.0, float("inf")):
        xg = rand(3, 4) + np.sign(rand(3, 4)) * 0.2
        check_grad("p_norm", {"X": xg}, ["X"], {"porder": porder, "axis": 1})


def test_p_norm_asvector():
    x = rand(3, 4)
    out = run_op("p_norm", {"X": x}, {"porder": 2.0, "asvector": True})["Out"]
    assert out.shape == ()
    np.testing.assert_allclose(out, np.sqrt((x.astype(np.float64) ** 2).sum()), rtol=1e-6)


def test_frobenius_norm():
    x = rand(2, 3, 4)
    want = np.sqrt((x.astype(np.float64) ** 2).sum(axis=(1, 2)))
    check_output("frobenius_norm", {"X": x}, {"Out": want.astype("float32")}, {"dim": [1, 2]})
    check_grad("frobenius_norm", {"X": x}, ["X"], {"dim": [1, 2]})
    check_grad("frobenius_norm", {"X": x}, ["X"], {"reduce_all": True})


@pytest.mark.parametrize("start,stop,num,dtype", [
    (0.0, 1.0, 5, dtypes.VarType.FP32), (-2.0, 3.0, 7, dtypes.VarType.FP64),
    (0, 10, 6, dtypes.VarType.INT32), (3.0, 3.0, 1, dtypes.VarType.FP32)])
def test_linspace(start, stop, num, dtype):
    dt = dtypes.to_numpy(dtype)
    out = run_op("linspace", {"Start": np.array([start], "float32"),
                              "Stop": np.array([stop], "float32"),
                              "Num": np.array([num], "int32")}, {"dtype": dtype})["Out"]
    want = np.linspace(start, stop, num)
    assert out.dtype == dt and out.shape == (num,)
    np.testing.assert_allclose(out, want.astype(dt), rtol=1e-6)


def test_assign_value_fp64_and_by_dtype():
    vals = [0.1, 1e-300, -2.5]
    out = run_op("assign_value", {}, {"shape": [3], "dtype": dtypes.VarType.FP64,
                                      "fp64_values": vals})["Out"]
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, np.array(vals))
    out = run_op("assign_value", {}, {"shape": [1, 2], "dtype": dtypes.VarType.FP64,
                                      "fp32_values": [0.5, 2.0]})["Out"]   # older programs
    np.testing.assert_array_equal(out, [[0.5, 2.0]])
    out = run_op("assign_value", {}, {"shape": [2], "dtype": dtypes.VarType.INT64,
                                      "int64_values": [2**40, -3]})["Out"]
    np.testing.assert_array_equal(out, [2**40, -3])


@pytest.mark.parametrize("dtype,values", [(dtypes.VarType.INT64, [5, 0, 2**40]),
                                          (dtypes.VarType.FP32, [0.5, -1.25, 3.0]),
                                          (dtypes.VarType.BOOL, [True, False, True])])
def test_assign_value_scalars(dtype, values):
    """Paddle 3.x (the op's version 1) writes the constants as Scalars in `values`."""
    out = run_op("assign_value", {}, {"shape": [3], "dtype": dtype, "values": values})["Out"]
    assert out.dtype == dtypes.to_numpy(dtype)
    np.testing.assert_array_equal(out, np.array(values, dtypes.to_numpy(dtype)))
    scalar = run_op("assign_value", {}, {"shape": [], "dtype": dtype, "values": values[:1]})
    assert scalar["Out"].shape == ()


def test_isfinite_v2():
    x = np.array([[1.0, np.inf, -np.inf], [np.nan, 0.0, -3.0]], "float32")
    check_output("isfinite_v2", {"X": x}, {"Out": np.isfinite(x)})
    out = run_op("isfinite_v2", {"X": np.array([1, 2], "int64")})["Out"]
    np.testing.assert_array_equal(out, [True, True])
