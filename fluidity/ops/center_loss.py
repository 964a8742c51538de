"""center_loss (Wen et al. 2016): half each row's squared distance to the centre of its
class, the centres kept in a table (Centers) that the op moves towards the rows of each class
when need_update (CentersOut, the Centers variable itself as the layer builds it), and its
gradient; formulas as Paddle 1.8's kernel computes them.
"""
import numpy as np

from .common import grad_maker
from .registry import In, OpDef, Out


class CenterLoss(OpDef):
    type = "center_loss"
    kind = "value"
    inputs = (In("X"), In("Label", no_grad=True), In("Centers", no_grad=True),
              In("CenterUpdateRate", no_grad=True))
    outputs = (Out("SampleCenterDiff", intermediate=True), Out("Loss"), Out("CentersOut"))
    attrs = {"cluster_num": 0, "need_update": True}
    share_lod = "X"
    lod_outputs = ("Loss",)
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
        # Loss (one row per X row) keeps X's LoD, as Fluid's CenterLossOp shares it
        return LoDTensor(diff), LoDTensor(loss.astype(a.dtype), x._lod), LoDTensor(new)

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
