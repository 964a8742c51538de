"""flatten, fill, fill_zeros_like2, index_sample, allclose, conv_shift, hinge_loss, l1_norm
(fluidity/ops/tensor_fluid1.py): forward against numpy references written here, gradients
against finite differences, bad input refused by name."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.core.tensor import LoDTensor
from fluidity.errors import ExecutionError, ShapeError
from op_test import check_grad, check_output, run_op


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def test_flatten_shapes_lod_and_grad(rng):
    x = rng.uniform(-1, 1, (3, 2, 4)).astype(np.float32)
    for axis, shape in ((0, (1, 24)), (1, (3, 8)), (2, (6, 4)), (3, (24, 1))):
        check_output("flatten", {"X": x}, {"Out": x.reshape(shape)}, {"axis": axis})
    check_grad("flatten", {"X": x}, ["X"], {"axis": 2})
    # dim 0 kept: the LoD goes along; changed: it does not
    t = LoDTensor(x, [[0, 1, 3]])
    kept = run_op("flatten", {"X": t}, {"axis": 1}, return_lod=True)["Out"]
    assert kept.lod() == [[0, 1, 3]]
    dropped = run_op("flatten", {"X": t}, {"axis": 2}, return_lod=True)["Out"]
    assert dropped.lod() == []
    with pytest.raises(ShapeError, match="axis 4"):
        run_op("flatten", {"X": x}, {"axis": 4})


def test_fill_and_fill_zeros_like2(rng):
    vals = rng.uniform(-5, 5, 6)
    for dtype, np_t in ((fluid.core.VarDesc.VarType.FP64, np.float64),
                        (fluid.core.VarDesc.VarType.INT32, np.int32)):
        got = run_op("fill", {}, {"value": vals.tolist(), "shape": [2, 3], "dtype": dtype})
        want = vals.astype(np.float32).astype(np_t).reshape(2, 3)   # the values are floats
        np.testing.assert_array_equal(got["Out"], want)
        assert got["Out"].dtype == np_t
    with pytest.raises((ShapeError, ExecutionError), match="needs 6 values"):
        run_op("fill", {}, {"value": [1.0, 2.0], "shape": [2, 3]})
    x = rng.uniform(size=(2, 5)).astype(np.float32)
    got = run_op("fill_zeros_like2", {"X": x},
                 {"dtype": fluid.core.VarDesc.VarType.INT64})["Out"]
    assert got.dtype == np.int64 and got.shape == (2, 5) and not got.any()


def test_index_sample(rng):
    x = rng.uniform(size=(4, 6))
    idx = np.array([[0, 5, 5], [1, 1, 2], [3, 0, 4], [2, 2, 2]], np.int64)
    want = np.array([[x[i, j] for j in row] for i, row in enumerate(idx)])
    check_output("index_sample", {"X": x, "Index": idx.astype(np.int32)}, {"Out": want})
    check_grad("index_sample", {"X": x, "Index": idx}, ["X"])
    with pytest.raises(ExecutionError, match="outside \\[0, 6\\)"):
        run_op("index_sample", {"X": x, "Index": idx + 1})
    with pytest.raises(ExecutionError, match="same number of rows"):
        run_op("index_sample", {"X": x, "Index": idx[:2]})


@pytest.mark.parametrize("a,b,kw,want", [
    ([10000., 1e-07], [10000.1, 1e-08], {}, False),
    ([10000., 1e-08], [10000.1, 1e-09], {}, True),
    ([1.0, np.nan], [1.0, np.nan], {}, False),
    ([1.0, np.nan], [1.0, np.nan], {"equal_nan": True}, True),
    ([1.0, np.nan], [1.0, 2.0], {"equal_nan": True}, False),
    ([1.0, 1.1], [1.0, 1.0], {"rtol": 0.2}, True),
])
def test_allclose(a, b, kw, want):
    got = run_op("allclose", {"Input": np.array(a, np.float32),
                              "Other": np.array(b, np.float32)}, kw)["Out"]
    assert got.shape == (1,) and got.dtype == np.bool_ and bool(got[0]) is want


def _conv_shift_ref(x, y):
    m, n = x.shape[1], y.shape[1]
    out = np.zeros_like(x)
    for i in range(m):
        for j in range(n):
            out[:, i] += x[:, (i + j - (n - 1) // 2) % m] * y[:, j]
    return out


def test_conv_shift(rng):
    x, y = rng.uniform(-1, 1, (3, 7)), rng.uniform(-1, 1, (3, 5))
    check_output("conv_shift", {"X": x, "Y": y}, {"Out": _conv_shift_ref(x, y)})
    check_grad("conv_shift", {"X": x, "Y": y}, ["X", "Y"])
    # Y as wide as X (every shift of the row)
    x2, y2 = rng.uniform(-1, 1, (2, 3)), rng.uniform(-1, 1, (2, 3))
    check_grad("conv_shift", {"X": x2, "Y": y2}, ["X", "Y"])
    with pytest.raises((ShapeError, ExecutionError), match="odd"):
        run_op("conv_shift", {"X": x, "Y": y[:, :4]})


def test_hinge_loss(rng):
    x = rng.uniform(-2, 2, (8, 1))
    y = rng.integers(0, 2, (8, 1)).astype(np.float64)
    x[0, 0], y[0, 0] = 0.5, 1.0      # on the slope
    check_output("hinge_loss", {"Logits": x, "Labels": y},
                 {"Loss": np.maximum(0, 1 - x * (2 * y - 1))})
    x[np.abs(np.abs(x) - 1) < 1e-3] = 0.3   # no point at the kink for finite differences
    check_grad("hinge_loss", {"Logits": x, "Labels": y}, ["Logits"])
    with pytest.raises(ShapeError, match="batch_size, 1"):
        run_op("hinge_loss", {"Logits": np.zeros((2, 2)), "Labels": np.zeros((2, 2))})


def test_l1_norm(rng):
    x = rng.uniform(-1, 1, (3, 4))
    x[np.abs(x) < 1e-2] = 0.5
    check_output("l1_norm", {"X": x}, {"Out": np.array([np.abs(x).sum()])})
    check_grad("l1_norm", {"X": x}, ["X"])
