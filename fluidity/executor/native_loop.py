"""A Hogwild worker thread's training loop with no Python per batch.

When a training program compiles to one native segment whose inputs are the data feed's
slots and parameters (fluidity/codegen), a worker hands whole parsed MultiSlot chunks to C
(native_loop.c): per batch it points the step's slot inputs at the chunk's values (LoD
rebased), calls the compiled step, folds each fetch target's batch mean into the worker's
report period and writes the batch's file lines on the worker's row of the position board,
all with the GIL released. Python runs once per call (a chunk, or `budget_s` of work, or one
report when an observer wants each report's ids), never per batch: that is what lets two
worker threads train at the same time on a model whose step is a few lookups and dot
products (issue 27: per-batch Python made two threads slower than one).

Everything the loop writes is the worker's own, on cache lines of its own (`aligned_empty`):
its state, arguments, LoD scratch, fetch sums and finished reports (busy intervals are
recorded per call, in CLOCK_MONOTONIC seconds: `time.monotonic()`'s clock). The parameters are the
only thing workers share, read and updated in place by the step without locks (Hogwild).

`CompiledWorkerStep.make(...)` says why a program does not qualify (the worker then runs
batches through the executor's native plan, as before).
"""
import ctypes
import hashlib
import os
import weakref

import numpy as np

from ..codegen import build
from ..codegen import abi
from ..core import native as core_native, philox
from ..core.dtypes import CODE_OF_C_TYPE, numpy_of_ctype
from ..core.lod import offsets_problem
from ..core.tensor import LoDTensor
from .native import ERR_BYTES, op_error
from .shared_memory import CACHE_LINE, aligned_empty

_SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "native_loop.c")
FETCH_CTYPES = ("float", "double", "int64_t", "int32_t")   # what native_loop.c's mean_of reads
REPORT_CAP = 256        # finished reports a call may leave before it returns
BUDGET_S = 0.1          # a call returns to Python after this much wall time
MAX_BUSY = 100_000      # busy intervals kept per worker (then only counted)
_lib = None

_p, _i64 = ctypes.c_void_p, ctypes.c_int64


class _WorkerState(ctypes.Structure):
    """native_loop.c's fl_worker_t, field for field."""
    _fields_ = [("fn", _p), ("args", _p), ("n_inputs", _i64), ("arena", _p), ("cap", _i64),
                ("err", _p), ("n_slots", _i64), ("in_idx", _p), ("batch", _i64),
                ("lod_buf", _p), ("n_fetch", _i64), ("out_idx", _p), ("fetch_dtype", _p),
                ("report_every", _i64), ("return_on_report", _i64), ("budget_ns", _i64),
                ("stop", _p), ("position", _p),
                ("width", _p), ("esize", _p), ("vals", _p), ("offs", _p), ("stride", _i64),
                ("line_of", _p), ("line_base", _i64), ("cursor", _p),
                ("period_batches", _i64), ("period_examples", _i64), ("period_sums", _p),
                ("total_sums", _p), ("total_batches", _i64), ("total_examples", _i64),
                ("n_reports", _i64), ("cap_reports", _i64), ("rep_counts", _p),
                ("rep_means", _p),
                ("status", _i64), ("calls", _i64), ("t_start", _i64), ("t_end", _i64),
                ("cpu_ns", _i64), ("batch_log", _p), ("batch_log_cap", _i64),
                ("batch_log_n", _i64)]


def cflags():
    """The build flags of the loop (native_loop.c): the runtime headers on the include path,
    and the digest of the argument header it includes (the build cache keys on source and
    flags)."""
    header = os.path.join(build.RUNTIME_DIR, abi.HEADER)
    with open(header, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    return (*core_native.CFLAGS, f"-I{build.RUNTIME_DIR}", f"-DFL_SEGMENT_ARGS_SHA={digest}")


def _load():
    """The loop's C library, or False where no C compiler builds it."""
    global _lib
    if _lib is None:
        try:
            lib = core_native.load(_SRC, cflags())
        except Exception:    # noqa: BLE001 - no compiler: the executor's path serves
            lib = None
        if lib is None:
            _lib = False
        else:
            ptr = ctypes.POINTER(_WorkerState)
            lib.fl_worker_run.restype = ctypes.c_int64
            lib.fl_worker_run.argtypes = [ptr, ctypes.c_int64]
            lib.fl_worker_free.argtypes = [ptr]
            lib.fl_worker_free.restype = None
            lib.fl_worker_flush.argtypes = [ptr]
            lib.fl_worker_flush.restype = None
            _lib = lib
    return _lib


_LIBRARIES = weakref.WeakKeyDictionary()    # lowering -> its loaded library


def step_library(low):
    """The loaded library of a lowering's source (codegen.build: compiled unless a verified
    one is cached), looked up once per lowering: each run asked the build cache again for
    the prebuild, the choice of worker mode and every worker (hashing the source and the
    runtime headers, ~1.5 ms each, all before the first batch)."""
    try:
        lib = _LIBRARIES.get(low)
    except TypeError:       # a lowering that cannot be weakly referenced
        return build.load(build.compile_cached(low.source))
    if lib is None:
        lib = _LIBRARIES[low] = build.load(build.compile_cached(low.source))
    return lib


class ChunkCursor:
    """The next unclaimed line of a parsed chunk, on a cache line of its own: the compiled
    loops claim a batch at a time from it with an atomic add (native_loop.c), so the worker
    that parsed the chunk and, at the end of a run, a worker with no file left share its
    batches without a lock. Batches start at multiples of the batch size from the chunk's
    first line whoever claims them: the same batches as one worker's."""

    def __init__(self):
        self._a = aligned_empty(CACHE_LINE // 8, np.int64)
        self._a[:] = 0
        self.address = self._a.ctypes.data

    def value(self):
        """Lines claimed so far (may exceed the chunk's lines once it is exhausted)."""
        return int(self._a[0])


class CompiledWorkerStep:
    """One worker's compiled step over chunks: its own state, args vector, arena, LoD scratch
    and report buffers (each on cache lines of its own); the parameters read in place from
    the root scope."""

    def __init__(self, lib, fn, seg, slots, slot_inputs, params, fetch_idx, fetch_dtypes,
                 block_idx):
        self.lib, self.fn, self.seg, self.block_idx = lib, fn, seg, block_idx
        self.slots = slots                              # used slot names, reader order
        self.params = params                            # [(input index, scope var, ctype)]
        nf = len(fetch_idx)
        self._raw = raw = np.zeros(ctypes.sizeof(_WorkerState) + 2 * CACHE_LINE, np.uint8)
        self.state = w = _WorkerState.from_buffer(raw, (-raw.ctypes.data) % CACHE_LINE)
        self.in_idx = aligned_empty(len(slots), np.int64)
        self.in_idx[:] = [slot_inputs.get(n, -1) for n in slots]
        self.fetch_idx = aligned_empty(nf, np.int64)
        self.fetch_idx[:] = fetch_idx
        self.fetch_dtypes = aligned_empty(nf, np.int64)
        self.fetch_dtypes[:] = fetch_dtypes
        self.args = abi.Args(len(seg.inputs), len(seg.outputs), aligned_empty)
        self.err = ctypes.create_string_buffer(ERR_BYTES)
        self.period_sums = aligned_empty(nf, np.float64)
        self.total_sums = aligned_empty(nf, np.float64)
        self.rep_counts = aligned_empty((REPORT_CAP, 2), np.int64)
        self.rep_means = aligned_empty((REPORT_CAP, max(nf, 1)), np.float64)
        self.lod_buf = aligned_empty(1, np.int64)
        self.busy = []          # (start, end) of each call, time.monotonic() seconds
        self.busy_s = 0.0
        w.fn, w.args, w.n_inputs = fn, self.args.address, len(seg.inputs)
        w.err = ctypes.cast(self.err, _p).value
        w.n_slots, w.in_idx = len(slots), self.in_idx.ctypes.data
        w.n_fetch, w.out_idx = nf, self.fetch_idx.ctypes.data
        w.fetch_dtype = self.fetch_dtypes.ctypes.data
        w.period_sums, w.total_sums = self.period_sums.ctypes.data, self.total_sums.ctypes.data
        w.cap_reports = REPORT_CAP
        w.rep_counts, w.rep_means = self.rep_counts.ctypes.data, self.rep_means.ctypes.data
        self.configure()

    def configure(self, stop=None, position=None, report_every=1, return_on_report=False,
                  budget_s=None):
        """Where the loop reads the run's stop flag (an int8 array; unset: never stops) and
        writes this worker's position (an int64 row: [file index, first line, last line]);
        batches per report; whether each call ends at a report; the wall time after which a
        call returns (module's BUDGET_S when None; 0: a call runs its chunk whole)."""
        self._stop = stop if stop is not None else aligned_empty(1, np.int8)
        self._position = position if position is not None else aligned_empty(3, np.int64)
        w = self.state
        w.stop, w.position = self._stop.ctypes.data, self._position.ctypes.data
        w.report_every = max(1, int(report_every))
        w.return_on_report = int(bool(return_on_report))
        budget_s = BUDGET_S if budget_s is None else budget_s   # read now, not at import
        w.budget_ns = int(budget_s * 1e9) if budget_s else 0

    @classmethod
    def make(cls, low, fetch_names, slots, scope):
        """(CompiledWorkerStep, None) or (None, why not), for the training program lowered
        with its fetch targets kept (`low`, a codegen.lower.Lowering)."""
        lib = _load()
        if not lib:
            return None, "no C compiler for the worker loop"
        segs = low.segments
        if low.python_ops or len(segs) != 1:
            return None, "the step is not one compiled segment"
        seg = segs[0]
        slot_inputs, params = {}, []
        for j, b in enumerate(seg.inputs):
            if b.var in slots:
                if b.rows is not None or b.ndim != 2:
                    return None, f"slot '{b.var}' is not read as a [rows, width] tensor"
                slot_inputs[b.var] = j
                continue
            var = philox.bound_state(scope, b.var) if b.var.startswith(philox.STATE_PREFIX) \
                else scope.find_var(b.var)          # a random op's [key, run], advanced in C
            t = var.value if var is not None else None
            a = t.array if type(t) is LoDTensor else None
            if a is None or b.rows is not None or b.has_lod:
                return None, f"the step reads '{b.var}', neither a slot nor a dense parameter"
            params.append((j, var, b.ctype))
        if any(b.kind in ("array", "held") or b.computed_lod for b in seg.outputs):  # blocks
            return None, "the step hands back a tensor array or a LoD it computed"
        fetch_idx, fetch_dtypes = [], []
        outs = {b.var: k for k, b in enumerate(seg.outputs)}
        for n in fetch_names:
            k = outs.get(n)
            if k is None or seg.outputs[k].slot is None or \
                    seg.outputs[k].ctype not in FETCH_CTYPES:
                return None, f"fetch target '{n}' is not a value the step makes"
            fetch_idx.append(k)
            fetch_dtypes.append(CODE_OF_C_TYPE[seg.outputs[k].ctype])
        library = step_library(low)
        fn = ctypes.cast(getattr(library, seg.name), ctypes.c_void_p).value
        return cls(lib, fn, seg, list(slots), slot_inputs, params, fetch_idx, fetch_dtypes,
                   0), None

    def _bind_params(self):
        for j, var, ctype in self.params:
            a = var.value.array
            if not a.flags.c_contiguous or a.dtype != numpy_of_ctype(ctype):
                raise RuntimeError(f"parameter '{var.name}' changed layout")
            abi.put_tensor(self.args.inputs[j], a.__array_interface__["data"][0], a.shape)

    def fits(self, chunk, dense_dim):
        """Whether the chunk's slots have the dtypes the step reads."""
        for u, n in enumerate(self.slots):
            j = self.in_idx[u]
            if j < 0:
                continue
            v = chunk.vals[u]
            if not isinstance(v, np.ndarray) or \
                    v.dtype != numpy_of_ctype(self.seg.inputs[j].ctype):
                return False
        return True

    def bind(self, chunk, dense_dim, batch, cursor):
        """Point the loop at a parsed chunk (its values, offsets, widths, lines) for batches
        of `batch` lines claimed from `cursor` (the chunk's ChunkCursor: other workers' loops
        may claim from it too); the arrays are kept alive here until the next bind."""
        vals = [np.ascontiguousarray(v) if isinstance(v, np.ndarray) else np.zeros(0)
                for v in chunk.vals]
        offs = np.ascontiguousarray(chunk.offs, np.int64)
        for u, name in enumerate(self.slots):      # the loop makes each batch's LoD of them
            bad = offsets_problem(offs[u], vals[u].size) if self.in_idx[u] >= 0 else None
            if bad is not None:
                raise RuntimeError(f"slot '{name}': the parsed chunk's offsets are not offsets "
                                   f"of its {vals[u].size} values: {bad}")
        b = {"vals": vals,
             "ptrs": (ctypes.c_void_p * max(len(vals), 1))(*[v.ctypes.data for v in vals]),
             "esize": np.array([v.itemsize for v in vals], np.int64),
             "width": np.array([int(d) for d in dense_dim], np.int64),
             "offs": offs,
             "line_of": np.ascontiguousarray(chunk.line_of, np.int64),
             "cursor": cursor}
        self._bound = b
        w = self.state
        w.vals = ctypes.cast(b["ptrs"], _p).value
        w.esize, w.width = b["esize"].ctypes.data, b["width"].ctypes.data
        w.offs, w.stride = b["offs"].ctypes.data, b["offs"].shape[1]
        w.line_of, w.line_base = b["line_of"].ctypes.data, int(chunk.base)
        w.cursor = cursor.address
        w.batch = int(batch)
        need = len(self.slots) * (int(batch) + 1)
        if self.lod_buf.size < need:
            self.lod_buf = aligned_empty(need, np.int64)
            w.lod_buf = self.lod_buf.ctypes.data
        elif not w.lod_buf:
            w.lod_buf = self.lod_buf.ctypes.data

    def run(self, last):
        """Batches of the bound chunk claimed from its cursor up to line `last` (the chunk's
        line count), GIL released, until none is left or one of the loop's reasons to return
        (native_loop.c). Returns (line, status, message): status 0: nothing wrong, `line`
        is `last` when the chunk has no batch left; -1: the batch at `line` (claimed by
        this call) needs the executor; >= 2: it failed in an op; -2: no memory for the
        step."""
        self._bind_params()
        a = self.lib.fl_worker_run(ctypes.byref(self.state), last)
        w = self.state
        self._record_busy(w.t_start, w.t_end)
        status = int(w.status)
        return int(a), status, self.err.value.decode(errors="replace") if status >= 2 else ""

    def log_batches(self, cap):
        """Log the wall and CPU times of this worker's next `cap` batches (0: stop)."""
        w = self.state
        self._batch_log = aligned_empty((max(int(cap), 1), 4), np.int64) if cap else None
        w.batch_log = self._batch_log.ctypes.data if cap else None
        w.batch_log_cap, w.batch_log_n = (int(cap), 0)

    def batch_log(self):
        """The logged batches since the last call, [n, 4] int64 ns: wall start, wall end
        (CLOCK_MONOTONIC: time.monotonic_ns()'s clock), thread CPU start, CPU end; the log
        is emptied."""
        w = self.state
        if not w.batch_log:
            return np.zeros((0, 4), np.int64)
        out = self._batch_log[:int(w.batch_log_n)].copy()
        w.batch_log_n = 0
        return out

    def _record_busy(self, t0, t1):
        self.busy_s += (t1 - t0) * 1e-9
        if len(self.busy) < MAX_BUSY:
            self.busy.append((t0 * 1e-9, t1 * 1e-9))

    def take_reports(self, flush=False):
        """The finished reports since the last call, [(batches, examples, [fetch means])]
        (with flush, the open period too); the buffer is emptied."""
        w = self.state
        if flush:
            self.lib.fl_worker_flush(ctypes.byref(self.state))
        k, nf = int(w.n_reports), int(w.n_fetch)
        out = [(c[0], c[1], m) for c, m in zip(self.rep_counts[:k].tolist(),
                                               self.rep_means[:k, :nf].tolist())]
        w.n_reports = 0
        return out

    def totals(self):
        """(batches, examples, [sum over batches of fetch mean * lines]) of the loop."""
        w = self.state
        return int(w.total_batches), int(w.total_examples), self.total_sums.tolist()

    def add_batch(self, lines, means):
        """Fold a batch run elsewhere (through the executor) into the report period and
        totals, so reports and totals count it where it fell."""
        w = self.state
        for f, m in enumerate(means):
            self.period_sums[f] += m * lines
            self.total_sums[f] += m * lines
        w.period_batches += 1
        w.period_examples += lines
        w.total_batches += 1
        w.total_examples += lines
        if w.period_batches >= w.report_every and w.n_reports < w.cap_reports:
            self.lib.fl_worker_flush(ctypes.byref(self.state))

    def error(self, status, message):
        """The ExecutionError of an op that failed (status 2 + its site), as the plan's."""
        sites = self.seg.sites
        b, i, op = sites[status - 2] if 2 <= status < 2 + len(sites) else \
            (self.block_idx,) + self.seg.ops[0]
        return op_error(op, i, message, b)

    def close(self):
        self.lib.fl_worker_free(ctypes.byref(self.state))
