"""The distributed lookup table (`embedding(is_distributed=True)`) end to end on loopback:
the trainers look rows up through split_ids -> prefetch -> merge_ids and send the table's
gradient through split_ids -> send; each pserver holds the ids `id % 2 == k` as an
auto-grown SparseTable, rows created on first touch. 2 pservers x 2 trainers in sync mode
equal one process step by step (the servers sum the trainers' table gradients, as Fluid's
do: the one process trains the table at twice the rate); async lowers the loss; only touched rows exist on the
servers and travel the wire (within 1.2x of the ideal); bad ids and a prefetch to a server
without the table fail naming the table and the endpoint."""
import os
import sys

import numpy as np
import pytest

import fluidity as fluid
from fluidity.core.tensor import LoDTensor
from fluidity.distributed import RPCError
from fluidity.distributed.sparse_table import SparseTable, initial_rows

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sparse_job import run_job, single_process  # noqa: E402

VOCAB, WIDTH, BATCH = 10000, 8, 16
INIT = {"type": "uniform_random", "min": -0.1, "max": 0.1, "seed": 5}


def build_table(distributed=True, width=WIDTH, dense=True, lr=0.5, table_lr=1.0):
    """table_lr: the table's own learning-rate factor (ParamAttr.learning_rate). The servers
    sum the trainers' table gradients, as Fluid's do (the dense ones are averaged), so one
    process on the concatenated batch matches a 2-trainer job with the table's at 2."""
    def build():
        main, start = fluid.Program(), fluid.Program()
        main.random_seed = start.random_seed = 9
        with fluid.program_guard(main, start), fluid.unique_name.guard():
            ids = fluid.layers.data("ids", [1], dtype="int64", lod_level=1)
            y = fluid.layers.data("y", [1])
            emb = fluid.layers.embedding(
                ids, [VOCAB, width], is_sparse=True, is_distributed=distributed,
                param_attr=fluid.ParamAttr(
                    name="table", initializer=fluid.initializer.Uniform(-0.1, 0.1, seed=5),
                    learning_rate=table_lr))
            if dense:
                h = fluid.layers.fc(emb, 8, act="tanh")
                pred = fluid.layers.fc(h, 1)
            else:
                pred = fluid.layers.reduce_sum(emb, dim=1, keep_dim=True)
            loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
            fluid.optimizer.SGD(lr).minimize(loss)
        return main, start, loss
    return build


def ids_of(step, tid, n=BATCH):
    rng = np.random.RandomState(10 * step + tid)
    hot = rng.randint(0, 30, n)
    cold = rng.randint(0, VOCAB, n)
    return np.where(rng.rand(n) < 0.6, hot, cold).astype("int64")


def _feed(ids):
    y = (np.cos(ids * 0.05)).astype("float32").reshape(-1, 1)
    return {"ids": fluid.create_lod_tensor(ids.reshape(-1, 1), [[1] * len(ids)],
                                           fluid.CPUPlace()), "y": y}


def trainer_batch(step, tid):
    return _feed(ids_of(step, tid))


def all_batch(step):
    return _feed(np.concatenate([ids_of(step, 0), ids_of(step, 1)]))


@pytest.mark.parametrize("table_lr", [1.0, 0.25])
def test_sync_distributed_table_matches_single_process(table_lr):
    """table_lr 0.25: the table's own learning rate (a `scale` of the global one) is made
    on the servers, before the table's sgd."""
    steps = 4
    res = run_job(build_table(table_lr=table_lr), trainer_batch, steps)
    init = {k: v for k, v in res.init[0].items() if k != "table"}
    init["table"] = initial_rows(INIT, np.arange(VOCAB), WIDTH)     # rows as the shards make them
    want, want_losses = single_process(build_table(distributed=False, table_lr=2 * table_lr),
                                       all_batch, steps, init)
    got_losses = (np.array(res.losses[0]) + np.array(res.losses[1])) / 2
    np.testing.assert_allclose(got_losses, want_losses, rtol=1e-5)
    for k in init:
        if k == "table":
            continue
        np.testing.assert_allclose(res.final[0][k], want[k], rtol=1e-5, atol=1e-7, err_msg=k)
        np.testing.assert_array_equal(res.final[0][k], res.final[1][k])
    touched = sorted({int(i) for s in range(steps) for t in (0, 1) for i in ids_of(s, t)})
    for k, ep in enumerate(res.endpoints):              # shard k: the touched ids % 2 == k
        shard = res.pserver_scopes[ep].find_var("table").value
        assert isinstance(shard, SparseTable)
        assert sorted(shard.rows.tolist()) == [i for i in touched if i % 2 == k]
        np.testing.assert_allclose(shard.value, want["table"][shard.rows], rtol=1e-5,
                                   atol=1e-7)
    moved = np.flatnonzero(np.any(want["table"] != init["table"], axis=1))
    assert set(moved.tolist()) <= set(touched) and len(moved) > 0


def test_async_distributed_table_lowers_the_loss():
    def batch(step, tid):
        return _feed(np.random.RandomState(100 * tid + step).randint(0, 40, BATCH))
    res = run_job(build_table(lr=0.1), batch, 40, sync=False)
    for tid in (0, 1):
        losses = res.losses[tid]
        assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:5]), losses


def test_step_traffic_is_touched_rows_within_1_2x_of_ideal():
    """Bytes one step puts on the wire (the client's counters) for a table of width 64:
    prefetch answers and gradient sends carry each touched row once."""
    width, steps = 64, 3
    seen = {}

    def on_step(tid, step, exe):
        client = exe.services.get("rpc")
        if step > 0:
            seen[(tid, step - 1)] = client.stats.snapshot()["methods"]
        client.stats.reset()

    def batch(step, tid):
        return _feed(ids_of(step, tid, 200))

    run_job(build_table(width=width, dense=False), batch, steps, on_step=on_step)
    assert sorted(seen) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    header = 400       # bytes a message may add: the JSON header and Paddle's record header
    for (tid, step), t in seen.items():
        rows = len(np.unique(ids_of(step, tid, 200)))
        ideal = rows * width * 4
        fetched = t["PrefetchVariable"]
        sent = t["SendVariable"]
        assert fetched["bytes_received"] <= 1.2 * ideal + header * fetched["calls"], (fetched, ideal)
        assert fetched["bytes_sent"] <= 1.2 * rows * 8 + header * fetched["calls"]       # the ids
        assert sent["bytes_sent"] <= 1.2 * ideal + header * sent["calls"], (sent, ideal)
        assert fetched["bytes_received"] >= ideal and sent["bytes_sent"] >= ideal   # really counted
        assert "GetVariable" not in t    # no dense table comes back
        print(f"trainer {tid} step {step}: {rows} touched rows of width {width}: ideal "
              f"{ideal} B each way; prefetch {fetched}, gradient send {sent}")


def test_id_out_of_the_table_names_table_and_endpoint():
    def batch(step, tid):
        return _feed(np.array([3, VOCAB + 1 + tid * 2], "int64") if step == 1
                     else ids_of(step, tid))
    with pytest.raises(fluid.errors.ExecutionError) as info:
        run_job(build_table(), batch, 2, timeout=30)
    msg = str(info.value)
    assert "table 'table'" in msg and (f"id {VOCAB + 1}" in msg or f"id {VOCAB + 3}" in msg)
    assert "PrefetchVariable to pserver 127.0.0.1:" in msg


def test_prefetch_from_a_pserver_without_the_table():
    errors = []

    def before_close(tid, exe, scope):
        if tid:
            return
        client = exe.services.get("rpc")
        ep = client_eps[0]
        ids = LoDTensor(np.array([[1]], "int64"))
        try:
            client.prefetch_vars([(ep, "prefetch_compress_in_tmp_0", "out", "no_such", ids)],
                                 0)
        except RPCError as e:
            errors.append(str(e))

    client_eps = []

    def on_step(tid, step, exe):
        if not client_eps:
            client_eps.extend(sorted(exe.services.get("rpc")._channels))
    run_job(build_table(), trainer_batch, 1, before_close=before_close, on_step=on_step)
    assert len(errors) == 1
    assert "no_such" in errors[0] and "pserver 127.0.0.1:" in errors[0]
    assert "its tables: ['table']" in errors[0]


def test_sparse_table_grows_on_touch_and_adopts_a_loaded_shard():
    t = SparseTable("t", 1000, 4, INIT)
    a = t.lookup([7, 3, 7])
    assert len(t) == 2 and sorted(t.rows.tolist()) == [3, 7]
    np.testing.assert_array_equal(a[0], a[2])
    np.testing.assert_array_equal(a, initial_rows(INIT, [7, 3, 7], 4))
    from fluidity.core.tensor import SelectedRows
    t.apply_sgd(0.5, SelectedRows([3, 3, 9], 1000, np.ones((3, 4), "float32")))
    np.testing.assert_allclose(t.lookup([3])[0], initial_rows(INIT, [3], 4)[0] - 1.0, rtol=1e-6)
    np.testing.assert_allclose(t.lookup([9])[0], initial_rows(INIT, [9], 4)[0] - 0.5, rtol=1e-6)
    assert t.lookup([11], grow=False).tolist() == [[0.0] * 4] and len(t) == 3
    loaded = SelectedRows(t.rows.copy(), t.height, t.value.copy())   # a checkpoint's record
    back = SparseTable.adopt(loaded, "t", 1000, 4, INIT)
    np.testing.assert_array_equal(back.lookup([3, 7, 9]), t.lookup([3, 7, 9]))
    with pytest.raises(fluid.errors.ExecutionError, match="table 't'.*id 1000 is out of range"):
        t.lookup([1000])


def _preallocated(rows, width):
    """Paddle's preallocated table: a SelectedRows with no ids and `rows` spare value rows
    (row k = k + 1), in a scope, and a lookup_sparse_table over it."""
    from fluidity.op import Operator
    scope = fluid.Scope()
    w = scope.var("W").get_selected_rows()
    w.set_height(rows)
    w.get_tensor().set(np.repeat(np.arange(1, rows + 1, dtype="float32")[:, None], width, 1),
                       fluid.CPUPlace())

    def lookup(ids, is_test=False):
        scope.var("Ids").get_tensor().set(np.asarray(ids, "int64"), fluid.CPUPlace())
        Operator("lookup_sparse_table", W="W", Ids="Ids", Out="Out",
                 is_test=is_test).run(scope, fluid.CPUPlace())
        return np.array(scope.find_var("Out").get_tensor())[:, 0].tolist()
    return lookup


def test_a_preallocated_table_gives_new_ids_its_spare_rows_in_order():
    lookup = _preallocated(6, 3)
    # new ids take rows 0, 1, 2... in the order they first appear; any id value is a key
    assert lookup([9, 4, 9, 123456]) == [1, 2, 1, 3]
    assert lookup([4, 7]) == [2, 4]
    assert lookup([5, 7, 9], is_test=True) == [0, 4, 1]     # unseen in test mode: zeros
    assert lookup([5, 7]) == [5, 4]
    with pytest.raises(fluid.errors.ExecutionError, match="table 'W' is full.*2 new ids"):
        lookup([1, 2])
    assert lookup([6]) == [6]                # the failed lookup took no row
