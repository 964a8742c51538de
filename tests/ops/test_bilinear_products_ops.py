"""bilinear_tensor_product, fsp (fluidity/ops/bilinear_products.py): forward against numpy,
gradients against finite differences."""
import numpy as np

from op_test import check_grad, check_output

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
