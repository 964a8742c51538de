"""Samples of the compiled forms the seq2seq cell API needs (issue 29), compiled vs the numpy
kernel by test_emitters.py: expand (and its gradient), assign_value in each dtype it holds,
integer elementwise_floordiv and elementwise_mod, stack, gather_nd and gather_tree; their run-time forms
(expand_times from a shape, several unknown dims) are checked in whole programs by
test_cell_ops_compiled.py."""
import numpy as np

from codegen_samples import f32, rng

def divisions(dtype):
    """Every sign pair, exact and inexact quotients, zero divisors (numpy: 0) and the
    type's minimum over -1 (numpy wraps)."""
    x = np.array([7, -7, 7, -7, 6, -6, 5, 0, np.iinfo(dtype).min, 3], dtype)
    y = np.array([2, 2, -2, -2, 3, 3, 0, 4, -1, -3], dtype)
    return {"X": x, "Y": y}, {}, None


SAMPLES = {
    "expand": lambda: ({"X": f32(2, 1, 3)}, {"expand_times": [2, 4, 1]}, ["X"]),
    "assign_value": lambda: ({}, {"shape": [2, 3], "dtype": 5,
                                  "fp32_values": f32(6).tolist()}, None),
    "elementwise_floordiv": lambda: divisions(np.int64),
    "elementwise_mod": lambda: divisions(np.int64),
    "stack": lambda: ({"X": [("s0", f32(2, 3)), ("s1", f32(2, 3)), ("s2", f32(2, 3))]},
                      {"axis": 1}, [("X", 0), ("X", 2)]),
    "gather_nd": lambda: ({"X": f32(3, 4, 2), "Index": np.array(
        [[[0, 1], [2, -1]], [[-3, 0], [1, 3]]], np.int64)}, {}, None),
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
    "elementwise_floordiv int32": ("elementwise_floordiv", lambda: divisions(np.int32)),
    "elementwise_mod int32": ("elementwise_mod", lambda: divisions(np.int32)),
    "elementwise_floordiv by a broadcast beam width": ("elementwise_floordiv", lambda: (
        {"X": rng.integers(0, 40, (3, 4)).astype(np.int64), "Y": np.array([10], np.int64)},
        {}, None)),
    "stack int64 on a last new axis": ("stack", lambda: (
        {"X": [("s0", rng.integers(-9, 9, (3,)).astype(np.int64)),
               ("s1", rng.integers(-9, 9, (3,)).astype(np.int64))]}, {"axis": -1}, None)),
    "stack of one, first axis": ("stack", lambda: ({"X": [("s0", f32(2, 2))]}, {"axis": 0},
                                                   None)),
    "gather_nd of whole rows by int32": ("gather_nd", lambda: (
        {"X": f32(4, 3), "Index": np.array([[3], [0], [3]], np.int32)}, {}, None)),
    "gather_nd of every dim": ("gather_nd", lambda: (
        {"X": rng.integers(0, 9, (2, 3)).astype(np.int64),
         "Index": np.array([[1, 2], [0, 0]], np.int64)}, {}, None)),
    "gather_nd with an empty last dim": ("gather_nd", lambda: (
        {"X": f32(2, 2), "Index": np.zeros((3, 0), np.int64)}, {}, None)),
    "gather_tree int32, one step": ("gather_tree", lambda: (
        {"Ids": rng.integers(0, 9, (1, 2, 3)).astype(np.int32),
         "Parents": rng.integers(0, 3, (1, 2, 3)).astype(np.int32)}, {}, None)),
    "gather_tree of beam 1": ("gather_tree", lambda: (
        {"Ids": rng.integers(0, 9, (4, 2, 1)).astype(np.int64),
         "Parents": np.zeros((4, 2, 1), np.int64)}, {}, None)),
}
ELSEWHERE = {"tensor_array_to_tensor"}   # reads a compiled array: test_cell_ops_compiled.py
