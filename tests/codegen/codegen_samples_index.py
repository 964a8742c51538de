"""Samples of the compiled index ops Fluid 1.x training programs use: gather, index_select,
index_sample, scatter (forward and gradient, repeated and negative indices, int32 and int64
Index, scatter's overwrite True and False),
compiled vs the numpy kernels by test_emitters.py; hostile indices are
test_index_ops_compiled.py's."""
import numpy as np
from codegen_samples import f32, rng


def ids(*values, dtype=np.int64):
    return np.array(values, dtype)


SAMPLES = {
    "gather": lambda: ({"X": f32(5, 3), "Index": ids(4, 0, -1, 4)}, {}, ["X"]),
    "index_select": lambda: ({"X": f32(3, 5, 2), "Index": ids(0, 4, -2, 0)}, {"dim": 1},
                             ["X"]),
    "index_sample": lambda: ({"X": f32(3, 5), "Index": rng.integers(0, 5, (3, 4))}, {},
                             ["X"]),
    "scatter": lambda: ({"X": f32(5, 3), "Ids": ids(3, 0, -2, 3), "Updates": f32(4, 3)},
                        {"overwrite": True}, ["X", "Updates"]),
}
EXTRA = {
    "gather axis 1, Index [N, 1] int32": ("gather", lambda: (
        {"X": f32(2, 4, 3), "Index": ids([3], [1], [3], dtype=np.int32)}, {"axis": 1}, ["X"])),
    "gather of a 0-D Index drops the axis": ("gather", lambda: (
        {"X": f32(4, 3), "Index": np.array(2, np.int64)}, {}, ["X"])),
    "index_select last dim": ("index_select", lambda: (
        {"X": f32(4, 3), "Index": ids(2, 2, 0, dtype=np.int32)}, {"dim": -1}, ["X"])),
    "index_sample int32": ("index_sample", lambda: (
        {"X": f32(2, 6), "Index": rng.integers(0, 6, (2, 7)).astype(np.int32)}, {}, ["X"])),
    "scatter adding (overwrite False), int32 Ids": ("scatter", lambda: (
        {"X": f32(4, 2, 3), "Ids": ids(1, 1, 3, dtype=np.int32), "Updates": f32(3, 2, 3)},
        {"overwrite": False}, ["X", "Updates"])),
}
