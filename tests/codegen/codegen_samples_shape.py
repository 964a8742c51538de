"""Samples of compiled shape and layout ops Fluid 1.x training programs use: tile (X padded
to repeat_times' rank), expand_as, compiled vs the numpy kernels by test_emitters.py, forward
and gradient."""
from codegen_samples import f32

SAMPLES = {
    "tile": lambda: ({"X": f32(2, 3)}, {"repeat_times": [2, 1, 2]}, ["X"]),
    "expand_as": lambda: ({"X": f32(2, 1, 3), "target_tensor": f32(4, 5, 3)}, {}, ["X"]),
}
EXTRA = {
    "tile of the same rank": ("tile", lambda: ({"X": f32(3, 1, 2)}, {"repeat_times": [1, 4, 3]},
                                               ["X"])),
}
