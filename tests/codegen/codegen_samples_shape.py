"""Samples of compiled shape and layout ops Fluid 1.x training programs use: tile (X padded
to repeat_times' rank), expand_as, unstack, flatten, flip, reverse, cumsum (exclusive,
reverse, flattened), where, compiled vs the numpy kernels by
test_emitters.py, forward and gradient (stack_grad through stack's sample)."""
import numpy as np
from codegen_samples import f32, ints, rng


def where_sample():
    x = f32(3, 4)
    return ({"Condition": rng.random((3, 4)) < 0.5, "X": x, "Y": f32(3, 4)}, {}, ["X", "Y"])

SAMPLES = {
    "tile": lambda: ({"X": f32(2, 3)}, {"repeat_times": [2, 1, 2]}, ["X"]),
    "expand_as": lambda: ({"X": f32(2, 1, 3), "target_tensor": f32(4, 5, 3)}, {}, ["X"]),
    "unstack": lambda: ({"X": f32(2, 3, 4)}, {"axis": 1, "num": 3}, ["X"], {"Y": 3}),
    "flatten": lambda: ({"X": f32(2, 3, 4)}, {"axis": 2}, ["X"]),
    "flip": lambda: ({"X": f32(2, 3, 4)}, {"axis": [0, -1]}, ["X"]),
    "reverse": lambda: ({"X": f32(3, 5)}, {"axis": [1]}, ["X"]),
    "cumsum": lambda: ({"X": f32(3, 4, 2)}, {"axis": 1}, ["X"]),
    "where": where_sample,
}
EXTRA = {
    "tile of the same rank": ("tile", lambda: ({"X": f32(3, 1, 2)}, {"repeat_times": [1, 4, 3]},
                                               ["X"])),
    "unstack along the last axis": ("unstack", lambda: (
        {"X": f32(3, 2)}, {"axis": -1, "num": 2}, ["X"], {"Y": 2})),
    "flatten axis 0": ("flatten", lambda: ({"X": f32(2, 3)}, {"axis": 0}, ["X"])),
    "cumsum exclusive reverse": ("cumsum", lambda: (
        {"X": f32(3, 5)}, {"axis": -1, "exclusive": True, "reverse": True}, ["X"])),
    "cumsum flattened int64": ("cumsum", lambda: (
        {"X": ints(3, 4, hi=1 << 40)}, {"flatten": True}, None)),
    "cumsum exclusive axis 0": ("cumsum", lambda: (
        {"X": f32(4, 3)}, {"axis": 0, "exclusive": True}, ["X"])),
    "where int64": ("where", lambda: (
        {"Condition": np.array([[True, False], [False, True]]), "X": ints(2, 2),
         "Y": ints(2, 2)}, {}, None)),
}
