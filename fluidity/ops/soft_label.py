"""Soft targets and the losses against them: label_smooth (hard labels made soft),
kldiv_loss (the KL divergence from a target distribution) and teacher_student_sigmoid_loss
(a click label plus a teacher model's score, for distillation in CTR models) — each with
its gradient op, formulas as Paddle 1.8's kernels compute them.
"""
import numpy as np

from .common import grad_maker, sigmoid
from .registry import In, OpDef, Out


def _rows(ctx, slot):
    return ctx.input_shape(slot)[:-1] + [1]


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
    lod_outputs = ("Y",)
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
