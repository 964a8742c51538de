"""similarity_focus (fluidity/ops/similarity_focus.py) and fluid.layers.similarity_focus:
masks worked out by hand for each axis, argument errors."""
import numpy as np
import pytest

import fluidity as fluid
from op_test import check_output


def test_axis1_by_hand():
    # slice X[0, 0] = [[0.8, 0.1], [0.4, 0.5]]: 0.8 at (0, 0), then 0.5 at (1, 1)
    x = np.zeros((1, 2, 2, 2), np.float32)
    x[0, 0] = [[0.8, 0.1], [0.4, 0.5]]
    x[0, 1] = [[0.0, 0.9], [0.9, 0.0]]       # another channel: not chosen, still marked
    want = np.broadcast_to(np.array([[1, 0], [0, 1]], np.float32), (1, 2, 2, 2))
    check_output("similarity_focus", {"X": x}, {"Out": want}, {"axis": 1, "indexes": [0]})
    # both channels: the OR of [[1,0],[0,1]] and [[0,1],[1,0]]
    check_output("similarity_focus", {"X": x}, {"Out": np.ones((1, 2, 2, 2), np.float32)},
                 {"axis": 1, "indexes": [0, 1]})


@pytest.mark.parametrize("axis", [2, 3])
def test_other_axes_match_axis1_after_moving(axis):
    x = np.random.default_rng(2).random((2, 3, 4, 5)).astype(np.float32)
    moved = np.moveaxis(x, axis, 1)
    want = fluid_focus_axis1(moved)
    check_output("similarity_focus", {"X": x}, {"Out": np.moveaxis(want, 1, axis)},
                 {"axis": axis, "indexes": [1]})


def fluid_focus_axis1(x):
    out = np.zeros_like(x)
    for b in range(x.shape[0]):
        plane = x[b, 1].copy()
        rows, cols = set(), set()
        for k in np.argsort(-plane, axis=None):
            i, j = divmod(int(k), plane.shape[1])
            if i in rows or j in cols:
                continue
            rows.add(i), cols.add(j)
            out[b, :, i, j] = 1
    return out


def test_layer_and_its_errors():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 2, 2, 2], "float32")
        out = fluid.layers.similarity_focus(x, axis=1, indexes=[0])
        with pytest.raises(ValueError, match="axis must be 1, 2 or 3"):
            fluid.layers.similarity_focus(x, axis=0, indexes=[0])
        with pytest.raises(TypeError, match="indexes must be list"):
            fluid.layers.similarity_focus(x, axis=1, indexes=0)
        with pytest.raises(ValueError, match="indexes can not be empty"):
            fluid.layers.similarity_focus(x, axis=1, indexes=[])
    v, = fluid.Executor().run(main, feed={"x": np.arange(8, dtype=np.float32).reshape(
        1, 2, 2, 2)}, fetch_list=[out])
    np.testing.assert_array_equal(v[0, 0], [[1, 0], [0, 1]])


def test_index_out_of_range_names_op_and_axis():
    from fluidity.errors import ExecutionError
    from op_test import run_op
    with pytest.raises(ExecutionError, match="similarity_focus: index 2 is out of range for "
                                             "axis 1"):
        run_op("similarity_focus", {"X": np.zeros((1, 2, 2, 2), np.float32)},
               {"axis": 1, "indexes": [2]})
