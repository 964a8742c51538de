"""Ranking losses, which score a preferred item against others rather than a class:
rank_loss (RankNet: a pair and the probability that its left item ranks first),
margin_rank_loss (a pair with a margin) and bpr_loss (Bayesian personalized ranking: the
labelled item against every other of its row) — each with its gradient op, formulas as
Paddle 1.8's kernels compute them.
"""
import numpy as np

from .common import grad_maker, sigmoid
from .registry import In, OpDef, Out


def _rows(ctx, slot):
    return ctx.input_shape(slot)[:-1] + [1]


class RankLoss(OpDef):
    type = "rank_loss"
    inputs = (In("Label", no_grad=True), In("Left"), In("Right"))
    outputs = (Out("Out"),)
    share_lod = None
    lod_outputs = ("Out",)
    doc = ("Out = log(1 + exp(Left - Right)) - Label * (Left - Right) (RankNet), element by "
           "element of the three flattened; each [batch] or [batch, 1], Out shaped as Label "
           "(as Fluid 1.8's).")

    @staticmethod
    def infer_shape(ctx):
        shapes = {s: ctx.input_shape(s) for s in ("Label", "Left", "Right")}
        for slot, xs in shapes.items():
            if not 1 <= len(xs) <= 2 or (len(xs) == 2 and xs[1] not in (1, -1)):
                ctx.fail(f"{slot} must be [batch] or [batch, 1], got {xs}")
        b = shapes["Label"][0]
        for slot in ("Left", "Right"):
            if b >= 0 and shapes[slot][0] >= 0 and shapes[slot][0] != b:
                ctx.fail(f"{slot} has {shapes[slot][0]} rows but Label has {b}")
        ctx.set_output("Out", shapes["Label"], ctx.input_dtype("Left"))

    @staticmethod
    def kernel(label, left, right):
        o = left.reshape(-1) - right.reshape(-1)
        out = np.logaddexp(0, o) - label.reshape(-1) * o
        return out.astype(left.dtype).reshape(label.shape)


    grad = grad_maker("rank_loss_grad", ("Label", "Left", "Right", "Out@GRAD"),
                       ("Left", "Right"))


class RankLossGrad(OpDef):
    type = "rank_loss_grad"
    inputs = (In("Label"), In("Left"), In("Right"), In("Out@GRAD"))
    outputs = (Out("Left@GRAD", dispensable=True), Out("Right@GRAD", dispensable=True))
    infer_shape = None

    @staticmethod
    def kernel(label, left, right, dout):
        d = dout.reshape(-1) * (sigmoid(left.reshape(-1) - right.reshape(-1)) -
                                label.reshape(-1))
        d = d.astype(left.dtype)
        return d.reshape(left.shape), (-d).reshape(right.shape)


class MarginRankLoss(OpDef):
    type = "margin_rank_loss"
    inputs = (In("X1"), In("X2"), In("Label", no_grad=True))
    outputs = (Out("Out"), Out("Activated", intermediate=True))
    attrs = {"margin": 0.0}
    share_lod = None
    lod_outputs = ("Out", "Activated")
    doc = "Out = max(0, -Label * (X1 - X2) + margin); Activated = (Out > 0)."

    @staticmethod
    def infer_shape(ctx):
        ctx.share("X1", "Out")
        ctx.share("X1", "Activated")

    @staticmethod
    def kernel(x1, x2, label, *, margin):
        out = np.maximum(0, -label * (x1 - x2) + margin).astype(x1.dtype)
        return out, (out > 0).astype(x1.dtype)


    grad = grad_maker("margin_rank_loss_grad", ("Label", "Activated", "Out@GRAD"),
                       ("X1", "X2"))


class MarginRankLossGrad(OpDef):
    type = "margin_rank_loss_grad"
    inputs = (In("Label"), In("Activated"), In("Out@GRAD"))
    outputs = (Out("X1@GRAD", dispensable=True), Out("X2@GRAD", dispensable=True))
    attrs = MarginRankLoss.attrs
    infer_shape = None

    @staticmethod
    def kernel(label, act, dout):
        d = (dout * act * label).astype(dout.dtype)
        return -d, d


class BprLoss(OpDef):
    type = "bpr_loss"
    inputs = (In("X"), In("Label", no_grad=True))
    outputs = (Out("Y"),)
    lod_outputs = ("Y",)
    doc = ("Y[i] = -mean over j != Label[i] of log(sigmoid(X[i, Label[i]] - X[i, j])) "
           "(Bayesian personalized ranking).")

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Y", _rows(ctx, "X"), ctx.input_dtype("X"))

    @staticmethod
    def _parts(x, label):
        n, c = x.reshape(-1, x.shape[-1]).shape
        x2 = x.reshape(n, c)
        lab = label.reshape(-1).astype(np.int64)
        pos = x2[np.arange(n), lab][:, None]
        other = np.ones((n, c), bool)
        other[np.arange(n), lab] = False
        return x2, lab, pos, other, c

    @staticmethod
    def kernel(x, label):
        x2, lab, pos, other, c = BprLoss._parts(x, label)
        terms = np.logaddexp(0, -(pos - x2)) * other
        return (terms.sum(axis=1) / (c - 1)).reshape(x.shape[:-1] + (1,)).astype(x.dtype)


    grad = grad_maker("bpr_loss_grad", ("X", "Label", "Y@GRAD"), ("X",))


class BprLossGrad(OpDef):
    type = "bpr_loss_grad"
    inputs = (In("X"), In("Label"), In("Y@GRAD"))
    outputs = (Out("X@GRAD"),)
    infer_shape = None

    @staticmethod
    def kernel(x, label, dy):
        x2, lab, pos, other, c = BprLoss._parts(x, label)
        dyr = dy.reshape(-1, 1)
        s = sigmoid(-(pos - x2)) * other / (c - 1) * dyr      # d/dx_j of the j terms
        dx = s.copy()
        dx[np.arange(len(lab)), lab] = -s.sum(axis=1)
        return dx.reshape(x.shape).astype(x.dtype)
