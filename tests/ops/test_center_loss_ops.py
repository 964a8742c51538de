"""center_loss (fluidity/ops/center_loss.py): the loss and the moved centres against numpy,
the gradient against finite differences."""
import numpy as np

from op_test import check_grad, run_op

rng = np.random.default_rng(11)


def r(*shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def test_center_loss():
    x, centers = r(4, 3), r(2, 3)
    lab = np.array([[0], [1], [0], [0]], np.int64)
    ins = {"X": x, "Label": lab, "Centers": centers, "CenterUpdateRate": np.array([0.5],
                                                                                 np.float32)}
    diff = x - centers[lab[:, 0]]
    got = run_op("center_loss", ins, {"cluster_num": 2, "need_update": False})
    np.testing.assert_allclose(got["Loss"], 0.5 * (diff ** 2).sum(1, keepdims=True), rtol=1e-5)
    got = run_op("center_loss", ins, {"cluster_num": 2, "need_update": True})
    want = centers.copy()
    want[0] += 0.5 * diff[[0, 2, 3]].sum(0) / 4
    want[1] += 0.5 * diff[1] / 2
    np.testing.assert_allclose(got["CentersOut"], want, rtol=1e-5)
    check_grad("center_loss", ins, ["X"], {"cluster_num": 2, "need_update": False},
               output_slots=["Loss"])
