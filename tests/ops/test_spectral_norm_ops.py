"""spectral_norm (fluidity/ops/spectral_norm.py): forward against the largest singular value
numpy computes, the gradient against finite differences."""
import numpy as np

from op_test import check_grad, check_output

rng = np.random.default_rng(12)


def r(*shape):
    return rng.uniform(-1, 1, size=shape).astype(np.float32)


def test_spectral_norm():
    w = r(3, 2, 2)
    u, v = r(2), r(6)
    mat = w.transpose(1, 0, 2).reshape(2, 6)
    sigma = np.linalg.svd(mat.astype(np.float64), compute_uv=False)[0]
    attrs = {"dim": 1, "power_iters": 60}
    check_output("spectral_norm", {"Weight": w, "U": u, "V": v}, {"Out": w / sigma}, attrs,
                 rtol=1e-4)
    check_grad("spectral_norm", {"Weight": w, "U": u, "V": v}, ["Weight"], attrs, rtol=1e-3)
