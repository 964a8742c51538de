"""`fluid.profiler`: per-op times of every program run while it is on.

    with fluid.profiler.profiler("CPU", sorted_key="total", profile_path="/tmp/profile"):
        for batch in batches:
            exe.run(main, feed=batch, fetch_list=[loss])

or `start_profiler("CPU")` ... `stop_profiler("total", "/tmp/profile")`; `reset_profiler()`
drops what was recorded so far. At the stop a table is printed (and logged on the
"fluidity" logger): per op type its calls, total, min, max and average time and its share
of the time spent in steps (`Executor.run`); `sorted_key` orders it by "calls", "total",
"max", "min" or "ave" (None: as first run). `profile_path` gets a Chrome trace (JSON; open
it in https://ui.perfetto.dev or chrome://tracing): every op call and every step, one track
per thread.

It is built on the executor's plan observer (executor/profile.py): while the profiler is
on, the plans Executors prepare have every op step wrapped in a timer; off, the plans are
the untouched ones (plans are cached per on/off), so it costs nothing then.

AsyncExecutor / train_from_dataset: workers that run batches through an Executor (worker
threads over the executor path, and sub-programs of the main thread) show as their own
tracks, one per worker thread. What runs elsewhere is not seen: ops of worker *processes*
(forked: their timings stay in the child), and the compiled worker loop
(executor/native_loop.c), which runs whole chunks of batches in C without returning to
Python — its worker threads show no op events at all (run with `read_ahead=True` to see
them through the executor). Under the native plan kind a compiled segment is one row,
`compiled_segment[n ops: #first..#last]`.
"""
import contextlib
import json
import logging
import os
import sys

from .errors import FluidityError
from .executor import profile as profiling

logger = logging.getLogger("fluidity")

__all__ = ["profiler", "start_profiler", "stop_profiler", "reset_profiler", "cuda_profiler"]

_STATES = ("CPU", "GPU", "All")
_PROFILE = profiling.Profile()
# sorted_key -> the row's sort key (rows: op type, calls, total, min, max)
_SORT = {None: None,
         "calls": lambda r: -r[1],
         "total": lambda r: -r[2],
         "max": lambda r: -r[4],
         "min": lambda r: r[3],
         "ave": lambda r: -(r[2] / r[1])}


def _check_state(state):
    if state not in _STATES:
        raise FluidityError(f"profiler state must be one of {_STATES}, got {state!r}")
    if state == "GPU":
        logger.warning("profiler: no GPU ops to time here; CPU ops are timed")


def start_profiler(state, tracer_option="Default"):
    """Start timing every op of every program run (state: 'CPU', 'GPU' or 'All')."""
    _check_state(state)
    if profiling.active() is None:
        _PROFILE.reset()
        profiling.set_active(_PROFILE)


def reset_profiler():
    """Drop what was recorded so far (the profiler stays on or off)."""
    _PROFILE.reset()


def table(profile, sorted_key=None):
    """The report's rows and text: per op type calls, total, min, max, average (ms) and the
    share of the steps' time."""
    if sorted_key not in _SORT:
        raise FluidityError(f"sorted_key must be one of {list(_SORT)}, got {sorted_key!r}")
    rows = profile.stats()
    if _SORT[sorted_key] is not None:
        rows.sort(key=_SORT[sorted_key])
    step = sum(e - s for _, s, e in profile.steps) or sum(r[2] for r in rows) or 1.0
    lines = ["-------------------------     Profiling Report     -------------------------",
             f"Steps: {len(profile.steps)}   time in steps: {step * 1e3:.3f} ms   "
             f"sorted by: {sorted_key or 'first run'}",
             f"{'Event':<32}{'Calls':>8}{'Total':>12}{'Min.':>10}{'Max.':>10}{'Ave.':>10}"
             f"{'Ratio.':>9}"]
    for t, calls, total, lo, hi in rows:
        lines.append(f"{t:<32}{calls:>8}{total * 1e3:>12.4f}{lo * 1e3:>10.4f}{hi * 1e3:>10.4f}"
                     f"{total / calls * 1e3:>10.4f}{total / step:>9.2%}")
    return rows, "\n".join(lines)


def chrome_trace(profile):
    """The recorded op calls and steps as a Chrome trace (a dict, JSON-ready)."""
    pid = os.getpid()
    t0 = min([s for _, _, s, _ in profile.events] + [s for _, s, _ in profile.steps],
             default=0.0)
    tids = {}
    events = []

    def tid(ident):
        if ident not in tids:
            tids[ident] = len(tids) + 1
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tids[ident],
                           "args": {"name": f"thread {len(tids)}"}})
        return tids[ident]

    for ident, s, e in profile.steps:
        events.append({"name": "step", "cat": "step", "ph": "X", "pid": pid,
                       "tid": tid(ident), "ts": (s - t0) * 1e6, "dur": (e - s) * 1e6})
    types = profile.op_types()
    for label, ident, s, e in profile.events:
        events.append({"name": types.get(label, label),
                       "cat": "op", "ph": "X", "pid": pid, "tid": tid(ident),
                       "ts": (s - t0) * 1e6, "dur": (e - s) * 1e6, "args": {"op": label}})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def stop_profiler(sorted_key=None, profile_path="/tmp/profile"):
    """Stop, print the table (sorted by `sorted_key`) and write the Chrome trace to
    `profile_path`. Returns the table's rows."""
    if sorted_key not in _SORT:
        raise FluidityError(f"sorted_key must be one of {list(_SORT)}, got {sorted_key!r}")
    profiling.set_active(None)
    rows, text = table(_PROFILE, sorted_key)
    print(text, file=sys.stdout)
    logger.info("%s", text)
    if profile_path:
        d = os.path.dirname(os.path.abspath(profile_path))
        os.makedirs(d, exist_ok=True)
        with open(profile_path, "w") as f:
            json.dump(chrome_trace(_PROFILE), f)
    return rows


@contextlib.contextmanager
def profiler(state, sorted_key=None, profile_path="/tmp/profile", tracer_option="Default"):
    """Profile the runs inside the `with` block (see the module's docstring)."""
    if sorted_key not in _SORT:
        raise FluidityError(f"sorted_key must be one of {list(_SORT)}, got {sorted_key!r}")
    start_profiler(state, tracer_option)
    try:
        yield
    finally:
        stop_profiler(sorted_key, profile_path)


def cuda_profiler(output_file, output_mode=None, config=None):
    raise FluidityError("cuda_profiler needs CUDA; use fluid.profiler.profiler('CPU') here")
