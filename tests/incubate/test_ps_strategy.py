"""Fluid 1.8's parameter-server strategies: the fields each mode forces, the communicator
flags each mode reads, bad input refused, and fleet accepting a bare
DistributeTranspilerConfig as Fluid 1.8 does (the strategy its flags name)."""
import pytest

import fluidity as fluid
from fluidity.incubate.fleet.base import role_maker
from fluidity.incubate.fleet.parameter_server.distribute_transpiler import fleet
from fluidity.incubate.fleet.parameter_server.distribute_transpiler.distributed_strategy import (
    AsyncStrategy, GeoStrategy, HalfAsyncStrategy, StrategyFactory, SyncStrategy,
    TrainerRuntimeConfig, strategy_of_config)
from fluidity.transpiler.distribute_transpiler import (DistributedMode,
                                                       DistributeTranspilerConfig,
                                                       ServerRuntimeConfig)


@pytest.mark.parametrize("make, half, geo", [
    (StrategyFactory.create_sync_strategy, True, False),
    (StrategyFactory.create_async_strategy, False, False),
    (StrategyFactory.create_half_async_strategy, True, False),
    (lambda: StrategyFactory.create_geo_strategy(7), False, True)])
def test_each_strategy_forces_its_mode(make, half, geo):
    s = make()
    c = s.get_program_config()
    assert (c.sync_mode, c.runtime_split_send_recv, c.half_async, c.geo_sgd_mode) == \
        (False, True, half, geo)
    assert s.get_build_strategy().async_mode is True
    if geo:
        assert c.geo_sgd_need_push_nums == 7
    # a user's dict cannot take the strategy out of its mode
    s.set_program_config({"min_block_size": 16384})
    assert s.get_program_config().min_block_size == 16384
    assert s.get_program_config().runtime_split_send_recv is True


def test_config_mode_flags_exclude_each_other():
    c = DistributeTranspilerConfig()
    assert c.sync_mode is True and c.runtime_split_send_recv is False
    with pytest.raises(ValueError, match="sync_mode"):
        c.runtime_split_send_recv = True
    c.sync_mode = False
    c.runtime_split_send_recv = True
    with pytest.raises(ValueError, match="runtime_split_send_recv"):
        c.sync_mode = True
    with pytest.raises(ValueError):
        c.sync_mode = None


def test_trainer_flags_by_mode(monkeypatch):
    monkeypatch.setenv("CPU_NUM", "3")
    monkeypatch.delenv("FLAGS_communicator_send_queue_size", raising=False)
    t = TrainerRuntimeConfig()
    assert t.runtime_configs["communicator_send_queue_size"] == "3"
    assert t.runtime_configs["communicator_thread_pool_size"] == "5"
    assert set(t.get_communicator_flags()) == set(t.runtime_configs)    # async: all
    t.mode = DistributedMode.GEO
    assert set(t.get_communicator_flags()) == {"communicator_thread_pool_size",
                                                "communicator_send_wait_times"}
    t.mode = DistributedMode.SYNC
    t.runtime_configs["communicator_send_queue_size"] = "9"
    flags = t.get_communicator_flags()      # forced back to CPU_NUM in sync mode
    assert flags["communicator_send_queue_size"] == "3"
    assert "communicator_independent_recv_thread" not in flags
    t.mode = "bogus"
    with pytest.raises(ValueError, match="mode"):
        t.get_communicator_flags()


def test_env_flags_read(monkeypatch):
    monkeypatch.setenv("FLAGS_communicator_send_wait_times", "11")
    monkeypatch.setenv("FLAGS_rpc_send_thread_num", "4")
    s = StrategyFactory.create_async_strategy()
    assert s.get_trainer_runtime_config().get_communicator_flags()[
        "communicator_send_wait_times"] == "11"
    assert s.get_server_runtime_config()._rpc_send_thread_num == 4


@pytest.mark.parametrize("setter, good", [
    ("set_program_config", {"min_block_size": 9000}),
    ("set_trainer_runtime_config", {"communicator_send_queue_size": "4"}),
    ("set_server_runtime_config", {"_rpc_get_thread_num": 3}),
    ("set_execute_strategy", {"num_threads": 3}),
    ("set_build_strategy", {"memory_optimize": True})])
def test_setters_take_dicts_and_refuse_bad_input(setter, good):
    s = StrategyFactory.create_async_strategy()
    getattr(s, setter)(good)
    with pytest.raises(ValueError, match="unknown_key"):
        getattr(s, setter)(dict(good, unknown_key=1))
    with pytest.raises(TypeError):
        getattr(s, setter)(None)


def test_setters_take_objects():
    s = StrategyFactory.create_half_async_strategy()
    srv = ServerRuntimeConfig()
    srv._rpc_send_thread_num = 24
    s.set_server_runtime_config(srv)
    assert s.get_server_runtime_config()._rpc_send_thread_num == 24
    es = fluid.ExecutionStrategy()
    es.num_threads = 4
    s.set_execute_strategy(es)
    assert s.get_execute_strategy().num_threads == 4
    assert s.get_execute_strategy().use_thread_barrier is True      # forced by half-async


@pytest.mark.parametrize("flags, cls", [
    ({}, SyncStrategy),
    ({"sync_mode": False}, HalfAsyncStrategy),       # no runtime split: Fluid's half async
    ({"sync_mode": False, "runtime_split_send_recv": True}, AsyncStrategy),
    ({"sync_mode": False, "runtime_split_send_recv": True, "half_async": True},
     HalfAsyncStrategy),
    ({"sync_mode": False, "runtime_split_send_recv": True, "geo_sgd_mode": True},
     GeoStrategy)])
def test_strategy_of_config(flags, cls):
    c = DistributeTranspilerConfig()
    for k, v in flags.items():
        setattr(c, k, v)
    s = strategy_of_config(c)
    assert type(s) is cls
    assert s.get_program_config() is c


def _net():
    x = fluid.layers.data(name="x", shape=[4], dtype="float32")
    y = fluid.layers.data(name="y", shape=[1], dtype="float32")
    pred = fluid.layers.fc(input=x, size=1)
    return fluid.layers.mean(fluid.layers.square_error_cost(input=pred, label=y))


@pytest.mark.parametrize("geo", [False, True])
def test_fleet_takes_a_transpiler_config(geo):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        loss = _net()
        fleet.init(role_maker.UserDefinedRoleMaker(
            current_id=0, role=role_maker.Role.SERVER, worker_num=2,
            server_endpoints=["127.0.0.1:36011", "127.0.0.1:36012"]))
        config = DistributeTranspilerConfig()
        config.sync_mode = False
        config.geo_sgd_mode = geo
        opt = fleet.distributed_optimizer(fluid.optimizer.SGD(0.1), config)
        opt.minimize(loss)
    ops = [op.type for op in fleet.main_program.global_block().ops]
    assert ops == ["listen_and_serv"]
    attrs = fleet.main_program.global_block().ops[0]
    assert attrs.attr("sync_mode") is False
    # a config without runtime_split_send_recv runs without barriers (half async)
    assert attrs.attr("distributed_mode") == (DistributedMode.GEO if geo else
                                              DistributedMode.ASYNC)


def test_fleet_refuses_bad_arguments():
    fleet.init(role_maker.UserDefinedRoleMaker(
        current_id=0, role=role_maker.Role.WORKER, worker_num=2,
        server_endpoints=["127.0.0.1:36011"]))
    with pytest.raises(ValueError, match="Optimizer"):
        fleet.distributed_optimizer("sgd")
    with pytest.raises(TypeError, match="strategy"):
        fleet.distributed_optimizer(fluid.optimizer.SGD(0.1), strategy=[1])
    opt = fleet.distributed_optimizer(fluid.optimizer.SGD(0.1))     # sync by default
    assert isinstance(opt._strategy, SyncStrategy) and opt._strategy.sync_mode
    with pytest.raises(TypeError, match="list"):
        opt.minimize([])
    with pytest.raises(TypeError):
        fleet._transpile("config")
    with pytest.raises(TypeError, match="Executor"):
        fleet.save_persistables(executor="executor", dirname="unused")
    with pytest.raises(TypeError, match="Program"):
        fleet.save_inference_model(fluid.Executor(), "unused", ["x"], [],
                                   main_program=fluid.CompiledProgram(fluid.Program()))
