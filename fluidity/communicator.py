"""Fluid 1.8's `fluid.communicator.Communicator`: the trainer-side object of a
parameter-server job that fleet's `init_worker()` starts and `stop_worker()` stops.

    comm = Communicator(trainer_program, DistributedMode.GEO,
                        kwargs={"push_vars": transpiler.plan, "trainers": 2, "push_nums": 5},
                        envs=strategy.get_trainer_runtime_config().get_communicator_flags())
    comm.start(); ...train...; comm.stop()

GEO mode runs the GEO-SGD communicator (distributed/communicator.py): local training, the
parameters' deltas pushed and the servers' values pulled in the background every
`push_nums` batches. `push_vars` is the GeoPlan the GEO-SGD transpiler made
(`GeoSgdTranspiler.plan`, what Fluid's `_get_vars_info()` describes).

SYNC, ASYNC and HALF_ASYNC: Fluidity's trainer program sends its gradients and receives its
parameters in its own `send`/`recv` ops, each step, as the transpiler wrote them (with
barriers in sync mode), so nothing is left for a background thread to do; the communicator
checks its arguments and flags as Fluid's does and brackets the run (`start`, `stop`,
`is_running`). Its recv ops keep running (Fluid sets them `do_not_run` because its
background thread receives instead)."""
from .core.scope import global_scope
from .distributed.communicator import GeoCommunicator
from .framework import Program
from .transpiler.distribute_transpiler import DistributedMode
from .transpiler.geo_sgd_transpiler import GeoPlan

__all__ = ["Communicator", "DistributedMode"]

_MODES = {DistributedMode.SYNC: "SYNC", DistributedMode.ASYNC: "ASYNC",
          DistributedMode.HALF_ASYNC: "HALF_ASYNC", DistributedMode.GEO: "GEO"}


def _int_flags(envs):
    """The communicator flags (name -> string of an integer, as TrainerRuntimeConfig
    gives them), checked: a ValueError names a flag that is not a non-negative integer."""
    out = {}
    for k, v in dict(envs or {}).items():
        if not isinstance(k, str):
            raise TypeError(f"Communicator: flag names must be strings, got {k!r}")
        if k.startswith("communicator_") or k.startswith("rpc_"):
            try:
                n = int(str(v))
            except ValueError:
                raise ValueError(f"Communicator: flag {k} must be an integer, got {v!r}") \
                    from None
            if n < 0:
                raise ValueError(f"Communicator: flag {k} must not be negative, got {v!r}")
            out[k] = n
        else:
            out[k] = v
    return out


class Communicator:
    """`Communicator(program, mode, kwargs=None, envs=None)`: `program` is the trainer
    program after transpiling, `mode` a DistributedMode; GEO needs kwargs `push_vars` (the
    GeoPlan), SYNC kwargs `pserver_endpoints` and `trainer_id` (as Fluid's)."""

    def __init__(self, program, mode, kwargs=None, envs=None):
        if not isinstance(program, Program):
            raise TypeError(f"Communicator: program must be a Program, got "
                            f"{type(program).__name__}")
        if mode not in _MODES:
            raise ValueError(f"Communicator: mode must be a DistributedMode "
                             f"(SYNC, ASYNC, HALF_ASYNC or GEO), got {mode!r}")
        kwargs = dict(kwargs or {})
        self.program, self.mode, self.mode_str = program, mode, _MODES[mode]
        self.envs = _int_flags(envs)
        self._geo = None
        self._running = False
        if mode == DistributedMode.GEO:
            plan = kwargs.get("push_vars")
            if not isinstance(plan, GeoPlan):
                raise TypeError("Communicator(GEO): kwargs['push_vars'] must be the GeoPlan "
                                "of GeoSgdTranspiler.transpile (its .plan)")
            push_nums = kwargs.get("push_nums", plan.push_nums)
            self._geo = GeoCommunicator(plan, global_scope(), push_nums=push_nums)
        elif mode == DistributedMode.SYNC:
            missing = [k for k in ("pserver_endpoints", "trainer_id") if k not in kwargs]
            if missing:
                raise ValueError(f"Communicator(SYNC): kwargs needs {missing}")
            self.pserver_endpoints = list(kwargs["pserver_endpoints"])
            self.trainer_id = int(kwargs["trainer_id"])

    def start(self, lazy=True):
        """Start communicating. GEO: pulls the servers' values into the global scope first
        (when the startup program has not run yet, `lazy` defers that to the first run)."""
        if self._running:
            raise RuntimeError("Communicator.start: the communicator is already running")
        if self._geo is not None:
            self._geo.start(lazy=lazy)
        self._running = True

    def stop(self):
        """Stop communicating. GEO: a last push and pull, then goodbye to the servers."""
        if not self._running:
            return
        self._running = False
        if self._geo is not None:
            self._geo.close()

    def is_running(self):
        return self._running

    @property
    def stats(self):
        """GEO: the background syncs' counts (distributed.communicator.CommStats); None in
        the other modes, whose program ops communicate."""
        return self._geo.stats if self._geo is not None else None
