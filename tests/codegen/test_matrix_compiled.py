"""linspace compiled from constant Start, Stop and Num (fill_constant before it), in every
dtype it takes, as the kernel computes it; from a fed Num it runs interpreted. roll with a
constant ShiftsTensor compiles as the kernel rolls."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.codegen.lower import Lowering


def _where(main, op_type):
    return {t: w for _, t, w, _ in Lowering(main, 0).explain()}[op_type]


def _run_both(main, fetch, feed=None):
    exe = fluid.Executor()
    want = exe.run(main, feed=feed or {}, fetch_list=fetch, scope=fluid.Scope())
    got = exe.run(fluid.CompiledProgram(main).with_native_code(), feed=feed or {},
                  fetch_list=fetch, scope=fluid.Scope())
    return got, want


def _linspace(start, stop, num, dtype, fed=False):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        fc = fluid.layers.fill_constant
        n = fluid.layers.data("num", [1], dtype="int32", append_batch_size=False) if fed \
            else fc([1], "int32", num)
        block = main.global_block()
        out = block.create_var(name="out", dtype=dtype)
        block.append_op("linspace", {"Start": [fc([1], "float32", start)],
                                     "Stop": [fc([1], "float32", stop)], "Num": [n]},
                        {"Out": [out]}, {"dtype": out.dtype})
    return main, out


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("start,stop,num", [(0.0, 1.0, 7), (3.5, -2.25, 10), (-4.0, 9.0, 1),
                                            (2.0, 5.0, 0), (-3.7, 3.7, 2)])
def test_linspace_of_constants_compiles_as_the_kernel(dtype, start, stop, num):
    main, out = _linspace(start, stop, num, dtype)
    assert _where(main, "linspace") != "python"
    got, want = _run_both(main, [out])
    assert got[0].dtype == want[0].dtype
    np.testing.assert_array_equal(got[0], want[0])


def test_linspace_of_a_fed_num_runs_interpreted():
    main, out = _linspace(0.0, 1.0, None, "float32", fed=True)
    assert _where(main, "linspace") == "python"
    got, want = _run_both(main, [out], {"num": np.array([5], np.int32)})
    np.testing.assert_array_equal(got[0], want[0])


def test_roll_by_a_constant_shifts_tensor_compiles_as_the_kernel():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        x = fluid.layers.data("x", [3, 4], append_batch_size=False)
        shifts = fluid.layers.fill_constant([2], "int64", -5)
        block = main.global_block()
        out = block.create_var(name="out", dtype="float32")
        block.append_op("roll", {"X": [x], "ShiftsTensor": [shifts]}, {"Out": [out]},
                        {"axis": [0, 1], "shifts": [1, 1]})
    assert _where(main, "roll") != "python"
    feed = {"x": np.arange(12, dtype=np.float32).reshape(3, 4)}
    got, want = _run_both(main, [out], feed)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(want[0], np.roll(feed["x"], [-5, -5], [0, 1]))
