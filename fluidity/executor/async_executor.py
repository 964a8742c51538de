"""AsyncExecutor: Hogwild training from MultiSlot files on all cores.

`run(program, data_feed, filelist, thread_num, fetch)` starts `thread_num` workers. When
every op of the program compiles (fluidity/codegen), they are *threads* of this process,
each running the training step as native calls that release the GIL, over the parameters in
the scope, in place (no copies, nothing to share). Otherwise they are worker *processes*
(fork), so that Python per-op dispatch runs at once too; `workers=` picks either, and
the choice is logged. A worker thread whose step is one compiled segment over the feed's
slots and the parameters hands whole parsed chunks to a loop in C (native_loop.py): no
Python per batch, the GIL released for `report_every` batches at a time. For processes, before the workers start, every persistable tensor of
the program (parameters, optimizer accumulators, learning rate, counters) is moved into an
anonymous shared memory mapping, which forked workers inherit: all of them read and update
the same parameters in place, without locks (Hogwild!, Niu et al. 2011), and the parent
sees the trained values when the run ends — no per-worker copy of a parameter.

Each worker has its own reader, its own Executor and prepared plan, and its own kid scope of
the root scope for temporaries (PyTorch's Hogwild recipe: share only the parameters). Files
are handed out one at a time from a shared counter, so fast workers take more files. Every
`report_every` batches a worker sends the mean of its fetched values and its example count
to the parent, which shows progress and examples/s and keeps the loss curve.

If a worker fails (malformed data, a kernel error on a batch) or dies (a signal, the OOM
killer), the parent notices within a tenth of a second (worker_pool.py says how), stops the
others and raises an ExecutionError naming the worker and the file lines of the batch it
was on (its `origin`). Nothing hangs, no worker outlives the run, and the parameters in the
parent's scope stay readable and savable.

Progress goes to a tqdm bar on a terminal, else to the `fluidity` logger at INFO.
"""
import contextlib
import logging
import multiprocessing as mp
import os
import queue
import sys
import threading
import time
import traceback

import numpy as np

from ..core.scope import global_scope
from ..core.tensor import LoDTensor
from ..errors import ExecutionError, FluidityError
from ..ir.views import ProgramView, VarView
from .executor import Executor
from .parallel import blas_limit
from .shared_memory import is_shared, shared_empty  # noqa: F401 - is_shared: public here too
from .strategy import ExecutionStrategy
from .worker_pool import (PROCESS_STOP_GRACE_S, THREAD_STOP_GRACE_S, PositionBoard,
                          ProcessWorkers, StopFlag, ThreadWorkers)

logger = logging.getLogger("fluidity")
REPORT_POLL_S = 0.1  # the parent's longest wait between looks at its workers


# --- shared parameters ------------------------------------------------------------------------
def share_persistables(program, scope):
    """Move the values of `program`'s persistable tensors in `scope` into shared memory.
    Returns {name: shared ndarray}. Raises if a persistable an op reads has no value."""
    shared = {}
    for block in program.blocks:
        for v in block.vars.values():
            if not v.persistable or v.type != 7:  # LOD_TENSOR only
                continue
            var = scope.find_var(v.name)
            if var is None or var.value is None or getattr(var.value, "_array", None) is None:
                continue
            t = var.value
            if not isinstance(t, LoDTensor):
                continue
            if not is_shared(t._array):
                arr = shared_empty(t._array.shape, t._array.dtype)
                arr[...] = t._array
                t._array = arr
            shared[v.name] = (var, t._array)
    return shared


def _uninitialized_persistables(program, scope):
    read = {n for b in program.blocks for op in b.ops for n in op.input_arg_names}
    missing = []
    for b in program.blocks:
        for v in b.vars.values():
            if v.persistable and v.type == 7 and v.name in read:
                var = scope.find_var(v.name)
                if var is None or not var.is_initialized():
                    missing.append(v.name)
    return missing


# --- run observers ----------------------------------------------------------------------------
_OBSERVERS = []


def add_observer(observer):
    """Have `observer` follow every run over its `scope` (a package above the executor, e.g.
    the GEO-SGD communicator of fluidity/distributed, registers one; the executor never
    imports it). The observer's methods, each optional:

    * `run_started(threads)`: before the workers start; threads: True when they are
      threads of this process (then `batches_trained` is called), False for processes.
    * `batches_trained(n, ids)`: from a worker thread after it trained `n` batches: ids is
      {slot name: the ids those examples had} for each name in `observer.id_slots`. It
      may block the worker (a communicator bounding how far training runs ahead of it).
    * `batches_done(n)`: in the calling thread, per worker report (every `report_every`
      batches of a worker); an exception raised here stops the run and is raised by it.
    * `run_ended()`: after the run, whether it succeeded or not.

    An observer's `report_every` attribute (batches), if set, caps the run's. Adding one
    twice adds it once."""
    if observer not in _OBSERVERS:
        _OBSERVERS.append(observer)


def remove_observer(observer):
    if observer in _OBSERVERS:
        _OBSERVERS.remove(observer)


def observers_of(scope):
    """The observers following runs over `scope`."""
    return [o for o in _OBSERVERS if getattr(o, "scope", None) is scope]


def _notify(observers, method, *args):
    for o in observers:
        fn = getattr(o, method, None)
        if fn is not None:
            fn(*args)


# --- workers -----------------------------------------------------------------------------------
class _Worker:
    """One Hogwild worker (a forked child or a thread): pick files, read batches, run the
    program, report through `send`. Before each batch it writes where the batch came from
    on the position board, so its failure — or its death — names the file and lines."""

    def __init__(self, wid, program, desc, files, next_file, stop, board, scope, fetch_names,
                 report_every, shared, reader_args, read_ahead=False, lowering=None):
        self.wid, self.program, self.desc, self.files = wid, program, desc, files
        self.next_file, self.stop, self.board = next_file, stop, board
        self.scope, self.fetch_names, self.report_every = scope, fetch_names, report_every
        self.shared, self.reader_args, self.read_ahead = shared, reader_args, read_ahead
        # worker threads: the run's lowering (their steps are native calls that release the
        # GIL); worker processes: None (the interpreter)
        self.lowering = lowering
        self.plan_kind = "interpreter" if lowering is None else "native"
        self.id_watch = []   # [(observer, [(slot name, used-slot index)])], threads only

    def watch_ids(self, observers):
        """Tell each observer the batches trained here and the ids of the slots it names."""
        used = [s.name for s in self.desc.slots if s.is_used]
        for o in observers:
            if hasattr(o, "batches_trained"):
                slots = [(n, used.index(n)) for n in getattr(o, "id_slots", ()) if n in used]
                self.id_watch.append((o, slots))

    def _report_ids(self, n, chunk=None, a=0, b=0, feed=None):
        for o, slots in self.id_watch:
            if feed is not None:
                ids = {s: np.asarray(feed[s]._array).reshape(-1) for s, _ in slots}
            else:
                ids = {s: chunk.vals[u][chunk.offs[u, a]:chunk.offs[u, b]] for s, u in slots}
            o.batches_trained(n, ids)

    def _pick_file(self):
        """(index, path) of the next file nobody has taken, or None."""
        with self.next_file.get_lock():
            i = self.next_file.value
            if i >= len(self.files):
                return None
            self.next_file.value = i + 1
        return i, self.files[i]

    def _resync(self):
        """An op that replaced a shared parameter's array (instead of updating it in place)
        would detach this worker: write the new values back into the shared buffer."""
        for var, arr in self.shared.values():
            t = var.value
            if t._array is not arr:
                arr[...] = t._array
                t._array = arr

    def _read(self, reader_cls):
        """("batch", (feed, (file index, first line, last line))) for every batch of every
        file this worker picks, then ("file", (path, skipped lines)) after each file."""
        while not self.stop.is_set():
            picked = self._pick_file()
            if picked is None:
                return
            fi, path = picked
            reader = reader_cls(self.desc, [path], **self.reader_args)
            for feed in reader:
                if self.stop.is_set():  # another worker failed: stop within the file
                    return
                (_, first, last), = feed.origin
                yield "batch", (feed, (fi, first, last))
            yield "file", (path, reader.skipped_lines)

    def _executor_steps(self, exe, wscope, items):
        """("batch", (examples, fetch means)) per batch run through the executor, and the
        reader's ("file", ...) events."""
        for kind, item in items:
            if kind == "file":
                yield kind, item
                continue
            feed, where = item
            self.board.set(self.wid, *where)
            res = exe.run(self.program, feed=feed, fetch_list=self.fetch_names, scope=wscope)
            if self.shared:
                self._resync()
            if self.id_watch:
                self._report_ids(1, feed=feed)
            yield "batch", (batch_examples(feed),
                            [float(np.asarray(r).mean()) for r in res])

    def _compiled_steps(self, step, exe, wscope, reader_cls):
        """The same events with the batches of each parsed chunk run by the compiled loop
        in C (native_loop.py), `report_every` batches per call; a batch the step was not
        built for runs through the executor."""
        bs = self.desc.batch_size
        while not self.stop.is_set():
            picked = self._pick_file()
            if picked is None:
                return
            fi, path = picked
            reader = reader_cls(self.desc, [path], **self.reader_args)
            for chunk, dense_dim in reader.chunks():
                if not step.fits(chunk, dense_dim):
                    raise ExecutionError(f"{path}: its slots' types differ from those the "
                                         f"compiled step reads")
                a, bound = 0, step.bind(chunk, dense_dim)
                while a < chunk.n:
                    if self.stop.is_set():
                        return
                    last = min(chunk.n, a + bs * self.report_every)
                    self.board.set(self.wid, fi, *chunk.origin(a, last)[1:])
                    k, means, lines, status, msg = step.run(bound, a, last, bs)
                    for j in range(k):
                        yield "batch", (int(lines[j]), means[j].tolist())
                    if self.id_watch and k:
                        self._report_ids(k, chunk, a, a + int(lines[:k].sum()))
                    a += int(lines.sum())
                    if status == 0:
                        continue
                    b = min(chunk.n, a + bs)      # batch k: the one the loop stopped at
                    self.board.set(self.wid, fi, *chunk.origin(a, b)[1:])
                    if status == -1:      # inputs of other shapes: this batch interpreted
                        feed = reader.chunk_batch(chunk, a, b, dense_dim)
                        res = exe.run(self.program, feed=feed, fetch_list=self.fetch_names,
                                      scope=wscope)
                        if self.id_watch:
                            self._report_ids(1, feed=feed)
                        yield "batch", (b - a, [float(np.asarray(r).mean()) for r in res])
                        a = b
                    elif status == -2:
                        raise MemoryError("AsyncExecutor: no memory for the compiled step")
                    else:
                        raise step.error(status, msg)
            yield "file", (path, reader.skipped_lines)

    def _events(self, exe, wscope):
        from ..datafeed.multislot import MultiSlotReader
        step = None
        if self.plan_kind == "native" and not self.read_ahead:
            from .native_loop import CompiledWorkerStep
            slots = MultiSlotReader(self.desc, []).slots
            step, why = CompiledWorkerStep.make(self.lowering, self.fetch_names, slots,
                                                self.scope)
            if step is None and self.wid == 0:
                logger.info("AsyncExecutor: worker threads run batches through the executor "
                            "(no compiled worker loop: %s)", why)
        if step is not None:
            return step, self._compiled_steps(step, exe, wscope, MultiSlotReader)
        items = self._read(MultiSlotReader)
        if self.read_ahead:
            items = _prefetch(items, self.stop)
        return None, self._executor_steps(exe, wscope, items)

    def run(self, send):
        started = time.time()
        exe = Executor(strategy=ExecutionStrategy(self.plan_kind))
        wscope = self.scope.new_scope()
        nf = len(self.fetch_names)
        sums, batches, examples = np.zeros(nf), 0, 0
        period = [0, 0, np.zeros(nf)]
        step, events = self._events(exe, wscope)
        try:
            for kind, item in events:
                if kind == "file":
                    path, skipped = item
                    if skipped:
                        send(("skipped", self.wid, path, skipped))
                    send(("file", self.wid, path))
                    continue
                n, vals = item
                vals = np.asarray(vals, np.float64)
                if nf:
                    sums += vals * n
                    period[2] += vals * n
                batches += 1
                examples += n
                period[0] += 1
                period[1] += n
                if period[0] >= self.report_every:
                    send(("report", self.wid, period[0], period[1],
                          (period[2] / max(period[1], 1)).tolist()))
                    period = [0, 0, np.zeros(nf)]
        finally:
            if step is not None:
                step.close()
        if period[0]:
            send(("report", self.wid, period[0], period[1],
                  (period[2] / max(period[1], 1)).tolist()))
        send(("done", self.wid, batches, examples, sums.tolist(),
              (os.getpid(), started, time.time())))

    def __call__(self, send):
        """Run, reporting any exception (a kernel's, a reader's) to the parent, with the
        lines of the batch it failed on unless it names its own place (a bad data line).
        The exit code: 0 or 1."""
        try:
            self.run(send)
            return 0
        except BaseException as e:  # report everything, including kernel errors
            from ..datafeed.errors import DataError
            msg = str(e) if isinstance(e, FluidityError) else \
                f"{type(e).__name__}: {e}\n{traceback.format_exc()}"
            where = None if isinstance(e, DataError) else self.board.where(self.wid)
            try:
                send(("error", self.wid, type(e).__name__, msg, where))
            except Exception:  # noqa: BLE001 - the parent sees the exit instead
                pass
            return 1


class _Failure:
    __slots__ = ("exc",)

    def __init__(self, exc):
        self.exc = exc


def _prefetch(items, stop, depth=4):
    """Iterate `items` produced by a background thread, up to `depth` ahead: the reader
    parses the next batches (its C parser releases the GIL) while the executor runs this
    one. An exception in the reader is re-raised here, in order."""
    q = queue.Queue(depth)
    end = object()

    def produce():
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        q.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(end)
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            q.put(_Failure(e))

    threading.Thread(target=produce, daemon=True, name="fluidity-reader").start()
    while True:
        try:
            item = q.get(timeout=0.1)
        except queue.Empty:
            if stop.is_set():  # the producer gives up on a stop without a last item
                return
            continue
        if item is end:
            return
        if isinstance(item, _Failure):
            raise item.exc
        if stop.is_set():
            return
        yield item


def _build_native_once():
    """Build (or load) the C parser and kernels in the parent before forking: otherwise, on a
    fresh cache, every worker would run the compiler at once (dozens, on a big server)."""
    from ..datafeed import multislot
    from ..ops import sparse_kernels
    multislot.build()       # warns here, once, if it falls back to Python
    sparse_kernels.build()  # likewise for numpy


def _one_blas_thread():
    """One BLAS thread per worker process (workers x BLAS threads <= cores, or
    oversubscription eats the gain)."""
    blas_limit(1)


def batch_examples(feed):
    """The number of examples in a fed batch: sequences when it has LoD, else rows."""
    for t in feed.values():
        if t._lod:
            return len(t._lod[0]) - 1
    t = next(iter(feed.values()))
    return t._array.shape[0]


class _Counter:
    """The next file's index for worker threads (the face of multiprocessing.Value)."""

    def __init__(self):
        self.value = 0
        self._lock = threading.Lock()

    def get_lock(self):
        return self._lock


def lower_step(program, fetch_names):
    """Block 0 of the training program lowered for native code (codegen.lower.Lowering),
    once per run: the choice of worker mode, the library build and the workers' compiled
    loops all read this one lowering."""
    from ..codegen.lower import Lowering
    return Lowering(program, 0, keep=fetch_names)


def native_obstacles(lowering):
    """The ops of block 0 that would run as Python steps if the program ran compiled
    ([(index, type, why)]; empty when each training step is native calls only)."""
    return [(i, t, why) for i, t, where, why in lowering.explain() if where == "python"]


def _prebuild(lowering):
    """Build the compiled step's library once, before the workers (each worker's executor
    would otherwise find an empty cache at the same moment and compile it too)."""
    from ..codegen import build
    if lowering.segments:
        build.load(build.compile_cached(lowering.source))


# --- the executor -------------------------------------------------------------------------
class AsyncRunResult(list):
    """The fetched values averaged over the whole run (a list, one per fetch target), with
    the run's record: `history` (examples seen, mean fetch values) per report, `examples`,
    `seconds`, `examples_per_sec`, `skipped_lines`, and `workers` (per worker: batches,
    examples, pid, start and end wall-clock times)."""


class AsyncExecutor:
    def __init__(self, place=None, run_mode=""):
        self.place = place

    def run(self, program, data_feed, filelist, thread_num, fetch=None, mode="", debug=False,
            scope=None, report_every=None, progress=None, skip_bad_lines=False,
            callback=None, fetch_info=None, read_ahead=False, workers="auto"):
        """Train `program` on `filelist` with `thread_num` Hogwild workers.

        fetch: variables (or names) to report, labelled by `fetch_info` (default: their
        names); their means over each reporting period are shown with examples/s — on a
        progress bar when stderr is a terminal (progress=None), as a line every few seconds
        otherwise, and every period with debug=True — and their means over the whole run
        are returned. callback(examples_seen, {name: mean}) is called per report.

        read_ahead: each worker parses its next batches in a thread while its executor runs.
        Off by default: the hand-offs and the two threads' contention for the GIL cost more
        than the overlap gains once a step takes a few ms or less (measured, 2 cores: CTR-DNN
        10-20% and a bag-of-words classifier 15-30% fewer examples/s with it, for 1 worker
        and for 2); it can pay when parsing is heavy next to the step and cores are idle.

        workers: "threads" runs the workers as threads of this process, each training step
        compiled to native code (`with_native_code()`; the calls release the GIL) over the
        parameters in place; "processes" forks worker processes over parameters moved to
        shared memory, running the program as it is; "auto" (the default) takes threads
        when every op of the program compiles and processes otherwise, and logs which and
        why."""
        desc, files, thread_num, fetch_names = _checked_run_args(program, data_feed, filelist,
                                                                 thread_num, fetch, workers)
        scope = scope if scope is not None else global_scope()
        missing = _uninitialized_persistables(program, scope)
        if missing:
            raise FluidityError(f"persistable variables {missing[:5]} have no value: run the "
                                f"startup program first")
        lowering = lower_step(program, fetch_names) if workers != "processes" else None
        threads = self._choose_workers(workers, lowering)
        self.last_mode = "threads" if threads else "processes"
        observers = observers_of(scope)
        wanted = [o.report_every for o in observers if getattr(o, "report_every", None)]
        # an observer may need to hear of batches at least this often
        report_every = min([report_every or max(1, 20 // thread_num)] + wanted)
        n_workers = min(thread_num, len(files))
        pool, stop, board = self._workers(
            program, desc, files, scope, fetch_names, n_workers, threads, lowering, observers,
            {"report_every": report_every, "reader_args": {"skip_bad_lines": skip_bad_lines},
             "read_ahead": read_ahead})
        bar = _progress_bar(progress, fetch_info, fetch_names, debug)
        _build_native_once()
        if threads:
            _prebuild(lowering)
        t0 = time.perf_counter()
        try:
            _notify(observers, "run_started", threads)
            with blas_limit(1) if threads else contextlib.nullcontext():
                result = self._collect(pool, n_workers, stop, board, bar, fetch_names, t0,
                                       callback, observers)
        finally:
            bar.close()
            _notify(observers, "run_ended")
        result.mode = self.last_mode
        return result

    @staticmethod
    def _workers(program, desc, files, scope, fetch_names, n_workers, threads, lowering,
                 observers, options):
        """(pool, stop flag, position board) of the run's workers: threads over the
        parameters in place, or processes over parameters moved to shared memory."""
        if threads:
            next_file, shared = _Counter(), {}
        else:
            shared = share_persistables(program, scope)
            next_file = mp.get_context("fork").Value("l", 0)
        stop = StopFlag(shared=not threads)
        board = PositionBoard(n_workers, files, shared=not threads)
        runs = [_Worker(wid, program, desc, files, next_file, stop, board, scope, fetch_names,
                        options["report_every"], shared, options["reader_args"],
                        options["read_ahead"], lowering=lowering if threads else None)
                for wid in range(n_workers)]
        if threads:
            for w in runs:
                w.watch_ids(observers)
        pool = ThreadWorkers(runs) if threads else ProcessWorkers(runs, _one_blas_thread)
        return pool, stop, board

    @staticmethod
    def _choose_workers(workers, lowering):
        """True for worker threads (see run()); logs the choice and why."""
        if workers == "processes":
            return False
        obstacles = native_obstacles(lowering)
        if workers == "threads":
            if obstacles:
                logger.info("AsyncExecutor: worker threads; %d op(s) run as Python steps "
                            "under the GIL (%s)", len(obstacles),
                            ", ".join(sorted({t for _, t, _ in obstacles})))
            return True
        if obstacles:
            i, t, why = obstacles[0]
            logger.info("AsyncExecutor: worker processes: %d op(s) do not compile (op #%d "
                        "'%s': %s)", len(obstacles), i, t, why)
            return False
        logger.info("AsyncExecutor: worker threads running the compiled training step")
        return True

    def _collect(self, pool, n_workers, stop, board, bar, fetch_names, t0, callback,
                 observers=()):
        """Start the workers and read their messages until all are done or one fails; a failure (a
        reported error, or an exit without "done": a signal, the OOM killer) is noticed
        within REPORT_POLL_S, stops the others and is raised with the worker's identity
        and the file lines of its last batch. The workers are gone when this returns."""
        done, errors, workers_info = set(), [], {}
        history, skipped = [], 0
        total_ex, sums = 0, np.zeros(len(fetch_names))
        seen_ex = 0
        try:
            pool.start()   # here: workers started before a failure to start the rest stop too
            while len(done) < n_workers and not errors:
                msgs, ended = pool.wait(REPORT_POLL_S)
                for msg in msgs:
                    kind, wid = msg[0], msg[1]
                    if kind == "report":
                        n_ex, means = msg[3], msg[4]
                        seen_ex += n_ex
                        history.append((seen_ex, means))
                        bar.update(n_ex, means, time.perf_counter() - t0, seen_ex)
                        if callback is not None:
                            callback(seen_ex, dict(zip(fetch_names, means)))
                        _notify(observers, "batches_done", msg[2])
                    elif kind == "skipped":
                        skipped += msg[3]
                    elif kind == "done":
                        done.add(wid)
                        total_ex += msg[3]
                        sums += np.asarray(msg[4]) if fetch_names else 0
                        workers_info[wid] = {"batches": msg[2], "examples": msg[3],
                                             "pid": msg[5][0], "start": msg[5][1],
                                             "end": msg[5][2]}
                    elif kind == "error":
                        errors.append(_WorkerFailure(pool.describe(wid), msg[2], msg[3],
                                                     msg[4]))
                        done.add(wid)
                for wid in ended:   # exited without a word: killed, or died otherwise
                    if wid not in done:
                        done.add(wid)
                        errors.append(_WorkerFailure(pool.describe(wid), "WorkerDied",
                                                     pool.end_reason(wid), board.where(wid)))
        except BaseException:
            stop.set()
            pool.shutdown(PROCESS_STOP_GRACE_S if pool.kind == "processes" else
                          THREAD_STOP_GRACE_S)
            raise
        stop.set()
        # after a failure worker processes get a moment, then are terminated; after "done"
        # from all, they are only exiting
        pool.shutdown(PROCESS_STOP_GRACE_S if errors and pool.kind == "processes" else
                      THREAD_STOP_GRACE_S)
        if errors:
            raise errors[0].error()
        return _run_result(sums, total_ex, history, time.perf_counter() - t0, skipped,
                           workers_info, fetch_names)


def _checked_run_args(program, data_feed, filelist, thread_num, fetch, workers):
    """AsyncExecutor.run's arguments checked: (DataFeedDesc, files, thread_num, fetch
    names); FluidityError naming what is wrong."""
    if workers not in ("auto", "threads", "processes"):
        raise FluidityError(f"workers must be 'auto', 'threads' or 'processes', got "
                            f"{workers!r}")
    if not isinstance(program, ProgramView):
        raise FluidityError(f"AsyncExecutor.run needs a Program, got "
                            f"{type(program).__name__}")
    from ..datafeed.data_feed_desc import DataFeedDesc
    desc = data_feed if isinstance(data_feed, DataFeedDesc) else DataFeedDesc(data_feed)
    files = [os.fspath(f) for f in ([filelist] if isinstance(filelist, (str, os.PathLike))
                                    else filelist)]
    if not files:
        raise FluidityError("AsyncExecutor.run: the file list is empty")
    for f in files:
        if not os.path.isfile(f):
            raise FluidityError(f"AsyncExecutor.run: no such data file: {f}")
    thread_num = int(thread_num)
    if thread_num < 1:
        raise FluidityError(f"thread_num must be >= 1, got {thread_num}")
    fetch = [] if fetch is None else (fetch if isinstance(fetch, (list, tuple)) else [fetch])
    fetch_names = [f.name if isinstance(f, VarView) else f for f in fetch]
    block = program.global_block()
    for n in fetch_names:
        if block.find_var_recursive(n) is None:
            raise FluidityError(f"cannot fetch '{n}': the program has no such variable")
    used = [s.name for s in desc.slots if s.is_used]
    for n in used:
        if not block.has_var(n):
            raise FluidityError(f"data feed slot '{n}' has no variable of that name in the "
                                f"program (its data vars: "
                                f"{[v.name for v in block.vars.values() if v.need_check_feed]})")
    return desc, files, thread_num, fetch_names


def _progress_bar(progress, fetch_info, fetch_names, debug):
    """The run's _Progress: fetch targets labelled by `fetch_info` (default: their names)."""
    labels = list(fetch_info) if fetch_info else fetch_names
    if len(labels) != len(fetch_names):
        raise FluidityError(f"fetch_info has {len(labels)} labels for {len(fetch_names)} "
                            f"fetch targets")
    return _Progress(progress if progress is not None else "auto", labels, debug)


def _run_result(sums, total_ex, history, seconds, skipped, workers_info, fetch_names):
    """The AsyncRunResult of a finished run."""
    res = AsyncRunResult((sums / max(total_ex, 1)).tolist())
    res.history, res.examples, res.seconds = history, total_ex, seconds
    res.examples_per_sec = total_ex / seconds if seconds > 0 else 0.0
    res.skipped_lines = skipped
    res.workers = [workers_info[w] for w in sorted(workers_info)]
    res.fetch_names = fetch_names
    return res


class _WorkerFailure:
    """What the parent knows of a failed worker, and the ExecutionError it raises."""

    def __init__(self, who, etype, text, where):
        self.who, self.etype, self.text, self.where = who, etype, text, where

    def error(self):
        if self.etype == "WorkerDied":
            on = f" while on {self.where}" if self.where else " before its first batch"
            msg = f"AsyncExecutor {self.who} {self.text}{on}"
        else:
            on = f" on the batch from {self.where}" if self.where else ""
            msg = f"AsyncExecutor {self.who} failed{on}: {self.etype}: {self.text}"
        err = ExecutionError(msg)
        err.worker, err.origin = self.who, self.where
        return err


class _Progress:
    """Progress of a run: a tqdm bar (examples, examples/s, latest fetch means) when stderr
    is a terminal, else a line to the `fluidity` logger (INFO) every `every` seconds (logs
    stay readable); with debug, a line per report. show: True, False or "auto"."""

    def __init__(self, show, names, debug, every=5.0):
        self.names, self.debug, self.bar = names, debug, None
        self.lines = False
        if show == "auto":
            show = sys.stderr.isatty()
            self.lines = not show
        if show:
            from tqdm import tqdm
            self.bar = tqdm(unit="ex", unit_scale=True, dynamic_ncols=True, smoothing=0.1)
        self.every, self.last = every, time.perf_counter()

    def update(self, n, means, elapsed, seen):
        desc = " ".join(f"{k}={v:.4f}" for k, v in zip(self.names, means))
        if self.bar is not None:
            self.bar.update(n)
            self.bar.set_postfix_str(desc, refresh=False)
        now = time.perf_counter()
        if self.debug or (self.lines and now - self.last >= self.every):
            self.last = now
            logger.info("AsyncExecutor: %s examples, %s ex/s %s", f"{seen:,}",
                        f"{seen / max(elapsed, 1e-9):,.0f}", desc)

    def close(self):
        if self.bar is not None:
            self.bar.close()
