"""Linear, dataflow and parallel executors: bit-identical to the interpreter on training
programs (backward + optimizer, several steps), the linear memory plan, the dataflow profile,
real overlap in the parallel executor, and the strategy API."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.errors import ExecutionError, FluidityError
from fluidity.executor import ExecutionStrategy
from fluidity.ir.analysis import dependencies, topological_order
from fluidity.ir.memory_plan import MemoryPlan
from fluidity.transpiler.memory_optimization import memory_optimize, release_memory

from executor_runs import MODELS, assert_same, cnn, mlp, reference, train
from programs import doubling_while

KINDS = ["linear", "dataflow", "parallel"]
ALL_KINDS = ["interpreter"] + KINDS


# --- bit-identical results ----------------------------------------------------------------
@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("kind", KINDS)
def test_every_executor_matches_the_interpreter_bit_for_bit(model, kind):
    assert_same(train(MODELS[model], ExecutionStrategy(kind)), reference(model))


@pytest.mark.parametrize("model", ["mlp", "ctr"])
@pytest.mark.parametrize("kind", ["interpreter"] + KINDS)
def test_executors_run_memory_optimized_and_released_programs_identically(kind, model):
    def both(main, loss):
        memory_optimize(main)
        release_memory(main)
    got = train(MODELS[model], ExecutionStrategy(kind), transform=both)
    assert_same(got, reference(model))


def test_parallel_with_more_threads_and_capped_blas_matches():
    from threadpoolctl import ThreadpoolController
    with ThreadpoolController().limit(limits=1, user_api="blas"):   # the same BLAS blocking
        want = train(cnn)
    assert_same(train(cnn, ExecutionStrategy("parallel", num_threads=4, blas_threads=1)), want)
    assert_same(train(mlp, ExecutionStrategy("parallel", num_threads=3)), reference("mlp"))


def test_linear_replans_for_a_new_batch_size_and_stays_identical():
    batches = [8, 5, 8]
    ref = train(mlp, steps=3, batches=batches)
    main, startup, loss, feeds = mlp()
    exe, scope = fluid.Executor(strategy="linear"), fluid.Scope()
    exe.run(startup, scope=scope)
    got = [exe.run(main, feed=feeds(s, b), fetch_list=[loss], scope=scope)[0]
           for s, b in enumerate(batches)]
    assert all(np.array_equal(a, b) for a, b in zip(got, ref[0]))
    plan = next(iter(exe._cache[main].values())).plan
    assert sorted(plan._memory) == [5, 8]
    assert plan.memory.batch == 8


def test_fetched_intermediates_survive_buffer_reuse():
    main, startup, loss, feeds = mlp(depth=4)
    block = main.global_block()
    # fetch every relu output: each is also read by later ops, whose buffers are reused
    hidden = [op.output("Out")[0] for op in block.ops if op.type == "relu"]
    out = {}
    for kind in ("interpreter", "linear"):
        exe, scope = fluid.Executor(strategy=kind), fluid.Scope()
        exe.run(startup, scope=scope)
        out[kind] = [exe.run(main, feed=feeds(s), fetch_list=hidden + [loss], scope=scope)
                     for s in range(2)]
    for a, b in zip(out["interpreter"], out["linear"]):
        for x, y in zip(a, b):
            assert np.array_equal(x, y)
    # results of an earlier run are not views of the arena the next run overwrites
    assert not any(np.shares_memory(x, y) for x in out["linear"][0] for y in out["linear"][1])


# --- the linear memory plan ---------------------------------------------------------------
def test_memory_plan_of_a_deep_mlp_training_step_shares_buffers():
    main, startup, loss, feeds = mlp(depth=8, width=64)
    strategy = ExecutionStrategy("linear")
    exe, scope = fluid.Executor(strategy=strategy), fluid.Scope()
    exe.run(startup, scope=scope)
    exe.run(main, feed=feeds(0, batch=32), fetch_list=[loss], scope=scope)
    plan = next(iter(exe._cache[main].values())).plan
    mp = plan.memory
    assert mp.batch == 32 and mp.inplace
    assert mp.live_bytes <= mp.capacity < 0.6 * mp.naive_bytes
    text = mp.report()
    assert "naive sum" in text and "arena" in text and "in place" in text
    assert text in strategy.memory_report()
    # every planned temporary lies inside the arena, and two that are alive at once never
    # share a byte
    spans = {n: (off, off + size) for n, (off, size) in mp.offsets.items()}
    assert all(0 <= a and b <= mp.capacity for a, b in spans.values())
    life = {n: (plan.planned[n].first, plan.planned[n].last) for n in spans}
    groups = {o: x for o, x in mp.inplace}
    names = sorted(spans)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if groups.get(a) == b or groups.get(b) == a:
                continue
            (fa, la), (fb, lb) = life[a], life[b]
            if fa <= lb and fb <= la:
                (sa, ea), (sb, eb) = spans[a], spans[b]
                assert ea <= sb or eb <= sa, (a, b)


def test_planner_places_by_size_and_reuses_dead_space():
    # a lives 0..1, b 1..2 (overlaps a), c 2..3 (may take a's bytes), d 0..3 (overlaps all)
    sizes = {"a": 640, "b": 320, "c": 640, "d": 64}
    life = {"a": (0, 1), "b": (1, 2), "c": (2, 3), "d": (0, 3)}
    mp = MemoryPlan(sizes, life)
    assert mp.naive_bytes == 1664
    assert mp.capacity == mp.live_bytes == 1024
    assert mp.offsets["a"][0] == mp.offsets["c"][0]
    # an in-place pair becomes one group: c written over b's bytes at op 2
    mp = MemoryPlan({"b": 320, "c": 320}, {"b": (0, 2), "c": (2, 4)}, [("c", "b")])
    assert mp.inplace == [("c", "b")] and mp.offsets["b"] == mp.offsets["c"]
    assert mp.capacity == 320


def test_dependency_order_is_topological():
    main, _, _, _ = mlp()
    ops = main.global_block().ops
    succ, n_pred = dependencies(main, ops)
    order = topological_order(succ, n_pred)
    assert order == list(range(len(ops)))
    pos = {i: k for k, i in enumerate(order)}
    assert all(pos[i] < pos[j] for i in range(len(ops)) for j in succ[i])
    # every optimizer update waits for every reader of its parameter
    for j, op in enumerate(ops):
        if op.type == "adam":
            p = op.input("Param")[0]
            readers = [i for i, o in enumerate(ops[:j]) if p in o.input_arg_names]
            assert readers and all(_reaches(succ, i, j) for i in readers)


def _reaches(succ, a, b):
    todo, seen = [a], set()
    while todo:
        i = todo.pop()
        if i == b:
            return True
        if i not in seen:
            seen.add(i)
            todo.extend(succ[i])
    return False


# --- dataflow profile, parallel overlap ---------------------------------------------------
def test_dataflow_profile_lists_every_op_sorted_by_time():
    strategy = ExecutionStrategy("dataflow", profile=True)
    main, startup, loss, feeds = mlp()
    exe, scope = fluid.Executor(strategy=strategy), fluid.Scope()
    exe.run(startup, scope=scope)
    strategy.profile.reset()
    for s in range(2):
        exe.run(main, feed=feeds(s), fetch_list=[loss], scope=scope)
    plan = next(iter(exe._cache[main].values())).plan
    rows = [r for r in strategy.profile.rows() if r[1]]
    assert len(rows) == len(plan.ops)
    assert all(calls == 2 for _, calls, _ in rows)
    totals = [t for _, _, t in rows]
    assert totals == sorted(totals, reverse=True)
    text = str(strategy.profile)
    for op in plan.ops:
        assert f" {op.type} -> " in text
    by_type = dict((t, c) for t, c, _ in strategy.profile.rows(by="type"))
    assert by_type["mul"] == 2 * sum(op.type == "mul" for op in plan.ops)
    assert len(strategy.profile.events) == len(plan.ops)     # the latest run's timeline


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_every_kind_can_be_profiled_with_the_same_results(kind):
    """The profile observes any kind of plan (and sub-block plans); results don't change."""
    main, startup, loss, feeds = mlp()
    got = []
    for profile in (False, True):
        strategy = ExecutionStrategy(kind, profile=profile)
        exe, scope = fluid.Executor(strategy=strategy), fluid.Scope()
        exe.run(startup, scope=scope)
        if profile:
            strategy.profile.reset()
        got.append([exe.run(main, feed=feeds(s), fetch_list=[loss], scope=scope)[0]
                    for s in range(2)])
    assert all(np.array_equal(a, b) for a, b in zip(*got))
    plan = next(iter(exe._cache[main].values())).plan
    exe.close()
    rows = [r for r in strategy.profile.rows() if r[1]]
    assert len(rows) == len(plan.ops) and all(calls == 2 for _, calls, _ in rows)
    assert len(strategy.profile.events) == len(plan.ops)


def test_profile_times_the_ops_of_sub_blocks():
    main, _, x = doubling_while(steps=3, fed_x=False)
    strategy = ExecutionStrategy("interpreter", profile=True)
    exe = fluid.Executor(strategy=strategy)
    (out,) = exe.run(main, fetch_list=[x], scope=fluid.Scope())
    assert float(out.reshape(-1)[0]) == 8.0
    by_type = dict((t, c) for t, c, _ in strategy.profile.rows(by="type"))
    assert by_type["while"] == 1 and by_type["scale"] == 3 and by_type["increment"] == 3


def _two_towers(n=1200):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        a = fluid.layers.data("a", [n])
        b = fluid.layers.data("b", [n])
        ya = fluid.layers.fc(fluid.layers.fc(a, n, bias_attr=False), n, bias_attr=False)
        yb = fluid.layers.fc(fluid.layers.fc(b, n, bias_attr=False), n, bias_attr=False)
        out = fluid.layers.elementwise_add(ya, yb)
    return main, startup, out


def test_parallel_executor_overlaps_independent_branches():
    main, startup, out = _two_towers()
    strategy = ExecutionStrategy("parallel", num_threads=2, profile=True)
    exe, scope = fluid.Executor(strategy=strategy), fluid.Scope()
    ref_exe = fluid.Executor()
    exe.run(startup, scope=scope)
    r = np.random.default_rng(0)
    feed = {"a": r.normal(size=(600, 1200)).astype("float32"),
            "b": r.normal(size=(600, 1200)).astype("float32")}
    want = ref_exe.run(main, feed=feed, fetch_list=[out], scope=scope)[0]
    overlapped = False
    for _ in range(5):            # a busy machine may serialize one run; not five
        got = exe.run(main, feed=feed, fetch_list=[out], scope=scope)[0]
        assert np.array_equal(got, want)
        mm = [e for e in strategy.profile.events if " mul -> " in e[0]]
        assert len(mm) == 4
        overlapped = any(x[1] != y[1] and x[2] < y[3] and y[2] < x[3]
                         for i, x in enumerate(mm) for y in mm[i + 1:])
        if overlapped:
            break
    assert overlapped, strategy.profile.events


def test_parallel_errors_name_the_failing_op():
    main, startup, loss, feeds = mlp()
    exe, scope = fluid.Executor(strategy=ExecutionStrategy("parallel")), fluid.Scope()
    exe.run(startup, scope=scope)
    bad = dict(feeds(0), y=np.ones((7, 1), "float32"))     # 8 predictions, 7 labels
    with pytest.raises(ExecutionError) as e:
        exe.run(main, feed=bad, fetch_list=[loss], scope=scope)
    assert "op #" in str(e.value)
    # the executor is still usable afterwards
    exe.run(main, feed=feeds(1), fetch_list=[loss], scope=scope)


# --- control flow: sub-block variables stay live across the whole op ----------------------
def test_executors_keep_sub_block_variables_of_a_while_loop():
    if not hasattr(fluid.layers, "While"):
        pytest.skip("control flow ops are not in this tree")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [4])
        h = fluid.layers.relu(fluid.layers.scale(x, 2.0))
        acc = fluid.layers.fill_constant([1], "float32", 0.0)
        i = fluid.layers.fill_constant([1], "int64", 0)
        n = fluid.layers.fill_constant([1], "int64", 3)
        cond = fluid.layers.less_than(i, n)
        w = fluid.layers.While(cond)
        with w.block():
            s = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(h, h))
            fluid.layers.assign(fluid.layers.elementwise_add(acc, s), output=acc)
            fluid.layers.increment(i, in_place=True)
            fluid.layers.less_than(i, n, cond=cond)
        out = fluid.layers.scale(fluid.layers.tanh(h), 3.0)
        total = fluid.layers.elementwise_add(fluid.layers.mean(out), acc)
    feed = {"x": np.arange(8, dtype="float32").reshape(2, 4) / 7}
    results = []
    for kind in ["interpreter"] + KINDS + ["memopt", "release"]:
        p = main.clone()
        if kind == "memopt":
            memory_optimize(p)
        elif kind == "release":
            release_memory(p)
        strategy = None if kind in ("interpreter", "memopt", "release") else kind
        exe = fluid.Executor(strategy=strategy)
        exe.run(startup, scope=fluid.Scope())
        results.append(exe.run(p, feed=feed, fetch_list=[total.name], scope=fluid.Scope())[0])
    assert all(np.array_equal(r, results[0]) for r in results)


# --- the strategy API -----------------------------------------------------------------------
def test_strategy_validation_and_defaults():
    assert fluid.Executor().strategy is None
    assert fluid.Executor(strategy="linear").strategy.kind == "linear"
    assert repr(ExecutionStrategy("parallel", num_threads=3)) == \
        "ExecutionStrategy('parallel', num_threads=3)"
    for bad in [dict(kind="fast"), dict(kind="parallel", num_threads=0),
                dict(kind="parallel", blas_threads=0)]:
        with pytest.raises(FluidityError):
            ExecutionStrategy(**bad)


def test_strategies_leave_the_program_untouched():
    main, startup, loss, feeds = mlp()
    before = main.desc.SerializeToString()
    for kind in KINDS:
        exe = fluid.Executor(strategy=kind)
        scope = fluid.Scope()
        exe.run(startup, scope=scope)
        exe.run(main, feed=feeds(0), fetch_list=[loss], scope=scope)
    assert main.desc.SerializeToString() == before
