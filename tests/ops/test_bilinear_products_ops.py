"""bilinear_tensor_product, fsp, conv_shift (fluidity/ops/bilinear_products.py): forward
against numpy, gradients against finite differences, bad input refused by name."""
import numpy as np
import pytest

from fluidity.errors import ExecutionError, ShapeError
from op_test import check_grad, check_output, run_op

rng = np.random.default_rng(12)


def r(*shape):
    return rng.uniform(-1, 1, size=shape).astype(np.float32)


def test_bilinear_tensor_product_and_fsp():
    x, y, w, b = r(3, 2), r(3, 4), r(5, 2, 4), r(1, 5)
    want = np.einsum("bm,kmn,bn->bk", x, w, y) + b
    ins = {"X": x, "Y": y, "Weight": w, "Bias": b}
    check_output("bilinear_tensor_product", ins, {"Out": want})
    check_grad("bilinear_tensor_product", ins, ["X", "Y", "Weight", "Bias"])
    u, v = r(2, 3, 2, 2), r(2, 4, 2, 2)
    check_output("fsp", {"X": u, "Y": v},
                 {"Out": np.einsum("bchw,bdhw->bcd", u, v) / 4})
    check_grad("fsp", {"X": u, "Y": v}, ["X", "Y"])


def _conv_shift_ref(x, y):
    m, n = x.shape[1], y.shape[1]
    out = np.zeros_like(x)
    for i in range(m):
        for j in range(n):
            out[:, i] += x[:, (i + j - (n - 1) // 2) % m] * y[:, j]
    return out


def test_conv_shift():
    rng = np.random.default_rng(7)
    x, y = rng.uniform(-1, 1, (3, 7)), rng.uniform(-1, 1, (3, 5))
    check_output("conv_shift", {"X": x, "Y": y}, {"Out": _conv_shift_ref(x, y)})
    check_grad("conv_shift", {"X": x, "Y": y}, ["X", "Y"])
    # Y as wide as X (every shift of the row)
    x2, y2 = rng.uniform(-1, 1, (2, 3)), rng.uniform(-1, 1, (2, 3))
    check_grad("conv_shift", {"X": x2, "Y": y2}, ["X", "Y"])
    with pytest.raises((ShapeError, ExecutionError), match="odd"):
        run_op("conv_shift", {"X": x, "Y": y[:, :4]})
