"""fluid.communicator.Communicator: its arguments and flags checked as Fluid's, its
start/stop/is_running life cycle, and fleet's init_worker/stop_worker driving it."""
import pytest

import fluidity as fluid
from fluidity.communicator import Communicator, DistributedMode
from fluidity.incubate.fleet.base import role_maker
from fluidity.incubate.fleet.parameter_server.distribute_transpiler import fleet


def test_lifecycle_of_the_program_driven_modes():
    for mode in (DistributedMode.ASYNC, DistributedMode.HALF_ASYNC):
        c = Communicator(fluid.Program(), mode, envs={"communicator_send_queue_size": "4"})
        assert not c.is_running()
        c.start()
        assert c.is_running() and c.envs["communicator_send_queue_size"] == 4
        with pytest.raises(RuntimeError, match="already running"):
            c.start()
        c.stop()
        assert not c.is_running()
        c.stop()        # stopping twice is harmless


def test_bad_arguments_are_refused():
    with pytest.raises(TypeError, match="Program"):
        Communicator("prog", DistributedMode.ASYNC)
    with pytest.raises(ValueError, match="DistributedMode"):
        Communicator(fluid.Program(), 7)
    with pytest.raises(ValueError, match="trainer_id"):
        Communicator(fluid.Program(), DistributedMode.SYNC, {"pserver_endpoints": ["a:1"]})
    with pytest.raises(TypeError, match="GeoPlan"):
        Communicator(fluid.Program(), DistributedMode.GEO, {"push_vars": {}})
    with pytest.raises(ValueError, match="communicator_thread_pool_size"):
        Communicator(fluid.Program(), DistributedMode.ASYNC,
                     envs={"communicator_thread_pool_size": "many"})
    with pytest.raises(ValueError, match="negative"):
        Communicator(fluid.Program(), DistributedMode.ASYNC,
                     envs={"communicator_send_wait_times": "-1"})


def test_sync_mode_keeps_its_job():
    c = Communicator(fluid.Program(), DistributedMode.SYNC,
                     {"pserver_endpoints": ["127.0.0.1:1", "127.0.0.1:2"], "trainer_id": 1})
    assert c.mode_str == "SYNC" and c.trainer_id == 1
    assert c.pserver_endpoints == ["127.0.0.1:1", "127.0.0.1:2"] and c.stats is None


@pytest.mark.parametrize("sync", [True, False])
def test_fleet_worker_starts_and_stops_its_communicator(sync):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        loss = fluid.layers.mean(fluid.layers.fc(input=x, size=1))
        fleet.init(role_maker.UserDefinedRoleMaker(
            current_id=0, role=role_maker.Role.WORKER, worker_num=2,
            server_endpoints=["127.0.0.1:6001"]))
        config = fluid.DistributeTranspilerConfig()
        config.sync_mode = sync
        fleet.distributed_optimizer(fluid.optimizer.SGD(0.1), config).minimize(loss)
    fleet.init_worker()
    comm = fleet._communicator
    assert comm.is_running()
    assert comm.mode == (DistributedMode.SYNC if sync else DistributedMode.HALF_ASYNC)
    with pytest.raises(RuntimeError, match="already started"):
        fleet.init_worker()
    fleet.stop_worker()         # no server was ever called: nothing to wait for
    assert not comm.is_running()
