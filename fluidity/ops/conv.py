"""Convolution and pooling: conv2d, depthwise_conv2d, conv2d_transpose, pool2d,
max_pool2d_with_index (the last two are Paddle 2.x vision ops: formulas and attributes as
Paddle 2.6 writes and runs them).

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
from .common import bilinear_double_grad, channel_last
from .registry import In, OpDef, Out, ints


_COMMON_CONV_ATTRS = {"use_cudnn": False, "use_mkldnn": False, "use_quantizer": False,
                      "fuse_relu_before_depthwise_conv": False, "fuse_relu": False,
                      "fuse_residual_connection": False, "use_addto": False,
                      "workspace_size_MB": 512, "exhaustive_search": False}


# --- geometry ------------------------------------------------------------------------------
def _pads4(paddings, nd=2):
    """Paddle's paddings, one per spatial dim ([ph, pw]) or two ([top, bottom, left, right];
    [front, back, top, bottom, left, right] in 3-D) -> the two-per-dim form."""
    p = [int(v) for v in paddings]
    if len(p) == nd:
        return [v for v in p for _ in range(2)]
    if len(p) == 2 * nd:
        return p
    raise ShapeError(f"paddings must have {nd} or {2 * nd} values, got {p}")


def resolve_padding(algo, in_hw, k_hw, strides, paddings, dilations=(1, 1)):
    """Paddle's UpdatePaddingAndDilation over any number of spatial dims: (pads [before,
    after] per dim, flattened, and dilations) for EXPLICIT, SAME (out = ceil(in / stride),
    dilation 1, the odd pixel after) or VALID (no padding)."""
    nd = len(k_hw)
    if algo == "SAME":
        pads = []
        for n, k, s in zip(in_hw, k_hw, strides):
            if n < 0:
                pads += [0, 0]
                continue
            out = (n + s - 1) // s
            total = max((out - 1) * s + k - n, 0)
            pads += [total // 2, total - total // 2]
        return pads, [1] * nd
    if algo == "VALID":
        return [0] * (2 * nd), list(dilations)
    if algo not in ("EXPLICIT", "", None):
        raise ShapeError(f"padding_algorithm must be 'SAME', 'VALID' or 'EXPLICIT', got {algo!r}")
    return _pads4(paddings, nd), list(dilations)


def out_size(n, k, s, p0, p1, d=1, ceil_mode=False):
    """An output extent of a convolution window over `n` (-1: unknown); not positive when
    the window is wider than the padded input (refused by the caller)."""
    if n < 0:
        return -1
    span = n + p0 + p1 - (d * (k - 1) + 1)
    return (span + (s - 1 if ceil_mode else 0)) // s + 1


def pool_out_size(n, k, s, p0, p1, ceil_mode=False):
    """An output extent of a pooling window over `n` (-1: unknown). The division truncates
    toward zero as Paddle's C++ does: a window up to `s - 1` wider than the padded input
    still gives one output (GoogLeNet's 7x7 average pool over a 6x6 map), over the taps
    that fall inside the input."""
    if n < 0:
        return -1
    span = n + p0 + p1 - k + (s - 1 if ceil_mode else 0)
    return (span // s if span >= 0 else -(-span // s)) + 1


# --- conv2d --------------------------------------------------------------------------------
def conv_geometry(attrs, x_hw, k_hw):
    strides = [int(s) for s in attrs["strides"]]
    pads, dil = resolve_padding(attrs["padding_algorithm"], x_hw, k_hw, strides,
                                 attrs["paddings"], attrs["dilations"])
    out = [out_size(x_hw[i], k_hw[i], strides[i], pads[2 * i], pads[2 * i + 1], dil[i])
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


def conv_shape_error(xs, fs, groups):
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


def _conv_grad(g):
    ins = {"Input": g.input("Input"), "Filter": g.input("Filter"),
           "Output@GRAD": g.output_grad("Output")}
    outs = {"Input@GRAD": g.input_grad("Input"), "Filter@GRAD": g.input_grad("Filter")}
    if g.input("Bias"):
        ins["Bias"] = g.input("Bias")
        outs["Bias@GRAD"] = g.input_grad("Bias")
    g.op(g.fwd.type + "_grad", ins, outs, g.attrs())


class Conv2D(OpDef):
    type = "conv2d"
    nonempty_inputs = ("Input",)
    inputs = (In("Input"), In("Filter"), In("Bias", dispensable=True),
              In("ResidualData", dispensable=True, no_grad=True))
    outputs = (Out("Output"),)
    attrs = {"strides": ints([1, 1]), "paddings": ints([0, 0]), "padding_algorithm": "EXPLICIT",
             "groups": 1, "dilations": ints([1, 1]), "data_format": "NCHW",
             **_COMMON_CONV_ATTRS}
    share_lod = "Input"
    lod_outputs = ("Output",)
    version = 1   # Paddle's checkpoint: attribute use_addto
    doc = ("Output = conv(Input, Filter) (+ Bias per output channel). Input NCHW (or NHWC by "
           "data_format), Filter [M, C/groups, kh, kw].")

    @staticmethod
    def infer_shape(ctx):
        xs, fs = ctx.input_shape("Input"), ctx.input_shape("Filter")
        last = channel_last(ctx.attr("data_format"))
        nchw = [xs[0], xs[3], xs[1], xs[2]] if last and len(xs) == 4 else xs
        err = conv_shape_error(nchw, fs, ctx.attr("groups"))
        if err:
            ctx.fail(err)
        _, _, _, (oh, ow) = conv_geometry({k: ctx.attr(k) for k in (
            "strides", "padding_algorithm", "paddings", "dilations")}, nchw[2:], fs[2:])
        if (nchw[2] >= 0 and oh <= 0) or (nchw[3] >= 0 and ow <= 0):
            ctx.fail(f"output size {[oh, ow]} is not positive")
        out = [nchw[0], oh, ow, fs[0]] if last else [nchw[0], fs[0], oh, ow]
        ctx.set_output("Output", out, ctx.input_dtype("Input"))

    @classmethod
    def prepare(cls, attrs, outputs):
        groups, last, name = attrs["groups"], channel_last(attrs["data_format"]), cls.type

        def kernel(x, w, bias, residual):
            if last:
                x = x.transpose(0, 3, 1, 2)
            err = conv_shape_error(x.shape, w.shape, groups)
            if err:
                raise ShapeError(f"{name}: {err}")
            n = x.shape[0]
            m, _, kh, kw = w.shape
            strides, pads, dil, (oh, ow) = conv_geometry(attrs, x.shape[2:], (kh, kw))
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


    grad = staticmethod(_conv_grad)


class DepthwiseConv2D(Conv2D):
    type = "depthwise_conv2d"
    share_lod = "Input"
    lod_outputs = ("Output",)
    doc = "conv2d with groups == input channels (same kernel)."


class Conv2DGrad(OpDef):
    type = "conv2d_grad"
    inputs = (In("Input"), In("Filter"), In("Bias", dispensable=True), In("Output@GRAD"))
    outputs = (Out("Input@GRAD", dispensable=True), Out("Filter@GRAD", dispensable=True),
               Out("Bias@GRAD", dispensable=True))
    attrs = Conv2D.attrs
    share_lod = None
    infer_shape = None
    # conv is bilinear in Input and Filter: Paddle's conv2d_grad_grad, from conv ops
    grad = bilinear_double_grad("conv2d", "Input", "Filter", "Output")

    @classmethod
    def prepare(cls, attrs, outputs):
        groups, last = attrs["groups"], channel_last(attrs["data_format"])
        want_x, want_w = "Input@GRAD" in outputs, "Filter@GRAD" in outputs

        def kernel(x, w, bias, dout):
            if last:
                x, dout = x.transpose(0, 3, 1, 2), dout.transpose(0, 3, 1, 2)
            n, c, h, wd = x.shape
            m, cg, kh, kw = w.shape
            strides, pads, dil, (oh, ow) = conv_geometry(attrs, (h, wd), (kh, kw))
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
    grad = bilinear_double_grad("depthwise_conv2d", "Input", "Filter", "Output")


# --- conv2d_transpose ----------------------------------------------------------------------
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


def convt_geometry(attrs, in_hw, k_hw):
    """(strides, pads [t, b, l, r], dilations, output [h, w]) of conv2d_transpose."""
    strides = [int(s) for s in attrs["strides"]]
    pads, dil = resolve_padding(attrs["padding_algorithm"], in_hw, k_hw, strides,
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
        last = channel_last(ctx.attr("data_format"))
        if len(xs) != 4 or len(fs) != 4:
            ctx.fail(f"Input {xs} and Filter {fs} must both be 4-D")
        nchw = [xs[0], xs[3], xs[1], xs[2]] if last else xs
        if nchw[1] >= 0 and fs[0] >= 0 and nchw[1] != fs[0]:
            ctx.fail(f"Input has {nchw[1]} channels but Filter {fs} expects {fs[0]}")
        attrs = {k: ctx.attr(k) for k in ("strides", "paddings", "padding_algorithm",
                                          "dilations", "output_size", "output_padding")}
        try:
            _, _, _, (oh, ow) = convt_geometry(attrs, nchw[2:], fs[2:])
        except ShapeError as e:
            ctx.fail(str(e))
        m = fs[1] * ctx.attr("groups") if fs[1] >= 0 else -1
        ctx.set_output("Output", [nchw[0], oh, ow, m] if last else [nchw[0], m, oh, ow],
                       ctx.input_dtype("Input"))

    @classmethod
    def prepare(cls, attrs, outputs):
        groups, last = attrs["groups"], channel_last(attrs["data_format"])

        def kernel(x, w, bias):
            if last:
                x = x.transpose(0, 3, 1, 2)
            n, c, h, wd = x.shape
            _, mg, kh, kw = w.shape
            if w.shape[0] != c or c % groups:
                raise ShapeError(f"conv2d_transpose: Input {list(x.shape)} and Filter "
                                 f"{list(w.shape)} with groups={groups} do not fit")
            strides, pads, dil, (oh, ow) = convt_geometry(attrs, (h, wd), (kh, kw))
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


    grad = staticmethod(_conv_grad)


class DepthwiseConv2DTranspose(Conv2DTranspose):
    type = "depthwise_conv2d_transpose"
    doc = "conv2d_transpose with groups == input channels (same kernel)."


class Conv2DTransposeGrad(OpDef):
    type = "conv2d_transpose_grad"
    inputs, outputs = Conv2DGrad.inputs, Conv2DGrad.outputs   # the same slots as conv2d's
    attrs = Conv2DTranspose.attrs
    share_lod = None
    infer_shape = None

    @classmethod
    def prepare(cls, attrs, outputs):
        groups, last = attrs["groups"], channel_last(attrs["data_format"])

        def kernel(x, w, bias, dout):
            if last:
                x, dout = x.transpose(0, 3, 1, 2), dout.transpose(0, 3, 1, 2)
            n, c, h, wd = x.shape
            _, mg, kh, kw = w.shape
            strides, pads, dil, _ = convt_geometry(attrs, (h, wd), (kh, kw))
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


class DepthwiseConv2DTransposeGrad(Conv2DTransposeGrad):
    type = "depthwise_conv2d_transpose_grad"


# --- pool2d --------------------------------------------------------------------------------
def pool_windows(attrs, h, w):
    """Per spatial axis: (index table [out, k], valid mask [out, k]) of the input positions
    each output window covers (clipped; invalid = padding or outside an adaptive cell)."""
    ksize, strides = list(attrs["ksize"]), [int(s) for s in attrs["strides"]]
    adaptive = attrs["adaptive"]
    if attrs["global_pooling"]:
        # Fluid 1.8: ksize becomes the input's size; with adaptive, ksize is then the output
        # size (each cell one pixel: the input itself)
        ksize, pads = [h, w], [0, 0, 0, 0]
    elif adaptive:
        pads = [0, 0, 0, 0]
    else:
        pads, _ = resolve_padding(attrs["padding_algorithm"], (h, w), ksize, strides,
                                   attrs["paddings"])
    tables = []
    for i, n in enumerate((h, w)):
        if adaptive:
            o = np.arange(ksize[i])
            start, end = (o * n) // ksize[i], -((-(o + 1) * n) // ksize[i])
            idx = start[:, None] + np.arange(int((end - start).max()))
            valid = idx < end[:, None]
        else:
            out = pool_out_size(n, ksize[i], strides[i], pads[2 * i], pads[2 * i + 1],
                                ceil_mode=attrs["ceil_mode"])
            idx = np.arange(out)[:, None] * strides[i] - pads[2 * i] + np.arange(ksize[i])
            valid = (idx >= 0) & (idx < n)
        tables.append((np.clip(idx, 0, n - 1), valid))
    return tables, ksize, adaptive


def _pool_out_shape(attrs, h, w):
    if attrs["global_pooling"]:
        return [h, w] if attrs["adaptive"] else [1, 1]    # see pool_windows
    if attrs["adaptive"]:
        return list(attrs["ksize"])
    ksize, strides = list(attrs["ksize"]), [int(s) for s in attrs["strides"]]
    pads, _ = resolve_padding(attrs["padding_algorithm"], (h, w), ksize, strides,
                               attrs["paddings"])
    return [pool_out_size(n, ksize[i], strides[i], pads[2 * i], pads[2 * i + 1],
                          ceil_mode=attrs["ceil_mode"]) for i, n in enumerate((h, w))]


def _window_matrix(idx, valid, n, dtype):
    """0/1 matrix [out, n]: row o marks the input positions of window o."""
    a = np.zeros((idx.shape[0], n), dtype=dtype)
    rows = np.broadcast_to(np.arange(idx.shape[0])[:, None], idx.shape)
    a[rows[valid], idx[valid]] = 1
    return a


def _avg_parts(attrs, x_shape, dtype):
    h, w = x_shape[2:]
    ((ih, vh), (iw, vw)), ksize, adaptive = pool_windows(attrs, h, w)
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
    ((ih, vh), (iw, vw)), _, _ = pool_windows(attrs, h, w)
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
    nonempty_inputs = ("X",)
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
        last = channel_last(attrs["data_format"])
        n, c, h, w = (xs[0], xs[3], xs[1], xs[2]) if last else xs
        oh, ow = _pool_out_shape(attrs, h, w)
        if (h >= 0 and oh <= 0) or (w >= 0 and ow <= 0):
            ctx.fail(f"output size {[oh, ow]} is not positive")
        ctx.set_output("Out", [n, oh, ow, c] if last else [n, c, oh, ow],
                       ctx.input_dtype("X"), ctx.input_lod_level("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        last, is_max = channel_last(attrs["data_format"]), attrs["pooling_type"] == "max"

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


    grad = staticmethod(lambda g: g.default())


class Pool2DGrad(OpDef):
    type = "pool2d_grad"
    inputs = (In("X"), In("Out"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = Pool2D.attrs
    infer_shape = None

    @classmethod
    def prepare(cls, attrs, outputs):
        last, is_max = channel_last(attrs["data_format"]), attrs["pooling_type"] == "max"

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


# --- max_pool2d_with_index -----------------------------------------------------------------
def pool_with_index_attrs(attrs):
    return {"ksize": list(attrs["ksize"]), "strides": attrs["strides"],
            "paddings": list(attrs["paddings"])[:2], "global_pooling": attrs["global_pooling"],
            "adaptive": attrs["adaptive"], "padding_algorithm": "EXPLICIT",
            "ceil_mode": attrs["ceil_mode"]}


class MaxPool2DWithIndex(OpDef):
    type = "max_pool2d_with_index"
    inputs = (In("X"),)
    outputs = (Out("Out"), Out("Mask", intermediate=True))
    attrs = {"ksize": ints(), "strides": ints([1, 1]), "paddings": ints([0, 0]),
             "global_pooling": False, "adaptive": False, "ceil_mode": False}
    share_lod = None
    version = 1   # Paddle's checkpoint: attribute ceil_mode (Paddle 3.x writes it)
    doc = ("Max pooling (NCHW) and Mask, the int32 index (h * W + w) of each window's first "
           "maximum in its input plane (adaptive_max_pool2d); ceil_mode as pool2d's.")

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        if len(xs) != 4:
            ctx.fail(f"X must be 4-D, got {xs}")
        a = pool_with_index_attrs({k: ctx.attr(k) for k in MaxPool2DWithIndex.attrs})
        oh, ow = _pool_out_shape(a, xs[2], xs[3])
        ctx.set_output("Out", xs[:2] + [oh, ow], ctx.input_dtype("X"))
        if ctx.has_output("Mask"):
            ctx.set_output("Mask", xs[:2] + [oh, ow], "int32")

    @classmethod
    def prepare(cls, attrs, outputs):
        a = pool_with_index_attrs(attrs)

        def kernel(x):
            out, flat = _max_pool(a, x, with_index=True)
            plane = x.shape[2] * x.shape[3]
            return np.ascontiguousarray(out, dtype=x.dtype), (flat % plane).astype(np.int32)
        return kernel


    grad = staticmethod(lambda g: g.op(
        "max_pool2d_with_index_grad", {"X": g.input("X"), "Mask": g.output("Mask"),
                                       "Out@GRAD": g.output_grad("Out")},
        {"X@GRAD": g.input_grad("X")}, g.attrs()))


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

