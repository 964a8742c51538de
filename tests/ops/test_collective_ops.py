"""Collective ops (c_allreduce_sum/max/min/prod, c_reduce_sum): the combining rule against
numpy, and the ops in a data-parallel run of hand-built programs."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity import layers
from fluidity.core.tensor import LoDTensor, SelectedRows
from fluidity.errors import ExecutionError
from fluidity.ops.collective_ops import combine


def test_combine_takes_the_replicas_in_order():
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((3, 2)).astype("float32") for _ in range(3)]
    ts = [LoDTensor(x) for x in xs]
    np.testing.assert_array_equal(combine(ts, "sum", "t")._array, (xs[0] + xs[1]) + xs[2])
    np.testing.assert_array_equal(combine(ts, "max", "t")._array, np.maximum.reduce(xs))
    np.testing.assert_array_equal(combine(ts, "min", "t")._array, np.minimum.reduce(xs))
    np.testing.assert_array_equal(combine(ts, "prod", "t")._array, xs[0] * xs[1] * xs[2])
    assert combine(ts, "sum", "t")._array.dtype == np.float32
    with pytest.raises(ExecutionError, match="different shapes"):
        combine([LoDTensor(xs[0]), LoDTensor(xs[0][:2])], "sum", "t")
    sr = combine([SelectedRows([1, 3], 10, np.ones((2, 2))),
                  SelectedRows([3], 10, np.full((1, 2), 2.0))], "sum", "t")
    assert sr.rows.tolist() == [1, 3, 3] and sr.height == 10
    assert sr.value.tolist() == [[1, 1], [1, 1], [2, 2]]
    with pytest.raises(ExecutionError, match="heights"):
        combine([SelectedRows([1], 10, np.ones((1, 2))), SelectedRows([1], 9, np.ones((1, 2)))],
                "sum", "t")


@pytest.mark.parametrize("op_type,reduce", [("c_allreduce_sum", np.add),
                                            ("c_allreduce_max", np.maximum),
                                            ("c_allreduce_min", np.minimum),
                                            ("c_allreduce_prod", np.multiply)])
def test_allreduce_ops_in_a_data_parallel_run(op_type, reduce):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = layers.data("x", [3], dtype="float64")
        out = main.global_block().create_var(name="r", shape=[-1, 3], dtype="float64")
        main.global_block().append_op(type=op_type, inputs={"X": [x]}, outputs={"Out": [out]})
    parts = [np.random.default_rng(k).standard_normal((2, 3)) for k in range(3)]
    cp = fluid.CompiledProgram(main).with_data_parallel(places=fluid.cpu_places(3))
    got = fluid.Executor().run(cp, feed=[{"x": p} for p in parts], fetch_list=[out],
                               return_merged=False)[0]
    want = reduce(reduce(parts[0], parts[1]), parts[2])
    for g in got:
        np.testing.assert_array_equal(g, want)


def test_reduce_sum_gives_the_sum_to_the_root_only():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = layers.data("x", [2], dtype="float64")
        out = main.global_block().create_var(name="r", shape=[-1, 2], dtype="float64")
        main.global_block().append_op(type="c_reduce_sum", inputs={"X": [x]},
                                      outputs={"Out": [out]}, attrs={"root_id": 1})
    parts = [np.full((1, 2), k + 1.0) for k in range(3)]
    cp = fluid.CompiledProgram(main).with_data_parallel(places=fluid.cpu_places(3))
    got = fluid.Executor().run(cp, feed=[{"x": p} for p in parts], fetch_list=[out],
                               return_merged=False)[0]
    assert [g.tolist() for g in got] == [[[1, 1]], [[6, 6]], [[3, 3]]]
