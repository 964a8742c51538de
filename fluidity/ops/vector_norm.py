"""Norms of vectors and the ops built on them: norm (Fluid's l2_normalize: X divided by
its L2 norm along an axis), l1_norm (sum |X|) and cos_sim (the cosine of two rows: their dot
product over their L2 norms) — each with its gradient op, formulas as Paddle 1.8's kernels
compute them.
"""
import numpy as np

from ..errors import ShapeError
from .common import grad_maker
from .registry import In, OpDef, Out


class Norm(OpDef):
    type = "norm"
    share_lod = None
    lod_outputs = ("Out", "Norm")
    inputs = (In("X"),)
    outputs = (Out("Out"), Out("Norm", intermediate=True))
    attrs = {"axis": 1, "epsilon": 1e-10, "is_test": False}
    doc = "Out = X / sqrt(sum(X^2 along axis) + epsilon); Norm = that root (dim kept as 1)."

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        a = ctx.attr("axis")
        if not -len(xs) <= a < len(xs):
            ctx.fail(f"axis {a} is out of range for rank {len(xs)}")
        ctx.share("X", "Out")
        ns = list(xs)
        ns[a % len(xs)] = 1
        ctx.set_output("Norm", ns, ctx.input_dtype("X"))

    @staticmethod
    def kernel(x, *, axis, epsilon):
        n = np.sqrt((x * x).sum(axis=axis, keepdims=True) + epsilon)
        return (x / n).astype(x.dtype), n.astype(x.dtype)


    grad = grad_maker("norm_grad", ("X", "Norm", "Out@GRAD"), ("X",))


class NormGrad(OpDef):
    type = "norm_grad"
    inputs = (In("X"), In("Norm"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = Norm.attrs
    infer_shape = None

    @staticmethod
    def kernel(x, norm, dout, *, axis):
        dot = (x * dout).sum(axis=axis, keepdims=True)
        return (dout / norm - x * dot / norm ** 3).astype(x.dtype)


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


class CosSim(OpDef):
    type = "cos_sim"
    inputs = (In("X"), In("Y"))
    outputs = (Out("Out"), Out("XNorm", intermediate=True), Out("YNorm", intermediate=True))
    lod_outputs = ("Out",)
    doc = ("Out[i] = cos(X[i], Y[i]) over the flattened rows (Y may be one row, used for "
           "every X row); XNorm, YNorm are the rows' L2 norms.")

    @staticmethod
    def infer_shape(ctx):
        xs, ys = ctx.input_shape("X"), ctx.input_shape("Y")
        if len(xs) != len(ys) or xs[1:] != ys[1:]:
            ctx.fail(f"X{xs} and Y{ys} must have the same row shape")
        if ys[0] not in (1, -1) and xs[0] not in (-1, ys[0]):
            ctx.fail(f"Y{ys} must have X's rows or one row")
        dt = ctx.input_dtype("X")
        ctx.set_output("Out", [xs[0], 1], dt)
        ctx.set_output("XNorm", [xs[0], 1], dt)
        ctx.set_output("YNorm", [ys[0], 1], dt)

    @staticmethod
    def kernel(x, y):
        x2, y2 = x.reshape(x.shape[0], -1), y.reshape(y.shape[0], -1)
        xn = np.sqrt((x2 * x2).sum(axis=1, keepdims=True))
        yn = np.sqrt((y2 * y2).sum(axis=1, keepdims=True))
        out = (x2 * y2).sum(axis=1, keepdims=True) / (xn * yn)
        return out.astype(x.dtype), xn.astype(x.dtype), yn.astype(x.dtype)


    grad = grad_maker("cos_sim_grad", ("X", "Y", "Out", "XNorm", "YNorm", "Out@GRAD"),
                       ("X", "Y"))


class CosSimGrad(OpDef):
    type = "cos_sim_grad"
    inputs = (In("X"), In("Y"), In("Out"), In("XNorm"), In("YNorm"), In("Out@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True), Out("Y@GRAD", dispensable=True))
    infer_shape = None

    @staticmethod
    def kernel(x, y, out, xn, yn, dout):
        x2, y2 = x.reshape(x.shape[0], -1), y.reshape(y.shape[0], -1)
        dx = dout * (y2 / (xn * yn) - out * x2 / (xn * xn))
        dy = dout * (x2 / (xn * yn) - out * y2 / (yn * yn))
        if y.shape[0] == 1 and x.shape[0] != 1:
            dy = dy.sum(axis=0, keepdims=True)
        return dx.reshape(x.shape).astype(x.dtype), dy.reshape(y.shape).astype(y.dtype)
