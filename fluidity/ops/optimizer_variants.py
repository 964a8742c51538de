"""Update ops of Fluid 1.x's other optimizers, each a variant of a rule in optimizer_ops.py:
adamax (Adam's, with the infinity norm), lamb (Adam's, scaled per layer by a trust ratio),
decayed_adagrad and adadelta (Adagrad's, with decaying averages), lars_momentum (Momentum's,
with a layer-wise learning rate) and dpsgd (SGD's, with clipped, noised gradients). All are
optimizer_ops.UpdateOp: Param and accumulators updated in place; a SelectedRows Grad updates
only its rows.

The beta-power accumulators of adamax and lamb are inputs only: as in Fluid 1.x, the
optimizer advances them with `scale` ops after the updates.
"""
import numpy as np

from .optimizer_ops import UpdateOp, one_value
from .registry import In, Out


def _norm(a):
    return float(np.sqrt(np.sum(np.square(a, dtype=np.float64))))


class Adamax(UpdateOp):
    type = "adamax"
    inputs = (In("Param"), In("Grad"), In("LearningRate"), In("Moment"), In("InfNorm"),
              In("Beta1Pow"))
    outputs = (Out("ParamOut"), Out("MomentOut"), Out("InfNormOut"))
    attrs = {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8}
    states = ("Moment", "InfNorm")
    out_of = {"ParamOut": "Param", "MomentOut": "Moment", "InfNormOut": "InfNorm"}
    doc = ("Moment = beta1 m + (1 - beta1) g; InfNorm = max(beta2 u + epsilon, |g|); "
           "Param -= lr / (1 - Beta1Pow) * Moment / InfNorm.")

    @staticmethod
    def extra(ins, attrs):
        return {"b1p": one_value(ins["Beta1Pow"], "adamax", "Beta1Pow")}

    @staticmethod
    def rule(attrs):
        b1, b2, eps = attrs["beta1"], attrs["beta2"], attrs["epsilon"]

        def f(lr, g, p, m, u, *, b1p):
            m = b1 * m + (1 - b1) * g
            u = np.maximum(b2 * u + eps, np.abs(g))
            # IEEE arithmetic as Fluid's kernel: Beta1Pow = 1 (no step taken yet) gives an
            # infinite step, not a Python ZeroDivisionError
            with np.errstate(divide="ignore", invalid="ignore"):
                lr_t = np.float64(lr) / (1 - np.float64(b1p))
                return p - lr_t * m / u, m, u
        return f


class DecayedAdagrad(UpdateOp):
    type = "decayed_adagrad"
    inputs = (In("Param"), In("Grad"), In("Moment"), In("LearningRate"))
    outputs = (Out("ParamOut"), Out("MomentOut"))
    attrs = {"decay": 0.95, "epsilon": 1e-6}
    states = ("Moment",)
    out_of = {"ParamOut": "Param", "MomentOut": "Moment"}
    doc = "Moment = decay m + (1 - decay) g^2; Param -= lr g / (sqrt(Moment) + epsilon)."

    @staticmethod
    def rule(attrs):
        d, eps = attrs["decay"], attrs["epsilon"]

        def f(lr, g, p, m):
            m = d * m + (1 - d) * g * g
            return p - lr * g / (np.sqrt(m) + eps), m
        return f


class Adadelta(UpdateOp):
    type = "adadelta"
    inputs = (In("Param"), In("Grad"), In("AvgSquaredGrad"), In("AvgSquaredUpdate"),
              In("LearningRate", dispensable=True))
    outputs = (Out("ParamOut"), Out("AvgSquaredGradOut"), Out("AvgSquaredUpdateOut"))
    attrs = {"rho": 0.95, "epsilon": 1e-6}
    states = ("AvgSquaredGrad", "AvgSquaredUpdate")
    out_of = {"ParamOut": "Param", "AvgSquaredGradOut": "AvgSquaredGrad",
              "AvgSquaredUpdateOut": "AvgSquaredUpdate"}
    doc = ("E[g^2] = rho E[g^2] + (1 - rho) g^2; d = -sqrt((E[d^2] + eps) / (E[g^2] + eps)) g; "
           "E[d^2] = rho E[d^2] + (1 - rho) d^2; Param += lr d (lr 1 without LearningRate, "
           "as Fluid 1.x's op has none).")

    @staticmethod
    def rule(attrs):
        rho, eps = attrs["rho"], attrs["epsilon"]

        def f(lr, g, p, asg, asu):
            asg = rho * asg + (1 - rho) * g * g
            d = -np.sqrt((asu + eps) / (asg + eps)) * g
            asu = rho * asu + (1 - rho) * d * d
            return p + lr * d, asg, asu
        return f


class Lamb(UpdateOp):
    type = "lamb"
    inputs = (In("Param"), In("Grad"), In("LearningRate"), In("Moment1"), In("Moment2"),
              In("Beta1Pow"), In("Beta2Pow"))
    outputs = (Out("ParamOut"), Out("Moment1Out"), Out("Moment2Out"))
    attrs = {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-6, "weight_decay": 0.01}
    states = ("Moment1", "Moment2")
    out_of = {"ParamOut": "Param", "Moment1Out": "Moment1", "Moment2Out": "Moment2"}
    doc = ("LAMB as Paddle 1.8 computes it: m1 = beta1 m1 + (1-beta1) g, m2 = beta2 m2 + "
           "(1-beta2) g^2, r = m1 / (sqrt(m2) + epsilon) + weight_decay * Param (the moments "
           "not bias-corrected: Beta1Pow and Beta2Pow are read by Paddle 2's version only); "
           "Param -= lr * (||Param|| / ||r||) * r (ratio 1 where a norm is 0). A sparse Grad "
           "updates every row, absent rows with g = 0.")
    # version 0: Paddle 1.8's rule. Paddle 2.x's checkpoint 1 adds Beta1PowOut/Beta2PowOut and
    # bias-corrects the moments; a program saved at that version is refused by compat_check.

    @staticmethod
    def lazy(attrs):
        return False

    @staticmethod
    def rule(attrs):
        b1, b2, eps, wd = attrs["beta1"], attrs["beta2"], attrs["epsilon"], attrs["weight_decay"]

        def f(lr, g, p, m1, m2):
            m1 = b1 * m1 + (1 - b1) * g
            m2 = b2 * m2 + (1 - b2) * g * g
            r = m1 / (np.sqrt(m2) + eps) + wd * p
            pn, rn = _norm(p), _norm(r)
            ratio = pn / rn if pn > 0 and rn > 0 else 1.0
            return p - lr * ratio * r, m1, m2
        return f


class LarsMomentum(UpdateOp):
    type = "lars_momentum"
    inputs = (In("Param"), In("Grad"), In("Velocity"), In("LearningRate"))
    outputs = (Out("ParamOut"), Out("VelocityOut"))
    attrs = {"mu": 0.0, "lars_coeff": 0.001, "lars_weight_decay": 0.0005, "epsilon": 0.0}
    states = ("Velocity",)
    out_of = {"ParamOut": "Param", "VelocityOut": "Velocity"}
    doc = ("local_lr = lr * lars_coeff * ||p|| / (||g|| + lars_weight_decay ||p|| + epsilon) "
           "(lr where a norm is 0); v = mu v + local_lr (g + lars_weight_decay p); p -= v.")

    @staticmethod
    def lazy(attrs):
        return False

    @staticmethod
    def rule(attrs):
        mu, coeff = attrs["mu"], attrs["lars_coeff"]
        wd, eps = attrs["lars_weight_decay"], attrs["epsilon"]

        def f(lr, g, p, v):
            pn, gn = _norm(p), _norm(g)
            local = lr * coeff * pn / (gn + wd * pn + eps) if pn > 0 and gn > 0 else lr
            v = mu * v + local * (g + wd * p)
            return p - v, v
        return f


class Dpsgd(UpdateOp):
    type = "dpsgd"
    inputs = (In("Param"), In("Grad"), In("LearningRate"))
    outputs = (Out("ParamOut"),)
    attrs = {"clip": 10.0, "batch_size": 16.0, "sigma": 1.0, "seed": 0}
    out_of = {"ParamOut": "Param"}
    doc = ("Differentially private SGD: g is scaled down to L2 norm `clip`, and one draw "
           "of N(0, sigma^2) / batch_size is added: Param -= lr * (g / scale + noise / "
           "batch_size). A nonzero seed repeats the noise.")

    @staticmethod
    def lazy(attrs):
        return False

    @staticmethod
    def rule(attrs):
        clip, bs, sigma, seed = attrs["clip"], attrs["batch_size"], attrs["sigma"], attrs["seed"]
        rng = np.random.default_rng(seed if seed else None)

        def f(lr, g, p):
            scale = max(1.0, _norm(g) / clip) if clip > 0 else 1.0
            noise = rng.normal(0.0, sigma) if sigma > 0 else 0.0
            return (p - lr * (g / scale + noise / bs)).astype(p.dtype, copy=False),
        return f
