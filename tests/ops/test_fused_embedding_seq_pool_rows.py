"""fused_embedding_seq_pool with several ids per LoD row (Fluid's Ids [T, k, 1]: k pooled
blocks side by side), its gradient, and fluid.contrib.fused_embedding_seq_pool end to end."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.core.tensor import LoDTensor
from fluidity.errors import FluidityError
from tests.op_test import check_grad, check_output, run_op

RNG = np.random.default_rng(11)


def _reference(table, ids, lens, pad=-1):
    """Out[i, k*D:(k+1)*D] = sum over the rows of sequence i of table[id in column k]."""
    rows = ids.reshape(len(ids), -1)
    out, start = [], 0
    for n in lens:
        block = rows[start:start + n]
        out.append(np.concatenate([sum((table[v] if v != pad else 0 * table[0])
                                       for v in block[:, k]) for k in range(rows.shape[1])]))
        start += n
    return np.array(out)


@pytest.mark.parametrize("pad", [-1, 3])
def test_two_ids_per_row(pad):
    table = RNG.normal(size=(7, 3))
    ids = np.array([[[4], [3]], [[4], [1]], [[2], [3]], [[6], [0]]], "int64")
    lens = [3, 1]
    want = _reference(table, ids, lens, pad)
    inputs = {"W": table, "Ids": LoDTensor(ids, [[0, 3, 4]])}
    check_output("fused_embedding_seq_pool", inputs, {"Out": want}, {"padding_idx": pad})
    check_grad("fused_embedding_seq_pool", inputs, ["W"], {"padding_idx": pad})


def test_lod_that_does_not_fit_the_rows_is_refused():
    ids = LoDTensor(np.zeros((4, 2, 1), "int64"), [[0, 3, 5]])
    with pytest.raises(FluidityError, match="LoD level 0 ends at 5 but the tensor has 4 rows"):
        run_op("fused_embedding_seq_pool", {"W": np.ones((3, 2), "float32"), "Ids": ids})


def test_contrib_layer_trains():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        words = fluid.layers.data(name="word", shape=[1], dtype="int64", lod_level=1)
        pooled = fluid.contrib.fused_embedding_seq_pool(words, size=[20, 4], param_attr="w",
                                                        padding_idx=-1)
        loss = fluid.layers.mean(fluid.layers.square(pooled))
        fluid.optimizer.SGD(0.1).minimize(loss)
    assert pooled.shape[1] == 4
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    feed = {"word": fluid.create_lod_tensor(RNG.integers(0, 19, (8, 1)).astype("int64"),
                                            [[4, 4]], fluid.CPUPlace())}
    first, = exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    for _ in range(3):
        last, = exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    assert float(np.asarray(last).sum()) < float(np.asarray(first).sum())
