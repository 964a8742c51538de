"""`fluid.core.Fleet`: Paddle's wrapper of its pslib parameter-server client.

pslib (Baidu's closed parameter-server library) is not part of Fluidity, as it is not part
of Paddle builds without WITH_PSLIB. As in those builds, the wrapper exists and keeps its
configuration; what needs pslib servers (pulling and pushing sparse tables, saving them)
raises NotImplementedError naming the fleet to use instead."""

__all__ = ["FleetWrapper"]

_INSTEAD = ("pslib (Paddle's closed parameter-server library) is not part of Fluidity; use "
            "fluidity.incubate.fleet.parameter_server.distribute_transpiler.fleet or the "
            "collective fleet")


class FleetWrapper:
    def __init__(self):
        self.client2client = {"request_timeout_ms": 500000, "connect_timeout_ms": 10000,
                              "max_retry": 3}
        self.cache_threshold = {}

    def set_client2client_config(self, request_timeout_ms, connect_timeout_ms, max_retry):
        self.client2client = {"request_timeout_ms": int(request_timeout_ms),
                              "connect_timeout_ms": int(connect_timeout_ms),
                              "max_retry": int(max_retry)}

    def get_cache_threshold(self, table_id):
        """The show-count threshold of a table's cache (0.0 until a pass computes one)."""
        return float(self.cache_threshold.get(int(table_id), 0.0))

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)

        def unavailable(*args, **kwargs):
            raise NotImplementedError(f"core.Fleet.{name}: {_INSTEAD}")
        return unavailable
