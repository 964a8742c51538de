"""Small tensor ops of Fluid 1.x that Paddle 1.8 still registers: flatten (the first version,
whose gradient reads X), fill (a constant tensor from a list of values), fill_zeros_like2 (with
an output dtype), index_sample (a per-row gather), allclose, conv_shift (the circular
convolution of the Neural Turing Machine), hinge_loss and l1_norm, with the gradients of the
differentiable ones. Shapes, attributes and formulas are Paddle 1.8's."""
import numpy as np

from ..core import dtypes
from ..core.tensor import LoDTensor
from ..errors import ExecutionError, ShapeError
from .common import grad_maker, numel
from .registry import In, OpDef, Out, floats, ints


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


# --- fill, fill_zeros_like2 -----------------------------------------------------------------
class Fill(OpDef):
    type = "fill"
    inputs = ()
    outputs = (Out("Out"),)
    attrs = {"value": floats(), "shape": ints(), "dtype": dtypes.VarType.FP32,
             "force_cpu": False}
    share_lod = None
    doc = ("Out = the float `value`s (row major) cast to `dtype`, in shape `shape`: value must "
           "hold at least prod(shape) numbers.")

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", list(ctx.attr("shape")), ctx.attr("dtype"))

    @classmethod
    def prepare(cls, attrs, outputs):
        shape = [int(d) for d in attrs["shape"]]
        if any(d < 0 for d in shape):
            raise ShapeError(f"fill: shape {shape} has a negative dim")
        n = int(np.prod(shape, dtype=np.int64))
        vals = np.asarray(attrs["value"], np.float32)
        if vals.size < n:
            raise ShapeError(f"fill: shape {shape} needs {n} values, `value` holds {vals.size}")
        out = vals[:n].astype(dtypes.to_numpy(attrs["dtype"])).reshape(shape)
        return lambda: out.copy()


class FillZerosLike2(OpDef):
    type = "fill_zeros_like2"
    inputs = (In("X", no_grad=True),)
    outputs = (Out("Out"),)
    attrs = {"dtype": dtypes.VarType.FP32}
    doc = "Out = zeros of X's shape in `dtype` (X's values are never read)."

    @staticmethod
    def infer_shape(ctx):
        x = ctx.input_var("X")
        ctx.set_output("Out", list(x.shape), ctx.attr("dtype"), x.lod_level)

    @staticmethod
    def kernel(x, *, dtype):
        return np.zeros(x.shape, dtypes.to_numpy(dtype))


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


# --- allclose --------------------------------------------------------------------------------
class Allclose(OpDef):
    type = "allclose"
    inputs = (In("Input"), In("Other"))
    outputs = (Out("Out"),)
    attrs = {"rtol": 1e-5, "atol": 1e-8, "equal_nan": False}
    share_lod = None
    doc = ("Out = [all(|Input - Other| <= atol + rtol * |Other|)] (bool [1]); with equal_nan "
           "a NaN equals a NaN at the same place.")

    @staticmethod
    def infer_shape(ctx):
        a, b = ctx.input_shape("Input"), ctx.input_shape("Other")
        if len(a) != len(b) or any(p >= 0 and q >= 0 and p != q for p, q in zip(a, b)):
            ctx.fail("Input and Other must have the same shape")
        ctx.set_output("Out", [1], dtypes.VarType.BOOL)

    @staticmethod
    def kernel(a, b, *, rtol, atol, equal_nan):
        if a.shape != b.shape:
            raise ShapeError(f"allclose: Input{list(a.shape)} and Other{list(b.shape)} differ")
        t = a.dtype.type   # the tolerances in X's type, as Paddle's kernel casts them
        with np.errstate(invalid="ignore"):
            close = np.abs(a - b) <= t(atol) + t(rtol) * np.abs(b)
        if equal_nan:
            na, nb = np.isnan(a), np.isnan(b)
            ok = bool((na == nb).all() and (close != na).all())
        else:
            ok = bool(close.all())
        return np.array([ok])


# --- conv_shift ------------------------------------------------------------------------------
def _shift_index(m, n):
    """[m, n] X column read for Out column i and Y column j: (i + j - (n-1)/2) mod m."""
    return (np.arange(m)[:, None] + np.arange(n)[None, :] - (n - 1) // 2) % m


def _check_shift(x, y):
    if x.ndim != 2 or y.ndim != 2 or x.shape[0] != y.shape[0]:
        raise ShapeError(f"conv_shift: X{list(x.shape)} and Y{list(y.shape)} must be 2-D with "
                         f"the same rows")
    if y.shape[1] % 2 != 1 or y.shape[1] > x.shape[1]:
        raise ShapeError(f"conv_shift: Y's width {y.shape[1]} must be odd and at most X's "
                         f"{x.shape[1]}")


class ConvShift(OpDef):
    type = "conv_shift"
    inputs = (In("X"), In("Y"))
    outputs = (Out("Out"),)
    doc = ("Circular convolution per row: Out[k, i] = sum_j X[k, (i + j - (N-1)/2) mod M] * "
           "Y[k, j], X [B, M], Y [B, N] with N odd and <= M.")

    @staticmethod
    def infer_shape(ctx):
        xs, ys = ctx.input_shape("X"), ctx.input_shape("Y")
        if len(xs) != 2 or len(ys) != 2:
            ctx.fail("X and Y must be 2-D")
        if xs[0] >= 0 and ys[0] >= 0 and xs[0] != ys[0]:
            ctx.fail("X and Y must have the same rows")
        if ys[1] >= 0 and ys[1] % 2 != 1:
            ctx.fail("Y's width must be odd")
        if xs[1] >= 0 and ys[1] >= 0 and ys[1] > xs[1]:
            ctx.fail("Y's width must be at most X's")
        ctx.share("X", "Out")

    @staticmethod
    def kernel(x, y):
        _check_shift(x, y)
        idx = _shift_index(x.shape[1], y.shape[1])
        return np.einsum("kij,kj->ki", x[:, idx], y).astype(x.dtype)

    grad = grad_maker("conv_shift_grad", ("X", "Y", "Out@GRAD"), ("X", "Y"))


class ConvShiftGrad(OpDef):
    type = "conv_shift_grad"
    inputs = (In("X"), In("Y"), In("Out@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True), Out("Y@GRAD", dispensable=True))
    infer_shape = None

    @staticmethod
    def kernel(x, y, dout):
        _check_shift(x, y)
        idx = _shift_index(x.shape[1], y.shape[1])
        dx = np.zeros_like(x)
        b, (m, n) = x.shape[0], idx.shape
        contrib = dout[:, :, None] * y[:, None, :]            # [B, M, N] into X[k, idx[i, j]]
        np.add.at(dx, (np.arange(b)[:, None, None], np.broadcast_to(idx, (b, m, n))), contrib)
        dy = np.einsum("kij,ki->kj", x[:, idx], dout).astype(y.dtype)
        return dx, dy


# --- hinge_loss, l1_norm -----------------------------------------------------------------------
class HingeLoss(OpDef):
    type = "hinge_loss"
    inputs = (In("Logits"), In("Labels", no_grad=True))
    outputs = (Out("Loss"),)
    share_lod = "Logits"
    doc = ("Loss = max(1 - Logits * (2 Labels - 1), 0): Labels are 0 or 1; Logits and Labels "
           "[N, 1].")

    @staticmethod
    def infer_shape(ctx):
        ps, ls = ctx.input_shape("Logits"), ctx.input_shape("Labels")
        if len(ps) != 2 or ps[1] != 1:
            ctx.fail(f"Logits must be [batch_size, 1], got {ps}")
        if len(ls) != 2 or any(p >= 0 and q >= 0 and p != q for p, q in zip(ps, ls)):
            ctx.fail(f"Labels{ls} must have Logits' shape {ps}")
        ctx.set_output("Loss", [ps[0], 1], ctx.input_dtype("Logits"),
                       ctx.input_lod_level("Logits"))

    @staticmethod
    def kernel(x, y):
        if x.shape != y.shape:
            raise ShapeError(f"hinge_loss: Logits{list(x.shape)} and Labels{list(y.shape)} "
                             f"differ")
        return np.maximum(1 - x * (2 * y - 1), 0).astype(x.dtype)

    grad = grad_maker("hinge_loss_grad", ("Logits", "Labels", "Loss@GRAD"), ("Logits",))


class HingeLossGrad(OpDef):
    type = "hinge_loss_grad"
    inputs = (In("Logits"), In("Labels"), In("Loss@GRAD"))
    outputs = (Out("Logits@GRAD"),)
    infer_shape = None

    @staticmethod
    def kernel(x, y, dloss):
        alt = 2 * y - 1
        return (dloss * (x * alt < 1) * -alt).astype(x.dtype)


class L1Norm(OpDef):
    type = "l1_norm"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    share_lod = None
    doc = "Out = [sum(|X|)] (shape [1])."

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", [1], ctx.input_dtype("X"), 0)

    @staticmethod
    def kernel(x):
        return np.abs(x).sum(dtype=x.dtype).reshape(1)

    grad = grad_maker("l1_norm_grad", ("X", "Out@GRAD"), ("X",))


class L1NormGrad(OpDef):
    type = "l1_norm_grad"
    inputs = (In("X"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    infer_shape = None
    share_lod = None

    @staticmethod
    def kernel(x, dout):
        if dout.size != 1:
            raise ShapeError(f"l1_norm_grad: Out@GRAD must hold one value, got "
                             f"{list(dout.shape)}")
        return (dout.reshape(()) * np.sign(x)).astype(x.dtype)
