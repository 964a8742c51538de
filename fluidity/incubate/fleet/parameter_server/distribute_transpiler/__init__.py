"""Fluid 1.6's `fleet` for parameter-server training over the transpilers, so that a
PaddleRec-style script runs as written:

    from fluidity.incubate.fleet.parameter_server.distribute_transpiler import fleet
    from fluidity.incubate.fleet.base import role_maker
    from fluidity.incubate.fleet.parameter_server.distribute_transpiler.distributed_strategy \\
        import StrategyFactory

    fleet.init(role_maker.PaddleCloudRoleMaker())
    opt = fleet.distributed_optimizer(fluid.optimizer.SGD(0.05),
                                      StrategyFactory.create_geo_strategy(100))
    opt.minimize(loss)
    if fleet.is_server():
        fleet.init_server(); fleet.run_server()
    else:
        fleet.init_worker()
        exe.run(fleet.startup_program)
        exe.train_from_dataset(fleet.main_program, dataset)
        fleet.stop_worker()

A GEO strategy transpiles with transpiler/geo_sgd_transpiler.py and `init_worker()` starts
the trainer's GeoCommunicator (over the global scope; its first pull waits for the startup
program when that comes later); sync and async strategies transpile with the
DistributeTranspiler (the trainer startup program fetches the servers' values) and
`stop_worker()` closes the executor (the trainers' goodbyes)."""
from .....core.scope import global_scope
from .....distributed.communicator import GeoCommunicator
from .....executor.executor import Executor
from .....transpiler.distribute_transpiler import DistributeTranspiler
from .....transpiler.geo_sgd_transpiler import GeoSgdTranspiler
from ...base.role_maker import PaddleCloudRoleMaker, RoleMakerBase
from .....transpiler.distribute import DistributeTranspilerConfig
from .distributed_strategy import DistributedStrategy, StrategyFactory, strategy_of_config


class DistributedTranspiler:
    """The `fleet` object of Fluid's transpiler-based parameter-server mode."""

    def __init__(self):
        self._role_maker = None
        self._strategy = None
        self._transpiler = None
        self._communicator = None
        self._executor = None
        self.main_program = None
        self.startup_program = None

    # -- who am I ------------------------------------------------------------------------------
    def init(self, role_maker=None):
        role_maker = role_maker if role_maker is not None else PaddleCloudRoleMaker()
        if not isinstance(role_maker, RoleMakerBase):
            raise TypeError(f"fleet.init needs a role maker (role_maker.PaddleCloudRoleMaker "
                            f"or UserDefinedRoleMaker), got {type(role_maker).__name__}")
        role_maker.generate_role()
        self._role_maker = role_maker
        self._executor = Executor()

    def _rm(self):
        if self._role_maker is None:
            raise RuntimeError("call fleet.init(role_maker) first")
        return self._role_maker

    def is_worker(self):
        return self._rm().is_worker()

    def is_server(self):
        return self._rm().is_server()

    def is_first_worker(self):
        return self._rm().is_first_worker()

    def worker_index(self):
        return self._rm().worker_index()

    def server_index(self):
        return self._rm().server_index()

    def worker_num(self):
        return self._rm().worker_num()

    def server_num(self):
        return self._rm().server_num()

    def server_endpoints(self, to_string=False):
        eps = self._rm().get_pserver_endpoints()
        return ",".join(eps) if to_string else eps

    # -- programs ------------------------------------------------------------------------------
    def distributed_optimizer(self, optimizer, strategy=None):
        """A TranspilerOptimizer over `optimizer`. `strategy`: one from StrategyFactory, or
        a DistributeTranspilerConfig (Fluid 1.8 turns it into the strategy its flags name:
        distributed_strategy.strategy_of_config); the sync strategy when None, as Fluid."""
        from .....optimizer import Optimizer
        if not isinstance(optimizer, Optimizer):
            raise ValueError(f"optimizer must be an instance of Optimizer, got "
                             f"{type(optimizer).__name__}")
        if self._role_maker is None:
            raise ValueError("use fleet.init(role) to initialize the role of current node "
                             "before optimizer.minimize(loss)")
        if strategy is None:
            strategy = StrategyFactory.create_sync_strategy()
        elif isinstance(strategy, DistributeTranspilerConfig):
            strategy = strategy_of_config(strategy)
        elif not isinstance(strategy, DistributedStrategy):
            raise TypeError(f"strategy must be an instance of DistributeTranspilerConfig, "
                            f"SyncStrategy, HalfAsyncStrategy, AsyncStrategy, or GeoStrategy; "
                            f"got {type(strategy).__name__}")
        self._strategy = strategy
        return TranspilerOptimizer(optimizer, strategy, self)

    @property
    def _geo(self):
        return bool(self._strategy is not None and
                    self._strategy.get_program_config().geo_sgd_mode)

    def _transpile(self, main, startup):
        rm, config = self._rm(), self._strategy.get_program_config()
        tid = max(rm.worker_index(), 0)
        eps = ",".join(rm.get_pserver_endpoints())
        if self._geo:
            t = GeoSgdTranspiler(config)
            t.transpile(tid, program=main, pservers=eps, trainers=rm.worker_num(),
                        sync_mode=False, startup_program=startup)
        else:
            t = DistributeTranspiler(config)
            t.transpile(tid, program=main, pservers=eps, trainers=rm.worker_num(),
                        sync_mode=self._strategy.sync_mode, startup_program=startup,
                        current_endpoint=rm.current_endpoint())
        self._transpiler = t
        if rm.is_server():
            self.main_program, self.startup_program = t.get_pserver_programs(
                rm.current_endpoint())
        else:
            self.main_program, self.startup_program = t.get_trainer_program(), startup

    # -- run ---------------------------------------------------------------------------------
    def _programs(self, what):
        if self.main_program is None:
            raise RuntimeError(f"fleet.{what}: call fleet.distributed_optimizer(...)."
                               f"minimize(loss) first")

    def init_worker(self):
        self._programs("init_worker")
        if not self.is_worker():
            raise RuntimeError("fleet.init_worker() on a pserver")
        if self._geo:
            self._communicator = GeoCommunicator(self._transpiler.plan, global_scope())
            self._communicator.start(lazy=True)

    def stop_worker(self):
        if self._communicator is not None:
            comm, self._communicator = self._communicator, None
            comm.close()                       # a last push and pull, then goodbye
        self._executor.close()

    def init_server(self, model_dir=None):
        self._programs("init_server")
        if model_dir is not None:
            raise NotImplementedError("fleet.init_server(model_dir): loading a pserver's "
                                      "shards from a saved model is not built")
        self._executor.run(self.startup_program)

    def run_server(self):
        """Serve until every trainer has said goodbye."""
        self._programs("run_server")
        self._executor.run(self.main_program)


class TranspilerOptimizer:
    """What `fleet.distributed_optimizer` returns: `minimize` runs the optimizer's, then
    transpiles the program for this process's role (fleet.main_program /
    fleet.startup_program)."""

    def __init__(self, optimizer, strategy, fleet_):
        self._optimizer, self._strategy, self._fleet = optimizer, strategy, fleet_

    def minimize(self, loss, startup_program=None, parameter_list=None, no_grad_set=None):
        from .....framework import default_startup_program
        out = self._optimizer.minimize(loss, startup_program=startup_program,
                                       parameter_list=parameter_list, no_grad_set=no_grad_set)
        main = loss.block.program
        startup = startup_program if startup_program is not None else default_startup_program()
        self._fleet._transpile(main, startup)
        return out


fleet = DistributedTranspiler()

__all__ = ["fleet", "DistributedTranspiler", "TranspilerOptimizer"]
