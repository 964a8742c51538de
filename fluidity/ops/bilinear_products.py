"""Products bilinear in two inputs X and Y (products, not interpolation: that is interp.py):
bilinear_tensor_product (Out[b, k] = X[b] Weight[k] Y[b]^T, a learned form per output) and
fsp (the flow-of-solution-procedure matrix of two feature maps, X Y^T over the positions),
with their gradients: each input's is the output gradient contracted with the other input.
"""
import numpy as np

from .registry import In, OpDef, Out


class BilinearTensorProduct(OpDef):
    type = "bilinear_tensor_product"
    inputs = (In("X"), In("Y"), In("Weight"), In("Bias", dispensable=True))
    outputs = (Out("Out"),)
    share_lod = None
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
    share_lod = None
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
