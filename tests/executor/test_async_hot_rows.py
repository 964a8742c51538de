"""Per-worker copies of the hottest table rows (executor/hot_rows.py, codegen/runtime/
hot_rows.h): which tables qualify, that the copies defer a worker's updates and that every
merge (every M batches, and the one at a worker's close) adds them to the shared table with
nothing lost, under a fixed schedule; the flags' checks; an AsyncExecutor run with them.

The model is linear in its embedding (loss = sum of the looked-up rows), so each occurrence
of an id subtracts exactly lr from each element of its row whatever the parameters: the
trained table is known exactly (-lr * count, a multiple of a power of two: float-exact),
whatever the staleness of the copies."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.datafeed import DataFeedDesc, MultiSlotReader
from fluidity.errors import FluidityError
from fluidity.executor import hot_rows
from fluidity.executor.async_executor import align_persistables, lower_step
from fluidity.executor.native_loop import ChunkCursor, CompiledWorkerStep

VOCAB, DIM, PER_LINE, LR, BATCH = 64, 4, 3, 0.5, 8

DESC = """name: "MultiSlotDataFeed"
batch_size: %d
multi_slot_desc {
  slots { name: "ids" type: "uint64" is_dense: false is_used: true }
}""" % BATCH


def _linear_model(optimizer="sgd", is_sparse=True, extra_reader=False):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ids = fluid.layers.data("ids", [1], dtype="int64", lod_level=1)
        emb = fluid.layers.embedding(ids, [VOCAB, DIM], is_sparse=is_sparse,
                                     param_attr=fluid.ParamAttr(
                                         name="table",
                                         initializer=fluid.initializer.Constant(0.0)))
        loss = fluid.layers.reduce_sum(emb)
        if extra_reader:       # the table read by another op too: it stays shared
            w = main.global_block().var("table")
            loss = loss + fluid.layers.reduce_sum(w) * 0.0
        opt = fluid.optimizer.SGD(LR) if optimizer == "sgd" else fluid.optimizer.Adam(0.01)
        opt.minimize(loss)
    return main, startup, loss


def _files(tmp_path, n_files, lines, seed=0):
    """MultiSlot files of PER_LINE ids a line, skewed (a few ids take most writes)."""
    rng = np.random.default_rng(seed)
    files, counts = [], np.zeros(VOCAB, np.int64)
    for f in range(n_files):
        ids = np.minimum(rng.zipf(1.6, (lines, PER_LINE)) - 1, VOCAB - 1)
        np.add.at(counts, ids.ravel(), 1)
        path = tmp_path / f"part-{f}.txt"
        path.write_text("".join(f"{PER_LINE} {' '.join(map(str, r))}\n" for r in ids))
        files.append(str(path))
    return files, counts


@pytest.fixture(scope="module")
def desc_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("desc") / "data.proto"
    path.write_text(DESC)
    return str(path)


@pytest.mark.parametrize("case, expected", [
    ({}, True),
    ({"is_sparse": False}, False),        # a dense gradient: the sgd updates every row
    ({"optimizer": "adam"}, False),       # row state of its own, updated in place
    ({"extra_reader": True}, False),      # read whole by another op
])
def test_which_tables_keep_hot_rows(case, expected):
    main, _, loss = _linear_model(**case)
    seg = lower_step(main, [loss.name]).segments[0]
    assert hot_rows.qualifies(seg.sites, "table") is expected


def _two_steps(desc_path, main, startup, loss, k, sync_every, warmup, min_share=0.0):
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    align_persistables(main, scope)
    low = lower_step(main, [loss.name])
    slots = MultiSlotReader(DataFeedDesc(desc_path), []).slots
    steps = []
    for _ in range(2):
        step, why = CompiledWorkerStep.make(low, [loss.name], slots, scope)
        assert step is not None, why
        step.configure(stop=np.zeros(1, np.int8), budget_s=0)
        assert step.keep_hot_rows(k, sync_every, warmup=warmup,
                                  min_share=min_share) == ["table"]
        steps.append(step)
    return scope, steps


def test_merges_add_every_workers_deltas_under_a_fixed_schedule(tmp_path, desc_path):
    main, startup, loss = _linear_model()
    files, counts = _files(tmp_path, 4, 200)
    scope, steps = _two_steps(desc_path, main, startup, loss, k=8, sync_every=5, warmup=3)
    table = scope.find_var("table").value.array
    desc = DataFeedDesc(desc_path)
    chunks = [[c for f in files[w::2] for c in MultiSlotReader(desc, [f]).chunks()]
              for w in range(2)]
    # the workers take turns chunk by chunk (one thread: a fixed schedule)
    for pair in zip(*chunks):
        for step, (chunk, dense_dim) in zip(steps, pair):
            step.bind(chunk, dense_dim, BATCH, ChunkCursor())
            line, status, msg = step.run(chunk.n)
            assert (line, status) == (chunk.n, 0), msg
    kept = [s.hot.kept()["table"] for s in steps]
    assert all(len(k) == 8 for k in kept)
    hot = np.union1d(*kept)
    cold = np.setdiff1d(np.arange(VOCAB), hot)
    # rows nobody keeps were updated in place, each occurrence at once
    np.testing.assert_array_equal(table[cold], -LR * counts[cold, None] * np.ones(DIM))
    stats = [s.hot.stats()["table"] for s in steps]
    assert all(st["phase"] == "kept" and st["merges"] > 0 for st in stats)
    # a kept row holds what the merges so far brought in: some of its updates wait in
    # the copies (the last few batches of each worker)
    assert (table[hot] != -LR * counts[hot, None]).any()
    for s in steps:
        s.close()                       # a worker's end: its copies merged
    np.testing.assert_array_equal(table, -LR * counts[:, None] * np.ones(DIM))


def test_a_table_whose_hottest_rows_take_too_few_writes_stays_shared(tmp_path, desc_path):
    main, startup, loss = _linear_model()
    files, counts = _files(tmp_path, 2, 100)
    scope, steps = _two_steps(desc_path, main, startup, loss, k=2, sync_every=5, warmup=3,
                              min_share=0.99)
    step, desc = steps[0], DataFeedDesc(desc_path)
    for chunk, dense_dim in (c for f in files for c in MultiSlotReader(desc, [f]).chunks()):
        step.bind(chunk, dense_dim, BATCH, ChunkCursor())
        assert step.run(chunk.n)[:2] == (chunk.n, 0)
    st = step.hot.stats()["table"]
    assert st["phase"] == "off" and st["rows"] == 0 and st["share"] < 0.99, st
    # every update went to the shared rows at once
    np.testing.assert_array_equal(scope.find_var("table").value.array,
                                  -LR * counts[:, None] * np.ones(DIM))
    for s in steps:
        s.close()


def test_a_lone_worker_and_the_flag_at_zero_keep_no_copies():
    assert hot_rows.settings(1) is None
    old = fluid.get_flags([hot_rows.FLAG_ROWS])
    try:
        fluid.set_flags({hot_rows.FLAG_ROWS: 0})
        assert hot_rows.settings(4) is None
        fluid.set_flags({hot_rows.FLAG_ROWS: 16})
        assert hot_rows.settings(2) == (16, fluid.get_flags(
            [hot_rows.FLAG_SYNC])[hot_rows.FLAG_SYNC])
    finally:
        fluid.set_flags(old)


@pytest.mark.parametrize("flag, value", [(hot_rows.FLAG_ROWS, -1), (hot_rows.FLAG_SYNC, 0)])
def test_bad_flag_values_are_refused_by_name(flag, value):
    old = fluid.get_flags([flag])
    try:
        fluid.set_flags({flag: value})
        with pytest.raises(FluidityError, match=flag):
            hot_rows.settings(2)
    finally:
        fluid.set_flags(old)


def test_async_executor_threads_with_hot_row_copies_lose_no_update(tmp_path, desc_path):
    """A user's run: two worker threads, each keeping copies of the table's 8 hottest rows,
    merged every 4 of its batches; the run's end merges the rest. Hogwild's plain adds
    may lose an update only when both threads add to one element at the same instant
    (the cold rows, or two merges at once): a row or two at most, each element off by a
    multiple of lr."""
    main, startup, loss = _linear_model()
    files, counts = _files(tmp_path, 6, 300, seed=1)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    old = fluid.get_flags([hot_rows.FLAG_ROWS, hot_rows.FLAG_SYNC])
    try:
        fluid.set_flags({hot_rows.FLAG_ROWS: 8, hot_rows.FLAG_SYNC: 4})
        res = fluid.AsyncExecutor().run(main, DataFeedDesc(desc_path), files, 2,
                                        fetch=[loss], scope=scope, progress=False,
                                        workers="threads")
    finally:
        fluid.set_flags(old)
    assert res.mode == "threads" and res.examples == 6 * 300
    # a worker chooses its 8 rows once it has trained WARMUP_BATCHES batches (of the 225,
    # one of the two trains at least 113), then merges every 4 and at its end
    stats = [(w["batches"], w["hot_rows"]["table"]) for w in res.workers]
    for batches, st in stats:
        assert (st["phase"] == "kept") is (batches >= hot_rows.WARMUP_BATCHES), stats
        assert st["phase"] == "counting" or (st["rows"] == 8 and st["merges"] > 0), stats
    assert any(st["phase"] == "kept" for _, st in stats), stats
    table = np.asarray(scope.find_var("table").get_tensor())
    expected = -LR * counts[:, None] * np.ones(DIM)
    off = table != expected
    assert off.sum() <= 2 * DIM, f"{off.sum()} elements lost updates"
    assert np.all(np.mod(table[off] - expected[off], LR) == 0)
