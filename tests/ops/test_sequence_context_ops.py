"""add_position_encoding, row_conv (fluidity/ops/sequence_context.py): forward against numpy,
gradients against finite differences."""
import numpy as np

from fluidity.core.tensor import LoDTensor
from op_test import check_grad, check_output


def uniform(rng, *shape):
    return rng.uniform(-1, 1, size=shape).astype(np.float32)


def test_add_position_encoding():
    x = uniform(np.random.default_rng(12), 2, 3, 4)
    pe = np.zeros((3, 4))
    for t in range(3):
        for j in range(2):
            pe[t, j] = np.sin(t / 10000 ** (j / 1))
            pe[t, 2 + j] = np.cos(t / 10000 ** (j / 1))
    check_output("add_position_encoding", {"X": x}, {"Out": 0.5 * x + 2 * pe},
                 {"alpha": 0.5, "beta": 2.0})
    check_grad("add_position_encoding", {"X": x}, ["X"], {"alpha": 0.5, "beta": 2.0})


def test_row_conv_over_sequences():
    rng = np.random.default_rng(12)
    x = uniform(rng, 5, 3)
    w = uniform(rng, 2, 3)
    lod = [[0, 3, 5]]
    want = np.zeros_like(x)
    for s, e in ((0, 3), (3, 5)):
        for t in range(s, e):
            for i in range(2):
                if t + i < e:
                    want[t] += x[t + i] * w[i]
    check_output("row_conv", {"X": LoDTensor(x, lod), "Filter": w}, {"Out": want})
    check_grad("row_conv", {"X": LoDTensor(x, lod), "Filter": w}, ["X", "Filter"])
