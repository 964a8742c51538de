"""norm (l2_normalize), l1_norm, cos_sim (fluidity/ops/vector_norm.py): forward against numpy
references, gradients against finite differences."""
import numpy as np
import pytest

from op_test import check_grad, check_output

rng = np.random.default_rng(11)


def r(*shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


@pytest.mark.parametrize("axis", [1, 0, -1])
def test_norm(axis):
    x = r(3, 4)
    n = np.sqrt((x.astype(np.float64) ** 2).sum(axis=axis, keepdims=True) + 1e-10)
    check_output("norm", {"X": x}, {"Out": x / n}, {"axis": axis, "epsilon": 1e-10})
    check_grad("norm", {"X": x}, ["X"], {"axis": axis, "epsilon": 1e-10},
               output_slots=["Out"])


@pytest.mark.parametrize("y_rows", [3, 1])
def test_cos_sim(y_rows):
    x, y = r(3, 4), r(y_rows, 4)
    want = (x * y).sum(1, keepdims=True) / (np.linalg.norm(x, axis=1, keepdims=True) *
                                            np.linalg.norm(y, axis=1, keepdims=True))
    check_output("cos_sim", {"X": x, "Y": y}, {"Out": want})
    check_grad("cos_sim", {"X": x, "Y": y}, ["X", "Y"], output_slots=["Out"])


def test_l1_norm():
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, (3, 4))
    x[np.abs(x) < 1e-2] = 0.5
    check_output("l1_norm", {"X": x}, {"Out": np.array([np.abs(x).sum()])})
    check_grad("l1_norm", {"X": x}, ["X"])
