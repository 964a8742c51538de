"""Two Hogwild worker threads on a light model (a word2vec step: a few lookups and dot
products) train at the same time, and enter Python only per chunk, never per batch (issue
27: per-batch Python under the GIL once made two threads slower than one).

Busy intervals are recorded by the workers' compiled loop itself (CLOCK_MONOTONIC, at the
start and end of each native call). A lock, a GIL held across the step, or any other
serialization keeps two workers' intervals disjoint; wall time on a loaded machine only
stretches them, so the overlap holds on one core too. No timing is asserted."""
import sys

import numpy as np
import pytest

import fluidity as fluid
from fluidity.datafeed import generate_text as gt
from fluidity.executor import native_loop
from fluidity.executor.async_executor import align_persistables

from paths import EXAMPLES  # noqa: E402

sys.path.insert(0, EXAMPLES)
from word2vec import build_word2vec  # noqa: E402

VOCAB, NEG, LINES, ROUNDS = 200, 4, 20_000, 10


@pytest.fixture(scope="module")
def skipgram(tmp_path_factory):
    """Two files of LINES skip-gram examples each (random ids: the speed, not the model,
    is under test); each under one parser chunk."""
    d = tmp_path_factory.mktemp("w2v")
    rng = np.random.default_rng(0)
    files = []
    for k in range(2):
        rows = np.empty((LINES, 4 + NEG), np.int64)
        rows[:, 0], rows[:, 2] = 1, 1 + NEG
        rows[:, 1] = rng.integers(0, VOCAB, LINES)
        rows[:, 3:] = rng.integers(0, VOCAB, (LINES, 1 + NEG))
        path = d / f"part-{k}.txt"
        np.savetxt(path, rows, fmt="%d")
        files.append(str(path))
    model = {"negatives": NEG, "center_slot": "center", "context_slot": "context"}
    desc = gt.skipgram_desc(model, batch_size=32)
    return files, desc


def _overlap(a, b):
    """Seconds during which some interval of `a` and some interval of `b` both ran."""
    return sum(max(0.0, min(e0, e1) - max(s0, s1)) for s0, e0 in a for s1, e1 in b)


def test_two_worker_threads_are_busy_at_the_same_time(skipgram, monkeypatch):
    files, desc = skipgram
    files = files * ROUNDS   # work for both, whenever the second thread gets going
    # one native call per chunk: how often a worker enters Python is then a count, not a
    # consequence of the machine's speed
    monkeypatch.setattr(native_loop, "BUDGET_S", 0)
    main, startup, test, v = build_word2vec(VOCAB, 8, NEG, lr=0.5)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    res = fluid.AsyncExecutor().run(main, desc, files, 2, fetch=[v["loss"]], scope=scope,
                                    progress=False, workers="threads")
    assert res.mode == "threads" and res.examples == len(files) * LINES
    w0, w1 = res.workers
    assert w0["batches"] + w1["batches"] == len(files) * -(-LINES // 32)
    # each file is one chunk, trained in one native call: Python per file, not per batch
    # (and per chunk of another worker's that one joined at the end, out of files); a
    # worker's first file is two, its first FIRST_BATCHES batches parsed apart
    helped = w0["helped"] + w1["helped"]
    assert w0["native_calls"] + w1["native_calls"] == len(files) + 2 + helped
    assert helped <= 2
    for w in (w0, w1):
        assert w["batches"] > 0 and len(w["busy"]) == w["native_calls"]
        assert all(s < e for s, e in w["busy"]) and w["busy_s"] > 0
    both = _overlap(w0["busy"], w1["busy"])
    assert both > 0, (f"the two workers never ran at once (busy {w0['busy_s']:.3f}s and "
                      f"{w1['busy_s']:.3f}s): a lock or the GIL serializes the step")
    assert np.isfinite(res[0])


def test_reports_from_the_loop_match_its_batches(skipgram):
    """The loop folds batch means into report periods in C: the reports add up to every
    example once, in the parent's history, and the run's mean is their weighted mean."""
    files, desc = skipgram
    main, startup, test, v = build_word2vec(VOCAB, 8, NEG, lr=0.5)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    seen = []
    res = fluid.AsyncExecutor().run(main, desc, files, 2,
                                    fetch=[v["loss"]], scope=scope, progress=False,
                                    workers="threads", report_every=7,
                                    callback=lambda n, means: seen.append(n))
    counts = np.diff([0] + [n for n, _ in res.history])
    assert res.history[-1][0] == res.examples == 2 * LINES
    assert all(0 < c <= 7 * 32 for c in counts)     # a report per 7 batches or fewer
    weighted = sum(c * m[0] for c, (_, m) in zip(counts, res.history)) / res.examples
    assert weighted == pytest.approx(res[0], rel=1e-12)
    assert seen == [n for n, _ in res.history]


def test_two_loops_sharing_a_chunk_train_its_batches_once_each(skipgram):
    """A worker out of files joins another's chunk: both loops claim batches from the
    chunk's cursor. Claimed alternately, one batch a call, they train each batch exactly
    once and the same batches as one loop alone, so the parameters are bit for bit one
    worker's."""
    from fluidity.datafeed import MultiSlotReader
    from fluidity.executor.async_executor import lower_step
    files, desc = skipgram
    tables = []
    for loops in (1, 2):
        main, startup, test, v = build_word2vec(VOCAB, 8, NEG, lr=0.5)
        exe, scope = fluid.Executor(), fluid.Scope()
        exe.run(startup, scope=scope)
        low = lower_step(main, [v["loss"].name])
        reader = MultiSlotReader(desc, files[:1])
        steps = [native_loop.CompiledWorkerStep.make(low, [v["loss"].name], reader.slots,
                                                     scope)[0] for _ in range(loops)]
        for s in steps:     # a report per batch, a call per report: one batch a call
            s.configure(report_every=1, return_on_report=True, budget_s=0)
        (chunk, dense), = list(reader.chunks())
        cursor = native_loop.ChunkCursor()
        for s in steps:
            s.bind(chunk, dense, 32, cursor)
        calls, k = 0, 0
        while True:
            a, status, _ = steps[k % loops].run(chunk.n)
            steps[k % loops].take_reports()     # (a full report buffer ends each call)
            assert status == 0
            calls, k = calls + 1, k + 1
            if a >= chunk.n:
                break
        batches = [s.totals()[0] for s in steps]
        assert sum(batches) == -(-LINES // 32)
        assert sum(s.totals()[1] for s in steps) == LINES
        if loops == 2:
            assert min(batches) >= sum(batches) // 2 - 1    # they took turns
        tables.append(np.array(scope.find_var("w2v_out").get_tensor()))
        for s in steps:
            s.close()
    np.testing.assert_array_equal(tables[1], tables[0])


def test_the_batch_log_holds_each_batchs_wall_and_cpu_times(skipgram):
    """Asked to (benchmarks/async_sharing.py), the loop logs each batch's wall and CPU
    start and end, up to the log's size and in the order trained; unasked, nothing."""
    import time
    from fluidity.datafeed import MultiSlotReader
    from fluidity.executor.async_executor import lower_step
    files, desc = skipgram
    main, startup, test, v = build_word2vec(VOCAB, 8, NEG, lr=0.5)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    reader = MultiSlotReader(desc, files[:1])
    step, _ = native_loop.CompiledWorkerStep.make(lower_step(main, [v["loss"].name]),
                                                  [v["loss"].name], reader.slots, scope)
    step.configure(report_every=10**6, budget_s=0)
    (chunk, dense), = list(reader.chunks())
    assert step.batch_log().shape == (0, 4)         # not asked: no log
    step.log_batches(100)
    before = time.monotonic_ns()
    step.bind(chunk, dense, 32, native_loop.ChunkCursor())
    a, status, _ = step.run(chunk.n)
    assert status == 0 and a == chunk.n
    log = step.batch_log()
    assert log.shape == (100, 4) and step.totals()[0] == -(-LINES // 32)
    assert (log[:, 1] >= log[:, 0]).all() and (log[:, 3] >= log[:, 2]).all()
    assert (log[1:, 0] >= log[:-1, 1]).all() and log[0, 0] >= before
    assert step.batch_log().shape == (0, 4)         # emptied by reading it
    step.close()


def test_a_worker_out_of_files_helps_finish_the_run(skipgram):
    """One long file and one short one for two workers: every example is trained once,
    and the counts add up whoever helped whom."""
    files, desc = skipgram
    main, startup, test, v = build_word2vec(VOCAB, 8, NEG, lr=0.5)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    res = fluid.AsyncExecutor().run(main, desc, [files[0], files[1]], 2, fetch=[v["loss"]],
                                    scope=scope, progress=False, workers="threads")
    assert res.examples == sum(w["examples"] for w in res.workers) == 2 * LINES
    assert sum(w["batches"] for w in res.workers) == 2 * -(-LINES // 32)
    assert res.history[-1][0] == 2 * LINES and np.isfinite(res[0])



def _misalign(scope, names):
    """Move each table to memory 16 bytes into a cache line (where numpy often puts it);
    returns copies of their values."""
    before = {}
    for n in names:
        t = scope.find_var(n).get_tensor()
        a = np.asarray(t)
        raw = np.empty(a.nbytes + 64, np.uint8)
        off = (16 - raw.ctypes.data) % 64
        moved = raw[off:off + a.nbytes].view(a.dtype).reshape(a.shape)
        moved[...] = a
        t._array = moved
        before[n] = a.copy()
        assert np.asarray(t).ctypes.data % 64 == 16
    return before


def test_worker_threads_train_tables_whose_rows_start_on_cache_lines(skipgram):
    """The Hogwild threads write the tables in place: a table placed 16 bytes into a cache
    line (rows of 8 floats straddling two, shared with their neighbours) is moved, values
    unchanged, to memory that starts on one before the workers start."""
    files, desc = skipgram
    main, startup, test, v = build_word2vec(VOCAB, 8, NEG, lr=0.5)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    names = [p.name for p in main.global_block().all_parameters()]
    before = _misalign(scope, names)
    align_persistables(main, scope)
    for n in names:
        a = np.asarray(scope.find_var(n).get_tensor())
        assert a.ctypes.data % 64 == 0, n
        np.testing.assert_array_equal(a, before[n])
    before = _misalign(scope, names)
    res = fluid.AsyncExecutor().run(main, desc, files[:1], 2, fetch=[v["loss"]],
                                    scope=scope, progress=False, workers="threads")
    assert res.mode == "threads" and np.isfinite(res[0])
    for n in names:
        a = np.asarray(scope.find_var(n).get_tensor())
        assert a.ctypes.data % 64 == 0, n
        assert not np.array_equal(a, before[n]), n          # trained where it now is
