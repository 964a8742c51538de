"""Products bilinear in two inputs X and Y (products, not interpolation: that is interp.py):
bilinear_tensor_product (Out[b, k] = X[b] Weight[k] Y[b]^T, a learned form per output),
fsp (the flow-of-solution-procedure matrix of two feature maps, X Y^T over the positions) and
conv_shift (the Neural Turing Machine's circular convolution of each row of X by Y's), with
their gradients: each input's is the output gradient contracted with the other input.
"""
import numpy as np

from ..errors import ShapeError
from .common import grad_maker
from .registry import In, OpDef, Out


class BilinearTensorProduct(OpDef):
    type = "bilinear_tensor_product"
    inputs = (In("X"), In("Y"), In("Weight"), In("Bias", dispensable=True))
    outputs = (Out("Out"),)
    share_lod = "X"
    lod_outputs = ("Out",)
    doc = "Out[b, k] = X[b] @ Weight[k] @ Y[b]^T + Bias[0, k]."

    @staticmethod
    def infer_shape(ctx):
        xs, ws = ctx.input_shape("X"), ctx.input_shape("Weight")
        if len(ws) != 3:
            ctx.fail(f"Weight must be 3-D [size, M, N], got {ws}")
        ctx.set_output("Out", [xs[0], ws[0]], ctx.input_dtype("X"))

    @staticmethod
    def kernel(x, y, w, bias):
        out = np.einsum("bm,kmn,bn->bk", x, w, y)
        if bias is not None:
            out = out + bias.reshape(1, -1)
        return out.astype(x.dtype)

    grad = staticmethod(lambda g: g.default())


class BilinearTensorProductGrad(OpDef):
    type = "bilinear_tensor_product_grad"
    inputs = (In("X"), In("Y"), In("Weight"), In("Bias", dispensable=True), In("Out"),
              In("Out@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True), Out("Y@GRAD", dispensable=True),
               Out("Weight@GRAD", dispensable=True), Out("Bias@GRAD", dispensable=True))
    infer_shape = None
    share_lod = None

    @staticmethod
    def kernel(x, y, w, bias, out, d):
        db = d.sum(axis=0, keepdims=True).astype(x.dtype) if bias is not None else None
        return (np.einsum("bk,kmn,bn->bm", d, w, y).astype(x.dtype),
                np.einsum("bk,kmn,bm->bn", d, w, x).astype(y.dtype),
                np.einsum("bk,bm,bn->kmn", d, x, y).astype(w.dtype), db)


class Fsp(OpDef):
    type = "fsp"
    inputs = (In("X"), In("Y"))
    outputs = (Out("Out"),)
    share_lod = "X"
    lod_outputs = ("Out",)
    doc = "Out[b] = X[b] (as [C1, H*W]) @ Y[b] (as [C2, H*W])^T / (H * W) (the FSP matrix)."

    @staticmethod
    def infer_shape(ctx):
        xs, ys = ctx.input_shape("X"), ctx.input_shape("Y")
        if len(xs) != 4 or len(ys) != 4 or xs[2:] != ys[2:]:
            ctx.fail(f"X{xs} and Y{ys} must be 4-D with the same H, W")
        ctx.set_output("Out", [xs[0], xs[1], ys[1]], ctx.input_dtype("X"))

    @staticmethod
    def kernel(x, y):
        hw = x.shape[2] * x.shape[3]
        return (np.einsum("bchw,bdhw->bcd", x, y) / hw).astype(x.dtype)

    grad = staticmethod(lambda g: g.default())


class FspGrad(OpDef):
    type = "fsp_grad"
    inputs = (In("X"), In("Y"), In("Out"), In("Out@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True), Out("Y@GRAD", dispensable=True))
    infer_shape = None
    share_lod = None

    @staticmethod
    def kernel(x, y, out, d):
        hw = x.shape[2] * x.shape[3]
        return (np.einsum("bcd,bdhw->bchw", d, y) / hw).astype(x.dtype), \
            (np.einsum("bcd,bchw->bdhw", d, x) / hw).astype(y.dtype)


# --- conv_shift ------------------------------------------------------------------------------
def _shift_index(m, n):
    """[m, n] X column read for Out column i and Y column j: (i + j - (n-1)/2) mod m."""
    return (np.arange(m)[:, None] + np.arange(n)[None, :] - (n - 1) // 2) % m


def _check_shift(x, y):
    if x.ndim != 2 or y.ndim != 2 or x.shape[0] != y.shape[0]:
        raise ShapeError(f"conv_shift: X{list(x.shape)} and Y{list(y.shape)} must be 2-D with "
                         f"the same rows")
    if y.shape[1] % 2 != 1 or y.shape[1] > x.shape[1]:
        raise ShapeError(f"conv_shift: Y's width {y.shape[1]} must be odd and at most X's "
                         f"{x.shape[1]}")


class ConvShift(OpDef):
    type = "conv_shift"
    inputs = (In("X"), In("Y"))
    outputs = (Out("Out"),)
    doc = ("Circular convolution per row: Out[k, i] = sum_j X[k, (i + j - (N-1)/2) mod M] * "
           "Y[k, j], X [B, M], Y [B, N] with N odd and <= M.")

    @staticmethod
    def infer_shape(ctx):
        xs, ys = ctx.input_shape("X"), ctx.input_shape("Y")
        if len(xs) != 2 or len(ys) != 2:
            ctx.fail("X and Y must be 2-D")
        if xs[0] >= 0 and ys[0] >= 0 and xs[0] != ys[0]:
            ctx.fail("X and Y must have the same rows")
        if ys[1] >= 0 and ys[1] % 2 != 1:
            ctx.fail("Y's width must be odd")
        if xs[1] >= 0 and ys[1] >= 0 and ys[1] > xs[1]:
            ctx.fail("Y's width must be at most X's")
        ctx.share("X", "Out")

    @staticmethod
    def kernel(x, y):
        _check_shift(x, y)
        idx = _shift_index(x.shape[1], y.shape[1])
        return np.einsum("kij,kj->ki", x[:, idx], y).astype(x.dtype)

    grad = grad_maker("conv_shift_grad", ("X", "Y", "Out@GRAD"), ("X", "Y"))


class ConvShiftGrad(OpDef):
    type = "conv_shift_grad"
    inputs = (In("X"), In("Y"), In("Out@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True), Out("Y@GRAD", dispensable=True))
    infer_shape = None

    @staticmethod
    def kernel(x, y, dout):
        _check_shift(x, y)
        idx = _shift_index(x.shape[1], y.shape[1])
        dx = np.zeros_like(x)
        b, (m, n) = x.shape[0], idx.shape
        contrib = dout[:, :, None] * y[:, None, :]            # [B, M, N] into X[k, idx[i, j]]
        np.add.at(dx, (np.arange(b)[:, None, None], np.broadcast_to(idx, (b, m, n))), contrib)
        dy = np.einsum("kij,ki->kj", x[:, idx], dout).astype(y.dtype)
        return dx, dy
