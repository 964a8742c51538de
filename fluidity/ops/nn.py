"""Training layers' ops: conv2d / depthwise_conv2d, pool2d, batch_norm, layer_norm, dropout.

Kernels are vectorized numpy:

* conv: im2col as a strided *view* of the padded input, copied once into a
  [groups, C/g*kh*kw, N*oh*ow] matrix and multiplied by the filter in one batched matmul;
  the input gradient scatters the column gradient back with one slice-add per kernel tap.
* pool: average pooling is separable, out = A_h @ X @ A_w^T with 0/1 window matrices (this
  covers padding, ceil_mode, exclusive and adaptive windows alike); max pooling takes one
  kernel tap at a time through per-axis index tables and routes gradients back with one
  bincount.
"""
import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..errors import ShapeError
from .registry import In, OpDef, Out, ints

_COMMON_CONV_ATTRS = {"use_cudnn": False, "use_mkldnn": False, "use_quantizer": False,
                      "fuse_relu_before_depthwise_conv": False, "fuse_relu": False,
                      "fuse_residual_connection": False, "use_addto": False,
                      "workspace_size_MB": 512, "exhaustive_search": False}


# --- geometry ------------------------------------------------------------------------------
def _channel_last(fmt):
    return fmt in ("NHWC", "NDHWC")


def _pads4(paddings):
    """Paddle's paddings [ph, pw] or [top, bottom, left, right] -> [t, b, l, r]."""
    p = [int(v) for v in paddings]
    if len(p) == 2:
        return [p[0], p[0], p[1], p[1]]
    if len(p) == 4:
        return p
    raise ShapeError(f"paddings must have 2 or 4 values, got {p}")


def _resolve_padding(algo, in_hw, k_hw, strides, paddings, dilations=(1, 1)):
    """Paddle's UpdatePaddingAndDilation: (pads [t, b, l, r], dilations) for EXPLICIT, SAME
    (out = ceil(in / stride), dilation 1) or VALID (no padding)."""
    if algo == "SAME":
        pads = []
        for n, k, s in zip(in_hw, k_hw, strides):
            if n < 0:
                pads += [0, 0]
                continue
            out = (n + s - 1) // s
            total = max((out - 1) * s + k - n, 0)
            pads += [total // 2, total - total // 2]
        return pads, [1, 1]
    if algo == "VALID":
        return [0, 0, 0, 0], list(dilations)
    return _pads4(paddings), list(dilations)


def _out_size(n, k, s, p0, p1, d=1, ceil_mode=False):
    if n < 0:
        return -1
    span = n + p0 + p1 - (d * (k - 1) + 1)
    return (span + (s - 1 if ceil_mode else 0)) // s + 1


# --- conv2d ----------------------------------------------------------------------------------
def _conv_geometry(attrs, x_hw, k_hw):
    strides = [int(s) for s in attrs["strides"]]
    pads, dil = _resolve_padding(attrs["padding_algorithm"], x_hw, k_hw, strides,
                                 attrs["paddings"], attrs["dilations"])
    out = [_out_size(x_hw[i], k_hw[i], strides[i], pads[2 * i], pads[2 * i + 1], dil[i])
           for i in range(2)]
    return strides, pads, dil, out


def _im2col(x, kh, kw, oh, ow, strides, pads, dil, groups):
    """Columns [G, C/G*kh*kw, N*oh*ow] of NCHW `x`: a strided view of the padded input laid
    out [C, N, H, W] (so the one copy reads whole rows), reshaped."""
    n, c = x.shape[:2]
    t, b, l, r = pads
    xp = np.ascontiguousarray(x.transpose(1, 0, 2, 3))
    if any(pads):
        xp = np.pad(xp, ((0, 0), (0, 0), (t, b), (l, r)))
    sc, sn, sh, sw = xp.strides
    win = as_strided(xp, (c, kh, kw, n, oh, ow),
                     (sc, sh * dil[0], sw * dil[1], sn, sh * strides[0], sw * strides[1]),
                     writeable=False)
    return win.reshape(groups, -1, n * oh * ow)


def _conv_shape_error(xs, fs, groups):
    """What is wrong with NCHW Input shape `xs` and Filter shape `fs` (None if nothing)."""
    if len(xs) != 4 or len(fs) != 4:
        return f"Input {list(xs)} and Filter {list(fs)} must both be 4-D"
    if groups < 1:
        return f"groups must be >= 1, got {groups}"
    if xs[1] >= 0 and fs[1] >= 0 and xs[1] != fs[1] * groups:
        return (f"Input {list(xs)} has {xs[1]} channels but Filter {list(fs)} with "
                f"groups={groups} expects {fs[1] * groups}")
    if fs[0] >= 0 and fs[0] % groups:
        return f"Filter {list(fs)} has {fs[0]} output channels, not divisible by groups={groups}"
    return None


class Conv2D(OpDef):
    type = "conv2d"
    inputs = (In("Input"), In("Filter"), In("Bias", dispensable=True),
              In("ResidualData", dispensable=True, no_grad=True))
    outputs = (Out("Output"),)
    attrs = {"strides": ints([1, 1]), "paddings": ints([0, 0]), "padding_algorithm": "EXPLICIT",
             "groups": 1, "dilations": ints([1, 1]), "data_format": "NCHW",
             **_COMMON_CONV_ATTRS}
    share_lod = None
    version = 1
    doc = ("Output = conv(Input, Filter) (+ Bias per output channel). Input NCHW (or NHWC by "
           "data_format), Filter [M, C/groups, kh, kw].")

    @staticmethod
    def infer_shape(ctx):
        xs, fs = ctx.input_shape("Input"), ctx.input_shape("Filter")
        last = _channel_last(ctx.attr("data_format"))
        nchw = [xs[0], xs[3], xs[1], xs[2]] if last and len(xs) == 4 else xs
        err = _conv_shape_error(nchw, fs, ctx.attr("groups"))
        if err:
            ctx.fail(err)
        _, _, _, (oh, ow) = _conv_geometry({k: ctx.attr(k) for k in (
            "strides", "padding_algorithm", "paddings", "dilations")}, nchw[2:], fs[2:])
        if (nchw[2] >= 0 and oh <= 0) or (nchw[3] >= 0 and ow <= 0):
            ctx.fail(f"output size {[oh, ow]} is not positive")
        out = [nchw[0], oh, ow, fs[0]] if last else [nchw[0], fs[0], oh, ow]
        ctx.set_output("Output", out, ctx.input_dtype("Input"))

    @classmethod
    def prepare(cls, attrs, outputs):
        groups, last, name = attrs["groups"], _channel_last(attrs["data_format"]), cls.type

        def kernel(x, w, bias, residual):
            if last:
                x = x.transpose(0, 3, 1, 2)
            err = _conv_shape_error(x.shape, w.shape, groups)
            if err:
                raise ShapeError(f"{name}: {err}")
            n = x.shape[0]
            m, _, kh, kw = w.shape
            strides, pads, dil, (oh, ow) = _conv_geometry(attrs, x.shape[2:], (kh, kw))
            cols = _im2col(x, kh, kw, oh, ow, strides, pads, dil, groups)
            out = np.matmul(w.reshape(groups, m // groups, -1), cols)   # [G, M/G, N*oh*ow]
            out = out.reshape(m, n, oh, ow).transpose(1, 0, 2, 3)
            if bias is not None:
                out = out + bias.reshape(1, m, 1, 1)
            if residual is not None:
                out = out + (residual.transpose(0, 3, 1, 2) if last else residual)
            if last:
                out = out.transpose(0, 2, 3, 1)
            return np.ascontiguousarray(out, dtype=x.dtype)
        return kernel


class DepthwiseConv2D(Conv2D):
    type = "depthwise_conv2d"
    doc = "conv2d with groups == input channels (same kernel)."


class Conv2DGrad(OpDef):
    type = "conv2d_grad"
    inputs = (In("Input"), In("Filter"), In("Bias", dispensable=True), In("Output@GRAD"))
    outputs = (Out("Input@GRAD", dispensable=True), Out("Filter@GRAD", dispensable=True),
               Out("Bias@GRAD", dispensable=True))
    attrs = Conv2D.attrs
    share_lod = None
    infer_shape = None

    @classmethod
    def prepare(cls, attrs, outputs):
        groups, last = attrs["groups"], _channel_last(attrs["data_format"])
        want_x, want_w = "Input@GRAD" in outputs, "Filter@GRAD" in outputs

        def kernel(x, w, bias, dout):
            if last:
                x, dout = x.transpose(0, 3, 1, 2), dout.transpose(0, 3, 1, 2)
            n, c, h, wd = x.shape
            m, cg, kh, kw = w.shape
            strides, pads, dil, (oh, ow) = _conv_geometry(attrs, (h, wd), (kh, kw))
            d = dout.transpose(1, 0, 2, 3).reshape(groups, m // groups, n * oh * ow)
            dx = dw = db = None
            if want_w:
                cols = _im2col(x, kh, kw, oh, ow, strides, pads, dil, groups)
                dw = np.matmul(d, cols.transpose(0, 2, 1)).reshape(w.shape).astype(w.dtype)
            if want_x:
                dcols = np.matmul(w.reshape(groups, m // groups, -1).transpose(0, 2, 1), d)
                dcols = dcols.reshape(c, kh, kw, n, oh, ow)
                t, b, l, r = pads
                dxp = np.zeros((c, n, h + t + b, wd + l + r), dtype=x.dtype)   # [C, N, H, W]
                for i in range(kh):          # col2im: one strided slice-add per kernel tap
                    for j in range(kw):
                        hi, wj = i * dil[0], j * dil[1]
                        dxp[:, :, hi:hi + strides[0] * (oh - 1) + 1:strides[0],
                            wj:wj + strides[1] * (ow - 1) + 1:strides[1]] += dcols[:, i, j]
                dx = dxp[:, :, t:t + h, l:l + wd]
                dx = np.ascontiguousarray(dx.transpose(1, 2, 3, 0) if last else
                                          dx.transpose(1, 0, 2, 3))
            if bias is not None:
                db = dout.sum(axis=(0, 2, 3)).astype(bias.dtype)
            return dx, dw, db
        return kernel


class DepthwiseConv2DGrad(Conv2DGrad):
    type = "depthwise_conv2d_grad"


def _conv_grad(g):
    ins = {"Input": g.input("Input"), "Filter": g.input("Filter"),
           "Output@GRAD": g.output_grad("Output")}
    outs = {"Input@GRAD": g.input_grad("Input"), "Filter@GRAD": g.input_grad("Filter")}
    if g.input("Bias"):
        ins["Bias"] = g.input("Bias")
        outs["Bias@GRAD"] = g.input_grad("Bias")
    g.op(g.fwd.type + "_grad", ins, outs, g.attrs())


Conv2D.grad = DepthwiseConv2D.grad = staticmethod(_conv_grad)


# --- pool2d ----------------------------------------------------------------------------------
def _pool_windows(attrs, h, w):
    """Per spatial axis: (index table [out, k], valid mask [out, k]) of the input positions
    each output window covers (clipped; invalid = padding or outside an adaptive cell)."""
    ksize, strides = list(attrs["ksize"]), [int(s) for s in attrs["strides"]]
    adaptive = attrs["adaptive"]
    if attrs["global_pooling"]:
        ksize, pads, adaptive = [h, w], [0, 0, 0, 0], False
    elif adaptive:
        pads = [0, 0, 0, 0]
    else:
        pads, _ = _resolve_padding(attrs["padding_algorithm"], (h, w), ksize, strides,
                                   attrs["paddings"])
    tables = []
    for i, n in enumerate((h, w)):
        if adaptive:
            o = np.arange(ksize[i])
            start, end = (o * n) // ksize[i], -((-(o + 1) * n) // ksize[i])
            idx = start[:, None] + np.arange(int((end - start).max()))
            valid = idx < end[:, None]
        else:
            out = _out_size(n, ksize[i], strides[i], pads[2 * i], pads[2 * i + 1],
                            ceil_mode=attrs["ceil_mode"])
            idx = np.arange(out)[:, None] * strides[i] - pads[2 * i] + np.arange(ksize[i])
            valid = (idx >= 0) & (idx < n)
        tables.append((np.clip(idx, 0, n - 1), valid))
    return tables, ksize, adaptive


def _pool_out_shape(attrs, h, w):
    if attrs["global_pooling"]:
        return [1, 1]
    if attrs["adaptive"]:
        return list(attrs["ksize"])
    ksize, strides = list(attrs["ksize"]), [int(s) for s in attrs["strides"]]
    pads, _ = _resolve_padding(attrs["padding_algorithm"], (h, w), ksize, strides,
                               attrs["paddings"])
    return [_out_size(n, ksize[i], strides[i], pads[2 * i], pads[2 * i + 1],
                      ceil_mode=attrs["ceil_mode"]) for i, n in enumerate((h, w))]


def _window_matrix(idx, valid, n, dtype):
    """0/1 matrix [out, n]: row o marks the input positions of window o."""
    a = np.zeros((idx.shape[0], n), dtype=dtype)
    rows = np.broadcast_to(np.arange(idx.shape[0])[:, None], idx.shape)
    a[rows[valid], idx[valid]] = 1
    return a


def _avg_parts(attrs, x_shape, dtype):
    h, w = x_shape[2:]
    ((ih, vh), (iw, vw)), ksize, adaptive = _pool_windows(attrs, h, w)
    ah, aw = _window_matrix(ih, vh, h, dtype), _window_matrix(iw, vw, w, dtype)
    if attrs["exclusive"] or adaptive:
        div = np.maximum(np.outer(vh.sum(1), vw.sum(1)), 1).astype(dtype)   # 0 if all padding
    else:
        div = dtype.type(ksize[0] * ksize[1])
    return ah, aw, div


def _max_pool(attrs, x, with_index=False):
    """Max over each window, one kernel tap at a time: (out, None) or, with_index,
    (out, flat index into x of each window's first maximum) for the gradient."""
    n, c, h, w = x.shape
    ((ih, vh), (iw, vw)), _, _ = _pool_windows(attrs, h, w)
    kw = iw.shape[1]
    best = tap = None
    for i in range(ih.shape[1]):
        rows = np.take(x, ih[:, i], axis=2)                      # N, C, oh, W
        for j in range(kw):
            v = np.take(rows, iw[:, j], axis=3)                  # N, C, oh, ow
            valid = vh[:, i, None] & vw[None, :, j]
            if not valid.all():
                v = np.where(valid, v, -np.inf).astype(x.dtype, copy=False)
            if best is None:
                best, tap = v, np.zeros(v.shape, np.intp) if with_index else None
            elif with_index:           # strictly greater: the first maximum wins, as in Paddle
                better = v > best
                best = np.where(better, v, best)
                tap[better] = i * kw + j
            else:
                best = np.maximum(best, v)
    if not with_index:
        return best, None
    rows = ih[np.arange(ih.shape[0])[:, None], tap // kw]       # N, C, oh, ow
    cols = iw[np.arange(iw.shape[0])[None, :], tap % kw]
    base = (np.arange(n * c) * (h * w)).reshape(n, c, 1, 1)
    return best, base + rows * w + cols


class Pool2D(OpDef):
    type = "pool2d"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    attrs = {"pooling_type": "max", "ksize": ints(), "global_pooling": False,
             "strides": ints([1, 1]), "paddings": ints([0, 0]), "exclusive": True,
             "adaptive": False, "use_cudnn": False, "ceil_mode": False, "use_mkldnn": False,
             "use_quantizer": False, "data_format": "NCHW", "is_test": False,
             "padding_algorithm": "EXPLICIT"}
    doc = ("Max or average pooling over ksize windows (padding, ceil_mode, exclusive "
           "averaging, global and adaptive pooling as in Paddle).")

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        if len(xs) != 4:
            ctx.fail(f"X must be 4-D, got {xs}")
        attrs = {k: ctx.attr(k) for k in Pool2D.attrs}
        if attrs["pooling_type"] not in ("max", "avg"):
            ctx.fail(f"pooling_type must be 'max' or 'avg', got {attrs['pooling_type']!r}")
        if not attrs["global_pooling"] and len(attrs["ksize"]) != 2:
            ctx.fail(f"ksize must have 2 values, got {attrs['ksize']}")
        last = _channel_last(attrs["data_format"])
        n, c, h, w = (xs[0], xs[3], xs[1], xs[2]) if last else xs
        oh, ow = _pool_out_shape(attrs, h, w)
        if (h >= 0 and oh <= 0) or (w >= 0 and ow <= 0):
            ctx.fail(f"output size {[oh, ow]} is not positive")
        ctx.set_output("Out", [n, oh, ow, c] if last else [n, c, oh, ow],
                       ctx.input_dtype("X"), ctx.input_lod_level("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        last, is_max = _channel_last(attrs["data_format"]), attrs["pooling_type"] == "max"

        def kernel(x):
            if last:
                x = x.transpose(0, 3, 1, 2)
            if is_max:
                out = _max_pool(attrs, x)[0]
            else:
                ah, aw, div = _avg_parts(attrs, x.shape, x.dtype)
                out = np.matmul(np.matmul(ah, x), aw.T) / div
            if last:
                out = out.transpose(0, 2, 3, 1)
            return np.ascontiguousarray(out, dtype=x.dtype)
        return kernel


class Pool2DGrad(OpDef):
    type = "pool2d_grad"
    inputs = (In("X"), In("Out"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = Pool2D.attrs
    infer_shape = None

    @classmethod
    def prepare(cls, attrs, outputs):
        last, is_max = _channel_last(attrs["data_format"]), attrs["pooling_type"] == "max"

        def kernel(x, out, dout):
            if last:
                x, dout = x.transpose(0, 3, 1, 2), dout.transpose(0, 3, 1, 2)
            n, c, h, w = x.shape
            if is_max:   # the gradient goes to the first maximum of each window
                flat = _max_pool(attrs, x, with_index=True)[1].ravel()
                dx = np.bincount(flat, weights=dout.ravel(), minlength=n * c * h * w)
                dx = dx.reshape(n, c, h, w)
            else:
                ah, aw, div = _avg_parts(attrs, x.shape, x.dtype)
                dx = np.matmul(np.matmul(ah.T, dout / div), aw)
            if last:
                dx = dx.transpose(0, 2, 3, 1)
            return np.ascontiguousarray(dx, dtype=x.dtype)
        return kernel


Pool2D.grad = staticmethod(lambda g: g.default())


# --- batch_norm ------------------------------------------------------------------------------
def _bn_axes(x, layout):
    """(reduction axes, broadcast shape of a per-channel vector) for NCHW / NHWC."""
    c_axis = x.ndim - 1 if _channel_last(layout) else 1
    shape = [1] * x.ndim
    shape[c_axis] = x.shape[c_axis]
    return tuple(i for i in range(x.ndim) if i != c_axis), shape


def _bn_global_stats(attrs):
    """Paddle's rule: running statistics are used in test mode (unless trainable_statistics)
    or when use_global_stats is set."""
    return (attrs["is_test"] and not attrs["trainable_statistics"]) or attrs["use_global_stats"]


class BatchNorm(OpDef):
    type = "batch_norm"
    inputs = (In("X"), In("Scale"), In("Bias"), In("Mean", no_grad=True),
              In("Variance", no_grad=True), In("MomentumTensor", dispensable=True, no_grad=True))
    outputs = (Out("Y"), Out("MeanOut"), Out("VarianceOut"),
               Out("SavedMean", intermediate=True), Out("SavedVariance", intermediate=True),
               Out("ReserveSpace", dispensable=True))
    attrs = {"is_test": False, "momentum": 0.9, "epsilon": 1e-5, "data_layout": "NCHW",
             "use_mkldnn": False, "fuse_with_relu": False, "use_global_stats": False,
             "trainable_statistics": False}
    doc = ("Y = (X - mean) / sqrt(var + epsilon) * Scale + Bias per channel. Training: batch "
           "statistics, and MeanOut/VarianceOut (the same variables as Mean/Variance) become "
           "momentum * running + (1 - momentum) * batch. Test: running statistics. "
           "SavedVariance holds 1/sqrt(var + epsilon).")

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        if not 2 <= len(xs) <= 5:
            ctx.fail(f"X must have 2 to 5 dims, got {xs}")
        c = xs[-1] if _channel_last(ctx.attr("data_layout")) else xs[1]
        for slot in ("Scale", "Bias", "Mean", "Variance"):
            s = ctx.input_shape(slot)
            if c >= 0 and s and s[0] >= 0 and s != [c]:
                ctx.fail(f"{slot} must have shape [{c}] (the channels of X), got {s}")
        ctx.set_output("Y", xs, ctx.input_dtype("X"), ctx.input_lod_level("X"))
        for slot in ("MeanOut", "VarianceOut", "SavedMean", "SavedVariance"):
            if ctx.has_output(slot):
                ctx.set_output(slot, [c], ctx.input_dtype("Mean"))

    @classmethod
    def prepare(cls, attrs, outputs):
        eps, layout = attrs["epsilon"], attrs["data_layout"]
        global_stats = _bn_global_stats(attrs)

        def kernel(x, scale, bias, mean, var, momentum_t):
            axes, shape = _bn_axes(x, layout)
            if global_stats:
                m, v = mean, var
                new_mean, new_var = mean, var
            else:
                m = x.mean(axis=axes)
                v = np.square(x - m.reshape(shape)).mean(axis=axes)
                mom = attrs["momentum"] if momentum_t is None else float(
                    np.asarray(momentum_t).reshape(-1)[0])
                new_mean = (mean * mom + m * (1 - mom)).astype(mean.dtype, copy=False)
                new_var = (var * mom + v * (1 - mom)).astype(var.dtype, copy=False)
            inv_std = 1.0 / np.sqrt(v + eps)
            k = (scale * inv_std).reshape(shape)
            y = x * k + (bias - m * scale * inv_std).reshape(shape)
            return (y.astype(x.dtype, copy=False), new_mean, new_var,
                    m.astype(mean.dtype, copy=False), inv_std.astype(var.dtype, copy=False),
                    None)
        return kernel


class BatchNormGrad(OpDef):
    type = "batch_norm_grad"
    inputs = (In("X"), In("Scale"), In("Bias"), In("SavedMean"), In("SavedVariance"),
              In("Mean", dispensable=True), In("Variance", dispensable=True),
              In("ReserveSpace", dispensable=True), In("Y@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True), Out("Scale@GRAD", dispensable=True),
               Out("Bias@GRAD", dispensable=True))
    attrs = BatchNorm.attrs
    infer_shape = None

    @classmethod
    def prepare(cls, attrs, outputs):
        layout, global_stats = attrs["data_layout"], _bn_global_stats(attrs)

        def kernel(x, scale, bias, saved_mean, inv_std, mean, var, reserve, dy):
            axes, shape = _bn_axes(x, layout)
            xhat = (x - saved_mean.reshape(shape)) * inv_std.reshape(shape)
            dbias = dy.sum(axis=axes)
            dscale = (dy * xhat).sum(axis=axes)
            k = (scale * inv_std).reshape(shape)
            if global_stats:   # statistics are constants
                dx = dy * k
            else:
                cnt = x.size // scale.size
                dx = k * (dy - (dbias.reshape(shape) + xhat * dscale.reshape(shape)) / cnt)
            return (dx.astype(x.dtype, copy=False), dscale.astype(scale.dtype, copy=False),
                    dbias.astype(scale.dtype, copy=False))
        return kernel


def _batch_norm_grad(g):
    g.op("batch_norm_grad",
         {"X": g.input("X"), "Scale": g.input("Scale"), "Bias": g.input("Bias"),
          "SavedMean": g.output("SavedMean"), "SavedVariance": g.output("SavedVariance"),
          "Y@GRAD": g.output_grad("Y")},
         {"X@GRAD": g.input_grad("X"), "Scale@GRAD": g.input_grad("Scale"),
          "Bias@GRAD": g.input_grad("Bias")}, g.attrs())


BatchNorm.grad = staticmethod(_batch_norm_grad)


# --- layer_norm ------------------------------------------------------------------------------
def _prod(dims):
    out = 1
    for d in dims:
        if d < 0:
            return -1
        out *= d
    return out


class LayerNorm(OpDef):
    type = "layer_norm"
    inputs = (In("X"), In("Scale", dispensable=True), In("Bias", dispensable=True))
    outputs = (Out("Y"), Out("Mean", intermediate=True), Out("Variance", intermediate=True))
    attrs = {"epsilon": 1e-5, "begin_norm_axis": 1, "use_mkldnn": False}
    doc = ("Y = (X - mean) / sqrt(var + epsilon) * Scale + Bias, statistics over the dims from "
           "begin_norm_axis on (X seen as [left, right]); Mean/Variance are [left].")

    @staticmethod
    def infer_shape(ctx):
        xs, axis = ctx.input_shape("X"), ctx.attr("begin_norm_axis")
        if not 0 < axis < len(xs) + (len(xs) == 0):
            ctx.fail(f"begin_norm_axis={axis} must be in [1, {len(xs)})")
        right = _prod(xs[axis:])
        for slot in ("Scale", "Bias"):
            if ctx.has_input(slot):
                s = _prod(ctx.input_shape(slot))
                if right >= 0 and s >= 0 and s != right:
                    ctx.fail(f"{slot} has {s} elements; it needs {right} "
                             f"(the product of X's dims from begin_norm_axis)")
        ctx.set_output("Y", xs, ctx.input_dtype("X"), ctx.input_lod_level("X"))
        for slot in ("Mean", "Variance"):
            if ctx.has_output(slot):
                ctx.set_output(slot, [_prod(xs[:axis])], ctx.input_dtype("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        eps, axis = attrs["epsilon"], attrs["begin_norm_axis"]

        def kernel(x, scale, bias):
            x2 = x.reshape(_prod(x.shape[:axis]), -1)
            m = x2.mean(axis=1)
            v = np.square(x2 - m[:, None]).mean(axis=1)
            y = (x2 - m[:, None]) / np.sqrt(v + eps)[:, None]
            if scale is not None:
                y = y * scale.reshape(1, -1)
            if bias is not None:
                y = y + bias.reshape(1, -1)
            return y.reshape(x.shape).astype(x.dtype, copy=False), m, v
        return kernel


# the slots of layer_norm_grad and group_norm_grad (Paddle's; instance_norm_grad shares the
# outputs)
_NORM_GRAD_INPUTS = (In("X"), In("Scale", dispensable=True), In("Bias", dispensable=True),
                     In("Mean"), In("Variance"), In("Y@GRAD"))
_NORM_GRAD_OUTPUTS = (Out("X@GRAD", dispensable=True), Out("Scale@GRAD", dispensable=True),
                      Out("Bias@GRAD", dispensable=True))


class LayerNormGrad(OpDef):
    type = "layer_norm_grad"
    inputs, outputs = _NORM_GRAD_INPUTS, _NORM_GRAD_OUTPUTS
    attrs = LayerNorm.attrs
    infer_shape = None

    @classmethod
    def prepare(cls, attrs, outputs):
        eps, axis = attrs["epsilon"], attrs["begin_norm_axis"]

        def kernel(x, scale, bias, mean, var, dy):
            x2 = x.reshape(mean.size, -1)
            d2 = dy.reshape(x2.shape)
            inv = 1.0 / np.sqrt(var + eps)[:, None]
            xhat = (x2 - mean[:, None]) * inv
            dxhat = d2 * scale.reshape(1, -1) if scale is not None else d2
            dx = inv * (dxhat - dxhat.mean(axis=1, keepdims=True)
                        - xhat * (dxhat * xhat).mean(axis=1, keepdims=True))
            ds = None if scale is None else (d2 * xhat).sum(axis=0).reshape(scale.shape)
            db = None if bias is None else d2.sum(axis=0).reshape(bias.shape)
            return (dx.reshape(x.shape).astype(x.dtype, copy=False),
                    None if ds is None else ds.astype(scale.dtype, copy=False),
                    None if db is None else db.astype(bias.dtype, copy=False))
        return kernel


def _layer_norm_grad(g):
    ins = {"X": g.input("X"), "Mean": g.output("Mean"), "Variance": g.output("Variance"),
           "Y@GRAD": g.output_grad("Y")}
    outs = {"X@GRAD": g.input_grad("X")}
    for slot in ("Scale", "Bias"):
        if g.input(slot):
            ins[slot] = g.input(slot)
            outs[slot + "@GRAD"] = g.input_grad(slot)
    g.op("layer_norm_grad", ins, outs, g.attrs())


LayerNorm.grad = staticmethod(_layer_norm_grad)


# --- dropout ---------------------------------------------------------------------------------
class Dropout(OpDef):
    type = "dropout"
    inputs = (In("X"), In("Seed", dispensable=True, no_grad=True))
    outputs = (Out("Out"), Out("Mask", intermediate=True))
    attrs = {"dropout_prob": 0.5, "is_test": False, "fix_seed": False, "seed": 0,
             "dropout_implementation": "downgrade_in_infer"}
    doc = ("Training: Mask ~ Bernoulli(1 - dropout_prob) (uint8), Out = X * Mask, divided by "
           "(1 - dropout_prob) for upscale_in_train. Test: Out = X * (1 - dropout_prob) for "
           "downgrade_in_infer, X for upscale_in_train. fix_seed: the same mask every run.")

    @staticmethod
    def infer_shape(ctx):
        p = ctx.attr("dropout_prob")
        if not 0.0 <= p <= 1.0:
            ctx.fail(f"dropout_prob must be in [0, 1], got {p}")
        impl = ctx.attr("dropout_implementation")
        if impl not in ("downgrade_in_infer", "upscale_in_train"):
            ctx.fail(f"dropout_implementation must be 'downgrade_in_infer' or "
                     f"'upscale_in_train', got {impl!r}")
        ctx.share("X", "Out")
        if ctx.has_output("Mask"):
            ctx.set_output("Mask", ctx.input_shape("X"), "uint8")

    @classmethod
    def prepare(cls, attrs, outputs):
        p, upscale = attrs["dropout_prob"], attrs["dropout_implementation"] == "upscale_in_train"
        fixed = attrs["seed"] if attrs["fix_seed"] else None
        rng = np.random.default_rng(attrs["seed"] or None)   # advances from run to run

        if attrs["is_test"]:
            return lambda x, seed_t: (x if upscale else (x * (1.0 - p)).astype(x.dtype), None)

        def kernel(x, seed_t):
            if seed_t is not None:
                r = np.random.default_rng(int(np.asarray(seed_t).reshape(-1)[0]))
            elif fixed is not None:
                r = np.random.default_rng(fixed)
            else:
                r = rng
            mask = (r.random(x.shape) >= p).astype(np.uint8)
            out = x * mask
            if upscale:
                out = out / (1.0 - p) if p < 1.0 else np.zeros_like(x)
            return out.astype(x.dtype, copy=False), mask
        return kernel


class DropoutGrad(OpDef):
    type = "dropout_grad"
    inputs = (In("Mask"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = Dropout.attrs
    share_lod = "Out@GRAD"
    infer_shape = None
    inplace = {"X@GRAD": "Out@GRAD"}

    @classmethod
    def prepare(cls, attrs, outputs):
        p, upscale = attrs["dropout_prob"], attrs["dropout_implementation"] == "upscale_in_train"
        if attrs["is_test"]:
            k = 1.0 if upscale else 1.0 - p
            return lambda mask, d: (d * k).astype(d.dtype, copy=False)
        k = (1.0 / (1.0 - p) if p < 1.0 else 0.0) if upscale else 1.0
        return lambda mask, d: (d * mask * k).astype(d.dtype, copy=False)


Dropout.grad = staticmethod(lambda g: g.op(
    "dropout_grad", {"Mask": g.output("Mask"), "Out@GRAD": g.output_grad("Out")},
    {"X@GRAD": g.input_grad("X")}, g.attrs()))


# --- Paddle 2.x vision ops: conv2d_transpose, group/instance norm, prelu, pad3d, resize,
# --- max_pool2d_with_index (formulas and attributes as Paddle 2.6 writes and runs them) ----
from .registry import floats  # noqa: E402


def _col2im(cols, n, c, h, w, oh, ow, strides, pads, dil):
    """Adjoint of _im2col: cols [C, kh, kw, N, oh, ow] summed into an image [N, C, h, w]."""
    kh, kw = cols.shape[1:3]
    t, b, l, r = pads
    hp = max(h + t + b, t + (kh - 1) * dil[0] + strides[0] * (oh - 1) + 1)
    wp = max(w + l + r, l + (kw - 1) * dil[1] + strides[1] * (ow - 1) + 1)
    img = np.zeros((c, n, hp, wp), dtype=cols.dtype)
    for i in range(kh):
        for j in range(kw):
            hi, wj = i * dil[0], j * dil[1]
            img[:, :, hi:hi + strides[0] * (oh - 1) + 1:strides[0],
                wj:wj + strides[1] * (ow - 1) + 1:strides[1]] += cols[:, i, j]
    return img[:, :, t:t + h, l:l + w].transpose(1, 0, 2, 3)


def _convt_geometry(attrs, in_hw, k_hw):
    """(strides, pads [t, b, l, r], dilations, output [h, w]) of conv2d_transpose."""
    strides = [int(s) for s in attrs["strides"]]
    pads, dil = _resolve_padding(attrs["padding_algorithm"], in_hw, k_hw, strides,
                                 attrs["paddings"], attrs["dilations"])
    out = []
    for i in range(2):
        if in_hw[i] < 0:
            out.append(-1)
            continue
        o = (in_hw[i] - 1) * strides[i] - pads[2 * i] - pads[2 * i + 1] \
            + dil[i] * (k_hw[i] - 1) + 1
        if attrs["output_size"]:
            want = int(list(attrs["output_size"])[i])
            if not o <= want < o + strides[i]:
                raise ShapeError(f"conv2d_transpose: output_size {list(attrs['output_size'])} "
                                 f"must be in [{o}, {o + strides[i]}) along axis {i}")
            o = want
        elif attrs["output_padding"]:
            o += int(list(attrs["output_padding"])[i])
        out.append(o)
    return strides, pads, dil, out


class Conv2DTranspose(OpDef):
    type = "conv2d_transpose"
    inputs = (In("Input"), In("Filter"), In("Bias", dispensable=True))
    outputs = (Out("Output"),)
    attrs = {"strides": ints([1, 1]), "paddings": ints([0, 0]), "output_padding": ints(),
             "output_size": ints(), "padding_algorithm": "EXPLICIT", "groups": 1,
             "dilations": ints([1, 1]), "data_format": "NCHW"}
    share_lod = None
    version = 2   # output_padding (1); force_fp32_output, mkldnn_data_type: oneDNN only (2)
    doc = ("Output = the transpose (gradient) of conv2d with these strides/paddings/dilations: "
           "Input [N, C, H, W], Filter [C, M/groups, kh, kw], Output [N, M, Ho, Wo], "
           "Ho = (H-1)*stride - pad_top - pad_bottom + dilation*(kh-1) + 1 (+ output_padding, "
           "or output_size).")

    @staticmethod
    def infer_shape(ctx):
        xs, fs = ctx.input_shape("Input"), ctx.input_shape("Filter")
        last = _channel_last(ctx.attr("data_format"))
        if len(xs) != 4 or len(fs) != 4:
            ctx.fail(f"Input {xs} and Filter {fs} must both be 4-D")
        nchw = [xs[0], xs[3], xs[1], xs[2]] if last else xs
        if nchw[1] >= 0 and fs[0] >= 0 and nchw[1] != fs[0]:
            ctx.fail(f"Input has {nchw[1]} channels but Filter {fs} expects {fs[0]}")
        attrs = {k: ctx.attr(k) for k in ("strides", "paddings", "padding_algorithm",
                                          "dilations", "output_size", "output_padding")}
        try:
            _, _, _, (oh, ow) = _convt_geometry(attrs, nchw[2:], fs[2:])
        except ShapeError as e:
            ctx.fail(str(e))
        m = fs[1] * ctx.attr("groups") if fs[1] >= 0 else -1
        ctx.set_output("Output", [nchw[0], oh, ow, m] if last else [nchw[0], m, oh, ow],
                       ctx.input_dtype("Input"))

    @classmethod
    def prepare(cls, attrs, outputs):
        groups, last = attrs["groups"], _channel_last(attrs["data_format"])

        def kernel(x, w, bias):
            if last:
                x = x.transpose(0, 3, 1, 2)
            n, c, h, wd = x.shape
            _, mg, kh, kw = w.shape
            if w.shape[0] != c or c % groups:
                raise ShapeError(f"conv2d_transpose: Input {list(x.shape)} and Filter "
                                 f"{list(w.shape)} with groups={groups} do not fit")
            strides, pads, dil, (oh, ow) = _convt_geometry(attrs, (h, wd), (kh, kw))
            xg = x.transpose(1, 0, 2, 3).reshape(groups, c // groups, n * h * wd)
            wg = w.reshape(groups, c // groups, mg * kh * kw)
            cols = np.matmul(wg.transpose(0, 2, 1), xg)         # [G, M/G*kh*kw, N*h*w]
            cols = cols.reshape(groups * mg, kh, kw, n, h, wd)
            out = _col2im(cols, n, groups * mg, oh, ow, h, wd, strides, pads, dil)
            if bias is not None:
                out = out + bias.reshape(1, -1, 1, 1)
            if last:
                out = out.transpose(0, 2, 3, 1)
            return np.ascontiguousarray(out, dtype=x.dtype)
        return kernel


class Conv2DTransposeGrad(OpDef):
    type = "conv2d_transpose_grad"
    inputs = (In("Input"), In("Filter"), In("Bias", dispensable=True), In("Output@GRAD"))
    outputs = (Out("Input@GRAD", dispensable=True), Out("Filter@GRAD", dispensable=True),
               Out("Bias@GRAD", dispensable=True))
    attrs = Conv2DTranspose.attrs
    share_lod = None
    infer_shape = None

    @classmethod
    def prepare(cls, attrs, outputs):
        groups, last = attrs["groups"], _channel_last(attrs["data_format"])

        def kernel(x, w, bias, dout):
            if last:
                x, dout = x.transpose(0, 3, 1, 2), dout.transpose(0, 3, 1, 2)
            n, c, h, wd = x.shape
            _, mg, kh, kw = w.shape
            strides, pads, dil, _ = _convt_geometry(attrs, (h, wd), (kh, kw))
            cols = _im2col(dout, kh, kw, h, wd, strides, pads, dil, groups)  # [G, M/G*k*k, NHW]
            xg = x.transpose(1, 0, 2, 3).reshape(groups, c // groups, n * h * wd)
            wg = w.reshape(groups, c // groups, mg * kh * kw)
            dx = np.matmul(wg, cols).reshape(c, n, h, wd).transpose(1, 0, 2, 3)
            dw = np.matmul(xg, cols.transpose(0, 2, 1)).reshape(w.shape)
            db = None if bias is None else dout.sum(axis=(0, 2, 3)).astype(bias.dtype)
            if last:
                dx = dx.transpose(0, 2, 3, 1)
            return (np.ascontiguousarray(dx, dtype=x.dtype), dw.astype(w.dtype, copy=False), db)
        return kernel


Conv2DTranspose.grad = staticmethod(_conv_grad)


def _norm_backward(x, dy, mean, inv, axes, scale_b):
    """dX of Y = (X - mean) * inv * scale over `axes` (mean/inv broadcast)."""
    xhat = (x - mean) * inv
    dxhat = dy * scale_b if scale_b is not None else dy
    return inv * (dxhat - dxhat.mean(axis=axes, keepdims=True)
                  - xhat * (dxhat * xhat).mean(axis=axes, keepdims=True)), xhat


class GroupNorm(OpDef):
    type = "group_norm"
    inputs = (In("X"), In("Scale", dispensable=True), In("Bias", dispensable=True))
    outputs = (Out("Y"), Out("Mean", intermediate=True), Out("Variance", intermediate=True))
    attrs = {"epsilon": 1e-5, "groups": -1, "data_layout": "NCHW"}
    doc = ("Y = (X - mean) / sqrt(var + epsilon) * Scale + Bias, statistics per sample over "
           "each group of channels (and all spatial positions); Mean/Variance [N, groups].")

    @staticmethod
    def infer_shape(ctx):
        xs, g = ctx.input_shape("X"), ctx.attr("groups")
        c = xs[-1] if _channel_last(ctx.attr("data_layout")) else xs[1]
        if g < 1 or (c >= 0 and c % g):
            ctx.fail(f"groups={g} must divide the {c} channels")
        ctx.share("X", "Y")
        for slot in ("Mean", "Variance"):
            if ctx.has_output(slot):
                ctx.set_output(slot, [xs[0], g], ctx.input_dtype("X"))

    @staticmethod
    def _grouped(x, layout, g):
        """X as [N, G, C/G, rest...] (channel-first)."""
        if _channel_last(layout):
            x = np.moveaxis(x, -1, 1)
        return x.reshape((x.shape[0], g, x.shape[1] // g) + x.shape[2:]), x.shape

    @classmethod
    def prepare(cls, attrs, outputs):
        eps, g, layout = attrs["epsilon"], attrs["groups"], attrs["data_layout"]

        def kernel(x, scale, bias):
            xg, cshape = GroupNorm._grouped(x, layout, g)
            axes = tuple(range(2, xg.ndim))
            m = xg.mean(axis=axes, keepdims=True)
            v = np.square(xg - m).mean(axis=axes, keepdims=True)
            y = ((xg - m) / np.sqrt(v + eps)).reshape(cshape)
            bshape = (1, -1) + (1,) * (len(cshape) - 2)
            if scale is not None:
                y = y * scale.reshape(bshape)
            if bias is not None:
                y = y + bias.reshape(bshape)
            if _channel_last(layout):
                y = np.moveaxis(y, 1, -1)
            n = x.shape[0]
            return (np.ascontiguousarray(y, dtype=x.dtype), m.reshape(n, g).astype(x.dtype),
                    v.reshape(n, g).astype(x.dtype))
        return kernel


class GroupNormGrad(OpDef):
    type = "group_norm_grad"
    inputs, outputs = _NORM_GRAD_INPUTS, _NORM_GRAD_OUTPUTS
    attrs = GroupNorm.attrs
    infer_shape = None

    @classmethod
    def prepare(cls, attrs, outputs):
        eps, g, layout = attrs["epsilon"], attrs["groups"], attrs["data_layout"]

        def kernel(x, scale, bias, mean, var, dy):
            xg, cshape = GroupNorm._grouped(x, layout, g)
            dyg, _ = GroupNorm._grouped(dy, layout, g)
            axes = tuple(range(2, xg.ndim))
            bshape = (1, g, -1) + (1,) * (xg.ndim - 3)
            shp = (x.shape[0], g) + (1,) * (xg.ndim - 2)
            inv = 1.0 / np.sqrt(var.reshape(shp) + eps)
            dx, xhat = _norm_backward(xg, dyg, mean.reshape(shp), inv, axes,
                                      None if scale is None else scale.reshape(bshape))
            red = (0,) + tuple(range(3, xg.ndim))
            ds = None if scale is None else (dyg * xhat).sum(axis=red).reshape(scale.shape)
            db = None if bias is None else dyg.sum(axis=red).reshape(bias.shape)
            dx = dx.reshape(cshape)
            if _channel_last(layout):
                dx = np.moveaxis(dx, 1, -1)
            return (np.ascontiguousarray(dx, dtype=x.dtype),
                    None if ds is None else ds.astype(scale.dtype),
                    None if db is None else db.astype(bias.dtype))
        return kernel


def _norm_grad(g):
    stat = ("Mean", "Variance") if g.fwd.type == "group_norm" else ("SavedMean", "SavedVariance")
    ins = {"X": g.input("X"), stat[0]: g.output(stat[0]), stat[1]: g.output(stat[1]),
           "Y@GRAD": g.output_grad("Y")}
    outs = {"X@GRAD": g.input_grad("X")}
    for slot in ("Scale", "Bias"):
        if g.input(slot):
            ins[slot] = g.input(slot)
            outs[slot + "@GRAD"] = g.input_grad(slot)
    g.op(g.fwd.type + "_grad", ins, outs, g.attrs())


GroupNorm.grad = staticmethod(_norm_grad)


class InstanceNorm(OpDef):
    type = "instance_norm"
    inputs = (In("X"), In("Scale", dispensable=True), In("Bias", dispensable=True))
    outputs = (Out("Y"), Out("SavedMean", intermediate=True),
               Out("SavedVariance", intermediate=True))
    attrs = {"epsilon": 1e-5}
    version = 1   # Scale and Bias dispensable
    doc = ("Y = (X - mean) / sqrt(var + epsilon) * Scale + Bias, statistics per sample and "
           "channel over the spatial dims (NCHW...); SavedMean [N*C], SavedVariance [N*C] "
           "holds 1 / sqrt(var + epsilon), as Paddle's.")

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        ctx.share("X", "Y")
        nc = xs[0] * xs[1] if xs[0] >= 0 and xs[1] >= 0 else -1
        for slot in ("SavedMean", "SavedVariance"):
            if ctx.has_output(slot):
                ctx.set_output(slot, [nc], ctx.input_dtype("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        eps = attrs["epsilon"]

        def kernel(x, scale, bias):
            axes = tuple(range(2, x.ndim))
            m = x.mean(axis=axes, keepdims=True)
            inv = 1.0 / np.sqrt(np.square(x - m).mean(axis=axes, keepdims=True) + eps)
            y = (x - m) * inv
            bshape = (1, -1) + (1,) * (x.ndim - 2)
            if scale is not None:
                y = y * scale.reshape(bshape)
            if bias is not None:
                y = y + bias.reshape(bshape)
            return (y.astype(x.dtype, copy=False), m.reshape(-1).astype(x.dtype),
                    inv.reshape(-1).astype(x.dtype))
        return kernel


class InstanceNormGrad(OpDef):
    type = "instance_norm_grad"
    inputs = (In("X"), In("Scale", dispensable=True), In("Bias", dispensable=True),
              In("SavedMean"), In("SavedVariance"), In("Y@GRAD"))
    outputs = _NORM_GRAD_OUTPUTS
    attrs = InstanceNorm.attrs
    infer_shape = None

    @staticmethod
    def kernel(x, scale, bias, mean, inv, dy):
        axes = tuple(range(2, x.ndim))
        shp = x.shape[:2] + (1,) * (x.ndim - 2)
        bshape = (1, -1) + (1,) * (x.ndim - 2)
        dx, xhat = _norm_backward(x, dy, mean.reshape(shp), inv.reshape(shp), axes,
                                  None if scale is None else scale.reshape(bshape))
        red = (0,) + axes
        ds = None if scale is None else (dy * xhat).sum(axis=red).astype(scale.dtype)
        db = None if bias is None else dy.sum(axis=red).astype(bias.dtype)
        return dx.astype(x.dtype, copy=False), ds, db


InstanceNorm.grad = staticmethod(_norm_grad)


def _prelu_alpha(alpha, x, mode, fmt):
    if mode == "all":
        return alpha.reshape(())
    if mode == "channel":
        shape = [1] * x.ndim
        shape[-1 if _channel_last(fmt) and x.ndim > 2 else 1] = -1
        return alpha.reshape(shape)
    return alpha.reshape((1,) + x.shape[1:])      # element


class PRelu(OpDef):
    type = "prelu"
    inputs = (In("X"), In("Alpha"))
    outputs = (Out("Out"),)
    attrs = {"mode": "all", "data_format": "NCHW"}
    doc = ("Out = X if X > 0 else alpha * X; Alpha one value (mode 'all'), one per channel "
           "('channel') or one per element of a sample ('element').")

    @classmethod
    def prepare(cls, attrs, outputs):
        mode, fmt = attrs["mode"], attrs["data_format"]

        def kernel(x, alpha):
            a = _prelu_alpha(alpha, x, mode, fmt)
            return np.where(x > 0, x, a * x).astype(x.dtype, copy=False)
        return kernel


class PReluGrad(OpDef):
    type = "prelu_grad"
    inputs = (In("X"), In("Alpha"), In("Out@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True), Out("Alpha@GRAD", dispensable=True))
    attrs = PRelu.attrs
    infer_shape = None

    @classmethod
    def prepare(cls, attrs, outputs):
        mode, fmt = attrs["mode"], attrs["data_format"]

        def kernel(x, alpha, dout):
            from .common import reduce_to_shape
            a = _prelu_alpha(alpha, x, mode, fmt)
            dx = np.where(x > 0, dout, a * dout).astype(x.dtype, copy=False)
            da = np.where(x > 0, 0, x * dout)
            da = reduce_to_shape(da, np.shape(a)) if np.ndim(a) else da.sum()
            return dx, np.reshape(da, alpha.shape).astype(alpha.dtype)
        return kernel


PRelu.grad = staticmethod(lambda g: g.op(
    "prelu_grad", {"X": g.input("X"), "Alpha": g.input("Alpha"),
                   "Out@GRAD": g.output_grad("Out")},
    {"X@GRAD": g.input_grad("X"), "Alpha@GRAD": g.input_grad("Alpha")}, g.attrs()))


def _pad_index(n, p0, p1, mode):
    """Source index of each of the n + p0 + p1 output positions along one axis, and whether
    it reads the input (False: the constant)."""
    o = np.arange(-p0, n + p1)
    if mode == "reflect":
        if n == 1:
            src = np.zeros_like(o)
        else:
            period = 2 * (n - 1)
            src = np.abs(o) % period
            src = np.where(src >= n, period - src, src)
        return src, np.ones(o.shape, bool)
    if mode == "replicate":
        return np.clip(o, 0, n - 1), np.ones(o.shape, bool)
    if mode == "circular":
        return o % n, np.ones(o.shape, bool)
    valid = (o >= 0) & (o < n)
    return np.clip(o, 0, n - 1), valid


class Pad3D(OpDef):
    type = "pad3d"
    inputs = (In("X"), In("Paddings", dispensable=True, no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"paddings": ints([0, 0, 0, 0, 0, 0]), "mode": "constant", "value": 0.0,
             "data_format": "NCDHW"}
    share_lod = None
    doc = ("Pad the 3 spatial dims of a 5-D X: paddings [left, right, top, bottom, front, "
           "back]; mode constant (value), reflect, replicate or circular.")

    @staticmethod
    def infer_shape(ctx):
        xs, p = ctx.input_shape("X"), list(ctx.attr("paddings"))
        if len(xs) != 5:
            ctx.fail(f"X must be 5-D, got {xs}")
        if ctx.has_input("Paddings") or len(p) != 6:
            out = list(xs[:2]) + [-1, -1, -1] if not _channel_last(ctx.attr("data_format")) \
                else [xs[0], -1, -1, -1, xs[4]]
        else:
            sp = [2, 3, 4] if not _channel_last(ctx.attr("data_format")) else [1, 2, 3]
            out = list(xs)
            for k, ax in enumerate(sp):      # paddings go W, H, D
                pp = p[2 * (2 - k)] + p[2 * (2 - k) + 1]
                out[ax] = xs[ax] + pp if xs[ax] >= 0 else -1
        ctx.set_output("Out", out, ctx.input_dtype("X"))

    @staticmethod
    def _maps(attrs, x_shape, pad_t):
        p = [int(v) for v in (np.asarray(pad_t).reshape(-1) if pad_t is not None
                              else attrs["paddings"])]
        if len(p) != 6:
            raise ShapeError(f"pad3d: paddings must have 6 values, got {p}")
        last = _channel_last(attrs["data_format"])
        sp = [1, 2, 3] if last else [2, 3, 4]
        maps = []
        for k, ax in enumerate(sp):
            p0, p1 = p[2 * (2 - k)], p[2 * (2 - k) + 1]
            if attrs["mode"] == "reflect" and (p0 >= x_shape[ax] or p1 >= x_shape[ax]):
                raise ShapeError(f"pad3d: reflect padding {p0, p1} must be less than the "
                                 f"input size {x_shape[ax]}")
            maps.append(_pad_index(x_shape[ax], p0, p1, attrs["mode"]))
        return sp, maps

    @classmethod
    def prepare(cls, attrs, outputs):
        value = attrs["value"]

        def kernel(x, pad_t):
            sp, maps = Pad3D._maps(attrs, x.shape, pad_t)
            out = x
            for ax, (src, valid) in zip(sp, maps):
                out = np.take(out, src, axis=ax)
                if not valid.all():
                    shape = [1] * x.ndim
                    shape[ax] = -1
                    out = np.where(valid.reshape(shape), out, value)
            return np.ascontiguousarray(out, dtype=x.dtype)
        return kernel


class Pad3DGrad(OpDef):
    type = "pad3d_grad"
    inputs = (In("X"), In("Paddings", dispensable=True), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = Pad3D.attrs
    infer_shape = None

    @classmethod
    def prepare(cls, attrs, outputs):
        def kernel(x, pad_t, dout):
            sp, maps = Pad3D._maps(attrs, x.shape, pad_t)
            d = dout
            for ax, (src, valid) in zip(sp, maps):    # adjoint of each gather, in turn
                d = np.moveaxis(d, ax, 0)
                acc = np.zeros((x.shape[ax],) + d.shape[1:], dtype=d.dtype)
                np.add.at(acc, src[valid], d[valid])
                d = np.moveaxis(acc, 0, ax)
            return np.ascontiguousarray(d, dtype=x.dtype)
        return kernel


Pad3D.grad = staticmethod(lambda g: g.op(
    "pad3d_grad", {"X": g.input("X"), "Paddings": g.input("Paddings"),
                   "Out@GRAD": g.output_grad("Out")}, {"X@GRAD": g.input_grad("X")}, g.attrs()))


# resize: out = A_h @ X @ A_w^T per (sample, channel), A the [out, in] interpolation matrix
def _interp_out_hw(attrs, h, w, out_size, size_list, scale_t):
    """Paddle's interpolate_v2 output size: SizeTensor, else OutSize, else a scale (Scale
    tensor or `scale` attribute), else out_h/out_w. Returns (out_h, out_w, scale_h, scale_w)."""
    sh = sw = -1.0
    if size_list:
        return int(np.asarray(size_list[0]).reshape(-1)[0]), \
            int(np.asarray(size_list[1]).reshape(-1)[0]), sh, sw
    oh, ow = attrs["out_h"], attrs["out_w"]
    if scale_t is not None:
        s = np.asarray(scale_t, np.float32).reshape(-1)
        sh, sw = float(s[0]), float(s[-1])
    elif len(attrs["scale"]) > 1:
        sh, sw = float(attrs["scale"][0]), float(attrs["scale"][1])
    elif len(attrs["scale"]) == 1:
        sh = sw = float(attrs["scale"][0])
    if sh > 0 and sw > 0:
        oh, ow = int(h * np.float32(sh)), int(w * np.float32(sw))
    if out_size is not None:
        oh, ow = (int(v) for v in np.asarray(out_size).reshape(-1)[:2])
    if oh <= 0 or ow <= 0:
        raise ShapeError(f"interpolate: output size {[oh, ow]} is not positive")
    return oh, ow, sh, sw


def _interp_ratio(n_in, n_out, scale, align_corners):
    if n_out <= 1:
        return np.float32(0)
    if align_corners:
        return np.float32(n_in - 1) / np.float32(n_out - 1)
    return np.float32(1.0 / scale) if scale > 0 else np.float32(n_in) / np.float32(n_out)


def _interp_matrix(method, n_in, n_out, scale, align_corners, align_mode):
    """[n_out, n_in] weights of Paddle's bilinear (per axis) or nearest interpolation,
    computed in float32 as its kernels do (the floor of a float32 product picks the taps)."""
    ratio = _interp_ratio(n_in, n_out, scale, align_corners)
    k = np.arange(n_out, dtype=np.float32)
    a = np.zeros((n_out, n_in), np.float64)
    rows = np.arange(n_out)
    if method == "nearest":
        src = (ratio * k + np.float32(0.5)) if align_corners else ratio * k
        a[rows, np.minimum(src.astype(np.int64), n_in - 1)] = 1
        return a
    half = align_mode == 0 and not align_corners
    pos = (ratio * (k + np.float32(0.5)) - np.float32(0.5)) if half else ratio * k
    lo = np.maximum(pos.astype(np.int64), 0)      # int() truncates toward zero, then >= 0
    hi = np.minimum(lo + 1, n_in - 1)
    frac = (np.maximum(pos, 0) if half else pos) - lo.astype(np.float32)
    np.add.at(a, (rows, lo), 1 - frac.astype(np.float64))
    np.add.at(a, (rows, hi), frac.astype(np.float64))
    return a


class _InterpV2(OpDef):
    inputs = (In("X"), In("OutSize", dispensable=True, no_grad=True),
              In("SizeTensor", duplicable=True, dispensable=True, no_grad=True),
              In("Scale", dispensable=True, no_grad=True))
    outputs = (Out("Out"),)
    share_lod = None
    method = None

    @classmethod
    def infer_shape(cls, ctx):
        xs = ctx.input_shape("X")
        if len(xs) != 4:
            ctx.fail(f"X must be 4-D (NCHW or NHWC), got {xs}")
        last = _channel_last(ctx.attr("data_layout"))
        h, w = (xs[1], xs[2]) if last else (xs[2], xs[3])
        if any(ctx.has_input(s) for s in ("OutSize", "SizeTensor", "Scale")) or h < 0 or w < 0:
            oh = ow = -1
        else:
            attrs = {k: ctx.attr(k) for k in ("out_h", "out_w", "scale")}
            try:
                oh, ow, _, _ = _interp_out_hw(attrs, h, w, None, None, None)
            except ShapeError as e:
                ctx.fail(str(e))
        out = [xs[0], oh, ow, xs[3]] if last else [xs[0], xs[1], oh, ow]
        ctx.set_output("Out", out, ctx.input_dtype("X"))

    @classmethod
    def _mats(cls, attrs, h, w, out_size, size_list, scale_t):
        oh, ow, sh, sw = _interp_out_hw(attrs, h, w, out_size, size_list, scale_t)
        ac, am = attrs["align_corners"], attrs["align_mode"]
        return (_interp_matrix(cls.method, h, oh, sh, ac, am),
                _interp_matrix(cls.method, w, ow, sw, ac, am))

    @classmethod
    def prepare(cls, attrs, outputs):
        last = _channel_last(attrs["data_layout"])

        def kernel(x, out_size, size_list, scale_t):
            xc = x.transpose(0, 3, 1, 2) if last else x
            ah, aw = cls._mats(attrs, xc.shape[2], xc.shape[3], out_size, size_list, scale_t)
            out = np.einsum("kh,nchw,lw->nckl", ah, xc, aw, optimize=True)
            if last:
                out = out.transpose(0, 2, 3, 1)
            return np.ascontiguousarray(out, dtype=x.dtype)
        return kernel


class _InterpV2Grad(OpDef):
    inputs = (In("X"), In("OutSize", dispensable=True),
              In("SizeTensor", duplicable=True, dispensable=True),
              In("Scale", dispensable=True), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    infer_shape = None
    fwd = None

    @classmethod
    def prepare(cls, attrs, outputs):
        last = _channel_last(attrs["data_layout"])

        def kernel(x, out_size, size_list, scale_t, dout):
            xc = x.transpose(0, 3, 1, 2) if last else x
            d = dout.transpose(0, 3, 1, 2) if last else dout
            ah, aw = cls.fwd._mats(attrs, xc.shape[2], xc.shape[3], out_size, size_list,
                                   scale_t)
            dx = np.einsum("kh,nckl,lw->nchw", ah, d, aw, optimize=True)
            if last:
                dx = dx.transpose(0, 2, 3, 1)
            return np.ascontiguousarray(dx, dtype=x.dtype)
        return kernel


_INTERP_ATTRS = {"data_layout": "NCHW", "out_d": 0, "out_h": 0, "out_w": 0, "scale": floats(),
                 "interp_method": "bilinear", "align_corners": True, "align_mode": 1}


def _interp_grad(g):
    ins = {"X": g.input("X"), "Out@GRAD": g.output_grad("Out")}
    for slot in ("OutSize", "SizeTensor", "Scale"):
        if g.input(slot):
            ins[slot] = g.input(slot)
    g.op(g.fwd.type + "_grad", ins, {"X@GRAD": g.input_grad("X")}, g.attrs())


for _t, _m in (("bilinear_interp_v2", "bilinear"), ("nearest_interp_v2", "nearest")):
    _c = "".join(p.title() for p in _t.split("_"))
    _f = type(_c, (_InterpV2,), {"type": _t, "method": _m, "__module__": __name__,
                                 "attrs": {**_INTERP_ATTRS, "interp_method": _m},
                                 "doc": f"Resize the H, W of X by {_m} interpolation "
                                        f"(paddle.nn.functional.interpolate)."})
    type(_c + "Grad", (_InterpV2Grad,), {"type": _t + "_grad", "fwd": _f, "attrs": _f.attrs,
                                         "__module__": __name__})
    _f.grad = staticmethod(_interp_grad)


def _pool_with_index_attrs(attrs):
    return {"ksize": list(attrs["ksize"]), "strides": attrs["strides"],
            "paddings": list(attrs["paddings"])[:2], "global_pooling": attrs["global_pooling"],
            "adaptive": attrs["adaptive"], "padding_algorithm": "EXPLICIT", "ceil_mode": False}


class MaxPool2DWithIndex(OpDef):
    type = "max_pool2d_with_index"
    inputs = (In("X"),)
    outputs = (Out("Out"), Out("Mask", intermediate=True))
    attrs = {"ksize": ints(), "strides": ints([1, 1]), "paddings": ints([0, 0]),
             "global_pooling": False, "adaptive": False}
    share_lod = None
    doc = ("Max pooling (NCHW) and Mask, the int32 index (h * W + w) of each window's first "
           "maximum in its input plane (adaptive_max_pool2d).")

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        if len(xs) != 4:
            ctx.fail(f"X must be 4-D, got {xs}")
        a = _pool_with_index_attrs({k: ctx.attr(k) for k in MaxPool2DWithIndex.attrs})
        oh, ow = _pool_out_shape(a, xs[2], xs[3])
        ctx.set_output("Out", xs[:2] + [oh, ow], ctx.input_dtype("X"))
        if ctx.has_output("Mask"):
            ctx.set_output("Mask", xs[:2] + [oh, ow], "int32")

    @classmethod
    def prepare(cls, attrs, outputs):
        a = _pool_with_index_attrs(attrs)

        def kernel(x):
            out, flat = _max_pool(a, x, with_index=True)
            plane = x.shape[2] * x.shape[3]
            return np.ascontiguousarray(out, dtype=x.dtype), (flat % plane).astype(np.int32)
        return kernel


class MaxPool2DWithIndexGrad(OpDef):
    type = "max_pool2d_with_index_grad"
    inputs = (In("X"), In("Mask"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = MaxPool2DWithIndex.attrs
    infer_shape = None

    @staticmethod
    def kernel(x, mask, dout):
        n, c, h, w = x.shape
        base = (np.arange(n * c) * (h * w)).reshape(n, c, 1, 1)
        dx = np.bincount((base + mask).ravel(), weights=dout.ravel(), minlength=x.size)
        return dx.reshape(x.shape).astype(x.dtype)


MaxPool2DWithIndex.grad = staticmethod(lambda g: g.op(
    "max_pool2d_with_index_grad", {"X": g.input("X"), "Mask": g.output("Mask"),
                                   "Out@GRAD": g.output_grad("Out")},
    {"X@GRAD": g.input_grad("X")}, g.attrs()))
