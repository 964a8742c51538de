"""positive_negative_pair against a pair-by-pair loop written here: per query, pairs of
different labels counted concordant / discordant / tied by the scored column, weighted by
the pair's mean weight, plus the accumulated counts; bad shapes are refused by name."""
import itertools

import numpy as np
import pytest

from fluidity.errors import FluidityError
from tests.op_test import check_output


def loop_reference(score, label, query, weight, column):
    pos = neg = neu = 0.0
    rows = list(range(len(label)))
    for i, j in itertools.combinations(rows, 2):
        if query[i, 0] != query[j, 0] or label[i, 0] == label[j, 0]:
            continue
        w = (weight[i, 0] + weight[j, 0]) / 2
        d = (score[i, column] - score[j, column]) * (label[i, 0] - label[j, 0])
        if score[i, column] == score[j, column]:
            neu += w
        elif d > 0:
            pos += w
        else:
            neg += w
    return pos, neg, neu


@pytest.mark.parametrize("accumulate", [False, True])
def test_counts_pairs_per_query(accumulate):
    rng = np.random.default_rng(0)
    n = 30
    score = rng.integers(0, 4, (n, 2)).astype("float32")     # ties happen
    label = rng.integers(0, 3, (n, 1)).astype("float32")
    query = rng.integers(0, 4, (n, 1)).astype("int64")
    weight = rng.uniform(0.5, 2.0, (n, 1)).astype("float32")
    want = loop_reference(score, label, query, weight, 0)
    inputs = {"Score": score, "Label": label, "QueryID": query, "Weight": weight}
    acc = (3.0, 5.0, 7.0) if accumulate else (0.0, 0.0, 0.0)
    if accumulate:
        for slot, v in zip(("AccumulatePositivePair", "AccumulateNegativePair",
                            "AccumulateNeutralPair"), acc):
            inputs[slot] = np.array([v], "float32")
    check_output("positive_negative_pair", inputs,
                 {"PositivePair": np.array([want[0] + acc[0]], "float32"),
                  "NegativePair": np.array([want[1] + acc[1]], "float32"),
                  "NeutralPair": np.array([want[2] + acc[2]], "float32")},
                 attrs={"column": 0})
    assert want[0] > 0 and want[1] > 0 and want[2] > 0          # every kind occurred


def test_a_column_outside_score_is_refused():
    x = np.zeros((4, 2), "float32")
    with pytest.raises(FluidityError, match="column 2"):
        check_output("positive_negative_pair",
                     {"Score": x, "Label": x[:, :1], "QueryID": np.zeros((4, 1), "int64")},
                     {"PositivePair": np.zeros(1, "float32")}, attrs={"column": 2})
