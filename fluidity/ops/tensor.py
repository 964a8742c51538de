"""Tensor manipulation: cast, concat, split, stack, unstack, unbind, expand, expand_v2, tile,
flip, roll, argsort, tril_triu, one_hot(_v2), range. Shape ops (reshape2, ..., shape, size) are
in shape_ops.py, slicing and gathering in indexing.py.

Conventions (Paddle's), those modules' as well:

* Outputs never share memory with inputs (optimizer ops update parameters in place, and the
  executor copies only persistable fetch targets), so a fetched reshape of a parameter
  shows the value it had when the reshape ran.
* Attributes that a layer may give as tensors instead (Shape/ShapeTensor, AxisTensor,
  StartsTensor(List), ...) override the attribute at run time; at build time the dims they
  decide are unknown (-1).
* Shape rules raise ShapeError; infer_shape turns that into `ctx.fail` (op and input shapes
  named), the executor wraps a kernel's into an ExecutionError naming op and inputs.
"""
import numpy as np

from ..core import dtypes
from ..core.limits import check_elements
from ..core.tensor import LoDTensor
from ..errors import ExecutionError, ShapeError
from .common import infer_with, ints_from, norm_axis, present, reduce_to_shape, untile
from .registry import In, OpDef, Out, get as get_op, ints, longs


# --- cast ----------------------------------------------------------------------------------
class Cast(OpDef):
    type = "cast"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    attrs = {"in_dtype": dtypes.VarType.FP32, "out_dtype": dtypes.VarType.FP32}
    doc = "Out = X converted to `out_dtype` (a VarType code)."

    @staticmethod
    def infer_shape(ctx):
        ctx.share("X", "Out", dtype=ctx.attr("out_dtype"))

    @classmethod
    def prepare(cls, attrs, outputs):
        dt = dtypes.to_numpy(attrs["out_dtype"])
        return lambda x: x.astype(dt)   # always a copy (see the module docstring)


    grad = staticmethod(lambda g: g.op(
        "cast", {"X": g.output_grad("Out")}, {"Out": g.input_grad("X")},
        {"in_dtype": g.attr("out_dtype"), "out_dtype": g.attr("in_dtype")}))


# --- concat / split / stack / unstack ------------------------------------------------------
def _concat_view(shape, rank):
    """An input's shape as concat sees it against X[0]'s rank: Fluid 1.8 reads only the
    first rank dims of every input and copies each as [rows, numel / rows] blocks, so an input
    with extra trailing dims of 1 (PaddleCV's CGAN joins noise [N, 100] with a label reshaped
    to [N, 1, 1, 1]) joins as if they were not there. Other rank mismatches stay errors."""
    shape = list(shape)
    if len(shape) > rank and all(d == 1 for d in shape[rank:]):
        return shape[:rank]
    return shape


def _concat_shape(shapes, axis):
    rank = len(shapes[0])
    shapes = [_concat_view(s, rank) for s in shapes]
    if any(len(s) != rank for s in shapes):
        raise ShapeError(f"inputs {shapes} have different ranks")
    axis = norm_axis(axis, rank)
    out = list(shapes[0])
    for s in shapes[1:]:
        for i, d in enumerate(s):
            if i == axis:
                continue
            if out[i] >= 0 and d >= 0 and out[i] != d:
                raise ShapeError(f"input shapes {shapes} differ in dim {i}; only axis {axis} "
                                 f"may differ")
            if out[i] < 0:
                out[i] = d
    sizes = [s[axis] for s in shapes]
    out[axis] = -1 if min(sizes) < 0 else sum(sizes)
    return out


def _concat_lod(xs, axis):
    """Out's LoD (Paddle 1.8): joined along axis 0, every input's LoD appended level by level
    (a sequence stays a sequence; none when some input has no LoD); else X[0]'s LoD."""
    lod0 = xs[0]._lod
    if axis != 0 or not lod0:
        return lod0
    if any(not x._lod for x in xs):
        return []
    if any(len(x._lod) != len(lod0) for x in xs):
        raise ShapeError(f"concat: the inputs' LoD levels differ "
                         f"({[len(x._lod) for x in xs]}); joining them along axis 0 needs "
                         f"one level count")
    out = []
    for level in range(len(lod0)):
        offs = [0]
        for x in xs:
            lv, base = x._lod[level], offs[-1]
            offs.extend(base + (b - lv[0]) for b in lv[1:])
        out.append(offs)
    return out


class Concat(OpDef):
    type = "concat"
    inputs = (In("X", duplicable=True), In("AxisTensor", dispensable=True, no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"axis": 0}
    kind = "value"
    share_lod = None
    doc = ("Out = the inputs joined along `axis` (AxisTensor overrides it at run time); along "
           "axis 0 the inputs' LoDs are joined too, else Out has X[0]'s LoD.")

    @staticmethod
    def infer_shape(ctx):
        shapes = ctx.input_shapes("X")
        out = ([-1] * len(shapes[0]) if ctx.has_input("AxisTensor")
               else infer_with(ctx, _concat_shape, shapes, ctx.attr("axis")))
        ctx.set_output("Out", out, ctx.input_dtype("X"), ctx.input_lod_level("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        axis = attrs["axis"]

        def kernel(xs, axis_t):
            ax = axis if axis_t is None else \
                int(np.asarray(axis_t._array).reshape(-1)[0])
            arrays = [x._array for x in xs]
            _concat_shape([list(a.shape) for a in arrays], ax)
            rank = arrays[0].ndim
            arrays = [a if a.ndim == rank else a.reshape(_concat_view(a.shape, rank))
                      for a in arrays]
            ax = ax % arrays[0].ndim if arrays[0].ndim else 0
            return LoDTensor(np.concatenate(arrays, axis=ax), _concat_lod(xs, ax))
        return kernel


    grad = staticmethod(lambda g: g.op(
        "concat_grad", present({"X": g.input("X"), "AxisTensor": g.input("AxisTensor"),
                                 "Out@GRAD": g.output_grad("Out")}),
        {"X@GRAD": g.input_grad("X")}, g.attrs()))


class ConcatGrad(OpDef):
    type = "concat_grad"
    inputs = (In("X", duplicable=True), In("AxisTensor", dispensable=True),
              In("Out@GRAD"))
    outputs = (Out("X@GRAD", duplicable=True, dispensable=True),)
    attrs = Concat.attrs
    infer_shape = None
    share_lod = None

    @classmethod
    def prepare(cls, attrs, outputs):
        axis = attrs["axis"]

        def kernel(xs, axis_t, dout):
            ax = axis if axis_t is None else int(np.asarray(axis_t).reshape(-1)[0])
            cuts = np.cumsum([x.shape[ax] for x in xs])[:-1]
            # each piece in its input's own shape (an input with trailing dims of 1 beyond
            # X[0]'s rank was joined without them)
            return [np.ascontiguousarray(p).reshape(x.shape)
                    for p, x in zip(np.split(dout, cuts, axis=ax), xs)]
        return kernel


def _split_sizes(dim, n_out, num, sections):
    """Sizes of the pieces along the split axis (-1 where unknown at build time)."""
    if num > 0:
        if n_out != num:
            raise ShapeError(f"num={num} but the op has {n_out} outputs")
        if dim >= 0 and dim % num:
            raise ShapeError(f"dim of size {dim} cannot be split into {num} equal parts")
        return [dim // num if dim >= 0 else -1] * num
    sections = list(sections)
    if not sections:
        raise ShapeError("split needs num > 0 or sections")
    if len(sections) != n_out:
        raise ShapeError(f"sections {sections} name {len(sections)} parts but the op has "
                         f"{n_out} outputs")
    if sections.count(-1) > 1 or any(s < -1 for s in sections):
        raise ShapeError(f"sections {sections} may hold one -1 and no other negative size")
    if dim < 0:
        return sections
    rest = dim - sum(s for s in sections if s >= 0)
    if -1 in sections:
        if rest < 0:
            raise ShapeError(f"sections {sections} exceed the dim of size {dim}")
        sections[sections.index(-1)] = rest
    elif rest:
        raise ShapeError(f"sections {sections} sum to {dim - rest}, not the dim's size {dim}")
    return sections


class Split(OpDef):
    type = "split"
    inputs = (In("X"), In("AxisTensor", dispensable=True, no_grad=True),
              In("SectionsTensorList", duplicable=True, dispensable=True, no_grad=True))
    outputs = (Out("Out", duplicable=True),)
    attrs = {"axis": 0, "num": 0, "sections": ints()}
    share_lod = "X"
    lod_outputs = ("Out",)
    doc = "Out = X cut along `axis` into `num` equal parts or parts of sizes `sections`."

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        n_out = len(ctx.op.output("Out"))
        if ctx.has_input("AxisTensor"):
            ctx.set_output("Out", [-1] * len(xs), ctx.input_dtype("X"))
            return
        axis = infer_with(ctx, norm_axis, ctx.attr("axis"), len(xs))
        if ctx.has_input("SectionsTensorList"):   # sizes known at run time only
            sizes = [-1] * n_out
        else:
            sizes = infer_with(ctx, _split_sizes, xs[axis], n_out, ctx.attr("num"),
                           ctx.attr("sections"))
        for i, size in enumerate(sizes):
            ctx.set_output("Out", xs[:axis] + [size] + xs[axis + 1:], ctx.input_dtype("X"),
                           i=i)

    @classmethod
    def prepare(cls, attrs, outputs):
        axis, num, sections = attrs["axis"], attrs["num"], attrs["sections"]

        def kernel(x, axis_t, sections_t):
            ax = norm_axis(axis if axis_t is None else int(np.asarray(axis_t).reshape(-1)[0]),
                            x.ndim)
            secs = ints_from(None, sections_t) or sections
            n = num if num > 0 else len(secs)
            sizes = _split_sizes(x.shape[ax], n, num, secs)
            return [p.copy() for p in np.split(x, np.cumsum(sizes)[:-1], axis=ax)]
        return kernel

    grad = staticmethod(lambda g: g.op(
        "concat", present({"X": g.output_grad("Out"), "AxisTensor": g.input("AxisTensor")}),
        {"Out": g.input_grad("X")}, {"axis": g.attr("axis")}))


def _stack_shape(shapes, axis):
    first = shapes[0]
    for s in shapes[1:]:
        if len(s) != len(first) or any(a >= 0 and b >= 0 and a != b for a, b in zip(first, s)):
            raise ShapeError(f"stack needs inputs of one shape, got {shapes}")
    axis = norm_axis(axis, len(first) + 1)
    return first[:axis] + [len(shapes)] + first[axis:]


class Stack(OpDef):
    type = "stack"
    inputs = (In("X", duplicable=True),)
    outputs = (Out("Y"),)
    attrs = {"axis": 0}
    share_lod = "X"            # X[0]'s, kept where Y has its rows (axis > 0), as Fluid's
    lod_outputs = ("Y",)
    doc = "Y = the inputs (all of one shape) stacked along a new dim `axis`."

    @staticmethod
    def infer_shape(ctx):
        out = infer_with(ctx, _stack_shape, ctx.input_shapes("X"), ctx.attr("axis"))
        ctx.set_output("Y", out, ctx.input_dtype("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        axis = attrs["axis"]

        def kernel(xs):
            _stack_shape([list(x.shape) for x in xs], axis)
            return np.stack(xs, axis=axis)
        return kernel

    grad = staticmethod(lambda g: g.op(
        "stack_grad", {"Y@GRAD": g.output_grad("Y")}, {"X@GRAD": g.input_grad("X")}, g.attrs()))


class StackGrad(OpDef):
    type = "stack_grad"
    inputs = (In("Y@GRAD"),)
    outputs = (Out("X@GRAD", duplicable=True, dispensable=True),)
    attrs = Stack.attrs
    infer_shape = None
    share_lod = None

    @classmethod
    def prepare(cls, attrs, outputs):
        axis = attrs["axis"]
        return lambda dy: [p.copy() for p in np.moveaxis(dy, axis, 0)]


class Unstack(OpDef):
    type = "unstack"
    inputs = (In("X"),)
    outputs = (Out("Y", duplicable=True),)
    attrs = {"axis": 0, "num": 0}
    share_lod = None
    doc = "Y = the slices of X along `axis`, that dim removed (num of them)."

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        a = infer_with(ctx, norm_axis, ctx.attr("axis"), len(xs))
        n = len(ctx.op.output("Y"))
        if xs[a] >= 0 and xs[a] != n:
            ctx.fail(f"X has {xs[a]} slices along axis {a} but the op has {n} outputs")
        ctx.set_output("Y", xs[:a] + xs[a + 1:], ctx.input_dtype("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        axis = attrs["axis"]

        def kernel(x):
            a = norm_axis(axis, x.ndim)
            return [np.take(x, i, axis=a) for i in range(x.shape[a])]
        return kernel

    grad = staticmethod(lambda g: g.op(
        "unstack_grad", {"Y@GRAD": g.output_grad("Y")}, {"X@GRAD": g.input_grad("X")}, g.attrs()))


class UnstackGrad(OpDef):
    type = "unstack_grad"
    inputs = (In("Y@GRAD", duplicable=True),)
    outputs = (Out("X@GRAD"),)
    attrs = Unstack.attrs
    infer_shape = None
    share_lod = None

    @classmethod
    def prepare(cls, attrs, outputs):
        axis = attrs["axis"]
        return lambda ds: np.stack(ds, axis=norm_axis(axis, ds[0].ndim + 1))


class Unbind(OpDef):
    type = "unbind"
    inputs = (In("X"),)
    outputs = (Out("Out", duplicable=True),)
    attrs = {"axis": 0}
    share_lod = "X"
    lod_outputs = ("Out",)
    doc = "Out[i] = X[..., i, ...] along `axis` (that dim removed), one output per slice."

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        axis = ctx.attr("axis")
        if not -len(xs) <= axis < len(xs):
            ctx.fail(f"axis {axis} is out of range for X of rank {len(xs)}")
        axis %= len(xs)
        n = len(ctx.op.output("Out"))
        if xs[axis] >= 0 and xs[axis] != n:
            ctx.fail(f"X has {xs[axis]} slices along axis {axis} but the op has {n} outputs")
        ctx.set_output("Out", xs[:axis] + xs[axis + 1:], ctx.input_dtype("X"))

    @staticmethod
    def kernel(x, *, axis):
        return [np.ascontiguousarray(s) for s in np.moveaxis(x, axis, 0)]

    # Paddle's gradient: the output gradients stacked back along `axis`
    grad = staticmethod(lambda g: g.op("stack", {"X": g.output_grad("Out")},
                                       {"Y": g.input_grad("X")}, {"axis": g.attr("axis")}))


# --- expand / expand_v2 / tile -------------------------------------------------------------
def _expand_shape(xs, times):
    if len(times) != len(xs):
        raise ShapeError(f"expand_times {list(times)} must have one entry per dim of X{xs}")
    if any(t < 1 for t in times):
        raise ShapeError(f"expand_times {list(times)} must be positive")
    return [d * t if d >= 0 else -1 for d, t in zip(xs, times)]


def _all_inputs_grad(g):
    """`<type>_grad` reading every forward input and Out@GRAD, writing X@GRAD."""
    ins = {s.name: g.input(s.name) for s in get_op(g.fwd.type).inputs}
    ins["Out@GRAD"] = g.output_grad("Out")
    g.op(g.fwd.type + "_grad", present(ins), {"X@GRAD": g.input_grad("X")}, g.attrs())


class Expand(OpDef):
    type = "expand"
    inputs = (In("X"), In("ExpandTimes", dispensable=True, no_grad=True),
              In("expand_times_tensor", duplicable=True, dispensable=True, no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"expand_times": ints()}
    kind = "value"
    share_lod = None
    doc = ("Out = X tiled expand_times[i] times along dim i; Out keeps X's LoD when its first "
           "dim is not expanded (Fluid 1.8's expand_op).")

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        if ctx.has_input("ExpandTimes") or ctx.has_input("expand_times_tensor"):
            out = [-1] * len(xs)
        else:
            out = infer_with(ctx, _expand_shape, xs, ctx.attr("expand_times"))
        keeps_rows = bool(out) and bool(xs) and out[0] == xs[0]
        ctx.set_output("Out", out, ctx.input_dtype("X"),
                       ctx.input_lod_level("X") if keeps_rows else 0)

    @classmethod
    def prepare(cls, attrs, outputs):
        def kernel(x, times_t, times_l):
            a = x._array
            times = ints_from(None if times_t is None else times_t._array,
                              [t._array for t in times_l] if times_l else None) \
                or attrs["expand_times"]
            check_elements(_expand_shape(list(a.shape), times), a.itemsize, cls.type)
            out = np.tile(a, times)
            return LoDTensor(out, x._lod if out.shape[:1] == a.shape[:1] else None)
        return kernel

    grad = staticmethod(_all_inputs_grad)


class ExpandGrad(OpDef):
    type = "expand_grad"
    inputs = Expand.inputs + (In("Out@GRAD"),)
    outputs = (Out("X@GRAD"),)
    attrs = Expand.attrs
    infer_shape = None
    share_lod = None

    @classmethod
    def prepare(cls, attrs, outputs):
        def kernel(x, times_t, times_l, dout):
            return untile(dout, x.shape, ints_from(times_t, times_l) or attrs["expand_times"])
        return kernel


def _expand_v2_shape(xs, shape):
    shape = list(shape)
    if len(shape) < len(xs):
        raise ShapeError(f"shape {shape} has fewer dims than X{xs}")
    lead = len(shape) - len(xs)
    out = shape[:lead]
    if any(d < 1 for d in out):
        raise ShapeError(f"shape {shape}: the {lead} new leading dims must be positive")
    for d, s in zip(xs, shape[lead:]):
        if s == -1 or s == d:
            out.append(d)
        elif d in (1, -1) and s > 0:
            out.append(s)
        else:
            raise ShapeError(f"X{xs} cannot be expanded to {shape}: dim of size {d} vs {s}")
    return out


class ExpandV2(OpDef):
    type = "expand_v2"
    inputs = (In("X"), In("Shape", dispensable=True, no_grad=True),
              In("expand_shapes_tensor", duplicable=True, dispensable=True, no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"shape": ints()}
    share_lod = None
    doc = "Out = X broadcast to `shape` (-1 keeps X's dim; extra leading dims are new)."

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        if ctx.has_input("expand_shapes_tensor"):
            out = [-1] * len(ctx.op.input("expand_shapes_tensor"))
        elif ctx.has_input("Shape"):
            out = [-1] * max(ctx.input_shape("Shape")[0], len(xs))
        else:
            out = infer_with(ctx, _expand_v2_shape, xs, ctx.attr("shape"))
        ctx.set_output("Out", out, ctx.input_dtype("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        def kernel(x, shape_t, shape_l):
            shape = ints_from(shape_t, shape_l) or attrs["shape"]
            shape = _expand_v2_shape(list(x.shape), shape)
            check_elements(shape, x.itemsize, cls.type)
            return np.broadcast_to(x, shape).copy()
        return kernel

    grad = staticmethod(_all_inputs_grad)


class ExpandV2Grad(OpDef):
    type = "expand_v2_grad"
    inputs = ExpandV2.inputs + (In("Out@GRAD"),)
    outputs = (Out("X@GRAD"),)
    attrs = ExpandV2.attrs
    infer_shape = None
    share_lod = None

    @staticmethod
    def kernel(x, shape_t, shape_l, dout):
        return reduce_to_shape(dout, x.shape)


def _tile_plan(shape, times):
    times = [int(t) for t in times]
    if any(t <= 0 for t in times):
        raise ShapeError(f"repeat_times {times} must all be positive")
    rank = max(len(shape), len(times))
    shape = [1] * (rank - len(shape)) + list(shape)
    times = [1] * (rank - len(times)) + times
    return shape, times, [d * t if d >= 0 else -1 for d, t in zip(shape, times)]


class Tile(OpDef):
    type = "tile"
    inputs = (In("X"), In("RepeatTimes", dispensable=True, no_grad=True),
              In("repeat_times_tensor", duplicable=True, dispensable=True, no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"repeat_times": ints()}
    share_lod = None
    doc = "Out = X repeated repeat_times[i] times along each dim (paddle.tile)."

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        if ctx.has_input("RepeatTimes") or ctx.has_input("repeat_times_tensor"):
            n = max(len(xs), len(ctx.attr("repeat_times")))
            ctx.set_output("Out", [-1] * n, ctx.input_dtype("X"))
            return
        ctx.set_output("Out", infer_with(ctx, _tile_plan, xs, ctx.attr("repeat_times"))[2],
                       ctx.input_dtype("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        def kernel(x, times_t, times_l):
            times = ints_from(times_t, times_l) or attrs["repeat_times"]
            shape, times, out = _tile_plan(x.shape, times)
            check_elements(out, x.itemsize, cls.type)
            return np.tile(x.reshape(shape), times)
        return kernel

    grad = staticmethod(_all_inputs_grad)


class TileGrad(OpDef):
    type = "tile_grad"
    inputs = Tile.inputs + (In("Out@GRAD"),)
    outputs = (Out("X@GRAD"),)
    attrs = Tile.attrs
    infer_shape = None
    share_lod = None

    @classmethod
    def prepare(cls, attrs, outputs):
        def kernel(x, times_t, times_l, dout):
            times = ints_from(times_t, times_l) or attrs["repeat_times"]
            shape, times, _ = _tile_plan(x.shape, times)
            return untile(dout, shape, times).reshape(x.shape)
        return kernel


# --- flip, roll ----------------------------------------------------------------------------
class Flip(OpDef):
    type = "flip"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    attrs = {"axis": ints()}
    version = 1   # `axis` replaced `dims`
    doc = "Out = X reversed along each dim in `axis`."

    @classmethod
    def prepare(cls, attrs, outputs):
        axis = list(attrs["axis"])

        def kernel(x):
            return np.flip(x, [norm_axis(a, x.ndim) for a in axis]).copy()
        return kernel

    grad = staticmethod(lambda g: g.op("flip", {"X": g.output_grad("Out")},
                                       {"Out": g.input_grad("X")}, {"axis": g.attr("axis")}))


class Reverse(OpDef):
    type = "reverse"
    share_lod = None
    lod_outputs = ("Out",)
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    attrs = {"axis": ints()}
    doc = "Out = X reversed along each dim in `axis` (Fluid 1.x's flip)."
    prepare = Flip.prepare
    grad = staticmethod(lambda g: g.op("reverse", {"X": g.output_grad("Out")},
                                       {"Out": g.input_grad("X")}, {"axis": g.attr("axis")}))


def _roll(x, shifts, axis):
    if not axis:
        return np.roll(x.reshape(-1), shifts[0] if len(shifts) == 1 else shifts).reshape(x.shape)
    if len(shifts) != len(axis):
        raise ShapeError(f"roll: shifts {shifts} and axis {axis} differ in length")
    return np.roll(x, shifts, [norm_axis(a, x.ndim) for a in axis])


class Roll(OpDef):
    type = "roll"
    inputs = (In("X"), In("ShiftsTensor", dispensable=True, no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"shifts": longs(), "axis": longs()}
    version = 2   # `axis` replaced `dims` (1); ShiftsTensor input (2)
    doc = ("Out = X shifted circularly by shifts[i] along axis[i] (the flattened X when axis "
           "is empty).")

    @classmethod
    def prepare(cls, attrs, outputs):
        axis = [int(a) for a in attrs["axis"]]

        def kernel(x, shifts_t):
            shifts = ints_from(shifts_t) or [int(s) for s in attrs["shifts"]]
            return _roll(x, shifts, axis)
        return kernel

    grad = staticmethod(_all_inputs_grad)


class RollGrad(OpDef):
    type = "roll_grad"
    inputs = (In("X"), In("ShiftsTensor", dispensable=True), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = Roll.attrs
    infer_shape = None

    @classmethod
    def prepare(cls, attrs, outputs):
        axis = [int(a) for a in attrs["axis"]]

        def kernel(x, shifts_t, dout):
            shifts = ints_from(shifts_t) or [int(s) for s in attrs["shifts"]]
            return _roll(dout, [-s for s in shifts], axis)
        return kernel


# --- argsort, tril_triu --------------------------------------------------------------------
class Argsort(OpDef):
    type = "argsort"
    inputs = (In("X"),)
    outputs = (Out("Out"), Out("Indices"))
    attrs = {"axis": -1, "descending": False, "stable": False}
    share_lod = "X"
    lod_outputs = ("Out", "Indices")
    version = 1   # Paddle's checkpoint: attribute stable (Paddle 3.x writes it)
    doc = ("Out = X sorted along `axis` (stable; descending keeps equal values in order), "
           "Indices (int64) where each came from. The sort is always stable, so `stable` "
           "False (equal values in any order) is met too.")

    @staticmethod
    def infer_shape(ctx):
        ctx.share("X", "Out")
        ctx.set_output("Indices", ctx.input_shape("X"), dtypes.VarType.INT64)

    @classmethod
    def prepare(cls, attrs, outputs):
        axis, desc = attrs["axis"], attrs["descending"]

        def kernel(x):
            a = norm_axis(axis, x.ndim)
            if desc:   # stable descending: sort the reversed axis, map indices back
                n = x.shape[a]
                idx = n - 1 - np.flip(np.argsort(np.flip(x, a), axis=a, kind="stable"), a)
            else:
                idx = np.argsort(x, axis=a, kind="stable")
            return np.take_along_axis(x, idx, axis=a), idx.astype(np.int64)
        return kernel

    grad = staticmethod(lambda g: g.op(
        "argsort_grad", {"X": g.input("X"), "Indices": g.output("Indices"),
                         "Out@GRAD": g.output_grad("Out")}, {"X@GRAD": g.input_grad("X")},
        g.attrs()))


class ArgsortGrad(OpDef):
    type = "argsort_grad"
    inputs = (In("X"), In("Indices"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = Argsort.attrs
    infer_shape = None
    share_lod = None

    @classmethod
    def prepare(cls, attrs, outputs):
        axis = attrs["axis"]

        def kernel(x, idx, dout):
            dx = np.zeros_like(x)
            np.put_along_axis(dx, idx, dout, axis=norm_axis(axis, x.ndim))
            return dx
        return kernel


def _tri_mask(shape, diagonal, lower):
    r, c = shape[-2:]
    return np.tri(r, c, diagonal, dtype=bool) if lower else ~np.tri(r, c, diagonal - 1,
                                                                    dtype=bool)


class TrilTriu(OpDef):
    type = "tril_triu"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    attrs = {"diagonal": 0, "lower": False}
    doc = ("Out = the lower (j - i <= diagonal) or upper (j - i >= diagonal) triangle of the "
           "last two dims of X, zeros elsewhere.")

    @classmethod
    def prepare(cls, attrs, outputs):
        d, lower = attrs["diagonal"], attrs["lower"]

        def kernel(x):
            if x.ndim < 2:
                raise ShapeError(f"tril_triu: X must have at least 2 dims, got {list(x.shape)}")
            return np.where(_tri_mask(x.shape, d, lower), x, 0).astype(x.dtype, copy=False)
        return kernel

    grad = staticmethod(lambda g: g.op(
        "tril_triu", {"X": g.output_grad("Out")}, {"Out": g.input_grad("X")}, g.attrs()))


# --- one_hot, range ------------------------------------------------------------------------
class OneHot(OpDef):
    type = "one_hot"
    inputs = (In("X"), In("depth_tensor", dispensable=True, no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"depth": -1, "dtype": dtypes.VarType.FP32, "allow_out_of_range": False}
    doc = ("Out = one-hot rows of ids X [..., 1] -> [..., depth]; ids outside [0, depth) "
           "fail unless allow_out_of_range (then their row is zeros).")
    last_is_one = True   # one_hot replaces X's trailing 1; one_hot_v2 appends a dim

    @classmethod
    def infer_shape(cls, ctx):
        xs = ctx.input_shape("X")
        if cls.last_is_one and len(xs) < 2:     # Fluid 1.8's check, at build and run time
            ctx.fail(f"X must be at least 2-D ([..., 1] ids), got {xs}")
        # Fluid 1.8 checks only last dim >= 1 here (a declared [-1, 12] builds); the kernel
        # refuses a run-time X whose last dim is not 1, which Fluid's would overrun
        if cls.last_is_one and xs[-1] != -1 and xs[-1] < 1:
            ctx.fail(f"X must have a last dim of size 1, got {xs}")
        depth = -1 if ctx.has_input("depth_tensor") else ctx.attr("depth")
        lead = xs[:-1] if cls.last_is_one else xs
        ctx.set_output("Out", lead + [depth], ctx.attr("dtype"), ctx.input_lod_level("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        dt, allow = dtypes.to_numpy(attrs["dtype"]), attrs["allow_out_of_range"]
        trim = cls.last_is_one

        def kernel(x, depth_t):
            depth = attrs["depth"] if depth_t is None else int(np.asarray(depth_t).reshape(-1)[0])
            if trim and (x.ndim < 2 or x.shape[-1] != 1):
                raise ExecutionError(f"{cls.type}: X must be [..., 1] ids (at least 2-D), got "
                                     f"shape {list(x.shape)}")
            ids = x[..., 0] if trim else x
            check_elements(ids.shape + (max(depth, 0),), dt.itemsize, cls.type)
            if not allow and ids.size and (ids.min() < 0 or ids.max() >= depth):
                bad = ids[(ids < 0) | (ids >= depth)].reshape(-1)[0]
                raise ExecutionError(f"{cls.type}: id {int(bad)} is outside [0, {depth}) "
                                     f"(set allow_out_of_range to get a zero row)")
            return (ids[..., None] == np.arange(depth)).astype(dt)
        return kernel


class OneHotV2(OneHot):
    type = "one_hot_v2"
    doc = "Out = one-hot of ids X of any shape -> X.shape + [depth]."
    last_is_one = False


class Range(OpDef):
    type = "range"
    inputs = (In("Start"), In("End"), In("Step"))
    outputs = (Out("Out"),)
    share_lod = None
    doc = "Out = [Start, Start + Step, ...) up to End (each a [1] tensor)."

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", [-1], ctx.input_dtype("Start"))

    @staticmethod
    def kernel(start, end, step):
        s, e, st = (np.asarray(v).reshape(-1)[0] for v in (start, end, step))
        if st == 0:
            raise ShapeError("range: Step must not be 0")
        return np.arange(s, e, st).astype(start.dtype, copy=False)

    # the most values compiled code holds as constants (more: the interpreter makes them)
    MAX_CONSTANTS = 1 << 14


