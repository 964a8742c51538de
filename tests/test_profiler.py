"""fluid.profiler: the per-op table, the Chrome trace, and FLAGS_check_nan_inf."""
import gc
import json
import threading

import numpy as np
import pytest

import fluidity as fluid
from fluidity.errors import ExecutionError, FluidityError
from fluidity.executor import profile as profiling


def _mlp():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [256])
        y = fluid.layers.data("y", [1], dtype="int64")
        h = fluid.layers.fc(fluid.layers.fc(x, 256, act="relu"), 256, act="relu")
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(
            fluid.layers.fc(h, 10), y))
        fluid.optimizer.SGD(0.01).minimize(loss)
    return main, startup, loss


def _feed(rng, n=128):
    return {"x": rng.standard_normal((n, 256)).astype(np.float32),
            "y": rng.integers(0, 10, (n, 1)).astype(np.int64)}


def test_table_sums_to_the_step_time_and_the_trace_opens(tmp_path, capsys):
    main, startup, loss = _mlp()
    exe = fluid.Executor()
    exe.run(startup)
    rng = np.random.default_rng(0)
    feeds = [_feed(rng) for _ in range(6)]
    exe.run(main, feed=feeds[0], fetch_list=[loss])      # a plan prepared before: replaced
    path = tmp_path / "profile"
    gc.collect()           # no collection of earlier tests' garbage inside the steps
    gc.disable()
    try:
        with fluid.profiler.profiler("CPU", sorted_key="total", profile_path=str(path)):
            for f in feeds:
                exe.run(main, feed=f, fetch_list=[loss])
    finally:
        gc.enable()
    out = capsys.readouterr().out
    assert "Profiling Report" in out and "mul" in out and "Ratio" in out
    prof = fluid.profiler._PROFILE
    rows = prof.stats()
    step = sum(e - s for _, s, e in prof.steps)
    ops = sum(r[2] for r in rows)
    assert len(prof.steps) == 6
    # the ops' times are parts of the steps' (how much of a step the rest takes depends on
    # the machine's load: not asserted)
    assert 0 < ops <= step, (ops, step)
    assert {r[0]: r[1] for r in rows}["mul"] == 6 * 3
    table, _, where = out.partition("\n\n")
    totals = [float(line.split()[2]) for line in table.splitlines()[3:]]
    assert totals == sorted(totals, reverse=True)
    assert "time unit: ms" in table.splitlines()[1] and out.count("Profiling Report") == 1
    assert where.startswith(f"profile written to {path};") and "timeline(" in where
    from fluidity.proto.profiler import profiler_pb2
    msg = profiler_pb2.Profile()
    msg.ParseFromString(path.read_bytes())         # Fluid's file: a Profile message
    assert sum(e.name == "mul" and e.type == profiler_pb2.Event.CPU and e.device_id == -1
               for e in msg.events) == 18
    assert all(msg.start_ns <= e.start_ns <= e.end_ns <= msg.end_ns for e in msg.events)
    trace = fluid.profiler.timeline(str(path), str(tmp_path / "trace.json"))
    assert json.loads((tmp_path / "trace.json").read_text()) == trace
    xs = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert sum(e["name"] == "Executor::Run" for e in xs) == 6
    assert sum(e["name"] == "mul" for e in xs) == 18
    assert all(e["dur"] >= 0 and "tid" in e for e in xs)
    # off again: the plans run untouched and nothing is recorded
    assert profiling.active() is None
    exe.run(main, feed=feeds[0], fetch_list=[loss])
    assert len(prof.steps) == 6


@pytest.mark.parametrize("key,col,desc", [("calls", 1, True), ("max", 4, True),
                                          ("min", 3, False), ("ave", 5, True)])
def test_sorted_keys(key, col, desc, capsys):
    main, startup, loss = _mlp()
    exe = fluid.Executor()
    exe.run(startup)
    fluid.profiler.start_profiler("All")
    fluid.profiler.reset_profiler()
    exe.run(main, feed=_feed(np.random.default_rng(1)), fetch_list=[loss])
    fluid.profiler.stop_profiler(key, None)
    lines = capsys.readouterr().out.splitlines()[3:]
    vals = [float(line.split()[col]) for line in lines]
    assert vals == sorted(vals, reverse=desc)
    with pytest.raises(FluidityError, match="sorted_key"):
        fluid.profiler.stop_profiler("bogus")


def test_worker_threads_are_separate_tracks():
    main, startup, loss = _mlp()
    exe = fluid.Executor()
    exe.run(startup)
    feeds = [_feed(np.random.default_rng(k), 16) for k in range(2)]
    both = threading.Barrier(2)     # both alive till both ran: thread ids are not reused

    def work(f):
        fluid.Executor().run(main, feed=f, fetch_list=[loss], scope=fluid.global_scope())
        both.wait(timeout=60)
    fluid.profiler.start_profiler("CPU")
    try:
        ts = [threading.Thread(target=work, args=(f,)) for f in feeds]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    finally:
        fluid.profiler.stop_profiler(None, None)
    trace = fluid.profiler.chrome_trace(fluid.profiler._PROFILE)
    tids = {e["tid"] for e in trace["traceEvents"] if e["ph"] == "X"}
    assert len(tids) == 2


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_check_nan_inf_names_the_op_the_variable_and_where():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [3])
        y = fluid.layers.log(x)                       # log of a negative: NaN
        z = fluid.layers.reduce_sum(y)
    exe = fluid.Executor()
    exe.run(startup)
    feed = {"x": np.array([[1.0, -1.0, 2.0]], np.float32)}
    assert fluid.get_flags(["FLAGS_check_nan_inf"]) == {"FLAGS_check_nan_inf": False}
    exe.run(main, feed=feed, fetch_list=[z])          # off: runs through
    fluid.set_flags({"FLAGS_check_nan_inf": True})
    try:
        with pytest.raises(fluid.core.EnforceNotMet) as e:
            exe.run(main, feed=feed, fetch_list=[z])
    finally:
        fluid.set_flags({"FLAGS_check_nan_inf": False})
    assert type(e.value) is fluid.core.EnforceNotMet      # Fluid's programs test with ==
    msg = str(e.value)
    assert "find nan or inf" in msg                      # Fluid's words
    assert "'log'" in msg and f"'{y.name}'" in msg and "1 NaN" in msg
    # labelled as every run-time error labels an op (Plan.op_label: feed ops not counted)
    assert "op #0 'log' in block 0" in msg
    assert "test_profiler.py" in msg                 # the op's creation site
    with pytest.raises(FluidityError, match="unknown flag"):
        fluid.set_flags({"FLAGS_no_such": 1})


def test_async_executor_worker_threads_are_tracks(tmp_path):
    from executor.test_async_executor import wide_model
    from fluidity.datafeed import DataFeedDesc
    from fluidity.datafeed.generate import generate_ctr
    import json
    info = generate_ctr(str(tmp_path), 2000, files=2, seed=1, vocab=2000, sparse_slots=4,
                        dense_slots=3)   # test_async_executor's model: its build is shared
    model = json.load(open(info["model"]))
    main, startup, loss, logit = wide_model(model)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    desc = DataFeedDesc(info["desc"])
    with fluid.profiler.profiler("CPU", profile_path=str(tmp_path / "t.json")):
        res = fluid.AsyncExecutor().run(main, desc, info["files"], 2, scope=scope,
                                        workers="threads", read_ahead=True, progress=False)
    assert res.examples == 2000
    trace = fluid.profiler.timeline(str(tmp_path / "t.json"))
    steps = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["name"] == "Executor::Run"]
    assert len({e["tid"] for e in steps}) == 2
    assert len(steps) == sum(w["batches"] for w in res.workers)
