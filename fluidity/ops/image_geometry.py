"""Ops that choose which pixels of an image go where: affine_grid and grid_sampler (a
spatial transformer: the sampling grid of an affine transform, then bilinear sampling of X at
a grid), random_crop (a crop at a random offset per instance) and im2sequence (an image's
patches as the steps of one sequence), with the gradients of the differentiable ones.
Coordinates in a grid run from -1 to 1 with the corners aligned.
"""
import numpy as np

from ..core import dtypes, philox
from ..core.tensor import LoDTensor
from ..errors import ExecutionError
from .registry import In, OpDef, Out, ints
from .volume import gather_patches, patch_map, scatter_patches, tlbr_pads


# --- affine_grid -----------------------------------------------------------------------------
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
    share_lod = "Theta"
    lod_outputs = ("Output",)
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


# --- grid_sampler ----------------------------------------------------------------------------
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
    share_lod = "X"
    lod_outputs = ("Output",)
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


# --- random_crop -----------------------------------------------------------------------------
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

    random_stream = "Out"

    @classmethod
    def prepare(cls, attrs, outputs, stream):
        """Offsets from the op's Philox stream (core/philox.py) under the seed Seed holds
        (startup_seed while it holds none; 0: the op's state): instance i's offset along
        crop dim j from word i * k + j, as (word * (d - c + 1)) >> 32; SeedOut from the
        word after the last instance's (31 bits, never 0)."""
        shape, startup_seed = list(attrs["shape"]), attrs["startup_seed"]

        def kernel(x, seed, state):
            s = int(np.asarray(seed).reshape(-1)[0]) if seed is not None else startup_seed
            key, ks, run = philox.key_and_run(s, state, stream)
            k = len(shape)
            lead, tail = x.shape[:x.ndim - k], x.shape[x.ndim - k:]
            if any(c > d for c, d in zip(shape, tail)):
                raise ExecutionError(f"random_crop: crop {shape} exceeds X's dims "
                                     f"{list(tail)}")
            flat = x.reshape((-1,) + tail)
            m = flat.shape[0]
            w = philox.words(m * k + 1, key, ks, run)
            span = np.asarray([d - c + 1 for c, d in zip(shape, tail)], np.uint64)
            offs = (w[:m * k].astype(np.uint64).reshape(m, k) * span) >> np.uint64(32)
            out = np.empty((m,) + tuple(shape), x.dtype)
            for i in range(m):
                out[i] = flat[i][tuple(slice(int(o), int(o) + c)
                                       for o, c in zip(offs[i], shape))]
            nxt = int(w[-1]) & 0x7FFFFFFF
            return out.reshape(lead + tuple(shape)), np.array([nxt or 1], np.int64)
        return kernel


# --- im2sequence -----------------------------------------------------------------------------
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
