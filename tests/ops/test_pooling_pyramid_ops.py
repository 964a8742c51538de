"""spp and unpool (fluidity/ops/pooling_pyramid.py): forward against loops over windows,
gradients against finite differences."""
import numpy as np
import pytest

from op_test import check_grad, check_output, run_op
from fluidity.errors import ExecutionError

rng = np.random.default_rng(4)


def spp_ref(x, height, kind):
    n, c, h, w = x.shape
    levels = []
    for l in range(height):
        bins = 2 ** l
        kh, kw = -(-h // bins), -(-w // bins)
        ph, pw = (kh * bins - h + 1) // 2, (kw * bins - w + 1) // 2
        out = np.zeros((n, c, bins, bins))
        for i in range(bins):
            for j in range(bins):
                r0, c0 = max(i * kh - ph, 0), max(j * kw - pw, 0)
                r1, c1 = min(i * kh - ph + kh, h), min(j * kw - pw + kw, w)
                win = x[:, :, r0:r1, c0:c1]
                out[:, :, i, j] = win.max((2, 3)) if kind == "max" else win.mean((2, 3))
        levels.append(out.reshape(n, -1))
    return np.concatenate(levels, 1)


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("hw", [(6, 7), (4, 4)])
def test_spp(kind, hw):
    x = rng.permutation(2 * 2 * hw[0] * hw[1]).reshape((2, 2) + hw).astype(np.float64) / 10
    attrs = {"pyramid_height": 3, "pooling_type": kind}
    check_output("spp", {"X": x}, {"Out": spp_ref(x, 3, kind)}, attrs)
    check_grad("spp", {"X": x}, ["X"], attrs)


def unpool_case():
    x = rng.uniform(-1, 1, (2, 2, 2, 2))
    # positions in a 4x4 output, one per 2x2 window (as max pooling gives them)
    idx = np.array([[0, 3], [9, 15]], np.int32)
    return x, np.broadcast_to(idx, x.shape).copy()


def test_unpool():
    x, idx = unpool_case()
    attrs = {"ksize": [2, 2], "strides": [2, 2], "paddings": [0, 0]}
    want = np.zeros((2, 2, 16))
    for n in range(2):
        for c in range(2):
            for k, v in zip(idx[n, c].reshape(-1), x[n, c].reshape(-1)):
                want[n, c, k] = v
    check_output("unpool", {"X": x, "Indices": idx}, {"Out": want.reshape(2, 2, 4, 4)}, attrs)
    check_grad("unpool", {"X": x, "Indices": idx}, ["X"], attrs)


def test_unpool_index_out_of_range():
    x, idx = unpool_case()
    idx[0, 0, 0, 0] = 16
    with pytest.raises(ExecutionError, match="index 16 is outside the 4x4 output"):
        run_op("unpool", {"X": x, "Indices": idx}, {"ksize": [2, 2], "strides": [2, 2]})
