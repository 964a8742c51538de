"""Assorted Fluid 1.x ops: multiplex, bilinear_tensor_product, add_position_encoding, fsp,
cvm (continuous_value_model), mean_iou, affine_grid, random_crop, tensor_array_to_tensor,
grid_sampler, spectral_norm, row_conv, im2sequence — with the gradients of the
differentiable ones."""
import numpy as np

from ..core import dtypes
from ..core.tensor import LoDTensor, LoDTensorArray
from ..errors import ExecutionError, ShapeError
from .common import is_empty
from .registry import In, OpDef, Out, ints
from .volume import gather_patches, patch_map, scatter_patches, tlbr_pads


# --- multiplex -------------------------------------------------------------------------------
class Multiplex(OpDef):
    type = "multiplex"
    inputs = (In("Ids", no_grad=True), In("X", duplicable=True))
    outputs = (Out("Out"),)
    share_lod = None
    doc = "Out[i] = X[Ids[i]][i]: row i taken from the candidate Ids[i]."

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", ctx.input_shape("X"), ctx.input_dtype("X"))

    @staticmethod
    def _ids(ids, k, n):
        ids = np.asarray(ids).reshape(-1).astype(np.int64)
        if len(ids) != n or ((ids < 0) | (ids >= k)).any():
            raise ExecutionError(f"multiplex: Ids must hold {n} values in [0, {k})")
        return ids

    @staticmethod
    def kernel(ids, xs):
        stack = np.stack(xs)
        ids = Multiplex._ids(ids, len(xs), stack.shape[1])
        return stack[ids, np.arange(stack.shape[1])]

    grad = staticmethod(lambda g: g.op(
        "multiplex_grad", {"Ids": g.input("Ids"), "X": g.input("X"),
                           "Out@GRAD": g.output_grad("Out")}, {"X@GRAD": g.input_grad("X")}))


class MultiplexGrad(OpDef):
    type = "multiplex_grad"
    inputs = (In("Ids"), In("X", duplicable=True), In("Out@GRAD"))
    outputs = (Out("X@GRAD", duplicable=True),)
    infer_shape = None
    share_lod = None

    @staticmethod
    def kernel(ids, xs, dout):
        ids = Multiplex._ids(ids, len(xs), dout.shape[0])
        grads = []
        for k in range(len(xs)):
            d = np.zeros_like(dout)
            d[ids == k] = dout[ids == k]
            grads.append(d)
        return grads


# --- bilinear_tensor_product, fsp --------------------------------------------------------------
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


# --- add_position_encoding ---------------------------------------------------------------------
def _position_table(t, d):
    """[t, d] sinusoids of Paddle 1.8's kernel: for k < d/2, angle j / 10000^(k / (d/2 - 1))
    (j / 10000 when d/2 is 1); sin in the first half, cos in the second."""
    half = d // 2
    pos = np.arange(t, dtype=np.float64)[:, None]
    denom = np.power(10000.0, np.arange(half) / (half - 1)) if half > 1 else np.full(1, 1e4)
    val = pos / denom[None, :]
    table = np.zeros((t, d))
    table[:, :half] = np.sin(val)
    table[:, half:2 * half] = np.cos(val)
    return table


class AddPositionEncoding(OpDef):
    type = "add_position_encoding"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    attrs = {"alpha": 1.0, "beta": 1.0}
    kind = "value"
    share_lod = None
    doc = ("Out = alpha * X + beta * PE for X [B, T, D], or a sequence batch [N, D] with one "
           "LoD level (positions counted within each sequence): PE[t, j] = sin(t / "
           "10000^(j / (D/2 - 1))) for j < D/2, the cos of the same for the second half.")

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        lod = ctx.input_lod_level("X")
        if len(xs) != (2 if lod else 3):
            ctx.fail("X must be 3-D [batch, length, size], or 2-D [rows, size] with a LoD")
        if xs[-1] >= 0 and xs[-1] % 2:
            ctx.fail(f"X's size {xs[-1]} must be even")
        ctx.share("X", "Out")

    @staticmethod
    def kernel(x, *, alpha, beta):
        a = x._array
        if a.shape[-1] % 2:
            raise ShapeError(f"add_position_encoding: X's size {a.shape[-1]} must be even")
        if not x._lod:
            if a.ndim != 3:
                raise ShapeError(f"add_position_encoding: X without a LoD must be 3-D, got "
                                 f"{list(a.shape)}")
            pe = _position_table(a.shape[1], a.shape[2])[None]
        else:
            if a.ndim != 2 or len(x._lod) != 1:
                raise ShapeError(f"add_position_encoding: X with a LoD must be 2-D with one "
                                 f"level, got {list(a.shape)} with {len(x._lod)} levels")
            off = np.asarray(x._lod[0], np.int64)
            pos = np.arange(a.shape[0]) - np.repeat(off[:-1], np.diff(off))
            pe = _position_table(int(pos.max()) + 1 if pos.size else 0, a.shape[1])[pos]
        return LoDTensor((alpha * a + beta * pe).astype(a.dtype), x._lod)

    grad = staticmethod(lambda g: g.op(
        "add_position_encoding_grad", {"Out@GRAD": g.output_grad("Out")},
        {"X@GRAD": g.input_grad("X")}, g.attrs()))


class AddPositionEncodingGrad(OpDef):
    type = "add_position_encoding_grad"
    inputs = (In("Out@GRAD"),)
    outputs = (Out("X@GRAD"),)
    attrs = AddPositionEncoding.attrs
    infer_shape = None

    @staticmethod
    def kernel(d, *, alpha):
        return (alpha * d).astype(d.dtype)


# --- cvm ---------------------------------------------------------------------------------------
class Cvm(OpDef):
    type = "cvm"
    inputs = (In("X"), In("CVM", no_grad=True))
    outputs = (Out("Y"),)
    attrs = {"use_cvm": True}
    doc = ("CTR continuous values: X's first two columns (show, click) become log(show + 1) "
           "and log(click + 1) - log(show + 1) (use_cvm), or are dropped.")

    @staticmethod
    def infer_shape(ctx):
        xs = list(ctx.input_shape("X"))
        if not ctx.attr("use_cvm") and xs[-1] >= 0:
            xs[-1] -= 2
        # Y keeps X's LoD (share_lod), so it declares X's LoD level
        ctx.set_output("Y", xs, ctx.input_dtype("X"), ctx.input_lod_level("X"))

    @staticmethod
    def kernel(x, cvm, *, use_cvm):
        if not use_cvm:
            return x[..., 2:].copy()
        y = x.copy()
        y[..., 0] = np.log(x[..., 0] + 1)
        y[..., 1] = np.log(x[..., 1] + 1) - y[..., 0]
        return y

    grad = staticmethod(lambda g: g.op(
        "cvm_grad", {"X": g.input("X"), "CVM": g.input("CVM"), "Y@GRAD": g.output_grad("Y")},
        {"X@GRAD": g.input_grad("X")}, g.attrs()))


class CvmGrad(OpDef):
    type = "cvm_grad"
    inputs = (In("X"), In("CVM"), In("Y@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = Cvm.attrs
    infer_shape = None
    doc = ("X@GRAD = Y@GRAD on the embedding columns; the show/click columns get the CVM "
           "values themselves, as Paddle's kernel passes them to the sparse table.")

    @staticmethod
    def kernel(x, cvm, dy, *, use_cvm):
        dx = np.zeros_like(x)
        dx[..., 2:] = dy[..., 2:] if use_cvm else dy
        dx[..., :2] = cvm.reshape(dx[..., :2].shape)
        return dx


# --- mean_iou ----------------------------------------------------------------------------------
class MeanIou(OpDef):
    type = "mean_iou"
    inputs = (In("Predictions"), In("Labels"), In("InWrongs", duplicable=True, dispensable=True),
              In("InCorrects", duplicable=True, dispensable=True),
              In("InMeanIou", duplicable=True, dispensable=True))
    outputs = (Out("OutMeanIou"), Out("OutWrong"), Out("OutCorrect"))
    attrs = {"num_classes": 2}
    share_lod = None
    doc = ("Per class c: correct = pixels labelled and predicted c, wrong = pixels where just "
           "one of them is c; OutMeanIou = mean of correct / (correct + wrong) over classes "
           "that occur (plus the In* states, summed in).")

    @staticmethod
    def infer_shape(ctx):
        c = ctx.attr("num_classes")
        ctx.set_output("OutMeanIou", [1], dtypes.VarType.FP32)
        ctx.set_output("OutWrong", [c], dtypes.VarType.INT32)
        ctx.set_output("OutCorrect", [c], dtypes.VarType.INT32)

    @staticmethod
    def kernel(pred, label, in_wrongs, in_corrects, in_ious, *, num_classes):
        p, lab = pred.reshape(-1).astype(np.int64), label.reshape(-1).astype(np.int64)
        c = num_classes
        correct = np.bincount(p[p == lab], minlength=c)[:c].astype(np.int32)
        wrong = (np.bincount(p[p != lab], minlength=c)[:c] +
                 np.bincount(lab[p != lab], minlength=c)[:c]).astype(np.int32)
        for extra in in_wrongs or []:
            wrong = wrong + extra.astype(np.int32)
        for extra in in_corrects or []:
            correct = correct + extra.astype(np.int32)
        denom = wrong + correct
        valid = denom > 0
        iou = (correct[valid] / denom[valid]).sum() / max(valid.sum(), 1)
        iou += sum(float(np.asarray(v).reshape(-1)[0]) for v in (in_ious or []))
        return np.array([iou], np.float32), wrong, correct


# --- affine_grid -------------------------------------------------------------------------------
def _base_grid(h, w):
    """[H, W, 3] of (x, y, 1), x and y from -1 to 1 (corners aligned)."""
    ys, xs = np.linspace(-1, 1, h), np.linspace(-1, 1, w)
    grid = np.ones((h, w, 3))
    grid[..., 0] = xs[None, :]
    grid[..., 1] = ys[:, None]
    return grid


class AffineGrid(OpDef):
    type = "affine_grid"
    inputs = (In("Theta"), In("OutputShape", dispensable=True, no_grad=True))
    outputs = (Out("Output"),)
    attrs = {"output_shape": ints(), "use_cudnn": True, "align_corners": True}
    share_lod = None
    doc = ("Output[n, h, w] = Theta[n] @ (x_w, y_h, 1): the sampling grid of a 2-D affine "
           "transform for output_shape [N, C, H, W] (coordinates in [-1, 1]).")

    @staticmethod
    def infer_shape(ctx):
        shape = ctx.attr("output_shape")
        h, w = (shape[2], shape[3]) if len(shape) == 4 else (-1, -1)
        ctx.set_output("Output", [ctx.input_shape("Theta")[0], h, w, 2],
                       ctx.input_dtype("Theta"))

    @staticmethod
    def _hw(shape_t, output_shape):
        shape = [int(v) for v in np.asarray(shape_t).reshape(-1)] if shape_t is not None \
            else list(output_shape)
        if len(shape) != 4:
            raise ExecutionError(f"affine_grid: the output shape must be [N, C, H, W], got "
                                 f"{shape}")
        return shape[2], shape[3]

    @staticmethod
    def kernel(theta, shape_t, *, output_shape):
        h, w = AffineGrid._hw(shape_t, output_shape)
        return np.einsum("hwk,njk->nhwj", _base_grid(h, w), theta).astype(theta.dtype)

    grad = staticmethod(lambda g: g.op(
        "affine_grid_grad", {k: v for k, v in (("OutputShape", g.input("OutputShape")),
                                               ("Output@GRAD", g.output_grad("Output"))) if v},
        {"Theta@GRAD": g.input_grad("Theta")}, g.attrs()))


class AffineGridGrad(OpDef):
    type = "affine_grid_grad"
    inputs = (In("OutputShape", dispensable=True), In("Output@GRAD"))
    outputs = (Out("Theta@GRAD"),)
    attrs = AffineGrid.attrs
    infer_shape = None
    share_lod = None

    @staticmethod
    def kernel(shape_t, d, *, output_shape):
        h, w = AffineGrid._hw(shape_t, output_shape)
        return np.einsum("hwk,nhwj->njk", _base_grid(h, w), d).astype(d.dtype)


# --- random_crop -------------------------------------------------------------------------------
class RandomCrop(OpDef):
    type = "random_crop"
    inputs = (In("X", no_grad=True), In("Seed", dispensable=True, no_grad=True))
    outputs = (Out("Out"), Out("SeedOut", intermediate=True))
    attrs = {"shape": ints(), "startup_seed": 0}
    share_lod = None
    doc = ("Out = a crop of `shape` (the trailing dims) at a random offset per instance of "
           "the leading dims; SeedOut = the next seed (Seed, or startup_seed, advanced).")

    @staticmethod
    def infer_shape(ctx):
        xs, shape = ctx.input_shape("X"), ctx.attr("shape")
        if len(shape) > len(xs):
            ctx.fail(f"shape {shape} has more dims than X{xs}")
        ctx.set_output("Out", xs[:len(xs) - len(shape)] + list(shape), ctx.input_dtype("X"))
        ctx.set_output("SeedOut", [1], dtypes.VarType.INT64)

    @staticmethod
    def kernel(x, seed, *, shape, startup_seed):
        s = int(np.asarray(seed).reshape(-1)[0]) if seed is not None else startup_seed
        rng = np.random.default_rng(s if s else None)
        k = len(shape)
        lead, tail = x.shape[:x.ndim - k], x.shape[x.ndim - k:]
        if any(c > d for c, d in zip(shape, tail)):
            raise ExecutionError(f"random_crop: crop {list(shape)} exceeds X's dims "
                                 f"{list(tail)}")
        flat = x.reshape((-1,) + tail)
        out = np.empty((flat.shape[0],) + tuple(shape), x.dtype)
        for i in range(flat.shape[0]):
            offs = [int(rng.integers(0, d - c + 1)) for c, d in zip(shape, tail)]
            out[i] = flat[i][tuple(slice(o, o + c) for o, c in zip(offs, shape))]
        return out.reshape(lead + tuple(shape)), np.array([int(rng.integers(1, 2 ** 62))],
                                                          np.int64)


# --- tensor_array_to_tensor --------------------------------------------------------------------
class TensorArrayToTensor(OpDef):
    type = "tensor_array_to_tensor"
    kind = "value"
    inputs = (In("X"),)
    outputs = (Out("Out"), Out("OutIndex"))
    attrs = {"axis": 1, "use_stack": False}
    share_lod = None
    doc = ("Out = the array's tensors concatenated (or stacked, use_stack) along `axis`; "
           "OutIndex = each tensor's size along axis.")

    @staticmethod
    def infer_shape(ctx):
        # as Paddle: the array's declared shape is its entries' (write_to_array sets it);
        # the stacked (or concatenated) axis has an unknown size
        dims = ctx.input_shape("X")
        axis, stack = ctx.attr("axis"), ctx.attr("use_stack")
        shape = None
        if dims:
            shape = list(dims)
            rank = len(shape) + (1 if stack else 0)
            a = axis + rank if axis < 0 else axis
            if not 0 <= a < rank:
                ctx.fail(f"axis {axis} is out of range for the array's entries of shape "
                         f"{dims}")
            if stack:
                shape.insert(a, -1)
            else:
                shape[a] = -1
        ctx.set_output("Out", shape, ctx.input_dtype("X"))
        ctx.set_output("OutIndex", [-1], dtypes.VarType.INT32)

    @staticmethod
    def kernel(arr, *, axis, use_stack):
        if not isinstance(arr, LoDTensorArray) or not len(arr):
            raise ExecutionError("tensor_array_to_tensor: X must be a non-empty tensor array")
        parts = [t._array for t in arr if not is_empty(t)]
        out = np.stack(parts, axis) if use_stack else np.concatenate(parts, axis)
        sizes = [1 if use_stack else p.shape[axis] for p in parts]
        return LoDTensor(out), LoDTensor(np.array(sizes, np.int32))

    grad = staticmethod(lambda g: g.op(
        "tensor_array_to_tensor_grad", {"X": g.input("X"), "Out@GRAD": g.output_grad("Out")},
        {"X@GRAD": g.input_grad("X")}, g.attrs()))


class TensorArrayToTensorGrad(OpDef):
    type = "tensor_array_to_tensor_grad"
    kind = "value"
    inputs = (In("X"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = TensorArrayToTensor.attrs
    infer_shape = None
    share_lod = None
    doc = ("X@GRAD = Out@GRAD split back into the array's entries (unstacked with use_stack); "
           "an empty entry of X gets an empty gradient.")

    @staticmethod
    def kernel(arr, dout, *, axis, use_stack):
        if not isinstance(arr, LoDTensorArray) or not len(arr):
            raise ExecutionError("tensor_array_to_tensor_grad: X must be a non-empty tensor "
                                 "array")
        d = dout._array if isinstance(dout, LoDTensor) else np.asarray(dout)
        full = [k for k, t in enumerate(arr) if not is_empty(t)]
        if use_stack:
            a = axis + d.ndim if axis < 0 else axis
            pieces = [np.take(d, j, axis=a) for j in range(len(full))]
        else:
            a = axis + d.ndim if axis < 0 else axis
            cuts = np.cumsum([arr[k]._array.shape[a] for k in full])[:-1]
            pieces = np.split(d, cuts, axis=a)
        if len(pieces) != len(full) or (use_stack and d.shape[a] != len(full)):
            raise ExecutionError(f"tensor_array_to_tensor_grad: Out@GRAD {list(d.shape)} does "
                                 f"not split into the array's {len(full)} entries")
        out = LoDTensorArray()
        for _ in arr:
            list.append(out, LoDTensor())
        for k, piece in zip(full, pieces):
            out[k] = LoDTensor(np.ascontiguousarray(piece))
        return out


# --- grid_sampler ------------------------------------------------------------------------------
def _corners(x, grid):
    """The four bilinear corners of every grid point: [(weight, valid, yi, xi)] with the
    pixel coordinates gx, gy (corners aligned: -1 and 1 are the edge pixels' centres)."""
    h, w = x.shape[2:]
    gx = (grid[..., 0].astype(np.float64) + 1) * (w - 1) / 2
    gy = (grid[..., 1].astype(np.float64) + 1) * (h - 1) / 2
    x0, y0 = np.floor(gx).astype(np.int64), np.floor(gy).astype(np.int64)
    fx, fy = gx - x0, gy - y0
    out = []
    for dy, wy in ((0, 1 - fy), (1, fy)):
        for dx, wx in ((0, 1 - fx), (1, fx)):
            yi, xi = y0 + dy, x0 + dx
            valid = (yi >= 0) & (yi < h) & (xi >= 0) & (xi < w)
            out.append((wy * wx, valid, np.clip(yi, 0, h - 1), np.clip(xi, 0, w - 1), dy, dx))
    return out, fx, fy


def _pixels(x, yi, xi):
    """x[n, :, yi[n, i, j], xi[n, i, j]] as [N, C, Ho, Wo]."""
    n = np.arange(x.shape[0])[:, None, None]
    return x[n, :, yi, xi].transpose(0, 3, 1, 2)


class GridSampler(OpDef):
    type = "grid_sampler"
    inputs = (In("X"), In("Grid"))
    outputs = (Out("Output"),)
    attrs = {"use_cudnn": True, "align_corners": True, "mode": "bilinear",
             "padding_mode": "zeros"}
    share_lod = None
    doc = ("Output[n, c, i, j] = X[n, c] sampled bilinearly at Grid[n, i, j] = (x, y) in "
           "[-1, 1] (corners aligned; zero outside X).")

    @staticmethod
    def infer_shape(ctx):
        xs, gs = ctx.input_shape("X"), ctx.input_shape("Grid")
        if len(xs) != 4 or len(gs) != 4 or gs[3] != 2:
            ctx.fail(f"X must be [N, C, H, W] and Grid [N, H', W', 2], got {xs} and {gs}")
        ctx.set_output("Output", xs[:2] + gs[1:3], ctx.input_dtype("X"))

    @staticmethod
    def _check(attrs):
        if (attrs["mode"], attrs["padding_mode"], attrs["align_corners"]) != (
                "bilinear", "zeros", True):
            raise ExecutionError("grid_sampler: only bilinear sampling with zero padding and "
                                 "aligned corners is built")

    @classmethod
    def prepare(cls, attrs, outputs):
        cls._check(attrs)

        def kernel(x, grid):
            corners, _, _ = _corners(x, grid)
            out = sum((w * v)[:, None] * _pixels(x, yi, xi)
                      for w, v, yi, xi, _, _ in corners)
            return out.astype(x.dtype)
        return kernel

    grad = staticmethod(lambda g: g.op(
        "grid_sampler_grad", {"X": g.input("X"), "Grid": g.input("Grid"),
                              "Output@GRAD": g.output_grad("Output")},
        {"X@GRAD": g.input_grad("X"), "Grid@GRAD": g.input_grad("Grid")}, g.attrs()))


class GridSamplerGrad(OpDef):
    type = "grid_sampler_grad"
    inputs = (In("X"), In("Grid"), In("Output@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True), Out("Grid@GRAD", dispensable=True))
    attrs = GridSampler.attrs
    infer_shape = None
    share_lod = None

    @staticmethod
    def kernel(x, grid, d, *, align_corners, mode, padding_mode):
        h, w = x.shape[2:]
        corners, fx, fy = _corners(x, grid)
        dx = np.zeros(x.shape, np.float64)
        n = np.broadcast_to(np.arange(x.shape[0])[:, None, None], fx.shape)
        dgx = np.zeros(fx.shape)
        dgy = np.zeros(fy.shape)
        for wgt, valid, yi, xi, cy, cx in corners:
            contrib = d * (wgt * valid)[:, None]                      # [N, C, Ho, Wo]
            for c in range(x.shape[1]):
                np.add.at(dx[:, c], (n, yi, xi), contrib[:, c])
            vals = (_pixels(x, yi, xi) * d).sum(axis=1) * valid        # [N, Ho, Wo]
            wy = fy if cy else 1 - fy
            wx = fx if cx else 1 - fx
            dgx += vals * wy * (1 if cx else -1)
            dgy += vals * wx * (1 if cy else -1)
        dgrid = np.stack([dgx * (w - 1) / 2, dgy * (h - 1) / 2], axis=-1)
        return dx.astype(x.dtype), dgrid.astype(grid.dtype)


# --- spectral_norm ----------------------------------------------------------------------------
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
    share_lod = None
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


# --- row_conv, im2sequence ---------------------------------------------------------------------
def _sequences(x):
    """[(start, end)] of the sequences of LoDTensor x: its last LoD level, or each row of a
    padded [B, T, D] tensor (as one sequence of T steps)."""
    if x._lod:
        offs = x._lod[-1]
        return [(offs[i], offs[i + 1]) for i in range(len(offs) - 1)], x._array
    a = x._array
    if a.ndim != 3:
        raise ExecutionError("row_conv: X needs LoD, or the padded shape [batch, time, dim]")
    t = a.shape[1]
    return [(b * t, (b + 1) * t) for b in range(a.shape[0])], a.reshape(-1, a.shape[2])


class RowConv(OpDef):
    type = "row_conv"
    kind = "value"
    inputs = (In("X"), In("Filter"))
    outputs = (Out("Out"),)
    doc = ("Lookahead convolution (DeepSpeech 2): Out[t] = sum_i X[t + i] * Filter[i] over "
           "i < future_context_size + 1, within each sequence.")

    @staticmethod
    def infer_shape(ctx):
        ctx.share("X", "Out")

    @staticmethod
    def kernel(x, f):
        seqs, a = _sequences(x)
        w = f._array
        out = np.zeros_like(a)
        for s, e in seqs:
            for i in range(min(len(w), e - s)):
                out[s:e - i] += a[s + i:e] * w[i]
        return LoDTensor(out.reshape(x._array.shape), x._lod)


    grad = staticmethod(lambda g: g.op(
        "row_conv_grad", {"X": g.input("X"), "Filter": g.input("Filter"),
                          "Out@GRAD": g.output_grad("Out")},
        {"X@GRAD": g.input_grad("X"), "Filter@GRAD": g.input_grad("Filter")}))


class RowConvGrad(OpDef):
    type = "row_conv_grad"
    kind = "value"
    inputs = (In("X"), In("Filter"), In("Out@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True), Out("Filter@GRAD", dispensable=True))
    infer_shape = None

    @staticmethod
    def kernel(x, f, dout):
        seqs, a = _sequences(x)
        w = f._array
        d = dout._array.reshape(a.shape)
        dx, dw = np.zeros_like(a), np.zeros_like(w)
        for s, e in seqs:
            for i in range(min(len(w), e - s)):
                dx[s + i:e] += d[s:e - i] * w[i]
                dw[i] += (d[s:e - i] * a[s + i:e]).sum(axis=0)
        return LoDTensor(dx.reshape(x._array.shape), x._lod), LoDTensor(dw)


def _real_grid(y, n, kernels, strides, paddings, out_stride):
    """Each image's patch grid (rows, cols) from its real size Y [N, 2] (height, width):
    the size divided by out_stride (rounded up), then the usual output size."""
    sizes = np.asarray(y).reshape(n, 2).astype(np.int64)
    grids = []
    for h, w in sizes:
        h, w = -(-h // out_stride[0]), -(-w // out_stride[1])
        grids.append(((h + paddings[0] + paddings[2] - kernels[0]) // strides[0] + 1,
                      (w + paddings[1] + paddings[3] - kernels[1]) // strides[1] + 1))
    if any(gh < 0 or gw < 0 for gh, gw in grids):
        raise ExecutionError(f"im2sequence: a real image size in Y {sizes.tolist()} is too "
                             f"small for the {kernels} filter")
    return grids


def _padded_extent(shape, grid, kernels, strides, paddings):
    """(padded height, padded width) holding the image at (paddings[0], paddings[1]) and every
    patch of `grid` (zeros outside the image, as Paddle's im2col reads them)."""
    need_h = (grid[0] - 1) * strides[0] + kernels[0] if grid[0] else 0
    need_w = (grid[1] - 1) * strides[1] + kernels[1] if grid[1] else 0
    return (max(shape[0] + paddings[0], need_h), max(shape[1] + paddings[1], need_w))


def _patches_of(img, grid, kernels, strides, paddings):
    """[rows * cols, C * kh * kw]: the top-left `grid` of img's [C, H, W] patches."""
    c, h, w = img.shape
    ph, pw = _padded_extent((h, w), grid, kernels, strides, paddings)
    padded = np.zeros((c, ph, pw), img.dtype)
    padded[:, paddings[0]:paddings[0] + h, paddings[1]:paddings[1] + w] = img
    out = np.empty((grid[0], grid[1], c, kernels[0], kernels[1]), img.dtype)
    for a in range(kernels[0]):
        for b in range(kernels[1]):
            out[..., a, b] = padded[:, a:a + strides[0] * grid[0]:strides[0],
                                    b:b + strides[1] * grid[1]:strides[1]].transpose(1, 2, 0)
    return out.reshape(grid[0] * grid[1], -1)


def _patches_back(d, shape, grid, kernels, strides, paddings):
    """The gradient [C, H, W] of _patches_of from its output's gradient d."""
    c, h, w = shape
    ph, pw = _padded_extent((h, w), grid, kernels, strides, paddings)
    dp = np.zeros((c, ph, pw), d.dtype)
    d = d.reshape(grid[0], grid[1], c, kernels[0], kernels[1])
    for a in range(kernels[0]):
        for b in range(kernels[1]):
            dp[:, a:a + strides[0] * grid[0]:strides[0],
               b:b + strides[1] * grid[1]:strides[1]] += d[..., a, b].transpose(2, 0, 1)
    return dp[:, paddings[0]:paddings[0] + h, paddings[1]:paddings[1] + w]


class Im2Sequence(OpDef):
    type = "im2sequence"
    kind = "value"
    inputs = (In("X"), In("Y", dispensable=True, no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"kernels": ints(), "strides": ints([1, 1]), "paddings": ints([0, 0, 0, 0]),
             "out_stride": ints([1, 1])}
    share_lod = None
    doc = ("Out = the kh x kw patches of each image of X [N, C, H, W] as rows [C * kh * kw] "
           "of one sequence per image (LoD); paddings [up, left, down, right]. With Y [N, 2], "
           "the images' real sizes (height, width) for a batch of several, image i gives only "
           "the top-left patches covering its real size divided by out_stride.")

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        k = ctx.attr("kernels")
        if len(xs) != 4:
            ctx.fail(f"X must be 4-D [N, C, H, W], got {xs}")
        if ctx.has_input("Y") and ctx.input_shape("Y")[-1] not in (2, -1):
            ctx.fail(f"Y must be [N, 2] (real height, width), got {ctx.input_shape('Y')}")
        ctx.set_output("Out", [-1, xs[1] * k[0] * k[1] if xs[1] >= 0 else -1],
                       ctx.input_dtype("X"), lod_level=1)

    @staticmethod
    def _map(x_shape, attrs):
        return patch_map(x_shape[2:], attrs["kernels"], attrs["strides"],
                         tlbr_pads(attrs["paddings"]), [1, 1])[0]

    @staticmethod
    def kernel(x, y, *, kernels, strides, paddings, out_stride):
        a = x._array
        if y is not None and len(a) > 1:       # Paddle reads Y only for a batch of several
            grids = _real_grid(y._array, len(a), kernels, strides, paddings, out_stride)
            rows = [_patches_of(img, g, kernels, strides, paddings) for img, g in zip(a, grids)]
            lod = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).tolist()
            return LoDTensor(np.concatenate(rows).reshape(lod[-1], -1), [lod])
        m = Im2Sequence._map(a.shape, {"kernels": kernels, "strides": strides,
                                       "paddings": paddings})
        cols = gather_patches(a, m)                       # [N, C, L, K]
        n, c, length, k = cols.shape
        rows = cols.transpose(0, 2, 1, 3).reshape(n * length, c * k)
        return LoDTensor(np.ascontiguousarray(rows), [[i * length for i in range(n + 1)]])

    grad = staticmethod(lambda g: g.op(
        "im2sequence_grad", {"X": g.input("X"), "Y": g.input("Y"),
                             "Out@GRAD": g.output_grad("Out")},
        {"X@GRAD": g.input_grad("X")}, g.attrs()))


class Im2SequenceGrad(OpDef):
    type = "im2sequence_grad"
    kind = "value"
    inputs = (In("X"), In("Y", dispensable=True), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = Im2Sequence.attrs
    infer_shape = None
    share_lod = None

    @staticmethod
    def kernel(x, y, dout, *, kernels, strides, paddings, out_stride):
        a = x._array
        d = np.asarray(dout._array)
        if y is not None and len(a) > 1:
            grids = _real_grid(y._array, len(a), kernels, strides, paddings, out_stride)
            dx, start = np.empty_like(a), 0
            for i, g in enumerate(grids):
                rows = g[0] * g[1]
                dx[i] = _patches_back(d[start:start + rows], a.shape[1:], g, kernels, strides,
                                      paddings)
                start += rows
            return LoDTensor(dx)
        m = Im2Sequence._map(a.shape, {"kernels": kernels, "strides": strides,
                                       "paddings": paddings})
        n, c = a.shape[:2]
        d = d.reshape(n, m.shape[0], c, m.shape[1]).transpose(0, 2, 1, 3)
        return LoDTensor(scatter_patches(np.ascontiguousarray(d), m, a.shape[2:]).astype(
            a.dtype))
