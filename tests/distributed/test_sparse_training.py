"""Sparse gradients through the distribute transpiler, end to end on loopback: 2 pservers x
2 trainers in sync mode train a model with an `is_sparse` embedding (sliced over both
servers: `split_selected_rows`) exactly as one process does on the trainers' batches put
together, step by step; with exponential_decay + L2Decay + GradientClipByValue too (LR-decay
block, regularization and clipping on the pservers); async lowers the loss."""
import os
import sys

import numpy as np
import pytest

import fluidity as fluid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from replay import replay  # noqa: E402
from sparse_job import run_job, single_process  # noqa: E402

VOCAB, WIDTH, BATCH = 5000, 8, 12


def sparse_net(train):
    """The model every job here trains (an `is_sparse` embedding named "emb" -> fc 16 tanh
    -> fc 1, squared error) with `train(main, loss)` adding its optimization inside the
    program guard; returns (main, startup, loss)."""
    main, start = fluid.Program(), fluid.Program()
    main.random_seed = start.random_seed = 11
    with fluid.program_guard(main, start), fluid.unique_name.guard():
        ids = fluid.layers.data("ids", [1], dtype="int64", lod_level=1)
        y = fluid.layers.data("y", [1])
        emb = fluid.layers.embedding(ids, [VOCAB, WIDTH], is_sparse=True,
                                     param_attr=fluid.ParamAttr(name="emb"))
        h = fluid.layers.fc(emb, 16, act="tanh")
        pred = fluid.layers.fc(h, 1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        train(main, loss)
    return main, start, loss


def build_sparse(opt="sgd", lr=0.5, schedule=False, reg=None, clip=None):
    def train(main, loss):
        if clip is not None:
            # the dense parameters only: a sparse row's clip sees one id's gradient
            # per trainer batch (not the whole batch's), so it binds differently
            fluid.clip.set_gradient_clip(
                fluid.clip.GradientClipByValue(clip),
                param_list=[p.name for p in main.global_block().all_parameters()
                            if p.name != "emb"])
        rate = fluid.layers.exponential_decay(lr, 2, 0.8, staircase=False) \
            if schedule else lr
        kw = {"regularization": fluid.regularizer.L2Decay(reg)} if reg else {}
        {"sgd": lambda: fluid.optimizer.SGD(rate, **kw),
         "adam": lambda: fluid.optimizer.Adam(rate, lazy_mode=True, **kw),
         "adagrad": lambda: fluid.optimizer.Adagrad(rate, **kw),
         "momentum": lambda: fluid.optimizer.Momentum(rate, 0.9, **kw)}[opt]().minimize(loss)
    return lambda: sparse_net(train)


def batch_all(step, trainers=2, same=False):
    """The step's batch of all trainers together: ids from a small hot set plus a few
    anywhere (duplicates inside a batch and across trainers), targets from a fixed rule."""
    rng = np.random.RandomState(100 + step)
    n = BATCH if same else BATCH * trainers
    hot = rng.randint(0, 40, n)
    cold = rng.randint(0, VOCAB, n)
    ids = np.where(rng.rand(n) < 0.7, hot, cold).astype("int64")
    y = (np.sin(ids * 0.01) + 0.1 * (ids % 3)).astype("float32").reshape(-1, 1)
    if same:
        ids, y = np.concatenate([ids] * trainers), np.concatenate([y] * trainers)
    lod = fluid.create_lod_tensor(ids.reshape(-1, 1), [[1] * len(ids)], fluid.CPUPlace())
    return {"ids": lod, "y": y}, ids, y


def trainer_batch(same=False):
    def batch(step, tid):
        _feed, ids, y = batch_all(step, same=same)
        rows = slice(tid * BATCH, (tid + 1) * BATCH)
        part = ids[rows]
        return {"ids": fluid.create_lod_tensor(part.reshape(-1, 1), [[1] * len(part)],
                                               fluid.CPUPlace()), "y": y[rows]}
    return batch


def _check_matches(res, build, steps, same=False):
    """The job equals its one-process replay (replay.py) bit for bit."""
    for k in res.init[0]:       # every trainer starts from and ends with the servers' values
        np.testing.assert_array_equal(res.init[0][k], res.init[1][k])
        np.testing.assert_array_equal(res.final[0][k], res.final[1][k])
    batch = trainer_batch(same)
    want, want_losses = replay(build, lambda s: [batch(s, 0), batch(s, 1)], steps, res.init[0])
    got_losses = (np.array(res.losses[0]) + np.array(res.losses[1])) / 2
    np.testing.assert_array_equal(got_losses, want_losses)
    for k, v in want.items():
        assert not np.allclose(v, res.init[0][k]), k             # training moved it
        np.testing.assert_array_equal(res.final[0][k], v, err_msg=k)
    return want


def test_trainer_sends_selected_rows_split_by_height_sections():
    from sparse_job import _transpile
    t, main, _start, _loss = _transpile(build_sparse(), 0, ["127.0.0.1:1", "127.0.0.1:2"],
                                        2, True, None)
    prog = t.get_trainer_program()
    ops = prog.global_block().ops
    split = [op for op in ops if op.type == "split_selected_rows"]
    assert len(split) == 1
    assert split[0].input("X") == ["emb@GRAD"]
    assert split[0].attr("height_sections") == [2500, 2500]
    assert split[0].output("Out") == ["emb@GRAD.block0.trainer_0", "emb@GRAD.block1.trainer_0"]
    send = [op for op in ops if op.type == "send" and op.input("X") == split[0].output("Out")]
    assert send[0].attr("epmap") == ["127.0.0.1:1", "127.0.0.1:2"]
    for o in split[0].output("Out"):
        assert prog.global_block().var(o).type == fluid.core.VarDesc.VarType.SELECTED_ROWS
    ps = t.get_pserver_program("127.0.0.1:2")
    blk = [b for b in ps.blocks[1:] if any(op.type == "sgd" and op.input("Param") ==
                                          ["emb.block1"] for op in b.ops)][0]
    assert [op.type for op in blk.ops] == ["sum", "scale", "sgd"]
    assert blk.ops[0].input("X") == ["emb@GRAD.block1.trainer_0", "emb@GRAD.block1.trainer_1"]


@pytest.mark.parametrize("opt", ["sgd", "adam", "adagrad", "momentum"])
def test_sync_sparse_embedding_matches_single_process(opt):
    build = build_sparse(opt, lr=0.5 if opt in ("sgd", "momentum") else 0.05)
    steps = 4
    res = run_job(build, trainer_batch(), steps)
    want = _check_matches(res, build, steps)
    touched = {int(i) for s in range(steps) for i in batch_all(s)[1]}
    moved = np.flatnonzero(np.any(want["emb"] != res.init[0]["emb"], axis=1))
    if opt in ("sgd", "adam", "adagrad"):        # only the rows the batches touched move
        assert set(moved.tolist()) <= touched


def test_sync_lr_decay_l2_and_clip_match_single_process():
    build = build_sparse("momentum", lr=0.3, schedule=True, reg=0.01, clip=0.02)
    steps = 5
    res = run_job(build, trainer_batch(same=True), steps)
    _check_matches(res, build, steps, same=True)
    # the schedule, the decay and the clip all changed the result
    for other in (build_sparse("momentum", lr=0.3, reg=0.01, clip=0.02),
                  build_sparse("momentum", lr=0.3, schedule=True, clip=0.02),
                  build_sparse("momentum", lr=0.3, schedule=True, reg=0.01)):
        alt, _ = single_process(other, lambda s: batch_all(s, same=True)[0], steps,
                                res.init[0])
        assert not np.allclose(alt["fc_0.w_0"], res.final[0]["fc_0.w_0"], atol=1e-6)
    ps = next(iter(res.pserver_programs.values()))
    ls = [op for op in ps.global_block().ops if op.type == "listen_and_serv"][0]
    lr_block = ls.attr("lr_decay_block_id")
    assert lr_block == 1 and ls.attr("optimize_blocks")[0] == 1
    assert "increment" in [op.type for op in ps.blocks[lr_block].ops]
    tr = res.trainer_programs[0].global_block().ops
    # clipping one gradient runs on its server after the trainers' are merged (Fluid 1.6)
    assert "clip" not in [op.type for op in tr] and "increment" not in [op.type for op in tr]
    assert any("clip" in [op.type for op in b.ops] for b in ps.blocks)


def test_async_sparse_embedding_lowers_the_loss():
    def batch(step, tid):       # ids from a set of 40 seen again and again
        rng = np.random.RandomState(1000 * tid + step)
        ids = rng.randint(0, 40, BATCH).astype("int64")
        y = (np.sin(ids * 0.3) + 0.1 * (ids % 3)).astype("float32").reshape(-1, 1)
        return {"ids": fluid.create_lod_tensor(ids.reshape(-1, 1), [[1] * BATCH],
                                               fluid.CPUPlace()), "y": y}
    build = build_sparse("sgd", lr=0.1)    # each trainer's gradient is applied whole
    res = run_job(build, batch, 40, sync=False)
    for tid in (0, 1):
        losses = res.losses[tid]
        assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:5]), losses


def test_two_minimize_calls_apply_both_updates_from_the_sent_gradient():
    """Two SGD optimizers (0.3, 0.2) minimizing one loss. As Fluid 1.8's transpiler, the
    trainer sends the first backward pass's gradient and the server runs both updates from
    the merged one: a sync job of 2 x 2 ends where one process with SGD(0.5) does. (In one
    process the second pass would see the weights the first update changed; a parameter
    server, Fluid's included, does not reproduce that.)"""
    def build_with(rates):
        def train(_main, loss):
            for rate in rates:
                fluid.optimizer.SGD(rate).minimize(loss)
        return lambda: sparse_net(train)
    steps = 3
    res = run_job(build_with([0.3, 0.2]), trainer_batch(same=True), steps)
    want, _ = single_process(build_with([0.5]), lambda s: batch_all(s, same=True)[0], steps,
                             res.init[0])
    for k, v in want.items():
        assert not np.allclose(v, res.init[0][k]), k              # training moved it
        np.testing.assert_allclose(res.final[0][k], v, rtol=1e-5, atol=1e-6, err_msg=k)
