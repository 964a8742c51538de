"""modified_huber_loss: the binary classification loss of Zhang (2004) on a score X and a
0/1 label Y, as Fluid 1.8 computes it: with z = X * (2Y - 1) (kept as IntermediateVal),
loss = -4z for z < -1, (1 - z)^2 for z < 1, else 0; and its gradient with respect to X."""
import numpy as np

from ..errors import ShapeError
from .registry import In, OpDef, Out


def _loss(z):
    return np.where(z < -1, -4 * z, np.where(z < 1, (1 - z) * (1 - z), 0)).astype(z.dtype)


def _slope(z):
    return np.where(z < -1, -4, np.where(z < 1, -2 * (1 - z), 0)).astype(z.dtype)


class ModifiedHuberLoss(OpDef):
    type = "modified_huber_loss"
    inputs = (In("X"), In("Y", no_grad=True))
    outputs = (Out("IntermediateVal", intermediate=True), Out("Out"))
    share_lod = None
    doc = ("IntermediateVal = X * (2Y - 1); Out = -4z (z < -1), (1 - z)^2 (z < 1), 0 "
           "otherwise, for X and Y of shape [N, 1].")

    @staticmethod
    def infer_shape(ctx):
        xs, ys = list(ctx.input_shape("X")), list(ctx.input_shape("Y"))
        if len(xs) != 2:
            ctx.fail(f"X must be 2-D [N, 1], got X{xs}")
        if all(d >= 0 for d in xs + ys) and xs != ys:
            ctx.fail(f"X{xs} and Y{ys} must have one shape")
        if xs[1] >= 0 and xs[1] != 1:
            ctx.fail(f"X must be [N, 1], got X{xs}")
        ctx.set_output("IntermediateVal", xs, ctx.input_dtype("X"))
        ctx.set_output("Out", [xs[0], 1], ctx.input_dtype("X"))

    @staticmethod
    def kernel(x, y):
        if x.shape != y.shape or x.ndim != 2 or x.shape[1] != 1:
            raise ShapeError(f"modified_huber_loss: X{list(x.shape)} and Y{list(y.shape)} "
                             f"must both be [N, 1]")
        z = (x * (2 * y.astype(x.dtype) - 1)).astype(x.dtype)
        return z, _loss(z).reshape(x.shape[0], 1)

    @staticmethod
    def grad(g):
        g.op("modified_huber_loss_grad",
             {"Y": g.input("Y"), "IntermediateVal": g.output("IntermediateVal"),
              "Out@GRAD": g.output_grad("Out")}, {"X@GRAD": g.input_grad("X")})


class ModifiedHuberLossGrad(OpDef):
    type = "modified_huber_loss_grad"
    inputs = (In("Y"), In("IntermediateVal"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    infer_shape = None
    share_lod = None

    @staticmethod
    def kernel(y, z, dout):
        return (dout.reshape(z.shape) * (2 * y.astype(z.dtype) - 1) * _slope(z)).astype(z.dtype)
