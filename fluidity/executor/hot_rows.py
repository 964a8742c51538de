"""Per-worker copies of the hottest rows of the tables a Hogwild worker updates sparsely.

Two worker threads that update the same rows of a shared embedding table pay for every row
the other core just wrote; with skip-gram's negatives from unigram^0.75, a few hundred rows
of the output table take half of its writes (issue 27, benchmarks/RESULTS.md). So when a
run has two or more compiled worker threads, each keeps private copies of the K most
written rows of every table that qualifies, trains on them, and adds what it changed to the
shared rows every M of its batches and at the run's end (HogWild++-like delayed updates;
codegen/runtime/hot_rows.h has the mechanism, native_loop.c drives it).

A table qualifies when the compiled step touches it only through sparse lookups
(`lookup_table` / `lookup_table_v2` with is_sparse=True, their gradients) and a plain `sgd`
of it: then every read and write of its rows goes through the three kernels that know the
copies (`fl::lookup_rows`, `fl::lookup_grad_sgd`, and `fl::rows_axpy` for the sgd of a
summed sparse gradient). A table read by any other op (a matmul, a pooled lookup, an
optimizer with row state) is left shared.

Off by default (FLAGS_async_hot_rows = 0): measured on a loaded 2-core machine the copies'
own cost (6-8% CPU a lone batch: the look-up per id, the merges) outweighed what they save
when threads seldom run at once (benchmarks/RESULTS.md).

Memory per table and worker: O(K) (ids counted in a table of 8K slots; a direct-mapped map
of 2K slots, and the copies and their snapshot by slot, two [2K, width] arrays), whatever
the table's height.
"""
import ctypes

import numpy as np

from ..core import flags
from ..errors import FluidityError
from .shared_memory import aligned_empty

LOOKUPS = ("lookup_table", "lookup_table_v2")
LOOKUP_GRADS = ("lookup_table_grad", "lookup_table_v2_grad")
WARMUP_BATCHES = 64       # a worker's batches counted before it chooses its hot ids
MIN_SHARE = 0.0           # copies kept only where the rows chosen took this share of writes
COUNT_SLOTS_PER_ROW = 8   # count table slots per row kept (ids counted: half of them)
MAP_SLOTS_PER_ROW = 2     # slots of the direct-mapped id map (and copy rows) per row kept

_P, _I64 = ctypes.c_void_p, ctypes.c_int64


class HotTable(ctypes.Structure):
    """hot_rows.h's fl_hot_table, field for field."""
    _fields_ = [("table", _P), ("width", _I64), ("k_max", _I64), ("k", _I64), ("cap", _I64),
                ("shift", _I64), ("key", _P), ("val", _P), ("mcap", _I64), ("mshift", _I64),
                ("map", _P), ("ids", _P), ("copy", _P),
                ("snap", _P), ("phase", _I64), ("warmup", _I64), ("sync_every", _I64),
                ("batches", _I64), ("distinct", _I64), ("merges", _I64), ("counted", _I64),
                ("kept_writes", _I64), ("min_share", ctypes.c_double)]


class HotSet(ctypes.Structure):
    """hot_rows.h's fl_hot_set: n tables at t."""
    _fields_ = [("n", _I64), ("t", _P)]


FLAG_ROWS = "FLAGS_async_hot_rows"
FLAG_SYNC = "FLAGS_async_hot_rows_sync_every"


def settings(n_workers):
    """(rows kept per table, batches between merges) for a run of `n_workers` worker
    threads, from the flags; None when no copies are kept (one worker, or the flag 0)."""
    k, m = flags.flag(FLAG_ROWS), flags.flag(FLAG_SYNC)
    if k < 0:
        raise FluidityError(f"{FLAG_ROWS} must be >= 0 (rows a worker keeps per table; 0: "
                            f"none), got {k}")
    if m < 1:
        raise FluidityError(f"{FLAG_SYNC} must be >= 1 (a worker's batches between merges), "
                            f"got {m}")
    if n_workers < 2 or k == 0:
        return None
    return k, m


def _touches(op, name):
    return name in op.input_arg_names or name in op.output_arg_names


def qualifies(sites, name):
    """Whether the compiled step's ops (`sites`: [(block, index, OpView)]) touch table
    `name` only through sparse lookups, their gradients and a plain sgd of it, with at least
    one sparse lookup gradient (the table is trained row by row)."""
    grads = 0
    for _, _, op in sites:
        if not _touches(op, name):
            continue
        t = op.type
        if t in LOOKUPS or t in LOOKUP_GRADS:
            if op.input("W") != [name] or name in op.output_arg_names or \
                    not op.attr("is_sparse"):
                return False
            grads += t in LOOKUP_GRADS
        elif t == "sgd":
            if op.input("Param") != [name]:
                return False
        else:
            return False
    return grads > 0


class HotRows:
    """One worker's copies of the hot rows of its qualifying tables (hot_rows.h's
    fl_hot_set, with every array it points to owned here, each on cache lines of its own)."""

    def __init__(self, tables, k, sync_every, warmup=WARMUP_BATCHES, min_share=MIN_SHARE):
        """tables: [(name, float32 [rows, width] array)]."""
        self.names = [n for n, _ in tables]
        self._keep = []
        self._raw = (HotTable * len(tables))()
        for t, (_, a) in zip(self._raw, tables):
            rows, width = a.shape
            k_max = max(1, min(int(k), rows))
            cap = 16
            while cap < COUNT_SLOTS_PER_ROW * k_max:
                cap <<= 1
            key, val = aligned_empty(cap, np.int64), aligned_empty(cap, np.int64)
            key[:] = -1
            val[:] = 0
            mcap = 16
            while mcap < MAP_SLOTS_PER_ROW * k_max:
                mcap <<= 1
            slots = aligned_empty(mcap, np.int64)
            slots[:] = -1
            self._keep.append(slots)
            t.mcap, t.mshift, t.map = mcap, 64 - (mcap.bit_length() - 1), slots.ctypes.data
            ids = aligned_empty(k_max, np.int64)
            copy = aligned_empty((mcap, width), np.float32)
            snap = aligned_empty((mcap, width), np.float32)
            self._keep += [key, val, ids, copy, snap]
            t.table = a.ctypes.data
            t.width, t.k_max, t.k, t.cap = width, k_max, 0, cap
            t.shift = 64 - (cap.bit_length() - 1)
            t.key, t.val, t.ids = key.ctypes.data, val.ctypes.data, ids.ctypes.data
            t.copy, t.snap = copy.ctypes.data, snap.ctypes.data
            t.phase, t.warmup, t.sync_every = 0, max(1, int(warmup)), max(1, int(sync_every))
            t.min_share = float(min_share)
        self.set = HotSet(len(tables), ctypes.addressof(self._raw))

    @property
    def address(self):
        return ctypes.addressof(self.set)

    def rebind(self, tables):
        """Point each table at its array's current data (the loop's step reads the arrays
        afresh each call; kernels match a table by its address)."""
        for t, (_, a) in zip(self._raw, tables):
            t.table = a.ctypes.data

    def kept(self):
        """{table name: the ids kept now} (empty while still counting)."""
        out = {}
        for name, t in zip(self.names, self._raw):
            ids = np.ctypeslib.as_array(ctypes.cast(t.ids, ctypes.POINTER(ctypes.c_int64)),
                                        (t.k_max,))
            out[name] = ids[:t.k].copy()
        return out

    def stats(self):
        """{table name: {phase, rows kept, merges done, share of the counted writes the
        rows chosen took}}."""
        return {n: {"phase": ("counting", "kept", "off")[t.phase], "rows": int(t.k),
                    "merges": int(t.merges),
                    "share": round(t.kept_writes / t.counted, 3) if t.counted else None}
                for n, t in zip(self.names, self._raw)}
