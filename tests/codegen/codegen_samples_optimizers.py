"""Samples of the update ops beyond sgd/momentum/adam/adagrad (rmsprop, ftrl and
ops/optimizer_variants.py's): test_emitters.py runs each as an optimizer appends it (Param and
accumulators updated in place) and compares the compiled bits with the kernel's; and of the
ops gradient clipping appends (squared_l2_norm, clip_by_norm)."""
import numpy as np
from codegen_samples import adam_extra, dims, f32, update


def adamax_extra():
    return {"Beta1Pow": np.array([0.9 ** 3], np.float32)}


def centered_rmsprop():
    """MeanGrad small beside MeanSquare, so the centered denominator ms - mg^2 stays
    positive (a negative one is NaN on both paths, which tests nothing)."""
    n, m = dims()
    ins = {"Param": f32(n, m), "Grad": f32(n, m), "LearningRate": np.array([0.1], np.float32),
           "MeanSquare": f32(n, m, lo=0.5, hi=1.0), "Moment": f32(n, m, lo=0.0, hi=1.0),
           "MeanGrad": f32(n, m, lo=-0.1, hi=0.1)}
    return ins, {"centered": True, "momentum": 0.9}, None


def without_learning_rate(sample):
    def no_lr():
        ins, attrs, wrt = sample()
        del ins["LearningRate"]
        return ins, attrs, wrt
    return no_lr


SAMPLES = {
    "rmsprop": update(("MeanSquare", "Moment"), {"momentum": 0.5}),
    "ftrl": update(("SquaredAccumulator", "LinearAccumulator"), {"l1": 0.1, "l2": 0.2}),
    "adamax": update(("Moment", "InfNorm"), extra=adamax_extra),
    "decayed_adagrad": update(("Moment",)),
    "adadelta": update(("AvgSquaredGrad", "AvgSquaredUpdate")),
    "lamb": update(("Moment1", "Moment2"), extra=adam_extra),
    "lars_momentum": update(("Velocity",), {"mu": 0.9}),
    "squared_l2_norm": lambda: ({"X": f32(*dims())}, {}, ["X"]),
    # max_norm below the norm of a [n, m] tensor of values in [-2, 2]: X is scaled
    "clip_by_norm": lambda: ({"X": f32(*dims(), lo=1.0, hi=2.0)}, {"max_norm": 0.5}, None),
}
EXTRA = {
    "rmsprop centered": ("rmsprop", centered_rmsprop),
    "ftrl lr_power -0.7": ("ftrl", update(("SquaredAccumulator", "LinearAccumulator"),
                                          {"l1": 0.05, "lr_power": -0.7})),
    "adadelta without LearningRate (Fluid 1.x's op)": (
        "adadelta", without_learning_rate(update(("AvgSquaredGrad", "AvgSquaredUpdate")))),
    "lars_momentum epsilon, no decay": ("lars_momentum", update(
        ("Velocity",), {"mu": 0.5, "lars_weight_decay": 0.0, "epsilon": 1e-3})),
    "clip_by_norm within max_norm (copied)": ("clip_by_norm", lambda: (
        {"X": f32(*dims(), lo=-0.1, hi=0.1)}, {"max_norm": 10.0}, None)),
}
