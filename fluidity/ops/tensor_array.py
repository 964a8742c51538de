"""Tensor arrays and rank tables, which loops over variable-length sequences (DynamicRNN,
IfElse) are built from: write_to_array, read_from_array, lod_array_length,
tensor_array_to_tensor (the entries concatenated or stacked); lod_rank_table,
max_sequence_len, lod_tensor_to_array, array_to_lod_tensor, shrink_rnn_memory,
reorder_lod_tensor_by_rank; split_lod_tensor, merge_lod_tensor (and merge_lod_tensor_infer). All are `kind = "value"` ops
but write_to_array (`"ctx"`: it changes its output array in place).
"""
import numpy as np

from ..core.dtypes import VarType
from ..core.rank_table import LoDRankTable
from ..core.tensor import LoDTensor, LoDTensorArray, lengths_to_offsets
from ..errors import ExecutionError
from .common import dense, is_empty, scalar_value, zeros_like_value
from .registry import In, OpDef, Out


ARRAY = VarType.LOD_TENSOR_ARRAY
INT64 = VarType.INT64


# ---------------------------------------------------------------------------------------
# tensor arrays
# ---------------------------------------------------------------------------------------
def _index(t):
    i = int(scalar_value(t, "array index I"))
    if i < 0:
        raise ExecutionError(f"array index I is negative ({i})")
    return i


class WriteToArray(OpDef):
    type = "write_to_array"
    inputs = (In("X"), In("I", no_grad=True))
    outputs = (Out("Out"),)
    kind = "ctx"
    doc = "Out[I] = a copy of X; Out (a tensor array, changed in place) grows to I+1 entries."

    @staticmethod
    def infer_shape(ctx):
        x = ctx.input_var("X")
        ctx.set_output("Out", x.shape, x.dtype, x.lod_level, type=ARRAY)

    @staticmethod
    def make_step(p):
        x, i, o = p.in_one("X"), p.in_one("I"), p.out_one("Out")

        def step(frame, env):
            k = _index(frame[i].value)
            arr = frame[o].value
            if not isinstance(arr, LoDTensorArray):
                arr = frame[o].value = LoDTensorArray()
            while len(arr) <= k:
                list.append(arr, LoDTensor())
            v = dense(frame[x].value)
            arr[k] = LoDTensor() if is_empty(v) else LoDTensor(v._array.copy(), v._lod)
        return step

    grad = staticmethod(lambda g: g.op(
        "read_from_array", {"X": g.output_grad("Out"), "I": g.input("I"), "X_W": g.input("X")},
        {"Out": g.input_grad("X")}))


class ReadFromArray(OpDef):
    type = "read_from_array"
    inputs = (In("X"), In("I", no_grad=True), In("X_W", dispensable=True, no_grad=True))
    outputs = (Out("Out"),)
    kind = "value"
    doc = ("Out = a copy of X[I]. As the gradient of write_to_array (X_W: the tensor written), "
           "a missing entry reads as zeros shaped like X_W.")

    @staticmethod
    def infer_shape(ctx):
        a = ctx.input_var("X")
        ctx.set_output("Out", a.shape, a.dtype, a.lod_level, type=VarType.LOD_TENSOR)

    @staticmethod
    def kernel(arr, i, x_w):
        k = _index(i)
        if isinstance(arr, LoDTensorArray) and k < len(arr) and not is_empty(arr[k]):
            t = arr[k]
            return LoDTensor(t._array.copy(), t._lod)
        if x_w is not None:
            return zeros_like_value(x_w)
        n = len(arr) if isinstance(arr, LoDTensorArray) else 0
        raise ExecutionError(f"read_from_array: index {k} is out of range; the array has {n} "
                             f"entries")

    grad = staticmethod(lambda g: g.op(
        "write_to_array", {"X": g.output_grad("Out"), "I": g.input("I")},
        {"Out": g.input_grad("X")}))


class LoDArrayLength(OpDef):
    type = "lod_array_length"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    kind = "value"
    doc = "Out = the number of entries of tensor array X (int64 [1])."

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", [1], INT64)

    @staticmethod
    def kernel(arr):
        return LoDTensor(np.array([len(arr) if arr is not None else 0], np.int64))


class TensorArrayToTensor(OpDef):
    type = "tensor_array_to_tensor"
    kind = "value"
    inputs = (In("X"),)
    outputs = (Out("Out"), Out("OutIndex"))
    attrs = {"axis": 1, "use_stack": False}
    share_lod = None
    doc = ("Out = the array's tensors concatenated (or stacked, use_stack) along `axis`; "
           "OutIndex = each tensor's size along axis.")

    @staticmethod
    def infer_shape(ctx):
        # as Paddle: the array's declared shape is its entries' (write_to_array sets it);
        # the stacked (or concatenated) axis has an unknown size
        dims = ctx.input_shape("X")
        axis, stack = ctx.attr("axis"), ctx.attr("use_stack")
        shape = None
        if dims:
            shape = list(dims)
            rank = len(shape) + (1 if stack else 0)
            a = axis + rank if axis < 0 else axis
            if not 0 <= a < rank:
                ctx.fail(f"axis {axis} is out of range for the array's entries of shape "
                         f"{dims}")
            if stack:
                shape.insert(a, -1)
            else:
                shape[a] = -1
        ctx.set_output("Out", shape, ctx.input_dtype("X"))
        ctx.set_output("OutIndex", [-1], VarType.INT32)

    @staticmethod
    def kernel(arr, *, axis, use_stack):
        if not isinstance(arr, LoDTensorArray) or not len(arr):
            raise ExecutionError("tensor_array_to_tensor: X must be a non-empty tensor array")
        parts = [t._array for t in arr if not is_empty(t)]
        out = np.stack(parts, axis) if use_stack else np.concatenate(parts, axis)
        sizes = [1 if use_stack else p.shape[axis] for p in parts]
        return LoDTensor(out), LoDTensor(np.array(sizes, np.int32))

    grad = staticmethod(lambda g: g.op(
        "tensor_array_to_tensor_grad", {"X": g.input("X"), "Out@GRAD": g.output_grad("Out")},
        {"X@GRAD": g.input_grad("X")}, g.attrs()))


class TensorArrayToTensorGrad(OpDef):
    type = "tensor_array_to_tensor_grad"
    kind = "value"
    inputs = (In("X"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = TensorArrayToTensor.attrs
    infer_shape = None
    share_lod = None
    doc = ("X@GRAD = Out@GRAD split back into the array's entries (unstacked with use_stack); "
           "an empty entry of X gets an empty gradient.")

    @staticmethod
    def kernel(arr, dout, *, axis, use_stack):
        if not isinstance(arr, LoDTensorArray) or not len(arr):
            raise ExecutionError("tensor_array_to_tensor_grad: X must be a non-empty tensor "
                                 "array")
        d = dout._array if isinstance(dout, LoDTensor) else np.asarray(dout)
        full = [k for k, t in enumerate(arr) if not is_empty(t)]
        if use_stack:
            a = axis + d.ndim if axis < 0 else axis
            pieces = [np.take(d, j, axis=a) for j in range(len(full))]
        else:
            a = axis + d.ndim if axis < 0 else axis
            cuts = np.cumsum([arr[k]._array.shape[a] for k in full])[:-1]
            pieces = np.split(d, cuts, axis=a)
        if len(pieces) != len(full) or (use_stack and d.shape[a] != len(full)):
            raise ExecutionError(f"tensor_array_to_tensor_grad: Out@GRAD {list(d.shape)} does "
                                 f"not split into the array's {len(full)} entries")
        out = LoDTensorArray()
        for _ in arr:
            list.append(out, LoDTensor())
        for k, piece in zip(full, pieces):
            out[k] = LoDTensor(np.ascontiguousarray(piece))
        return out


# ---------------------------------------------------------------------------------------
# rank tables: sequences sorted by length, and moving between LoD tensors and time-major arrays
# ---------------------------------------------------------------------------------------
def _sub_lod(lod, level, start, end):
    """Rows and nested LoD (lengths per deeper level) of items [start, end) of LoD `level`
    (level == len(lod): items are rows)."""
    sub = []
    for lv in lod[level:]:
        sub.append([lv[k + 1] - lv[k] for k in range(start, end)])
        start, end = lv[start], lv[end]
    return start, end, sub


def _join_lods(subs):
    """Concatenate nested-LoD pieces (lists of per-level lengths) into offsets."""
    if not subs or not subs[0]:
        return []
    return [lengths_to_offsets([n for s in subs for n in s[k]]) for k in range(len(subs[0]))]


class LoDRankTableOp(OpDef):
    type = "lod_rank_table"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    attrs = {"level": 0}
    kind = "value"
    doc = ("Out = the sequences at LoD `level` of X, as (index, length) sorted by length, "
           "longest first (stable).")

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", type=VarType.LOD_RANK_TABLE)

    @staticmethod
    def kernel(x, *, level):
        lod = x._lod
        if not lod or level >= len(lod):
            raise ExecutionError(f"lod_rank_table: X needs LoD level {level}, it has "
                                 f"{len(lod)} levels; feed a LoDTensor with sequence lengths")
        lens = np.diff(lod[level])
        order = np.argsort(-lens, kind="stable")
        return LoDRankTable([(int(i), int(lens[i])) for i in order], lod[:level])


class MaxSequenceLen(OpDef):
    type = "max_sequence_len"
    inputs = (In("RankTable"),)
    outputs = (Out("Out"),)
    kind = "value"
    doc = "Out = the longest sequence's length in the rank table (int64 [1])."

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", [1], INT64)

    @staticmethod
    def kernel(table):
        return LoDTensor(np.array([table.max_length()], np.int64))


def _table_lod(x, table, op):
    """The LoD to split X by: its own, or (a gradient that lost it) the table's lengths."""
    level = len(table.coarse_lod)
    if len(x._lod) > level:
        return x._lod, level
    lens = [0] * len(table)
    for i, n in table.items():
        lens[i] = n
    if level == 0 and sum(lens) == len(x._array):
        return [lengths_to_offsets(lens)], 0
    raise ExecutionError(f"{op}: X has {len(x._lod)} LoD levels; the rank table was made at "
                         f"level {level}")


class LoDTensorToArray(OpDef):
    type = "lod_tensor_to_array"
    inputs = (In("X"), In("RankTable", no_grad=True))
    outputs = (Out("Out"),)
    kind = "value"
    doc = ("Split X time-major: Out[t] holds step t of every sequence longer than t, in rank "
           "order (longest first), so the batch shrinks as sequences end.")

    @staticmethod
    def infer_shape(ctx):
        x = ctx.input_var("X")
        ctx.set_output("Out", x.shape, x.dtype, max(x.lod_level - 1, 0), type=ARRAY)

    @staticmethod
    def kernel(x, table):
        lod, level = _table_lod(x, table, "lod_tensor_to_array")
        data = x._array
        starts = np.asarray(lod[level][:-1], np.int64)
        idx = np.array(table.indices(), np.int64)
        out = LoDTensorArray()
        for t in range(table.max_length()):
            k = table.count_longer_than(t)
            if level + 1 == len(lod):   # items are rows: one gather per step
                list.append(out, LoDTensor(data[starts[idx[:k]] + t]))
                continue
            pieces = [_sub_lod(lod, level + 1, s, s + 1) for s in starts[idx[:k]] + t]
            rows = np.concatenate([np.arange(a, b) for a, b, _ in pieces])
            list.append(out, LoDTensor(data[rows], _join_lods([s for _, _, s in pieces])))
        return out

    grad = staticmethod(lambda g: g.op(
        "array_to_lod_tensor", {"X": g.output_grad("Out"), "RankTable": g.input("RankTable")},
        {"Out": g.input_grad("X")}))


class ArrayToLoDTensor(OpDef):
    type = "array_to_lod_tensor"
    inputs = (In("X"), In("RankTable", no_grad=True))
    outputs = (Out("Out"),)
    kind = "value"
    doc = "Inverse of lod_tensor_to_array: sequences back in their original order, with LoD."

    @staticmethod
    def infer_shape(ctx):
        a = ctx.input_var("X")
        ctx.set_output("Out", a.shape, a.dtype, a.lod_level + 1)

    @staticmethod
    def kernel(arr, table):
        items = table.items()
        n = len(items)
        lens = [0] * n
        for i, length in items:
            lens[i] = length
        elems = [arr[t] if t < len(arr) and not is_empty(arr[t]) else None
                 for t in range(items[0][1] if items else 0)]
        proto = next((e for e in elems if e is not None), None)
        if proto is None:
            raise ExecutionError("array_to_lod_tensor: the array has no entries")
        offsets = lengths_to_offsets(lens)
        if not any(e is not None and e._lod for e in elems):    # one row per step
            out = np.zeros((offsets[-1],) + proto._array.shape[1:], proto._array.dtype)
            order = np.array([i for i, _ in items], np.int64)
            base = np.asarray(offsets[:-1], np.int64)
            for t, e in enumerate(elems):
                if e is not None:
                    k = table.count_longer_than(t)
                    out[base[order[:k]] + t] = e._array[:k]
            return LoDTensor(out, table.coarse_lod + [offsets])
        per_seq = [[] for _ in range(n)]
        for t, e in enumerate(elems):
            if e is None:
                raise ExecutionError(f"array_to_lod_tensor: entry {t} of the array is empty")
            for r in range(table.count_longer_than(t)):
                a, b, sub = _sub_lod(e._lod, 0, r, r + 1)
                per_seq[items[r][0]].append((e._array[a:b], sub))
        pieces = [pc for seq in per_seq for pc in seq]
        level = lengths_to_offsets([len(seq) for seq in per_seq])
        return LoDTensor(np.concatenate([a for a, _ in pieces]),
                         table.coarse_lod + [level] + _join_lods([s for _, s in pieces]))

    grad = staticmethod(lambda g: g.op(
        "lod_tensor_to_array", {"X": g.output_grad("Out"), "RankTable": g.input("RankTable")},
        {"Out": g.input_grad("X")}))


def _first_items(x, k):
    """The first k items of X: sequences at LoD level 0, or rows without LoD."""
    if not x._lod:
        return LoDTensor(x._array[:k])
    a, b, sub = _sub_lod(x._lod, 0, 0, k)
    return LoDTensor(x._array[a:b], [lengths_to_offsets(s) for s in sub])


class ShrinkRNNMemory(OpDef):
    type = "shrink_rnn_memory"
    inputs = (In("X"), In("RankTable", no_grad=True), In("I", no_grad=True))
    outputs = (Out("Out"),)
    kind = "value"
    doc = "Out = the first k items of X, k = number of sequences longer than I (DynamicRNN)."

    @staticmethod
    def infer_shape(ctx):
        x = ctx.input_var("X")
        ctx.set_output("Out", [-1] + list(x.shape[1:]), x.dtype, x.lod_level)

    @staticmethod
    def kernel(x, table, i):
        return _first_items(x, table.count_longer_than(_index(i)))

    grad = staticmethod(lambda g: g.op(
        "shrink_rnn_memory_grad", {"X": g.input("X"), "Out@GRAD": g.output_grad("Out")},
        {"X@GRAD": g.input_grad("X")}))


class ShrinkRNNMemoryGrad(OpDef):
    type = "shrink_rnn_memory_grad"
    inputs = (In("X"), In("Out@GRAD", dispensable=True))
    outputs = (Out("X@GRAD"),)
    kind = "value"
    infer_shape = None

    @staticmethod
    def kernel(x, dout):
        dx = np.zeros_like(x._array)
        if not is_empty(dout):
            d = dense(dout)._array
            dx[:len(d)] = d
        return LoDTensor(dx, x._lod)


def _item_ranges(x):
    """(start, end) rows of each item of X: sequences at LoD level 0, or single rows."""
    if not x._lod:
        return [(r, r + 1) for r in range(len(x._array))], None
    top = x._lod[0]
    return [_sub_lod(x._lod, 0, k, k + 1) for k in range(len(top) - 1)], True


def _pick_items(x, order):
    """The items of X (see _item_ranges) at positions `order`, with their LoD."""
    ranges, nested = _item_ranges(x)
    if not nested:
        return LoDTensor(x._array[np.asarray(order, np.int64)])
    picked = [ranges[k] for k in order]
    rows = np.concatenate([np.arange(a, b) for a, b, _ in picked]) if picked else []
    return LoDTensor(x._array[np.asarray(rows, np.int64)], _join_lods([s for _, _, s in picked]))


class ReorderLoDTensorByRank(OpDef):
    type = "reorder_lod_tensor_by_rank"
    inputs = (In("X"), In("RankTable", no_grad=True))
    outputs = (Out("Out"),)
    kind = "value"
    doc = "Out = the items of X (level-0 sequences, or rows) in the rank table's order."

    @staticmethod
    def infer_shape(ctx):
        ctx.share("X", "Out")

    @staticmethod
    def kernel(x, table):
        return _pick_items(x, table.indices())

    grad = staticmethod(lambda g: g.op(
        "reorder_lod_tensor_by_rank_grad",
        {"X": g.output_grad("Out"), "RankTable": g.input("RankTable")}, {"Out": g.input_grad("X")}))


class ReorderLoDTensorByRankGrad(OpDef):
    type = "reorder_lod_tensor_by_rank_grad"
    inputs = (In("X"), In("RankTable"))
    outputs = (Out("Out"),)
    kind = "value"
    infer_shape = None

    @staticmethod
    def kernel(dout, table):
        inverse = np.argsort(table.indices(), kind="stable")
        return _pick_items(dense(dout), inverse)


# ---------------------------------------------------------------------------------------
# split_lod_tensor / merge_lod_tensor (IfElse: rows or sequences routed by a mask)
# ---------------------------------------------------------------------------------------
def _bool_mask(mask, n, op):
    m = np.asarray(mask._array).reshape(-1).astype(bool)
    if len(m) != n:
        raise ExecutionError(f"{op}: Mask has {len(m)} entries for {n} items (rows, or "
                             f"sequences of a LoD input)")
    return m


class SplitLoDTensor(OpDef):
    type = "split_lod_tensor"
    inputs = (In("X"), In("Mask", no_grad=True))
    outputs = (Out("OutTrue"), Out("OutFalse"))
    attrs = {"level": 0}
    kind = "value"
    doc = "OutTrue/OutFalse = the items of X (rows, or level-0 sequences) where Mask is/isn't set."

    @staticmethod
    def infer_shape(ctx):
        x = ctx.input_var("X")
        for slot in ("OutTrue", "OutFalse"):
            ctx.set_output(slot, [-1] + list(x.shape[1:]), x.dtype, x.lod_level)

    @staticmethod
    def kernel(x, mask):
        x = dense(x)
        m = _bool_mask(mask, len(_item_ranges(x)[0]), "split_lod_tensor")
        return _pick_items(x, np.flatnonzero(m)), _pick_items(x, np.flatnonzero(~m))

    grad = staticmethod(lambda g: g.op(
        "merge_lod_tensor", {"X": g.input("X"), "Mask": g.input("Mask"),
                             "InTrue": g.output_grad("OutTrue"),
                             "InFalse": g.output_grad("OutFalse")},
        {"Out": g.input_grad("X")}, {"level": g.attr("level")}))


class MergeLoDTensor(OpDef):
    type = "merge_lod_tensor"
    inputs = (In("X", no_grad=True), In("Mask", no_grad=True), In("InTrue"), In("InFalse"))
    outputs = (Out("Out"),)
    attrs = {"level": 0}
    kind = "value"
    doc = "Inverse of split_lod_tensor: items of InTrue where Mask is set, of InFalse elsewhere."

    @staticmethod
    def infer_shape(ctx):
        t = ctx.input_var("InTrue")
        ctx.set_output("Out", [-1] + list(t.shape[1:]), t.dtype, t.lod_level)

    @staticmethod
    def kernel(x, mask, in_true, in_false):
        in_true, in_false = dense(in_true), dense(in_false)
        m = np.asarray(mask._array).reshape(-1).astype(bool)
        proto = in_true if not is_empty(in_true) else in_false
        parts = []
        for src, want in ((in_true, m), (in_false, ~m)):
            if is_empty(src):
                src = LoDTensor(np.zeros((int(want.sum()),) + proto._array.shape[1:],
                                         proto._array.dtype))
            parts.append((src, iter(_item_ranges(src)[0])))
        nested = any(src._lod for src, _ in parts)
        rows, subs = [], []
        for flag in m:
            src, it = parts[0] if flag else parts[1]
            r = next(it, None)
            if r is None:
                raise ExecutionError("merge_lod_tensor: InTrue/InFalse have fewer items than "
                                     "Mask selects")
            rows.append(src._array[r[0]:r[1]])
            if nested:
                subs.append(r[2])
        data = np.concatenate(rows) if rows else proto._array[:0]
        return LoDTensor(data, _join_lods(subs) if nested else [])

    grad = staticmethod(lambda g: g.op(
        "split_lod_tensor", {"X": g.output_grad("Out"), "Mask": g.input("Mask")},
        {"OutTrue": g.input_grad("InTrue"), "OutFalse": g.input_grad("InFalse")},
        {"level": g.attr("level")}))


class MergeLoDTensorInfer(MergeLoDTensor):
    """merge_lod_tensor as Paddle's inference passes write it (no gradient)."""
    type = "merge_lod_tensor_infer"
    grad = None
    doc = "merge_lod_tensor without a gradient (inference programs)."
