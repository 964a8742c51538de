"""Multi-block programs compiled: `while` loops and `conditional_block` branches (cond,
nested loops, a branch inside a loop) become C++ loops and ifs in the same native segment
as the ops around them, with the interpreter's results; what cannot be compiled (a carried
value that changes shape, a loop whose gradient reads its step scopes) stays interpreted,
explain() says why, and the results are the interpreter's."""
import numpy as np
import pytest
from programs import counting_while

import fluidity as fluid
from fluidity.codegen.lower import Lowering
from fluidity.errors import ExecutionError

L = fluid.layers


loop = counting_while


def build(fn):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        outs = fn()
    return main, startup, outs


def run_both(main, startup, outs, feed=None):
    """(interpreted, compiled) fetches of one run each, from the same parameters."""
    got = []
    for compiled in (False, True):
        exe, scope = fluid.Executor(), fluid.Scope()
        exe.run(startup, scope=scope)
        prog = fluid.CompiledProgram(main).with_native_code() if compiled else main
        got.append(exe.run(prog, feed=feed or {}, fetch_list=outs, scope=scope))
    return got


def where(main, op_type):
    """explain() rows of block 0's ops of `op_type`: [(where, why)]."""
    return [(w, why) for _, t, w, why in Lowering(main, 0).explain() if t == op_type]


def assert_same(got, want, exact=True):
    for g, w in zip(got, want):
        if exact:
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_a_counting_while_compiles_to_one_loop_with_the_interpreters_results():
    def fn():
        x = L.data("x", [4], dtype="float32")
        w = L.create_parameter([4, 4], "float32", name="w",
                               default_initializer=fluid.initializer.Uniform(-0.5, 0.5, seed=3))
        h = L.assign(x)
        total = L.fill_constant([1], "int64", 0)

        def body(i):
            L.assign(L.tanh(L.matmul(h, w)) + h, h)
            L.assign(total + i, total)
        i = loop(5, body)
        return [h, total, i]
    main, startup, outs = build(fn)
    [(w, why)] = where(main, "while")
    assert w.startswith("segment") and why == "a loop over block 1 (8 ops), at most 5 passes"
    want, got = run_both(main, startup, outs, {"x": np.linspace(-1, 1, 12).reshape(3, 4)
                                              .astype("float32")})
    assert got[1].tolist() == [10] and got[2].tolist() == [5]
    assert_same(got, want, exact=False)


def test_a_while_that_never_runs_leaves_its_values_alone():
    def fn():
        x = L.fill_constant([2], "float32", 3.0)
        loop(0, lambda i: L.assign(x * 2.0, x))
        return [x]
    main, startup, outs = build(fn)
    assert where(main, "while")[0][0].startswith("segment")
    want, got = run_both(main, startup, outs)
    assert got[0].tolist() == [3.0, 3.0]
    assert_same(got, want)


def test_nested_whiles_to_depth_3_read_every_enclosing_blocks_values():
    def fn():
        acc = L.fill_constant([1], "int64", 0)
        hundred = L.fill_constant([1], "int64", 100)

        def outer(i):
            base = i * hundred

            def middle(j):
                mid = base + j * 10
                loop(j + 1, lambda k: L.assign(acc + mid + k, acc))
            loop(i + 1, middle)
        loop(3, outer)
        return [acc]
    main, startup, outs = build(fn)
    assert where(main, "while")[0][0].startswith("segment")
    want, got = run_both(main, startup, outs)
    assert got[0].tolist() == [sum(100 * i + 10 * j + k for i in range(3)
                                   for j in range(i + 1) for k in range(j + 1))]
    assert_same(got, want)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_cond_runs_the_branch_the_data_says(sign):
    def fn():
        x = L.data("x", [3], dtype="float32")
        pred = L.reduce_mean(x) > 0.0
        out = L.cond(pred, lambda: L.scale(x, 2.0), lambda: L.scale(x, 1.0, bias=-1.0))
        return [out]
    main, startup, outs = build(fn)
    branches = where(main, "conditional_block")
    assert len(branches) == 2 and all(w.startswith("segment") for w, _ in branches), branches
    feed = {"x": sign * np.arange(1, 7, dtype="float32").reshape(2, 3)}
    want, got = run_both(main, startup, outs, feed)
    np.testing.assert_array_equal(got[0], feed["x"] * 2 if sign > 0 else feed["x"] - 1)
    assert_same(got, want)


def test_a_branch_inside_a_loop_and_values_only_a_branch_sets():
    """Odd steps add i, even steps subtract it (cond's outputs are set by one branch each,
    and selected as the flag says)."""
    def fn():
        acc = L.fill_constant([1], "float32", 0.5)
        odd = L.fill_constant([1], "bool", False)

        def body(i):
            f = L.cast(i, "float32")
            L.assign(L.cond(odd, lambda: acc + f, lambda: acc - f), acc)
            L.assign(L.logical_not(odd), odd)
        loop(6, body)
        return [acc]
    main, startup, outs = build(fn)
    assert where(main, "while")[0][0].startswith("segment")
    want, got = run_both(main, startup, outs)
    assert got[0].tolist() == [0.5 - 0 + 1 - 2 + 3 - 4 + 5]
    assert_same(got, want)


def test_a_carried_value_that_changes_shape_stays_interpreted():
    def fn():
        x = L.fill_constant([1, 2], "float32", 1.0)
        loop(3, lambda i: L.assign(L.concat([x, x], axis=0), x))
        return [x]
    main, startup, outs = build(fn)
    [(w, why)] = where(main, "while")
    assert w == "python" and "changes from float[1, 2] to float[2, 2]" in why, why
    want, got = run_both(main, startup, outs)
    assert got[0].shape == (8, 2)
    assert_same(got, want)


def _carried_over_two_batches():
    """h starts as x (x's rows) and each pass makes it y + h (y's rows): two dims the
    segment reads on entry, equal only when the feeds are."""
    x = L.data("x", [-1, 3], dtype="float32", append_batch_size=False)
    y = L.data("y", [-1, 3], dtype="float32", append_batch_size=False)
    h = L.assign(x)
    loop(3, lambda i: L.assign(L.elementwise_add(y, h), h))
    return [h]


def test_a_carried_value_whose_rows_are_equal_only_at_run_time_is_checked_on_entry():
    main, startup, outs = build(_carried_over_two_batches)
    [(w, _)] = where(main, "while")
    assert w.startswith("segment")
    r = np.random.default_rng(0)
    x, y = r.uniform(-1, 1, (4, 3)).astype("float32"), r.uniform(-1, 1, (4, 3)).astype("float32")
    want, got = run_both(main, startup, outs, {"x": x, "y": y})
    assert_same(got, want)
    np.testing.assert_allclose(got[0], x + 3 * y, rtol=1e-6)


def test_a_carried_value_whose_rows_differ_at_run_time_gets_the_interpreters_error(caplog):
    main, startup, outs = build(_carried_over_two_batches)
    feed = {"x": np.ones((4, 3), "float32"), "y": np.ones((2, 3), "float32")}
    errors = []
    for prog in (main, fluid.CompiledProgram(main).with_native_code()):
        with pytest.raises(Exception) as e:
            fluid.Executor().run(prog, feed=feed, fetch_list=outs, scope=fluid.Scope())
        errors.append((type(e.value), str(e.value)))
    assert errors[0] == errors[1]


def test_a_loop_trained_through_compiles_and_trains_the_same():
    def fn():
        x = L.data("x", [4], dtype="float32")
        w = L.create_parameter([4, 4], "float32", name="w",
                               default_initializer=fluid.initializer.Uniform(-0.5, 0.5, seed=3))
        h = L.assign(x)
        loop(3, lambda i: L.assign(L.tanh(L.matmul(h, w)), h))
        loss = L.mean(h)
        fluid.optimizer.SGD(0.1).minimize(loss)
        return [loss, w]
    main, startup, outs = build(fn)
    [(w, why)] = where(main, "while")
    assert w.startswith("segment") and "for its gradient" in why, why
    feed = {"x": np.ones((2, 4), "float32")}
    want, got = run_both(main, startup, outs, feed)
    assert_same(got, want, exact=False)


def test_an_op_failing_inside_a_compiled_loop_is_named_with_its_block():
    def fn():
        ids = L.data("ids", [1], dtype="int64")
        s = L.fill_constant([1], "float32", 0.0)
        loop(2, lambda i: L.assign(s + L.mean(L.embedding(ids, size=[5, 2])), s))
        return [s]
    main, startup, outs = build(fn)
    assert where(main, "while")[0][0].startswith("segment")
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    prog = fluid.CompiledProgram(main).with_native_code()
    with pytest.raises(ExecutionError, match=r"block 1.*lookup_table.*\b7\b"):
        exe.run(prog, feed={"ids": np.array([[1], [7]], "int64")}, fetch_list=outs,
                scope=scope)
