"""Fluid 1.6's parameter-server strategies: `StrategyFactory.create_sync_strategy()`,
`create_async_strategy()`, `create_geo_strategy(update_frequency)`; each carries the
DistributeTranspilerConfig the fleet transpiles with (`get_program_config()`)."""
from .....transpiler.distribute import DistributeTranspilerConfig


class DistributedStrategy:
    sync_mode = False

    def __init__(self):
        self._program_config = DistributeTranspilerConfig()

    def get_program_config(self):
        return self._program_config

    def set_program_config(self, config):
        if isinstance(config, DistributeTranspilerConfig):
            self._program_config = config
            return
        if not isinstance(config, dict):
            raise TypeError("set_program_config takes a DistributeTranspilerConfig or a dict")
        for k, v in config.items():
            if not hasattr(self._program_config, k):
                raise ValueError(f"DistributeTranspilerConfig has no field {k!r}")
            setattr(self._program_config, k, v)


class SyncStrategy(DistributedStrategy):
    sync_mode = True


class AsyncStrategy(DistributedStrategy):
    sync_mode = False


class GeoStrategy(DistributedStrategy):
    sync_mode = False

    def __init__(self, update_frequency=100):
        super().__init__()
        self._program_config.geo_sgd_mode = True
        self._program_config.geo_sgd_need_push_nums = int(update_frequency)


class StrategyFactory:
    @staticmethod
    def create_sync_strategy():
        return SyncStrategy()

    @staticmethod
    def create_async_strategy():
        return AsyncStrategy()

    @staticmethod
    def create_half_async_strategy():
        raise NotImplementedError("the half-async strategy is not built (sync, async and "
                                  "geo are)")

    @staticmethod
    def create_geo_strategy(update_frequency=100):
        return GeoStrategy(update_frequency)
