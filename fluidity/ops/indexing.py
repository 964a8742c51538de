"""Slicing and gathering: slice, strided_slice, gather, index_select, masked_select.

Conventions as in tensor.py: Out is a copy (never a view of X), tensor inputs (StartsTensor,
Axis, ...) override the attributes at run time, and shape rules raise ShapeError.
"""
import numpy as np

from ..errors import ExecutionError, ShapeError
from .common import infer_with, ints_from, norm_axis, present, reduce_to_shape
from .compiled import c_ints, dense_only, known_ints, known_values, lit_int, set_known_values
from .registry import In, OpDef, Out, ints


# --- slice ---------------------------------------------------------------------------------
def _slice_plan(shape, axes, starts, ends, decrease):
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


# --- compiled forms: a box of X (fl::strided_box, codegen/runtime/ops_extra.h) -------------
_BIG = 1 << 62          # bounds past any dim clamp alike; kept in int64 range for C


def _bound(v):
    n = lit_int(v)
    return str(max(-_BIG, min(_BIG, n))) if n is not None else v


def _box(e, x, starts, ends, strides=None):
    """(begin, len, step) per dim of X (C expressions) of slice (strides None) or
    strided_slice on `axes`, and Out's dims after `decrease_axis`. Literal bounds on literal
    dims are worked out here by the kernel's own plan; others by the runtime's twins of it."""
    axes, decrease = list(e.attr("axes")), list(e.attr("decrease_axis"))
    if x.ndim == 0:
        e.fail("X is 0-D")
    steps = strides if strides is not None else ["1"] * len(axes)
    if not len(axes) == len(starts) == len(ends) == len(steps):
        e.fail(f"axes {axes}, starts {starts}, ends {ends} differ in length")
    begin, size, step = ["0"] * x.ndim, list(x.dims), ["1"] * x.ndim
    try:
        for a, s, t, st in zip(axes, map(_bound, starts), map(_bound, ends), steps):
            a = norm_axis(a, x.ndim, "axes entry")
            dim = x.dims[a]
            lits = [lit_int(v) for v in (dim, s, t, st)]
            if lits[3] == 0:
                e.fail("a stride is 0")
            if None not in lits:
                dim, s, t, st = lits
                if strides is None:
                    index, _, _ = _slice_plan([dim], [0], [s], [t], [])
                    b, n = index[0].start, index[0].stop - index[0].start
                else:
                    index, _, _ = _strided_plan([dim], [0], [s], [t], [st], [])
                    b, n = (int(index[0][0]) if len(index[0]) else 0), len(index[0])
                begin[a], size[a], step[a] = str(b), str(n), str(st)
            elif strides is None:
                begin[a] = f"fl::slice_bound({s}, {dim})"
                size[a] = f"fl::slice_len({s}, {t}, {dim})"
            else:
                if lits[3] is None:
                    e.check(f"{st} == 0", f"{e.op.type}: a stride is 0")
                begin[a] = f"fl::strided_begin({s}, {t}, {st}, {dim})"
                size[a] = f"fl::strided_len({s}, {t}, {st}, {dim})"
                step[a] = st
        drop = {norm_axis(a, x.ndim, "decrease_axis entry") for a in decrease}
    except ShapeError as exc:
        e.fail(str(exc))
    for a in sorted(drop):
        n = lit_int(size[a])
        if n is None:
            e.check(f"{size[a]} != 1", f"{e.op.type}: a dim in decrease_axis is not 1")
        elif n != 1:
            e.fail(f"decrease_axis {sorted(drop)}: dim {a} has size {n}, not 1")
    out = [d for k, d in enumerate(size) if k not in drop]
    arrays = (f"const int64_t dims[] = {c_ints(x.dims)}, begin[] = {c_ints(begin)}, "
              f"len[] = {c_ints(size)}, step[] = {c_ints(step)};")
    return begin, size, step, out, arrays


def _bounds_of(e, strided):
    """starts, ends (, strides) as the kernel takes them: tensors whose values compiled code
    knows (ops/compiled.py), else the attributes (a tensor giving none: the attribute too)."""
    keys = ("starts", "ends", "strides") if strided else ("starts", "ends")
    out = []
    for key in keys:
        t = key.title()
        given = known_ints(e, f"{t}Tensor", f"{t}TensorList")
        out.append(given or [str(v) for v in e.attr(key)])
    return out


def _emit_box(e, strided):
    x = e.input("Input")
    dense_only(e, x)
    bounds = _bounds_of(e, strided)
    begin, size, step, out_dims, arrays = _box(e, x, *bounds)
    out = e.output("Out", out_dims, x.ctype)
    e.code(f"{arrays} fl::strided_box({x}, {out}, {x.ndim}, dims, begin, len, step, false);")
    vals = known_values(e, x)
    b, n, st = (lit_int(v) for v in (begin[0], size[0], step[0]))
    if vals is not None and x.ndim == 1 and None not in (b, n, st):
        set_known_values(e, out, [vals[b + k * st] for k in range(n)])


def _emit_box_grad(e, strided):
    """dX: zeros, Out@GRAD put back in the box."""
    x, d = e.input("Input"), e.input("Out@GRAD")
    dense_only(e, x, d)
    if d.ctype != x.ctype:
        e.fail("Input and Out@GRAD differ in type")
    bounds = _bounds_of(e, strided)
    _, size, _, _, arrays = _box(e, x, *bounds)
    n = e.prod(size)
    if n != d.numel():
        if e.is_lit(n) and e.is_lit(d.numel()):
            e.fail(f"Out@GRAD has {d.numel()} elements, the slice {n}")
        e.check(f"{n} != {d.numel()}", f"{e.op.type}: Out@GRAD is not the slice's size")
    dx = e.output("Input@GRAD", x.dims, x.ctype)
    e.code(f"std::memset({dx}, 0, {dx.nbytes()}); {arrays} "
           f"fl::strided_box({dx}, {d}, {x.ndim}, dims, begin, len, step, true);")


def _slice_grad(g):
    ins = {s.name: g.input(s.name) for s in Slice.inputs}
    ins["Out@GRAD"] = g.output_grad("Out")
    g.op("slice_grad", present(ins), {"Input@GRAD": g.input_grad("Input")}, g.attrs())


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
    share_lod = None
    doc = ("Out = Input[starts:ends] on `axes` (Python-style clamping), then the dims in "
           "`decrease_axis` (size 1) removed.")

    @staticmethod
    def infer_shape(ctx):
        starts, ends = list(ctx.attr("starts")), list(ctx.attr("ends"))
        axes = ctx.attr("axes")
        if ctx.has_input("StartsTensor") or ctx.has_input("StartsTensorList"):
            starts = [None] * len(axes)
        if ctx.has_input("EndsTensor") or ctx.has_input("EndsTensorList"):
            ends = [None] * len(axes)
        flags = ctx.attr("infer_flags")
        if flags and len(flags) == len(axes):  # -1: this axis' bounds come from a tensor
            starts = [None if f == -1 else s for f, s in zip(flags, starts)]
        _, _, out = infer_with(ctx, _slice_plan, ctx.input_shape("Input"), axes, starts, ends,
                           ctx.attr("decrease_axis"))
        ctx.set_output("Out", out, ctx.input_dtype("Input"))

    @classmethod
    def prepare(cls, attrs, outputs):
        axes, decrease = attrs["axes"], attrs["decrease_axis"]

        def kernel(x, starts_t, ends_t, starts_l, ends_l):
            starts = ints_from(starts_t, starts_l) or attrs["starts"]
            ends = ints_from(ends_t, ends_l) or attrs["ends"]
            index, _, out = _slice_plan(list(x.shape), axes, starts, ends, decrease)
            return x[index].copy().reshape(out)  # a copy: Out shares no memory with Input
        return kernel

    emit = staticmethod(lambda e: _emit_box(e, False))
    grad = staticmethod(_slice_grad)


class SliceGrad(OpDef):
    type = "slice_grad"
    inputs = Slice.inputs + (In("Out@GRAD"),)
    outputs = (Out("Input@GRAD"),)
    attrs = Slice.attrs
    infer_shape = None
    share_lod = None

    @classmethod
    def prepare(cls, attrs, outputs):
        axes, decrease = attrs["axes"], attrs["decrease_axis"]

        def kernel(x, starts_t, ends_t, starts_l, ends_l, dout):
            starts = ints_from(starts_t, starts_l) or attrs["starts"]
            ends = ints_from(ends_t, ends_l) or attrs["ends"]
            index, sliced, _ = _slice_plan(list(x.shape), axes, starts, ends, decrease)
            dx = np.zeros_like(x)
            dx[index] = dout.reshape(sliced)
            return dx
        return kernel

    emit = staticmethod(lambda e: _emit_box_grad(e, False))


# --- strided_slice -------------------------------------------------------------------------
def _strided_plan(shape, axes, starts, ends, strides, decrease):
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
    share_lod = None
    doc = ("Out = Input[starts:ends:strides] on `axes` (negative strides walk backwards), "
           "then the size-1 dims in `decrease_axis` removed.")

    @staticmethod
    def _bounds(attrs, st, stl, en, enl, sd, sdl):
        return (ints_from(st, stl) or list(attrs["starts"]),
                ints_from(en, enl) or list(attrs["ends"]),
                ints_from(sd, sdl) or list(attrs["strides"]))

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
        _, _, out = infer_with(ctx, _strided_plan, ctx.input_shape("Input"), axes, starts, ends,
                           strides, ctx.attr("decrease_axis"))
        ctx.set_output("Out", out, ctx.input_dtype("Input"))

    @classmethod
    def prepare(cls, attrs, outputs):
        axes, decrease = attrs["axes"], attrs["decrease_axis"]

        def kernel(x, *bounds):
            starts, ends, strides = StridedSlice._bounds(attrs, *bounds)
            index, _, out = _strided_plan(list(x.shape), axes, starts, ends, strides, decrease)
            return np.ascontiguousarray(_strided_take(x, index)).reshape(out)
        return kernel

    emit = staticmethod(lambda e: _emit_box(e, True))
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
            index, sliced, _ = _strided_plan(list(x.shape), axes, starts, ends, strides,
                                             decrease)
            full = [np.arange(d) if isinstance(i, slice) else i
                    for d, i in zip(x.shape, index)]
            dx = np.zeros_like(x)
            np.add.at(dx, np.ix_(*full), dout.reshape(sliced))
            return dx
        return kernel

    emit = staticmethod(lambda e: _emit_box_grad(e, True))


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
    share_lod = None
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
