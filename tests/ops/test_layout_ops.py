"""pad, pad2d, pad_constant_like, crop, crop_tensor, space_to_depth, pixel_shuffle,
shuffle_channel, temporal_shift, maxout, affine_channel, lrn (fluidity/ops/layout.py):
forward against numpy, gradients against finite differences."""
import numpy as np
import pytest

from op_test import check_grad, check_output, run_op

from fluidity.errors import FluidityError

rng = np.random.default_rng(8)


def r(*shape):
    return rng.uniform(-1, 1, size=shape).astype(np.float32)


def test_pad():
    x = r(2, 3)
    attrs = {"paddings": [1, 0, 0, 2], "pad_value": 9.0}
    check_output("pad", {"X": x}, {"Out": np.pad(x, [(1, 0), (0, 2)], constant_values=9)},
                 attrs)
    check_grad("pad", {"X": x}, ["X"], attrs)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
def test_pad2d(mode, fmt):
    x = r(1, 2, 3, 4) if fmt == "NCHW" else r(1, 3, 4, 2)
    p = [1, 2, 2, 1]
    hw = [(0, 0), (0, 0), (1, 2), (2, 1)] if fmt == "NCHW" else [(0, 0), (1, 2), (2, 1), (0, 0)]
    kw = {"constant_values": 0.5} if mode == "constant" else {}
    attrs = {"paddings": p, "mode": mode, "pad_value": 0.5, "data_format": fmt}
    check_output("pad2d", {"X": x}, {"Out": np.pad(x, hw, mode=mode, **kw)}, attrs)
    check_grad("pad2d", {"X": x}, ["X"], attrs)


def test_pad_constant_like():
    x, y = r(3, 4), r(2, 3)
    check_output("pad_constant_like", {"X": x, "Y": y},
                 {"Out": np.pad(y, [(0, 1), (0, 1)], constant_values=-1)}, {"pad_value": -1.0})
    check_grad("pad_constant_like", {"X": x, "Y": y}, ["Y"], {"pad_value": -1.0})


def test_crop_and_crop_tensor():
    x = r(3, 5)
    check_output("crop", {"X": x}, {"Out": x[1:3, 2:5]}, {"shape": [2, 3], "offsets": [1, 2]})
    check_grad("crop", {"X": x}, ["X"], {"shape": [2, 3], "offsets": [1, 2]})
    check_output("crop_tensor", {"X": x}, {"Out": x[1:, 1:3]},
                 {"shape": [-1, 2], "offsets": [1, 1]})
    check_output("crop_tensor", {"X": x, "Shape": np.array([2, 2], np.int32),
                                 "Offsets": np.array([0, 3], np.int32)}, {"Out": x[0:2, 3:5]})
    check_grad("crop_tensor", {"X": x}, ["X"], {"shape": [2, 2], "offsets": [1, 1]})


def test_space_to_depth_pixel_shuffle_shuffle_channel():
    # Fluid's (Darknet reorg) order, element by element: X[n, k, j, i] lands at
    # [n, k % oc, j * b + off // b, i * b + off % b] (off = k // oc) of an [N, oc, H*b, W*b]
    # buffer, which read flat is Out [N, C*b*b, H/b, W/b]
    n, c, h, w, b = 2, 8, 4, 6, 2
    x = r(n, c, h, w)
    oc = c // (b * b)
    buf = np.zeros((n, oc, h * b, w * b), x.dtype)
    for ni, k, j, i in np.ndindex(x.shape):
        off = k // oc
        buf[ni, k % oc, j * b + off // b, i * b + off % b] = x[ni, k, j, i]
    want = buf.reshape(n, c * b * b, h // b, w // b)
    check_output("space_to_depth", {"X": x}, {"Out": want}, {"blocksize": b})
    with pytest.raises(FluidityError, match="blocksize"):
        run_op("space_to_depth", {"X": r(1, 3, 4, 4)}, {"blocksize": 2})   # C % b^2 != 0
    check_grad("space_to_depth", {"X": x}, ["X"], {"blocksize": b})
    y = r(1, 8, 2, 3)
    want = y.reshape(1, 2, 2, 2, 2, 3).transpose(0, 1, 4, 2, 5, 3).reshape(1, 2, 4, 6)
    check_output("pixel_shuffle", {"X": y}, {"Out": want}, {"upscale_factor": 2})
    check_grad("pixel_shuffle", {"X": y}, ["X"], {"upscale_factor": 2})
    z = r(1, 6, 2, 2)
    want = z.reshape(1, 3, 2, 2, 2).transpose(0, 2, 1, 3, 4).reshape(z.shape)
    check_output("shuffle_channel", {"X": z}, {"Out": want}, {"group": 3})
    check_grad("shuffle_channel", {"X": z}, ["X"], {"group": 3})


def test_temporal_shift():
    x = r(6, 4, 2, 2)                     # N=2 clips of T=3 frames, C=4, ratio .25: 1 ch each
    attrs = {"seg_num": 3, "shift_ratio": 0.25}
    v = x.reshape(2, 3, 4, 2, 2)
    want = np.zeros_like(v)
    want[:, 1:, 0] = v[:, :-1, 0]
    want[:, :-1, 1] = v[:, 1:, 1]
    want[:, :, 2:] = v[:, :, 2:]
    check_output("temporal_shift", {"X": x}, {"Out": want.reshape(x.shape)}, attrs)
    check_grad("temporal_shift", {"X": x}, ["X"], attrs)


def test_maxout():
    x = r(2, 6, 2, 3)
    check_output("maxout", {"X": x}, {"Out": x.reshape(2, 3, 2, 2, 3).max(axis=2)},
                 {"groups": 2})
    check_grad("maxout", {"X": x}, ["X"], {"groups": 2})


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_affine_channel(layout):
    x = r(2, 3, 2, 2) if layout == "NCHW" else r(2, 2, 2, 3)
    s, b = r(3), r(3)
    v = [1, 3, 1, 1] if layout == "NCHW" else [1, 1, 1, 3]
    check_output("affine_channel", {"X": x, "Scale": s, "Bias": b},
                 {"Out": x * s.reshape(v) + b.reshape(v)}, {"data_layout": layout})
    check_grad("affine_channel", {"X": x, "Scale": s, "Bias": b}, ["X", "Scale", "Bias"],
               {"data_layout": layout})


@pytest.mark.parametrize("n", [3, 4])
def test_lrn(n):
    x = r(2, 5, 2, 2)
    attrs = {"n": n, "k": 1.0, "alpha": 0.5, "beta": 0.75}
    pre = n // 2
    mid = np.empty_like(x, dtype=np.float64)
    for c in range(5):
        lo, hi = max(0, c - pre), min(5, c + n - pre)
        mid[:, c] = 1.0 + 0.5 * (x[:, lo:hi].astype(np.float64) ** 2).sum(axis=1)
    check_output("lrn", {"X": x}, {"Out": x * mid ** -0.75}, attrs)
    check_grad("lrn", {"X": x}, ["X"], attrs, output_slots=["Out"])
    _check_lrn_nhwc(x, attrs, (x * mid ** -0.75).astype(np.float32), mid)


def _check_lrn_nhwc(x, attrs, want_out, want_mid):
    """NHWC lrn: the NCHW numbers moved (MidOut in X's layout too), and its gradient the NCHW
    gradient moved. Interpreter only: the compiled lrn is NCHW-only (its emitter must refuse
    NHWC; see the report of this change)."""
    import fluidity as fluid
    to_last = (0, 2, 3, 1)
    xl = np.ascontiguousarray(x.transpose(to_last))
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xv = fluid.data("x", list(xl.shape), "float32")
        xv.stop_gradient = False
        out = fluid.layers.lrn(xv, data_format="NHWC", **attrs)
        xc = fluid.data("xc", list(x.shape), "float32")
        xc.stop_gradient = False
        outc = fluid.layers.lrn(xc, **attrs)
        w = fluid.data("w", list(xl.shape), "float32")
        loss = fluid.layers.reduce_sum(out * w)
        lossc = fluid.layers.reduce_sum(outc * fluid.layers.transpose(w, [0, 3, 1, 2]))
        (g,), (gc,) = fluid.gradients([loss], [xv]), fluid.gradients([lossc], [xc])
    mid_var = main.global_block().ops[0].output("MidOut")[0]
    wv = rng.uniform(0.5, 1.5, xl.shape).astype(np.float32)
    got, mid, dx, dxc = fluid.Executor(fluid.CPUPlace()).run(
        main, feed={"x": xl, "xc": x, "w": wv}, fetch_list=[out, mid_var, g, gc])
    np.testing.assert_allclose(got, want_out.transpose(to_last), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mid, want_mid.transpose(to_last), rtol=1e-5)
    np.testing.assert_allclose(dx, dxc.transpose(to_last), rtol=1e-5, atol=1e-6)
