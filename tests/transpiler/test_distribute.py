"""The distribute transpiler: trainer and pserver programs for 2 pservers x 2 trainers,
slicing, both dispatchers, and that the input programs are untouched."""
import pytest

import fluidity as fluid
from fluidity.transpiler import distribute as D

EPS = "127.0.0.1:6170,127.0.0.1:6171"


def _build(opt=None, hidden=256, din=64):
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start), fluid.unique_name.guard():
        x = fluid.layers.data("x", [din])
        y = fluid.layers.data("y", [1])
        h = fluid.layers.fc(x, hidden, act="relu")
        p = fluid.layers.fc(h, 1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(p, y))
        (opt or fluid.optimizer.SGD(0.1)).minimize(loss)
    return main, start


def _types(prog):
    return [op.type for op in prog.global_block().ops]


def _transpile(main, start, tid=0, trainers=2, sync=True, config=None):
    t = fluid.DistributeTranspiler(config)
    t.transpile(tid, program=main, startup_program=start, pservers=EPS, trainers=trainers,
                sync_mode=sync)
    return t


def test_slice_variable_whole_rows_and_min_block():
    assert D.slice_variable([64, 256], 2, 8192) == [(0, 32), (32, 32)]
    assert D.slice_variable([256, 1], 2, 8192) == [(0, 256)]        # under min_block_size
    assert D.slice_variable([100, 300], 3, 8192) == [(0, 34), (34, 34), (68, 32)]
    assert D.slice_variable([10], 4, 8192) == [(0, 10)]


def test_trainer_program_sync_two_trainers():
    main, start = _build()
    before = (main.desc.SerializeToString(), start.desc.SerializeToString())
    t = _transpile(main, start, tid=1)
    assert main.desc.SerializeToString() == before[0]     # the main program is untouched
    tp = t.get_trainer_program()
    types = _types(tp)
    assert "sgd" not in types
    assert types.count("send") == 4 and types.count("split_byref") == 1
    assert types.index("send_barrier") < types.index("recv") < types.index("fetch_barrier")
    assert types[-1] == "concat"
    ops = tp.global_block().ops
    split = next(op for op in ops if op.type == "split_byref")
    assert split.input("X") == ["fc_0.w_0@GRAD"]
    assert split.output("Out") == ["fc_0.w_0@GRAD.block0.trainer_1",
                                   "fc_0.w_0@GRAD.block1.trainer_1"]
    assert list(split.attr("sections")) == [32, 32]
    send = next(op for op in ops if op.type == "send" and op.input("X") == split.output("Out"))
    # round robin over the blocks in optimizer order: fc_0.b_0, fc_0.w_0.block0, .block1, ...
    assert list(send.attr("epmap")) == ["127.0.0.1:6171", "127.0.0.1:6170"]
    assert send.attr("sync_mode") is False                # "wait for the RPC": off in sync
    # an unsliced gradient is renamed per trainer where it is made
    assert any("fc_1.w_0@GRAD.trainer_1" in op.output_arg_names for op in ops
               if op.type == "mul_grad")
    barrier = next(op for op in ops if op.type == "send_barrier")
    assert list(barrier.attr("endpoints")) == EPS.split(",")
    assert barrier.attr("trainer_id") == 1
    concat = ops[-1]
    assert concat.input("X") == ["fc_0.w_0.block0", "fc_0.w_0.block1"]
    assert concat.output("Out") == ["fc_0.w_0"]
    # the trainer startup fetches the servers' initial values (as Fluid's transpile does)
    assert _types(start)[-3:] == ["recv", "fetch_barrier", "concat"]


def test_pserver_programs_sync_two_trainers():
    main, start = _build(fluid.optimizer.Momentum(0.1, 0.9))
    t = _transpile(main, start)
    owned = {}
    for ep in EPS.split(","):
        pm, ps = t.get_pserver_programs(ep)
        ls = pm.global_block().ops[-1]
        assert ls.type == "listen_and_serv"
        assert ls.attr("endpoint") == ep and ls.attr("Fanin") == 2
        assert ls.attr("sync_mode") is True
        blocks = list(ls.attr("optimize_blocks"))
        assert blocks == list(range(1, pm.num_blocks))
        g2b = dict(s.split(":") for s in ls.attr("grad_to_block_id"))
        for g, b in g2b.items():
            sub = pm.block(int(b))
            assert [op.type for op in sub.ops] == ["sum", "scale", "momentum"]
            assert sub.ops[0].input("X") == [f"{g}.trainer_0", f"{g}.trainer_1"]
            assert sub.ops[1].attr("scale") == pytest.approx(0.5)
            mom = sub.ops[2]
            owned[mom.input("Param")[0]] = ep
            assert mom.input("Grad") == [g]
            # the velocity is sliced with its parameter and initialized by the startup
            vel = mom.input("Velocity")[0]
            assert pm.global_block().var(vel).shape == pm.global_block().var(
                mom.input("Param")[0]).shape
            init = [op for op in ps.global_block().ops if op.output_arg_names == [vel]]
            assert len(init) == 1
            assert list(init[0].attr("shape")) == list(pm.global_block().var(vel).shape)
    # every block of every parameter lives on exactly one server
    assert set(owned) == {"fc_0.w_0.block0", "fc_0.w_0.block1", "fc_0.b_0", "fc_1.w_0",
                          "fc_1.b_0"}
    assert owned["fc_0.w_0.block0"] != owned["fc_0.w_0.block1"]


def test_adam_beta_pow_one_copy_per_block_and_async_mode():
    main, start = _build(fluid.optimizer.Adam(0.01))
    t = _transpile(main, start, trainers=2, sync=False)
    tp = t.get_trainer_program()
    assert "send_barrier" not in _types(tp) and "fetch_barrier" not in _types(tp)
    assert all(op.attr("sync_mode") is True for op in tp.global_block().ops if op.type == "send")
    names = set()
    for ep in EPS.split(","):
        pm = t.get_pserver_program(ep)
        ls = pm.global_block().ops[-1]
        # async without runtime_split_send_recv: Fluid 1.8 names it half async (2)
        assert ls.attr("sync_mode") is False and ls.attr("distributed_mode") == 2
        for b in ls.attr("optimize_blocks"):
            assert [op.type for op in pm.block(b).ops] == ["adam"]   # no sum/scale in async
        # each server holding a block of fc_0.w_0 has its own beta1 power, under Fluid's
        # name (one copy per server), and its moments shaped as the block
        names |= set(pm.global_block().vars)
        if "fc_0.w_0.block0" in pm.global_block().vars:
            moment = pm.global_block().var("fc_0.w_0_moment1_0")
            assert list(moment.shape) == list(pm.global_block().var("fc_0.w_0.block0").shape)
            assert "fc_0.w_0_beta1_pow_acc_0" in pm.global_block().vars
    assert not any(".block" in n and "_acc_" in n for n in names)
    assert "fc_0.w_0@GRAD.block0" in names          # async: no trainer suffix


def test_no_slicing_and_hash_name():
    main, start = _build()
    cfg = fluid.DistributeTranspilerConfig()
    cfg.slice_var_up = False
    cfg.split_method = fluid.transpiler.HashName
    t = _transpile(main, start, config=cfg)
    assert "split_byref" not in _types(t.get_trainer_program())
    disp = fluid.transpiler.HashName(EPS.split(","))
    want = dict(zip(["fc_0.w_0@GRAD", "fc_0.b_0@GRAD", "fc_1.w_0@GRAD", "fc_1.b_0@GRAD"],
                    disp.dispatch(["fc_0.w_0@GRAD", "fc_0.b_0@GRAD", "fc_1.w_0@GRAD",
                                   "fc_1.b_0@GRAD"])))
    for ep in EPS.split(","):
        ls = t.get_pserver_program(ep).global_block().ops[-1]
        for s in ls.attr("grad_to_block_id"):
            assert want[s.split(":")[0]] == ep
    # HashName is stable across processes (CRC-32, not Python's salted hash)
    assert disp.dispatch(["fc_0.w_0@GRAD"]) == disp.dispatch(["fc_0.w_0@GRAD"])


def test_round_robin_continues():
    rr = fluid.transpiler.RoundRobin(["a", "b", "c"])
    assert rr.dispatch(["x", "y"]) == ["a", "b"]
    assert rr.dispatch(["z", "w"]) == ["c", "a"]
    rr.reset()
    assert rr.dispatch(["x"]) == ["a"]


def test_pure_pass_leaves_descs_untouched():
    main, start = _build()
    m0, s0 = main.desc.SerializeToString(), start.desc.SerializeToString()
    out = D.transpile(main.desc, start.desc, 0, EPS.split(","), 2, True)
    assert main.desc.SerializeToString() == m0 and start.desc.SerializeToString() == s0
    assert set(out.pservers) == set(EPS.split(","))
    assert [op.type for op in fluid.Program._construct_from_desc(
        out.trainer_startup).global_block().ops][-1] == "concat"


def test_errors():
    main, start = _build()
    cfg = fluid.DistributeTranspilerConfig()
    cfg.min_block_size = 100
    with pytest.raises(ValueError, match="min_block_size"):
        _transpile(main, start, config=cfg)
    t = _transpile(main, start)
    with pytest.raises(ValueError, match="not one of the pserver endpoints"):
        t.get_pserver_program("127.0.0.1:1")
    with pytest.raises(ValueError, match="trainer_id"):
        _transpile(main, start, tid=2)


def test_regularization_moves_to_the_pserver_with_its_optimizer():
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start), fluid.unique_name.guard():
        x = fluid.layers.data("x", [4])
        loss = fluid.layers.mean(fluid.layers.fc(x, 1))
        fluid.optimizer.SGD(0.1, regularization=fluid.regularizer.L2Decay(0.01)).minimize(loss)
    t = _transpile(main, start)
    trainer = [op.type for op in t.get_trainer_program().global_block().ops]
    assert "sgd" not in trainer and not any(
        "regularization" in str(op.attr("op_namescope"))
        for op in t.get_trainer_program().global_block().ops if op.has_attr("op_namescope"))
    blocks = [[op.type for op in b.ops] for ep in EPS.split(",")
              for b in t.get_pserver_program(ep).blocks[1:]]
    assert ["scale", "sum", "sgd"] in [b[-3:] for b in blocks]


def test_two_distributed_tables_fail_fast():
    # (an async learning-rate schedule is built: tests/distributed/test_async_lr_decay.py)
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start), fluid.unique_name.guard():
        ids = fluid.layers.data("ids", [1], dtype="int64", lod_level=1)
        embs = [fluid.layers.embedding(ids, [100, 8], is_sparse=True, is_distributed=True,
                                       param_attr=fluid.ParamAttr(name=f"t{i}"))
                for i in range(2)]
        loss = fluid.layers.mean(fluid.layers.elementwise_add(*embs))
        fluid.optimizer.SGD(0.1).minimize(loss)
    with pytest.raises(NotImplementedError, match=r"one distributed lookup table .*t0"):
        _transpile(main, start)


def test_each_parameters_own_learning_rate_scale_is_its_own():
    """Fluid puts a `scale` of the global learning rate per parameter with its own rate:
    each goes with that parameter's update only (the others read the same global rate
    but are not theirs)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        h = fluid.layers.data("x", [4])
        for name, rate in (("w1", 2.0), ("w2", 3.0), ("w3", 0.5)):
            h = fluid.layers.fc(h, 4, bias_attr=False,
                                param_attr=fluid.ParamAttr(name=name, learning_rate=rate))
        fluid.optimizer.SGD(0.1).minimize(fluid.layers.mean(h))
    ops = main.global_block().ops
    groups = {p: [ops[i] for i in idx] for p, _g, idx in D._params_grads(main.global_block())}
    for p, group in groups.items():
        assert [op.type for op in group] == ["scale", "sgd"], p
        assert group[0].output_arg_names == group[1].input("LearningRate")


def test_two_minimize_calls_send_one_gradient_and_run_both_updates():
    """Two optimizers minimizing one loss update each parameter twice a step, from two
    backward passes. As Fluid 1.8's transpiler: the trainer sends the first pass's
    gradient, and on the server both updates of the parameter read the merged one."""
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start), fluid.unique_name.guard():
        x = fluid.layers.data("x", [8])
        loss = fluid.layers.mean(fluid.layers.fc(x, 1, bias_attr=False))
        fluid.optimizer.SGD(0.1).minimize(loss)
        fluid.optimizer.SGD(0.2).minimize(loss)
    grads = [op.input("Grad")[0] for op in main.global_block().ops if op.type == "sgd"]
    assert len(grads) == 2 and grads[0] != grads[1]
    t = _transpile(main, start, config=None)
    sent = [n for op in t.get_trainer_program().global_block().ops if op.type == "send"
            for n in op.input("X")]
    assert any(n.startswith(grads[0]) for n in sent)
    assert not any(n.startswith(grads[1]) for n in sent)
    updates = []
    for ep in EPS.split(","):
        pm, _ = t.get_pserver_programs(ep)
        ls = pm.global_block().ops[-1]
        for g, b in (s.split(":") for s in ls.attr("grad_to_block_id")):
            sgds = [op for op in pm.block(int(b)).ops if op.type == "sgd"]
            updates += sgds
            assert [op.input("Grad") for op in sgds] == [[g], [g]]
    assert sorted(op.input("LearningRate")[0] != updates[0].input("LearningRate")[0]
                  for op in updates) == [False, True]


def test_a_distributed_table_with_its_own_learning_rate():
    """embedding(is_distributed=True) with ParamAttr(learning_rate=...): each server's
    table block makes the table's rate (the `scale` of the global one) before its sgd, and
    its startup initializes the global rate the scale reads; the trainer keeps neither."""
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start), fluid.unique_name.guard():
        ids = fluid.layers.data("ids", [1], dtype="int64", lod_level=1)
        emb = fluid.layers.embedding(ids, [100, 8], is_sparse=True, is_distributed=True,
                                     param_attr=fluid.ParamAttr(name="t", learning_rate=0.5))
        loss = fluid.layers.mean(fluid.layers.sequence_pool(emb, "sum"))
        fluid.optimizer.SGD(0.1).minimize(loss)
    t = _transpile(main, start)
    assert "scale" not in _types(t.get_trainer_program())
    for ep in EPS.split(","):
        prog = t.get_pserver_program(ep)
        (table_block,) = [b for b in prog.blocks[1:]
                          if any(op.type == "sgd" for op in b.ops)]
        scale, sgd = table_block.ops[-2:]
        assert [op.type for op in table_block.ops] == ["sum", "scale", "sgd"]
        assert scale.attr("scale") == 0.5
        assert scale.output("Out") == sgd.input("LearningRate")
        (glob,) = scale.input("X")
        startup = t.get_startup_program(ep, prog)
        assert any(op.type == "fill_constant" and op.output_arg_names == [glob]
                   for op in startup.global_block().ops)


def test_get_trainer_program_makes_the_main_program_the_trainer_program():
    """As Fluid's: a script that runs fluid.default_main_program() after
    get_trainer_program() (a ParallelExecutor given no program) runs the trainer program;
    the Parameter objects stay, and the pserver programs are still those of the original."""
    main, start = _build(fluid.optimizer.Adam(0.01))
    w = main.global_block().all_parameters()[0]
    t = _transpile(main, start)
    assert "adam" in _types(main)                     # transpile alone leaves it as it was
    trainer = t.get_trainer_program()
    assert trainer is main
    types = _types(main)
    assert "adam" not in types and "send" in types and "recv" in types
    assert main.global_block().all_parameters()[0] is w
    assert main._is_distributed
    assert t.get_trainer_program() is main and _types(main) == types    # idempotent
    for ep in EPS.split(","):
        pserver = t.get_pserver_program(ep)
        assert any(op.type == "adam" for b in pserver.blocks for op in b.ops)
        start_ops = [op.type for op in t.get_startup_program(ep, pserver).global_block().ops]
        assert start_ops
