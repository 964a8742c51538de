"""Pooling ops of Fluid 1.x outside pool2d: spp (spatial pyramid pooling, He et al. 2014:
level l pools the map into 2^l x 2^l bins, every level flattened and concatenated) and unpool
(max unpooling: each value written back at the position max pooling took it from), with
their gradients, as Fluid 1.8 computes them.

spp's level l uses pool2d's window rule with kernel = stride = ceil(H / 2^l) and padding
(kernel * 2^l - H + 1) / 2: a window is clipped to the map, max ignores what lies outside,
avg divides by the cells inside (exclusive). A window wholly outside the map (a map smaller
than its level's bins) gives max's lowest float, as Fluid's kernel, and avg 0."""
import numpy as np

from ..errors import ShapeError
from .registry import In, OpDef, Out, ints


def level_geometry(h, bins):
    """(kernel = stride, padding before) of a level of `bins` bins over an extent `h`
    (public: the code generator lays its windows out by it)."""
    k = -(-h // bins)
    return k, (k * bins - h + 1) // 2


def _windows(x, bins, fill):
    """x [N, C, H, W] padded into [N, C, bins, kh, bins, kw] windows, and the per-cell mask
    of real (not padded) cells [bins, kh, bins, kw]."""
    n, c, h, w = x.shape
    (kh, ph), (kw, pw) = level_geometry(h, bins), level_geometry(w, bins)
    full = np.full((n, c, bins * kh, bins * kw), fill, x.dtype)
    hh, ww = min(h, bins * kh - ph), min(w, bins * kw - pw)
    full[:, :, ph:ph + hh, pw:pw + ww] = x[:, :, :hh, :ww]
    mask = np.zeros((bins * kh, bins * kw), bool)
    mask[ph:ph + hh, pw:pw + ww] = True
    return (full.reshape(n, c, bins, kh, bins, kw), mask.reshape(bins, kh, bins, kw),
            (kh, ph, kw, pw, hh, ww))


def _check_spp(x, height):
    if x.ndim != 4:
        raise ShapeError(f"spp: X must be 4-D NCHW, got {list(x.shape)}")
    if height < 1:
        raise ShapeError(f"spp: pyramid_height must be at least 1, got {height}")


def _spp_level(x, bins, pooling_type):
    n, c = x.shape[:2]
    if pooling_type == "max":
        lowest = np.finfo(x.dtype).min if x.dtype.kind == "f" else np.iinfo(x.dtype).min
        win, _, _ = _windows(x, bins, lowest)
        out = win.max(axis=(3, 5))
    else:
        win, mask, _ = _windows(x, bins, 0)
        count = mask.sum(axis=(1, 3))
        out = win.sum(axis=(3, 5)) / np.maximum(count, 1)
    return out.reshape(n, c * bins * bins).astype(x.dtype)


class Spp(OpDef):
    type = "spp"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    attrs = {"pyramid_height": 0, "pooling_type": "max"}
    share_lod = None
    nonempty_inputs = ("X",)
    doc = ("Out [N, C * (4^pyramid_height - 1) / 3]: for l in 0..pyramid_height-1, X pooled "
           "(max or avg) into 2^l x 2^l bins, flattened per sample (channel-major), "
           "concatenated.")

    @staticmethod
    def infer_shape(ctx):
        xs = list(ctx.input_shape("X"))
        if len(xs) != 4:
            ctx.fail(f"X must be 4-D NCHW, got {xs}")
        if ctx.attr("pooling_type") not in ("max", "avg"):
            ctx.fail(f"pooling_type must be 'max' or 'avg', got {ctx.attr('pooling_type')!r}")
        height = ctx.attr("pyramid_height")
        width = (4 ** height - 1) // 3 * xs[1] if xs[1] >= 0 else -1
        ctx.set_output("Out", [xs[0], width], ctx.input_dtype("X"))

    @staticmethod
    def kernel(x, *, pyramid_height, pooling_type):
        _check_spp(x, pyramid_height)
        return np.concatenate([_spp_level(x, 2 ** l, pooling_type)
                               for l in range(pyramid_height)], axis=1)

    @staticmethod
    def grad(g):
        g.op("spp_grad", {"X": g.input("X"), "Out": g.output("Out"),
                          "Out@GRAD": g.output_grad("Out")},
             {"X@GRAD": g.input_grad("X")}, g.attrs())


class SppGrad(OpDef):
    type = "spp_grad"
    inputs = (In("X"), In("Out"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = Spp.attrs
    infer_shape = None
    share_lod = None

    @staticmethod
    def kernel(x, out, dout, *, pyramid_height, pooling_type):
        _check_spp(x, pyramid_height)
        n, c, h, w = x.shape
        dx = np.zeros(x.shape, np.float64)
        at = 0
        for l in range(pyramid_height):
            bins = 2 ** l
            d = dout[:, at:at + c * bins * bins].reshape(n, c, bins, 1, bins, 1)
            at += c * bins * bins
            if pooling_type == "max":
                lowest = np.finfo(x.dtype).min
                win, mask, geo = _windows(x, bins, lowest)
                kh, kw = win.shape[3], win.shape[5]
                flat = win.transpose(0, 1, 2, 4, 3, 5).reshape(n, c, bins, bins, kh * kw)
                first = np.argmax(flat, axis=-1)[..., None]
                onehot = np.zeros(flat.shape, bool)
                np.put_along_axis(onehot, first, True, axis=-1)
                onehot = onehot.reshape(n, c, bins, bins, kh, kw).transpose(0, 1, 2, 4, 3, 5)
                onehot &= mask        # a window wholly padded routes nothing
                gw = onehot * d
            else:
                win, mask, geo = _windows(x, bins, 0)
                count = np.maximum(mask.sum(axis=(1, 3)), 1).reshape(bins, 1, bins, 1)
                gw = mask * (d / count)
            kh, ph, kw, pw, hh, ww = geo
            gw = gw.reshape(n, c, bins * kh, bins * kw)
            dx[:, :, :hh, :ww] += gw[:, :, ph:ph + hh, pw:pw + ww]
        return dx.astype(x.dtype)


def _unpool_size(size, k, p, s):
    return (size - 1) * s - 2 * p + k if size >= 0 else -1


class Unpool(OpDef):
    type = "unpool"
    inputs = (In("X"), In("Indices", no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"ksize": ints(), "strides": ints([1, 1]), "paddings": ints([0, 0]),
             "unpooling_type": "max"}
    share_lod = None
    doc = ("Out [N, C, (H - 1) * strides[0] - 2 * paddings[0] + ksize[0], (W - 1) * "
           "strides[1] - 2 * paddings[1] + ksize[1]], zeros but Out[n, c].flat[Indices[n, c, "
           "h, w]] = X[n, c, h, w] (Indices: max pooling's flat positions, int32).")

    @staticmethod
    def infer_shape(ctx):
        xs, ids = list(ctx.input_shape("X")), list(ctx.input_shape("Indices"))
        if len(xs) != 4:
            ctx.fail(f"X must be 4-D NCHW, got {xs}")
        if all(d >= 0 for d in xs + ids) and xs != ids:
            ctx.fail(f"Indices{ids} must have X's shape {xs}")
        if ctx.attr("unpooling_type") != "max":
            ctx.fail(f"unpooling_type must be 'max', got {ctx.attr('unpooling_type')!r}")
        k, s, p = ctx.attr("ksize"), ctx.attr("strides"), ctx.attr("paddings")
        if len(k) != 2 or len(s) != 2 or len(p) != 2:
            ctx.fail(f"ksize, strides and paddings must each hold 2 ints, got {k}, {s}, {p}")
        ctx.set_output("Out", xs[:2] + [_unpool_size(xs[2 + i], k[i], p[i], s[i])
                                        for i in range(2)], ctx.input_dtype("X"))

    @staticmethod
    def _flat(x, ind, ksize, strides, paddings):
        if x.ndim != 4 or ind.shape != x.shape:
            raise ShapeError(f"unpool: X{list(x.shape)} must be 4-D and Indices"
                             f"{list(ind.shape)} of its shape")
        oh, ow = (_unpool_size(x.shape[2 + i], ksize[i], paddings[i], strides[i])
                  for i in range(2))
        flat = ind.reshape(x.shape[0] * x.shape[1], -1).astype(np.int64)
        bad = flat[(flat < 0) | (flat >= oh * ow)]
        if bad.size:
            raise ShapeError(f"unpool: index {bad[0]} is outside the {oh}x{ow} output")
        return oh, ow, flat

    @staticmethod
    def kernel(x, indices, *, ksize, strides, paddings):
        oh, ow, flat = Unpool._flat(x, indices, ksize, strides, paddings)
        n, c = x.shape[:2]
        out = np.zeros((n * c, oh * ow), x.dtype)
        np.put_along_axis(out, flat, x.reshape(n * c, -1), axis=1)
        return out.reshape(n, c, oh, ow)

    @staticmethod
    def grad(g):
        g.op("unpool_grad", {"X": g.input("X"), "Indices": g.input("Indices"),
                             "Out": g.output("Out"), "Out@GRAD": g.output_grad("Out")},
             {"X@GRAD": g.input_grad("X")}, g.attrs())


class UnpoolGrad(OpDef):
    type = "unpool_grad"
    inputs = (In("X"), In("Indices"), In("Out"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = Unpool.attrs
    infer_shape = None
    share_lod = None

    @staticmethod
    def kernel(x, indices, out, dout, *, ksize, strides, paddings):
        oh, ow, flat = Unpool._flat(x, indices, ksize, strides, paddings)
        n, c = x.shape[:2]
        d = np.take_along_axis(dout.reshape(n * c, -1), flat, axis=1)
        return d.reshape(x.shape).astype(x.dtype)
