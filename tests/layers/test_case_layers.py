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


@pytest.mark.parametrize("sid", [0, 1])
def test_minimize_inside_a_case_branch_updates_only_when_the_branch_runs(sid):
    """Fluid 1.8: an optimizer's minimize in a branch appends the gradient and update ops to
    a backward block of the branch, which a conditional_block_grad after the branch runs
    under the branch's condition."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [2, 3], "float32")
        switch = fluid.data("sid", [1], "int32")
        sgd = fluid.optimizer.SGD(0.5)

        def branch(name):
            def fn():
                h = L.fc(x, 1, param_attr=fluid.ParamAttr(name=name), bias_attr=False)
                sgd.minimize(L.mean(h))
            return fn
        L.case([(switch == L.fill_constant([1], "int32", 1), branch("w1"))],
               default=branch("w2"))
    assert [op.type for op in main.global_block().ops].count("conditional_block_grad") == 2
    grad_blocks = [b for b in main.blocks if b.forward_block_idx >= 0]
    assert [b.forward_block_idx for b in grad_blocks] == [1, 3]
    assert [op.type for op in grad_blocks[0].ops][-1] == "sgd"
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    w = {n: np.array(scope.find_var(n).get_tensor()) for n in ("w1", "w2")}
    xv = np.arange(6, dtype="float32").reshape(2, 3)
    exe.run(main, feed={"x": xv, "sid": np.array([sid], "int32")}, fetch_list=[], scope=scope)
    # d mean(x @ w) / dw = mean of x's rows; one SGD step of lr 0.5
    step = -0.5 * xv.mean(0).reshape(3, 1)
    trained, kept = ("w1", "w2") if sid == 1 else ("w2", "w1")
    np.testing.assert_allclose(np.array(scope.find_var(trained).get_tensor()) - w[trained],
                               step, rtol=1e-6)
    np.testing.assert_array_equal(np.array(scope.find_var(kept).get_tensor()), w[kept])


def test_append_backward_of_a_loss_in_a_sub_block_builds_its_backward_block():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        main._create_block()                    # current block 1, as Fluid programs may leave
        x = fluid.data("x", [None, 4], "float32")
        loss = L.mean(L.fc(x, 2, param_attr=fluid.ParamAttr(name="w"),
                            bias_attr=fluid.ParamAttr(name="b")))
        pairs = fluid.backward.append_backward(loss)
    assert main.current_block_idx == 1 and loss.block.idx == 1
    grad_block = main.blocks[-1]
    assert grad_block.forward_block_idx == 1 and grad_block.parent_idx == 0
    assert sorted(p.name for p, _ in pairs) == ["b", "w"]
    assert all(g.block is grad_block for _, g in pairs)
    assert [p.name for p in main.all_parameters()] == ["w", "b"]
