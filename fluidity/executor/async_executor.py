"""AsyncExecutor: Hogwild training from MultiSlot files on all cores.

`run(program, data_feed, filelist, thread_num, fetch)` starts `thread_num` workers: *threads*
of this process, each running the training step as native calls that release the GIL, over
the parameters in the scope, in place (no copies, nothing to share); or worker *processes*
(fork), so that Python per-op dispatch runs at once too. `workers=` picks either; "auto"
takes the one that is faster for the program on this machine (worker_mode.py: threads when
the compiled worker loop applies, else measured once and cached) and logs why. A worker
thread whose step is one compiled segment over the feed's slots and the parameters hands
whole parsed chunks to a loop in C (native_loop.py) that keeps its report periods itself:
no Python, no GIL, no lock and no shared mutable state per batch; Python runs per chunk
(or per 0.1 s of work) to read and parse the next chunk and pass on the finished reports.
For processes, before the workers start, every persistable tensor of
the program (parameters, optimizer accumulators, learning rate, counters) is moved into an
anonymous shared memory mapping, which forked workers inherit: all of them read and update
the same parameters in place, without locks (Hogwild!, Niu et al. 2011), and the parent
sees the trained values when the run ends — no per-worker copy of a parameter.

Each worker has its own reader, its own Executor and prepared plan, and its own kid scope of
the root scope for temporaries (PyTorch's Hogwild recipe: share only the parameters). Files
are handed out one at a time from a shared counter, so fast workers take more files; a
worker thread that finds none left helps finish the chunks the others are on (their batches
are claimed from a per-chunk cursor), so a run does not end with one worker alone. Every
`report_every` batches a worker closes a report (the mean of its fetched values and its
example count) and hands the parent its finished reports, several at a time from the
compiled loop; the parent shows progress and examples/s and keeps the loss curve.

If a worker fails (malformed data, a kernel error on a batch) or dies (a signal, the OOM
killer), the parent notices within a tenth of a second (worker_pool.py says how), stops the
others and raises an ExecutionError naming the worker and the file lines of the batch it
was on (its `origin`). Nothing hangs, no worker outlives the run, and the parameters in the
parent's scope stay readable and savable.

What the user sees while it runs (Fluid's print_period lines on stdout, a bar with an ETA
on a terminal, the logger, TensorBoard scalars) is progress.py's: the run hands each
report to its Reporter.
"""
import contextlib
import hashlib
import itertools
import logging
import multiprocessing as mp
import os
import queue
import sys
import threading
import time
import traceback
import weakref

import numpy as np

from ..core.scope import global_scope
from ..core.tensor import LoDTensor
from ..errors import ExecutionError, FluidityError
from ..ir.views import ProgramView, VarView
from .executor import Executor
from .parallel import blas_limit
from .shared_memory import (CACHE_LINE, aligned_empty, is_shared,  # noqa: F401 - is_shared: public
                            shared_empty)
from .strategy import ExecutionStrategy
from .worker_pool import (PROCESS_STOP_GRACE_S, THREAD_STOP_GRACE_S, PositionBoard,
                          ProcessWorkers, StopFlag, ThreadWorkers)

logger = logging.getLogger("fluidity")
REPORT_POLL_S = 0.1  # the parent's longest wait between looks at its workers
HELP_POLL_S = 0.002  # a worker out of files, waiting for another's next chunk to help with
# A compiled-loop worker parses the first FIRST_BATCHES batches of its first file apart, and
# starts training on them while the rest waits: parsing a whole ~1 MB file first held every
# worker ~8 ms at each run's start (the real-text word2vec's one-epoch run is ~0.5 s).
FIRST_BATCHES = 8
DEFAULT_PRINT_PERIOD = 100   # batches between stdout lines when fetch_info asks for them


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


ALIGN_MAX_BYTES = 1 << 30   # larger tables are not copied to realign them (a transient 2x)


def align_persistables(program, scope):
    """Move each of `program`'s persistable tensors in `scope` whose bytes do not start on a
    cache line (numpy's allocations start 16 bytes into one) to a copy that does, once: the
    Hogwild threads write rows of the shared tables in place, and a misaligned table puts
    each row of 32 floats on three cache lines, two of them shared with the neighbouring
    rows; with Zipf ids the hottest rows are neighbours, so two threads writing different
    hot rows would invalidate each other's lines (false sharing on top of Hogwild's true
    sharing). Tensors over ALIGN_MAX_BYTES stay where they are."""
    for block in program.blocks:
        for v in block.vars.values():
            if not v.persistable or v.type != 7:  # LOD_TENSOR only
                continue
            var = scope.find_var(v.name)
            t = None if var is None else var.value
            a = getattr(t, "_array", None)
            if not isinstance(t, LoDTensor) or not isinstance(a, np.ndarray) or \
                    a.ctypes.data % CACHE_LINE == 0 or a.nbytes > ALIGN_MAX_BYTES or \
                    not a.flags.c_contiguous:
                continue
            arr = aligned_empty(a.shape, a.dtype)
            arr[...] = a
            t._array = arr


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
                 report_every, shared, reader_args, read_ahead=False, lowering=None,
                 shelf=None):
        self.wid, self.program, self.desc, self.files = wid, program, desc, files
        # worker threads: the chunks each is on, for a worker out of files to help finish
        self.shelf = shelf if shelf is not None else _ChunkShelf(0)
        self.helped = 0     # other workers' chunks this one helped finish
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
        i = self.next_file.take()
        return None if i >= len(self.files) else (i, self.files[i])

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
        """The compiled loop in C (native_loop.py) over each parsed chunk: ("step", None)
        after each of its calls (its finished reports wait in the step) and the reader's
        ("file", ...) events. Python runs per call (a chunk, BUDGET_S of work, or one report
        when an observer wants each report's ids), never per batch; a batch the step was
        not built for runs through the executor. When no file is left, the worker helps
        finish the chunks other workers are on (their batches are claimed from each chunk's
        cursor), so a run does not end with one worker training its last file alone."""
        from .native_loop import ChunkCursor
        row = self.board.row(self.wid)
        step.configure(stop=self.stop.a, position=row, report_every=self.report_every,
                       return_on_report=bool(self.id_watch))
        reader = None
        first_lines = FIRST_BATCHES * self.desc.batch_size
        self.shelf.reading(self.wid, True)
        try:
            while not self.stop.is_set():
                picked = self._pick_file()
                if picked is None:
                    break
                fi, path = picked
                row[0], row[1], row[2] = fi, -1, -1
                reader = reader_cls(self.desc, [path], **self.reader_args)
                for chunk, dense_dim in reader.chunks(first_lines):
                    first_lines = 0
                    if not step.fits(chunk, dense_dim):
                        raise ExecutionError(f"{path}: its slots' types differ from those the "
                                             f"compiled step reads")
                    shared = (fi, chunk, dense_dim, ChunkCursor())
                    if not self.id_watch:   # (an observer's ids are per worker: no sharing)
                        self.shelf.put(self.wid, shared)    # others may help once out of files
                    yield from self._chunk_steps(step, exe, wscope, reader, shared)
                    self.shelf.put(self.wid, None)
                yield "file", (path, reader.skipped_lines)
        finally:     # (also when it fails: nobody waits for its next chunk)
            self.shelf.put(self.wid, None)
            self.shelf.reading(self.wid, False)
        helper = reader or reader_cls(self.desc, [], **self.reader_args)
        while not self.stop.is_set() and not self.id_watch:
            shared = self.shelf.most_left(self.desc.batch_size)
            if shared is None:
                if not self.shelf.anyone_reading():
                    return
                time.sleep(HELP_POLL_S)     # another worker parses its file's next chunk
                continue
            row[0], row[1], row[2] = shared[0], -1, -1
            self.helped += 1
            yield from self._chunk_steps(step, exe, wscope, helper, shared)

    def _chunk_steps(self, step, exe, wscope, reader, shared):
        """The batches of one parsed chunk this worker claims from its cursor."""
        _, chunk, dense_dim, cursor = shared
        bs = self.desc.batch_size
        step.bind(chunk, dense_dim, bs, cursor)
        while not self.stop.is_set():
            start = cursor.value()
            a, status, msg = step.run(chunk.n)
            if self.id_watch and a > start:
                self._report_ids(-(-(min(a, chunk.n) - start) // bs), chunk, start,
                                 min(a, chunk.n))
            yield "step", None
            if status == 0:
                if a >= chunk.n:
                    return
                continue
            b = min(chunk.n, a + bs)      # the batch the loop stopped at (claimed by it)
            if status == -1:      # inputs of other shapes: this batch interpreted
                feed = reader.chunk_batch(chunk, a, b, dense_dim)
                res = exe.run(self.program, feed=feed, fetch_list=self.fetch_names,
                              scope=wscope)
                if self.id_watch:
                    self._report_ids(1, feed=feed)
                step.add_batch(b - a, [float(np.asarray(r).mean()) for r in res])
                yield "step", None
            elif status == -2:
                raise MemoryError("AsyncExecutor: no memory for the compiled step")
            else:
                raise step.error(status, msg)

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
        step, events = self._events(exe, wscope)
        # the compiled loop keeps its reports and totals in C; the executor's path here
        tally = step if step is not None else _Tally(len(self.fetch_names), self.report_every)
        try:
            for kind, item in events:
                if kind == "file":
                    path, skipped = item
                    if skipped:
                        send(("skipped", self.wid, str(path), skipped))
                    send(("file", self.wid, str(path)))
                    continue
                if kind == "batch":
                    tally.add_batch(*item)
                reports = tally.take_reports()
                if reports:
                    send(("reports", self.wid, reports))
            reports = tally.take_reports(flush=True)
            if reports:
                send(("reports", self.wid, reports))
            batches, examples, sums = tally.totals()
            busy = {"busy": list(step.busy), "busy_s": step.busy_s,
                    "cpu_s": step.state.cpu_ns * 1e-9, "helped": self.helped,
                    "native_calls": int(step.state.calls)} if step is not None else {}
        finally:
            if step is not None:
                step.close()
        send(("done", self.wid, batches, examples, sums,
              (os.getpid(), started, time.time()), busy))

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


class _Tally:
    """A worker's report periods and totals for batches run through the executor (the
    compiled loop keeps the same in C, native_loop.c): a report per `report_every`
    batches of the examples-weighted means of the fetch targets."""

    def __init__(self, n_fetch, report_every):
        self.report_every = report_every
        self.sums, self.batches, self.examples = np.zeros(n_fetch), 0, 0
        self.period = [0, 0, np.zeros(n_fetch)]
        self.done = []

    def add_batch(self, n, vals):
        vals = np.asarray(vals, np.float64)
        p = self.period
        if len(vals):
            self.sums += vals * n
            p[2] += vals * n
        self.batches += 1
        self.examples += n
        p[0] += 1
        p[1] += n
        if p[0] >= self.report_every:
            self._close()

    def _close(self):
        p = self.period
        self.done.append((p[0], p[1], (p[2] / max(p[1], 1)).tolist()))
        self.period = [0, 0, np.zeros(len(self.sums))]

    def take_reports(self, flush=False):
        if flush and self.period[0]:
            self._close()
        out, self.done = self.done, []
        return out

    def totals(self):
        return self.batches, self.examples, self.sums.tolist()


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


class _ChunkShelf:
    """Per worker thread, the parsed chunk it trains on now, (file index, chunk, dense dims,
    ChunkCursor) or None: written by its worker once per chunk (a list store, atomic under
    the GIL), read by a worker that has no file left, which then claims the chunk's
    remaining batches from its cursor alongside its owner. With n = 0 (worker processes,
    which share no Python objects) nothing is kept and nobody helps."""

    def __init__(self, n):
        self._on = [None] * n
        self._reading = [False] * n     # per worker: it may still publish chunks

    def put(self, wid, item):
        if self._on:
            self._on[wid] = item

    def reading(self, wid, flag):
        if self._on:
            self._reading[wid] = flag

    def anyone_reading(self):
        """Whether a worker may still put a chunk here (it has a file it is reading)."""
        return any(self._reading)

    def most_left(self, batch):
        """The chunk with the most lines unclaimed, if at least two batches' worth."""
        best, left = None, 2 * batch - 1
        for item in list(self._on):
            if item is not None:
                n = item[1].n - item[3].value()
                if n > left:
                    best, left = item, n
        return best


class _ThreadFileCounter:
    """The next file's index for worker threads: one `next()` of an itertools.count, atomic
    under the GIL, taken once per file (no lock)."""

    def __init__(self):
        self._it = itertools.count()

    def take(self):
        return next(self._it)


class _ProcessFileCounter:
    """The next file's index for worker processes: a shared int64 behind its lock, taken
    once per file."""

    def __init__(self):
        self._v = mp.get_context("fork").Value("l", 0)

    def take(self):
        with self._v.get_lock():
            i = self._v.value
            self._v.value = i + 1
        return i


def _checked_run_args(program, data_feed, filelist, thread_num, fetch, scope, workers):
    """AsyncExecutor.run's arguments checked, as (data feed desc, files, thread_num, fetch
    names, scope): each problem a FluidityError saying what to change."""
    if not isinstance(program, ProgramView):
        raise FluidityError(f"AsyncExecutor.run needs a Program, got "
                            f"{type(program).__name__}")
    from ..datafeed.data_feed_desc import DataFeedDesc
    desc = data_feed if isinstance(data_feed, DataFeedDesc) else DataFeedDesc(data_feed)
    from ..datafeed.sources import is_source
    files = [f if is_source(f) else os.fspath(f) for f in
             ([filelist] if isinstance(filelist, (str, os.PathLike)) or is_source(filelist)
              else filelist)]
    if not files:
        raise FluidityError("AsyncExecutor.run: the file list is empty")
    for f in files:     # a path, or a source of MultiSlot text (datafeed/sources.py)
        if not is_source(f) and not os.path.isfile(f):
            raise FluidityError(f"AsyncExecutor.run: no such data file: {f}")
    thread_num = int(thread_num)
    if thread_num < 1:
        raise FluidityError(f"thread_num must be >= 1, got {thread_num}")
    fetch = [] if fetch is None else (fetch if isinstance(fetch, (list, tuple)) else [fetch])
    fetch_names = [f.name if isinstance(f, VarView) else f for f in fetch]
    _check_names(program.global_block(), desc, fetch_names)
    scope = scope if scope is not None else global_scope()
    missing = _uninitialized_persistables(program, scope)
    if missing:
        raise FluidityError(f"persistable variables {missing[:5]} have no value: run the "
                            f"startup program first")
    if workers not in ("auto", "threads", "processes"):
        raise FluidityError(f"workers must be 'auto', 'threads' or 'processes', got "
                            f"{workers!r}")
    return desc, files, thread_num, fetch_names, scope


def _check_names(block, desc, fetch_names):
    """Every fetch target and every used slot of the data feed names a program variable."""
    for n in fetch_names:
        if block.find_var_recursive(n) is None:
            raise FluidityError(f"cannot fetch '{n}': the program has no such variable")
    for n in (s.name for s in desc.slots if s.is_used):
        if not block.has_var(n):
            raise FluidityError(f"data feed slot '{n}' has no variable of that name in the "
                                f"program (its data vars: "
                                f"{[v.name for v in block.vars.values() if v.need_check_feed]})")


def _report_every(report_every, thread_num, print_period, observers):
    """Batches per worker report: as asked (default 20 // thread_num), at most the print
    period, and as often as the most demanding observer needs."""
    report_every = report_every or max(1, 20 // thread_num)
    if isinstance(print_period, int) and print_period > 0:
        report_every = min(report_every, max(1, int(print_period)))
    wanted = [o.report_every for o in observers if getattr(o, "report_every", None)]
    if wanted:   # an observer that needs to hear of batches at least this often
        report_every = min([report_every] + wanted)
    return report_every


def _run_reporter(files, fetch_names, fetch_info, print_period, debug, progress,
                  tensorboard_dir):
    """The run's reporter (progress.py): fetch means labelled by `fetch_info` (default
    their names), printed every `print_period` batches (Fluid's default: every report with
    debug, every 100 batches with labels, else never)."""
    labels = list(fetch_info) if fetch_info else fetch_names
    if len(labels) != len(fetch_names):
        raise FluidityError(f"fetch_info has {len(labels)} labels for {len(fetch_names)} "
                            f"fetch targets")
    if not print_period:
        print_period = "report" if debug else (DEFAULT_PRINT_PERIOD if fetch_info else None)
    return _reporter(files, labels, print_period, progress, tensorboard_dir)


def _workers(program, desc, files, scope, fetch_names, n_workers, lowering, observers,
             options):
    """(pool, stop flag, position board) of the run's workers: threads (`lowering` given:
    their steps run native code) over the parameters in place, or processes over parameters
    moved to shared memory. options: (report_every, reader_args, read_ahead)."""
    threads = lowering is not None
    report_every, reader_args, read_ahead = options
    if threads:
        align_persistables(program, scope)
        next_file, shared = _ThreadFileCounter(), {}
    else:
        shared = share_persistables(program, scope)
        next_file = _ProcessFileCounter()
    stop = StopFlag(shared=not threads)
    board = PositionBoard(n_workers, files, shared=not threads)
    shelf = _ChunkShelf(n_workers if threads else 0)
    runs = [_Worker(wid, program, desc, files, next_file, stop, board, scope, fetch_names,
                    report_every, shared, reader_args, read_ahead, lowering=lowering,
                    shelf=shelf)
            for wid in range(n_workers)]
    if threads:
        for w in runs:
            w.watch_ids(observers)
    pool = ThreadWorkers(runs) if threads else ProcessWorkers(runs, _one_blas_thread)
    return pool, stop, board


_LOWERED = weakref.WeakKeyDictionary()   # program -> (key, Lowering): its latest lowering


def lower_step(program, fetch_names):
    """Block 0 of the training program lowered for native code (codegen.lower.Lowering),
    once per run: the choice of worker mode, the library build and the workers' compiled
    loops all read this one lowering. Kept per program while its desc (bytes) and fetch
    targets stay the same: a training loop calls run() once per epoch or per file list, and
    lowering the same program again cost tens of ms of each run's start."""
    from ..codegen.lower import Lowering
    key = (tuple(fetch_names),
           hashlib.sha256(program.desc.SerializeToString(deterministic=True)).digest())
    try:
        have = _LOWERED.get(program)
    except TypeError:       # a program that cannot be weakly referenced: no caching
        return Lowering(program, 0, keep=fetch_names)
    if have is not None and have[0] == key:
        return have[1]
    low = Lowering(program, 0, keep=fetch_names)
    _LOWERED[program] = (key, low)
    return low


def native_obstacles(lowering):
    """The ops of block 0 that would run as Python steps if the program ran compiled
    ([(index, type, why)]; empty when each training step is native calls only)."""
    return [(i, t, why) for i, t, where, why in lowering.explain() if where == "python"]


def _compiled_loop_obstacle(lowering, obstacles, fetch_names, desc, scope, read_ahead):
    """None when worker threads would run the compiled loop in C (native_loop.py), else
    why not."""
    if obstacles:
        i, t, why = obstacles[0]
        return f"{len(obstacles)} op(s) do not compile (op #{i} '{t}': {why})"
    if read_ahead:
        return "read_ahead runs each batch through the executor"
    from ..datafeed.multislot import MultiSlotReader
    from .native_loop import CompiledWorkerStep
    step, why = CompiledWorkerStep.make(lowering, fetch_names,
                                        MultiSlotReader(desc, []).slots, scope)
    if step is not None:
        step.close()
    return why


def _prebuild(lowering):
    """Build the compiled step's library once, before the workers (each worker's executor
    would otherwise find an empty cache at the same moment and compile it too); None: the
    workers run no compiled step."""
    from .native_loop import step_library
    if lowering is not None and lowering.segments:
        step_library(lowering)


# --- the executor -------------------------------------------------------------------------
class AsyncRunResult(list):
    """The fetched values averaged over the whole run (a list, one per fetch target), with
    the run's record: `history` (examples seen, mean fetch values) per report, `examples`,
    `seconds`, `examples_per_sec`, `skipped_lines`, `mode` ("threads" or "processes"),
    `mode_reason`, `mode_rates` (what "auto" measured, {} if nothing), and `workers` (per
    worker: batches, examples, pid, start and end wall-clock times; for a thread running
    the compiled loop also `busy`, its calls' (start, end) in time.monotonic() seconds,
    `busy_s`, `cpu_s` (the thread's CPU time in those calls), `native_calls` and `helped`,
    the chunks of other workers it helped finish once it had no file left)."""


class AsyncExecutor:
    def __init__(self, place=None, run_mode=""):
        self.place = place

    def run(self, program, data_feed, filelist, thread_num, fetch=None, mode="", debug=False,
            scope=None, report_every=None, progress=None, skip_bad_lines=False,
            callback=None, fetch_info=None, read_ahead=False, workers="auto",
            print_period=None, tensorboard_dir=None):
        """Train `program` on `filelist` with `thread_num` Hogwild workers.

        fetch: variables (or names) to report, labelled by `fetch_info` (default: their
        names); their means over the whole run are returned. While it runs (progress.py):
        every `print_period` batches (default: every report with debug=True, every 100
        batches when fetch_info is given, else never) a line of their means goes to
        stdout, as Fluid prints it; a bar with the examples, examples/s and the ETA goes to stderr when it
        is a terminal (progress=None; True or False force it); the logger gets the same
        figures; `tensorboard_dir` gets them as TensorBoard scalars (executor/scalars.py).
        callback(examples_seen, {name: mean}) is called per report.

        read_ahead: each worker parses its next batches in a thread while its executor runs.
        Off by default: the hand-offs and the two threads' contention for the GIL cost more
        than the overlap gains once a step takes a few ms or less (measured, 2 cores: CTR-DNN
        10-20% and a bag-of-words classifier 15-30% fewer examples/s with it, for 1 worker
        and for 2); it can pay when parsing is heavy next to the step and cores are idle.

        workers: "threads" runs the workers as threads of this process, each training step
        compiled to native code (`with_native_code()`; the calls release the GIL) over the
        parameters in place; "processes" forks worker processes over parameters moved to
        shared memory, running the program as it is; "auto" (the default) takes the kind
        that is faster for this program on this machine: threads when the compiled worker
        loop applies (no GIL per batch), otherwise whichever a short measurement on scratch
        copies of the parameters favours (once per program, cached; worker_mode.py). The
        choice and why are logged and in the result's `mode` and `mode_reason`."""
        desc, files, thread_num, fetch_names, scope = _checked_run_args(
            program, data_feed, filelist, thread_num, fetch, scope, workers)
        lowering = lower_step(program, fetch_names) if workers != "processes" else None
        n_workers = min(thread_num, len(files))
        choice = self._choose_workers(workers, lowering, program, fetch_names, desc, files,
                                      scope, n_workers, read_ahead)
        threads, observers = choice.threads, observers_of(scope)
        self.last_mode = "threads" if threads else "processes"
        report_every = _report_every(report_every, thread_num, print_period, observers)
        pool, stop, board = _workers(program, desc, files, scope, fetch_names, n_workers,
                                     lowering if threads else None, observers,
                                     (report_every, {"skip_bad_lines": skip_bad_lines},
                                      read_ahead))
        reporter = _run_reporter(files, fetch_names, fetch_info, print_period, debug,
                                 progress, tensorboard_dir)
        _build_native_once()
        _prebuild(lowering if threads else None)
        t0 = time.perf_counter()
        reporter.start()
        try:
            _notify(observers, "run_started", threads)
            with blas_limit(1) if threads else contextlib.nullcontext():
                result = self._collect(pool, n_workers, stop, board, reporter, fetch_names, t0,
                                       callback, observers)
        finally:
            reporter.close()
            _notify(observers, "run_ended")
        result.mode, result.mode_reason, result.mode_rates = (self.last_mode, choice.why,
                                                              choice.rates)
        return result

    @staticmethod
    def _choose_workers(workers, lowering, program, fetch_names, desc, files, scope,
                        n_workers, read_ahead):
        """The worker kind (a worker_mode.Choice: threads or processes, and why), logged.
        "auto" asks worker_mode.choose, which decides from the step's structure or by
        measuring it once (cached)."""
        from .worker_mode import Choice, choose
        if workers == "processes":
            return Choice(False, "asked for (workers='processes')")
        obstacles = native_obstacles(lowering)
        if workers == "threads":
            why = "asked for (workers='threads')"
            if obstacles:
                why += (f"; {len(obstacles)} op(s) run as Python steps under the GIL "
                        f"({', '.join(sorted({t for _, t, _ in obstacles}))})")
            logger.info("AsyncExecutor: worker threads: %s", why)
            return Choice(True, why)
        loop_why = _compiled_loop_obstacle(lowering, obstacles, fetch_names, desc, scope,
                                           read_ahead)
        return choose(program, lowering, obstacles, loop_why, fetch_names, desc, files,
                      scope, n_workers)

    def _collect(self, pool, n_workers, stop, board, reporter, fetch_names, t0, callback,
                 observers=()):
        """Start the workers and read their messages until all are done or one fails (a
        reported error, or an exit without "done": a signal, the OOM killer), which is
        noticed within REPORT_POLL_S, stops the others and is raised with the worker's
        identity and the file lines of its last batch. The workers are gone on return."""
        done, errors, workers_info, history, skipped, seen_ex = set(), [], {}, [], 0, 0
        total_ex, sums = 0, np.zeros(len(fetch_names))
        try:
            pool.start()   # here: workers started before a failure to start the rest stop too
            while len(done) < n_workers and not errors:
                msgs, ended = pool.wait(REPORT_POLL_S)
                for msg in msgs:
                    kind, wid = msg[0], msg[1]
                    if kind == "reports":
                        for n_batches, n_ex, means in msg[2]:
                            seen_ex += n_ex
                            history.append((seen_ex, means))
                            reporter.report(n_batches, n_ex, means)
                            if callback is not None:
                                callback(seen_ex, dict(zip(fetch_names, means)))
                            _notify(observers, "batches_done", n_batches)
                    elif kind == "skipped":
                        skipped += msg[3]
                    elif kind == "done":
                        done.add(wid)
                        total_ex += msg[3]
                        sums += np.asarray(msg[4]) if fetch_names else 0
                        workers_info[wid] = {"batches": msg[2], "examples": msg[3],
                                             "pid": msg[5][0], "start": msg[5][1],
                                             "end": msg[5][2], **msg[6]}
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
        seconds = time.perf_counter() - t0
        res = AsyncRunResult((sums / max(total_ex, 1)).tolist())
        res.history, res.examples, res.seconds = history, total_ex, seconds
        res.examples_per_sec = total_ex / seconds if seconds > 0 else 0.0
        res.skipped_lines, res.fetch_names = skipped, fetch_names
        res.workers = [workers_info[w] for w in sorted(workers_info)]
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


def _reporter(files, labels, print_period, progress, tensorboard_dir):
    """The run's Reporter (progress.py): a bar when asked or on a terminal, with the total
    the files hold."""
    from .progress import Reporter, count_examples
    from .scalars import open_writer
    bar = sys.stderr.isatty() if progress is None else bool(progress)
    total, exact = count_examples(files) if bar else (None, False)
    return Reporter(labels, print_period=print_period, bar=bar, total=total, exact=exact,
                    writer=open_writer(tensorboard_dir))
