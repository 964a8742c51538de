"""case, switch_case, is_empty and autoincreased_step_counter built as Fluid 1.8 programs
call them and run."""
import numpy as np
import pytest

import fluidity as fluid

L = fluid.layers


def _program(build):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        outs = build()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    return exe, main, outs


def _val(v):
    return float(np.asarray(v).reshape(-1)[0])


@pytest.mark.parametrize("x,want", [(0.5, 1.0), (2.5, 2.0), (7.0, 3.0)])
def test_case_takes_the_first_true_branch(x, want):
    def build():
        xv = L.data("x", [1], append_batch_size=False)
        one, two = L.fill_constant([1], "float32", 1.0), L.fill_constant([1], "float32", 3.0)
        return L.case([(L.less_than(xv, one), lambda: L.fill_constant([1], "float32", 1.0)),
                       (L.less_than(xv, two), lambda: L.fill_constant([1], "float32", 2.0))],
                      default=lambda: L.fill_constant([1], "float32", 3.0))
    exe, main, out = _program(build)
    (got,) = exe.run(main, feed={"x": np.array([x], np.float32)}, fetch_list=[out])
    assert _val(got) == want


@pytest.mark.parametrize("index,want", [(0, 10.0), (2, 12.0), (5, 12.0)])
def test_switch_case(index, want):
    def build():
        iv = L.data("i", [1], dtype="int64", append_batch_size=False)
        x = L.fill_constant([1], "float32", 10.0)
        return L.switch_case(iv, {0: lambda: x, 2: lambda: L.scale(x, bias=2.0),
                                  1: lambda: L.scale(x, bias=1.0)})
    exe, main, out = _program(build)
    (got,) = exe.run(main, feed={"i": np.array([index], np.int64)}, fetch_list=[out])
    assert _val(got) == want


def test_switch_case_with_a_list_and_default():
    def build():
        iv = L.fill_constant([1], "int32", 1)
        return L.switch_case(iv, [lambda: L.fill_constant([2], "float32", 0.0),
                                  lambda: L.fill_constant([2], "float32", 1.0)],
                             default=lambda: L.fill_constant([2], "float32", -1.0))
    exe, main, out = _program(build)
    assert exe.run(main, fetch_list=[out])[0].tolist() == [1.0, 1.0]


def test_is_empty_and_step_counter():
    def build():
        x = L.data("x", [-1], append_batch_size=False)
        return [L.is_empty(x), L.autoincreased_step_counter(begin=5, step=2)]
    exe, main, (empty, counter) = _program(build)
    got = exe.run(main, feed={"x": np.zeros(0, np.float32)}, fetch_list=[empty, counter])
    assert got[0].tolist() == [True] and got[1].tolist() == [6]
    got = exe.run(main, feed={"x": np.zeros(3, np.float32)}, fetch_list=[empty, counter])
    assert got[0].tolist() == [False] and got[1].tolist() == [8]


def test_case_and_switch_case_refuse_bad_arguments():
    with pytest.raises(TypeError, match="case: pred_fn_pairs"):
        _program(lambda: L.case([]))
    with pytest.raises(TypeError, match="(?s)branch_index.*switch_case|switch_case.*branch_index"):
        _program(lambda: L.switch_case(L.fill_constant([1], "float32", 0.0), [lambda: None]))
    with pytest.raises(ValueError, match="appears twice"):
        _program(lambda: L.switch_case(L.fill_constant([1], "int32", 0),
                                       [(1, lambda: None), (1, lambda: None)]))
    # a pair of the wrong size, a non-tuple element: TypeError, as Fluid
    with pytest.raises(TypeError, match=r"\(int, fn\) 2-tuple, got \(1, 2, 3\)"):
        _program(lambda: L.switch_case(L.fill_constant([1], "int32", 0), [(1, 2, 3)]))
    with pytest.raises(TypeError, match="2-tuple, got 1"):
        _program(lambda: L.switch_case(L.fill_constant([1], "int32", 0), [1]))


def test_switch_case_on_a_uint8_index():
    def build():
        iv = L.cast(L.fill_constant([1], "int32", 2), "uint8")
        return L.switch_case(iv, {1: lambda: L.fill_constant([1], "float32", 1.0),
                                  2: lambda: L.fill_constant([1], "float32", 2.0)},
                             default=lambda: L.fill_constant([1], "float32", -1.0))
    exe, main, out = _program(build)
    assert _val(exe.run(main, fetch_list=[out])[0]) == 2.0
