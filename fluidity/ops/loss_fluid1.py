"""Losses and normalizations Fluid 1.x programs use beyond loss.py's: rank_loss,
margin_rank_loss, bpr_loss, kldiv_loss, teacher_student_sigmoid_loss, label_smooth, cos_sim,
norm (l2_normalize) — each with its gradient op (formulas as Paddle's kernels compute them).
"""
import numpy as np

from .common import grad_maker, sigmoid
from .registry import In, OpDef, Out


def _rows(ctx, slot):
    return ctx.input_shape(slot)[:-1] + [1]


# --- rank_loss, margin_rank_loss, bpr_loss ---------------------------------------------------
class RankLoss(OpDef):
    type = "rank_loss"
    inputs = (In("Label", no_grad=True), In("Left"), In("Right"))
    outputs = (Out("Out"),)
    share_lod = "Left"
    doc = "Out = log(1 + exp(Left - Right)) - Label * (Left - Right) (RankNet)."

    @staticmethod
    def infer_shape(ctx):
        ctx.share("Left", "Out")

    @staticmethod
    def kernel(label, left, right):
        o = left - right
        return (np.logaddexp(0, o) - label * o).astype(left.dtype)


    grad = grad_maker("rank_loss_grad", ("Label", "Left", "Right", "Out@GRAD"),
                       ("Left", "Right"))


class RankLossGrad(OpDef):
    type = "rank_loss_grad"
    inputs = (In("Label"), In("Left"), In("Right"), In("Out@GRAD"))
    outputs = (Out("Left@GRAD", dispensable=True), Out("Right@GRAD", dispensable=True))
    infer_shape = None

    @staticmethod
    def kernel(label, left, right, dout):
        d = (dout * (sigmoid(left - right) - label)).astype(left.dtype)
        return d, -d


class MarginRankLoss(OpDef):
    type = "margin_rank_loss"
    inputs = (In("X1"), In("X2"), In("Label", no_grad=True))
    outputs = (Out("Out"), Out("Activated", intermediate=True))
    attrs = {"margin": 0.0}
    share_lod = "X1"
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


# --- kldiv_loss, teacher_student_sigmoid_loss ------------------------------------------------
_KL_REDUCE = {
    "none": lambda v, x: v,
    "sum": lambda v, x: v.sum(),
    "mean": lambda v, x: v.mean(),
    "batchmean": lambda v, x: v.sum() / x.shape[0],
}
_KL_SCALE = {"none": lambda x: 1.0, "sum": lambda x: 1.0, "mean": lambda x: 1.0 / x.size,
             "batchmean": lambda x: 1.0 / x.shape[0]}


class KldivLoss(OpDef):
    type = "kldiv_loss"
    inputs = (In("X"), In("Target", no_grad=True))
    outputs = (Out("Loss"),)
    attrs = {"reduction": "mean"}
    share_lod = None
    doc = ("Loss = Target * (log(Target) - X) where Target > 0 (else 0), X being "
           "log-probabilities; reduced by `reduction` (none, sum, mean, batchmean).")

    @staticmethod
    def infer_shape(ctx):
        red = ctx.attr("reduction")
        if red not in _KL_REDUCE:
            ctx.fail(f"reduction must be one of {sorted(_KL_REDUCE)}, got '{red}'")
        shape = ctx.input_shape("X") if red == "none" else [1]      # Fluid 1.x's [1]
        ctx.set_output("Loss", shape, ctx.input_dtype("X"))

    @staticmethod
    def kernel(x, target, *, reduction):
        safe = np.where(target > 0, target, 1)
        v = np.where(target > 0, target * (np.log(safe) - x), 0)
        loss = np.asarray(_KL_REDUCE[reduction](v, x)).astype(x.dtype)
        return loss if reduction == "none" else loss.reshape(1)


    grad = grad_maker("kldiv_loss_grad", ("X", "Target", "Loss@GRAD"), ("X",))


class KldivLossGrad(OpDef):
    type = "kldiv_loss_grad"
    inputs = (In("X"), In("Target"), In("Loss@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = KldivLoss.attrs
    infer_shape = None
    share_lod = None

    @staticmethod
    def kernel(x, target, dloss, *, reduction):
        g = np.where(target > 0, -target, 0) * _KL_SCALE[reduction](x)
        return (g * dloss).astype(x.dtype)


def _softplus_abs(x):
    """max(x, 0) + log(1 + exp(-|x|)) = log(1 + exp(x)), stably."""
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


class TeacherStudentSigmoidLoss(OpDef):
    type = "teacher_student_sigmoid_loss"
    inputs = (In("X"), In("Label", no_grad=True))
    outputs = (Out("Y"),)
    attrs = {"soft_max_up_bound": 15.0, "soft_max_lower_bound": -15.0}
    doc = ("Y = sigmoid cross entropy against the click z (Label < -1: z=0; < 0: z=1; "
           "< 1: z=0 plus the teacher's score Label; else z=1 plus score Label - 1).")

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Y", _rows(ctx, "X"), ctx.input_dtype("X"))

    @staticmethod
    def kernel(x, label, *, soft_max_up_bound, soft_max_lower_bound):
        sp = _softplus_abs(x)
        y = np.where(label < -1, sp, np.where(
            label < 0, sp - x, np.where(label < 1, 2 * sp - x * label,
                                        2 * sp - x - x * (label - 1))))
        return y.astype(x.dtype)


    grad = grad_maker("teacher_student_sigmoid_loss_grad", ("X", "Label", "Y@GRAD"),
                       ("X",))


class TeacherStudentSigmoidLossGrad(OpDef):
    type = "teacher_student_sigmoid_loss_grad"
    inputs = (In("X"), In("Label"), In("Y@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = TeacherStudentSigmoidLoss.attrs
    infer_shape = None

    @staticmethod
    def kernel(x, label, dy, *, soft_max_up_bound, soft_max_lower_bound):
        p = sigmoid(np.clip(x, soft_max_lower_bound, soft_max_up_bound))
        d = np.where(label < -1, p, np.where(label < 0, p - 1, np.where(
            label < 1, 2 * p - label, 2 * p - label)))
        return (d * dy).astype(x.dtype)


# --- label_smooth, cos_sim, norm -------------------------------------------------------------
class LabelSmooth(OpDef):
    type = "label_smooth"
    inputs = (In("X"), In("PriorDist", dispensable=True, no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"epsilon": 0.0}
    doc = "Out = (1 - epsilon) * X + epsilon * PriorDist (uniform 1/K without one)."

    @staticmethod
    def infer_shape(ctx):
        ctx.share("X", "Out")

    @staticmethod
    def kernel(x, prior, *, epsilon):
        p = prior.reshape(1, -1) if prior is not None else 1.0 / x.shape[-1]
        return ((1 - epsilon) * x + epsilon * p).astype(x.dtype)


    grad = grad_maker("label_smooth_grad", ("Out@GRAD",), ("X",))


class LabelSmoothGrad(OpDef):
    type = "label_smooth_grad"
    inputs = (In("Out@GRAD"),)
    outputs = (Out("X@GRAD"),)
    attrs = LabelSmooth.attrs
    infer_shape = None

    @staticmethod
    def kernel(dout, *, epsilon):
        return ((1 - epsilon) * dout).astype(dout.dtype)


class CosSim(OpDef):
    type = "cos_sim"
    inputs = (In("X"), In("Y"))
    outputs = (Out("Out"), Out("XNorm", intermediate=True), Out("YNorm", intermediate=True))
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


class Norm(OpDef):
    type = "norm"
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


# --- center_loss -------------------------------------------------------------------------------
class CenterLoss(OpDef):
    type = "center_loss"
    kind = "value"
    inputs = (In("X"), In("Label", no_grad=True), In("Centers", no_grad=True),
              In("CenterUpdateRate", no_grad=True))
    outputs = (Out("SampleCenterDiff", intermediate=True), Out("Loss"), Out("CentersOut"))
    attrs = {"cluster_num": 0, "need_update": True}
    share_lod = None
    doc = ("Loss[i] = ||X[i] - Centers[Label[i]]||^2 / 2; CentersOut (the Centers variable "
           "itself, as the layer builds it) = Centers, moved when need_update: Centers[j] += "
           "rate * sum of the diffs of class j / (1 + their count).")

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        ctx.set_output("SampleCenterDiff", xs, ctx.input_dtype("X"))
        ctx.set_output("Loss", [xs[0], 1], ctx.input_dtype("X"))
        ctx.share("Centers", "CentersOut")

    @staticmethod
    def kernel(x, label, centers, rate, *, cluster_num, need_update):
        from ..core.tensor import LoDTensor
        from ..errors import ExecutionError
        a, c = x._array, centers._array
        ids = label._array.reshape(-1).astype(np.int64)
        if ((ids < 0) | (ids >= c.shape[0])).any():
            raise ExecutionError(f"center_loss: labels must be in [0, {c.shape[0]})")
        diff = a - c[ids]
        loss = 0.5 * (diff * diff).sum(axis=1, keepdims=True)
        new = c.copy()
        if need_update:
            alpha = float(np.asarray(rate._array).reshape(-1)[0])
            sums = np.zeros_like(c)
            np.add.at(sums, ids, diff)
            counts = np.bincount(ids, minlength=c.shape[0]).reshape(-1, 1)
            new += (alpha * sums / (1 + counts)).astype(c.dtype)
        return LoDTensor(diff), LoDTensor(loss.astype(a.dtype)), LoDTensor(new)

    grad = grad_maker("center_loss_grad", ("SampleCenterDiff", "Loss@GRAD"), ("X",))


class CenterLossGrad(OpDef):
    type = "center_loss_grad"
    inputs = (In("SampleCenterDiff"), In("Loss@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = CenterLoss.attrs
    infer_shape = None
    share_lod = None

    @staticmethod
    def kernel(diff, dloss):
        return (diff * dloss.reshape(-1, 1)).astype(diff.dtype)
