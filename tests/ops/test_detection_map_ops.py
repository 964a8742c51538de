"""detection_map: mAP (integral and 11-point) against a hand-worked example, difficult
ground truth, accumulation over batches through its state, and bad input."""
import numpy as np
import pytest

from fluidity.core.tensor import LoDTensor
from fluidity.errors import ShapeError
from op_test import run_op

OUTS = ["AccumPosCount", "AccumTruePos", "AccumFalsePos", "MAP"]


def batch():
    # image 0: two class-1 truths, image 1: one class-1 and one class-2 truth (difficult)
    label = LoDTensor(np.array([[1, 0, 0.1, 0.1, 0.3, 0.3],
                                [1, 0, 0.6, 0.6, 0.9, 0.9],
                                [1, 0, 0.1, 0.5, 0.4, 0.9],
                                [2, 1, 0.5, 0.1, 0.9, 0.4]]), [[0, 2, 4]])
    # class 1: scores .9 (hits truth 0), .8 (misses), .7 (hits truth 1, image 0);
    # .6 (hits, image 1); class 2: .5 (hits the difficult one)
    det = LoDTensor(np.array([[1, 0.9, 0.1, 0.1, 0.3, 0.3],
                              [1, 0.8, 0.4, 0.0, 0.5, 0.1],
                              [1, 0.7, 0.6, 0.6, 0.9, 0.9],
                              [1, 0.6, 0.1, 0.5, 0.4, 0.9],
                              [2, 0.5, 0.5, 0.1, 0.9, 0.4]]), [[0, 3, 5]])
    return det, label


def integral_ap(flags, n_pos):
    tp = np.cumsum(flags)
    prec, rec = tp / np.arange(1, len(flags) + 1), tp / n_pos
    return sum(p * (r - q) for p, r, q in zip(prec, rec, np.concatenate([[0], rec[:-1]]))
               if abs(r - q) > 1e-6)


def test_map_integral_and_difficult():
    det, label = batch()
    got = run_op("detection_map", {"DetectRes": det, "Label": label},
                 {"class_num": 3, "overlap_threshold": 0.5}, outputs=OUTS)
    # class 1 by score: hit, miss, hit, hit of 3 positives; class 2: a hit of 1
    want = (integral_ap([1, 0, 1, 1], 3) + integral_ap([1], 1)) / 2
    np.testing.assert_allclose(got["MAP"], [want])
    np.testing.assert_array_equal(got["AccumPosCount"].reshape(-1), [0, 3, 1])
    # without the difficult truth, class 2 has no positives: its detection is not counted
    got = run_op("detection_map", {"DetectRes": det, "Label": label},
                 {"class_num": 3, "overlap_threshold": 0.5, "evaluate_difficult": False},
                 outputs=OUTS)
    np.testing.assert_allclose(got["MAP"], [integral_ap([1, 0, 1, 1], 3)])


def test_map_11point():
    det, label = batch()
    got = run_op("detection_map", {"DetectRes": det, "Label": label},
                 {"class_num": 3, "overlap_threshold": 0.5, "ap_type": "11point"},
                 outputs=OUTS)
    # class 1: precision 1, .5, .67, .75 at recall 1/3, 1/3, 2/3, 1: the best precision at
    # recall >= t is 1 for t = 0 .. .3 and .75 for t = .4 .. 1; class 2: 1
    np.testing.assert_allclose(got["MAP"], [((4 + 7 * 0.75) / 11 + 1.0) / 2], rtol=1e-6)


def test_accumulated_state_equals_one_big_batch():
    det, label = batch()
    attrs = {"class_num": 3, "overlap_threshold": 0.5}
    first = run_op("detection_map", {"DetectRes": det, "Label": label}, attrs, outputs=OUTS,
                   return_lod=True)
    state = {"HasState": np.array([1], np.int32), "PosCount": first["AccumPosCount"],
             "TruePos": first["AccumTruePos"], "FalsePos": first["AccumFalsePos"]}
    second = run_op("detection_map", dict(state, DetectRes=det, Label=label), attrs,
                    outputs=OUTS)
    both_det = LoDTensor(np.concatenate([det._array] * 2), [[0, 3, 5, 8, 10]])
    both_lab = LoDTensor(np.concatenate([label._array] * 2), [[0, 2, 4, 6, 8]])
    whole = run_op("detection_map", {"DetectRes": both_det, "Label": both_lab}, attrs,
                   outputs=OUTS)
    np.testing.assert_allclose(second["MAP"], whole["MAP"])
    # HasState 0: the state is ignored
    fresh = run_op("detection_map", dict(state, HasState=np.array([0], np.int32),
                                         DetectRes=det, Label=label), attrs, outputs=OUTS)
    np.testing.assert_allclose(fresh["MAP"], first["MAP"]._array)


def test_bad_input():
    det, label = batch()
    with pytest.raises(ShapeError, match="DetectRes must be"):
        run_op("detection_map", {"DetectRes": LoDTensor(det._array[:, :4], det._lod),
                                 "Label": label}, {"class_num": 3}, outputs=OUTS)
