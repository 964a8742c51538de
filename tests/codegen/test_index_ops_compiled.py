"""Hostile indices fed to the compiled index ops (gather, index_select, index_sample,
scatter and their gradients): every index is checked in C before it is used, and the first
out of range stops the run with the op's error, naming the index and the bound as the
interpreter does, never a read or write outside X."""
import numpy as np
import pytest
from codegen_samples import f32
from op_test import build_op, compiled_ops

import fluidity as fluid
from fluidity.errors import ExecutionError

CASES = {   # op: (inputs, attrs, the message both paths give)
    "gather": ({"X": f32(5, 3), "Index": np.array([1, 7, 2], np.int64)}, {},
               r"gather: index 7 is out of range for a dim of size 5"),
    "gather negative": ({"X": f32(5, 3), "Index": np.array([-6], np.int32)}, {},
                        r"gather: index -6 is out of range for a dim of size 5"),
    "index_select": ({"X": f32(2, 4), "Index": np.array([0, 4], np.int64)}, {"dim": 1},
                     r"index_select: index 4 is out of range for a dim of size 4"),
    "index_sample": ({"X": f32(2, 3), "Index": np.array([[0, 1], [3, 0]], np.int64)}, {},
                     r"index_sample: Index holds 3, outside \[0, 3\) \(X's columns\)"),
    "index_sample negative": ({"X": f32(2, 3), "Index": np.array([[0, -1], [1, 0]],
                                                                np.int32)}, {},
                              r"index_sample: Index holds -1, outside \[0, 3\)"),
    "scatter": ({"X": f32(3, 2), "Ids": np.array([0, 3], np.int64), "Updates": f32(2, 2)},
                {}, r"scatter: id 3 is out of range for 3 rows"),
    "scatter adding": ({"X": f32(3, 2), "Ids": np.array([-4], np.int32), "Updates": f32(1, 2)},
                       {"overwrite": False}, r"scatter: id -4 is out of range for 3 rows"),
}


def _run(main, feed, fetch, compiled):
    prog = fluid.CompiledProgram(main).with_native_code() if compiled else main
    return fluid.Executor().run(prog, feed=feed, fetch_list=fetch, scope=fluid.Scope())


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_index_out_of_range_stops_the_compiled_run_as_the_interpreter(case):
    inputs, attrs, message = CASES[case]
    op_type = case.split()[0]
    main, startup, feed, out_vars, _ = build_op(op_type, inputs, attrs, ["Out"])
    fetch = [v for vs in out_vars.values() for v in vs]
    assert op_type in compiled_ops(main)
    for compiled in (False, True):
        with pytest.raises(ExecutionError, match=message):
            _run(main, feed, fetch, compiled)
