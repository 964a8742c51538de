"""fluid.device_guard records Fluid 1.8's `op_device` on the ops built in its context; the
program still runs on the executor's place (a CPU here)."""
import warnings

import numpy as np
import pytest

import fluidity as fluid

L = fluid.layers


def test_ops_in_the_context_get_the_device_and_the_program_runs():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.fill_constant([2, 3], "float32", 0.5)
        with fluid.device_guard("cpu"):
            y = L.scale(x, 2.0)
            with fluid.device_guard("gpu"):
                z = L.elementwise_add(y, x)
            w = L.relu(z)
    devices = {op.type: op.attr("op_device") for op in main.global_block().ops}
    assert devices == {"fill_constant": "", "scale": "cpu", "elementwise_add": "gpu",
                       "relu": "cpu"}
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    out, = exe.run(main, fetch_list=[w])
    np.testing.assert_array_equal(out, np.full([2, 3], 1.5, "float32"))


def test_an_op_without_a_kernel_gets_no_device_and_a_warning():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        i = L.fill_constant([1], "int64", 0)
        n = L.fill_constant([1], "int64", 3)
        cond = L.less_than(i, n)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with fluid.device_guard("cpu"):
                loop = L.While(cond=cond)
                with loop.block():
                    L.increment(i, in_place=True)
                    L.less_than(i, n, cond=cond)
    assert any("while" in str(m.message) for m in w)
    op = [op for op in main.global_block().ops if op.type == "while"][0]
    assert op.attr("op_device") == ""
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    assert exe.run(main, fetch_list=[i])[0].tolist() == [3]


def test_an_unknown_device_is_a_value_error_and_builds_nothing():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        with pytest.raises(ValueError, match="cpu1"):
            with fluid.device_guard("cpu1"):
                L.fill_constant([1], "float32", 0.2)
    assert main.global_block().ops == []


def test_force_cpu_with_a_device_guard_warns_as_fluid():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with fluid.device_guard("gpu"):
                x = L.fill_constant([1], "float32", 3.0, force_cpu=True)
                y = L.fill_constant([1], "float32", 4.0)
                L.less_than(x, y, force_cpu=False)
    assert sum("force_cpu" in str(m.message) for m in w) == 2
    assert all(op.attr("op_device") == "gpu" for op in main.global_block().ops)
