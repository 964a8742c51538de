"""Index inputs are hostile: a compiled scatter_nd_add or gather_nd_grad checks every Index
entry before it uses one, and one out of range stops the run with the kernel's message
(op, index, dim and its size)."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.errors import ExecutionError

from op_test import build_op, compiled_ops


@pytest.mark.parametrize("op_type,inputs,bad", [
    ("scatter_nd_add", {"X": np.zeros((3, 2), np.float32),
                        "Index": np.array([[1], [3]], np.int64),
                        "Updates": np.ones((2, 2), np.float32)}, r"index 3 .* dim 0 of size 3"),
    ("gather_nd_grad", {"X": np.zeros((3, 2), np.float32),
                        "Index": np.array([[0, 1], [1, -3]], np.int32),
                        "Out": np.zeros((2,), np.float32),
                        "Out@GRAD": np.ones((2,), np.float32)}, r"index -3 .* dim 1 of size 2")])
def test_an_index_out_of_range_stops_the_compiled_run_naming_it(op_type, inputs, bad):
    outputs = ["Out"] if op_type == "scatter_nd_add" else ["X@GRAD"]
    main, _, feed, out_vars, _ = build_op(op_type, inputs, {}, outputs)
    assert op_type in compiled_ops(main)
    fetch = [v for vs in out_vars.values() for v in vs]
    with pytest.raises(ExecutionError, match=op_type + r".*" + bad):
        fluid.Executor().run(main, feed=feed, fetch_list=fetch, scope=fluid.Scope())
    compiled = fluid.CompiledProgram(main).with_native_code()
    with pytest.raises(ExecutionError, match=op_type + r".*" + bad):
        fluid.Executor().run(compiled, feed=feed, fetch_list=fetch, scope=fluid.Scope())
