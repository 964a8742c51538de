"""Samples of emit/cpu/tensor_more.py's ops: fill_zeros_like2, unbind, expand_v2, unfold,
im2sequence, gather_nd (its gradient), scatter_nd_add. Compiled vs the numpy kernels by
test_emitters.py, forward and gradient."""
import numpy as np
from codegen_samples import f32, rng


def nd_index(x_shape, rows, k):
    """int64 Index [*rows, k] into X's first k dims, negative entries among them."""
    cols = [rng.integers(-d, d, rows) for d in x_shape[:k]]
    return np.stack(cols, -1).astype(np.int64) if k else np.zeros(rows + (0,), np.int64)


def scatter_nd_add(x_shape=(4, 3, 2), rows=(5,), k=2):
    def sample():
        idx = nd_index(x_shape, rows, k)
        return ({"X": f32(*x_shape), "Index": idx,
                 "Updates": f32(*(rows + x_shape[k:]))}, {}, ["X", "Updates"])
    return sample


def gather_nd(x_shape=(4, 3, 2), rows=(2, 3), k=1):
    def sample():
        return {"X": f32(*x_shape), "Index": nd_index(x_shape, rows, k)}, {}, ["X"]
    return sample


SAMPLES = {
    "fill_zeros_like2": lambda: ({"X": f32(3, 4)}, {"dtype": 5}, None),
    "unbind": lambda: ({"X": f32(2, 3, 4)}, {"axis": 1}, ["X"], {"Out": 3}),
    "expand_v2": lambda: ({"X": f32(3, 1)}, {"shape": [2, 3, 4]}, ["X"]),
    "unfold": lambda: ({"X": f32(2, 2, 5, 6)}, {"kernel_sizes": [3, 2], "strides": [2, 1],
                                                "paddings": [1, 0, 1, 1],
                                                "dilations": [1, 2]}, ["X"]),
    "scatter_nd_add": scatter_nd_add(),
}
EXTRA = {
    "fill_zeros_like2 int64": ("fill_zeros_like2", lambda: ({"X": f32(2, 3)}, {"dtype": 3},
                                                            None)),
    "unbind axis -1": ("unbind", lambda: ({"X": f32(3, 2)}, {"axis": -1}, ["X"], {"Out": 2})),
    "expand_v2 -1 kept": ("expand_v2", lambda: ({"X": f32(1, 3, 1)}, {"shape": [4, -1, 2]},
                                                ["X"])),
    "expand_v2 same shape": ("expand_v2", lambda: ({"X": f32(2, 3)}, {"shape": [2, 3]}, ["X"])),
    "expand_v2 leading dims only": ("expand_v2", lambda: ({"X": f32(2, 3)},
                                                          {"shape": [3, 2, 3]}, ["X"])),
    "unfold stride 1": ("unfold", lambda: ({"X": f32(1, 3, 4, 4)}, {
        "kernel_sizes": [2, 2], "strides": [1, 1], "paddings": [0, 0, 0, 0],
        "dilations": [1, 1]}, ["X"])),
    "gather_nd (its gradient)": ("gather_nd", gather_nd()),
    "gather_nd of whole rows, duplicates": ("gather_nd", lambda: (
        {"X": f32(3, 4), "Index": np.array([[1], [1], [-1], [0]], np.int64)}, {}, ["X"])),
    "scatter_nd_add int32 index, all dims": ("scatter_nd_add", lambda: (
        {"X": f32(3, 2), "Index": np.array([[0, 1], [2, -1], [0, 1]], np.int32),
         "Updates": f32(3)}, {}, ["X", "Updates"])),
    "scatter_nd_add k = 0": ("scatter_nd_add", scatter_nd_add((2, 3), (2,), 0)),
}


SAMPLES["im2sequence"] = lambda: ({"X": f32(2, 2, 5, 4)}, {
    "kernels": [2, 3], "strides": [2, 1], "paddings": [1, 0, 0, 1]}, ["X"])
EXTRA["im2sequence one image, stride 1"] = ("im2sequence", lambda: (
    {"X": f32(1, 3, 4, 4)}, {"kernels": [2, 2], "strides": [1, 1]}, ["X"]))
