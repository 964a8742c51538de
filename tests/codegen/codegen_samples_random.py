"""Samples of the random ops' compiled forms (runtime/philox.h): uniform_random,
gaussian_random and their batch_size_like forms, random_crop, training dropout and nce
(three samplers, fixed negatives), forward and gradient. op_test gives each random op the
same [key, run] state for the interpreted and the compiled run, so the draws compare bit for
bit (tests/codegen/test_random_compiled.py runs them over several runs and seeds)."""
import numpy as np
from codegen_samples import dims, f32, rng

from fluidity.ops.sampled import alias_tables


def random_tensor(op_type, seed=0, **attrs):
    def sample():
        return {}, {"shape": list(dims()), "seed": seed, **attrs}, None
    return sample


def batch_size_like(**attrs):
    def sample():
        n, w = dims()
        return {"Input": f32(n, 3)}, {"shape": [-1, w], "input_dim_idx": 0,
                                      "output_dim_idx": 0, **attrs}, None
    return sample


def nce(sampler=0, custom_neg=(), bias=True, weighted=False):
    """Input [n, 5], one or two true labels a row among 12 classes, 4 negatives."""
    def sample():
        n, classes, k = int(rng.integers(1, 6)), 12, 4
        nt = int(rng.integers(1, 3))
        inputs = {"Input": f32(n, 5), "Label": rng.integers(0, classes, (n, nt)),
                  "Weight": f32(classes, 5, lo=-0.5, hi=0.5)}
        if bias:
            inputs["Bias"] = f32(classes, 1, lo=-0.5, hi=0.5)
        if weighted:
            inputs["SampleWeight"] = f32(n, 1, lo=0.5, hi=1.5)
        if sampler == 2:
            probs = rng.uniform(0.5, 2.0, classes)
            alias, alias_probs = alias_tables(probs)
            inputs.update({"CustomDistProbs": (probs / probs.sum()).astype(np.float32),
                           "CustomDistAlias": alias,
                           "CustomDistAliasProbs": alias_probs.astype(np.float32)})
        attrs = {"num_total_classes": classes, "num_neg_samples": k, "sampler": sampler,
                 "custom_neg_classes": list(custom_neg)}
        wrt = ["Input", "Weight"] + (["Bias"] if bias else [])
        return inputs, attrs, wrt, ["Cost", "SampleLogits", "SampleLabels"]
    return sample


SAMPLES = {
    "uniform_random": random_tensor("uniform_random", min=-2.0, max=5.0),
    "gaussian_random": random_tensor("gaussian_random", mean=1.0, std=2.0),
    "uniform_random_batch_size_like": batch_size_like(min=0.0, max=3.0),
    "gaussian_random_batch_size_like": batch_size_like(mean=-1.0, std=0.5),
    "random_crop": lambda: ({"X": f32(2, 3, 6, 5)}, {"shape": [4, 3], "startup_seed": 0},
                            None, ["Out", "SeedOut"]),
    "nce": nce(),
}

EXTRA = {
    "uniform_random seeded": ("uniform_random",
                              random_tensor("uniform_random", seed=11, min=0.0, max=1.0)),
    "gaussian_random seeded": ("gaussian_random", random_tensor("gaussian_random", seed=3)),
    "dropout training, downgrade_in_infer": ("dropout", lambda: (
        {"X": f32(*dims())}, {"dropout_prob": 0.35}, ["X"], ["Out", "Mask"])),
    "dropout training, upscale_in_train, fix_seed": ("dropout", lambda: (
        {"X": f32(*dims())}, {"dropout_prob": 0.5, "fix_seed": True, "seed": 9,
                              "dropout_implementation": "upscale_in_train"},
        ["X"], ["Out", "Mask"])),
    "random_crop seeded, 1 cropped dim": ("random_crop", lambda: (
        {"X": f32(3, 7)}, {"shape": [5], "startup_seed": 21}, None, ["Out", "SeedOut"])),
    "nce log_uniform, weighted": ("nce", nce(sampler=1, weighted=True)),
    "nce custom_dist, no bias": ("nce", nce(sampler=2, bias=False)),
    "nce custom_neg_classes": ("nce", nce(custom_neg=(1, 5, 7, 11))),
}
