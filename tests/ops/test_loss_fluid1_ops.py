"""rank_loss, margin_rank_loss, bpr_loss, kldiv_loss, teacher_student_sigmoid_loss,
label_smooth, cos_sim, norm (fluidity/ops/loss_fluid1.py): forward against numpy references,
gradients against finite differences."""
import numpy as np
import pytest

from op_test import check_grad, check_output

rng = np.random.default_rng(11)


def r(*shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def test_rank_loss():
    lab, left, right = (rng.integers(0, 2, (5, 1)).astype(np.float32), r(5, 1), r(5, 1))
    o = left - right
    want = np.log1p(np.exp(o)) - lab * o
    ins = {"Label": lab, "Left": left, "Right": right}
    check_output("rank_loss", ins, {"Out": want})
    check_grad("rank_loss", ins, ["Left", "Right"])


def test_margin_rank_loss():
    lab = np.array([[1], [-1], [1], [-1]], np.float32)
    x1, x2 = r(4, 1), r(4, 1)
    want = np.maximum(0, -lab * (x1 - x2) + 0.3)
    ins = {"X1": x1, "X2": x2, "Label": lab}
    check_output("margin_rank_loss", ins, {"Out": want}, {"margin": 0.3})
    check_grad("margin_rank_loss", ins, ["X1", "X2"], {"margin": 0.3}, output_slots=["Out"])


def test_bpr_loss():
    x = r(4, 5)
    lab = np.array([[0], [3], [4], [1]], np.int64)
    want = np.zeros((4, 1))
    for i in range(4):
        p = lab[i, 0]
        want[i] = -np.mean([np.log(1 / (1 + np.exp(-(x[i, p] - x[i, j]))))
                            for j in range(5) if j != p])
    check_output("bpr_loss", {"X": x, "Label": lab}, {"Y": want})
    check_grad("bpr_loss", {"X": x, "Label": lab}, ["X"])


@pytest.mark.parametrize("reduction", ["none", "sum", "mean", "batchmean"])
def test_kldiv_loss(reduction):
    x = np.log(r(3, 4, lo=0.1, hi=1.0))
    t = r(3, 4, lo=0.0, hi=1.0)
    t[0, 0] = 0.0
    v = np.where(t > 0, t * (np.log(np.where(t > 0, t, 1)) - x), 0)
    want = {"none": v, "sum": v.sum(), "mean": v.mean(), "batchmean": v.sum() / 3}[reduction]
    want = np.asarray(want).reshape(v.shape if reduction == "none" else (1,))   # Fluid's [1]
    check_output("kldiv_loss", {"X": x, "Target": t}, {"Loss": want},
                 {"reduction": reduction})
    check_grad("kldiv_loss", {"X": x, "Target": t}, ["X"], {"reduction": reduction})


def test_teacher_student_sigmoid_loss():
    x = r(4, 1, lo=-2, hi=2)
    lab = np.array([[-2.0], [-0.5], [0.3], [1.7]], np.float32)
    sp = np.log1p(np.exp(x.astype(np.float64)))
    want = np.array([sp[0], sp[1] - x[1], 2 * sp[2] - x[2] * 0.3,
                     2 * sp[3] - x[3] - x[3] * 0.7])
    check_output("teacher_student_sigmoid_loss", {"X": x, "Label": lab}, {"Y": want})
    check_grad("teacher_student_sigmoid_loss", {"X": x, "Label": lab}, ["X"])


def test_label_smooth():
    x = np.eye(4, dtype=np.float32)[[0, 2, 3]]
    check_output("label_smooth", {"X": x}, {"Out": 0.9 * x + 0.1 / 4}, {"epsilon": 0.1})
    prior = np.array([0.1, 0.2, 0.3, 0.4], np.float32)
    check_output("label_smooth", {"X": x, "PriorDist": prior},
                 {"Out": 0.8 * x + 0.2 * prior}, {"epsilon": 0.2})
    check_grad("label_smooth", {"X": x}, ["X"], {"epsilon": 0.1})


@pytest.mark.parametrize("y_rows", [3, 1])
def test_cos_sim(y_rows):
    x, y = r(3, 4), r(y_rows, 4)
    want = (x * y).sum(1, keepdims=True) / (np.linalg.norm(x, axis=1, keepdims=True) *
                                            np.linalg.norm(y, axis=1, keepdims=True))
    check_output("cos_sim", {"X": x, "Y": y}, {"Out": want})
    check_grad("cos_sim", {"X": x, "Y": y}, ["X", "Y"], output_slots=["Out"])


@pytest.mark.parametrize("axis", [1, 0, -1])
def test_norm(axis):
    x = r(3, 4)
    n = np.sqrt((x.astype(np.float64) ** 2).sum(axis=axis, keepdims=True) + 1e-10)
    check_output("norm", {"X": x}, {"Out": x / n}, {"axis": axis, "epsilon": 1e-10})
    check_grad("norm", {"X": x}, ["X"], {"axis": axis, "epsilon": 1e-10},
               output_slots=["Out"])


def test_center_loss():
    from op_test import run_op
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
