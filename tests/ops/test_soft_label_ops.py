"""kldiv_loss, teacher_student_sigmoid_loss, label_smooth (fluidity/ops/soft_label.py): forward
against numpy references, gradients against finite differences."""
import numpy as np
import pytest

from op_test import check_grad, check_output

rng = np.random.default_rng(11)


def r(*shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


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
