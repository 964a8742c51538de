"""affine_grid, grid_sampler, random_crop, im2sequence (fluidity/ops/image_geometry.py):
forward against numpy, gradients against finite differences (im2sequence with the images'
real sizes: test_im2sequence_ops.py)."""
import numpy as np
import pytest

from op_test import check_grad, check_output, run_op

rng = np.random.default_rng(12)


@pytest.fixture(autouse=True)
def _own_data():
    # each test draws from a generator of its own: its data does not depend on the tests
    # that ran before it on the same worker
    global rng
    rng = np.random.default_rng(12)


def r(*shape):
    return rng.uniform(-1, 1, size=shape).astype(np.float32)


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


def test_random_crop():
    x = np.arange(2 * 5 * 6, dtype=np.float32).reshape(2, 5, 6)
    got = run_op("random_crop", {"X": x}, {"shape": [3, 4], "startup_seed": 5})
    out = got["Out"]
    assert out.shape == (2, 3, 4)
    for i in range(2):           # each crop is a contiguous block of its instance
        r0, c0 = np.argwhere(x[i] == out[i, 0, 0])[0]
        np.testing.assert_array_equal(out[i], x[i, r0:r0 + 3, c0:c0 + 4])


def test_im2sequence():
    x = r(2, 2, 3, 4)
    attrs = {"kernels": [2, 2], "strides": [1, 2], "paddings": [0, 0, 1, 0]}
    xp = np.pad(x, [(0, 0), (0, 0), (0, 1), (0, 0)])
    rows = [xp[n, :, i:i + 2, j * 2:j * 2 + 2].reshape(-1)
            for n in range(2) for i in range(3) for j in range(2)]
    got = run_op("im2sequence", {"X": x}, attrs)["Out"]
    np.testing.assert_allclose(got, np.stack(rows), rtol=1e-6)
    check_grad("im2sequence", {"X": x}, ["X"], attrs)
