"""memory_optimize (reuse dead variables by renaming) and release_memory (delete_var after last
use): bit-identical training results, what they must leave alone, and the memory they save."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.executor import add_feed_fetch_ops
from fluidity.ir.analysis import op_uses
from fluidity.transpiler.memory_optimization import memory_optimize, release_memory

from executor_runs import MODELS, assert_same, mlp, reference, train


def _memopt(main, loss):
    memory_optimize(main)


def _release(main, loss):
    release_memory(main)


@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("transform", [_memopt, _release], ids=["memory_optimize",
                                                                 "release_memory"])
def test_passes_leave_training_results_bit_identical(model, transform):
    assert_same(train(MODELS[model], transform=transform), reference(model))


def test_memory_optimize_renames_dead_variables_of_the_same_shape(caplog):
    import logging
    main, startup, loss, feeds = mlp(depth=4)
    block = main.global_block()
    n_vars = len(block.vars)
    with caplog.at_level(logging.INFO, logger="fluidity"):
        reused = memory_optimize(main, print_log=True)
    assert reused and len(block.vars) == n_vars - len(reused)
    used = {n for op in block.ops for n in op.input_arg_names + op.output_arg_names}
    for new, old in reused:
        assert new not in block.vars and new not in used and old in block.vars
        assert not block.vars[old].persistable
    assert loss.name in block.vars and loss.name in used        # a result: nobody reads it
    assert main._is_mem_optimized
    out = caplog.text   # the library's log, not stdout
    assert f"reuses '{reused[0][1]}'" in out and f"{len(reused)} of" in out


def test_memory_optimize_keeps_skipped_fed_fetched_and_persistable_variables():
    main, startup, loss, feeds = mlp(depth=4)
    block = main.global_block()
    hidden = [op.output("Out")[0] for op in block.ops if op.type == "relu"]
    persist = {v.name for v in block.vars.values() if v.persistable}
    # intermediates a user fetches go in skip_opt_set (Variables or names)
    p = main.clone()
    reused = memory_optimize(p, skip_opt_set={hidden[0], block.var(hidden[1])})
    touched = {n for pair in reused for n in pair}
    assert not touched & ({"x", "y", hidden[0], hidden[1]} | persist)
    # a program with feed/fetch ops says itself what is fed and fetched
    p = add_feed_fetch_ops(main, 0, ["x", "y"], hidden + [loss.name])
    reused = memory_optimize(p)
    assert reused and not {n for pair in reused for n in pair} & set(hidden)
    results = []
    for prog in (main, p):
        exe, scope = fluid.Executor(), fluid.Scope()
        exe.run(startup, scope=scope)
        results.append(exe.run(prog, feed=feeds(0), fetch_list=hidden + [loss.name],
                               scope=scope))
    assert all(np.array_equal(a, b) for a, b in zip(*results))


def test_release_memory_deletes_each_temporary_right_after_its_last_use():
    main, startup, loss, feeds = mlp()
    n = release_memory(main)
    ops = main.global_block().ops
    deletes = [i for i, op in enumerate(ops) if op.type == "delete_var"]
    assert len(deletes) == n > 0
    deleted = set()
    for i in deletes:
        names = ops[i].input("X")
        deleted.update(names)
        prev = op_uses(main, ops[i - 1])
        assert all(v in prev[0] | prev[1] for v in names)          # right after a use
        later = [o for o in ops[i + 1:] if o.type != "delete_var"]
        assert not any(v in o.input_arg_names + o.output_arg_names for o in later
                       for v in names)                            # ... the last one
        assert ops[i].attr("op_role") == ops[i - 1].attr("op_role")
    block = main.global_block()
    assert not any(block.vars[v].persistable for v in deleted)
    assert loss.name not in deleted and not {"x", "y"} & deleted
    assert release_memory(main) == 0                                # idempotent
    # values are gone after the run; the variables stay
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    exe.run(main, feed=feeds(0), fetch_list=[loss], scope=scope, create_local_scope=False)
    assert all(scope.find_var(v) is not None and scope.find_var(v).value is None
               for v in deleted)
    assert scope.find_var(loss.name).is_initialized()


def test_released_program_still_clones_for_test_and_runs():
    main, startup, loss, feeds = mlp()
    test_prog = main.clone(for_test=True)
    release_memory(main)
    released_test = main.clone(for_test=True)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    a = exe.run(test_prog, feed=feeds(0), fetch_list=[loss.name], scope=scope)[0]
    b = exe.run(released_test, feed=feeds(0), fetch_list=[loss.name], scope=scope)[0]
    assert np.array_equal(a, b)


def _live_bytes_per_op(program, startup, feed, fetch):
    """Bytes of the temporaries' arrays alive after each op of one interpreter run."""
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    exe.run(program, feed=feed, fetch_list=fetch, scope=scope)
    plan = next(iter(exe._cache[program].values())).plan
    seen = []

    def measure(step):
        def wrapped(frame, env):
            step(frame, env)
            owners = {}
            for v in env.scope._vars.values():
                a = getattr(v.value, "_array", None)
                if isinstance(a, np.ndarray):
                    base = a if a.base is None else a.base
                    owners[id(base)] = base.nbytes
            seen.append(sum(owners.values()))
        return wrapped

    plan.steps = [measure(s) for s in plan.steps]
    exe.run(program, feed=feed, fetch_list=fetch, scope=scope)
    return seen


def test_both_passes_lower_the_interpreters_peak():
    peaks = {}
    for name, transform in [("plain", None), ("memopt", memory_optimize),
                            ("release", release_memory)]:
        main, startup, loss, feeds = mlp(depth=6, width=128)
        if transform is not None:
            transform(main)
        peaks[name] = max(_live_bytes_per_op(main, startup, feeds(0, 64), [loss]))
    assert peaks["release"] < 0.7 * peaks["plain"]
    assert peaks["memopt"] < peaks["plain"]


def test_delete_var_op_drops_values():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", [2])
        y = fluid.layers.scale(x, 2.0)
        z = fluid.layers.scale(y, 3.0)
        main.global_block().append_op("delete_var", {"X": [y]}, {}, infer_shape=False)
    exe, scope = fluid.Executor(), fluid.Scope()
    (zv,) = exe.run(main, feed={"x": np.ones((1, 2), "float32")}, fetch_list=[z], scope=scope,
                    create_local_scope=False)
    assert np.array_equal(zv, [[6.0, 6.0]])
    assert scope.find_var(y.name).value is None


def test_sub_block_variables_are_never_reused_or_deleted():
    if not hasattr(fluid.layers, "While"):
        pytest.skip("control flow ops are not in this tree")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [4])
        h = fluid.layers.scale(x, 2.0)            # read inside the loop
        dead = fluid.layers.scale(x, 3.0)          # dead before the loop: reusable
        t = fluid.layers.reduce_sum(dead)
        acc = fluid.layers.fill_constant([1], "float32", 0.0)
        i = fluid.layers.fill_constant([1], "int64", 0)
        n = fluid.layers.fill_constant([1], "int64", 2)
        cond = fluid.layers.less_than(i, n)
        w = fluid.layers.While(cond)
        with w.block():
            s = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(h, h))
            fluid.layers.assign(fluid.layers.elementwise_add(acc, s), output=acc)
            fluid.layers.increment(i, in_place=True)
            fluid.layers.less_than(i, n, cond=cond)
        after = fluid.layers.scale(x, 5.0)          # same shape as `dead`
        total = fluid.layers.elementwise_add(fluid.layers.reduce_sum(after), acc)
        total = fluid.layers.elementwise_add(total, t)
    loop_vars = {h.name, acc.name, i.name, n.name, cond.name}
    p = main.clone()
    touched = {v for pair in memory_optimize(p) for v in pair}
    assert touched and not touched & loop_vars
    q = main.clone()
    release_memory(q)
    deleted = {v for op in q.global_block().ops if op.type == "delete_var"
               for v in op.input("X")}
    assert dead.name in deleted and not deleted & loop_vars
    feed = {"x": np.arange(4, dtype="float32").reshape(1, 4)}
    exe = fluid.Executor()
    want = exe.run(main, feed=feed, fetch_list=[total.name], scope=fluid.Scope())[0]
    for prog in (p, q):
        assert np.array_equal(exe.run(prog, feed=feed, fetch_list=[total.name],
                                      scope=fluid.Scope())[0], want)
