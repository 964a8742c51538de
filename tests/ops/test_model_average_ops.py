"""average_accumulates (fluidity/ops/model_average.py): the sums and counters over steps, a
window closing when it is long enough."""
import numpy as np

from test_optimizers import OneOp

SHAPE = (4, 3)


def test_average_accumulates_window():
    p = np.ones(SHAPE)
    op = OneOp("average_accumulates", {
        "param": p, "in_sum_1": np.zeros(SHAPE), "in_sum_2": np.zeros(SHAPE),
        "in_sum_3": np.zeros(SHAPE), "in_num_accumulates": np.array([0], np.int64),
        "in_old_num_accumulates": np.array([0], np.int64),
        "in_num_updates": np.array([0], np.int64)},
        {"average_window": 0.5, "min_average_window": 2, "max_average_window": 3})
    # the op writes new persistable vars named after its outputs; feed them back each step
    for step in range(1, 6):
        op.run(param=p * step)
        for s in ("sum_1", "sum_2", "sum_3", "num_accumulates", "old_num_accumulates",
                  "num_updates"):
            op.set("in_" + s, op["out_" + s])
    # a window closes at step 2 (2 >= min 2 and >= 0.5 * 2 updates) and at step 4; sum_3
    # holds the last closed window (steps 3, 4), sum_1 the open one (step 5)
    np.testing.assert_allclose(op["out_sum_3"], 7 * p)
    np.testing.assert_allclose(op["out_sum_1"], 5 * p)
    assert op["out_num_accumulates"].tolist() == [1] and op["out_num_updates"].tolist() == [5]
    assert op["out_old_num_accumulates"].tolist() == [2]
