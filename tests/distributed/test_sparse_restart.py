"""The branches together: a pserver holding sparse state, SIGKILLed mid-run and restarted,
resumes from its recovery checkpoint and round log with nothing lost. With a distributed
lookup table the shard (a SparseTable: persistable, saved as Paddle's SelectedRows record)
comes back as a SparseTable with its rows, and the trainers' prefetches (reads, not step
calls) resynchronise with the restarted server; with an `is_sparse` table the round log
carries the trainers' SelectedRows gradients. Either way the sync 2 x 2 run still equals one
process on the concatenated batches."""
import os
import sys

import numpy as np
import pytest

import fluidity as fluid
from fluidity.distributed import checkpoint as ckpt
from fluidity.distributed.sparse_table import SparseTable, initial_rows

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sparse_steps as model  # noqa: E402
from dist_job import Job, load  # noqa: E402


def single_process(kind, init, steps):
    prog, start, loss = model.build("local" if kind == "distributed" else kind,
                                    table_lr=2.0 if kind == "distributed" else 1.0)
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(start, scope=scope)
    for name, value in init.items():
        scope.find_var(name).get_tensor().set(value, fluid.CPUPlace())
    for step in range(steps):
        ids = np.concatenate([model.ids_of(step, 0), model.ids_of(step, 1)])
        exe.run(prog, feed=model.feed(ids), fetch_list=[loss], scope=scope)
    return model.params(prog, scope)


# killed between steps (the next call to the dead server is a prefetch, with a distributed
# table) or at any moment of a step
@pytest.mark.parametrize("kind,sleep", [("distributed", "0.05"), ("distributed", "0"),
                                        ("is_sparse", "0.05")])
def test_pserver_with_sparse_table_restarts_and_no_update_is_lost(tmp_path, kind, sleep):
    steps, kill_at = 12, 5
    job = Job(tmp_path, [kind, tmp_path, steps], script=os.path.join(HERE, "sparse_steps.py"),
              env={"FLAGS_pserver_checkpoint_dir": str(tmp_path / "ckpt"),
                   "FLAGS_pserver_checkpoint_minutes": "0",
                   "FLAGS_pserver_checkpoint_notify_root": str(tmp_path),
                   "FLUIDITY_TEST_NOTIFY_DIR": "saved",
                   "FLUIDITY_TEST_STEP_SLEEP": sleep, "FLAGS_rpc_deadline": "60000"})
    job.run_restarting_server(1, kill_at)
    log1 = job.log("server", 1)
    assert "resumed from" in log1, job.logs()
    assert all("pserver %s restarted" % job.eps[1] in job.log("worker", i) for i in range(2))
    init, final0, _ = load(tmp_path / "trainer_0.npz")
    _init1, final1, _ = load(tmp_path / "trainer_1.npz")
    if kind == "distributed":
        assert "SparseTable('table'" in log1, log1       # the loaded shard, adopted
        init["table"] = initial_rows(model.INIT, np.arange(model.VOCAB), model.WIDTH)
    want = single_process(kind, init, steps)
    for k, v in final0.items():
        np.testing.assert_array_equal(v, final1[k])
        np.testing.assert_allclose(v, want[k], rtol=1e-5, atol=1e-6, err_msg=k)
    # the servers' final state (checkpoint_notify after the last step)
    saved = {}
    for i in range(2):
        scope = fluid.Scope()
        state = ckpt.load(str(tmp_path / "saved" / f"pserver_{i}"), scope)
        assert state["version"] == steps
        saved[i] = scope
    if kind == "distributed":
        touched = sorted({int(i) for s in range(steps) for t in (0, 1)
                          for i in model.ids_of(s, t)})
        for k in range(2):
            shard = SparseTable.adopt(saved[k].find_var("table").value, "table", model.VOCAB,
                                      model.WIDTH, model.INIT)
            assert sorted(shard.rows.tolist()) == [i for i in touched if i % 2 == k]
            np.testing.assert_allclose(shard.value, want["table"][shard.rows], rtol=1e-5,
                                       atol=1e-6)
    else:
        blocks = [np.array(saved[k].find_var(f"table.block{k}").get_tensor()) for k in (0, 1)]
        np.testing.assert_array_equal(np.concatenate(blocks), final0["table"])


def test_snapshot_saves_a_sparse_table_shard_and_it_is_adopted_back(tmp_path):
    table = SparseTable("table", 1000, 4, model.INIT)
    table.lookup([7, 3, 999])
    scope = fluid.Scope()
    scope.var("table").value = table
    assert ckpt.save(str(tmp_path / "s"), scope, ["table"], 3, "127.0.0.1:1") == ["table"]
    back = fluid.Scope()
    assert ckpt.load(str(tmp_path / "s"), back)["variables"] == {"table": "selected_rows"}
    shard = SparseTable.adopt(back.find_var("table").value, "table", 1000, 4, model.INIT)
    assert isinstance(shard, SparseTable) and shard.rows.tolist() == [3, 7, 999]
    np.testing.assert_array_equal(shard.lookup([3, 7, 999]), table.lookup([3, 7, 999]))
