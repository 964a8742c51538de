"""Samples of the compiled forms the seq2seq cell API needs (issue 29), compiled vs the numpy
kernel by test_emitters.py: expand (and its gradient), assign_value in each dtype it holds
and gather_tree; their run-time forms (expand_times from a shape, several unknown dims) are checked
in whole programs by test_cell_ops_compiled.py."""
import numpy as np

from codegen_samples import f32, rng

SAMPLES = {
    "expand": lambda: ({"X": f32(2, 1, 3)}, {"expand_times": [2, 4, 1]}, ["X"]),
    "assign_value": lambda: ({}, {"shape": [2, 3], "dtype": 5,
                                  "fp32_values": f32(6).tolist()}, None),
    "gather_tree": lambda: ({"Ids": rng.integers(0, 9, (5, 3, 4)).astype(np.int64),
                             "Parents": rng.integers(0, 4, (5, 3, 4)).astype(np.int64)},
                            {}, None),
}
EXTRA = {
    "expand of one dim, three times": ("expand", lambda: (
        {"X": f32(5)}, {"expand_times": [3]}, ["X"])),
    "expand int64, the rows too": ("expand", lambda: (
        {"X": rng.integers(-9, 9, (2, 3)).astype(np.int64)}, {"expand_times": [3, 2]}, None)),
    "expand of no rows": ("expand", lambda: (
        {"X": np.zeros((0, 2), np.float32)}, {"expand_times": [3, 2]}, None)),
    "assign_value int32": ("assign_value", lambda: (
        {}, {"shape": [4], "dtype": 2, "int32_values": [1, -2, 2 ** 31 - 1, -2 ** 31]}, None)),
    "assign_value int64 limits": ("assign_value", lambda: (
        {}, {"shape": [2, 1], "dtype": 3, "int64_values": [2 ** 63 - 1, -2 ** 63]}, None)),
    "assign_value bool": ("assign_value", lambda: (
        {}, {"shape": [3], "dtype": 0, "bool_values": [True, False, True]}, None)),
    "assign_value float64": ("assign_value", lambda: (
        {}, {"shape": [2], "dtype": 6, "fp64_values": [0.1, -1e300]}, None)),
    "assign_value float32 non-finite": ("assign_value", lambda: (
        {}, {"shape": [3], "dtype": 5, "fp32_values": [float("inf"), float("nan"),
                                                       -3.4e38]}, None)),
    "assign_value by Paddle 3 (values)": ("assign_value", lambda: (
        {}, {"shape": [1, 4], "dtype": 5, "values": [0.0, -1e9, 2.5, 7]}, None)),
    "gather_tree int32, one step": ("gather_tree", lambda: (
        {"Ids": rng.integers(0, 9, (1, 2, 3)).astype(np.int32),
         "Parents": rng.integers(0, 3, (1, 2, 3)).astype(np.int32)}, {}, None)),
    "gather_tree of beam 1": ("gather_tree", lambda: (
        {"Ids": rng.integers(0, 9, (4, 2, 1)).astype(np.int64),
         "Parents": np.zeros((4, 2, 1), np.int64)}, {}, None)),
}
