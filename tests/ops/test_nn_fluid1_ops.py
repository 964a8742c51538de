"""multiplex, bilinear_tensor_product, fsp, add_position_encoding, cvm, mean_iou,
affine_grid, random_crop (fluidity/ops/nn_fluid1.py): forward against numpy, gradients
against finite differences."""
import numpy as np
import pytest

from op_test import check_grad, check_output, run_op

rng = np.random.default_rng(12)


@pytest.fixture(autouse=True)
def _own_data():
    """Each test draws from a generator of its own, so its data does not depend on which
    tests ran before it on the same worker (spectral_norm's power iteration failed its
    tolerance on some draws)."""
    global rng
    rng = np.random.default_rng(12)


def r(*shape):
    return rng.uniform(-1, 1, size=shape).astype(np.float32)


def test_multiplex():
    a, b, c = r(4, 3), r(4, 3), r(4, 3)
    ids = np.array([[2], [0], [1], [2]], np.int32)
    want = np.stack([c[0], a[1], b[2], c[3]])
    ins = {"Ids": ids, "X": [("a", a), ("b", b), ("c", c)]}
    check_output("multiplex", ins, {"Out": want})
    check_grad("multiplex", ins, [("X", 0), ("X", 2)])


def test_bilinear_tensor_product_and_fsp():
    x, y, w, b = r(3, 2), r(3, 4), r(5, 2, 4), r(1, 5)
    want = np.einsum("bm,kmn,bn->bk", x, w, y) + b
    ins = {"X": x, "Y": y, "Weight": w, "Bias": b}
    check_output("bilinear_tensor_product", ins, {"Out": want})
    check_grad("bilinear_tensor_product", ins, ["X", "Y", "Weight", "Bias"])
    u, v = r(2, 3, 2, 2), r(2, 4, 2, 2)
    check_output("fsp", {"X": u, "Y": v},
                 {"Out": np.einsum("bchw,bdhw->bcd", u, v) / 4})
    check_grad("fsp", {"X": u, "Y": v}, ["X", "Y"])


def test_add_position_encoding():
    x = r(2, 3, 4)
    pe = np.zeros((3, 4))
    for t in range(3):
        for j in range(2):
            pe[t, j] = np.sin(t / 10000 ** (j / 1))
            pe[t, 2 + j] = np.cos(t / 10000 ** (j / 1))
    check_output("add_position_encoding", {"X": x}, {"Out": 0.5 * x + 2 * pe},
                 {"alpha": 0.5, "beta": 2.0})
    check_grad("add_position_encoding", {"X": x}, ["X"], {"alpha": 0.5, "beta": 2.0})


def test_cvm():
    x = np.abs(r(3, 5))
    cvm = np.abs(r(3, 2))
    want = x.copy()
    want[:, 0] = np.log(x[:, 0] + 1)
    want[:, 1] = np.log(x[:, 1] + 1) - want[:, 0]
    check_output("cvm", {"X": x, "CVM": cvm}, {"Y": want})
    check_output("cvm", {"X": x, "CVM": cvm}, {"Y": x[:, 2:]}, {"use_cvm": False})
    from fluidity.ops import registry
    dy = r(3, 5)
    dx = registry.get("cvm_grad").kernel_for(
        {**registry.get("cvm_grad").defaults(), "use_cvm": True}, None)(x, cvm, dy)
    np.testing.assert_array_equal(dx[:, 2:], dy[:, 2:])
    np.testing.assert_array_equal(dx[:, :2], cvm)


def test_mean_iou():
    pred = np.array([0, 1, 1, 2, 2, 2], np.int32)
    label = np.array([0, 1, 2, 2, 2, 0], np.int32)
    got = run_op("mean_iou", {"Predictions": pred, "Labels": label}, {"num_classes": 3})
    assert got["OutCorrect"].tolist() == [1, 1, 2]
    assert got["OutWrong"].tolist() == [1, 1, 2]
    np.testing.assert_allclose(got["OutMeanIou"], [(1 / 2 + 1 / 2 + 2 / 4) / 3], rtol=1e-6)


def test_affine_grid():
    theta = r(2, 2, 3)
    xs, ys = np.linspace(-1, 1, 4), np.linspace(-1, 1, 3)
    want = np.zeros((2, 3, 4, 2))
    for n in range(2):
        for i in range(3):
            for j in range(4):
                want[n, i, j] = theta[n] @ np.array([xs[j], ys[i], 1.0])
    check_output("affine_grid", {"Theta": theta}, {"Output": want},
                 {"output_shape": [2, 1, 3, 4]})
    check_grad("affine_grid", {"Theta": theta}, ["Theta"], {"output_shape": [2, 1, 3, 4]})


def test_random_crop():
    x = np.arange(2 * 5 * 6, dtype=np.float32).reshape(2, 5, 6)
    got = run_op("random_crop", {"X": x}, {"shape": [3, 4], "startup_seed": 5})
    out = got["Out"]
    assert out.shape == (2, 3, 4)
    for i in range(2):           # each crop is a contiguous block of its instance
        r0, c0 = np.argwhere(x[i] == out[i, 0, 0])[0]
        np.testing.assert_array_equal(out[i], x[i, r0:r0 + 3, c0:c0 + 4])


def test_grid_sampler():
    x = r(2, 3, 4, 5)
    grid = rng.uniform(-1.1, 1.1, size=(2, 3, 2, 2)).astype(np.float32)
    want = np.zeros((2, 3, 3, 2))
    for n in range(2):
        for i in range(3):
            for j in range(2):
                gx = (grid[n, i, j, 0] + 1) * 4 / 2
                gy = (grid[n, i, j, 1] + 1) * 3 / 2
                x0, y0 = int(np.floor(gx)), int(np.floor(gy))
                for yy, wy in ((y0, 1 - (gy - y0)), (y0 + 1, gy - y0)):
                    for xx, wx in ((x0, 1 - (gx - x0)), (x0 + 1, gx - x0)):
                        if 0 <= yy < 4 and 0 <= xx < 5:
                            want[n, :, i, j] += wy * wx * x[n, :, yy, xx]
    check_output("grid_sampler", {"X": x, "Grid": grid}, {"Output": want})
    check_grad("grid_sampler", {"X": x, "Grid": grid}, ["X", "Grid"], delta=1e-7)


def test_spectral_norm():
    w = r(3, 2, 2)
    u, v = r(2), r(6)
    mat = w.transpose(1, 0, 2).reshape(2, 6)
    sigma = np.linalg.svd(mat.astype(np.float64), compute_uv=False)[0]
    attrs = {"dim": 1, "power_iters": 60}
    check_output("spectral_norm", {"Weight": w, "U": u, "V": v}, {"Out": w / sigma}, attrs,
                 rtol=1e-4)
    check_grad("spectral_norm", {"Weight": w, "U": u, "V": v}, ["Weight"], attrs, rtol=1e-3)


def test_row_conv_over_sequences():
    from fluidity.core.tensor import LoDTensor
    x = r(5, 3)
    w = r(2, 3)
    lod = [[0, 3, 5]]
    want = np.zeros_like(x)
    for s, e in ((0, 3), (3, 5)):
        for t in range(s, e):
            for i in range(2):
                if t + i < e:
                    want[t] += x[t + i] * w[i]
    check_output("row_conv", {"X": LoDTensor(x, lod), "Filter": w}, {"Out": want})
    check_grad("row_conv", {"X": LoDTensor(x, lod), "Filter": w}, ["X", "Filter"])


def test_im2sequence():
    x = r(2, 2, 3, 4)
    attrs = {"kernels": [2, 2], "strides": [1, 2], "paddings": [0, 0, 1, 0]}
    xp = np.pad(x, [(0, 0), (0, 0), (0, 1), (0, 0)])
    rows = [xp[n, :, i:i + 2, j * 2:j * 2 + 2].reshape(-1)
            for n in range(2) for i in range(3) for j in range(2)]
    got = run_op("im2sequence", {"X": x}, attrs)["Out"]
    np.testing.assert_allclose(got, np.stack(rows), rtol=1e-6)
    check_grad("im2sequence", {"X": x}, ["X"], attrs)
