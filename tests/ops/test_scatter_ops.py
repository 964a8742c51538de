"""gather_nd, scatter, scatter_nd_add, unique, unique_with_counts, shard_index, expand_as
(fluidity/ops/scatter.py): forward against numpy, gradients against finite differences,
out-of-range indices named."""
import numpy as np
import pytest

from fluidity.errors import FluidityError
from op_test import check_grad, check_output, run_op

rng = np.random.default_rng(5)


def r(*shape):
    return rng.uniform(-1, 1, size=shape).astype(np.float32)


def test_gather_nd():
    x = r(3, 4, 2)
    idx = np.array([[0, 1], [2, 3], [1, -1]], np.int64)
    want = np.stack([x[0, 1], x[2, 3], x[1, 3]])
    check_output("gather_nd", {"X": x, "Index": idx}, {"Out": want})
    idx1 = np.array([[[2], [0]]], np.int32)             # [1, 2, 1]: whole rows
    check_output("gather_nd", {"X": x, "Index": idx1}, {"Out": x[[2, 0]][None]})
    dup = np.array([[0, 1], [0, 1], [2, 2]], np.int64)  # a repeated index: grads add
    check_grad("gather_nd", {"X": x, "Index": dup}, ["X"])
    with pytest.raises(FluidityError, match="out of range"):
        run_op("gather_nd", {"X": x, "Index": np.array([[3, 0]], np.int64)})


@pytest.mark.parametrize("overwrite", [True, False])
def test_scatter(overwrite):
    x, upd = r(5, 3), r(3, 3)
    ids = np.array([1, 4, 1], np.int64)
    want = x.copy()
    if overwrite:
        want[1], want[4] = upd[2], upd[1]
    else:
        want[1], want[4] = upd[0] + upd[2], upd[1]
    check_output("scatter", {"X": x, "Ids": ids, "Updates": upd}, {"Out": want},
                 {"overwrite": overwrite})
    check_grad("scatter", {"X": x, "Ids": ids, "Updates": upd}, ["X", "Updates"],
               {"overwrite": overwrite})


def test_scatter_nd_add():
    x, upd = r(4, 3), r(3, 3)
    idx = np.array([[1], [3], [1]], np.int64)
    want = x.copy()
    np.add.at(want, [1, 3, 1], upd)
    check_output("scatter_nd_add", {"X": x, "Index": idx, "Updates": upd}, {"Out": want})
    idx2 = np.array([[0, 2], [3, 1]], np.int64)
    upd2 = r(2)
    check_grad("scatter_nd_add", {"X": x, "Index": idx2, "Updates": upd2}, ["X", "Updates"])


def test_an_empty_last_index_dim_addresses_the_whole_tensor():
    # Index [..., 0]: each index row picks all of X (Fluid 1.8): gather_nd repeats X,
    # scatter_nd_add adds every update to it
    x, upd = r(3, 2), r(2, 3, 2)
    idx = np.zeros((2, 0), np.int64)
    check_output("gather_nd", {"X": x, "Index": idx}, {"Out": np.stack([x, x])})
    check_output("scatter_nd_add", {"X": x, "Index": idx, "Updates": upd},
                 {"Out": x + upd[0] + upd[1]})
    check_grad("scatter_nd_add", {"X": x, "Index": idx, "Updates": upd}, ["X", "Updates"])
    check_grad("gather_nd", {"X": x, "Index": idx}, ["X"])


def test_scatter_nd_add_refuses_updates_of_a_wrong_shape_when_built():
    import fluidity as fluid
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        ref = fluid.data("ref", [3, 4, 5], "float32")
        idx = fluid.data("idx", [2, 1], "int32")
        with pytest.raises(FluidityError, match="Updates has wrong shape"):
            fluid.layers.scatter_nd_add(ref, idx, fluid.data("u", [2, 4, 6], "float32"))
        with pytest.raises(FluidityError, match=r"Input\(Index\).shape\[-1\]"):
            fluid.layers.scatter_nd_add(ref, fluid.data("i4", [2, 4], "int32"),
                                        fluid.data("u4", [2], "float32"))
        with pytest.raises(ValueError, match="same data type"):
            fluid.layers.scatter_nd_add(ref, idx, fluid.data("u64", [2, 4, 5], "float64"))


def test_unique_keeps_first_occurrence_order():
    x = np.array([2, 3, 3, 1, 5, 3], np.int64)
    got = run_op("unique", {"X": x}, {"dtype": 2})
    assert got["Out"].tolist() == [2, 3, 1, 5] and got["Index"].tolist() == [0, 1, 1, 2, 3, 1]
    assert got["Index"].dtype == np.int32
    got = run_op("unique_with_counts", {"X": x}, {"dtype": 3})
    assert got["Count"].tolist() == [1, 3, 1, 1] and got["Count"].dtype == np.int64


def test_shard_index():
    x = np.array([[1], [6], [12], [19]], np.int64)
    check_output("shard_index", {"X": x}, {"Out": np.array([[-1], [-1], [2], [9]])},
                 {"index_num": 20, "nshards": 2, "shard_id": 1})
    with pytest.raises(FluidityError, match="shard_index"):
        run_op("shard_index", {"X": x}, {"index_num": 10, "nshards": 2, "shard_id": 0})


def test_expand_as():
    x, t = r(2, 1, 3), r(4, 2, 3)
    check_output("expand_as", {"X": x, "target_tensor": t}, {"Out": np.tile(x, (2, 2, 1))})
    check_grad("expand_as", {"X": x, "target_tensor": t}, ["X"])
