"""Samples of emit/cpu/norms.py: frobenius_norm and p_norm (porder 2, 3, 0, +-inf, as a
vector or along an axis, keepdim), compiled vs the numpy kernels by test_emitters.py,
forward and gradient."""
import numpy as np
from codegen_samples import f32


def p_norm(shape=(3, 4, 5), **attrs):
    def sample():
        x = f32(*shape)
        x.reshape(-1)[::7] = 0.0                # zeros: porder 0 counts the others
        return {"X": x}, attrs, ["X"]
    return sample


SAMPLES = {
    "frobenius_norm": lambda: ({"X": f32(3, 4, 2)}, {"dim": [1]}, ["X"]),
    "p_norm": p_norm(porder=2.0, axis=1),
}
EXTRA = {
    "frobenius_norm all, keep_dim": ("frobenius_norm", lambda: (
        {"X": f32(2, 5)}, {"dim": [0, 1], "keep_dim": True, "reduce_all": True}, ["X"])),
    "frobenius_norm of zeros": ("frobenius_norm", lambda: (
        {"X": np.zeros((2, 3), np.float32)}, {"dim": [-1]}, ["X"])),
    "p_norm 3, keepdim, last axis": ("p_norm", p_norm(porder=3.0, axis=-1, keepdim=True)),
    "p_norm 0": ("p_norm", p_norm(porder=0.0, axis=0)),
    "p_norm inf as a vector": ("p_norm", p_norm(porder=float("inf"), asvector=True)),
    "p_norm -inf": ("p_norm", p_norm(porder=float("-inf"), axis=2)),
    "p_norm 1.5 as a vector, keepdim": ("p_norm", p_norm(porder=1.5, asvector=True,
                                                         keepdim=True)),
}
