"""minus, squared_l2_distance (fluidity/ops/distance.py) and modified_huber_loss
(fluidity/ops/modified_huber.py): forward against numpy, gradients against finite
differences, shape errors."""
import numpy as np
import pytest

from op_test import check_grad, check_output, run_op
from fluidity.errors import ShapeError

rng = np.random.default_rng(3)


def r(*shape):
    return rng.uniform(-1, 1, size=shape).astype(np.float32)


def test_minus():
    x, y = r(3, 4), r(3, 4)
    check_output("minus", {"X": x, "Y": y}, {"Out": x - y})
    check_grad("minus", {"X": x, "Y": y}, ["X", "Y"])


def test_minus_refuses_other_shapes():
    with pytest.raises(ShapeError, match="minus"):
        run_op("minus", {"X": r(3, 4), "Y": r(1, 4)})


@pytest.mark.parametrize("yshape", [(3, 2, 2), (1, 2, 2)])
def test_squared_l2_distance(yshape):
    x, y = r(3, 2, 2), r(*yshape)
    sub = (x - y).reshape(3, 4)
    check_output("squared_l2_distance", {"X": x, "Y": y},
                 {"sub_result": sub, "Out": (sub ** 2).sum(1, keepdims=True)})
    check_grad("squared_l2_distance", {"X": x, "Y": y}, ["X", "Y"], output_slots=["Out"])


def test_squared_l2_distance_row_mismatch():
    with pytest.raises(ShapeError, match="squared_l2_distance"):
        run_op("squared_l2_distance", {"X": r(3, 4), "Y": r(2, 4)})


def test_modified_huber_loss():
    # scores away from the kinks at z = -1 and z = 1
    x = np.array([[-1.7], [-0.4], [0.3], [1.6], [0.8], [-1.3]], np.float32)
    y = np.array([[1], [1], [0], [1], [0], [0]], np.float32)
    z = x * (2 * y - 1)
    want = np.array([[-4 * v if v < -1 else (1 - v) ** 2 if v < 1 else 0.0] for v in
                     z[:, 0]], np.float32)
    check_output("modified_huber_loss", {"X": x, "Y": y}, {"IntermediateVal": z, "Out": want})
    check_grad("modified_huber_loss", {"X": x, "Y": y}, ["X"], output_slots=["Out"])
