"""Region-of-interest pooling (Faster R-CNN, R-FCN, PrRoI): roi_pool, roi_align, psroi_pool
and prroi_pool, and roi_perspective_transform (quadrilateral ROIs warped to a rectangle),
with their gradients, as Paddle 1.8 defines them.

Each op pools a feature map X [N, C, H, W] over boxes ROIs [R, 4] ((x1, y1, x2, y2) in input
image coordinates, scaled to X by `spatial_scale`) into Out [R, C', pooled_height,
pooled_width]. Which image a box belongs to comes from ROIs' LoD (one sequence of boxes per
image), or from an explicit input: `RoisLod` (offsets, roi_pool / roi_align) or
`BatchRoINums` (boxes per image, prroi_pool).

roi_align and prroi_pool sample X through bilinear interpolation, which is separable: the
pooled value of a bin is `Wy[ph] @ X[c] @ Wx[pw]` for weight rows over X's rows and columns,
so both ops (and their gradients) are two matrix products per box.
"""
import numpy as np

from ..core.tensor import LoDTensor
from ..errors import ExecutionError
from .registry import In, OpDef, Out

ROI_SIZE = 4


def round_half_away(v):
    """C's round(): halves away from zero (numpy's round goes to even)."""
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def roi_batch_ids(op, rois, n_images, offsets=None, counts=None):
    """The image index of each box: from `offsets` (a RoisLod tensor), `counts` (boxes per
    image) or else the last level of ROIs' LoD; ExecutionError naming `op` when they do not
    describe the R boxes of the N images."""
    r = len(rois._array)
    if counts is not None:
        counts = np.asarray(counts._array).reshape(-1).astype(np.int64)
        if (counts < 0).any() or counts.sum() != r:
            raise ExecutionError(f"{op}: BatchRoINums {counts.tolist()} does not add up to the "
                                 f"{r} boxes of ROIs")
        return np.repeat(np.arange(len(counts)), counts)
    if offsets is not None:
        lod = np.asarray(offsets._array).reshape(-1).astype(np.int64)
        what = "RoisLod"
    else:
        if not rois._lod:
            raise ExecutionError(f"{op}: ROIs {list(rois._array.shape)} has no LoD saying which "
                                 f"image each box belongs to (feed it as a LoDTensor with one "
                                 f"sequence of boxes per image)")
        lod = np.asarray(rois._lod[-1], np.int64)
        what = "ROIs' LoD"
    if len(lod) - 1 != n_images:
        raise ExecutionError(f"{op}: {what} {lod.tolist()} has {len(lod) - 1} images but X has "
                             f"{n_images}; the rois batch size and images batch size must be "
                             f"the same")
    if lod[0] != 0 or lod[-1] != r or (np.diff(lod) < 0).any():
        raise ExecutionError(f"{op}: {what} {lod.tolist()} does not cover the {r} boxes of ROIs")
    return np.repeat(np.arange(n_images), np.diff(lod))


class _RoiGrad(OpDef):
    """What the ROI ops' gradients share: holders' values in (LoD and RoisLod give the image
    of each box), X@GRAD out, no build-time shape rule (backward gives X's)."""
    kind = "value"
    share_lod = None
    infer_shape = None


def _infer_roi(ctx, channels):
    """Out [R, channels, pooled_height, pooled_width] after Paddle's checks."""
    xs, rs = ctx.input_shape("X"), ctx.input_shape("ROIs")
    if len(xs) != 4:
        ctx.fail(f"X must be a 4-D tensor [N, C, H, W], got {xs}")
    if len(rs) != 2 or rs[1] not in (ROI_SIZE, -1):
        ctx.fail(f"ROIs must be a 2-D LoDTensor [num_rois, 4] of (x1, y1, x2, y2), got {rs}")
    ph, pw = ctx.attr("pooled_height"), ctx.attr("pooled_width")
    if ph <= 0 or pw <= 0:
        ctx.fail(f"pooled_height and pooled_width must be greater than 0, got {ph} and {pw}")
    if ctx.attr("spatial_scale") <= 0:
        ctx.fail(f"spatial_scale must be greater than 0, got {ctx.attr('spatial_scale')}")
    shape = [rs[0], channels, ph, pw]
    ctx.set_output("Out", shape, ctx.input_dtype("X"), 0)
    return shape


def _check_batch(op, x, rois):
    if x.ndim != 4 or rois.ndim != 2 or rois.shape[1] != ROI_SIZE:
        raise ExecutionError(f"{op}: X must be [N, C, H, W] and ROIs [R, 4], got "
                             f"{list(x.shape)} and {list(rois.shape)}")


# --- roi_pool: max over each bin (Fast R-CNN) ------------------------------------------------
def _roi_pool_bins(roi, scale, ph, pw, h, w, dtype):
    """Integer [start, end) rows and columns of every bin of one box."""
    x1, y1, x2, y2 = (round_half_away(np.asarray(v, dtype) * dtype.type(scale)) for v in roi)
    rh, rw = max(y2 - y1 + 1, 1), max(x2 - x1 + 1, 1)
    bh, bw = dtype.type(rh) / dtype.type(ph), dtype.type(rw) / dtype.type(pw)
    rows = [(int(min(max(np.floor(i * bh) + y1, 0), h)),
             int(min(max(np.ceil((i + 1) * bh) + y1, 0), h))) for i in range(ph)]
    cols = [(int(min(max(np.floor(j * bw) + x1, 0), w)),
             int(min(max(np.ceil((j + 1) * bw) + x1, 0), w))) for j in range(pw)]
    return rows, cols


class RoiPool(OpDef):
    type = "roi_pool"
    inputs = (In("X"), In("ROIs", no_grad=True), In("RoisLod", dispensable=True, no_grad=True))
    outputs = (Out("Out"), Out("Argmax", intermediate=True))
    attrs = {"spatial_scale": 1.0, "pooled_height": 1, "pooled_width": 1}
    kind = "value"
    share_lod = None
    doc = ("Out[r, c, i, j] = max of X[b(r), c] over bin (i, j) of box r (coordinates rounded "
           "after scaling by spatial_scale; an empty bin gives 0); Argmax the flat h * W + w "
           "index of that maximum (-1 for an empty bin).")

    @staticmethod
    def infer_shape(ctx):
        shape = _infer_roi(ctx, ctx.input_shape("X")[1])
        ctx.set_output("Argmax", shape, "int64", 0)

    @staticmethod
    def kernel(x, rois, rois_lod, *, spatial_scale, pooled_height, pooled_width):
        xa, ra = x._array, rois._array
        _check_batch("roi_pool", xa, ra)
        ids = roi_batch_ids("roi_pool", rois, len(xa), offsets=rois_lod)
        n, c, h, w = xa.shape
        out = np.zeros((len(ra), c, pooled_height, pooled_width), xa.dtype)
        arg = np.full(out.shape, -1, np.int64)
        for r, (roi, b) in enumerate(zip(ra, ids)):
            rows, cols = _roi_pool_bins(roi, spatial_scale, pooled_height, pooled_width, h, w,
                                        xa.dtype)
            for i, (hs, he) in enumerate(rows):
                for j, (ws, we) in enumerate(cols):
                    if he <= hs or we <= ws:
                        continue
                    region = xa[b, :, hs:he, ws:we].reshape(c, -1)
                    k = region.argmax(axis=1)
                    out[r, :, i, j] = region[np.arange(c), k]
                    arg[r, :, i, j] = (hs + k // (we - ws)) * w + ws + k % (we - ws)
        return LoDTensor(out), LoDTensor(arg)

    @staticmethod
    def grad(g):
        g.op("roi_pool_grad", {"X": g.input("X"), "ROIs": g.input("ROIs"),
                               "RoisLod": g.input("RoisLod"), "Argmax": g.output("Argmax"),
                               "Out@GRAD": g.output_grad("Out")},
             {"X@GRAD": g.input_grad("X")}, g.attrs())


class RoiPoolGrad(_RoiGrad):
    type = "roi_pool_grad"
    inputs = (In("X"), In("ROIs"), In("RoisLod", dispensable=True), In("Argmax"),
              In("Out@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True),)
    attrs = RoiPool.attrs

    @staticmethod
    def kernel(x, rois, rois_lod, argmax, dout):
        xa = x._array
        ids = roi_batch_ids("roi_pool_grad", rois, len(xa), offsets=rois_lod)
        n, c, h, w = xa.shape
        arg, d = np.asarray(argmax._array), np.asarray(dout._array)
        keep = arg >= 0
        plane = (ids[:, None] * c + np.arange(c)[None, :]) * (h * w)   # [R, C] plane offsets
        flat = (plane[:, :, None, None] + arg)[keep]
        dx = np.bincount(flat, weights=d[keep], minlength=n * c * h * w)
        return LoDTensor(dx.reshape(xa.shape).astype(xa.dtype))


# --- roi_align: the mean of bilinear samples over each bin (Mask R-CNN) -----------------------
def _align_weights(start, bin_size, pooled, grid, size, dtype):
    """[pooled, size] weights: row i sums, over the `grid` sample points of bin i, each
    point's bilinear weights on the two nearest rows (Paddle's clamping at the borders; a
    point beyond (-1, size) weighs nothing)."""
    t = dtype.type
    wts = np.zeros((pooled, size), dtype)
    for i in range(pooled):
        for k in range(grid):
            y = t(start) + t(i) * t(bin_size) + t(k + .5) * t(bin_size) / t(grid)
            if y < -1.0 or y > size:
                continue
            y = max(y, t(0))
            lo = int(y)
            if lo >= size - 1:
                lo = hi = size - 1
                y = t(lo)
            else:
                hi = lo + 1
            ly = y - t(lo)
            wts[i, lo] += t(1) - ly
            wts[i, hi] += ly
    return wts


def _align_roi(roi, scale, ph, pw, sampling_ratio, dtype):
    """(start x, start y, bin w, bin h, grid w, grid h) of one box, as Paddle computes them."""
    t = dtype.type
    x1, y1, x2, y2 = (t(v) * t(scale) for v in roi)
    rw, rh = max(x2 - x1, t(1)), max(y2 - y1, t(1))
    bw, bh = rw / t(pw), rh / t(ph)
    gh = sampling_ratio if sampling_ratio > 0 else int(np.ceil(rh / t(ph)))
    gw = sampling_ratio if sampling_ratio > 0 else int(np.ceil(rw / t(pw)))
    return x1, y1, bw, bh, gw, gh


class RoiAlign(OpDef):
    type = "roi_align"
    inputs = (In("X"), In("ROIs", no_grad=True), In("RoisLod", dispensable=True, no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"spatial_scale": 1.0, "pooled_height": 1, "pooled_width": 1, "sampling_ratio": -1}
    kind = "value"
    share_lod = None
    doc = ("Out[r, c, i, j] = mean over a grid of sample points in bin (i, j) of box r of X[b(r), "
           "c] interpolated bilinearly; sampling_ratio points per bin side (<= 0: "
           "ceil(box side / pooled side)).")

    @staticmethod
    def infer_shape(ctx):
        _infer_roi(ctx, ctx.input_shape("X")[1])

    @staticmethod
    def kernel(x, rois, rois_lod, *, spatial_scale, pooled_height, pooled_width, sampling_ratio):
        xa, ra = x._array, rois._array
        _check_batch("roi_align", xa, ra)
        ids = roi_batch_ids("roi_align", rois, len(xa), offsets=rois_lod)
        n, c, h, w = xa.shape
        out = np.zeros((len(ra), c, pooled_height, pooled_width), xa.dtype)
        for r, (roi, b) in enumerate(zip(ra, ids)):
            wy, wx, count = _align_matrices(roi, spatial_scale, pooled_height, pooled_width,
                                            sampling_ratio, h, w, xa.dtype)
            out[r] = np.einsum("ph,chw,qw->cpq", wy, xa[b], wx) / count
        return LoDTensor(out)

    @staticmethod
    def grad(g):
        g.op("roi_align_grad", {"X": g.input("X"), "ROIs": g.input("ROIs"),
                                "RoisLod": g.input("RoisLod"), "Out@GRAD": g.output_grad("Out")},
             {"X@GRAD": g.input_grad("X")}, g.attrs())


def _align_matrices(roi, scale, ph, pw, sampling_ratio, h, w, dtype):
    x1, y1, bw, bh, gw, gh = _align_roi(roi, scale, ph, pw, sampling_ratio, dtype)
    return (_align_weights(y1, bh, ph, gh, h, dtype), _align_weights(x1, bw, pw, gw, w, dtype),
            dtype.type(gh * gw))


class RoiAlignGrad(_RoiGrad):
    type = "roi_align_grad"
    inputs = (In("X"), In("ROIs"), In("RoisLod", dispensable=True), In("Out@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True),)
    attrs = RoiAlign.attrs

    @staticmethod
    def kernel(x, rois, rois_lod, dout, *, spatial_scale, pooled_height, pooled_width,
               sampling_ratio):
        xa, ra, d = x._array, rois._array, np.asarray(dout._array)
        ids = roi_batch_ids("roi_align_grad", rois, len(xa), offsets=rois_lod)
        n, c, h, w = xa.shape
        dx = np.zeros(xa.shape, xa.dtype)
        for r, (roi, b) in enumerate(zip(ra, ids)):
            wy, wx, count = _align_matrices(roi, spatial_scale, pooled_height, pooled_width,
                                            sampling_ratio, h, w, xa.dtype)
            dx[b] += np.einsum("ph,cpq,qw->chw", wy, d[r], wx) / count
        return LoDTensor(dx)


# --- psroi_pool: position-sensitive average pooling (R-FCN) -----------------------------------
def _psroi_bins(roi, scale, ph, pw, h, w, dtype):
    """[ph, H] and [pw, W] 0/1 masks of each bin's rows and columns, and each bin's area."""
    t = dtype.type
    x1, y1 = (t(round_half_away(v)) * t(scale) for v in roi[:2])
    x2, y2 = (t(round_half_away(v) + 1.) * t(scale) for v in roi[2:])
    rh, rw = max(y2 - y1, t(0.1)), max(x2 - x1, t(0.1))
    bh, bw = rh / t(ph), rw / t(pw)

    def mask(start, size, pooled, extent):
        m = np.zeros((pooled, extent), dtype)
        for i in range(pooled):
            lo = min(max(int(np.floor(t(i) * size + start)), 0), extent)
            hi = min(max(int(np.ceil(t(i + 1) * size + start)), 0), extent)
            m[i, lo:hi] = 1
        return m
    my, mx = mask(y1, bh, ph, h), mask(x1, bw, pw, w)
    area = np.outer(my.sum(1), mx.sum(1))
    return my, mx, area


class PsroiPool(OpDef):
    type = "psroi_pool"
    inputs = (In("X"), In("ROIs", no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"output_channels": 1, "spatial_scale": 1.0, "pooled_height": 1, "pooled_width": 1}
    kind = "value"
    share_lod = None
    doc = ("Out[r, c, i, j] = mean of X[b(r), (c * pooled_height + i) * pooled_width + j] over "
           "bin (i, j) of box r (coordinates rounded before scaling; an empty bin gives 0). X "
           "has output_channels * pooled_height * pooled_width channels.")

    @staticmethod
    def infer_shape(ctx):
        c = ctx.input_shape("X")[1] if len(ctx.input_shape("X")) == 4 else -1
        oc, ph, pw = (ctx.attr(a) for a in ("output_channels", "pooled_height", "pooled_width"))
        if oc <= 0:
            ctx.fail(f"output_channels must be greater than 0, got {oc}")
        if c >= 0 and c != oc * ph * pw:
            ctx.fail(f"X has {c} channels; it must have output_channels * pooled_height * "
                     f"pooled_width = {oc} * {ph} * {pw}")
        _infer_roi(ctx, oc)

    @staticmethod
    def kernel(x, rois, *, output_channels, spatial_scale, pooled_height, pooled_width):
        xa, ra = x._array, rois._array
        _check_batch("psroi_pool", xa, ra)
        n, c, h, w = xa.shape
        if c != output_channels * pooled_height * pooled_width:
            raise ExecutionError(f"psroi_pool: X {list(xa.shape)} must have output_channels * "
                                 f"pooled_height * pooled_width channels")
        ids = roi_batch_ids("psroi_pool", rois, n)
        out = np.zeros((len(ra), output_channels, pooled_height, pooled_width), xa.dtype)
        for r, (roi, b) in enumerate(zip(ra, ids)):
            my, mx, area = _psroi_bins(roi, spatial_scale, pooled_height, pooled_width, h, w,
                                       xa.dtype)
            planes = xa[b].reshape(output_channels, pooled_height, pooled_width, h, w)
            s = np.einsum("ph,cpqhw,qw->cpq", my, planes, mx)
            out[r] = np.where(area > 0, s / np.maximum(area, 1), 0)
        return LoDTensor(out)

    @staticmethod
    def grad(g):
        g.op("psroi_pool_grad", {"X": g.input("X"), "ROIs": g.input("ROIs"),
                                 "Out@GRAD": g.output_grad("Out")},
             {"X@GRAD": g.input_grad("X")}, g.attrs())


class PsroiPoolGrad(_RoiGrad):
    type = "psroi_pool_grad"
    inputs = (In("X"), In("ROIs"), In("Out@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True),)
    attrs = PsroiPool.attrs

    @staticmethod
    def kernel(x, rois, dout, *, output_channels, spatial_scale, pooled_height, pooled_width):
        xa, ra, d = x._array, rois._array, np.asarray(dout._array)
        n, c, h, w = xa.shape
        ids = roi_batch_ids("psroi_pool_grad", rois, n)
        dx = np.zeros((n, output_channels, pooled_height, pooled_width, h, w), xa.dtype)
        for r, (roi, b) in enumerate(zip(ra, ids)):
            my, mx, area = _psroi_bins(roi, spatial_scale, pooled_height, pooled_width, h, w,
                                       xa.dtype)
            g = np.where(area > 0, d[r] / np.maximum(area, 1), 0)
            dx[b] += np.einsum("ph,cpq,qw->cpqhw", my, g, mx)
        return LoDTensor(dx.reshape(xa.shape))


# --- prroi_pool: the exact integral of the bilinear surface over each bin (PrRoI) -----------
def _tent_integral(t):
    """The integral from -inf to t of the tent max(0, 1 - |s|)."""
    t = np.clip(t, -1.0, 1.0)
    return np.where(t < 0, 0.5 * (t + 1) ** 2, 1 - 0.5 * (1 - t) ** 2)


def _tent(t):
    return np.maximum(0.0, 1.0 - np.abs(t))


def _prroi_windows(roi, scale, pooled):
    """Per axis: bin starts and ends, and the bin size, of one box (Paddle's clamp of a
    negative extent to 0)."""
    starts, sizes = [], []
    for lo, hi, p in ((roi[1], roi[3], pooled[0]), (roi[0], roi[2], pooled[1])):
        a, b = lo * scale, hi * scale
        size = max(b - a, 0.0) / p
        starts.append(a + np.arange(p) * size)
        sizes.append(size)
    return starts, sizes


class PrroiPool(OpDef):
    type = "prroi_pool"
    inputs = (In("X"), In("ROIs"), In("BatchRoINums", dispensable=True, no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"spatial_scale": 1.0, "pooled_height": 1, "pooled_width": 1}
    kind = "value"
    share_lod = None
    doc = ("Out[r, c, i, j] = the integral of X[b(r), c] interpolated bilinearly (0 outside "
           "X) over bin (i, j) of box r, divided by the bin's area (0 for an empty bin). "
           "Differentiable in X and in ROIs.")

    @staticmethod
    def infer_shape(ctx):
        _infer_roi(ctx, ctx.input_shape("X")[1])

    @staticmethod
    def kernel(x, rois, batch_roi_nums, *, spatial_scale, pooled_height, pooled_width):
        xa, ra = x._array, rois._array
        _check_batch("prroi_pool", xa, ra)
        ids = _prroi_ids("prroi_pool", rois, len(xa), batch_roi_nums)
        out = np.zeros((len(ra), xa.shape[1], pooled_height, pooled_width), xa.dtype)
        for r, (roi, b) in enumerate(zip(ra.astype(np.float64), ids)):
            ty, tx, win = _prroi_matrices(roi, spatial_scale, pooled_height, pooled_width,
                                          xa.shape[2], xa.shape[3])
            if win > 0:
                out[r] = np.einsum("ph,chw,qw->cpq", ty, xa[b], tx) / win
        return LoDTensor(out)

    @staticmethod
    def grad(g):
        g.op("prroi_pool_grad", {"X": g.input("X"), "ROIs": g.input("ROIs"),
                                 "BatchRoINums": g.input("BatchRoINums"), "Out": g.output("Out"),
                                 "Out@GRAD": g.output_grad("Out")},
             {"X@GRAD": g.input_grad("X"), "ROIs@GRAD": g.input_grad("ROIs")}, g.attrs())


def _prroi_ids(op, rois, n, batch_roi_nums):
    """Boxes per image from BatchRoINums when given (or when ROIs has no LoD), else the LoD."""
    if batch_roi_nums is None and not rois._lod:
        raise ExecutionError(f"{op}: ROIs has no LoD and BatchRoINums is not given: which "
                             f"image does each box belong to?")
    return roi_batch_ids(op, rois, n, counts=batch_roi_nums)


def _prroi_matrices(roi, scale, ph, pw, h, w):
    """[ph, H] and [pw, W] integrals of each row's and column's tent over each bin, and the
    bin area."""
    (ys, xs), (bh, bw) = _prroi_windows(roi, scale, (ph, pw))
    rows, cols = np.arange(h), np.arange(w)
    ty = _tent_integral(ys[:, None] + bh - rows) - _tent_integral(ys[:, None] - rows)
    tx = _tent_integral(xs[:, None] + bw - cols) - _tent_integral(xs[:, None] - cols)
    return ty, tx, max(bh * bw, 0.0)


class PrroiPoolGrad(_RoiGrad):
    type = "prroi_pool_grad"
    inputs = (In("X"), In("ROIs"), In("BatchRoINums", dispensable=True), In("Out"),
              In("Out@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True), Out("ROIs@GRAD", dispensable=True))
    attrs = PrroiPool.attrs

    @classmethod
    def prepare(cls, attrs, outputs):
        scale, ph, pw = attrs["spatial_scale"], attrs["pooled_height"], attrs["pooled_width"]
        # d(bin start)/d(box start) and d(bin end)/d(box start) per bin; the end's mirror it
        fy = (1 - np.arange(ph) / ph, 1 - np.arange(1, ph + 1) / ph)
        fx = (1 - np.arange(pw) / pw, 1 - np.arange(1, pw + 1) / pw)

        def kernel(x, rois, batch_roi_nums, out, dout):
            xa, ra = x._array, rois._array
            o, d = np.asarray(out._array, np.float64), np.asarray(dout._array, np.float64)
            n, c, h, w = xa.shape
            ids = _prroi_ids("prroi_pool_grad", rois, n, batch_roi_nums)
            dx = np.zeros(xa.shape, np.float64)
            droi = np.zeros(ra.shape, np.float64)
            rows, cols = np.arange(h), np.arange(w)
            for r, (roi, b) in enumerate(zip(ra.astype(np.float64), ids)):
                ty, tx, win = _prroi_matrices(roi, scale, ph, pw, h, w)
                if win <= 0:
                    continue
                dx[b] += np.einsum("ph,cpq,qw->chw", ty, d[r], tx) / win
                (ys, xs), (bh, bw) = _prroi_windows(roi, scale, (ph, pw))
                xb = xa[b].astype(np.float64)
                # integrals of X along the bins' four edges, per channel and bin
                at_y0 = np.einsum("ph,chw,qw->cpq", _tent(ys[:, None] - rows), xb, tx)
                at_y1 = np.einsum("ph,chw,qw->cpq", _tent(ys[:, None] + bh - rows), xb, tx)
                at_x0 = np.einsum("ph,chw,qw->cpq", ty, xb, _tent(xs[:, None] - cols))
                at_x1 = np.einsum("ph,chw,qw->cpq", ty, xb, _tent(xs[:, None] + bw - cols))
                # d out / d (bin start, bin end) along each axis
                p_x0, p_x1 = (-at_x0 + bh * o[r]) / win, (at_x1 - bh * o[r]) / win
                p_y0, p_y1 = (-at_y0 + bw * o[r]) / win, (at_y1 - bw * o[r]) / win
                gx1 = (p_x0 * fx[0] + p_x1 * fx[1]) * d[r]
                gx2 = (p_x0 * (1 - fx[0]) + p_x1 * (1 - fx[1])) * d[r]
                gy1 = (p_y0 * fy[0][:, None] + p_y1 * fy[1][:, None]) * d[r]
                gy2 = (p_y0 * (1 - fy[0])[:, None] + p_y1 * (1 - fy[1])[:, None]) * d[r]
                droi[r] = [gx1.sum() * scale, gy1.sum() * scale, gx2.sum() * scale,
                           gy2.sum() * scale]
            return (LoDTensor(dx.astype(xa.dtype)), LoDTensor(droi.astype(ra.dtype)))
        return kernel


# --- roi_perspective_transform (quadrilateral ROIs, EAST / text detection) -------------------
_EPS = 1e-4


def _gte(a, b):
    return a > b or abs(a - b) < _EPS


def _lte(a, b):
    return a < b or abs(a - b) < _EPS


def _in_quad(x, y, qx, qy):
    """Whether (x, y) lies in the quadrilateral (on its border within 1e-4 counts), Paddle's
    crossing test."""
    for i in range(4):
        xs, ys, xe, ye = qx[i], qy[i], qx[(i + 1) % 4], qy[(i + 1) % 4]
        if abs(ys - ye) < _EPS:
            if abs(y - ys) < _EPS and abs(y - ye) < _EPS and _gte(x, min(xs, xe)) and \
                    _lte(x, max(xs, xe)):
                return True
        elif abs((y - ys) * (xe - xs) / (ye - ys) + xs - x) < _EPS and \
                _gte(y, min(ys, ye)) and _lte(y, max(ys, ye)):
            return True
    crossings = 0
    for i in range(4):
        xs, ys, xe, ye = qx[i], qy[i], qx[(i + 1) % 4], qy[(i + 1) % 4]
        if abs(ys - ye) < _EPS or _lte(y, min(ys, ye)) or y - max(ys, ye) > _EPS:
            continue
        ix = (y - ys) * (xe - xs) / (ye - ys) + xs
        if abs(ix - x) < _EPS:
            return True
        if ix - x > _EPS:
            crossings += 1
    return crossings % 2 == 1


def perspective_matrix(th, tw, qx, qy):
    """The 3 x 3 matrix (row-major, 9 values) taking output (w, h, 1) to the quadrilateral,
    over a grid as wide as the quadrilateral's aspect allows (at most tw)."""
    x0, x1, x2, x3 = qx
    y0, y1, y2, y3 = qy
    side = [np.hypot(x0 - x1, y0 - y1), np.hypot(x1 - x2, y1 - y2),
            np.hypot(x2 - x3, y2 - y3), np.hypot(x3 - x0, y3 - y0)]
    est_h, est_w = (side[1] + side[3]) / 2, (side[0] + side[2]) / 2
    nh = max(2, th)
    nw = max(2, min(int(round_half_away(est_w * (nh - 1) / est_h)) + 1, tw))
    dx1, dx2, dx3 = x1 - x2, x3 - x2, x0 - x1 + x2 - x3
    dy1, dy2, dy3 = y1 - y2, y3 - y2, y0 - y1 + y2 - y3
    den = dx1 * dy2 - dx2 * dy1 + 1e-5
    m6 = (dx3 * dy2 - dx2 * dy3) / den / (nw - 1)
    m7 = (dx1 * dy3 - dx3 * dy1) / den / (nh - 1)
    return np.array([(x1 - x0 + m6 * (nw - 1) * x1) / (nw - 1),
                     (x3 - x0 + m7 * (nh - 1) * x3) / (nh - 1), x0,
                     (y1 - y0 + m6 * (nw - 1) * y1) / (nw - 1),
                     (y3 - y0 + m7 * (nh - 1) * y3) / (nh - 1), y0, m6, m7, 1.0])


def _perspective_taps(roi, scale, th, tw, h, w):
    """(matrix, mask [th, tw], taps): for each output position inside the quadrilateral and
    the map, its 4 bilinear taps as (flat input index, weight) lists."""
    qx, qy = [roi[2 * k] * scale for k in range(4)], [roi[2 * k + 1] * scale for k in range(4)]
    m = perspective_matrix(th, tw, qx, qy)
    mask = np.zeros((th, tw), np.int32)
    idx = np.zeros((th, tw, 4), np.int64)
    wt = np.zeros((th, tw, 4))
    for oh in range(th):
        for ow in range(tw):
            z = m[6] * ow + m[7] * oh + m[8]
            sx, sy = (m[0] * ow + m[1] * oh + m[2]) / z, (m[3] * ow + m[4] * oh + m[5]) / z
            if not _in_quad(sx, sy, qx, qy) or _gte(-0.5, sx) or _gte(sx, w - 0.5) or \
                    _gte(-0.5, sy) or _gte(sy, h - 0.5):
                continue
            sx, sy = (0.0 if _gte(0, sx) else sx), (0.0 if _gte(0, sy) else sy)
            x0, y0 = int(np.floor(sx)), int(np.floor(sy))
            if _gte(x0, w - 1):
                x0 = x1 = w - 1
                sx = float(x0)
            else:
                x1 = x0 + 1
            if _gte(y0, h - 1):
                y0 = y1 = h - 1
                sy = float(y0)
            else:
                y1 = y0 + 1
            fx, fy = sx - x0, sy - y0
            mask[oh, ow] = 1
            idx[oh, ow] = [y0 * w + x0, y1 * w + x0, y1 * w + x1, y0 * w + x1]
            wt[oh, ow] = [(1 - fx) * (1 - fy), (1 - fx) * fy, fx * fy, fx * (1 - fy)]
    return m, mask, idx, wt


class RoiPerspectiveTransform(OpDef):
    type = "roi_perspective_transform"
    inputs = (In("X"), In("ROIs", no_grad=True))
    outputs = (Out("Out"), Out("Mask"), Out("TransformMatrix"),
               Out("Out2InIdx", intermediate=True), Out("Out2InWeights", intermediate=True))
    attrs = {"spatial_scale": 1.0, "transformed_height": 1, "transformed_width": 1}
    kind = "value"
    share_lod = None
    doc = ("Each quadrilateral ROI (x1, y1, ..., x4, y4, clockwise from the top left) of "
           "image b warped to transformed_height x transformed_width by a perspective "
           "transform and bilinear sampling of X [N, C, H, W]; Out [R, C, th, tw], Mask [R, "
           "1, th, tw] (1 where the sample lies in the ROI and the map), TransformMatrix "
           "[R, 9].")

    @staticmethod
    def infer_shape(ctx):
        xs, rs = ctx.input_shape("X"), ctx.input_shape("ROIs")
        if len(xs) != 4:
            ctx.fail(f"X must be 4-D [N, C, H, W], got {xs}")
        if len(rs) != 2 or rs[1] not in (8, -1):
            ctx.fail(f"ROIs must be [num_rois, 8] (four corners), got {rs}")
        th, tw = ctx.attr("transformed_height"), ctx.attr("transformed_width")
        if th <= 0 or tw <= 0 or ctx.attr("spatial_scale") <= 0:
            ctx.fail(f"transformed_height {th}, transformed_width {tw} and spatial_scale must "
                     f"be greater than 0")
        out = [rs[0], xs[1], th, tw]
        ctx.set_output("Out", out, ctx.input_dtype("X"), 0)
        ctx.set_output("Mask", [rs[0], 1, th, tw], "int32", 0)
        ctx.set_output("TransformMatrix", [rs[0], 9], ctx.input_dtype("X"), 0)
        if ctx.has_output("Out2InIdx"):
            ctx.set_output("Out2InIdx", out, "int32", 0)
        if ctx.has_output("Out2InWeights"):
            ctx.set_output("Out2InWeights", out, ctx.input_dtype("X"), 0)

    @staticmethod
    def kernel(x, rois, *, spatial_scale, transformed_height, transformed_width):
        xa, ra = x._array, rois._array
        if ra.ndim != 2 or ra.shape[1] != 8:
            raise ExecutionError(f"roi_perspective_transform: ROIs must be [R, 8], got "
                                 f"{list(ra.shape)}")
        n, c, h, w = xa.shape
        th, tw = transformed_height, transformed_width
        ids = roi_batch_ids("roi_perspective_transform", rois, n)
        out = np.zeros((len(ra), c, th, tw), xa.dtype)
        mask = np.zeros((len(ra), 1, th, tw), np.int32)
        mats = np.zeros((len(ra), 9), xa.dtype)
        for r, (roi, b) in enumerate(zip(ra.astype(np.float64), ids)):
            m, mk, idx, wt = _perspective_taps(roi, spatial_scale, th, tw, h, w)
            plane = xa[b].reshape(c, -1)
            out[r] = (plane[:, idx] * wt).sum(-1) * mk
            mask[r, 0], mats[r] = mk, m
        # Paddle's CPU kernel leaves these two to its CUDA gradient; they carry no values here
        return (LoDTensor(out), LoDTensor(mask), LoDTensor(mats),
                LoDTensor(np.broadcast_to(np.zeros((), np.int32), out.shape)),
                LoDTensor(np.broadcast_to(np.zeros((), xa.dtype), out.shape)))

    @staticmethod
    def grad(g):
        g.op("roi_perspective_transform_grad",
             {"X": g.input("X"), "ROIs": g.input("ROIs"), "Out2InIdx": g.output("Out2InIdx"),
              "Out2InWeights": g.output("Out2InWeights"), "Out@GRAD": g.output_grad("Out")},
             {"X@GRAD": g.input_grad("X")}, g.attrs())


class RoiPerspectiveTransformGrad(_RoiGrad):
    type = "roi_perspective_transform_grad"
    inputs = (In("X"), In("ROIs"), In("Out2InIdx", dispensable=True),
              In("Out2InWeights", dispensable=True), In("Out@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True),)
    attrs = RoiPerspectiveTransform.attrs

    @staticmethod
    def kernel(x, rois, _idx, _weights, dout, *, spatial_scale, transformed_height,
               transformed_width):
        xa, ra, d = x._array, rois._array, np.asarray(dout._array)
        n, c, h, w = xa.shape
        ids = roi_batch_ids("roi_perspective_transform_grad", rois, n)
        dx = np.zeros((n, c, h * w))
        for r, (roi, b) in enumerate(zip(ra.astype(np.float64), ids)):
            _, mk, idx, wt = _perspective_taps(roi, spatial_scale, transformed_height,
                                               transformed_width, h, w)
            contrib = d[r][:, :, :, None] * (wt * mk[..., None])[None]      # [C, th, tw, 4]
            for ch in range(c):
                dx[b, ch] += np.bincount(idx.ravel(), weights=contrib[ch].ravel(),
                                         minlength=h * w)
        return LoDTensor(dx.reshape(xa.shape).astype(xa.dtype))
