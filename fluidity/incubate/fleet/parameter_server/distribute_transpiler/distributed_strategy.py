"""Fluid 1.8's parameter-server strategies (`StrategyFactory.create_sync_strategy()`,
`create_async_strategy()`, `create_half_async_strategy()`, `create_geo_strategy(n)`).

A strategy bundles what fleet needs to transpile and run one mode: the
DistributeTranspilerConfig (`get_program_config()`), the trainer's communicator flags
(`TrainerRuntimeConfig`), the pserver's RPC thread counts (`ServerRuntimeConfig`), and the
ExecutionStrategy / BuildStrategy a trainer compiles with. Each subclass forces the fields its
mode needs after every `set_*` (Fluid's `check_*` methods), so a user's dict or object cannot
put a strategy in a mode it is not. `mode` (a DistributedMode) is what fleet transpiles by:
SYNC with barriers, ASYNC and HALF_ASYNC without (the pserver applies each trainer's gradients
as they come), GEO with the GEO-SGD transpiler."""
import os

from .....compiler import BuildStrategy
from .....executor.strategy import ExecutionStrategy
from .....transpiler.distribute_transpiler import (DistributedMode,
                                                   DistributeTranspilerConfig,
                                                   ServerRuntimeConfig)

__all__ = ["TrainerRuntimeConfig", "DistributedStrategy", "SyncStrategy", "AsyncStrategy",
           "HalfAsyncStrategy", "GeoStrategy", "StrategyFactory"]

# flag name -> (environment variable, default; None = CPU_NUM)
_TRAINER_FLAGS = {
    "communicator_max_merge_var_num": ("FLAGS_communicator_max_merge_var_num", None),
    "communicator_send_queue_size": ("FLAGS_communicator_send_queue_size", None),
    "communicator_independent_recv_thread":
        ("FLAGS_communicator_independent_recv_thread", "1"),
    "communicator_min_send_grad_num_before_recv":
        ("FLAGS_communicator_min_send_grad_num_before_recv", None),
    "communicator_thread_pool_size": ("FLAGS_communicator_thread_pool_size", "5"),
    "communicator_send_wait_times": ("FLAGS_communicator_send_wait_times", "5"),
    "communicator_is_sgd_optimizer": ("FLAGS_communicator_is_sgd_optimizer", "1"),
    "rpc_deadline": ("FLAGS_rpc_deadline", "180000"),
    "rpc_retry_times": ("FLAGS_rpc_retry_times", "3"),
}

# the flags each mode's communicator reads (None: every flag)
_MODE_FLAGS = {
    None: None,
    DistributedMode.ASYNC: None,
    DistributedMode.SYNC: ("communicator_max_merge_var_num", "communicator_send_wait_times",
                           "communicator_thread_pool_size", "communicator_send_queue_size"),
    DistributedMode.HALF_ASYNC: ("communicator_max_merge_var_num",
                                 "communicator_send_wait_times",
                                 "communicator_thread_pool_size",
                                 "communicator_send_queue_size"),
    DistributedMode.GEO: ("communicator_thread_pool_size", "communicator_send_wait_times"),
}

# in these modes one merge of the CPU_NUM threads' gradients is one send
_PER_THREAD_FLAGS = ("communicator_max_merge_var_num", "communicator_send_queue_size")


def _cpu_num():
    return os.getenv("CPU_NUM", "1")


class TrainerRuntimeConfig:
    """The trainer communicator's flags (`runtime_configs`, strings as in the environment),
    read from FLAGS_communicator_* when created; `get_communicator_flags()` gives the ones the
    strategy's mode reads."""

    def __init__(self):
        self.mode = None
        cpu = _cpu_num()
        self.runtime_configs = {k: os.getenv(env, cpu if default is None else default)
                                for k, (env, default) in _TRAINER_FLAGS.items()}

    def get_communicator_flags(self):
        if self.mode not in _MODE_FLAGS:
            raise ValueError(f"TrainerRuntimeConfig: unsupported mode {self.mode!r}")
        keys = _MODE_FLAGS[self.mode]
        keys = list(self.runtime_configs) if keys is None else keys
        if self.mode in (DistributedMode.SYNC, DistributedMode.HALF_ASYNC):
            cpu = _cpu_num()
            for k in _PER_THREAD_FLAGS:
                if str(self.runtime_configs[k]) != cpu:
                    print(f"WARNING: in sync or half_async mode {k} must equal CPU_NUM; got "
                          f"{self.runtime_configs[k]}, CPU_NUM = {cpu}: using {cpu}")
                    self.runtime_configs[k] = cpu
        return {k: str(self.runtime_configs[k]) for k in keys}

    def display(self, configs):
        lines = ["=" * 50, "{:^45s}{:<5s}".format("TrainerRuntimeConfig Overview", "Value"),
                 "-" * 50]
        lines += ["{:<45s}{:<5s}".format(k, str(v)) for k, v in configs.items()]
        lines.append("=" * 50)
        return "\n" + "\n".join(lines) + "\n"

    def __repr__(self):
        return self.display(self.get_communicator_flags())


def _set_fields(target, config, what):
    """Copy a dict's entries onto `target`'s existing attributes (a ValueError names an
    unknown key before anything is set)."""
    unknown = [k for k in config if not hasattr(target, k)]
    if unknown:
        raise ValueError(f"{what} doesn't have key: {unknown[0]}")
    for k, v in config.items():
        setattr(target, k, v)


class DistributedStrategy:
    """The base of the four strategies; create them with StrategyFactory."""

    mode = None

    def __init__(self):
        self._program_config = DistributeTranspilerConfig()
        self._trainer_runtime_config = TrainerRuntimeConfig()
        self._server_runtime_config = ServerRuntimeConfig()
        num_threads = int(_cpu_num())
        self._execute_strategy = ExecutionStrategy()
        self._build_strategy = BuildStrategy()
        self._build_strategy.async_mode = False
        self._execute_strategy.num_threads = num_threads
        if num_threads > 1:
            self._build_strategy.reduce_strategy = BuildStrategy.ReduceStrategy.Reduce
        self.debug_opt = None

    def _check_all(self):
        self.check_program_config()
        self.check_trainer_runtime_config()
        self.check_server_runtime_config()
        self.check_build_strategy()
        self.check_execute_strategy()

    # -- what the mode forces (subclasses) ---------------------------------------------------
    def check_program_config(self):
        raise NotImplementedError("create strategies with StrategyFactory")

    def check_trainer_runtime_config(self):
        self._trainer_runtime_config.mode = self.mode

    def check_server_runtime_config(self):
        pass

    def check_execute_strategy(self):
        pass

    def check_build_strategy(self):
        self._build_strategy.async_mode = True

    # -- debug dumps -------------------------------------------------------------------------
    def set_debug_opt(self, opt_info):
        self.debug_opt = opt_info

    def get_debug_opt(self):
        if not isinstance(self.debug_opt, dict):
            return {}
        d = self.debug_opt
        return {"dump_slot": bool(d.get("dump_slot", 0)),
                "dump_converter": str(d.get("dump_converter", "")),
                "dump_fields": d.get("dump_fields", []),
                "dump_file_num": d.get("dump_file_num", 16),
                "dump_fields_path": d.get("dump_fields_path", ""),
                "dump_param": d.get("dump_param", [])}

    # -- the parts ---------------------------------------------------------------------------
    def get_program_config(self):
        return self._program_config

    def _set_part(self, attr, cls, config, label, update_dict=None):
        """Fluid's set_* of one part: an instance replaces the part, a dict updates its
        fields (unknown keys raise ValueError), anything else raises TypeError; then the
        strategy's check_* of that part runs."""
        if isinstance(config, cls):
            setattr(self, attr, config)
        elif isinstance(config, dict):
            (update_dict or _set_fields)(getattr(self, attr), config, cls.__name__)
        else:
            raise TypeError(f"{label} only accept input type: dict or {cls.__name__}")
        getattr(self, "check_" + label)()

    def set_program_config(self, config):
        self._set_part("_program_config", DistributeTranspilerConfig, config, "program_config")

    def get_trainer_runtime_config(self):
        return self._trainer_runtime_config

    def set_trainer_runtime_config(self, config):
        def update(part, values, _name):
            unknown = [k for k in values if k not in part.runtime_configs]
            if unknown:
                raise ValueError(f"TrainerRuntimeConfig doesn't have key: {unknown[0]}")
            part.runtime_configs.update(values)
        self._set_part("_trainer_runtime_config", TrainerRuntimeConfig, config,
                       "trainer_runtime_config", update)

    def get_server_runtime_config(self):
        return self._server_runtime_config

    def set_server_runtime_config(self, config):
        self._set_part("_server_runtime_config", ServerRuntimeConfig, config,
                       "server_runtime_config")

    def get_execute_strategy(self):
        return self._execute_strategy

    def set_execute_strategy(self, config):
        self._set_part("_execute_strategy", ExecutionStrategy, config, "execute_strategy")

    def get_build_strategy(self):
        return self._build_strategy

    def set_build_strategy(self, config):
        self._set_part("_build_strategy", BuildStrategy, config, "build_strategy")

    @property
    def sync_mode(self):
        """Whether fleet transpiles with barriers (the SYNC mode)."""
        return self.mode == DistributedMode.SYNC


class SyncStrategy(DistributedStrategy):
    mode = DistributedMode.SYNC

    def __init__(self):
        super().__init__()
        self._check_all()

    def check_program_config(self):
        c = self._program_config
        c.sync_mode = False
        c.runtime_split_send_recv = True
        c.half_async = True
        c.completely_not_async = True

    def check_execute_strategy(self):
        self._execute_strategy.use_thread_barrier = True


class AsyncStrategy(DistributedStrategy):
    mode = DistributedMode.ASYNC

    def __init__(self):
        super().__init__()
        self._check_all()

    def check_program_config(self):
        self._program_config.sync_mode = False
        self._program_config.runtime_split_send_recv = True


class HalfAsyncStrategy(DistributedStrategy):
    mode = DistributedMode.HALF_ASYNC

    def __init__(self):
        super().__init__()
        self._check_all()

    def check_program_config(self):
        c = self._program_config
        c.sync_mode = False
        c.runtime_split_send_recv = True
        c.half_async = True

    def check_execute_strategy(self):
        self._execute_strategy.use_thread_barrier = True


class GeoStrategy(DistributedStrategy):
    mode = DistributedMode.GEO

    def __init__(self, update_frequency=100):
        super().__init__()
        self._program_config.geo_sgd_need_push_nums = update_frequency
        self._check_all()

    def check_program_config(self):
        c = self._program_config
        c.sync_mode = False
        c.runtime_split_send_recv = True
        c.geo_sgd_mode = True


class StrategyFactory:
    @staticmethod
    def create_sync_strategy():
        return SyncStrategy()

    @staticmethod
    def create_half_async_strategy():
        return HalfAsyncStrategy()

    @staticmethod
    def create_async_strategy():
        return AsyncStrategy()

    @staticmethod
    def create_geo_strategy(update_frequency=100):
        return GeoStrategy(update_frequency)


def strategy_of_config(config):
    """The strategy Fluid 1.8's fleet makes of a bare DistributeTranspilerConfig: SYNC when
    `config.sync_mode`; otherwise GEO, HALF_ASYNC or ASYNC by its flags (a config without
    `runtime_split_send_recv` is the old half-async one, and is marked so). The config itself
    becomes the strategy's program config, its mode flags set as the strategy's mode needs
    (as Fluid does)."""
    if not isinstance(config, DistributeTranspilerConfig):
        raise TypeError(f"expected a DistributeTranspilerConfig, got {type(config).__name__}")
    if config.sync_mode:
        strategy = SyncStrategy()
    elif not config.runtime_split_send_recv:
        strategy = HalfAsyncStrategy()
        config.half_async = True
        config.runtime_split_send_recv = True
    elif config.geo_sgd_mode:
        strategy = GeoStrategy(config.geo_sgd_need_push_nums)
    elif config.half_async:
        strategy = HalfAsyncStrategy()
    else:
        strategy = AsyncStrategy()
    strategy.set_program_config(config)
    return strategy
