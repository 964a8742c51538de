"""More update ops of Fluid 1.x optimizers — adamax, decayed_adagrad, adadelta, lamb,
lars_momentum, dpsgd — on optimizer_ops.UpdateOp (Param and accumulators updated in place;
a SelectedRows Grad updates only its rows), and average_accumulates (ModelAverage's sums).

The beta-power accumulators of adamax and lamb are inputs only: as in Fluid 1.x, the
optimizer advances them with `scale` ops after the updates.
"""
import numpy as np

from ..core.tensor import LoDTensor
from ..errors import ExecutionError
from .optimizer_ops import UpdateOp, one_value, writable_array
from .registry import In, OpDef, Out, long


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
            return p - (lr / (1 - b1p)) * m / u, m, u
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


class AverageAccumulates(OpDef):
    """ModelAverage's running sums (Paddle's average_accumulates): sum_1 gathers params each
    step; every 16384 updates it moves into sum_2 (for precision); when the window
    (num_accumulates) reaches min(max_average_window, num_updates * average_window) and at
    least min_average_window, sum_3 = sum_1 + sum_2 and sums 1, 2 restart."""
    type = "average_accumulates"
    kind = "value"
    share_lod = None
    inputs = (In("param"), In("in_sum_1"), In("in_sum_2"), In("in_sum_3"),
              In("in_num_accumulates"), In("in_old_num_accumulates"), In("in_num_updates"))
    outputs = (Out("out_sum_1"), Out("out_sum_2"), Out("out_sum_3"),
               Out("out_num_accumulates"), Out("out_old_num_accumulates"),
               Out("out_num_updates"))
    attrs = {"average_window": 0.0, "max_average_window": long(2 ** 63 - 1),
             "min_average_window": long(10000)}
    K_MAX_NUM_ACCUMULATES = 16384

    @staticmethod
    def infer_shape(ctx):
        for i, o in zip(AverageAccumulates.inputs[1:], AverageAccumulates.outputs):
            ctx.share(i.name, o.name)

    @classmethod
    def prepare(cls, attrs, outputs):
        window, max_w, min_w = (attrs["average_window"], attrs["max_average_window"],
                                attrs["min_average_window"])

        def kernel(param, s1, s2, s3, n_acc, old_n, n_upd):
            op = cls.type
            p = param._array if isinstance(param, LoDTensor) else None
            if p is None:
                raise ExecutionError(f"{op}: param holds no data")
            a1, a2, a3 = (writable_array(t, op, n) for t, n in
                          ((s1, "in_sum_1"), (s2, "in_sum_2"), (s3, "in_sum_3")))
            cnt = [writable_array(t, op, n) for t, n in
                   ((n_acc, "in_num_accumulates"), (old_n, "in_old_num_accumulates"),
                    (n_upd, "in_num_updates"))]
            num_acc, old, num_upd = (int(c.reshape(-1)[0]) + (1 if i != 1 else 0)
                                     for i, c in enumerate(cnt))
            a1 += p
            if num_upd % cls.K_MAX_NUM_ACCUMULATES == 0:
                a2 += a1
                a1[...] = 0
            if num_acc >= min_w and num_acc >= min(max_w, num_upd * window):
                a3[...] = a1 + a2
                a1[...] = 0
                a2[...] = 0
                old, num_acc = num_acc, 0
            for c, v in zip(cnt, (num_acc, old, num_upd)):
                c.reshape(-1)[0] = v
            return s1, s2, s3, n_acc, old_n, n_upd
        return kernel
