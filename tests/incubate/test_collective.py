"""The collective fleet: 1.6 collective programs build and run on one process, and with
several local processes (`fluidity launch --collective`) all-reduce their gradients over
gloo (torch.distributed, the `collective` extra) through the c_* ops in the program."""
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

import fluidity as fluid
from fluidity.distributed import collective
from fluidity.incubate.fleet.base import role_maker
from fluidity.incubate.fleet.collective import (CollectiveOptimizer, DistributedStrategy,
                                                TrainStatus, fleet)
from fluidity.transpiler.collective import GradAllReduce

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import collective_job  # noqa: E402

MISSING = collective.library_missing()
needs_library = pytest.mark.skipif(MISSING is not None, reason=f"the collective library is "
                                   f"absent: {MISSING}")


def _reference():
    """The model trained in one process on the whole global batches."""
    main, startup, loss = collective_job.model()
    with fluid.program_guard(main, startup):
        fluid.optimizer.SGD(collective_job.LR).minimize(loss)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    for x, y in collective_job.batches():
        exe.run(main, feed={"x": x, "y": y}, fetch_list=[loss], scope=scope)
    return {p.name: np.array(scope.find_var(p.name).get_tensor())
            for p in main.global_block().all_parameters()}


def _launch(tmp_path, mode, n=2):
    cmd = [sys.executable, "-m", "fluidity.distributed.launch", "--collective", "--worker_num",
           str(n), "--log_dir", str(tmp_path / "log"), os.path.join(HERE, "collective_job.py"),
           mode, str(tmp_path)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    logs = "".join(open(tmp_path / "log" / f"workerlog.{i}").read() for i in range(n)
                   if (tmp_path / "log" / f"workerlog.{i}").exists())
    assert r.returncode == 0, r.stdout + r.stderr + logs


def test_one_trainer_trains_as_the_optimizer_alone():
    """nranks 1: no collective op, the same result as the plain optimizer (no library)."""
    fleet.init(role_maker.UserDefinedCollectiveRoleMaker(0, ["127.0.0.1:6170"]))
    main, startup, loss = collective_job.model()
    with fluid.program_guard(main, startup):
        fleet.distributed_optimizer(fluid.optimizer.SGD(collective_job.LR)).minimize(loss)
    assert not [op.type for op in fleet.main_program.global_block().ops
                if op.type.startswith("c_")]
    assert fleet.worker_num() == 1 and fleet.worker_index() == 0 and fleet.is_first_worker()
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(fleet.startup_program, scope=scope)
    for x, y in collective_job.batches():
        exe.run(fleet.main_program, feed={"x": x, "y": y}, fetch_list=[loss], scope=scope)
    ref = _reference()
    for name, value in ref.items():
        np.testing.assert_array_equal(np.array(scope.find_var(name).get_tensor()), value)


def test_grad_allreduce_writes_fluids_ops():
    main, startup, loss = collective_job.model()
    with fluid.program_guard(main, startup):
        fluid.optimizer.SGD(0.1).minimize(loss)
    eps = ["127.0.0.1:6170", "127.0.0.1:6171"]
    GradAllReduce(nrings=2).transpile(startup, main, 1, eps, eps[1], wait_port=False)
    s = [op.type for op in startup.global_block().ops]
    assert s.count("c_gen_nccl_id") == s.count("c_comm_init") == 2
    gen = [op for op in startup.global_block().ops if op.type == "c_gen_nccl_id"][0]
    assert gen.attr("other_endpoints") == [eps[0]] and gen.attr("rank") == 1
    assert s.count("c_broadcast") == 4 and s[-2:] == ["c_sync_comm_stream"] * 2
    ops = main.global_block().ops
    types = [op.type for op in ops]
    assert types.count("c_allreduce_sum") == 4
    assert sorted(op.attr("ring_id") for op in ops if op.type == "c_allreduce_sum") == [0, 0, 1, 1]
    scale = [op for op in ops if op.type == "scale" and op.attr("scale") == 0.5]
    assert len(scale) == 1                          # the loss gradient, by 1/nranks
    first_opt = min(i for i, t in enumerate(types) if t == "sgd")
    assert types[first_opt - 2:first_opt] == ["c_sync_comm_stream"] * 2
    with pytest.raises(ValueError, match="must > 1"):
        GradAllReduce().transpile(startup, main, 0, eps[:1], eps[0])


def test_collective_ops_on_a_ring_of_one():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [2, 3], append_batch_size=False)
        nid = startup.global_block().create_var(name="nccl_id", persistable=True,
                                                type=fluid.core.VarDesc.VarType.RAW)
        startup.global_block().append_op(type="c_gen_nccl_id", outputs={"Out": nid},
                                         attrs={"rank": 0, "endpoint": "127.0.0.1:6170"})
        startup.global_block().append_op(type="c_comm_init", inputs={"X": nid},
                                         attrs={"nranks": 1, "rank": 0, "ring_id": 3})
        outs = []
        for op in ("c_allreduce_sum", "c_allreduce_min", "c_broadcast", "c_allgather",
                   "c_reducescatter", "c_sync_calc_stream"):
            o = main.global_block().create_var(name="o_" + op, dtype="float32")
            attrs = {"ring_id": 3, "nranks": 1} if op in ("c_allgather", "c_reducescatter") \
                else ({} if op == "c_sync_calc_stream" else {"ring_id": 3})
            main.global_block().append_op(type=op, inputs={"X": x}, outputs={"Out": o},
                                          attrs=attrs)
            outs.append(o)
        bad = main.global_block().create_var(name="bad", dtype="float32")
    exe = fluid.Executor()
    xv = np.arange(6, dtype=np.float32).reshape(2, 3)
    with pytest.raises(Exception, match="ring 3 is not initialized"):
        exe.run(main, feed={"x": xv}, fetch_list=outs)
    exe.run(startup)
    for got in exe.run(main, feed={"x": xv}, fetch_list=outs):
        np.testing.assert_array_equal(got, xv)
    with fluid.program_guard(main, startup):
        main.global_block().append_op(type="c_allgather", inputs={"X": x},
                                      outputs={"Out": bad}, attrs={"ring_id": 3, "nranks": 2})
    with pytest.raises(Exception, match="nranks=2 but ring 3 has 1 rank"):
        exe.run(main, feed={"x": xv}, fetch_list=[bad])


def test_role_makers_and_optimizer_check_their_arguments():
    rm = role_maker.UserDefinedCollectiveRoleMaker
    for kw, err in [({"worker_endpoints": None}, TypeError), ({"worker_endpoints": []},
                    ValueError), ({"worker_endpoints": [3, []]}, TypeError),
                    ({"worker_endpoints": ["a:1", "a:1"]}, ValueError),
                    ({"current_id": "0", "worker_endpoints": ["a:1"]}, TypeError),
                    ({"current_id": -1, "worker_endpoints": ["a:1"]}, ValueError),
                    ({"current_id": 1, "worker_endpoints": ["a:1"]}, ValueError)]:
        with pytest.raises(err):
            rm(**kw)
    with pytest.raises(TypeError):
        role_maker.UserDefinedRoleMaker(0, role_maker.Role.WORKER, 1, None)
    with pytest.raises(ValueError):
        role_maker.UserDefinedRoleMaker(0, role_maker.Role.WORKER, 0, ["a:1"])
    with pytest.raises(TypeError):
        fleet.init("pserver")
    CollectiveOptimizer(fluid.optimizer.Adam(), strategy=None)
    s = DistributedStrategy()
    s.forward_recompute, s.recompute_checkpoints = True, "x"
    with pytest.raises(ValueError, match="should be a List"):
        CollectiveOptimizer(fluid.optimizer.Adam(), s)
    s.recompute_checkpoints = []
    with pytest.raises(ValueError, match="recompute_checkpoints"):
        CollectiveOptimizer(fluid.optimizer.Adam(), s).minimize(None)
    with pytest.raises(TypeError):
        CollectiveOptimizer("Adam")


def test_checkpoints_keep_the_train_status(tmp_path, monkeypatch):
    monkeypatch.setenv("PADDLE_TRAINER_ID", "0")
    monkeypatch.setenv("PADDLE_TRAINER_ENDPOINTS", "127.0.0.1:6070")
    fleet.init(role_maker.PaddleCloudRoleMaker(is_collective=True))
    main, startup, loss = collective_job.model()
    with fluid.program_guard(main, startup):
        fleet.distributed_optimizer(fluid.optimizer.Adam(0.001)).minimize(loss)
    exe = fluid.Executor()
    with fluid.scope_guard(fluid.Scope()):
        exe.run(fleet.startup_program)
        fleet.save_check_point(exe, str(tmp_path), TrainStatus(2))
        assert fleet._get_last_checkpoint_no(str(tmp_path)) == 0
        assert fleet.load_check_point(exe, str(tmp_path), 0) == TrainStatus(2)
        fleet.save_check_point(exe, str(tmp_path), TrainStatus(3), remain_all_checkpoint=False)
        assert sorted(os.listdir(tmp_path)) == ["__paddle_fleet_checkpoint__.1"]
        with pytest.raises(TypeError, match="Executor"):
            fleet.save_persistables("executor", str(tmp_path / "p"))
        fleet.save_inference_model(exe, str(tmp_path / "m"), ["x", "y"], [loss])
        assert os.path.exists(tmp_path / "m" / "__model__")


@needs_library
def test_two_trainers_train_as_one_process_on_the_whole_batch(tmp_path):
    """Each trainer computes the mean gradient of its half batch, scaled by 1/2; the
    all-reduce sums them: the mean gradient over the whole batch, summed in another order.
    A float32 sum of k = 16 terms in another order differs by at most about k * 2**-24
    (1e-6) of the terms' magnitudes; the forward values of a row are the same in both runs
    but for the matmul's blocking (a few ulps); over 4 SGD steps at lr 0.1 these add to a
    few 1e-6 of the parameters: rtol 1e-5 (atol 1e-6 for the entries near 0)."""
    _launch(tmp_path, "train")
    ref = _reference()
    got = [dict(np.load(tmp_path / f"params.{r}.npz")) for r in range(2)]
    for name, value in ref.items():
        np.testing.assert_allclose(got[0][name], value, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(got[0][name], got[1][name])   # one model on both
    types = (tmp_path / "ops.0.txt").read_text().split()
    assert types.count("c_allreduce_sum") == 4


@needs_library
def test_collective_ops_over_two_processes(tmp_path):
    _launch(tmp_path, "ops")
    x = np.arange(12, dtype=np.float32).reshape(4, 3) + 1
    xs = [x * 1, x * 2]
    for r in range(2):
        got = np.load(tmp_path / f"ops.{r}.npz")
        np.testing.assert_array_equal(got["c_allreduce_sum"], xs[0] + xs[1])
        np.testing.assert_array_equal(got["c_allreduce_max"], xs[1])
        np.testing.assert_array_equal(got["c_allreduce_prod"], xs[0] * xs[1])
        np.testing.assert_array_equal(got["c_broadcast"], xs[1])
        np.testing.assert_array_equal(got["c_allgather"], np.concatenate(xs))
        np.testing.assert_array_equal(got["c_reducescatter"], (xs[0] + xs[1])[2 * r:2 * r + 2])
        np.testing.assert_array_equal(got["total"], [3.0, 2.0])
        assert got["gathered"].tolist() == [0, 10]


def _ring_of_two(rank=0):
    """A startup program that starts ring 0 of 2 ranks as this rank (over a free port)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    eps = [f"127.0.0.1:{s.getsockname()[1]}", "127.0.0.1:1"]
    s.close()
    startup = fluid.Program()
    block = startup.global_block()
    nid = block.create_var(name="nccl_id", persistable=True, type=fluid.core.VarDesc.VarType.RAW)
    block.append_op(type="c_gen_nccl_id", outputs={"Out": nid},
                    attrs={"rank": rank, "endpoint": eps[rank], "other_endpoints": eps[1:]})
    block.append_op(type="c_comm_init", inputs={"X": nid},
                    attrs={"nranks": 2, "rank": rank, "ring_id": 0})
    return startup


def test_several_ranks_without_the_library_name_the_extra(monkeypatch):
    """nranks > 1 without torch: c_comm_init says what to install (building and
    transpiling the programs needs no library)."""
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setitem(sys.modules, "torch.distributed", None)
    assert "fluidity[collective]" in collective.library_missing()
    before = collective.rings()
    with pytest.raises(RuntimeError, match=r"pip install 'fluidity\[collective\]'"):
        fluid.Executor().run(_ring_of_two(), scope=fluid.Scope())
    assert collective.rings() == before             # no ring half made


def _start(tmp_path, mode, ranks, n=2, timeout_s=60):
    """Start trainers `ranks` of an n-rank job directly, with Paddle's environment (as a
    cluster scheduler does: no launcher to stop the others when one fails)."""
    s = [socket.socket() for _ in range(n)]
    for x in s:
        x.bind(("127.0.0.1", 0))
    eps = [f"127.0.0.1:{x.getsockname()[1]}" for x in s]
    for x in s:
        x.close()
    procs = {}
    for r in ranks:
        env = dict(os.environ, PADDLE_TRAINER_ID=str(r), PADDLE_TRAINERS_NUM=str(n),
                   PADDLE_TRAINER_ENDPOINTS=",".join(eps), PADDLE_CURRENT_ENDPOINT=eps[r],
                   PADDLE_TRAINING_ROLE="TRAINER", FLAGS_collective_timeout_s=str(timeout_s),
                   OPENBLAS_NUM_THREADS="1")
        procs[r] = subprocess.Popen([sys.executable, os.path.join(HERE, "collective_job.py"),
                                     mode, str(tmp_path)], env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)
    return procs


@needs_library
def test_a_rank_that_dies_fails_the_others(tmp_path):
    """The last rank exits after its first step; rank 0, in its second step's all-reduce,
    fails with an error naming the op and the ring instead of waiting for it (the timeout,
    60 s, is a bound: a closed connection fails the call at once)."""
    procs = _start(tmp_path, "die", [0, 1], timeout_s=60)
    t = time.monotonic()
    out0 = procs[0].communicate(timeout=240)[0]
    procs[1].communicate(timeout=60)
    assert procs[1].returncode == 3
    assert procs[0].returncode != 0, out0
    assert "c_allreduce_sum" in out0 and "ring 0 (rank 0 of 2)" in out0, out0
    assert "another rank died" in out0, out0
    assert time.monotonic() - t < 200
    assert not (tmp_path / "params.0.npz").exists()


@needs_library
def test_a_rank_that_never_comes_fails_the_others(tmp_path):
    """Rank 1 of 2 never starts: rank 0's startup program fails at c_comm_init after
    FLAGS_collective_timeout_s (3 s here) with what it waited for."""
    procs = _start(tmp_path, "train", [0], timeout_s=3)
    out0 = procs[0].communicate(timeout=180)[0]
    assert procs[0].returncode != 0, out0
    assert "c_comm_init: ring 0 (rank 0 of 2" in out0 and "could not start" in out0, out0
    assert "FLAGS_collective_timeout_s=3 s" in out0, out0


@needs_library
def test_a_rank_that_stalls_fails_the_others_after_the_timeout(tmp_path):
    """The last rank stays alive but stops calling the all-reduce: rank 0's call fails
    after FLAGS_collective_timeout_s (5 s here) instead of waiting for ever."""
    procs = _start(tmp_path, "stall", [0, 1], timeout_s=5)
    try:
        out0 = procs[0].communicate(timeout=180)[0]
    finally:
        procs[1].kill()
        procs[1].communicate()
    assert procs[0].returncode != 0, out0
    assert "c_allreduce_sum" in out0 and "FLAGS_collective_timeout_s=5 s" in out0, out0


@pytest.mark.parametrize("value", ["soon", "0", "-3", "inf", "nan"])
def test_a_bad_timeout_is_named(monkeypatch, value):
    monkeypatch.setenv("FLAGS_collective_timeout_s", value)
    with pytest.raises(ValueError, match="FLAGS_collective_timeout_s"):
        collective.init_ring(7, collective.CollectiveService.gen_comm_id(
            0, "127.0.0.1:1", ["127.0.0.1:2"]), 0, 2)
    assert 7 not in collective.rings()
