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

A GEO strategy transpiles with transpiler/geo_sgd_transpiler.py; the others with the
DistributeTranspiler (the trainer startup program fetches the servers' values). Strategies
come from StrategyFactory, or from a bare DistributeTranspilerConfig as Fluid 1.8 maps it.
`init_worker()` starts the trainer's `fluid.communicator.Communicator` of the strategy's mode
(GEO: the background GEO-SGD communicator over the global scope, its first pull waiting for
the startup program when that comes later); `stop_worker()` stops it and closes the
executor (the trainers' goodbyes)."""
from ..... import io as _io
from .....compiler import ParallelExecutor
from .....communicator import Communicator
from .....executor.executor import Executor
from .....transpiler.distribute_transpiler import DistributedMode, DistributeTranspiler
from .....transpiler.geo_sgd_transpiler import GeoSgdTranspiler
from .....framework import (Program, Variable, default_main_program,
                           default_startup_program)
from .....optimizer import Optimizer
from ...base.fleet_base import DistributedOptimizer, Fleet
from ...base.mode import Mode
from ...base.role_maker import PaddleCloudRoleMaker, RoleMakerBase
from .....transpiler.distribute import DistributeTranspilerConfig
from .distributed_strategy import DistributedStrategy, StrategyFactory, strategy_of_config


class DistributedTranspiler(Fleet):
    """The `fleet` object of Fluid's transpiler-based parameter-server mode."""

    def __init__(self):
        super().__init__(Mode.TRANSPILER)
        self._strategy = None
        self._transpiler = None
        self._communicator = None
        self._origin_program = None
        self.main_program = None
        self.startup_program = None

    def init(self, role_maker=None):
        role_maker = role_maker if role_maker is not None else PaddleCloudRoleMaker()
        if not isinstance(role_maker, RoleMakerBase):
            raise TypeError(f"fleet.init needs a role maker (role_maker.PaddleCloudRoleMaker "
                            f"or UserDefinedRoleMaker), got {type(role_maker).__name__}")
        super().init(role_maker)

    def server_num(self):
        return self._rm().server_num()

    # -- saving (Fluid's checks: an Executor and a Program, never their parallel forms) -------
    def _check_saving(self, what, executor, main_program):
        if isinstance(executor, ParallelExecutor) or not isinstance(executor, Executor):
            raise TypeError(f"in fleet.{what}() function, executor must be as Executor type, "
                            f"got {type(executor).__name__}")
        if main_program is not None and not isinstance(main_program, Program):
            raise TypeError(f"in fleet.{what}() function, main_program must be as Program "
                            f"type, got {type(main_program).__name__}")

    def save_inference_model(self, executor, dirname, feeded_var_names, target_vars,
                             main_program=None, export_for_deployment=True):
        """Save the inference model of `main_program` (default: the program as it was before
        transpiling, Fluid's `_origin_program`)."""
        self._check_saving("save_inference_model", executor, main_program)
        program = main_program if main_program is not None else self._origin_program
        return _io.save_inference_model(dirname, feeded_var_names, target_vars, executor,
                                        program, None, None, export_for_deployment)

    def save_persistables(self, executor, dirname, main_program=None):
        """Save the persistables of `main_program` (default: this process's transpiled
        main program); on a trainer they are the values it last received."""
        self._check_saving("save_persistables", executor, main_program)
        program = main_program if main_program is not None else self.main_program
        return _io.save_persistables(executor, dirname, program)

    # -- programs ------------------------------------------------------------------------------
    def distributed_optimizer(self, optimizer, strategy=None):
        """A TranspilerOptimizer over `optimizer`. `strategy`: one from StrategyFactory, or
        a DistributeTranspilerConfig (Fluid 1.8 turns it into the strategy its flags name:
        distributed_strategy.strategy_of_config); the sync strategy when None, as Fluid."""
        if not isinstance(optimizer, Optimizer):
            raise ValueError(f"optimizer must be an instance of Optimizer, got "
                             f"{type(optimizer).__name__}")
        if not self._is_initialized:
            raise ValueError("use fleet.init(role) to initialize the role of current node "
                             "before optimizer.minimize(loss)")
        self._optimizer = TranspilerOptimizer(optimizer, strategy)
        return self._optimizer

    @property
    def _geo(self):
        return bool(self._strategy is not None and
                    self._strategy.get_program_config().geo_sgd_mode)

    def _transpile(self, config, main=None, startup=None):
        """Transpile `main` (default: the default main program) for this process's role,
        with the strategy `config` is or names (Fluid's `fleet._transpile(config)`)."""
        if isinstance(config, DistributeTranspilerConfig):
            config = strategy_of_config(config)
        if not isinstance(config, DistributedStrategy):
            raise TypeError(f"config must be an instance of DistributeTranspilerConfig, "
                            f"SyncStrategy, HalfAsyncStrategy, AsyncStrategy or GeoStrategy; "
                            f"got {type(config).__name__}")
        self._strategy = config
        main = main if main is not None else default_main_program()
        startup = startup if startup is not None else default_startup_program()
        self._origin_program = main.clone(for_test=False)
        rm, pconfig = self._rm(), config.get_program_config()
        tid = max(rm.worker_index(), 0)
        eps = ",".join(rm.get_pserver_endpoints())
        if self._geo:
            t = GeoSgdTranspiler(pconfig)
            t.transpile(tid, program=main, pservers=eps, trainers=rm.worker_num(),
                        sync_mode=False, startup_program=startup)
        else:
            t = DistributeTranspiler(pconfig)
            t.transpile(tid, program=main, pservers=eps, trainers=rm.worker_num(),
                        sync_mode=config.sync_mode, startup_program=startup,
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
        if self._communicator is not None and self._communicator.is_running():
            raise RuntimeError("fleet.init_worker(): the worker is already started")
        mode, kwargs = self._strategy.mode, None
        if mode == DistributedMode.GEO:
            kwargs = {"push_vars": self._transpiler.plan, "trainers": self.worker_num(),
                      "push_nums": self._strategy.get_program_config().geo_sgd_need_push_nums}
        elif mode == DistributedMode.SYNC:
            kwargs = {"pserver_endpoints": self.server_endpoints(),
                      "trainer_id": self.worker_index()}
        flags = self._strategy.get_trainer_runtime_config().get_communicator_flags()
        self._communicator = Communicator(self.main_program, mode, kwargs, flags)
        self._communicator.start(lazy=True)

    def stop_worker(self):
        if self._communicator is not None:
            comm, self._communicator = self._communicator, None
            comm.stop()                        # GEO: a last push and pull, then goodbye
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


class TranspilerOptimizer(DistributedOptimizer):
    """What `fleet.distributed_optimizer` returns: `minimize` runs the optimizer's, then
    transpiles the program for this process's role (fleet.main_program /
    fleet.startup_program). `strategy`: a StrategyFactory strategy or a
    DistributeTranspilerConfig; the sync strategy when None."""

    def __init__(self, optimizer, strategy=None):
        if not isinstance(optimizer, Optimizer):
            raise ValueError(f"optimizer must be an instance of Optimizer, got "
                             f"{type(optimizer).__name__}")
        if strategy is None:
            strategy = StrategyFactory.create_sync_strategy()
        elif not isinstance(strategy, (DistributeTranspilerConfig, DistributedStrategy)):
            raise TypeError(f"strategy must be an instance of DistributeTranspilerConfig, "
                            f"SyncStrategy, HalfAsyncStrategy, AsyncStrategy, or GeoStrategy; "
                            f"got {type(strategy).__name__}")
        super().__init__(optimizer, strategy)

    def minimize(self, loss, scopes=None, startup_program=None, parameter_list=None,
                 no_grad_set=None):
        if isinstance(loss, (list, tuple)):
            raise TypeError("DistributedTranspiler's minimize can not accept loss with list")
        if isinstance(startup_program, (list, tuple)):
            raise TypeError("DistributedTranspiler's minimize can not accept program with "
                            "list")
        if not isinstance(loss, Variable):
            raise TypeError(f"minimize: loss must be a Variable, got {type(loss).__name__}")
        out = self._optimizer.minimize(loss, startup_program=startup_program,
                                       parameter_list=parameter_list, no_grad_set=no_grad_set)
        main = loss.block.program
        startup = startup_program if startup_program is not None else default_startup_program()
        fleet._transpile(self._strategy, main, startup)
        return out


fleet = DistributedTranspiler()

__all__ = ["fleet", "DistributedTranspiler", "TranspilerOptimizer"]
