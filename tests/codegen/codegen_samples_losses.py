"""Samples of Fluid 1.x's losses and distances compiled (hinge_loss, modified_huber_loss,
squared_l2_distance, l1_norm, minus): each compiled vs its numpy kernel by test_emitters.py,
forward and gradient (minus's gradient is two scale ops)."""
import numpy as np
from codegen_samples import dims, f32, rng


def labels(n, dtype=np.float32):
    return rng.integers(0, 2, (n, 1)).astype(dtype)


def scored(score, label, lo=-2.5, hi=2.5, dtype=np.float32):
    def sample():
        n = dims()[0] + 2
        return {score: f32(n, 1, lo=lo, hi=hi), label: labels(n, dtype)}, {}, [score]
    return sample


SAMPLES = {
    "hinge_loss": scored("Logits", "Labels"),
    "modified_huber_loss": scored("X", "Y"),
    "squared_l2_distance": lambda: (lambda n: (
        {"X": f32(n, 2, 3), "Y": f32(1, 2, 3)}, {}, ["X", "Y"]))(dims()[0]),
    "l1_norm": lambda: ({"X": f32(*dims())}, {}, ["X"]),
    "minus": lambda: (lambda s: ({"X": f32(*s), "Y": f32(*s)}, {}, ["X", "Y"]))(dims()),
}
EXTRA = {
    "modified_huber_loss int64 labels": ("modified_huber_loss", scored(
        "X", "Y", dtype=np.int64)),
    "squared_l2_distance, Y of X's rows": ("squared_l2_distance", lambda: (
        {"X": f32(4, 5), "Y": f32(4, 5)}, {}, ["X", "Y"])),
}
