"""Parameter-server checkpoints: a pserver SIGKILLed mid-run and restarted on its endpoint
resumes from its recovery checkpoint and round log, the trainers reconnect and resend the
step in flight, and the final parameters are the uninterrupted run's; checkpoint_notify
saves a snapshot that loads back."""
import os
import signal

import numpy as np
import pytest

import fluidity as fluid
from fluidity.distributed import checkpoint as ckpt
from fluidity.io import atomic

from dist_job import Job, load, single_process


# Killed between two steps (the trainers sleep after each), or at any moment of a step
# (they do not): then a step's gradients or barrier reached the dead server, and the
# trainers resend them unless its round log shows the round applied. With periodic
# snapshots (every 0.3 s here) the restart loads a later snapshot and a shorter log.
@pytest.mark.parametrize("kill_at,sleep,minutes", [(6, "0.05", "0.005"), (8, "0", "0")])
def test_killed_pserver_restarts_and_no_update_is_lost(tmp_path, kill_at, sleep, minutes):
    steps, lr = 16, 0.1
    job = Job(tmp_path, ["sync", tmp_path, steps, lr],
              env={"FLAGS_pserver_checkpoint_dir": str(tmp_path / "ckpt"),
                   "FLAGS_pserver_checkpoint_minutes": minutes,
                   "FLUIDITY_TEST_STEP_SLEEP": sleep, "FLAGS_rpc_deadline": "60000"})
    job.run_restarting_server(1, kill_at)
    assert "resumed from" in job.log("server", 1), job.logs()
    if minutes != "0":           # server 0 was never killed: its snapshots are periodic ones
        snap = tmp_path / "ckpt" / job.eps[0].replace(":", "_") / ckpt.SNAPSHOT
        assert ckpt.load(str(snap), fluid.Scope())["version"] > 0
    assert all("pserver %s restarted" % job.eps[1] in job.log("worker", i) for i in range(2))
    init, final0, _ = load(tmp_path / "trainer_0.npz")
    _init1, final1, _ = load(tmp_path / "trainer_1.npz")
    want = single_process(init, steps, lr, 2)
    for k, v in want.items():
        np.testing.assert_array_equal(final0[k], final1[k])
        np.testing.assert_array_equal(final0[k], v, err_msg=k)


def test_pserver_restarted_without_its_checkpoint_fails_the_trainers_clearly(tmp_path):
    job = Job(tmp_path, ["sync", tmp_path, 200, 0.1],
              env={"FLUIDITY_TEST_STEP_SLEEP": "0.02", "FLAGS_rpc_deadline": "60000"})
    try:
        job.start()
        job.wait_for("worker", 0, r"step 3\b", 60)
        job.kill("server", 0, signal.SIGKILL)
        job.start_server(0)                        # no recovery dir: starts afresh
        for i in range(2):
            assert job.wait("worker", i, 60) != 0
    finally:
        job.stop_all()
    for i in range(2):
        assert f"pserver {job.eps[0]} restarted at version 0" in job.log("worker", i), \
            job.logs()
        assert "lost applied rounds" in job.log("worker", i)


def test_checkpoint_notify_saves_every_persistable_and_loads_back(tmp_path):
    steps = 3
    job = Job(tmp_path, ["sync", tmp_path, steps, 0.1], servers=2, trainers=1,
              env={"FLAGS_pserver_checkpoint_notify_root": str(tmp_path),
                   "FLUIDITY_TEST_NOTIFY_DIR": "saved",
                   "FLAGS_rpc_deadline": "60000"})
    try:
        job.start()
        assert job.wait("worker", 0, 90) == 0, job.logs()
        for i in range(2):
            assert job.wait("server", i, 30) == 0, job.logs()
    finally:
        job.stop_all()
    _init, final, _ = load(tmp_path / "trainer_0.npz")
    import fluidity as fluid
    got = {}
    for i in range(2):
        d = tmp_path / "saved" / f"pserver_{i}"
        assert (d / "__fluidity_manifest__.json").is_file()     # an atomic io save
        scope = fluid.Scope()
        state = ckpt.load(str(d), scope)
        assert state["version"] == steps and state["endpoint"] == job.eps[i]
        for name in state["variables"]:
            got[name] = np.array(scope.find_var(name).get_tensor())
    # the parameters (whole, or the blocks they were sliced into) and the learning rate
    for name, value in final.items():
        blocks = sorted((n for n in got if n == name or n.startswith(name + ".block")),
                        key=lambda n: int(n.rsplit("block", 1)[1]) if ".block" in n else 0)
        assert blocks, (name, sorted(got))
        np.testing.assert_array_equal(np.concatenate([got[b] for b in blocks]), value)
    assert any(n.startswith("learning_rate") for n in got), sorted(got)


def test_snapshot_is_atomic_and_refuses_a_corrupt_file(tmp_path):
    import fluidity as fluid
    from fluidity.core.tensor import LoDTensor, SelectedRows
    scope = fluid.Scope()
    scope.var("w").value = LoDTensor(np.arange(6, dtype="float32").reshape(2, 3))
    scope.var("table").value = SelectedRows([0, 3], 5, np.ones((2, 4), "float32"))
    scope.var("empty").value = None
    d = str(tmp_path / "snap")
    assert sorted(ckpt.save(d, scope, ["w", "table", "empty"], 7, "127.0.0.1:1")) == \
        ["table", "w"]
    back = fluid.Scope()
    assert ckpt.load(d, back)["version"] == 7
    np.testing.assert_array_equal(np.array(back.find_var("w").get_tensor()),
                                  np.array(scope.find_var("w").get_tensor()))
    sr = back.find_var("table").value
    assert list(sr.rows) == [0, 3] and sr.height == 5
    # a save that dies before its commit leaves the previous one whole
    with pytest.raises(RuntimeError):
        with atomic.StagedDirectory(d) as stage:
            open(os.path.join(stage.path, "w"), "wb").write(b"partial")
            raise RuntimeError("killed")
    assert ckpt.load(d, fluid.Scope())["version"] == 7
    with open(os.path.join(d, "w"), "r+b") as f:
        f.seek(-1, os.SEEK_END)
        f.write(b"\x7f")
    with pytest.raises(Exception, match="w"):
        ckpt.load(d, fluid.Scope())


def test_round_log_ignores_a_torn_tail(tmp_path):
    path = str(tmp_path / "rounds.log")
    log = ckpt.RoundLog(path)
    log.append(1, {"g": np.ones(3, "float32")})
    log.append(2, {"g": np.full(3, 2, "float32")})
    log.close()
    with open(path, "ab") as f:            # round 3 cut short by a kill
        f.write(b"\x40\x00\x00\x00\x00\x00\x00\x00partial")
    rounds = ckpt.RoundLog(path).rounds()
    assert [r for r, _ in rounds] == [1, 2]
    np.testing.assert_array_equal(np.array(rounds[1][1]["g"]), [2, 2, 2])
    ckpt.RoundLog(path).truncate()
    assert ckpt.RoundLog(path).rounds() == []


def test_checkpoint_notify_without_a_directory_is_refused():
    import fluidity as fluid
    prog = fluid.Program()
    prog.global_block().append_op(type="checkpoint_notify",
                                  attrs={"epmap": ["127.0.0.1:1"], "dir": ""})
    with pytest.raises(fluid.errors.ExecutionError, match="checkpoint_notify: attribute 'dir'"):
        fluid.Executor(fluid.CPUPlace()).run(prog, scope=fluid.Scope())
