"""A Hogwild worker thread's training loop with no Python per batch.

When a training program compiles to one native segment whose inputs are the data feed's
slots and parameters (fluidity/codegen), a worker hands whole parsed MultiSlot chunks to C
(native_loop.c): per batch it points the step's slot inputs at the chunk's values (LoD
rebased), calls the compiled step and records each fetch target's batch mean, all with the
GIL released. Python runs once per `report_every` batches (to report) and for a batch the
step was not built for (inputs of other shapes: that batch runs through the executor).

`CompiledWorkerStep.make(...)` says why a program does not qualify (the worker then runs
batches through the executor's native plan, as before).
"""
import ctypes
import hashlib
import os

import numpy as np

from ..codegen import build
from ..codegen import abi
from ..core import native as core_native
from ..core.dtypes import CODE_OF_C_TYPE, numpy_of_ctype
from ..core.tensor import LoDTensor
from .native import ERR_BYTES, op_error

_SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "native_loop.c")
FETCH_CTYPES = ("float", "double", "int64_t", "int32_t")   # what native_loop.c's mean_of reads
_lib = None


class _Arena(ctypes.Structure):
    _fields_ = [("p", ctypes.c_void_p), ("cap", ctypes.c_int64)]


def _cflags():
    """The build flags of the loop: the runtime headers on the include path, and the digest
    of the argument header it includes (the build cache keys on source and flags)."""
    header = os.path.join(build.RUNTIME_DIR, abi.HEADER)
    with open(header, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    return (*core_native.CFLAGS, f"-I{build.RUNTIME_DIR}", f"-DFL_SEGMENT_ARGS_SHA={digest}")


def _load():
    """The loop's C library, or False where no C compiler builds it."""
    global _lib
    if _lib is None:
        try:
            lib = core_native.load(_SRC, _cflags())
        except Exception:    # noqa: BLE001 - no compiler: the executor's path serves
            lib = None
        if lib is None:
            _lib = False
        else:
            f = lib.fl_worker_chunk
            f.restype = ctypes.c_int64
            f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                          ctypes.POINTER(_Arena), ctypes.c_char_p, ctypes.c_int,
                          ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                          ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                          ctypes.c_int64, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                          ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
            lib.fl_arena_free.argtypes = [ctypes.POINTER(_Arena)]
            _lib = lib
    return _lib


class CompiledWorkerStep:
    """One worker's compiled step over chunks: its own args vector, arena and LoD scratch;
    the parameters read in place from the root scope."""

    def __init__(self, lib, fn, seg, slots, slot_inputs, params, fetch_idx, fetch_dtypes,
                 block_idx):
        self.lib, self.fn, self.seg, self.block_idx = lib, fn, seg, block_idx
        self.slots = slots                              # used slot names, reader order
        self.in_idx = np.array([slot_inputs.get(n, -1) for n in slots], np.int64)
        self.params = params                            # [(input index, scope var)]
        self.fetch_idx = np.array(fetch_idx, np.int64)
        self.fetch_dtypes = np.array(fetch_dtypes, np.int64)
        self.args = abi.Args(len(seg.inputs), len(seg.outputs))
        self.arena = _Arena(None, 0)
        self.err = ctypes.create_string_buffer(ERR_BYTES)
        self.lod_buf = np.zeros(0, np.int64)

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
            var = scope.find_var(b.var)
            t = var.value if var is not None else None
            a = t.array if type(t) is LoDTensor else None
            if a is None or b.rows is not None or b.lod is not None:
                return None, f"the step reads '{b.var}', neither a slot nor a dense parameter"
            params.append((j, var, b.ctype))
        fetch_idx, fetch_dtypes = [], []
        outs = {b.var: k for k, b in enumerate(seg.outputs)}
        for n in fetch_names:
            k = outs.get(n)
            if k is None or seg.outputs[k].slot is None or \
                    seg.outputs[k].ctype not in FETCH_CTYPES:
                return None, f"fetch target '{n}' is not a value the step makes"
            fetch_idx.append(k)
            fetch_dtypes.append(CODE_OF_C_TYPE[seg.outputs[k].ctype])
        library = build.load(build.compile_cached(low.source))
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

    def bind(self, chunk, dense_dim):
        """What the loop reads of a chunk, made once per chunk (contiguous offsets, value
        pointers, widths): each run() over its batches then only fills its own outputs."""
        vals = [np.ascontiguousarray(v) if isinstance(v, np.ndarray) else np.zeros(0)
                for v in chunk.vals]
        return {"vals": vals,
                "ptrs": (ctypes.c_void_p * len(vals))(*[v.ctypes.data for v in vals]),
                "esize": np.array([v.itemsize for v in vals], np.int64),
                "width": np.array([int(d) for d in dense_dim], np.int64),
                "offs": np.ascontiguousarray(chunk.offs, np.int64)}

    def run(self, bound, first, last, batch):
        """Batches of `batch` lines over lines [first, last) of a bound chunk, GIL
        released. Returns (batches done, per-batch fetch means [k, n_fetch], per-batch lines
        [k], status, message); status -1: the next batch needs the executor; >= 2: an op
        failed. Either way that batch is the k-th, starting at line first + sum(lines):
        the caller names its file lines in the error."""
        self._bind_params()
        n_slots = len(self.slots)
        if self.lod_buf.size < n_slots * (batch + 1):
            self.lod_buf = np.zeros(n_slots * (batch + 1), np.int64)
        offs = bound["offs"]
        n_max = (last - first + batch - 1) // batch
        nf = len(self.fetch_idx)
        sums = np.zeros(max(n_max * nf, 1))
        lines = np.zeros(max(n_max, 1), np.int64)
        status = np.zeros(1, np.int64)
        k = self.lib.fl_worker_chunk(
            self.fn, self.args.address, len(self.seg.inputs), ctypes.byref(self.arena),
            self.err, n_slots, self.in_idx.ctypes.data, bound["width"].ctypes.data,
            bound["esize"].ctypes.data, bound["ptrs"], offs.ctypes.data, offs.shape[1], first,
            last, batch, self.lod_buf.ctypes.data, nf, self.fetch_idx.ctypes.data,
            self.fetch_dtypes.ctypes.data, sums.ctypes.data, lines.ctypes.data,
            status.ctypes.data)
        return (int(k), sums[:int(k) * nf].reshape(int(k), nf), lines[:int(k)], int(status[0]),
                self.err.value.decode(errors="replace"))

    def error(self, status, message):
        """The ExecutionError of an op that failed (status 2 + its site), as the plan's."""
        sites = self.seg.sites
        b, i, op = sites[status - 2] if 2 <= status < 2 + len(sites) else \
            (self.block_idx,) + self.seg.ops[0]
        return op_error(op, i, message, b)

    def close(self):
        self.lib.fl_arena_free(ctypes.byref(self.arena))
