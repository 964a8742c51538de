"""Samples of the compiled detection ops: spp (emit/cpu/pyramid.py; levels with windows
wholly in the padding too), sigmoid_focal_loss (emit/cpu/focal.py; gamma 2 takes numpy's
square, others float32 pow). Compiled vs the numpy kernels by test_emitters.py, forward and
gradient."""
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


def spp(shape, **attrs):
    def sample():
        return {"X": f32(*shape)}, attrs, ["X"]
    return sample


SAMPLES["spp"] = spp((2, 3, 5, 7), pyramid_height=3, pooling_type="max")
EXTRA.update({
    "spp avg": ("spp", spp((2, 2, 6, 5), pyramid_height=3, pooling_type="avg")),
    "spp map smaller than its bins": ("spp", spp((1, 2, 3, 2), pyramid_height=3,
                                                 pooling_type="avg")),
    "spp max, one level": ("spp", spp((3, 2, 4, 4), pyramid_height=1, pooling_type="max")),
})
