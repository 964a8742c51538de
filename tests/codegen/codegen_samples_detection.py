"""Samples of the compiled detection ops: sigmoid_focal_loss (emit/cpu/focal.py; gamma 2
takes numpy's square, others float32 pow). Compiled vs the numpy kernels by
test_emitters.py, forward and gradient."""
import numpy as np
from codegen_samples import f32, rng


def focal(n=5, c=4, **attrs):
    def sample():
        label = rng.integers(-1, c + 1, (n, 1)).astype(np.int32)
        return ({"X": f32(n, c, lo=-4.0, hi=4.0), "Label": label,
                 "FgNum": np.array([3], np.int32)}, attrs, ["X"])
    return sample


SAMPLES = {
    "sigmoid_focal_loss": focal(),
}
EXTRA = {
    "sigmoid_focal_loss gamma 1.5, alpha 0.4": ("sigmoid_focal_loss", focal(gamma=1.5,
                                                                             alpha=0.4)),
    "sigmoid_focal_loss FgNum 0": ("sigmoid_focal_loss", lambda: (
        {"X": f32(3, 2), "Label": np.array([[1], [0], [2]], np.int64),
         "FgNum": np.array([0], np.int32)}, {}, ["X"])),
}
