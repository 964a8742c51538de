"""Tensor manipulation: cast, concat, split, stack, reshape2, transpose2, squeeze2, unsqueeze2,
flatten2, flatten_contiguous_range, slice, gather, expand, expand_v2, shape, one_hot(_v2),
range.

Conventions (Paddle's):

* Shape-only ops (reshape2, transpose2, squeeze2, unsqueeze2, flatten2,
  flatten_contiguous_range) also write `XShape`: a tensor of shape [0] + X.shape holding no
  data. Their grad ops read only XShape and Out@GRAD, so X need not stay alive for backward.
  Out keeps X's LoD only when dim 0 is unchanged.
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
from ..core.tensor import LoDTensor
from ..errors import ExecutionError, ProgramError, ShapeError
from .common import prod, reduce_to_shape
from .registry import In, OpDef, Out, get as get_op, ints


# --- helpers -------------------------------------------------------------------------------
def _norm_axis(axis, rank, what="axis"):
    """`axis` in [-rank, rank) -> [0, rank); ShapeError otherwise."""
    if not -rank <= axis < max(rank, 1):
        raise ShapeError(f"{what} {axis} is out of range for a tensor of rank {rank}")
    return axis % rank if rank else 0


def _numel(shape):
    """Number of elements, or -1 if a dim is unknown."""
    return -1 if any(d < 0 for d in shape) else prod(shape)


def _infer(ctx, rule, *args):
    """Run a shape rule at build time; a broken rule fails naming the op and its inputs."""
    try:
        return rule(*args)
    except ShapeError as e:
        ctx.fail(str(e))


def _ints_from(tensor=None, tensor_list=None):
    """Ints a layer passed as a 1-D tensor or a list of [1] tensors (None if neither)."""
    if tensor_list:
        return [int(np.asarray(t).reshape(-1)[0]) for t in tensor_list]
    if tensor is not None:
        return [int(v) for v in np.asarray(tensor).reshape(-1)]
    return None


def _present(slots):
    """Grad-op inputs without the empty (absent dispensable) slots."""
    return {k: v for k, v in slots.items() if v}


def _xshape_array(a):
    return LoDTensor(np.empty((0,) + a.shape, a.dtype))


_XSHAPE = Out("XShape", dispensable=True, intermediate=True)


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


Cast.grad = staticmethod(lambda g: g.op(
    "cast", {"X": g.output_grad("Out")}, {"Out": g.input_grad("X")},
    {"in_dtype": g.attr("out_dtype"), "out_dtype": g.attr("in_dtype")}))


# --- concat / split / stack ----------------------------------------------------------------
def _concat_shape(shapes, axis):
    rank = len(shapes[0])
    if any(len(s) != rank for s in shapes):
        raise ShapeError(f"inputs {shapes} have different ranks")
    axis = _norm_axis(axis, rank)
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


class Concat(OpDef):
    type = "concat"
    inputs = (In("X", duplicable=True), In("AxisTensor", dispensable=True, no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"axis": 0}
    doc = "Out = the inputs joined along `axis` (AxisTensor overrides it at run time)."

    @staticmethod
    def infer_shape(ctx):
        shapes = ctx.input_shapes("X")
        out = ([-1] * len(shapes[0]) if ctx.has_input("AxisTensor")
               else _infer(ctx, _concat_shape, shapes, ctx.attr("axis")))
        ctx.set_output("Out", out, ctx.input_dtype("X"), ctx.input_lod_level("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        axis = attrs["axis"]

        def kernel(xs, axis_t):
            ax = axis if axis_t is None else int(np.asarray(axis_t).reshape(-1)[0])
            _concat_shape([list(x.shape) for x in xs], ax)
            return np.concatenate(xs, axis=ax)
        return kernel


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
            return [np.ascontiguousarray(p) for p in np.split(dout, cuts, axis=ax)]
        return kernel


Concat.grad = staticmethod(lambda g: g.op(
    "concat_grad", _present({"X": g.input("X"), "AxisTensor": g.input("AxisTensor"),
                             "Out@GRAD": g.output_grad("Out")}),
    {"X@GRAD": g.input_grad("X")}, g.attrs()))


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
    share_lod = None
    doc = "Out = X cut along `axis` into `num` equal parts or parts of sizes `sections`."

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        n_out = len(ctx.op.output("Out"))
        if ctx.has_input("AxisTensor"):
            ctx.set_output("Out", [-1] * len(xs), ctx.input_dtype("X"))
            return
        axis = _infer(ctx, _norm_axis, ctx.attr("axis"), len(xs))
        if ctx.has_input("SectionsTensorList"):   # sizes known at run time only
            sizes = [-1] * n_out
        else:
            sizes = _infer(ctx, _split_sizes, xs[axis], n_out, ctx.attr("num"),
                           ctx.attr("sections"))
        for i, size in enumerate(sizes):
            ctx.set_output("Out", xs[:axis] + [size] + xs[axis + 1:], ctx.input_dtype("X"),
                           i=i)

    @classmethod
    def prepare(cls, attrs, outputs):
        axis, num, sections = attrs["axis"], attrs["num"], attrs["sections"]

        def kernel(x, axis_t, sections_t):
            ax = _norm_axis(axis if axis_t is None else int(np.asarray(axis_t).reshape(-1)[0]),
                            x.ndim)
            secs = _ints_from(None, sections_t) or sections
            n = num if num > 0 else len(secs)
            sizes = _split_sizes(x.shape[ax], n, num, secs)
            return [p.copy() for p in np.split(x, np.cumsum(sizes)[:-1], axis=ax)]
        return kernel


Split.grad = staticmethod(lambda g: g.op(
    "concat", _present({"X": g.output_grad("Out"), "AxisTensor": g.input("AxisTensor")}),
    {"Out": g.input_grad("X")}, {"axis": g.attr("axis")}))


def _stack_shape(shapes, axis):
    first = shapes[0]
    for s in shapes[1:]:
        if len(s) != len(first) or any(a >= 0 and b >= 0 and a != b for a, b in zip(first, s)):
            raise ShapeError(f"stack needs inputs of one shape, got {shapes}")
    axis = _norm_axis(axis, len(first) + 1)
    return first[:axis] + [len(shapes)] + first[axis:]


class Stack(OpDef):
    type = "stack"
    inputs = (In("X", duplicable=True),)
    outputs = (Out("Y"),)
    attrs = {"axis": 0}
    share_lod = None
    doc = "Y = the inputs (all of one shape) stacked along a new dim `axis`."

    @staticmethod
    def infer_shape(ctx):
        out = _infer(ctx, _stack_shape, ctx.input_shapes("X"), ctx.attr("axis"))
        ctx.set_output("Y", out, ctx.input_dtype("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        axis = attrs["axis"]

        def kernel(xs):
            _stack_shape([list(x.shape) for x in xs], axis)
            return np.stack(xs, axis=axis)
        return kernel


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


Stack.grad = staticmethod(lambda g: g.op(
    "stack_grad", {"Y@GRAD": g.output_grad("Y")}, {"X@GRAD": g.input_grad("X")}, g.attrs()))


# --- shape-only ops: one base class, XShape, grads that only reshape -----------------------
class _ShapeOp(OpDef):
    """Out is X rearranged; `out_shape(xs, attr)` is the shape rule (attr: name -> value),
    used at build time (xs may hold -1) and at run time."""
    inputs = (In("X"),)
    outputs = (Out("Out"), _XSHAPE)
    kind = "value"
    share_lod = None
    inplace = {"Out": "X"}

    @classmethod
    def out_shape(cls, xs, attr):
        raise NotImplementedError

    @classmethod
    def build_shape(cls, ctx, xs):
        return cls.out_shape(xs, ctx.attr)

    @classmethod
    def infer_shape(cls, ctx):
        xs = ctx.input_shape("X")
        out = _infer(ctx, cls.build_shape, ctx, xs)
        dt = ctx.input_dtype("X")
        lod = ctx.input_lod_level("X") if out[:1] == xs[:1] else 0
        ctx.set_output("Out", out, dt, lod)
        if ctx.has_output("XShape"):
            ctx.set_output("XShape", [0] + xs, dt, 0)

    @classmethod
    def runtime_attr(cls, attrs, *tensors):
        """The attribute getter at run time (tensor inputs override attributes)."""
        return attrs.__getitem__

    @classmethod
    def apply(cls, a, attr):
        return a.reshape(cls.out_shape(list(a.shape), attr))

    @classmethod
    def prepare(cls, attrs, outputs):
        def kernel(x, *tensors):
            a = x._array
            out = cls.apply(a, cls.runtime_attr(attrs, *tensors))
            if np.may_share_memory(out, a):
                out = out.copy()   # not a view (see the module docstring)
            lod = x._lod if out.ndim and a.ndim and out.shape[0] == a.shape[0] else []
            return LoDTensor(out, lod), _xshape_array(a)
        return kernel


class _ShapeOpGrad(OpDef):
    inputs = (In("XShape"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    infer_shape = None
    share_lod = None
    inplace = {"X@GRAD": "Out@GRAD"}

    @staticmethod
    def kernel(xshape, dout):
        return dout.reshape(xshape.shape[1:])


def _xshape_grad(g):
    if not g.output("XShape"):
        raise ProgramError(f"op '{g.fwd.type}' has no XShape output, which its gradient needs")
    g.op(g.fwd.type + "_grad", {"XShape": g.output("XShape"), "Out@GRAD": g.output_grad("Out")},
         {"X@GRAD": g.input_grad("X")}, g.attrs())


def _reshape_target(xs, shape):
    """Paddle's reshape rule: 0 copies X's dim at that index, one -1 is inferred."""
    if shape.count(-1) > 1:
        raise ShapeError(f"shape {shape} may hold only one -1")
    out, infer = [], None
    for i, d in enumerate(shape):
        if d == 0:
            if i >= len(xs):
                raise ShapeError(f"shape {shape} has 0 at index {i}, but X{xs} has no dim {i} "
                                 f"to copy")
            d = xs[i]
        elif d == -1:
            infer = i
        elif d < -1:
            raise ShapeError(f"shape {shape} holds invalid dim {d}")
        out.append(d)
    n_in = _numel(xs)
    known = [d for i, d in enumerate(out) if i != infer]
    n_known = _numel(known)
    if infer is not None:
        if n_in >= 0 and n_known > 0:
            if n_in % n_known:
                raise ShapeError(f"cannot reshape X{xs} ({n_in} elements) to {shape}: "
                                 f"{n_in} is not a multiple of {n_known}")
            out[infer] = n_in // n_known
        elif n_known == 0:
            raise ShapeError(f"shape {shape}: -1 cannot be inferred next to a 0-size dim")
    elif n_in >= 0 and n_known >= 0 and n_in != n_known:
        raise ShapeError(f"cannot reshape X{xs} ({n_in} elements) to {shape} "
                         f"({n_known} elements)")
    return out


class Reshape2(_ShapeOp):
    type = "reshape2"
    inputs = (In("X"), In("Shape", dispensable=True, no_grad=True),
              In("ShapeTensor", duplicable=True, dispensable=True, no_grad=True))
    attrs = {"shape": ints()}
    doc = ("Out = X with shape `shape` (0 copies X's dim, one -1 is inferred); ShapeTensor "
           "(a list of [1] tensors) or else Shape (a 1-D tensor) overrides it at run time.")

    @staticmethod
    def out_shape(xs, attr):
        return _reshape_target(xs, list(attr("shape")))

    @classmethod
    def build_shape(cls, ctx, xs):
        shape = list(ctx.attr("shape"))
        if ctx.has_input("ShapeTensor"):
            n = len(ctx.op.input("ShapeTensor"))
            return [d if d > 0 else -1 for d in shape] if len(shape) == n else [-1] * n
        if ctx.has_input("Shape") and not shape:
            return [-1] * max(ctx.input_shape("Shape")[0], 0)
        return _reshape_target(xs, shape)

    @classmethod
    def runtime_attr(cls, attrs, shape_t, shape_list):
        given = _ints_from(shape_t, shape_list)
        return attrs.__getitem__ if given is None else {**attrs, "shape": given}.__getitem__


def _perm(axis, rank):
    perm = [_norm_axis(a, rank) for a in axis]
    if sorted(perm) != list(range(rank)):
        raise ShapeError(f"axis {list(axis)} is not a permutation of the {rank} dims of X")
    return perm


class Transpose2(_ShapeOp):
    type = "transpose2"
    attrs = {"axis": ints(), "data_format": "AnyLayout"}
    doc = "Out = X with its dims permuted: Out.dim[i] = X.dim[axis[i]]."

    @staticmethod
    def out_shape(xs, attr):
        return [xs[i] for i in _perm(attr("axis"), len(xs))]

    @classmethod
    def apply(cls, a, attr):
        return a.transpose(_perm(attr("axis"), a.ndim))


class Transpose2Grad(_ShapeOpGrad):
    type = "transpose2_grad"
    attrs = Transpose2.attrs
    kernel = None

    @classmethod
    def prepare(cls, attrs, outputs):
        axis = attrs["axis"]

        def kernel(xshape, dout):
            inv = np.argsort(_perm(axis, dout.ndim))
            return np.ascontiguousarray(dout.transpose(inv))
        return kernel


class Squeeze2(_ShapeOp):
    type = "squeeze2"
    attrs = {"axes": ints()}
    doc = ("Out = X without the size-1 dims listed in `axes` (every size-1 dim if empty); a "
           "listed dim whose size is not 1 is kept (Paddle 2.x).")

    @staticmethod
    def out_shape(xs, attr):
        axes = {_norm_axis(a, len(xs), "axes entry") for a in attr("axes")}
        if not axes:
            return [d for d in xs if d != 1]
        # at build time an unknown (-1) listed dim is taken to be 1
        return [d for i, d in enumerate(xs) if not (i in axes and d in (1, -1))]


class Unsqueeze2(_ShapeOp):
    type = "unsqueeze2"
    inputs = (In("X"), In("AxesTensor", dispensable=True, no_grad=True),
              In("AxesTensorList", duplicable=True, dispensable=True, no_grad=True))
    attrs = {"axes": ints()}
    doc = ("Out = X with size-1 dims inserted at `axes`, one after the other (a negative "
           "axis counts from the end of the shape so far).")

    @staticmethod
    def out_shape(xs, attr):
        out = list(xs)
        for a in attr("axes"):
            cur = a + len(out) + 1 if a < 0 else a
            if not 0 <= cur <= len(out):
                raise ShapeError(f"axes entry {a} is out of range inserting into rank "
                                 f"{len(out)}")
            out.insert(cur, 1)
        return out

    @classmethod
    def build_shape(cls, ctx, xs):
        if ctx.has_input("AxesTensorList"):
            return [-1] * (len(xs) + len(ctx.op.input("AxesTensorList")))
        if ctx.has_input("AxesTensor"):
            return [-1] * (len(xs) + max(ctx.input_shape("AxesTensor")[0], 0))
        return cls.out_shape(xs, ctx.attr)

    @classmethod
    def runtime_attr(cls, attrs, axes_t, axes_list):
        given = _ints_from(axes_t, axes_list)
        return attrs.__getitem__ if given is None else {**attrs, "axes": given}.__getitem__


class Flatten2(_ShapeOp):
    type = "flatten2"
    attrs = {"axis": 1}
    doc = "Out = X as a matrix [prod(X.dims[:axis]), prod(X.dims[axis:])]."

    @staticmethod
    def out_shape(xs, attr):
        axis = attr("axis")
        if not 0 <= axis <= len(xs):
            raise ShapeError(f"axis {axis} must be in [0, {len(xs)}]")
        return [_numel(xs[:axis]), _numel(xs[axis:])]


class FlattenContiguousRange(_ShapeOp):
    type = "flatten_contiguous_range"
    attrs = {"start_axis": 1, "stop_axis": 1}
    doc = "Out = X with dims start_axis..stop_axis (inclusive) merged into one."

    @staticmethod
    def out_shape(xs, attr):
        if not xs:
            return [1]
        start = _norm_axis(attr("start_axis"), len(xs), "start_axis")
        stop = _norm_axis(attr("stop_axis"), len(xs), "stop_axis")
        if start > stop:
            raise ShapeError(f"start_axis {start} is after stop_axis {stop}")
        return xs[:start] + [_numel(xs[start:stop + 1])] + xs[stop + 1:]


for _fwd in (Reshape2, Squeeze2, Unsqueeze2, Flatten2, FlattenContiguousRange):
    type(_fwd.__name__ + "Grad", (_ShapeOpGrad,),
         {"type": _fwd.type + "_grad", "attrs": _fwd.attrs, "__module__": __name__})
for _fwd in (Reshape2, Transpose2, Squeeze2, Unsqueeze2, Flatten2, FlattenContiguousRange):
    _fwd.grad = staticmethod(_xshape_grad)


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
        a = _norm_axis(a, len(shape), "axes entry")
        dim = shape[a]
        if dim < 0 or s is None or e is None:
            sliced[a] = -1
            continue
        s = min(max(s + dim if s < 0 else s, 0), dim)
        e = min(max(e + dim if e < 0 else e, 0), dim)
        e = max(e, s)
        index[a] = slice(s, e)
        sliced[a] = e - s
    drop = {_norm_axis(a, len(shape), "decrease_axis entry") for a in decrease}
    for a in drop:
        if sliced[a] not in (1, -1):
            raise ShapeError(f"decrease_axis {sorted(drop)}: dim {a} has size {sliced[a]}, not 1")
    out = [d for i, d in enumerate(sliced) if i not in drop]
    return tuple(index), sliced, out or [1]


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
        _, _, out = _infer(ctx, _slice_plan, ctx.input_shape("Input"), axes, starts, ends,
                           ctx.attr("decrease_axis"))
        ctx.set_output("Out", out, ctx.input_dtype("Input"))

    @classmethod
    def prepare(cls, attrs, outputs):
        axes, decrease = attrs["axes"], attrs["decrease_axis"]

        def kernel(x, starts_t, ends_t, starts_l, ends_l):
            starts = _ints_from(starts_t, starts_l) or attrs["starts"]
            ends = _ints_from(ends_t, ends_l) or attrs["ends"]
            index, _, out = _slice_plan(list(x.shape), axes, starts, ends, decrease)
            return x[index].copy().reshape(out)  # a copy: Out shares no memory with Input
        return kernel


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
            starts = _ints_from(starts_t, starts_l) or attrs["starts"]
            ends = _ints_from(ends_t, ends_l) or attrs["ends"]
            index, sliced, _ = _slice_plan(list(x.shape), axes, starts, ends, decrease)
            dx = np.zeros_like(x)
            dx[index] = dout.reshape(sliced)
            return dx
        return kernel


def _slice_grad(g):
    ins = {s.name: g.input(s.name) for s in Slice.inputs}
    ins["Out@GRAD"] = g.output_grad("Out")
    g.op("slice_grad", _present(ins), {"Input@GRAD": g.input_grad("Input")}, g.attrs())


Slice.grad = staticmethod(_slice_grad)


# --- gather --------------------------------------------------------------------------------
def _gather_axis(axis, axis_t, rank):
    return _norm_axis(axis if axis_t is None else int(np.asarray(axis_t).reshape(-1)[0]), rank)


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
    doc = "Out = X's slices at positions Index (1-D or [N, 1]) along `axis`."

    @staticmethod
    def infer_shape(ctx):
        xs, ids = ctx.input_shape("X"), ctx.input_shape("Index")
        if len(ids) > 2 or len(ids) == 2 and ids[1] not in (1, -1):
            ctx.fail(f"Index must be 1-D or [N, 1], got {ids}")
        out = list(xs)
        if ctx.has_input("Axis"):
            out = [-1] * len(xs)
        else:
            out[_infer(ctx, _norm_axis, ctx.attr("axis"), len(xs))] = ids[0] if ids else 1
        ctx.set_output("Out", out, ctx.input_dtype("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        axis = attrs["axis"]

        def kernel(x, index, axis_t):
            ax = _gather_axis(axis, axis_t, x.ndim)
            return np.take(x, _check_index(index, x.shape[ax], cls.type), axis=ax)
        return kernel


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
            np.add.at(np.moveaxis(dx, ax, 0), index.reshape(-1), np.moveaxis(dout, ax, 0))
            return dx
        return kernel


Gather.grad = staticmethod(lambda g: g.op(
    "gather_grad", _present({"X": g.input("X"), "Index": g.input("Index"),
                             "Axis": g.input("Axis"), "Out@GRAD": g.output_grad("Out")}),
    {"X@GRAD": g.input_grad("X")}, g.attrs()))


# --- expand / expand_v2 --------------------------------------------------------------------
def _expand_shape(xs, times):
    if len(times) != len(xs):
        raise ShapeError(f"expand_times {list(times)} must have one entry per dim of X{xs}")
    if any(t < 1 for t in times):
        raise ShapeError(f"expand_times {list(times)} must be positive")
    return [d * t if d >= 0 else -1 for d, t in zip(xs, times)]


class Expand(OpDef):
    type = "expand"
    inputs = (In("X"), In("ExpandTimes", dispensable=True, no_grad=True),
              In("expand_times_tensor", duplicable=True, dispensable=True, no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"expand_times": ints()}
    share_lod = None
    doc = "Out = X tiled expand_times[i] times along dim i."

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        if ctx.has_input("ExpandTimes") or ctx.has_input("expand_times_tensor"):
            out = [-1] * len(xs)
        else:
            out = _infer(ctx, _expand_shape, xs, ctx.attr("expand_times"))
        ctx.set_output("Out", out, ctx.input_dtype("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        def kernel(x, times_t, times_l):
            times = _ints_from(times_t, times_l) or attrs["expand_times"]
            _expand_shape(list(x.shape), times)
            return np.tile(x, times)
        return kernel


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
            times = _ints_from(times_t, times_l) or attrs["expand_times"]
            # Out viewed as [t0, d0, t1, d1, ...]: sum over the t axes
            split = [n for t, d in zip(times, x.shape) for n in (t, d)]
            return dout.reshape(split).sum(axis=tuple(range(0, 2 * x.ndim, 2)))
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
            out = _infer(ctx, _expand_v2_shape, xs, ctx.attr("shape"))
        ctx.set_output("Out", out, ctx.input_dtype("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        def kernel(x, shape_t, shape_l):
            shape = _ints_from(shape_t, shape_l) or attrs["shape"]
            return np.broadcast_to(x, _expand_v2_shape(list(x.shape), shape)).copy()
        return kernel


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


def _all_inputs_grad(g):
    """`<type>_grad` reading every forward input and Out@GRAD, writing X@GRAD."""
    ins = {s.name: g.input(s.name) for s in get_op(g.fwd.type).inputs}
    ins["Out@GRAD"] = g.output_grad("Out")
    g.op(g.fwd.type + "_grad", _present(ins), {"X@GRAD": g.input_grad("X")}, g.attrs())


Expand.grad = ExpandV2.grad = staticmethod(_all_inputs_grad)


# --- shape, one_hot, range -----------------------------------------------------------------
class Shape(OpDef):
    type = "shape"
    inputs = (In("Input"),)
    outputs = (Out("Out"),)
    share_lod = None
    doc = "Out = Input's shape as an int32 vector."

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", [len(ctx.input_shape("Input"))], dtypes.VarType.INT32)

    @staticmethod
    def kernel(x):
        return np.asarray(x.shape, dtype=np.int32)


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
        if cls.last_is_one and (not xs or xs[-1] not in (1, -1)):
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
            ids = x[..., 0] if trim else x
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


# --- Paddle 2.x tensor ops: tile, flip, roll, strided_slice, unstack, index_select, argsort,
# --- tril_triu, masked_select, size ---------------------------------------------------------
from .registry import longs  # noqa: E402


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
        ctx.set_output("Out", _infer(ctx, _tile_plan, xs, ctx.attr("repeat_times"))[2],
                       ctx.input_dtype("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        def kernel(x, times_t, times_l):
            times = _ints_from(times_t, times_l) or attrs["repeat_times"]
            shape, times, _ = _tile_plan(x.shape, times)
            return np.tile(x.reshape(shape), times)
        return kernel


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
            times = _ints_from(times_t, times_l) or attrs["repeat_times"]
            shape, times, _ = _tile_plan(x.shape, times)
            inter = [v for pair in zip(times, shape) for v in pair]
            return dout.reshape(inter).sum(axis=tuple(range(0, 2 * len(shape), 2))) \
                .reshape(x.shape).astype(x.dtype, copy=False)
        return kernel


Tile.grad = staticmethod(_all_inputs_grad)


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
            return np.flip(x, [_norm_axis(a, x.ndim) for a in axis]).copy()
        return kernel


Flip.grad = staticmethod(lambda g: g.op("flip", {"X": g.output_grad("Out")},
                                        {"Out": g.input_grad("X")}, {"axis": g.attr("axis")}))


def _roll(x, shifts, axis):
    if not axis:
        return np.roll(x.reshape(-1), shifts[0] if len(shifts) == 1 else shifts).reshape(x.shape)
    if len(shifts) != len(axis):
        raise ShapeError(f"roll: shifts {shifts} and axis {axis} differ in length")
    return np.roll(x, shifts, [_norm_axis(a, x.ndim) for a in axis])


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
            shifts = _ints_from(shifts_t) or [int(s) for s in attrs["shifts"]]
            return _roll(x, shifts, axis)
        return kernel


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
            shifts = _ints_from(shifts_t) or [int(s) for s in attrs["shifts"]]
            return _roll(dout, [-s for s in shifts], axis)
        return kernel


Roll.grad = staticmethod(_all_inputs_grad)


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
        a = _norm_axis(a, len(shape), "axes entry")
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
    drop = {_norm_axis(a, len(shape), "decrease_axis entry") for a in decrease}
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
        return (_ints_from(st, stl) or list(attrs["starts"]),
                _ints_from(en, enl) or list(attrs["ends"]),
                _ints_from(sd, sdl) or list(attrs["strides"]))

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
        _, _, out = _infer(ctx, _strided_plan, ctx.input_shape("Input"), axes, starts, ends,
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


def _strided_slice_grad(g):
    ins = {s.name: g.input(s.name) for s in StridedSlice.inputs}
    ins["Out@GRAD"] = g.output_grad("Out")
    g.op("strided_slice_grad", _present(ins), {"Input@GRAD": g.input_grad("Input")},
         g.attrs())


StridedSlice.grad = staticmethod(_strided_slice_grad)


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
        a = _infer(ctx, _norm_axis, ctx.attr("axis"), len(xs))
        n = len(ctx.op.output("Y"))
        if xs[a] >= 0 and xs[a] != n:
            ctx.fail(f"X has {xs[a]} slices along axis {a} but the op has {n} outputs")
        ctx.set_output("Y", xs[:a] + xs[a + 1:], ctx.input_dtype("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        axis = attrs["axis"]

        def kernel(x):
            a = _norm_axis(axis, x.ndim)
            return [np.take(x, i, axis=a) for i in range(x.shape[a])]
        return kernel


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
        return lambda ds: np.stack(ds, axis=_norm_axis(axis, ds[0].ndim + 1))


Unstack.grad = staticmethod(lambda g: g.op(
    "unstack_grad", {"Y@GRAD": g.output_grad("Y")}, {"X@GRAD": g.input_grad("X")}, g.attrs()))


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
        out[_infer(ctx, _norm_axis, ctx.attr("dim"), len(xs))] = ids[0] if ids else -1
        ctx.set_output("Out", out, ctx.input_dtype("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        dim = attrs["dim"]

        def kernel(x, index):
            a = _norm_axis(dim, x.ndim)
            return np.take(x, _check_index(index, x.shape[a], "index_select"), axis=a)
        return kernel


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
            a = _norm_axis(dim, x.ndim)
            dx = np.zeros((x.shape[a],) + np.moveaxis(dout, a, 0).shape[1:], x.dtype)
            np.add.at(dx, index.reshape(-1) % x.shape[a], np.moveaxis(dout, a, 0))
            return np.ascontiguousarray(np.moveaxis(dx, 0, a))
        return kernel


IndexSelect.grad = staticmethod(lambda g: g.op(
    "index_select_grad", {"X": g.input("X"), "Index": g.input("Index"),
                          "Out@GRAD": g.output_grad("Out")},
    {"X@GRAD": g.input_grad("X")}, g.attrs()))


class Argsort(OpDef):
    type = "argsort"
    inputs = (In("X"),)
    outputs = (Out("Out"), Out("Indices"))
    attrs = {"axis": -1, "descending": False}
    share_lod = None
    doc = ("Out = X sorted along `axis` (stable; descending keeps equal values in order), "
           "Indices (int64) where each came from.")

    @staticmethod
    def infer_shape(ctx):
        ctx.share("X", "Out")
        ctx.set_output("Indices", ctx.input_shape("X"), dtypes.VarType.INT64)

    @classmethod
    def prepare(cls, attrs, outputs):
        axis, desc = attrs["axis"], attrs["descending"]

        def kernel(x):
            a = _norm_axis(axis, x.ndim)
            if desc:   # stable descending: sort the reversed axis, map indices back
                n = x.shape[a]
                idx = n - 1 - np.flip(np.argsort(np.flip(x, a), axis=a, kind="stable"), a)
            else:
                idx = np.argsort(x, axis=a, kind="stable")
            return np.take_along_axis(x, idx, axis=a), idx.astype(np.int64)
        return kernel


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
            np.put_along_axis(dx, idx, dout, axis=_norm_axis(axis, x.ndim))
            return dx
        return kernel


Argsort.grad = staticmethod(lambda g: g.op(
    "argsort_grad", {"X": g.input("X"), "Indices": g.output("Indices"),
                     "Out@GRAD": g.output_grad("Out")}, {"X@GRAD": g.input_grad("X")},
    g.attrs()))


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


TrilTriu.grad = staticmethod(lambda g: g.op(
    "tril_triu", {"X": g.output_grad("Out")}, {"Out": g.input_grad("X")}, g.attrs()))


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


MaskedSelect.grad = staticmethod(lambda g: g.op(
    "masked_select_grad", {"X": g.input("X"), "Mask": g.input("Mask"),
                           "Y@GRAD": g.output_grad("Y")}, {"X@GRAD": g.input_grad("X")}))


class Size(OpDef):
    type = "size"
    inputs = (In("Input"),)
    outputs = (Out("Out"),)
    share_lod = None
    doc = "Out = the number of elements of Input, an int64 scalar (shape [])."

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", [], dtypes.VarType.INT64)

    @staticmethod
    def kernel(x):
        return np.asarray(x.size, dtype=np.int64)
