"""The calling convention of a compiled segment, the Python twin of runtime/segment_args.h.

    int fl_seg_N(int64_t* args, char* arena, int64_t cap, char* err)

`args` is ARGS_HEAD int64 slots, then one tensor record (`TensorArg`, SLOTS int64 slots) per
input of the segment, then one per output. The header says what each field holds; this
module is the one place Python code knows the layout: the native and CUDA plans pack and
unpack through `Args` and the functions below, the renderers name the fields through
`c_field`. tests/codegen/test_abi.py parses the header and checks every constant and field
here against it, so the two cannot drift apart.
"""
import ctypes

import numpy as np

from ..core.lod import offsets_problem

HEADER = "segment_args.h"      # in codegen/runtime/
MAX_DIMS = 8
ARGS_HEAD = 1
ARG_NEED = 0                   # the head slot where a segment asks for a larger arena


class TensorArg(ctypes.Structure):
    """One tensor record (segment_args.h's fl_tensor_arg)."""
    _fields_ = [("data", ctypes.c_int64), ("ndim", ctypes.c_int64),
                ("dims", ctypes.c_int64 * MAX_DIMS), ("aux", ctypes.c_int64),
                ("aux_len", ctypes.c_int64)]


C_STRUCT = "fl_tensor_arg"
SLOTS = ctypes.sizeof(TensorArg) // 8
# each field's first slot within a record
DATA, NDIM, DIMS, AUX, AUX_LEN = (getattr(TensorArg, f).offset // 8
                                  for f, _ in TensorArg._fields_)
NOT_WRITTEN = -1               # an output's ndim when a branch that sets it did not run
IN_PLACE = -1                  # an output's data when it was updated in its own memory


def args_len(n_inputs, n_outputs):
    """int64 slots of the args of a segment with these many inputs and outputs."""
    return ARGS_HEAD + (n_inputs + n_outputs) * SLOTS


class Args:
    """The argument vector of one segment call (one per thread: the segment writes its
    outputs' records into it). `inputs[j]` and `outputs[j]` are views of the records."""
    __slots__ = ("vector", "address", "inputs", "outputs")

    def __init__(self, n_inputs, n_outputs, empty=np.empty):
        """`empty(n, dtype)` allocates the vector (a Hogwild worker's own on cache lines of
        its own: shared_memory.aligned_empty); it is zeroed here."""
        self.vector = empty(args_len(n_inputs, n_outputs), np.int64)
        self.vector[:] = 0
        self.address = self.vector.ctypes.data
        records = self.vector[ARGS_HEAD:].reshape(n_inputs + n_outputs, SLOTS)
        self.inputs = list(records[:n_inputs])
        self.outputs = list(records[n_inputs:])

    @property
    def need(self):
        """The arena bytes the segment asked for (after it returned 1)."""
        return int(self.vector[ARG_NEED])


def input_slot(j):
    """The int64 slot of the args vector where input j's record starts."""
    return ARGS_HEAD + j * SLOTS


def put_tensor(record, address, shape):
    """An input's data address, rank and dims into its record."""
    record[DATA] = address
    record[NDIM] = len(shape)
    record[DIMS:DIMS + len(shape)] = shape


def put_aux(record, address, count):
    """An input's LoD offsets (address, count) or SelectedRows ids (address, height)."""
    record[AUX] = address
    record[AUX_LEN] = count


MAX_LOD_LEVELS = 2             # the most LoD levels a segment input may carry


def packed_lod(lod, n_levels, rows):
    """(int64 offsets, count) for an input record's aux fields: the `n_levels` finest levels
    of LoD `lod` back to back, outer first, and the count of the outermost (each next
    level's count is the last offset before it plus one: render.py's reading); or a str
    saying what is wrong (a level that is not offsets of the next level's entries, the
    last of its `rows` rows; None: not known). One level is the finest, whatever `lod`
    holds above it (the LoD the caller gets back is the fed value's own)."""
    if len(lod) < n_levels:
        return f"has {len(lod)} LoD levels, compiled for {n_levels}"
    levels = [np.asarray(level, np.int64) for level in lod[len(lod) - n_levels:]]
    for k, level in enumerate(levels):
        limit = rows if k == n_levels - 1 else levels[k + 1].shape[0] - 1
        bad = offsets_problem(level, limit)
        if bad is not None and k == n_levels - 1:
            return f"has a LoD that is not offsets of its rows: {bad}"
        if bad is not None:
            return (f"has a LoD whose level {len(lod) - n_levels + k} is not offsets of the "
                    f"next level's entries: {bad}")
    packed = levels[0] if n_levels == 1 else np.concatenate(levels)
    return packed, levels[0].shape[0]


def output_shape(record, ndim):
    """An output's dims as a tuple, or None when it was not written."""
    if record[NDIM] == NOT_WRITTEN:
        return None
    return tuple(record[DIMS:DIMS + ndim].tolist())


def output_offset(record):
    """An output's byte offset in the arena."""
    return int(record[DATA])


def output_aux(record):
    """(arena offset of a SelectedRows output's row ids, its height)."""
    return int(record[AUX]), int(record[AUX_LEN])


def lod_of_block(record):
    """The LoD (levels of offsets, outer first) in the block runtime/beam.h's lod_export
    made for an output's record (its aux; aux_len its levels): int64 n_levels,
    count[n_levels], then the levels' offsets. The caller frees the block."""
    addr, n = int(record[AUX]), int(record[AUX_LEN])
    head = np.ctypeslib.as_array((ctypes.c_int64 * (1 + n)).from_address(addr))
    counts = head[1:].tolist()
    flat = np.ctypeslib.as_array((ctypes.c_int64 * sum(counts)).from_address(
        addr + 8 * (1 + n))) if sum(counts) else np.zeros(0, np.int64)
    out, at = [], 0
    for c in counts:
        out.append(flat[at:at + c].tolist())
        at += c
    return out


def held_of_block(addr, dtype):
    """(array, LoD) of the block runtime/beam.h's held_export made at `addr`: int64 ndim,
    dims, n_levels, counts, the levels' offsets, then the bytes. The caller frees it."""
    def words(at, n):
        return np.ctypeslib.as_array((ctypes.c_int64 * n).from_address(at)).tolist() \
            if n else []
    at = addr
    (ndim,) = words(at, 1)
    dims = words(at + 8, ndim)
    at += 8 * (1 + ndim)
    (n_levels,) = words(at, 1)
    counts = words(at + 8, n_levels)
    at += 8 * (1 + n_levels)
    lod = []
    for c in counts:
        lod.append(words(at, c))
        at += 8 * c
    out = np.empty(dims, dtype)
    if out.nbytes:
        ctypes.memmove(out.ctypes.data, at, out.nbytes)
    return out, lod


def c_field(records, j, field, index=None):
    """C text naming `field` of record j of the fl_tensor_arg array `records` (the
    renderers' one way to read or write the convention)."""
    names = {f for f, _ in TensorArg._fields_}
    if field not in names:
        raise ValueError(f"{C_STRUCT} has no field {field!r}")
    return f"{records}[{j}].{field}" + ("" if index is None else f"[{index}]")
