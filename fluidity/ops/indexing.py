"""Slicing and gathering: slice, strided_slice, gather, index_select, masked_select,
index_sample (a per-row gather) and multiplex (row i from the candidate Ids[i]).

Conventions as in tensor.py: Out is a copy (never a view of X), tensor inputs (StartsTensor,
Axis, ...) override the attributes at run time, and shape rules raise ShapeError.
"""
import numpy as np

from ..core.dtypes import VarType
from ..core.names import EMPTY_VAR_NAME
from ..core.tensor import LoDTensor, LoDTensorArray
from ..errors import ExecutionError, ShapeError
from .common import (grad_maker, infer_with, ints_from, is_empty, norm_axis, present,
                     reduce_to_shape)
from .registry import In, OpDef, Out, ints

ARRAY, LOD_TENSOR = VarType.LOD_TENSOR_ARRAY, VarType.LOD_TENSOR


# --- slice ---------------------------------------------------------------------------------
def slice_plan(shape, axes, starts, ends, decrease):
    """(index, sliced shape, output shape) of Paddle's slice. Negative starts/ends count from
    the end; both are then clamped to [0, dim]; an empty range gives a 0-size dim. Unknown
    dims (and starts/ends given as -1 at build time by tensors) give -1."""
    if not len(axes) == len(starts) == len(ends):
        raise ShapeError(f"axes {axes}, starts {starts} and ends {ends} differ in length")
    index = [slice(None)] * len(shape)
    sliced = list(shape)
    for a, s, e in zip(axes, starts, ends):
        a = norm_axis(a, len(shape), "axes entry")
        dim = shape[a]
        if dim < 0 or s is None or e is None:
            sliced[a] = -1
            continue
        s = min(max(s + dim if s < 0 else s, 0), dim)
        e = min(max(e + dim if e < 0 else e, 0), dim)
        e = max(e, s)
        index[a] = slice(s, e)
        sliced[a] = e - s
    drop = {norm_axis(a, len(shape), "decrease_axis entry") for a in decrease}
    for a in drop:
        if sliced[a] not in (1, -1):
            raise ShapeError(f"decrease_axis {sorted(drop)}: dim {a} has size {sliced[a]}, not 1")
    out = [d for i, d in enumerate(sliced) if i not in drop]
    return tuple(index), sliced, out or [1]     # Fluid 1.x: dropping every dim leaves [1]


def _slice_grad(g):
    ins = {s.name: g.input(s.name) for s in Slice.inputs}
    ins["Out@GRAD"] = g.output_grad("Out")
    g.op("slice_grad", present(ins), {"Input@GRAD": g.input_grad("Input")}, g.attrs())


def run_time_bounds(attrs, starts_t, ends_t, starts_l, ends_l):
    """(starts, ends) of a slice at run time: the tensors' values, else the attributes; and
    Paddle's rule for `x[i]` with a tensor i = -1 (Fluid makes its end i + 1 = 0): on a
    decreased axis whose bounds came from tensors (infer_flags -1), start -1 with end 0 means
    the last element, not an empty range."""
    starts = list(ints_from(starts_t, starts_l) or attrs["starts"])
    ends = list(ints_from(ends_t, ends_l) or attrs["ends"])
    return starts, last_element_ends(attrs, starts, ends)


def last_element_ends(attrs, starts, ends, strides=None):
    """`ends` with Paddle's rule for a tensor index -1 applied (slice and strided_slice,
    forward stride): start -1, end 0 on a decreased axis whose bounds came from tensors."""
    flags, decrease = attrs["infer_flags"], set(attrs["decrease_axis"])
    ends = list(ends)
    for i, a in enumerate(attrs["axes"]):
        if i < len(flags) and flags[i] == -1 and a in decrease and i < len(starts) and \
                i < len(ends) and starts[i] == -1 and ends[i] == 0 and \
                (strides is None or (i < len(strides) and strides[i] > 0)):
            ends[i] = 10000000
    return ends


class Slice(OpDef):
    type = "slice"
    inputs = (In("Input"),
              In("StartsTensor", dispensable=True, no_grad=True),
              In("EndsTensor", dispensable=True, no_grad=True),
              In("StartsTensorList", duplicable=True, dispensable=True, no_grad=True),
              In("EndsTensorList", duplicable=True, dispensable=True, no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"axes": ints(), "starts": ints(), "ends": ints(), "infer_flags": ints(),
             "decrease_axis": ints()}
    share_lod = "Input"
    lod_outputs = ("Out",)
    doc = ("Out = Input[starts:ends] on `axes` (Python-style clamping), then the dims in "
           "`decrease_axis` (size 1) removed.")

    @staticmethod
    def infer_shape(ctx):
        starts, ends = list(ctx.attr("starts")), list(ctx.attr("ends"))
        axes = ctx.attr("axes")
        if ctx.input_type("Input") == ARRAY:
            # Fluid 1.8: a range of the array's entries (an array), or with decrease_axis
            # one entry (a tensor); declared with the array's own (entry) shape
            if len(axes) != 1:
                ctx.fail(f"slicing a LoDTensorArray takes one axis, got axes {list(axes)}",
                         error=ValueError)
            entry = ARRAY if not ctx.attr("decrease_axis") else LOD_TENSOR
            ctx.set_output("Out", ctx.input_shape("Input"), ctx.input_dtype("Input"),
                           type=entry)
            return
        if ctx.has_input("StartsTensor") or ctx.has_input("StartsTensorList"):
            starts = [None] * len(axes)
        if ctx.has_input("EndsTensor") or ctx.has_input("EndsTensorList"):
            ends = [None] * len(axes)
        flags = ctx.attr("infer_flags")
        if flags and len(flags) == len(axes):  # -1: this axis' bounds come from a tensor
            starts = [None if f == -1 else s for f, s in zip(flags, starts)]
        _, _, out = infer_with(ctx, slice_plan, ctx.input_shape("Input"), axes, starts, ends,
                           ctx.attr("decrease_axis"))
        ctx.set_output("Out", out, ctx.input_dtype("Input"))

    @classmethod
    def prepare(cls, attrs, outputs):
        axes, decrease = attrs["axes"], attrs["decrease_axis"]

        def kernel(x, starts_t, ends_t, starts_l, ends_l):
            starts, ends = run_time_bounds(attrs, starts_t, ends_t, starts_l, ends_l)
            index, _, out = slice_plan(list(x.shape), axes, starts, ends, decrease)
            return x[index].copy().reshape(out)  # a copy: Out shares no memory with Input
        return kernel

    @staticmethod
    def tensor_array_kernel(attrs):
        """Slice of a LoDTensorArray (the executor runs this when Input is declared one):
        entries [start, end) of the array (one axis; negative bounds count from its length,
        then clamped), copied into a new array, or with decrease_axis entry `start` alone."""
        decrease = bool(attrs["decrease_axis"])

        def kernel(x, starts_t, ends_t, starts_l, ends_l):
            start, end = _array_range(attrs, x, starts_t, ends_t, starts_l, ends_l)
            if decrease:
                return _copy_entry(x[start])
            return LoDTensorArray(_copy_entry(x[i]) for i in range(start, end))
        return kernel

    grad = staticmethod(_slice_grad)


def _copy_entry(t):
    return LoDTensor(t._array.copy(), t._lod) if not is_empty(t) else LoDTensor()


def _array_range(attrs, x, starts_t, ends_t, starts_l, ends_l):
    """[start, end) of a slice over array `x`'s entries, as Fluid 1.8's slice kernel: the
    first start and end, counted from the length when negative, clamped to it; empty is an
    error."""
    if not isinstance(x, LoDTensorArray):
        raise ExecutionError(f"slice: Input is declared a LoDTensorArray but holds "
                             f"{type(x).__name__}")
    def arr(t):
        return None if is_empty(t) else t._array

    starts, ends = run_time_bounds(attrs, arr(starts_t), arr(ends_t),
                                   [arr(t) for t in starts_l or ()] or None,
                                   [arr(t) for t in ends_l or ()] or None)
    if len(starts) != 1 or len(ends) != 1:
        raise ExecutionError(f"slice: a LoDTensorArray takes one start and one end, got "
                             f"starts {starts}, ends {ends}")
    n = len(x)
    start = max(starts[0] + n if starts[0] < 0 else starts[0], 0)
    end = min(max(ends[0] + n if ends[0] < 0 else ends[0], 0), n)
    if end <= start:
        raise ExecutionError(f"slice: ends ({end}) must be greater than starts ({start}) "
                             f"over the {n} entries of the LoDTensorArray")
    return start, end


def _slice_double_grad(g):
    """The grad of slice_grad (Input@GRAD = Out@GRAD scattered into zeros): linear in
    Out@GRAD, which gets the slice of ddInput (Fluid's slice_grad_grad)."""
    out = g.input_grad("Out@GRAD")
    if all(n == EMPTY_VAR_NAME for n in out):
        return
    ins = {s.name: g.input(s.name) for s in Slice.inputs}
    ins["Input"] = g.output_grad("Input@GRAD")
    g.op("slice", present(ins), {"Out": out}, g.attrs())


class SliceGrad(OpDef):
    type = "slice_grad"
    inputs = Slice.inputs + (In("Out@GRAD"),)
    outputs = (Out("Input@GRAD"),)
    attrs = Slice.attrs
    infer_shape = None
    share_lod = None
    grad = staticmethod(_slice_double_grad)

    @classmethod
    def prepare(cls, attrs, outputs):
        axes, decrease = attrs["axes"], attrs["decrease_axis"]

        def kernel(x, starts_t, ends_t, starts_l, ends_l, dout):
            starts, ends = run_time_bounds(attrs, starts_t, ends_t, starts_l, ends_l)
            index, sliced, _ = slice_plan(list(x.shape), axes, starts, ends, decrease)
            dx = np.zeros_like(x)
            dx[index] = dout.reshape(sliced)
            return dx
        return kernel

    @staticmethod
    def tensor_array_kernel(attrs):
        """Input@GRAD of a LoDTensorArray Input: an array as long as Input, each entry zeros
        shaped as Input's, but entries [start, ...) which take Out@GRAD's (an array's
        entries, or the one tensor of a decreased slice), as Fluid 1.8's slice_grad."""
        def kernel(x, starts_t, ends_t, starts_l, ends_l, dout):
            start, _ = _array_range(attrs, x, starts_t, ends_t, starts_l, ends_l)
            dx = LoDTensorArray(LoDTensor(np.zeros_like(t._array), t._lod)
                                if not is_empty(t) else LoDTensor() for t in x)
            douts = dout if isinstance(dout, LoDTensorArray) else [dout]
            for i, d in enumerate(douts):
                if start + i < len(dx) and not is_empty(d):
                    dx[start + i] = _copy_entry(d)
            return dx
        return kernel


# --- strided_slice -------------------------------------------------------------------------
def strided_plan(shape, axes, starts, ends, strides, decrease):
    """(per-dim index arrays or slices, sliced shape, output shape) of Paddle's strided_slice:
    negative starts/ends count from the end once; stride > 0 takes [start, end) clamped to
    the dim; stride < 0 goes down from min(start, dim - 1) to max(end, -1), exclusive."""
    if not len(axes) == len(starts) == len(ends) == len(strides):
        raise ShapeError(f"axes {axes}, starts {starts}, ends {ends} and strides {strides} "
                         f"differ in length")
    index = [slice(None)] * len(shape)
    sliced = list(shape)
    for a, s, e, st in zip(axes, starts, ends, strides):
        a = norm_axis(a, len(shape), "axes entry")
        dim = shape[a]
        if st == 0:
            raise ShapeError("strided_slice: a stride is 0")
        if dim < 0 or s is None or e is None:
            sliced[a] = -1
            continue
        s = s + dim if s < 0 else s
        e = e + dim if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), dim), min(max(e, 0), dim)
            idx = np.arange(s, e, st) if e > s else np.arange(0)
        else:
            s, e = min(s, dim - 1), max(e, -1)
            idx = np.arange(s, e, st) if s > e else np.arange(0)
        index[a] = idx
        sliced[a] = len(idx)
    drop = {norm_axis(a, len(shape), "decrease_axis entry") for a in decrease}
    for a in drop:
        if sliced[a] not in (1, -1):
            raise ShapeError(f"decrease_axis {sorted(drop)}: dim {a} has size {sliced[a]}, not 1")
    out = [d for i, d in enumerate(sliced) if i not in drop]
    return index, sliced, out or [1]


def _strided_take(x, index):
    for a, idx in enumerate(index):
        if not isinstance(idx, slice):
            x = np.take(x, idx, axis=a)
    return x


def _strided_slice_grad(g):
    ins = {s.name: g.input(s.name) for s in StridedSlice.inputs}
    ins["Out@GRAD"] = g.output_grad("Out")
    g.op("strided_slice_grad", present(ins), {"Input@GRAD": g.input_grad("Input")},
         g.attrs())


class StridedSlice(OpDef):
    type = "strided_slice"
    inputs = (In("Input"),
              In("StartsTensor", dispensable=True, no_grad=True),
              In("StartsTensorList", duplicable=True, dispensable=True, no_grad=True),
              In("EndsTensor", dispensable=True, no_grad=True),
              In("EndsTensorList", duplicable=True, dispensable=True, no_grad=True),
              In("StridesTensor", dispensable=True, no_grad=True),
              In("StridesTensorList", duplicable=True, dispensable=True, no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"axes": ints(), "starts": ints(), "ends": ints(), "strides": ints(),
             "infer_flags": ints(), "decrease_axis": ints()}
    share_lod = "Input"
    lod_outputs = ("Out",)
    doc = ("Out = Input[starts:ends:strides] on `axes` (negative strides walk backwards), "
           "then the size-1 dims in `decrease_axis` removed.")

    @staticmethod
    def _bounds(attrs, st, stl, en, enl, sd, sdl):
        starts = ints_from(st, stl) or list(attrs["starts"])
        strides = ints_from(sd, sdl) or list(attrs["strides"])
        ends = last_element_ends(attrs, starts, ints_from(en, enl) or list(attrs["ends"]),
                                 strides)
        return starts, ends, strides

    @staticmethod
    def infer_shape(ctx):
        axes = ctx.attr("axes")
        starts, ends, strides = (list(ctx.attr(k)) for k in ("starts", "ends", "strides"))
        for key, slots in (("starts", ("StartsTensor", "StartsTensorList")),
                           ("ends", ("EndsTensor", "EndsTensorList")),
                           ("strides", ("StridesTensor", "StridesTensorList"))):
            if any(ctx.has_input(s) for s in slots):
                ctx.set_output("Out", None, ctx.input_dtype("Input"))
                return
        _, _, out = infer_with(ctx, strided_plan, ctx.input_shape("Input"), axes, starts, ends,
                           strides, ctx.attr("decrease_axis"))
        ctx.set_output("Out", out, ctx.input_dtype("Input"))

    @classmethod
    def prepare(cls, attrs, outputs):
        axes, decrease = attrs["axes"], attrs["decrease_axis"]

        def kernel(x, *bounds):
            starts, ends, strides = StridedSlice._bounds(attrs, *bounds)
            index, _, out = strided_plan(list(x.shape), axes, starts, ends, strides, decrease)
            return np.ascontiguousarray(_strided_take(x, index)).reshape(out)
        return kernel

    grad = staticmethod(_strided_slice_grad)


class StridedSliceGrad(OpDef):
    type = "strided_slice_grad"
    inputs = StridedSlice.inputs + (In("Out@GRAD"),)
    outputs = (Out("Input@GRAD"),)
    attrs = StridedSlice.attrs
    infer_shape = None
    share_lod = None

    @classmethod
    def prepare(cls, attrs, outputs):
        axes, decrease = attrs["axes"], attrs["decrease_axis"]

        def kernel(x, *rest):
            *bounds, dout = rest
            starts, ends, strides = StridedSlice._bounds(attrs, *bounds)
            index, sliced, _ = strided_plan(list(x.shape), axes, starts, ends, strides,
                                             decrease)
            full = [np.arange(d) if isinstance(i, slice) else i
                    for d, i in zip(x.shape, index)]
            dx = np.zeros_like(x)
            np.add.at(dx, np.ix_(*full), dout.reshape(sliced))
            return dx
        return kernel


# --- gather, index_select ------------------------------------------------------------------
def _gather_axis(axis, axis_t, rank):
    return norm_axis(axis if axis_t is None else int(np.asarray(axis_t).reshape(-1)[0]), rank)


def _check_index(idx, size, op):
    if idx.ndim > 2 or idx.ndim == 2 and idx.shape[1] != 1:
        raise ShapeError(f"{op}: Index must be 1-D or [N, 1], got shape {list(idx.shape)}")
    flat = idx.reshape(-1)
    bad = flat[(flat < -size) | (flat >= size)]
    if bad.size:
        raise ExecutionError(f"{op}: index {int(bad[0])} is out of range for a dim of size "
                             f"{size}")
    return flat


class Gather(OpDef):
    type = "gather"
    version = 1  # Paddle's checkpoint: input Axis
    inputs = (In("X"), In("Index", no_grad=True), In("Axis", dispensable=True, no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"overwrite": True, "axis": 0}
    share_lod = None
    doc = ("Out = X's slices at positions Index (1-D or [N, 1]) along `axis`; a 0-D Index "
           "takes one slice and drops the axis (Paddle >= 2.5).")

    @staticmethod
    def infer_shape(ctx):
        xs, ids = ctx.input_shape("X"), ctx.input_shape("Index")
        if len(ids) > 2 or len(ids) == 2 and ids[1] not in (1, -1):
            ctx.fail(f"Index must be 1-D or [N, 1], got {ids}")
        out = list(xs)
        if ctx.has_input("Axis"):
            out = [-1] * (len(xs) - (not ids))
        else:
            ax = infer_with(ctx, norm_axis, ctx.attr("axis"), len(xs))
            out[ax:ax + 1] = ids[:1]       # a 0-D Index drops the axis
        ctx.set_output("Out", out, ctx.input_dtype("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        axis = attrs["axis"]

        def kernel(x, index, axis_t):
            ax = _gather_axis(axis, axis_t, x.ndim)
            flat = _check_index(index, x.shape[ax], cls.type)
            return np.take(x, flat.reshape(index.shape) if index.ndim == 0 else flat, axis=ax)
        return kernel

    grad = staticmethod(lambda g: g.op(
        "gather_grad", present({"X": g.input("X"), "Index": g.input("Index"),
                                 "Axis": g.input("Axis"), "Out@GRAD": g.output_grad("Out")}),
        {"X@GRAD": g.input_grad("X")}, g.attrs()))


class GatherGrad(OpDef):
    type = "gather_grad"
    inputs = (In("X"), In("Index"), In("Axis", dispensable=True), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = Gather.attrs
    infer_shape = None
    share_lod = None

    @classmethod
    def prepare(cls, attrs, outputs):
        axis = attrs["axis"]

        def kernel(x, index, axis_t, dout):
            ax = _gather_axis(axis, axis_t, x.ndim)
            dx = np.zeros_like(x)
            if index.ndim == 0:        # Out lacks the gathered axis
                dout = np.expand_dims(dout, ax)
            np.add.at(np.moveaxis(dx, ax, 0), index.reshape(-1), np.moveaxis(dout, ax, 0))
            return dx
        return kernel


class IndexSelect(OpDef):
    type = "index_select"
    inputs = (In("X"), In("Index", no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"dim": 0}
    share_lod = "X"
    lod_outputs = ("Out",)
    doc = "Out = X's slices at the 1-D Index positions along `dim`."

    @staticmethod
    def infer_shape(ctx):
        xs, ids = ctx.input_shape("X"), ctx.input_shape("Index")
        out = list(xs)
        out[infer_with(ctx, norm_axis, ctx.attr("dim"), len(xs))] = ids[0] if ids else -1
        ctx.set_output("Out", out, ctx.input_dtype("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        dim = attrs["dim"]

        def kernel(x, index):
            a = norm_axis(dim, x.ndim)
            return np.take(x, _check_index(index, x.shape[a], "index_select"), axis=a)
        return kernel

    grad = staticmethod(lambda g: g.op(
        "index_select_grad", {"X": g.input("X"), "Index": g.input("Index"),
                              "Out@GRAD": g.output_grad("Out")},
        {"X@GRAD": g.input_grad("X")}, g.attrs()))


class IndexSelectGrad(OpDef):
    type = "index_select_grad"
    inputs = (In("X"), In("Index"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = IndexSelect.attrs
    infer_shape = None
    share_lod = None

    @classmethod
    def prepare(cls, attrs, outputs):
        dim = attrs["dim"]

        def kernel(x, index, dout):
            a = norm_axis(dim, x.ndim)
            dx = np.zeros((x.shape[a],) + np.moveaxis(dout, a, 0).shape[1:], x.dtype)
            np.add.at(dx, index.reshape(-1) % x.shape[a], np.moveaxis(dout, a, 0))
            return np.ascontiguousarray(np.moveaxis(dx, 0, a))
        return kernel


# --- masked_select -------------------------------------------------------------------------
class MaskedSelect(OpDef):
    type = "masked_select"
    inputs = (In("X"), In("Mask", no_grad=True))
    outputs = (Out("Y"),)
    share_lod = None
    doc = "Y = the elements of X where Mask (broadcast to X) is true, 1-D."

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Y", [-1], ctx.input_dtype("X"))

    @staticmethod
    def kernel(x, mask):
        shape = np.broadcast_shapes(x.shape, mask.shape)
        return np.broadcast_to(x, shape)[np.broadcast_to(mask.astype(bool), shape)].copy()

    grad = staticmethod(lambda g: g.op(
        "masked_select_grad", {"X": g.input("X"), "Mask": g.input("Mask"),
                               "Y@GRAD": g.output_grad("Y")}, {"X@GRAD": g.input_grad("X")}))


class MaskedSelectGrad(OpDef):
    type = "masked_select_grad"
    inputs = (In("X"), In("Mask"), In("Y@GRAD"))
    outputs = (Out("X@GRAD"),)
    infer_shape = None
    share_lod = None

    @staticmethod
    def kernel(x, mask, dy):
        shape = np.broadcast_shapes(x.shape, mask.shape)
        d = np.zeros(shape, x.dtype)
        d[np.broadcast_to(mask.astype(bool), shape)] = dy
        return reduce_to_shape(d, x.shape).astype(x.dtype, copy=False)


# --- index_sample ----------------------------------------------------------------------------
def _sample_index(x, index):
    if x.ndim != 2 or index.ndim != 2:
        raise ShapeError(f"index_sample: X{list(x.shape)} and Index{list(index.shape)} must "
                         f"both be 2-D")
    if x.shape[0] != index.shape[0]:
        raise ShapeError(f"index_sample: X{list(x.shape)} and Index{list(index.shape)} must "
                         f"have the same number of rows")
    idx = index.astype(np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= x.shape[1]):
        bad = idx[(idx < 0) | (idx >= x.shape[1])][0]
        raise ExecutionError(f"index_sample: Index holds {bad}, outside [0, {x.shape[1]}) "
                             f"(X's columns)")
    return idx


class IndexSample(OpDef):
    type = "index_sample"
    inputs = (In("X"), In("Index", no_grad=True))
    outputs = (Out("Out"),)
    share_lod = "Index"
    doc = "Out[i, j] = X[i, Index[i, j]] (X and Index 2-D with the same rows)."

    @staticmethod
    def infer_shape(ctx):
        xs, ids = ctx.input_shape("X"), ctx.input_shape("Index")
        if len(xs) != 2 or len(ids) != 2:
            ctx.fail("X and Index must both be 2-D")
        ctx.set_output("Out", ids, ctx.input_dtype("X"), ctx.input_lod_level("Index"))

    @staticmethod
    def kernel(x, index):
        idx = _sample_index(x, index)
        return np.take_along_axis(x, idx, axis=1)

    grad = grad_maker("index_sample_grad", ("X", "Index", "Out@GRAD"), ("X",))


class IndexSampleGrad(OpDef):
    type = "index_sample_grad"
    inputs = (In("X"), In("Index"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    infer_shape = None
    share_lod = None

    @staticmethod
    def kernel(x, index, dout):
        idx = _sample_index(x, index)
        dx = np.zeros(x.shape, dout.dtype)
        rows = np.broadcast_to(np.arange(x.shape[0])[:, None], idx.shape)
        np.add.at(dx, (rows, idx), dout)   # an index repeated in a row sums its gradients
        return dx


# --- multiplex -------------------------------------------------------------------------------
class Multiplex(OpDef):
    type = "multiplex"
    inputs = (In("Ids", no_grad=True), In("X", duplicable=True))
    outputs = (Out("Out"),)
    share_lod = None
    doc = "Out[i] = X[Ids[i]][i]: row i taken from the candidate Ids[i]."

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", ctx.input_shape("X"), ctx.input_dtype("X"))

    @staticmethod
    def _ids(ids, k, n):
        ids = np.asarray(ids).reshape(-1).astype(np.int64)
        if len(ids) != n or ((ids < 0) | (ids >= k)).any():
            raise ExecutionError(f"multiplex: Ids must hold {n} values in [0, {k})")
        return ids

    @staticmethod
    def kernel(ids, xs):
        stack = np.stack(xs)
        ids = Multiplex._ids(ids, len(xs), stack.shape[1])
        return stack[ids, np.arange(stack.shape[1])]

    grad = staticmethod(lambda g: g.op(
        "multiplex_grad", {"Ids": g.input("Ids"), "X": g.input("X"),
                           "Out@GRAD": g.output_grad("Out")}, {"X@GRAD": g.input_grad("X")}))


class MultiplexGrad(OpDef):
    type = "multiplex_grad"
    inputs = (In("Ids"), In("X", duplicable=True), In("Out@GRAD"))
    outputs = (Out("X@GRAD", duplicable=True),)
    infer_shape = None
    share_lod = None

    @staticmethod
    def kernel(ids, xs, dout):
        ids = Multiplex._ids(ids, len(xs), dout.shape[0])
        grads = []
        for k in range(len(xs)):
            d = np.zeros_like(dout)
            d[ids == k] = dout[ids == k]
            grads.append(d)
        return grads
