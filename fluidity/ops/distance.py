"""Row-wise differences and distances of two tensors: minus (X - Y, same shapes) and
squared_l2_distance (each row's squared Euclidean distance to Y's row, or to Y's one row),
with their gradients, as Fluid 1.8 defines them."""
import numpy as np

from ..errors import ShapeError
from .registry import In, OpDef, Out


class Minus(OpDef):
    type = "minus"
    inputs = (In("X"), In("Y"))
    outputs = (Out("Out"),)
    doc = "Out = X - Y, X and Y of one shape (no broadcasting: elementwise_sub has it)."

    @staticmethod
    def infer_shape(ctx):
        xs, ys = ctx.input_shape("X"), ctx.input_shape("Y")
        known = all(d >= 0 for d in list(xs) + list(ys))
        if known and list(xs) != list(ys):
            ctx.fail(f"minus needs X and Y of one shape, got X{list(xs)} and Y{list(ys)}")
        ctx.set_output("Out", xs, ctx.input_dtype("X"))

    @staticmethod
    def kernel(x, y):
        if x.shape != y.shape:
            raise ShapeError(f"minus: X{list(x.shape)} and Y{list(y.shape)} differ in shape")
        return x - y

    @staticmethod
    def grad(g):
        # as Fluid: two scale ops, dX = dOut, dY = -dOut
        dout = g.output_grad("Out")
        if g.input("X"):
            g.op("scale", {"X": dout}, {"Out": g.input_grad("X")}, {"scale": 1.0})
        if g.input("Y"):
            g.op("scale", {"X": dout}, {"Out": g.input_grad("Y")}, {"scale": -1.0})


def _rows(shape):
    n = shape[0]
    rest = 1
    for d in shape[1:]:
        rest = -1 if d < 0 or rest < 0 else rest * d
    return n, rest


class SquaredL2Distance(OpDef):
    type = "squared_l2_distance"
    inputs = (In("X"), In("Y"))
    outputs = (Out("sub_result", intermediate=True), Out("Out"))
    share_lod = "X"
    lod_outputs = ("Out",)
    doc = ("sub_result = X - Y over rows flattened to [N, D] (Y of N rows, or of one row "
           "broadcast to all); Out[i] = sum_j sub_result[i, j]^2, shape [N, 1].")

    @staticmethod
    def infer_shape(ctx):
        xs, ys = list(ctx.input_shape("X")), list(ctx.input_shape("Y"))
        if len(xs) != len(ys):
            ctx.fail(f"X{xs} and Y{ys} must have the same rank")
        n, d = _rows(xs)
        _, dy = _rows(ys)
        if d >= 0 and dy >= 0 and d != dy:
            ctx.fail(f"X{xs} and Y{ys} must have the same size past the first dim")
        if ys[0] >= 0 and ys[0] != 1 and n >= 0 and ys[0] != n:
            ctx.fail(f"Y{ys} must have 1 row or as many rows as X{xs}")
        ctx.set_output("sub_result", [n, d], ctx.input_dtype("X"))
        ctx.set_output("Out", [n, 1], ctx.input_dtype("X"))

    @staticmethod
    def kernel(x, y):
        n = x.shape[0]
        x2 = x.reshape(n, -1)
        y2 = y.reshape(y.shape[0], -1) if y.ndim else y.reshape(1, -1)
        if y2.shape[1] != x2.shape[1] or y2.shape[0] not in (1, n):
            raise ShapeError(f"squared_l2_distance: Y{list(y.shape)} does not match "
                             f"X{list(x.shape)} (Y needs 1 or {n} rows of {x2.shape[1]})")
        sub = x2 - y2
        return sub, (sub * sub).sum(axis=1, keepdims=True).astype(x.dtype)

    @staticmethod
    def grad(g):
        g.op("squared_l2_distance_grad",
             {"sub_result": g.output("sub_result"), "X": g.input("X"), "Y": g.input("Y"),
              "Out@GRAD": g.output_grad("Out")},
             {"X@GRAD": g.input_grad("X"), "Y@GRAD": g.input_grad("Y")})


class SquaredL2DistanceGrad(OpDef):
    type = "squared_l2_distance_grad"
    inputs = (In("sub_result"), In("X"), In("Y"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"), Out("Y@GRAD"))
    infer_shape = None
    share_lod = None

    @staticmethod
    def kernel(sub, x, y, dout):
        d = 2 * dout.reshape(-1, 1) * sub
        dy = -d if y.shape[0] == sub.shape[0] else -d.sum(axis=0, keepdims=True)
        return d.reshape(x.shape).astype(x.dtype), dy.reshape(y.shape).astype(y.dtype)
