"""`fluid.profiler`: per-op times of every program run while it is on.

    with fluid.profiler.profiler("CPU", sorted_key="total", profile_path="/tmp/profile"):
        for batch in batches:
            exe.run(main, feed=batch, fetch_list=[loss])

or `start_profiler("CPU")` ... `stop_profiler("total", "/tmp/profile")`; `reset_profiler()`
drops what was recorded so far. At the stop a table is printed (times in ms), with where the
profile went: per op type its calls, total, min, max and average time and its share
of the time spent in steps (`Executor.run`); `sorted_key` orders it by "calls", "total",
"max", "min" or "ave" (None: as first run). `profile_path` gets the profile as Fluid writes
it, a `Profile` protobuf message (`fluid.proto.profiler.profiler_pb2`: every op call and
every step, one CPU event each); `fluid.profiler.timeline(profile_path, "trace.json")`
turns it into a Chrome trace (open it in https://ui.perfetto.dev or chrome://tracing), one
track per thread, as Paddle's tools/timeline.py does.

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
import time

from .errors import FluidityError
from .executor import profile as profiling
from .proto.profiler import profiler_pb2

logger = logging.getLogger("fluidity")

__all__ = ["profiler", "start_profiler", "stop_profiler", "reset_profiler", "cuda_profiler",
           "timeline"]

_STATES = ("CPU", "GPU", "All")
_TRACERS = ("Default", "OpDetail", "AllOpDetail")


class ProfilerError(FluidityError, ValueError):
    """A profiler asked for with a state, sort key or option Fluid does not have."""
_PROFILE = profiling.Profile()
# sorted_key -> the row's sort key (rows: op type, calls, total, min, max)
_SORT = {None: None,
         "calls": lambda r: -r[1],
         "total": lambda r: -r[2],
         "max": lambda r: -r[4],
         "min": lambda r: r[3],
         "ave": lambda r: -(r[2] / r[1])}


def _check_key(sorted_key):
    if sorted_key not in _SORT:
        raise ProfilerError(f"The sorted_key must be None or in 'calls', 'total', 'max', "
                            f"'min' and 'ave', got {sorted_key!r}")


def _check_state(state, tracer_option="Default"):
    if state not in _STATES:
        raise ProfilerError(f"The state must be 'CPU' or 'GPU' or 'All', got {state!r}")
    if tracer_option not in _TRACERS:
        raise ProfilerError(f"tracer option must be 'Default', 'OpDetail', 'AllOpDetail', "
                            f"got {tracer_option!r}")
    if state == "GPU":
        logger.warning("profiler: no GPU ops to time here; CPU ops are timed")


def start_profiler(state, tracer_option="Default"):
    """Start timing every op of every program run (state: 'CPU', 'GPU' or 'All')."""
    _check_state(state, tracer_option)
    if profiling.active() is None:
        _PROFILE.reset()
        profiling.set_active(_PROFILE)


def reset_profiler():
    """Drop what was recorded so far (the profiler stays on or off)."""
    _PROFILE.reset()


def table(profile, sorted_key=None):
    """The report's rows and text: per op type calls, total, min, max, average (ms) and the
    share of the steps' time."""
    _check_key(sorted_key)
    rows = profile.stats()
    if _SORT[sorted_key] is not None:
        rows.sort(key=_SORT[sorted_key])
    step = sum(e - s for _, s, e in profile.steps) or sum(r[2] for r in rows) or 1.0
    lines = ["-------------------------     Profiling Report     -------------------------",
             f"Steps: {len(profile.steps)}   time in steps: {step * 1e3:.3f} ms   "
             f"sorted by: {sorted_key or 'first run'}   time unit: ms",
             f"{'Event':<32}{'Calls':>8}{'Total':>12}{'Min.':>10}{'Max.':>10}{'Ave.':>10}"
             f"{'Ratio.':>9}"]
    for t, calls, total, lo, hi in rows:
        lines.append(f"{t:<32}{calls:>8}{total * 1e3:>12.4f}{lo * 1e3:>10.4f}{hi * 1e3:>10.4f}"
                     f"{total / calls * 1e3:>10.4f}{total / step:>9.2%}")
    return rows, "\n".join(lines)


def profile_proto(profile):
    """The recorded steps and op calls as Paddle's `Profile` message (profiler_pb2): one CPU
    event per op call (name: the op type; detail_info: which op of its program) and per step
    (`Executor::Run`), device_id -1 (CPU), sub_device_id the thread's number, times in ns
    since the epoch."""
    offset = time.time_ns() - time.perf_counter_ns()
    tids = {}

    def ns(t):
        return max(0, int(round(t * 1e9)) + offset)

    msg = profiler_pb2.Profile()
    types = profile.op_types()
    spans = [(ident, s, e, "Executor::Run", "") for ident, s, e in profile.steps]
    spans += [(ident, s, e, types.get(label, label), str(label))
              for label, ident, s, e in profile.events]
    spans.sort(key=lambda x: x[1])
    for ident, s, e, name, detail in spans:
        ev = msg.events.add(type=profiler_pb2.Event.CPU, name=name, start_ns=ns(s),
                            end_ns=ns(e), device_id=-1,
                            sub_device_id=tids.setdefault(ident, len(tids)))
        if detail:
            ev.detail_info = detail
    if spans:
        msg.start_ns = min(ev.start_ns for ev in msg.events)
        msg.end_ns = max(ev.end_ns for ev in msg.events)
    return msg


def timeline_of(msg):
    """A Profile message as a Chrome trace (a dict, JSON-ready; open it in
    https://ui.perfetto.dev or chrome://tracing): one track per (device, thread)."""
    pid = os.getpid()
    t0 = msg.start_ns if msg.events else 0
    events, tids = [], {}
    for ev in msg.events:
        key = (ev.device_id, ev.sub_device_id)
        if key not in tids:
            tids[key] = len(tids) + 1
            where = "CPU" if ev.device_id < 0 else f"GPU {ev.device_id}"
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tids[key],
                           "args": {"name": f"{where} thread {ev.sub_device_id}"}})
        step = ev.name == "Executor::Run"
        events.append({"name": ev.name, "cat": "step" if step else "op", "ph": "X",
                       "pid": pid, "tid": tids[key], "ts": (ev.start_ns - t0) / 1e3,
                       "dur": (ev.end_ns - ev.start_ns) / 1e3,
                       "args": {"op": ev.detail_info} if ev.detail_info else {}})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def chrome_trace(profile):
    """The recorded op calls and steps as a Chrome trace (timeline_of its Profile)."""
    return timeline_of(profile_proto(profile))


def timeline(profile_path, timeline_path=None):
    """Paddle's tools/timeline.py: read the Profile a profiler wrote at `profile_path`
    (Fluidity's or Paddle's), and return it as a Chrome trace, also written as JSON to
    `timeline_path` when given."""
    msg = profiler_pb2.Profile()
    with open(profile_path, "rb") as f:
        data = f.read()
    try:
        msg.ParseFromString(data)
    except Exception as e:  # noqa: BLE001 - protobuf's DecodeError and friends
        raise ProfilerError(f"timeline: {profile_path} is not a profile written by "
                            f"fluid.profiler ({e})") from None
    trace = timeline_of(msg)
    if timeline_path:
        with open(timeline_path, "w") as f:
            json.dump(trace, f)
    return trace


def stop_profiler(sorted_key=None, profile_path="/tmp/profile"):
    """Stop, print the table (sorted by `sorted_key`) and write the Profile message
    (profiler_pb2, as Fluid does) to `profile_path` (`timeline()` turns it into a Chrome
    trace). Returns the table's rows; does nothing when the profiler is not on."""
    _check_key(sorted_key)
    if profiling.active() is None:
        return None
    profiling.set_active(None)
    rows, text = table(_PROFILE, sorted_key)
    if profile_path:
        d = os.path.dirname(os.path.abspath(profile_path))
        os.makedirs(d, exist_ok=True)
        tmp = f"{profile_path}.tmp{os.getpid()}"
        with open(tmp, "wb") as f:
            f.write(profile_proto(_PROFILE).SerializeToString())
        os.replace(tmp, profile_path)
        text += (f"\n\nprofile written to {profile_path}; its Chrome trace (chrome://tracing, "
                 f"ui.perfetto.dev): fluid.profiler.timeline({profile_path!r}, 'trace.json')")
    print(text, file=sys.stdout)     # once: the table is the run's output, not a log record
    return rows


@contextlib.contextmanager
def profiler(state, sorted_key=None, profile_path="/tmp/profile", tracer_option="Default"):
    """Profile the runs inside the `with` block (see the module's docstring)."""
    _check_key(sorted_key)
    start_profiler(state, tracer_option)
    try:
        yield
    finally:
        stop_profiler(sorted_key, profile_path)


def cuda_profiler(output_file, output_mode=None, config=None):
    raise FluidityError("cuda_profiler needs CUDA; use fluid.profiler.profiler('CPU') here")
