"""Proximal update ops of Fluid 1.x (Duchi & Singer's forward-backward splitting): a gradient
step, then the proximal operator of l1 |w| + l2/2 w^2, which soft-thresholds by lr * l1 and
shrinks by 1 / (1 + lr * l2). proximal_gd takes a plain gradient step, proximal_adagrad an
Adagrad one (Moment += g^2; step lr * g / sqrt(Moment)). Param and Moment are updated in
place (optimizer_ops.UpdateOp); a SelectedRows Grad updates only its rows."""
import numpy as np

from .optimizer_ops import UpdateOp
from .registry import In, Out


def _prox(v, lr, l1, l2):
    """argmin_w ||w - v||^2 / (2 lr) + l1 |w| + l2 / 2 w^2, elementwise."""
    if l1 > 0:
        return np.sign(v) * np.maximum(np.abs(v) - lr * l1, 0) / (1 + lr * l2)
    return v / (1 + lr * l2)


class ProximalGd(UpdateOp):
    type = "proximal_gd"
    inputs = (In("Param"), In("Grad"), In("LearningRate"))
    outputs = (Out("ParamOut"),)
    attrs = {"l1": 0.0, "l2": 0.0}
    out_of = {"ParamOut": "Param"}
    doc = ("prox = Param - lr * Grad; ParamOut = sign(prox) * max(|prox| - lr * l1, 0) / "
           "(1 + lr * l2) (prox / (1 + lr * l2) when l1 is 0).")

    @staticmethod
    def rule(attrs):
        l1, l2 = attrs["l1"], attrs["l2"]
        return lambda lr, g, p: (_prox(p - lr * g, lr, l1, l2),)


class ProximalAdagrad(UpdateOp):
    type = "proximal_adagrad"
    inputs = (In("Param"), In("Moment"), In("Grad"), In("LearningRate"))
    outputs = (Out("ParamOut"), Out("MomentOut"))
    attrs = {"l1": 0.0, "l2": 0.0}
    states = ("Moment",)
    out_of = {"ParamOut": "Param", "MomentOut": "Moment"}
    doc = ("MomentOut = Moment + Grad^2; prox = Param - lr * Grad / sqrt(MomentOut); "
           "ParamOut as proximal_gd's from prox.")

    @staticmethod
    def rule(attrs):
        l1, l2 = attrs["l1"], attrs["l2"]

        def f(lr, g, p, m):
            m = m + g * g
            return _prox(p - lr * g / np.sqrt(m), lr, l1, l2), m
        return f
