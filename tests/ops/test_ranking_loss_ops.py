"""rank_loss, margin_rank_loss, bpr_loss (fluidity/ops/ranking_loss.py): forward against numpy
references, gradients against finite differences."""
import numpy as np

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


def test_rank_loss_of_mixed_batch_and_batch_by_one_shapes():
    # Fluid 1.8 takes [batch] or [batch, 1] for each input, element by element; Out is
    # shaped as Label (numpy would broadcast [5] against [5, 1] to [5, 5])
    lab, left, right = rng.integers(0, 2, 5).astype(np.float32), r(5, 1), r(5)
    o = left[:, 0] - right
    ins = {"Label": lab, "Left": left, "Right": right}
    check_output("rank_loss", ins, {"Out": np.log1p(np.exp(o)) - lab * o})
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
