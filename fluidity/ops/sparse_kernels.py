"""Kernels of the sparse embedding ops: pooled lookups over several slots, their row
gradients, row-scatter updates and merging duplicate rows; and the optimizer steps numpy
does in several passes (Adam, Adagrad; dense or on rows). Each runs compiled C
(sparse_kernels.c, built on first use by core.native) for float32 tables and int64 ids, and
numpy otherwise (no compiler, float64); both give the same results and the same errors,
raised before anything is written.

Why C: a CTR model looks up one or a few ids per slot per example, so numpy's
fancy-index + reduceat spends its time on per-call overhead and a [ids, dim] temporary
(~5x slower than the loop); and a sparse SGD step in numpy needs a sort to merge duplicate
rows (np.add.at is slower still), where the loop adds each row in place as Paddle's kernel
does.
"""
import ctypes
import os
import warnings

import numpy as np

from ..core import native
from ..errors import ExecutionError

_SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sparse_kernels.c")
# -O3 and no errno from sqrtf let the compiler vectorize the Adam loop; no -ffast-math and no
# FMA contraction, so each operation rounds as numpy's does and the two agree bit for bit
_CFLAGS = ("-O3", "-fno-math-errno", "-ffp-contract=off", "-shared", "-fPIC")
_lib = None      # the CDLL, False when it cannot be built (numpy is used)
_enabled = os.environ.get("FLUIDITY_NATIVE", "1") != "0"


def _native():
    global _lib
    if _lib is None:
        try:
            lib = native.load(_SRC, cflags=_CFLAGS, libs=("-lm",))
            p, i64 = ctypes.c_void_p, ctypes.c_int64
            lib.emb_pool_f32.argtypes = [p, i64, i64, p, p, p, i64, i64, i64, i64, p, p]
            lib.emb_pool_grad_f32.argtypes = [p, i64, p, p, p, i64, i64, i64, i64, p, p]
            lib.rows_axpy_f32.argtypes = [p, i64, i64, p, i64, p, ctypes.c_float, p]
            f32, f64 = ctypes.c_float, ctypes.c_double
            lib.adam_f32.argtypes = [p, p, p, p, p, i64, i64, i64, f64, f32, f32, f32, f32, f64,
                                     p]
            for f in (lib.emb_pool_f32, lib.emb_pool_grad_f32, lib.rows_axpy_f32, lib.adam_f32):
                f.restype = ctypes.c_int
            lib.adagrad_f32.argtypes = [p, p, p, p, i64, i64, i64, f32, f32, p]
            lib.adagrad_f32.restype = ctypes.c_int
            lib.merge_rows_f32.argtypes = [p, p, i64, i64, p, p]
            lib.merge_rows_f32.restype = i64
            _lib = lib
        except native.NativeBuildError as e:
            warnings.warn(f"{e}; sparse embedding kernels use numpy (slower)", stacklevel=3)
            _lib = False
    return _lib if _enabled else False


def build():
    """Build (or load from the cache) the C kernels now; False when they cannot be built
    (a warning says why once, and numpy is used). Done before forking workers, so N of them
    never run the compiler at once."""
    return _native() is not False


def set_native(enabled):
    """Use the C kernels (True, the default) or the numpy ones; returns the previous choice."""
    global _enabled
    old, _enabled = _enabled, bool(enabled)
    return old


class Slots:
    """S LoD tensors of ids with the same number B of sequences, laid out for the kernels:
    `ids` all ids back to back (int64), `starts[s]` where slot s's begin, `offs` the LoD
    offsets ([B + 1] shared by all slots when they are one object, as the MultiSlot reader
    makes them for equal layouts; else [S, B + 1])."""
    __slots__ = ("ids", "starts", "offs", "stride", "S", "B", "lod")

    def __init__(self, tensors, op):
        arrays, levels = [], []
        for k, t in enumerate(tensors):
            if not t._lod:
                raise ExecutionError(f"{op}: {_ids_name(k, len(tensors))} has no LoD; feed a "
                                     f"LoDTensor with one sequence of ids per example")
            arrays.append(t._array.reshape(-1))
            levels.append(t._lod[-1])
        self.S = len(arrays)
        self.lod = tensors[0]._lod[:-1]
        first = levels[0]
        self.B = len(first) - 1
        if all(level is first for level in levels):
            self.offs, self.stride = np.asarray(first, dtype=np.int64), 0
        else:
            if any(len(level) != self.B + 1 for level in levels):
                sizes = [len(level) - 1 for level in levels]
                raise ExecutionError(f"{op}: the Ids slots hold different numbers of "
                                     f"sequences {sizes}; every slot needs one per example")
            self.offs, self.stride = np.array(levels, dtype=np.int64), self.B + 1
        self.ids = (np.concatenate(arrays) if len(arrays) > 1 else arrays[0]).astype(
            np.int64, copy=False)
        starts = np.zeros(self.S + 1, np.int64)
        np.cumsum([a.size for a in arrays], out=starts[1:])
        self.starts = starts

    def slot_offsets(self, s):
        return self.offs if self.stride == 0 else self.offs[s]


def _ids_name(k, n):
    return "Ids" if n == 1 else f"Ids #{k}"


def _fail(rc, err, op, slots, height):
    if rc == 1:
        raise ExecutionError(f"{op}: id {int(err[0])} is out of range for a table of "
                             f"{height} rows")
    s = int(err[1])
    o = slots.slot_offsets(s)
    n = slots.starts[s + 1] - slots.starts[s]
    raise ExecutionError(f"{op}: the LoD of {_ids_name(s, slots.S)} does not fit its {n} "
                         f"ids (offsets must start at 0, not decrease and end at the number "
                         f"of ids; got {o[:4].tolist()}...{o[-2:].tolist()})")


def _check_numpy(op, slots, height=None):
    """What the C kernels check before writing: each slot's LoD fits its ids, and (given a
    table height) every id is a row of the table."""
    err = np.zeros(2, np.int64)
    for s in range(slots.S):
        o = slots.slot_offsets(s)
        n = slots.starts[s + 1] - slots.starts[s]
        if o[0] != 0 or o[-1] != n or (np.diff(o) < 0).any():
            err[1] = s
            _fail(2, err, op, slots, height)
    if height is None:
        return
    ids = slots.ids
    bad = (ids < 0) | (ids >= height)
    if bad.any():
        err[0] = ids[np.argmax(bad)]
        _fail(1, err, op, slots, height)


def _c_ok(*arrays):
    return all(a.dtype == np.float32 and a.flags.c_contiguous for a in arrays)


def _rows_width(a):
    """(rows, width) of `a` seen as a table of rows: its first dim by the rest."""
    if not a.ndim:
        return 1, 1
    return a.shape[0], int(np.prod(a.shape[1:], dtype=np.int64))


def pool(w, slots, pad, op):
    """[B, S * D]: per slot, the sum of w's rows over each sequence's ids (pad ids skip)."""
    pad = -1 if pad is None else int(pad)
    H, D = _rows_width(w)
    lib = _native()
    if lib and _c_ok(w):
        out = np.empty((slots.B, slots.S * D), np.float32)
        err = np.zeros(2, np.int64)
        rc = lib.emb_pool_f32(w.ctypes.data, H, D, slots.ids.ctypes.data,
                              slots.starts.ctypes.data, slots.offs.ctypes.data, slots.stride,
                              slots.S, slots.B, pad, out.ctypes.data, err.ctypes.data)
        if rc:
            _fail(rc, err, op, slots, H)
        return out
    _check_numpy(op, slots, H)
    w2 = w.reshape(H, D)
    out = np.zeros((slots.B, slots.S, D), w.dtype)
    for s in range(slots.S):
        ids = slots.ids[slots.starts[s]:slots.starts[s + 1]]
        o = slots.slot_offsets(s)
        rows = w2[ids]
        if pad != -1:
            rows[ids == pad] = 0
        nonempty = o[1:] > o[:-1]
        if rows.shape[0]:
            out[nonempty, s] = np.add.reduceat(rows, o[:-1][nonempty], axis=0)
    return out.reshape(slots.B, slots.S * D)


def pool_grad(dout, slots, pad, D, dtype, op):
    """The rows of the table's gradient, one per id (aligned with slots.ids): each id's row is
    its sequence's slice of dout (zeros for pad ids)."""
    pad = -1 if pad is None else int(pad)
    dout = dout.reshape(slots.B, slots.S * D)
    lib = _native()
    if lib and dtype == np.float32 and dout.dtype == np.float32:
        dout = np.ascontiguousarray(dout)
        value = np.empty((slots.ids.size, D), np.float32)
        err = np.zeros(2, np.int64)
        rc = lib.emb_pool_grad_f32(dout.ctypes.data, D, slots.ids.ctypes.data,
                                   slots.starts.ctypes.data, slots.offs.ctypes.data,
                                   slots.stride, slots.S, slots.B, pad, value.ctypes.data,
                                   err.ctypes.data)
        if rc:
            _fail(rc, err, op, slots, -1)
        return value
    _check_numpy(op, slots)
    d3 = dout.reshape(slots.B, slots.S, D)
    parts = []
    for s in range(slots.S):
        o = slots.slot_offsets(s)
        parts.append(np.repeat(d3[:, s], np.diff(o), axis=0))
    value = np.concatenate(parts).astype(dtype, copy=False) if parts else \
        np.zeros((0, D), dtype)
    if pad != -1:
        value[slots.ids == pad] = 0
    return value


def rows_axpy(p, rows, value, alpha, op):
    """p[rows[k]] += alpha * value[k], duplicates accumulating; nothing is written when a row
    is out of range."""
    H, D = _rows_width(p)
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    lib = _native()
    if lib and _c_ok(p) and value.dtype == np.float32:
        value = np.ascontiguousarray(value)
        err = np.zeros(2, np.int64)
        _check_update(lib.rows_axpy_f32(p.ctypes.data, H, D, rows.ctypes.data, rows.size,
                                        value.ctypes.data, alpha, err.ctypes.data), err, op, H)
        return
    bad = rows[(rows < 0) | (rows >= H)]
    if bad.size:
        raise ExecutionError(f"{op}: Grad has row {int(bad[0])} but Param has {H} rows")
    np.add.at(p.reshape(H, D), rows, (alpha * value).reshape(len(rows), D).astype(p.dtype))


def _update_args(p, arrays, rows):
    """(H, D, number of rows to update, rows pointer, the rows array behind the pointer) for
    an update kernel, or None when the float32 C-contiguous arrays it needs are not there."""
    if not _c_ok(p, *arrays):
        return None
    H, D = _rows_width(p)
    if rows is None:
        return H, D, H, None, None
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    return H, D, rows.size, rows.ctypes.data, rows  # (rows kept alive with its pointer)


def _check_update(rc, err, op, H):
    if rc:
        raise ExecutionError(f"{op}: Grad has row {int(err[0])} but Param has {H} rows")
    return True


def adam(p, m1, m2, g, rows, lr_t, beta1, beta2, eps_t, op):
    """Paddle's Adam step in place on float32 C-contiguous p, m1, m2: every element from g of
    p's shape (rows None), or the unique `rows` from g's rows (lazy mode). Returns False when
    the arrays do not suit the C kernel (the caller uses numpy then)."""
    lib = _native()
    args = lib and _update_args(p, (m1, m2, g), rows)
    if not args:
        return False
    H, D, n, ptr, _keep = args
    err = np.zeros(2, np.int64)
    return _check_update(lib.adam_f32(p.ctypes.data, m1.ctypes.data, m2.ctypes.data,
                                      g.ctypes.data, ptr, n, D, H, lr_t, beta1, 1.0 - beta1,
                                      beta2, 1.0 - beta2, eps_t, err.ctypes.data), err, op, H)


def adagrad(p, m, g, rows, lr, eps, op):
    """Adagrad's step in place (as adam: every element, or the unique `rows`); False when the
    arrays do not suit the C kernel."""
    lib = _native()
    args = lib and _update_args(p, (m, g), rows)
    if not args:
        return False
    H, D, n, ptr, _keep = args
    err = np.zeros(2, np.int64)
    return _check_update(lib.adagrad_f32(p.ctypes.data, m.ctypes.data, g.ctypes.data, ptr, n,
                                         D, H, lr, eps, err.ctypes.data), err, op, H)


def merge_rows(rows, value):
    """(unique rows, their values summed) of a row-wise gradient, the rows in first-seen
    order (SelectedRows.merged() sorts them; an update of unique rows does not care), or
    None when the C kernel does not apply. Duplicates are summed in their order (merged()'s
    np.add.reduceat may associate a long run differently: equal up to rounding)."""
    lib = _native()
    if not lib or value.dtype != np.float32 or len(rows) != value.shape[0]:
        return None
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    value = np.ascontiguousarray(value)
    D = _rows_width(value)[1]
    out_rows = np.empty(len(rows), np.int64)
    out_v = np.empty((len(rows), D), np.float32)
    m = lib.merge_rows_f32(rows.ctypes.data, value.ctypes.data, len(rows), D,
                           out_rows.ctypes.data, out_v.ctypes.data)
    if m < 0:
        raise MemoryError("merge_rows: out of memory")
    return out_rows[:m], out_v[:m].reshape((m,) + value.shape[1:])
