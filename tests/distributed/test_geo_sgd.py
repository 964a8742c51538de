"""GEO-SGD (transpiler/geo_sgd_transpiler.py, distributed/communicator.py): the pure pass's
programs, and 2 trainers x 2 pservers on loopback in this process, each trainer an
AsyncExecutor with 2 worker threads on the demo's CTR-DNN over small generated MultiSlot
files (examples/dist_ctr.py's functions, as its processes run them)."""
import json
import os
import sys
import threading

import numpy as np
import pytest

import fluidity as fluid
from fluidity.datafeed import DataFeedDesc
from fluidity.distributed.launch import free_ports
from fluidity.errors import ExecutionError, ProgramError
from fluidity.ir.views import ProgramView
from fluidity.transpiler import DistributeTranspilerConfig
from fluidity.transpiler import geo_sgd_transpiler as geo

from paths import ROOT

sys.path.insert(0, os.path.join(ROOT, "examples"))
import dist_ctr  # noqa: E402

PUSH = 4


@pytest.fixture(scope="module")
def ctr(tmp_path_factory):
    d = tmp_path_factory.mktemp("geo")
    train, test = dist_ctr.make_data(str(d), 8000, 4)
    with open(train["model"]) as f:
        model = json.load(f)
    desc = DataFeedDesc(train["desc"])
    desc.set_batch_size(64)
    main, startup, test_prog, v = dist_ctr.build(model, dist_ctr.SHAPE["vocab"])
    return dict(train=train, test=test, desc=desc, main=main, startup=startup,
                test_prog=test_prog, v=v, model=model)


def _eps(n=2):
    return [f"127.0.0.1:{p}" for p in free_ports(n)]


def _ops(prog):
    return [op.type for op in prog.global_block().ops]


# --- the pass -----------------------------------------------------------------------------
def test_plan_finds_the_sparse_table_its_id_slots_and_slices_it(ctr):
    t = dist_ctr.geo_transpile(ctr["main"], ctr["startup"], 0, _eps(), 2, PUSH)
    plan = t.plan
    table = {v.name: v for v in plan.vars}["SparseFeatFactors"]
    assert table.sparse and table.shape == [5000, 8]
    assert table.id_slots == ctr["model"]["sparse_slots"]
    assert [(b.begin, b.rows) for b in table.blocks] == [(0, 2500), (2500, 2500)]
    assert {b.endpoint for b in table.blocks} == set(plan.endpoints)
    assert all(not v.sparse for v in plan.dense) and len(plan.dense) == 6   # 3 fc: w, b
    assert plan.push_nums == PUSH and plan.trainers == 2


def test_trainer_program_is_the_training_program_and_inputs_untouched(ctr):
    before = ctr["main"].desc.SerializeToString()
    t = dist_ctr.geo_transpile(ctr["main"], ctr["startup"], 1, _eps(), 2, PUSH)
    assert _ops(t.get_trainer_program()) == _ops(ctr["main"])
    assert ctr["main"].desc.SerializeToString() == before


def test_pserver_program_sums_deltas_and_serves_touched_rows(ctr):
    eps = _eps()
    t = dist_ctr.geo_transpile(ctr["main"], ctr["startup"], 0, eps, 2, PUSH)
    blocks_of = {b.name: b for v in t.plan.vars for b in v.blocks}
    for ep in eps:
        pmain, pstart = t.get_pserver_programs(ep)
        b0 = pmain.global_block()
        (ls,) = [op for op in b0.ops]
        assert ls.type == "listen_and_serv"
        assert ls.attr("sync_mode") is False and ls.attr("distributed_mode") == geo.GEO_MODE
        assert ls.attr("Fanin") == 2
        g2b = dict(s.rsplit(":", 1) for s in ls.attr("grad_to_block_id"))
        mine = [b for b in blocks_of.values() if b.endpoint == ep]
        for b in mine:
            sub = pmain.block(int(g2b[b.delta]))
            (op,) = sub.ops
            assert (op.type, op.input("X"), op.output("Out")) == ("sum", [b.name, b.delta],
                                                                  [b.name])
            assert b0.var(b.name).persistable
        table = [b for b in mine if b.name.startswith("SparseFeatFactors")]
        assert len(table) == 1
        b = table[0]
        assert b0.var(b.delta).type == fluid.core.VarDesc.VarType.SELECTED_ROWS
        for k in range(2):
            (op,) = pmain.block(int(g2b[b.rows_var(k)])).ops
            assert op.type == "lookup_table_v2"
            assert (op.input("W"), op.input("Ids"), op.output("Out")) == (
                [b.name], [b.rows_var(k)], [b.pulled_var(k)])
        assert sorted(ls.input("X")) == sorted(g2b)
        # the pserver startup initializes exactly its blocks, at the blocks' shapes
        inits = {op.output_arg_names[0]: list(op.attr("shape"))
                 for op in pstart.global_block().ops}
        assert inits == {b.name: [b.rows] + list(
            ProgramView(ctr["main"].desc).global_block().var(
                b.name.split(".block")[0]).shape[1:]) for b in mine}


def test_bad_geo_configurations_raise_clear_errors(ctr):
    eps = _eps()
    with pytest.raises(ValueError, match="sync_mode=False"):
        geo.GeoSgdTranspiler().transpile(0, ctr["main"], ",".join(eps), 2, sync_mode=True,
                                         startup_program=ctr["startup"])
    cfg = DistributeTranspilerConfig()
    cfg.geo_sgd_need_push_nums = 0
    with pytest.raises(ValueError, match="geo_sgd_need_push_nums"):
        geo.transpile(ctr["main"].desc, ctr["startup"].desc, 0, eps, 2, cfg)
    with pytest.raises(ValueError, match="trainer_id 2"):
        geo.transpile(ctr["main"].desc, ctr["startup"].desc, 2, eps, 2)
    bare, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(bare, start):
        x = fluid.layers.data("x", [3])
        fluid.layers.fc(x, 2)
    with pytest.raises(ProgramError, match="no optimizer ops"):
        geo.transpile(bare.desc, start.desc, 0, eps, 2)
    with pytest.raises(RuntimeError, match="transpile"):
        geo.GeoSgdTranspiler().get_trainer_program()


# --- 2 trainers x 2 pservers ----------------------------------------------------------------
def _start_servers(t, eps):
    scopes, threads, errors = {}, [], []

    def serve(ep):
        try:
            scopes[ep] = fluid.Scope()
            dist_ctr.serve(t, ep, scopes[ep])
        except BaseException as e:  # noqa: BLE001 - the test reports it
            errors.append(e)
    for ep in eps:
        th = threading.Thread(target=serve, args=(ep,), daemon=True)
        th.start()
        threads.append(th)
    return scopes, threads, errors


def _train_all(ctr, eps, files_of, push=PUSH):
    ts = [dist_ctr.geo_transpile(ctr["main"], ctr["startup"], k, eps, 2, push)
          for k in range(2)]
    out, errors = {}, {}

    def trainer(k):
        scope = fluid.Scope()
        try:
            out[k] = (scope,) + dist_ctr.train(ts[k], ctr["startup"], ctr["desc"],
                                               files_of[k], 2, 2, ctr["v"]["loss"], scope)
        except BaseException as e:  # noqa: BLE001 - the test reports it
            errors[k] = e
    threads = [threading.Thread(target=trainer, args=(k,), daemon=True) for k in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    return ts, out, errors


def _local_losses(ctr):
    """The held-out loss of the initial parameters, and after 2 local epochs."""
    scope = fluid.Scope()
    fluid.Executor().run(ctr["startup"], scope=scope)
    losses = []
    for epoch in range(3):
        if epoch:
            fluid.AsyncExecutor().run(ctr["main"], ctr["desc"], ctr["train"]["files"], 2,
                                      fetch=[ctr["v"]["loss"]], scope=scope, progress=False)
        if epoch != 1:
            losses.append(dist_ctr.held_out_logloss(ctr["test_prog"], ctr["v"]["predict"],
                                                    ctr["desc"], ctr["test"]["files"], scope))
    return losses


def test_two_trainers_two_pservers_reach_the_local_loss_with_the_servers_values(ctr):
    untrained, local = _local_losses(ctr)
    eps = _eps()
    files = ctr["train"]["files"]
    server_scopes, servers, server_errors = _start_servers(
        dist_ctr.geo_transpile(ctr["main"], ctr["startup"], 0, eps, 2, PUSH), eps)
    ts, out, errors = _train_all(ctr, eps, {0: files[0::2], 1: files[1::2]})
    assert not errors, errors
    try:
        for k in range(2):
            scope, comm, results = out[k]
            assert all(r.mode == "threads" for r in results)
            assert comm.stats.syncs >= 5, comm.stats.as_dict()
            s = comm.stats
            # the sparse table: only touched rows travel; down exactly the ideal, both ways
            # together within 1.2x of it (row ids: 8 bytes up with the delta, 4 to ask)
            assert s.sparse_received == s.sparse_ideal_each_way > 0
            assert s.sparse_sent + s.sparse_received <= 1.2 * 2 * s.sparse_ideal_each_way
        scope, comm, _ = out[0]
        comm.pull_all()
        loss = dist_ctr.held_out_logloss(ctr["test_prog"], ctr["v"]["predict"], ctr["desc"],
                                         ctr["test"]["files"], scope)
    finally:
        for k in out:
            out[k][1].close()
    for th in servers:
        th.join(30)
    assert not server_errors and not any(th.is_alive() for th in servers)
    # GEO-SGD is asynchronous: how the trainers' syncs interleave with their Hogwild
    # workers (a merge descheduled mid-row loses the workers' updates to that row, as
    # Hogwild allows) moves the result. Measured: local 0.6024 from an untrained 0.652, GEO
    # 0.6028-0.6083 on this machine and 0.620 once in CI under load. What the test holds
    # to is that the servers' global model learned most of what one machine learns: more
    # than half of the held-out loss the local run gained; that each trainer's updates
    # reach the servers is checked by the counters above.
    assert loss < untrained - 0.5 * (untrained - local), (loss, local, untrained)
    # the pulled parameters are the servers' (blocks put back together)
    for v in ts[0].plan.vars:
        servers_value = np.concatenate([
            np.asarray(server_scopes[b.endpoint].find_var(b.name).value._array)
            for b in v.blocks])
        np.testing.assert_array_equal(np.asarray(scope.find_var(v.name).value._array),
                                      servers_value)


def test_a_trainers_failing_worker_stops_its_job_with_file_and_line(ctr, tmp_path):
    bad = tmp_path / "bad-00000.txt"
    lines = open(ctr["train"]["files"][1]).read().splitlines()[:300]
    lines[120] = lines[120].replace(" ", " x", 1)          # a token that is not a number
    bad.write_text("\n".join(lines) + "\n")
    eps = _eps()
    _scopes, servers, server_errors = _start_servers(
        dist_ctr.geo_transpile(ctr["main"], ctr["startup"], 0, eps, 2, PUSH), eps)
    _ts, out, errors = _train_all(ctr, eps, {0: ctr["train"]["files"][:1], 1: [str(bad)]})
    try:
        assert set(errors) == {1}, errors
        err = errors[1]
        assert isinstance(err, ExecutionError)
        assert f"{bad}" in str(err) and "121" in str(err), str(err)
    finally:
        for k in out:
            out[k][1].close()
    for th in servers:     # the failed trainer said goodbye too: the servers are done
        th.join(30)
    assert not server_errors and not any(th.is_alive() for th in servers)


class _ServersGoneClient:
    """An RPC client whose servers answer the first pull and are gone after it."""

    def __init__(self, scope, plan):
        self.scope, self.plan = scope, plan

    def get_vars(self, items, trainer_id):
        blocks = {b.name: (v.name, b) for v in self.plan.vars for b in v.blocks}
        out = []
        for _ep, name in items:
            p, b = blocks[name]
            arr = np.asarray(self.scope.find_var(p).value._array)
            out.append(fluid.LoDTensor(arr[b.begin:b.begin + b.rows].copy()))
        return out

    def send_vars(self, items, trainer_id):
        from fluidity.distributed import RPCError
        raise RPCError(f"SendVariable to pserver {items[0][0]}: unreachable or no answer "
                       f"within the 1 s deadline (FLAGS_rpc_deadline)")

    def close(self):
        pass


def test_a_failing_sync_stops_the_run_with_the_endpoint(ctr):
    from fluidity.distributed.communicator import GeoCommunicator
    t = dist_ctr.geo_transpile(ctr["main"], ctr["startup"], 0, ["127.0.0.1:1"], 1, PUSH)
    scope = fluid.Scope()
    fluid.Executor().run(ctr["startup"], scope=scope)
    comm = GeoCommunicator(t.plan, scope, client=_ServersGoneClient(scope, t.plan))
    comm.start()
    try:
        with pytest.raises(ExecutionError, match="127.0.0.1:1"):
            fluid.AsyncExecutor().run(t.get_trainer_program(), ctr["desc"],
                                      ctr["train"]["files"], 2, scope=scope, progress=False)
    finally:
        comm.abort()
    # the parameters stay readable; no observer is left behind
    from fluidity.executor import async_executor
    assert not async_executor.observers_of(scope)
    assert np.isfinite(np.asarray(scope.find_var("SparseFeatFactors").value._array)).all()
