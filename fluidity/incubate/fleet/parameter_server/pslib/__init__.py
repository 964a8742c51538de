"""Fluid's `fleet.parameter_server.pslib`: parameter-server training over Baidu's pslib.

pslib is not part of Fluidity (Paddle needs a WITH_PSLIB build for it too). The module
imports, so programs that only name it load; `fleet.init()` and
`fleet.distributed_optimizer()` raise ImportError, as they do in a Paddle without pslib
(where mpi4py and pslib are missing), naming the fleets that work here."""
from .embedding import (FLEET_GLOBAL_DICT, _fleet_embedding,  # noqa: F401
                        _fleet_embedding_v2, _prepare_params, fleet_embedding)
from .fleet_wrapper import _INSTEAD, FleetWrapper  # noqa: F401

__all__ = ["fleet", "PSLib", "fleet_embedding", "FLEET_GLOBAL_DICT"]


class PSLib:
    """The pslib fleet: every entry point says it is unavailable."""

    def __init__(self):
        self._role_maker = None
        self._opt_info = None
        self._fleet_ptr = None
        self._local_ip = 0

    def init(self, role_maker=None):
        raise ImportError(f"fleet.init: {_INSTEAD}")

    def distributed_optimizer(self, optimizer, strategy=None):
        raise ImportError(f"fleet.distributed_optimizer: {_INSTEAD}")

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)

        def unavailable(*args, **kwargs):
            raise ImportError(f"fleet.{name}: {_INSTEAD}")
        return unavailable


fleet = PSLib()
