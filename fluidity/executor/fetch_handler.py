"""`fluid.executor.FetchHandler`: `train_from_dataset(..., fetch_handler=h)` calls
`h.handler(res_dict)` every `h.period_secs` seconds while the run goes on, and once more when
it ends, with `res_dict = {key: ndarray or None}` for each `key: variable` of `h.var_dict`
(a variable or its name; a bare name or list of them is keyed by the names).

The value of a variable, as in Paddle 1.8 (which reads the run's root scope): a persistable
variable (a parameter, a metric's state, a counter) is its current value in the run's scope —
the workers update it in place, in threads or forked processes alike (async_executor.py). A
variable only the workers hold (a batch's loss, an activation) is in no scope the parent can
read; where Paddle gives None, Fluidity gives the mean over the latest report of the workers
(every `print_period` batches) when the variable is in `fetch_list`, else None.
"""
import sys
import threading

import numpy as np

from ..errors import FluidityError

__all__ = ["FetchHandler"]


class FetchHandler:
    """Fluid 1.8's `fluid.executor.FetchHandler(var_dict, period_secs=60)`: subclass it and
    override `handler(res_dict)`; the default prints the first element of each value."""

    def __init__(self, var_dict=None, period_secs=60):
        var_dict = _as_var_dict(var_dict)
        if isinstance(period_secs, bool) or not isinstance(period_secs, (int, float)) \
                or period_secs <= 0:
            raise ValueError(f"FetchHandler: period_secs must be a positive number of "
                             f"seconds, got {period_secs!r}")
        self.var_dict = var_dict
        self.period_secs = period_secs

    def handler(self, res_dict):
        for key, value in res_dict.items():
            if isinstance(value, np.ndarray):
                sys.stdout.write(f"{key}[0]: {value.reshape(-1)[0]} ")
        sys.stdout.write("\n")

    @staticmethod
    def help():
        print("class FetchHandlerExample(FetchHandler):\n"
              "    def handler(self, res_dict):\n"
              "        print(res_dict['auc'])\n\n"
              "exe.train_from_dataset(program, dataset,\n"
              "    fetch_handler=FetchHandlerExample({'auc': auc_var}, period_secs=10))")


def _as_var_dict(var_dict):
    """{key: Variable or name}: a dict as given; a name, a Variable, or a list of them,
    keyed by their names (Fluid 1.8's scripts pass `FetchHandler(var.name)`)."""
    if isinstance(var_dict, dict) and var_dict:
        return var_dict
    items = [var_dict] if isinstance(var_dict, str) or hasattr(var_dict, "name") else (
        list(var_dict) if isinstance(var_dict, (list, tuple)) else [])
    names = [v if isinstance(v, str) else getattr(v, "name", None) for v in items]
    if not items or any(not isinstance(n, str) or not n for n in names):
        raise TypeError(f"FetchHandler: var_dict must be a non-empty dict of {{key: Variable "
                        f"or name}}, or variables / names, got {var_dict!r}")
    return dict(zip(names, items))


class FetchHandlerMonitor:
    """Runs a FetchHandler for one dataset run: `report` is the AsyncExecutor's per-report
    callback; `start()` before the run, `stop(final=True)` after it (the last call, and the
    handler's own exception, if it raised one, re-raised here)."""

    def __init__(self, fetch_handler, program, scope):
        if not isinstance(fetch_handler, FetchHandler):
            raise TypeError(f"fetch_handler must be a fluid.executor.FetchHandler, got "
                            f"{type(fetch_handler).__name__}")
        self.fetch_handler = fetch_handler
        self.scope = scope
        block = program.global_block()
        self.names = {}
        for key, var in fetch_handler.var_dict.items():
            name = var if isinstance(var, str) else getattr(var, "name", None)
            if name is None or block.find_var_recursive(name) is None:
                raise FluidityError(f"FetchHandler: var_dict['{key}'] = {var!r} is not a "
                                    f"variable of the program")
            self.names[key] = (name, bool(block.find_var_recursive(name).persistable))
        self._reported = {}
        self._stop = threading.Event()
        self._thread = None
        self._error = None

    def report(self, examples_seen, means):
        self._reported.update(means)

    def values(self):
        res = {}
        for key, (name, persistable) in self.names.items():
            var = self.scope.find_var(name) if persistable else None
            if var is not None and var.is_initialized():
                res[key] = np.array(var.get_tensor())
            elif name in self._reported:
                res[key] = np.array([self._reported[name]])
            else:
                res[key] = None
        return res

    def _call(self):
        try:
            self.fetch_handler.handler(self.values())
        except BaseException as e:  # noqa: BLE001 - re-raised by stop()
            self._error = self._error or e
            self._stop.set()

    def _loop(self):
        while not self._stop.wait(self.fetch_handler.period_secs):
            self._call()

    def start(self):
        self._thread = threading.Thread(target=self._loop, name="fetch-handler", daemon=True)
        self._thread.start()

    def stop(self, final=True):
        self._stop.set()
        self._thread.join()
        if final and self._error is None:
            self._call()
        if self._error is not None:
            raise self._error
