"""Which kind of Hogwild worker trains a program faster on this machine: threads or processes.

AsyncExecutor's workers="auto" asks `choose(...)`. The answer comes from the cost of the
training step, decided from its structure where that settles it and measured otherwise:

* the compiled worker loop applies (the step is one native segment over the feed's slots and
  the parameters, native_loop.py): **threads**. Their per-batch path holds no GIL, no lock
  and no shared mutable state, so they scale as processes do, and each batch costs the
  compiled step instead of the processes' interpreter, with no fork and no copy of the
  parameters into shared memory;
* one worker and every op compiles: **threads** (nothing to contend with; the native plan);
* otherwise a worker thread runs each batch through the executor's native plan, whose
  Python steps and per-op bookkeeping hold the GIL, and whether that beats processes
  depends on the step (a CTR-DNN's gemms release the GIL for most of a batch; a few
  lookups and dot products do not). So it is **measured**, once per program, worker count
  and machine, and cached for the process: on the first batches of the first data file,
  over scratch copies of the parameters (the user's are never touched), `n` threads run the
  native plan at once, and one thread runs the interpreter; processes are predicted at
  min(n, cores) times the interpreter's rate (they share nothing but the parameters: 1.98x
  at 2 measured, issue 27). The faster prediction wins.

Measuring is skipped (the structural rule decides: processes when an op does not compile,
threads otherwise) when the first file is not a plain file (a pipe would run twice) or the
parameters are too large to copy cheaply. The choice and its reason are logged and kept in
`Choice`, which AsyncExecutor.run's result carries as `mode_reason`.
"""
import hashlib
import logging
import os
import threading
import time

import numpy as np

from ..core.scope import Scope
from ..core.tensor import LoDTensor

logger = logging.getLogger("fluidity")

MEASURE_BATCHES = 16           # batches each candidate runs (after one warm-up batch)
MEASURE_MAX_BYTES = 64 << 20   # larger persistables: decide by the structural rule
_CACHE = {}


class Choice:
    """threads: True for worker threads; why: the reason, as logged; rates: measured
    examples/s per candidate ({} when not measured); cached: the answer was remembered."""

    def __init__(self, threads, why, rates=None, cached=False):
        self.threads, self.why, self.rates, self.cached = threads, why, rates or {}, cached

    def __repr__(self):
        return f"Choice({'threads' if self.threads else 'processes'}: {self.why})"


def cores():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _key(program, fetch_names, desc, n_workers):
    h = hashlib.sha256(program.desc.SerializePartialToString())  # dtype-less vars allowed
    h.update(repr((tuple(fetch_names), desc.desc(), n_workers, cores())).encode())
    return h.hexdigest()


def choose(program, lowering, obstacles, loop_why, fetch_names, desc, files, scope,
           n_workers):
    """The worker kind for AsyncExecutor.run(workers="auto"), as a Choice (logged).
    obstacles: the ops that would run as Python steps; loop_why: None when the compiled
    worker loop applies, else why not."""
    if loop_why is None:
        return _log(Choice(True, "the compiled worker loop runs whole chunks in C (no GIL, "
                                 "lock or shared state per batch)"))
    if n_workers == 1 and not obstacles:
        return _log(Choice(True, "one worker and every op compiles: the native plan in a "
                                 "thread"))
    key = _key(program, fetch_names, desc, n_workers)
    hit = _CACHE.get(key)
    if hit is not None:
        return _log(Choice(hit.threads, hit.why, hit.rates, cached=True))
    try:
        from .parallel import blas_limit
        with blas_limit(1):     # as the workers run: one BLAS thread each
            rates = _measure(program, fetch_names, desc, files, scope, n_workers)
    except Exception:   # noqa: BLE001 - a step that fails here fails in the run, reported
        rates = None
    if rates is None:
        if obstacles:
            choice = Choice(False, f"{loop_why}, and the step was not measured")
        else:
            choice = Choice(True, "every op compiles (the step was not measured)")
        return _log(choice)
    threads = rates["threads"] >= rates["processes"]
    why = (f"measured on {rates['batches']} batches: {n_workers} threads "
           f"{rates['threads']:,.0f} examples/s vs {n_workers} processes predicted "
           f"{rates['processes']:,.0f} (the interpreter at {rates['interpreter']:,.0f} in one "
           f"process, x {min(n_workers, cores())} cores)")
    why += f"; no compiled worker loop: {loop_why}"
    choice = Choice(threads, why, rates)
    _CACHE[key] = choice
    return _log(choice)


def _log(choice):
    logger.info("AsyncExecutor: worker %s%s: %s", "threads" if choice.threads else
                "processes", " (cached choice)" if choice.cached else "", choice.why)
    return choice


def _scratch_scope(program, scope):
    """A scope holding copies of the program's persistable tensors, or None when they are
    too large to copy cheaply (or one has no value)."""
    names = {v.name for b in program.blocks for v in b.vars.values() if v.persistable}
    scratch, total = Scope(), 0
    for n in sorted(names):
        var = scope.find_var(n)
        if var is None or not isinstance(var.value, LoDTensor) or var.value._array is None:
            continue
        a = var.value._array
        total += a.nbytes
        if total > MEASURE_MAX_BYTES:
            return None
        t = LoDTensor(np.array(a, copy=True), var.value._lod)
        scratch.var(n).value = t
    return scratch


def _first_batches(desc, files):
    from ..datafeed.multislot import MultiSlotReader
    path = files[0]
    if not isinstance(path, (str, os.PathLike)) or not os.path.isfile(path):
        return None
    batches = []
    for b in MultiSlotReader(desc, [path]):
        batches.append(b)
        if len(batches) > MEASURE_BATCHES:
            break
    return batches if len(batches) >= 2 else None


def _examples(batch):
    for t in batch.values():
        if t._lod:
            return len(t._lod[0]) - 1
    return next(iter(batch.values()))._array.shape[0]


def _run_all(exe, program, batches, fetch_names, scope):
    for b in batches:
        exe.run(program, feed=b, fetch_list=fetch_names, scope=scope)


def _measure(program, fetch_names, desc, files, scope, n_workers):
    """{"threads", "processes", "interpreter": examples/s, "batches": n} or None."""
    from .executor import Executor
    from .strategy import ExecutionStrategy
    try:
        batches = _first_batches(desc, files)
    except Exception:   # noqa: BLE001 - a bad first file is the run's to report
        return None
    scratch = _scratch_scope(program, scope) if batches else None
    if scratch is None:
        return None
    warm, timed = batches[:1], batches[1:]
    ex = sum(_examples(b) for b in timed)
    interp = Executor(strategy=ExecutionStrategy("interpreter"))
    ws = scratch.new_scope()
    _run_all(interp, program, warm, fetch_names, ws)
    t = time.perf_counter()
    _run_all(interp, program, timed, fetch_names, ws)
    interp_rate = ex / max(time.perf_counter() - t, 1e-9)
    exes = [Executor(strategy=ExecutionStrategy("native")) for _ in range(n_workers)]
    kids = [scratch.new_scope() for _ in range(n_workers)]
    for e, k in zip(exes, kids):
        _run_all(e, program, warm, fetch_names, k)
    errors = []

    def work(e, k):
        try:
            _run_all(e, program, timed, fetch_names, k)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
    threads = [threading.Thread(target=work, args=(e, k), daemon=True)
               for e, k in zip(exes, kids)]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    thread_rate = n_workers * ex / max(time.perf_counter() - t, 1e-9)
    if errors:
        return None
    return {"threads": thread_rate, "processes": interp_rate * min(n_workers, cores()),
            "interpreter": interp_rate, "batches": len(timed)}
