"""Shape ops: reshape2, transpose2, squeeze2, unsqueeze2, flatten2 and
flatten_contiguous_range, which only rearrange X, and shape and size, which read its shape;
flatten, Fluid 1.x's first version of flatten2 (no XShape: its gradient reads X).

Conventions as in tensor.py, and (Paddle's): the rearranging ops also write `XShape`, a tensor
of shape [0] + X.shape holding no data. Their grad ops read only XShape and Out@GRAD, so X need
not stay alive for backward. Out keeps X's LoD only when dim 0 is unchanged (transpose2's
never: Fluid 1.8's TransposeOp shares none), and is never a view of X.
"""
import numpy as np

from ..core import dtypes
from ..core.names import EMPTY_VAR_NAME
from ..core.tensor import LoDTensor
from ..errors import ProgramError, ShapeAssertionError, ShapeError
from .common import grad_maker, infer_with, ints_from, norm_axis, numel
from .registry import In, OpDef, Out, ints


def _xshape_array(a):
    return LoDTensor(np.empty((0,) + a.shape, a.dtype))


_XSHAPE = Out("XShape", dispensable=True, intermediate=True)


def _xshape_grad(g):
    if not g.output("XShape"):
        raise ProgramError(f"op '{g.fwd.type}' has no XShape output, which its gradient needs")
    g.op(g.fwd.type + "_grad", {"XShape": g.output("XShape"), "Out@GRAD": g.output_grad("Out")},
         {"X@GRAD": g.input_grad("X")}, g.attrs())


# --- base classes: the rearranging ops, and their grads (which only reshape) ---------------
class _ShapeOp(OpDef):
    """Out is X rearranged; `out_shape(xs, attr)` is the shape rule (attr: name -> value),
    used at build time (xs may hold -1) and at run time."""
    inputs = (In("X"),)
    outputs = (Out("Out"), _XSHAPE)
    kind = "value"
    share_lod = None
    keeps_lod = True           # Out takes X's LoD when its dim 0 is X's (Fluid's ShareLoD)
    inplace = {"Out": "X"}
    grad = staticmethod(_xshape_grad)   # Out@GRAD reshaped to XShape[1:]

    @classmethod
    def out_shape(cls, xs, attr):
        raise NotImplementedError

    @classmethod
    def build_shape(cls, ctx, xs):
        return cls.out_shape(xs, ctx.attr)

    @classmethod
    def infer_shape(cls, ctx):
        xs = ctx.input_shape("X")
        out = infer_with(ctx, cls.build_shape, ctx, xs)
        dt = ctx.input_dtype("X")
        lod = ctx.input_lod_level("X") if cls.keeps_lod and out[:1] == xs[:1] else 0
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
            lod = x._lod if cls.keeps_lod and out.ndim and a.ndim \
                and out.shape[0] == a.shape[0] else []
            return LoDTensor(out, lod), _xshape_array(a)
        return kernel



def _xshape_double_grad(g):
    """The grad of a rearranging op's grad (X@GRAD = Out@GRAD rearranged back to X's shape):
    it is linear in Out@GRAD, so Out@GRAD gets the forward op applied to ddX (Fluid's
    reshape2_grad_grad), and XShape nothing. reshape2's target is taken from Out@GRAD's own
    shape at run time (a `shape` op), so a target that came from a tensor input is kept."""
    out = g.input_grad("Out@GRAD")
    if all(n == EMPTY_VAR_NAME for n in out):
        return
    fwd, ins = g.fwd.type[:-len("_grad")], {"X": g.output_grad("X@GRAD")}
    if fwd == "reshape2":
        dout = g.input("Out@GRAD")
        ins["Shape"] = g.temp(dout)
        g.op("shape", {"Input": dout}, {"Out": ins["Shape"]})
    g.op(fwd, ins, {"Out": out}, g.attrs())


class _ShapeOpGrad(OpDef):
    inputs = (In("XShape"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    infer_shape = None
    share_lod = None
    inplace = {"X@GRAD": "Out@GRAD"}
    grad = staticmethod(_xshape_double_grad)

    @staticmethod
    def kernel(xshape, dout):
        return dout.reshape(xshape.shape[1:])


# --- reshape2, transpose2, squeeze2, unsqueeze2, flatten2, flatten_contiguous_range --------
def _reshape_target(xs, shape):
    """Paddle's reshape rule: 0 copies X's dim at that index, one -1 is inferred."""
    if shape.count(-1) > 1:
        raise ShapeAssertionError(f"shape {shape} may hold only one -1")
    out, infer = [], None
    for i, d in enumerate(shape):
        if d == 0:
            if i >= len(xs):
                raise ShapeAssertionError(f"shape {shape} has 0 at index {i}, but X{xs} has no "
                                          f"dim {i} to copy")
            d = xs[i]
        elif d == -1:
            infer = i
        elif d < -1:
            raise ShapeAssertionError(f"shape {shape} holds invalid dim {d}")
        out.append(d)
    n_in = numel(xs)
    known = [d for i, d in enumerate(out) if i != infer]
    n_known = numel(known)
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
        given = ints_from(shape_t, shape_list)
        return attrs.__getitem__ if given is None else {**attrs, "shape": given}.__getitem__


def transpose_perm(axis, rank):
    perm = [norm_axis(a, rank) for a in axis]
    if sorted(perm) != list(range(rank)):
        raise ShapeError(f"axis {list(axis)} is not a permutation of the {rank} dims of X")
    return perm


class Transpose2(_ShapeOp):
    type = "transpose2"
    attrs = {"axis": ints(), "data_format": "AnyLayout"}
    keeps_lod = False
    doc = "Out = X with its dims permuted: Out.dim[i] = X.dim[axis[i]]."

    @staticmethod
    def out_shape(xs, attr):
        return [xs[i] for i in transpose_perm(attr("axis"), len(xs))]

    @classmethod
    def apply(cls, a, attr):
        return a.transpose(transpose_perm(attr("axis"), a.ndim))


class Transpose2Grad(_ShapeOpGrad):
    type = "transpose2_grad"
    attrs = Transpose2.attrs
    kernel = None

    @classmethod
    def prepare(cls, attrs, outputs):
        axis = attrs["axis"]

        def kernel(xshape, dout):
            inv = np.argsort(transpose_perm(axis, dout.ndim))
            return np.ascontiguousarray(dout.transpose(inv))
        return kernel


class Squeeze2(_ShapeOp):
    type = "squeeze2"
    attrs = {"axes": ints()}

    doc = ("Out = X without the size-1 dims listed in `axes` (every size-1 dim if empty); a "
           "listed dim whose size is not 1 is kept (Paddle 2.x).")

    @staticmethod
    def out_shape(xs, attr):
        axes = {norm_axis(a, len(xs), "axes entry") for a in attr("axes")}
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
        given = ints_from(axes_t, axes_list)
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
        return [numel(xs[:axis]), numel(xs[axis:])]


class FlattenContiguousRange(_ShapeOp):
    type = "flatten_contiguous_range"
    attrs = {"start_axis": 1, "stop_axis": 1}
    doc = "Out = X with dims start_axis..stop_axis (inclusive) merged into one."

    @staticmethod
    def out_shape(xs, attr):
        if not xs:
            return [1]
        start = norm_axis(attr("start_axis"), len(xs), "start_axis")
        stop = norm_axis(attr("stop_axis"), len(xs), "stop_axis")
        if start > stop:
            raise ShapeError(f"start_axis {start} is after stop_axis {stop}")
        return xs[:start] + [numel(xs[start:stop + 1])] + xs[stop + 1:]


for _fwd in (Reshape2, Squeeze2, Unsqueeze2, Flatten2, FlattenContiguousRange):
    type(_fwd.__name__ + "Grad", (_ShapeOpGrad,),
         {"type": _fwd.type + "_grad", "attrs": _fwd.attrs, "__module__": __name__})


# --- flatten (v1) ----------------------------------------------------------------------------
def _flatten_shape(xs, axis):
    if not 0 <= axis <= len(xs):
        raise ShapeError(f"flatten: axis {axis} must be in [0, {len(xs)}] for X{list(xs)}")
    return [numel(xs[:axis]), numel(xs[axis:])]


class Flatten(OpDef):
    type = "flatten"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    attrs = {"axis": 1}
    kind = "value"
    share_lod = None
    doc = ("Out = X as a matrix [prod(X.dims[:axis]), prod(X.dims[axis:])]; X's LoD kept when "
           "dim 0 is unchanged (flatten2 is the form with XShape).")

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        try:
            out = _flatten_shape(xs, ctx.attr("axis"))
        except ShapeError as e:
            ctx.fail(str(e))
        keep = bool(xs) and out[0] == xs[0]
        ctx.set_output("Out", out, ctx.input_dtype("X"),
                       ctx.input_lod_level("X") if keep else 0)

    @staticmethod
    def kernel(x, *, axis):
        a = x._array
        out = a.reshape(_flatten_shape(a.shape, axis)).copy()
        keep = a.ndim > 0 and out.shape[0] == a.shape[0]
        return LoDTensor(out, x._lod if keep else [])

    grad = grad_maker("flatten_grad", ("X", "Out@GRAD"), ("X",))


class FlattenGrad(OpDef):
    type = "flatten_grad"
    inputs = (In("X"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = Flatten.attrs
    infer_shape = None

    @staticmethod
    def kernel(x, dout):
        return dout.reshape(x.shape).copy()


# --- shape, size ---------------------------------------------------------------------------
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


class Size(OpDef):
    type = "size"
    inputs = (In("Input"),)
    outputs = (Out("Out"),)
    share_lod = None
    doc = "Out = the number of elements of Input, int64, shape [1] (Fluid 1.x's)."

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", [1], dtypes.VarType.INT64)

    @staticmethod
    def kernel(x):
        return np.asarray([x.size], dtype=np.int64)

