"""spectral_norm (Miyato et al. 2018): a weight divided by its largest singular value,
estimated by power iteration from the vectors U and V that the layer keeps, and its gradient
(U and V held fixed), as Paddle 1.8's kernels compute them.
"""
import numpy as np

from .registry import In, OpDef, Out


def _weight_matrix(w, dim):
    perm = [dim] + [i for i in range(w.ndim) if i != dim]
    return w.transpose(perm).reshape(w.shape[dim], -1), perm


def _sigma(w, u, v, dim, power_iters, eps):
    mat, perm = _weight_matrix(w.astype(np.float64), dim)
    u, v = u.astype(np.float64).reshape(-1), v.astype(np.float64).reshape(-1)
    for _ in range(power_iters):
        v = mat.T @ u
        v = v / (np.linalg.norm(v) + eps)
        u = mat @ v
        u = u / (np.linalg.norm(u) + eps)
    return float(u @ mat @ v), u, v, perm


class SpectralNorm(OpDef):
    type = "spectral_norm"
    inputs = (In("Weight"), In("U", no_grad=True), In("V", no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"dim": 0, "power_iters": 1, "eps": 1e-12}
    share_lod = "Weight"
    lod_outputs = ("Out",)
    doc = ("Out = Weight / sigma, sigma its largest singular value (Weight as a matrix with "
           "`dim` first) estimated by power_iters steps of power iteration from U, V (which "
           "stay as they are).")

    @staticmethod
    def infer_shape(ctx):
        ctx.share("Weight", "Out")

    @staticmethod
    def kernel(w, u, v, *, dim, power_iters, eps):
        sigma = _sigma(w, u, v, dim, power_iters, eps)[0]
        return (w / sigma).astype(w.dtype)

    grad = staticmethod(lambda g: g.op(
        "spectral_norm_grad", {"Weight": g.input("Weight"), "U": g.input("U"),
                               "V": g.input("V"), "Out@GRAD": g.output_grad("Out")},
        {"Weight@GRAD": g.input_grad("Weight")}, g.attrs()))


class SpectralNormGrad(OpDef):
    type = "spectral_norm_grad"
    inputs = (In("Weight"), In("U"), In("V"), In("Out@GRAD"))
    outputs = (Out("Weight@GRAD"),)
    attrs = SpectralNorm.attrs
    infer_shape = None
    share_lod = None
    doc = "dWeight = (dOut - sum(dOut * Out) * u v^T) / sigma, u and v held fixed."

    @staticmethod
    def kernel(w, u, v, d, *, dim, power_iters, eps):
        sigma, u, v, perm = _sigma(w, u, v, dim, power_iters, eps)
        dmat, _ = _weight_matrix(d.astype(np.float64), dim)
        wmat, _ = _weight_matrix(w.astype(np.float64), dim)
        gmat = (dmat - (dmat * wmat / sigma).sum() * np.outer(u, v)) / sigma
        shape = [w.shape[i] for i in perm]
        return gmat.reshape(shape).transpose(np.argsort(perm)).astype(w.dtype)
