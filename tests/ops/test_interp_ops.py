"""bilinear_interp, nearest_interp, trilinear_interp, bicubic_interp (fluidity/ops/interp.py):
Fluid 1.x's resize ops against per-pixel numpy references written here (Paddle 1.8's
formulas), sizes from attributes, scale and tensors, and finite-difference gradients."""
import numpy as np
import pytest

from fluidity.errors import ExecutionError, ShapeError
from op_test import check_grad, check_output, run_op


def _ratio(n_in, n_out, align_corners):
    if n_out <= 1:
        return 0.0
    return (n_in - 1) / (n_out - 1) if align_corners else n_in / n_out


def _linear_taps(n_in, n_out, align_corners, align_mode):
    """(lo, hi, weight of hi) per output position, written out loop by loop."""
    r = _ratio(n_in, n_out, align_corners)
    taps = []
    for k in range(n_out):
        if align_mode == 0 and not align_corners:
            src = max(r * (k + 0.5) - 0.5, 0.0)
        else:
            src = r * k
        lo = int(src)
        taps.append((lo, min(lo + 1, n_in - 1), src - lo))
    return taps


def bilinear_ref(x, oh, ow, align_corners=True, align_mode=1):
    n, c, h, w = x.shape
    out = np.zeros((n, c, oh, ow))
    th, tw = _linear_taps(h, oh, align_corners, align_mode), \
        _linear_taps(w, ow, align_corners, align_mode)
    for k, (y0, y1, fy) in enumerate(th):
        for l, (x0, x1, fx) in enumerate(tw):
            out[:, :, k, l] = ((1 - fy) * (1 - fx) * x[:, :, y0, x0] +
                               (1 - fy) * fx * x[:, :, y0, x1] +
                               fy * (1 - fx) * x[:, :, y1, x0] + fy * fx * x[:, :, y1, x1])
    return out


def nearest_ref(x, oh, ow, align_corners=True):
    n, c, h, w = x.shape
    rh, rw = _ratio(h, oh, align_corners), _ratio(w, ow, align_corners)
    out = np.zeros((n, c, oh, ow), x.dtype)
    for k in range(oh):
        for l in range(ow):
            i = int(rh * k + 0.5) if align_corners else int(rh * k)
            j = int(rw * l + 0.5) if align_corners else int(rw * l)
            out[:, :, k, l] = x[:, :, i, j]
    return out


def trilinear_ref(x, od, oh, ow, align_corners=True, align_mode=1):
    d = x.shape[2]
    # linear along D of bilinear planes
    planes = np.stack([bilinear_ref(x[:, :, z], oh, ow, align_corners, align_mode)
                       for z in range(d)], axis=2)
    out = np.zeros(x.shape[:2] + (od, oh, ow))
    for j, (z0, z1, fz) in enumerate(_linear_taps(d, od, align_corners, align_mode)):
        out[:, :, j] = (1 - fz) * planes[:, :, z0] + fz * planes[:, :, z1]
    return out


def _cubic(t):
    a = -0.75

    def near(v):
        return ((a + 2) * v - (a + 3)) * v * v + 1

    def far(v):
        return ((a * v - 5 * a) * v + 8 * a) * v - 4 * a
    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def bicubic_ref(x, oh, ow, align_corners):
    n, c, h, w = x.shape
    rh, rw = _ratio(h, oh, align_corners), _ratio(w, ow, align_corners)
    out = np.zeros((n, c, oh, ow))
    for k in range(oh):
        sy = rh * k if align_corners else rh * (k + 0.5) - 0.5
        y0 = int(np.floor(sy))
        cy = _cubic(sy - y0)
        for l in range(ow):
            sx = rw * l if align_corners else rw * (l + 0.5) - 0.5
            x0 = int(np.floor(sx))
            cx = _cubic(sx - x0)
            for a in range(4):
                for b in range(4):
                    yy, xx = min(max(y0 - 1 + a, 0), h - 1), min(max(x0 - 1 + b, 0), w - 1)
                    out[:, :, k, l] += cy[a] * cx[b] * x[:, :, yy, xx]
    return out


@pytest.fixture
def x():
    return np.random.default_rng(3).uniform(-1, 1, (2, 3, 4, 5))


@pytest.mark.parametrize("ac,am", [(True, 1), (False, 0), (False, 1)])
def test_bilinear(x, ac, am):
    attrs = {"out_h": 6, "out_w": 3, "align_corners": ac, "align_mode": am,
             "interp_method": "bilinear"}
    check_output("bilinear_interp", {"X": x}, {"Out": bilinear_ref(x, 6, 3, ac, am)}, attrs)
    check_grad("bilinear_interp", {"X": x}, ["X"], attrs)


def test_bilinear_size_sources_and_layout(x):
    want = bilinear_ref(x, 8, 10)
    # the scale attribute sets the size only (the ratio stays (in-1)/(out-1))
    check_output("bilinear_interp", {"X": x}, {"Out": want}, {"scale": 2.0})
    check_output("bilinear_interp", {"X": x, "OutSize": np.array([8, 10], np.int32)},
                 {"Out": want}, {"out_h": 3, "out_w": 3})
    check_output("bilinear_interp",
                 {"X": x, "SizeTensor": [("sh", np.array([8], np.int32)),
                                         ("sw", np.array([10], np.int64))]}, {"Out": want})
    check_output("bilinear_interp", {"X": x, "Scale": np.array([2.0], np.float32)},
                 {"Out": want})
    nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    check_output("bilinear_interp", {"X": nhwc}, {"Out": want.transpose(0, 2, 3, 1)},
                 {"out_h": 8, "out_w": 10, "data_layout": "NHWC"})
    check_grad("bilinear_interp", {"X": nhwc}, ["X"],
               {"out_h": 3, "out_w": 7, "data_layout": "NHWC"})
    # the same size: X copied
    check_output("bilinear_interp", {"X": x}, {"Out": x}, {"out_h": 4, "out_w": 5})


def test_bilinear_uint8_truncates():
    x = np.random.default_rng(1).integers(0, 256, (1, 2, 3, 3)).astype(np.uint8)
    got = run_op("bilinear_interp", {"X": x}, {"out_h": 5, "out_w": 4})["Out"]
    assert got.dtype == np.uint8
    want = bilinear_ref(x.astype(np.float64), 5, 4)
    assert np.abs(got.astype(np.float64) - np.trunc(want)).max() <= 1


@pytest.mark.parametrize("ac", [True, False])
def test_nearest(x, ac):
    attrs = {"out_h": 7, "out_w": 3, "align_corners": ac, "interp_method": "nearest"}
    check_output("nearest_interp", {"X": x}, {"Out": nearest_ref(x, 7, 3, ac)}, attrs)
    check_grad("nearest_interp", {"X": x}, ["X"], attrs)


@pytest.mark.parametrize("ac,am", [(True, 1), (False, 0)])
def test_trilinear(ac, am):
    x = np.random.default_rng(4).uniform(-1, 1, (1, 2, 3, 4, 3))
    attrs = {"out_d": 5, "out_h": 3, "out_w": 4, "align_corners": ac, "align_mode": am,
             "interp_method": "trilinear"}
    check_output("trilinear_interp", {"X": x}, {"Out": trilinear_ref(x, 5, 3, 4, ac, am)},
                 attrs)
    check_grad("trilinear_interp", {"X": x}, ["X"], attrs)
    ndhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 4, 1))
    check_output("trilinear_interp", {"X": ndhwc},
                 {"Out": trilinear_ref(x, 5, 3, 4, ac, am).transpose(0, 2, 3, 4, 1)},
                 {**attrs, "data_layout": "NDHWC"})


@pytest.mark.parametrize("ac", [True, False])
def test_bicubic(x, ac):
    attrs = {"out_h": 7, "out_w": 3, "align_corners": ac, "interp_method": "bicubic"}
    check_output("bicubic_interp", {"X": x}, {"Out": bicubic_ref(x, 7, 3, ac)}, attrs)
    check_grad("bicubic_interp", {"X": x}, ["X"], attrs)


def test_bad_sizes_and_methods(x):
    with pytest.raises(ExecutionError, match="must be positive"):
        run_op("bilinear_interp", {"X": x, "OutSize": np.array([0, 3], np.int32)})
    with pytest.raises(ShapeError, match="takes a 5-D X"):
        run_op("trilinear_interp", {"X": x}, {"out_d": 2, "out_h": 2, "out_w": 2})
    with pytest.raises(ShapeError, match="interp_method 'cubic'"):
        run_op("bilinear_interp", {"X": x}, {"interp_method": "cubic", "out_h": 2,
                                              "out_w": 2})
