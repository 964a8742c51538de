"""The distribute transpiler's programs as Fluid 1.6's transpiler writes them, for the cases
Paddle's test_dist_transpiler.py looks at: the trainer and its startup program (init ops
first, in Fluid's order), the pserver blocks for plain SGD, a learning-rate schedule (with
and without control flow), clipping, L2 decay, RMSProp's accumulators, a server holding
nothing, the distributed lookup table (its summed update, shard, prefetch and save blocks),
and the attributes Fluid sets on the programs.

Where Paddle's test (disabled in Paddle's own CI since 1.4) expects what Fluid 1.6 does not
write with Fluid 1.6's builder (an `elementwise_div` in exponential_decay, Adam's beta-power
`scale` ops, RMSProp accumulators named `momentum_1`, remote prefetch of `is_sparse`
tables), these tests assert what 1.6's transpiler writes for the programs built here."""
import math

import numpy as np
import pytest

import fluidity as fluid
from fluidity import layers

EP1, EP2 = "127.0.0.1:6174", "127.0.0.1:6175"


def _fc_net(opt=None, param_attr=None, bias_attr=None, lr=0.1, grad_clip=None):
    x = layers.data(name="x", shape=[1000], dtype="float32")
    y_predict = layers.fc(input=x, size=1000, act=None,
                          param_attr=param_attr or fluid.ParamAttr(name="fc_w"),
                          bias_attr=fluid.ParamAttr(name="fc_b") if bias_attr is None
                          else bias_attr)
    y = layers.data(name="y", shape=[1], dtype="float32")
    avg_cost = layers.mean(layers.square_error_cost(input=y_predict, label=y))
    (opt or fluid.optimizer.SGD(learning_rate=lr)).minimize(avg_cost, grad_clip=grad_clip)


def _transpile(net, config=None, sync_mode=True, trainers=2):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = 1
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        net()
    t = fluid.DistributeTranspiler(config=config)
    t.transpile(0, program=main, pservers=f"{EP1},{EP2}", trainers=trainers,
                sync_mode=sync_mode, startup_program=startup)
    return t, main, startup


def _types(block):
    return [op.type for op in block.ops]


def test_basic_model():
    t, main, startup = _transpile(_fc_net)
    trainer = t.get_trainer_program(wait_port=False)
    assert _types(trainer.global_block()) == [
        "mul", "elementwise_add", "elementwise_sub", "square", "mean", "fill_constant",
        "mean_grad", "square_grad", "elementwise_sub_grad", "elementwise_add_grad", "send",
        "mul_grad", "split_byref", "send", "send_barrier", "recv", "recv", "fetch_barrier",
        "concat"]
    # the user's startup program: init ops first (prepended as they were made), then the
    # parameters fetched from the servers
    assert _types(startup.global_block()) == ["fill_constant", "fill_constant",
                                              "uniform_random", "recv", "recv",
                                              "fetch_barrier", "concat"]
    sv = startup.global_block().vars
    assert {"fc_w.block0", "fc_w.block1", "fc_w", "fc_b"} <= set(sv)
    assert "fc_w@GRAD" not in sv and "fc_b@GRAD" not in sv
    pserver = t.get_pserver_program(EP1)
    ps_startup = t.get_startup_program(EP1, pserver)
    assert len(pserver.blocks) == 3
    assert _types(pserver.blocks[0]) == ["listen_and_serv"]
    assert _types(pserver.blocks[1]) == ["sum", "scale", "sgd"]
    assert _types(ps_startup.global_block()) == ["fill_constant", "fill_constant",
                                                 "uniform_random"]
    # fc_b, fc_w.block0, fc_w.block1 dealt round robin over the servers: block1 is here
    assert tuple(ps_startup.global_block().var("fc_w.block1").shape) == (500, 1000)
    updated = set()
    for ep in (EP1, EP2):
        for blk in t.get_pserver_program(ep).blocks:
            for op in blk.ops:
                if "Param" in op.input_names:
                    updated.add(op.input("Param")[0].split(".block")[0])
    assert updated == {"fc_w", "fc_b"}


def test_large_block_size_does_not_slice():
    config = fluid.DistributeTranspilerConfig()
    config.min_block_size = 1048576
    t, _, _ = _transpile(_fc_net, config)
    assert _types(t.get_trainer_program().global_block()) == [
        "mul", "elementwise_add", "elementwise_sub", "square", "mean", "fill_constant",
        "mean_grad", "square_grad", "elementwise_sub_grad", "elementwise_add_grad", "send",
        "mul_grad", "send", "send_barrier", "recv", "recv", "fetch_barrier"]
    pserver = t.get_pserver_program(EP1)
    assert len(pserver.blocks) == 2 and _types(pserver.blocks[1]) == ["sum", "scale", "sgd"]
    assert _types(t.get_startup_program(EP1, pserver).global_block()) == \
        ["fill_constant", "fill_constant"]
    ps2 = t.get_startup_program(EP2, t.get_pserver_program(EP2))
    assert tuple(ps2.global_block().var("fc_w").shape) == (1000, 1000)


def test_lr_decay_block():
    def net():
        _fc_net(fluid.optimizer.SGD(learning_rate=layers.exponential_decay(
            learning_rate=1.0, decay_steps=2100, decay_rate=0.1, staircase=True)))
    t, main, _ = _transpile(net)
    pserver = t.get_pserver_program(EP1)
    assert len(pserver.blocks) == 4
    # the schedule's ops as the program has them (step / decay_steps and lr * (...) are
    # `scale` ops, as Fluid 1.6's math_op_patch builds them)
    lr_ops = [op.type for op in main.global_block().ops if op.role & 0x10]
    assert _types(pserver.blocks[1]) == lr_ops == [
        "increment", "cast", "scale", "floor", "fill_constant", "elementwise_pow", "scale"]
    ls = pserver.global_block().ops[-1]
    assert ls.attr("lr_decay_block_id") == 1 and ls.attr("optimize_blocks")[0] == 1
    assert [b.idx for b in ls.all_attrs()["optimize_blocks"]] == [1, 2, 3]
    assert "increment" not in _types(t.get_trainer_program().global_block())


def _switch_decay(boundaries, values):
    """piecewise_decay as Fluid 1.x builds it: a Switch of conditional blocks assigning to a
    persistable `learning_rate`."""
    from fluidity.framework import OpRole, op_role_guard
    from fluidity.layers.learning_rate_scheduler import _decay_step_counter
    with op_role_guard(OpRole.LRSched):
        step = _decay_step_counter()
        lr = layers.create_global_var(shape=[1], value=0.0, dtype="float32",
                                      persistable=True, name="learning_rate")
        with layers.Switch() as switch:
            for b, v in zip(boundaries, values):
                bound = layers.fill_constant([1], "float32", float(b))
                value = layers.fill_constant([1], "float32", float(v))
                with switch.case(layers.less_than(step, bound)):
                    layers.assign(value, lr)
            last = layers.fill_constant([1], "float32", float(values[-1]))
            with switch.default():
                layers.assign(last, lr)
    return lr


def test_lr_decay_with_control_flow_clones_its_blocks():
    def net():
        _fc_net(fluid.optimizer.SGD(learning_rate=_switch_decay([10000, 20000],
                                                                [1.0, 0.5, 1.0])))
    t, main, _ = _transpile(net)
    pserver = t.get_pserver_program(EP1)
    ls = pserver.global_block().ops[0]
    opt_blocks = [b.idx for b in ls.all_attrs()["optimize_blocks"]]
    assert len(pserver.blocks) == 7 and opt_blocks == [1, 5, 6]
    assert _types(pserver.blocks[1]) == [
        "increment", "cast", "fill_constant", "fill_constant", "less_than", "logical_not",
        "conditional_block", "fill_constant", "fill_constant", "less_than", "logical_not",
        "logical_and", "logical_and", "conditional_block", "fill_constant",
        "conditional_block"]
    conds = [op for op in pserver.blocks[1].ops if op.type == "conditional_block"]
    assert [op.attr("sub_block") for op in conds] == [2, 3, 4]
    for b in (2, 3, 4):
        assert _types(pserver.blocks[b]) == ["assign"]
        assert pserver.blocks[b].parent_idx == 1
    # the optimize blocks hang off the last block made before them, as Fluid's do
    assert [pserver.blocks[b].parent_idx for b in (5, 6)] == [4, 4]
    assert "learning_rate" in pserver.global_block().vars
    assert pserver.global_block().var("@LR_DECAY_COUNTER@").persistable
    # the schedule runs there: the first steps give values[0]
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(t.get_startup_program(EP1, pserver), scope=scope)
    for _ in range(3):
        exe.run_block(pserver, 1, scope)
    assert np.array(scope.find_var("learning_rate").get_tensor()).tolist() == [1.0]
    assert np.array(scope.find_var("@LR_DECAY_COUNTER@").get_tensor()).tolist() == [2]


def test_l2_decay_and_clipping_of_one_gradient_run_on_the_server():
    def net():
        _fc_net(param_attr=fluid.ParamAttr(
            name="fc_w", regularizer=fluid.regularizer.L2Decay(),
            gradient_clip=fluid.clip.GradientClipByValue(0.1)))
    t, main, _ = _transpile(net)
    pserver = t.get_pserver_program(EP1)
    assert len(pserver.blocks) == 3
    # one optimize block a parameter, in the order of the trainer's optimize ops (fc_w's first)
    params = [b.ops[-1].input("Param")[0] for b in pserver.blocks[1:]]
    assert params == ["fc_w.block0", "fc_b"]        # fc_w's slice on this pserver
    assert _types(pserver.blocks[2]) == ["sum", "scale", "sgd"]
    assert _types(pserver.blocks[1]) == ["sum", "scale", "clip", "scale", "sum", "sgd"]
    clip = pserver.blocks[1].ops[2]
    assert clip.input("X") == ["fc_w@GRAD.block0"]      # the merged gradient's block
    trainer = t.get_trainer_program()
    assert "clip" not in _types(trainer.global_block())
    sends = [op.input("X") for op in trainer.global_block().ops if op.type == "split_byref"]
    assert sends == [["fc_w@GRAD"]]                    # the unclipped gradient travels


def test_global_norm_clipping_stays_on_the_trainers():
    def net():
        clip = fluid.clip.GradientClipByGlobalNorm(1.0)
        _fc_net(grad_clip=clip)
    t, main, _ = _transpile(net)
    trainer = t.get_trainer_program().global_block()
    assert {"squared_l2_norm", "sqrt", "elementwise_mul"} <= set(_types(trainer))
    kept = [op for op in trainer.ops if op.type == "squared_l2_norm"]
    assert all(op.role == 1 for op in kept)            # made Backward ops, as Fluid does
    for ep in (EP1, EP2):
        for b in t.get_pserver_program(ep).blocks[1:]:
            assert not {"squared_l2_norm", "sqrt"} & set(_types(b))
            assert _types(b)[-1] == "sgd"


def test_l2_decay_with_piecewise_schedule():
    def net():
        bd = [1, 10, 20, 30]
        lr = [1.0 * (0.1 ** i) for i in range(len(bd) + 1)]
        _fc_net(fluid.optimizer.Momentum(learning_rate=_switch_decay(bd, lr), momentum=0.9,
                                         regularization=fluid.regularizer.L2Decay(1e-4)))
    t, _, _ = _transpile(net)
    pserver = t.get_pserver_program(EP1)
    assert len(pserver.blocks) == 9
    assert _types(pserver.blocks[1]).count("conditional_block") == 5
    assert _types(pserver.blocks[7]) == ["sum", "scale", "scale", "sum", "momentum"]
    assert _types(pserver.blocks[8]) == ["sum", "scale", "scale", "sum", "momentum"]


def test_a_server_holding_nothing_gets_an_empty_block():
    config = fluid.DistributeTranspilerConfig()
    config.slice_var_up = False
    t, _, _ = _transpile(lambda: _fc_net(bias_attr=False, lr=1.0), config)
    pserver = t.get_pserver_program(EP2)
    assert len(pserver.blocks) == 2 and len(pserver.blocks[1].ops) == 0
    assert pserver.global_block().ops[0].attr("optimize_blocks") == [1]


def test_rmsprop_accumulators_keep_their_names_sliced_with_the_parameter():
    t, _, _ = _transpile(lambda: _fc_net(fluid.optimizer.RMSProp(learning_rate=0.1)))
    pserver = t.get_pserver_program(EP1)
    startup = t.get_startup_program(EP1, pserver)
    assert len(pserver.blocks) == 3
    assert _types(pserver.blocks[1]) == ["sum", "scale", "rmsprop"]
    assert tuple(startup.global_block().var("fc_w.block1").shape) == (500, 1000)
    assert tuple(startup.global_block().var("fc_w_momentum_0").shape) == (500, 1000)
    op = [o for b in pserver.blocks for o in b.ops if o.type == "rmsprop" and
          o.input("Param") == ["fc_w.block1"]][0]
    assert op.input("Moment") == ["fc_w_momentum_0"]


def test_two_blocks_of_a_parameter_on_one_server_keep_apart():
    config = fluid.DistributeTranspilerConfig()
    config.split_method = fluid.transpiler.HashName
    t, main, _ = _transpile(lambda: _fc_net(fluid.optimizer.Adam(0.01)), config)
    for ep in (EP1, EP2):
        pserver = t.get_pserver_program(ep)
        held = [n for n in pserver.global_block().vars if n.startswith("fc_w.block")]
        moments = [n for n in pserver.global_block().vars if n.startswith("fc_w_moment1")]
        # one moment per block held: suffixed when the server holds both blocks
        assert len(moments) == len(held)


def _table_net(is_distributed=True):
    def emb_pool(ids, name, distributed):
        emb = layers.embedding(input=ids, size=[1000, 64], dtype="float32", param_attr=name,
                               is_sparse=True, is_distributed=distributed)
        return layers.sequence_pool(input=emb, pool_type="average")
    title = layers.data(name="title_ids", shape=[1], dtype="int64", lod_level=1)
    brand = layers.data(name="brand_ids", shape=[1], dtype="int64", lod_level=1)
    profile = layers.data(name="profile_ids", shape=[1], dtype="int64", lod_level=1)
    fc0 = layers.concat([emb_pool(title, "shared_w", is_distributed),
                         emb_pool(brand, "shared_w", is_distributed),
                         emb_pool(profile, "profile_emb", False)], axis=1)
    predict = layers.fc(input=fc0, size=2, param_attr=fluid.ParamAttr(name="fc_w"),
                        bias_attr=fluid.ParamAttr(name="fc_b"))
    label = layers.data(name="label", shape=[1], dtype="int64")
    avg_cost = layers.mean(layers.cross_entropy(input=predict, label=label))
    fluid.optimizer.SGD(learning_rate=0.003).minimize(avg_cost)


@pytest.mark.parametrize("sync", [True, False])
def test_distributed_lookup_table(sync):
    t, main, startup = _transpile(_table_net, sync_mode=sync)
    assert t.has_distributed_lookup_table and t.table_name == "shared_w"
    pserver = t.get_pserver_program(EP1)
    assert len(pserver.blocks) == 6
    assert _types(pserver.blocks[3]) == (["sum", "sgd"] if sync else ["sgd"])   # summed
    assert _types(pserver.blocks[4]) == ["lookup_sparse_table"]
    assert _types(pserver.blocks[5]) == ["save"]
    ls = pserver.global_block().ops[0]
    assert ls.attr("checkpint_block_id") == 5 and ls.attr("pserver_id") == 0
    assert ls.attr("prefetch_var_name_to_block_id") == ["prefetch_compress_in_tmp_0:4"]
    assert "kLookupTablePath" in pserver.global_block().vars
    # the shard declares ceil(rows / servers) rows, as Fluid's
    assert pserver.global_block().var("shared_w").shape[0] == math.ceil(1000 / 2)
    trainer = _types(t.get_trainer_program().global_block())
    assert trainer[:3] == ["split_ids", "prefetch", "merge_ids"]
    assert trainer.count("lookup_table") == 1                       # profile_emb's
    assert "split_ids" in trainer[trainer.index("lookup_table_grad"):]
    # the trainer's startup fetches the dense parameters and fakes the table, last
    types = _types(startup.global_block())
    assert types[-1] == "fake_init" and "uniform_random" in types[:types.index("recv")]
    assert not [op for op in startup.global_block().ops
                if op.output_arg_names == ["shared_w"] and op.type != "fake_init"]


def test_programs_carry_fluids_distributed_attributes():
    t, main, _ = _transpile(_table_net)
    trainer = t.get_trainer_program()
    for prog in (main, trainer, t.get_pserver_program(EP1)):
        assert prog._is_distributed and prog._is_chief
        assert prog._distributed_lookup_table == "shared_w"
        assert prog._endpoints == [EP1, EP2]
    t2, main2, _ = _transpile(_fc_net)
    assert t2.has_distributed_lookup_table is False and t2.table_name is None
    assert main2._distributed_lookup_table is None


def test_parameters_on_pservers_add_up_to_each_parameter():
    t, _, _ = _transpile(lambda: _fc_net(fluid.optimizer.RMSProp(learning_rate=0.1)))
    pserver = t.get_pserver_program(EP1)
    dist = pserver._parameters_on_pservers
    on1, on2 = dist.get_distributed_vars_by_ep(EP1), dist.get_distributed_vars_by_ep(EP2)
    assert on1 and on2
    for v in on1:
        total = math.prod(v.origin.shape)
        if not v.is_slice:
            assert math.prod(v.slice.shape) == total
            continue
        other = [w for w in on2 if w.origin.name == v.origin.name and w.vtype == v.vtype]
        assert math.prod(v.slice.shape) + math.prod(other[0].slice.shape) == total
    w1 = dist.get_distributed_var_by_slice("fc_w.block1")
    assert w1.endpoint == EP1 and w1.block_id == 1 and w1.offset == 500 * 1000
    assert {v.vtype for v in dist.distributed_vars} == {"Param", "Optimizer"}
    grouped = dist.get_distributed_vars_by_vtypes(["Optimizer"], groupby=True)
    assert set(grouped) == {"fc_w_momentum_0", "fc_w_mean_square_0", "fc_w_mean_grad_0",
                            "fc_b_momentum_0", "fc_b_mean_square_0", "fc_b_mean_grad_0"}
    assert "fc_w.block1" in dist.overview()


def test_distributed_mode_and_server_runtime_config_as_fluid_names_them(monkeypatch):
    from fluidity.transpiler.distribute_transpiler import DistributedMode, ServerRuntimeConfig
    assert (DistributedMode.SYNC, DistributedMode.ASYNC, DistributedMode.HALF_ASYNC,
            DistributedMode.GEO) == (0, 1, 2, 3)
    assert ServerRuntimeConfig()._rpc_send_thread_num == 12
    monkeypatch.setenv("FLAGS_rpc_get_thread_num", "3")
    assert ServerRuntimeConfig()._rpc_get_thread_num == 3


def test_the_trainer_program_keeps_the_originals_data_variables():
    t, main, _ = _transpile(_fc_net)
    trainer = t.get_trainer_program(wait_port=False)
    assert sorted(v.name for v in trainer.global_block().vars.values() if v.is_data) == \
        ["x", "y"]
