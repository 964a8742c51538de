"""trilinear_interp (Fluid 1.8's resize_trilinear) against a point-by-point numpy reference
(align_corners, both align modes, NDHWC, a scale, sizes from tensors), its numeric gradient,
and the layer."""
import numpy as np
import pytest

import fluidity as fluid
from op_test import check_grad, check_output

rng = np.random.default_rng(19)


def taps(n_in, n_out, align_corners, align_mode):
    """(lo, hi, frac) per output index, Fluid 1.8's rule."""
    ratio = 0.0 if n_out <= 1 else ((n_in - 1) / (n_out - 1) if align_corners else n_in / n_out)
    half = align_mode == 0 and not align_corners
    out = []
    for j in range(n_out):
        pos = ratio * (j + 0.5) - 0.5 if half else ratio * j
        lo = max(int(pos), 0)
        frac = (max(pos, 0.0) if half else pos) - lo
        out.append((lo, min(lo + 1, n_in - 1), frac))
    return out


def trilinear_ref(x, size, align_corners, align_mode):
    n, c, d, h, w = x.shape
    td, th, tw = (taps(i, o, align_corners, align_mode) for i, o in zip((d, h, w), size))
    out = np.zeros((n, c) + tuple(size))
    for a, (d0, d1, fd) in enumerate(td):
        for b, (h0, h1, fh) in enumerate(th):
            for e, (w0, w1, fw) in enumerate(tw):
                acc = 0
                for dd, wd in ((d0, 1 - fd), (d1, fd)):
                    for hh, wh in ((h0, 1 - fh), (h1, fh)):
                        for ww, wwt in ((w0, 1 - fw), (w1, fw)):
                            acc = acc + wd * wh * wwt * x[:, :, dd, hh, ww]
                out[:, :, a, b, e] = acc
    return out


@pytest.mark.parametrize("align_corners,align_mode", [(True, 1), (False, 0), (False, 1)])
def test_trilinear_forward_and_gradient(align_corners, align_mode):
    x = rng.normal(size=(2, 2, 3, 4, 2))
    attrs = {"out_d": 5, "out_h": 3, "out_w": 4, "align_corners": align_corners,
             "align_mode": align_mode}
    check_output("trilinear_interp", {"X": x},
                 {"Out": trilinear_ref(x, (5, 3, 4), align_corners, align_mode)}, attrs)
    check_grad("trilinear_interp", {"X": x}, ["X"], attrs)


def test_trilinear_channel_last_scale_and_size_tensor():
    x = rng.normal(size=(1, 2, 3, 2, 3))
    want = trilinear_ref(x, (4, 6, 4), False, 1)
    check_output("trilinear_interp", {"X": np.moveaxis(x, 1, -1)},
                 {"Out": np.moveaxis(want, 1, -1)},
                 {"out_d": 4, "out_h": 6, "out_w": 4, "align_corners": False,
                  "data_layout": "NHWC"})
    check_output("trilinear_interp", {"X": x, "OutSize": np.array([4, 6, 4], np.int32)},
                 {"Out": want}, {"align_corners": False})
    check_output("trilinear_interp", {"X": x}, {"Out": trilinear_ref(x, (6, 4, 6), True, 1)},
                 {"scale": 2.0, "out_d": -1, "out_h": -1, "out_w": -1})


def test_resize_trilinear_layer():
    x = rng.normal(size=(2, 1, 2, 3, 4)).astype(np.float32)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        v = fluid.layers.data("x", [1, 2, 3, 4])
        a = fluid.layers.resize_trilinear(v, out_shape=[3, 3, 3])
        b = fluid.layers.resize_trilinear(v, scale=2)
        size = fluid.layers.fill_constant([1], "int32", 5)
        c = fluid.layers.resize_trilinear(v, out_shape=[size, 2, 2], align_corners=False)
        with pytest.raises(ValueError, match="One of out_shape and scale"):
            fluid.layers.resize_trilinear(v)
    assert all(op.type in ("trilinear_interp", "fill_constant")
               for op in main.global_block().ops)
    got = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": x}, fetch_list=[a, b, c])
    np.testing.assert_allclose(got[0], trilinear_ref(x, (3, 3, 3), True, 1), rtol=1e-5,
                               atol=1e-6)
    assert got[1].shape == (2, 1, 4, 6, 8) and got[2].shape == (2, 1, 5, 2, 2)
