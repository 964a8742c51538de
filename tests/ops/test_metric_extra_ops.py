"""precision_recall (fluidity/ops/precision_recall.py), ref_by_trainer_id
(fluidity/ops/trainer_ref.py) and lookup_table_dequant (fluidity/ops/quant_lookup.py)
against references written out by hand."""
import struct

import numpy as np
import pytest

from op_test import run_op
from fluidity.errors import ExecutionError


def test_precision_recall_by_hand():
    # 2 classes; predictions 0,0,1 for labels 0,1,1 with weights 1,2,3
    idx = np.array([[0], [0], [1]], np.int32)
    lab = np.array([[0], [1], [1]], np.int32)
    w = np.array([[1], [2], [3]], np.float32)
    probs = np.full((3, 1), 0.9, np.float32)
    # class 0: TP 1, FP 2, TN 3, FN 0; class 1: TP 3, FP 0, TN 1, FN 2
    states = np.array([[1, 2, 3, 0], [3, 0, 1, 2]], np.float32)
    p = (1 / 3 + 1) / 2
    r = (1 + 3 / 5) / 2
    mp, mr = 4 / 6, 4 / 6
    want = np.array([p, r, 2 * p * r / (p + r), mp, mr, 2 * mp * mr / (mp + mr)], np.float32)
    got = run_op("precision_recall", {"MaxProbs": probs, "Indices": idx, "Labels": lab,
                                      "Weights": w}, {"class_number": 2})
    np.testing.assert_allclose(got["AccumStatesInfo"], states)
    np.testing.assert_allclose(got["BatchMetrics"], want, rtol=1e-6)
    before = np.array([[1, 0, 0, 0], [0, 0, 0, 1]], np.float32)
    got = run_op("precision_recall", {"MaxProbs": probs, "Indices": idx, "Labels": lab,
                                      "Weights": w, "StatesInfo": before}, {"class_number": 2})
    np.testing.assert_allclose(got["BatchMetrics"], want, rtol=1e-6)
    np.testing.assert_allclose(got["AccumStatesInfo"], states + before)


def test_precision_recall_refuses_bad_class():
    with pytest.raises(ExecutionError, match="Labels holds class 3"):
        run_op("precision_recall", {"MaxProbs": np.ones((1, 1), np.float32),
                                    "Indices": np.zeros((1, 1), np.int32),
                                    "Labels": np.full((1, 1), 3, np.int32)},
               {"class_number": 2})


def test_ref_by_trainer_id():
    xs = [(f"p{i}", np.full((2, 2), i, np.float32)) for i in range(3)]
    got = run_op("ref_by_trainer_id", {"X": xs, "TrainerId": np.array([2], np.int64)})
    np.testing.assert_array_equal(got["Out"], xs[2][1])
    with pytest.raises(ExecutionError, match="TrainerId 3 is out of range"):
        run_op("ref_by_trainer_id", {"X": xs, "TrainerId": np.array([3], np.int64)})


def test_lookup_table_dequant():
    table = np.random.default_rng(1).uniform(0, 1, (5, 4)).astype(np.float32)
    ids = np.array([[3], [0], [4]], np.int64)

    def row(i):
        lo, hi = table[i, 0], table[i, 1]
        return [b * (hi - lo) / 256 + lo for v in table[i, 2:] for b in struct.pack("<f", v)]
    got = run_op("lookup_table_dequant", {"W": table, "Ids": ids}, {"padding_idx": 0})
    want = np.array([row(3), [0.0] * 8, row(4)], np.float32)
    np.testing.assert_allclose(got["Out"], want, rtol=1e-6)
    with pytest.raises(ExecutionError, match="id 5 is out of range"):
        run_op("lookup_table_dequant", {"W": table, "Ids": np.array([[5]], np.int64)})
