"""Samples of compiled shape and layout ops Fluid 1.x training programs use: tile (X padded
to repeat_times' rank), expand_as, unstack, compiled vs the numpy kernels by
test_emitters.py, forward and gradient (stack_grad through stack's sample)."""
from codegen_samples import f32

SAMPLES = {
    "tile": lambda: ({"X": f32(2, 3)}, {"repeat_times": [2, 1, 2]}, ["X"]),
    "expand_as": lambda: ({"X": f32(2, 1, 3), "target_tensor": f32(4, 5, 3)}, {}, ["X"]),
    "unstack": lambda: ({"X": f32(2, 3, 4)}, {"axis": 1, "num": 3}, ["X"], {"Y": 3}),
}
EXTRA = {
    "tile of the same rank": ("tile", lambda: ({"X": f32(3, 1, 2)}, {"repeat_times": [1, 4, 3]},
                                               ["X"])),
    "unstack along the last axis": ("unstack", lambda: (
        {"X": f32(3, 2)}, {"axis": -1, "num": 2}, ["X"], {"Y": 2})),
}
