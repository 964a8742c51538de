"""multiplex and argsort_grad compiled: an id or index from a feed outside its bound stops
the compiled run with the op's error naming it and the bound (checked before anything is
read or written), for multiplex's forward and gradient ops and argsort's gradient op."""
import numpy as np
import pytest
from op_test import build_op

import fluidity as fluid
from fluidity.errors import ExecutionError


@pytest.mark.parametrize("bad", [3, -1])
def test_a_multiplex_id_out_of_range_stops_the_compiled_run_naming_it(bad):
    ids = np.array([[0], [bad], [2]], np.int64)
    xs = [(f"x{i}", np.full((3, 2), i, np.float32)) for i in range(3)]
    main, startup, feed, out_vars, _ = build_op("multiplex", {"Ids": ids, "X": xs}, {},
                                                ["Out"])
    fetch = out_vars["Out"]
    with pytest.raises(ExecutionError, match="multiplex"):
        fluid.Executor().run(main, feed=feed, fetch_list=fetch, scope=fluid.Scope())
    compiled = fluid.CompiledProgram(main).with_native_code()
    with pytest.raises(ExecutionError, match=rf"'multiplex'.*Ids\[1\] = {bad} is outside "
                                             rf"\[0, 3\)"):
        fluid.Executor().run(compiled, feed=feed, fetch_list=fetch, scope=fluid.Scope())


def test_a_multiplex_grad_id_out_of_range_stops_the_compiled_run_naming_it():
    main = fluid.Program()
    block = main.global_block()
    names = ["ids", "d", "x0", "x1"]
    for n, (shape, dt) in zip(names, [([2, 1], "int32"), ([2, 3], "float32"),
                                      ([2, 3], "float32"), ([2, 3], "float32")]):
        block.create_var(name=n, shape=shape, dtype=dt)
    for n in ("g0", "g1"):
        block.create_var(name=n, shape=[2, 3], dtype="float32")
    block.append_op("multiplex_grad", {"Ids": ["ids"], "X": ["x0", "x1"], "Out@GRAD": ["d"]},
                    {"X@GRAD": ["g0", "g1"]}, {})
    feed = {"ids": np.array([[1], [5]], np.int32), "d": np.ones((2, 3), np.float32),
            "x0": np.zeros((2, 3), np.float32), "x1": np.zeros((2, 3), np.float32)}
    compiled = fluid.CompiledProgram(main).with_native_code()
    with pytest.raises(ExecutionError, match=r"'multiplex_grad'.*Ids\[1\] = 5 is outside "
                                             r"\[0, 2\)"):
        fluid.Executor().run(compiled, feed=feed, fetch_list=["g0", "g1"],
                             scope=fluid.Scope())


def test_an_argsort_grad_index_out_of_range_stops_the_compiled_run_naming_it():
    main = fluid.Program()
    block = main.global_block()
    for n, dt in (("x", "float32"), ("ids", "int64"), ("d", "float32"), ("g", "float32")):
        block.create_var(name=n, shape=[2, 3], dtype=dt)
    block.append_op("argsort_grad", {"X": ["x"], "Indices": ["ids"], "Out@GRAD": ["d"]},
                    {"X@GRAD": ["g"]}, {"axis": -1})
    feed = {"x": np.zeros((2, 3), np.float32), "d": np.ones((2, 3), np.float32),
            "ids": np.array([[2, 0, 1], [0, 3, 1]], np.int64)}
    compiled = fluid.CompiledProgram(main).with_native_code()
    with pytest.raises(ExecutionError, match=r"'argsort_grad'.*Indices holds 3, outside "
                                             r"\[0, 3\)"):
        fluid.Executor().run(compiled, feed=feed, fetch_list=["g"], scope=fluid.Scope())
