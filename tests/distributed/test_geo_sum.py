"""The GEO pserver's block `sum(X=[<block>, <block>.delta]) -> <block>` with a SelectedRows
delta adds the delta's rows to the block (no dense copy of the delta): the same bits as the
dense add, duplicates and odd shapes going the dense way."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.core.tensor import LoDTensor, SelectedRows
from fluidity.ops.math import Sum


def _dense(sr, shape):
    d = np.zeros(shape, np.float32)
    np.add.at(d, np.asarray(sr.rows), np.asarray(sr.value))
    return d


@pytest.mark.parametrize("rows", [[3, 0, 7], [5, 5, 1], []])
def test_sum_of_block_and_selected_rows_equals_the_dense_add(rows):
    rng = np.random.RandomState(len(rows))
    block = rng.rand(9, 4).astype("float32")
    delta = SelectedRows(rows, 9, rng.rand(len(rows), 4).astype("float32"))
    other = rng.rand(9, 4).astype("float32")
    kept = block.copy()
    got = Sum.kernel([LoDTensor(block), delta, LoDTensor(other)])
    np.testing.assert_array_equal(np.array(got), (block + _dense(delta, (9, 4))) + other)
    np.testing.assert_array_equal(block, kept)          # the input is not written


def test_sum_refuses_rows_out_of_the_block():
    block = LoDTensor(np.zeros((4, 2), "float32"))
    with pytest.raises(Exception):
        Sum.kernel([block, SelectedRows([4], 4, np.ones((1, 2), "float32"))])


def test_geo_server_block_adds_the_delta_rows():
    """The pserver block as the GEO transpiler writes it, run by the executor."""
    prog = fluid.Program()
    b = prog.global_block()
    b.create_var(name="w.block0", shape=[1000, 8], dtype="float32", persistable=True)
    b.create_var(name="w.block0.delta", shape=[1000, 8], dtype="float32",
                 type=fluid.core.VarDesc.VarType.SELECTED_ROWS, persistable=True)
    b.append_op(type="sum", inputs={"X": ["w.block0", "w.block0.delta"]},
                outputs={"Out": ["w.block0"]})
    rng = np.random.RandomState(0)
    w = rng.rand(1000, 8).astype("float32")
    rows = np.array([999, 2, 500], "int64")
    delta = SelectedRows(rows, 1000, rng.rand(3, 8).astype("float32"))
    scope = fluid.Scope()
    scope.var("w.block0").value = LoDTensor(w.copy())
    scope.var("w.block0.delta").value = delta
    fluid.Executor(fluid.CPUPlace()).run(prog, scope=scope)
    want = w + _dense(delta, w.shape)
    np.testing.assert_array_equal(np.array(scope.find_var("w.block0").get_tensor()), want)
