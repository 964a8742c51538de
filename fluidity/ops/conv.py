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
from .common import channel_last, check_dims
from .registry import In, OpDef, Out, ints


_COMMON_CONV_ATTRS = {"use_cudnn": False, "use_mkldnn": False, "use_quantizer": False,
                      "fuse_relu_before_depthwise_conv": False, "fuse_relu": False,
                      "fuse_residual_connection": False, "use_addto": False,
                      "workspace_size_MB": 512, "exhaustive_search": False}


# --- geometry ------------------------------------------------------------------------------
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


def out_size(n, k, s, p0, p1, d=1, ceil_mode=False):
    """An output extent of a convolution or pooling window over `n` (-1: unknown)."""
    if n < 0:
        return -1
    span = n + p0 + p1 - (d * (k - 1) + 1)
    return (span + (s - 1 if ceil_mode else 0)) // s + 1


# --- conv2d --------------------------------------------------------------------------------
def _conv_geometry(attrs, x_hw, k_hw):
    strides = [int(s) for s in attrs["strides"]]
    pads, dil = _resolve_padding(attrs["padding_algorithm"], x_hw, k_hw, strides,
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


def _emit_literal_nchw(e, x, w):
    """(N, [C, H, W], Filter dims) of a compiled NCHW conv or conv_transpose, all literal
    but N; NotCompilable when the layout is NHWC or a dim is known only at run time."""
    if channel_last(e.attr("data_format")):
        e.fail("NHWC layout")
    if x.ndim != 4 or w.ndim != 4 or not all(e.is_lit(d) for d in x.dims[1:] + w.dims):
        e.fail("channels, image or filter size not known when compiling")
    return x.dims[0], [int(d) for d in x.dims[1:]], [int(d) for d in w.dims]


def _grouped_gemm(gemm, groups, ta, tb, m, n, k, a, lda, b, ldb, c, ldc):
    """C code for both targets: one `gemm` ("fl::gemm", or the device's "fl::cu::gemm" of
    the same signature) per group gi, C_gi = op(A_gi) @ op(B_gi) with A_gi, B_gi and C_gi
    the gi-th blocks of m*k, k*n and m*n floats of a, b and c."""
    return (f"for (int64_t gi = 0; gi < {groups}; ++gi) {gemm}({str(ta).lower()}, "
            f"{str(tb).lower()}, {m}, {n}, {k}, 1.0f, {a} + gi * {m} * {k}, {lda}, "
            f"{b} + gi * {k} * {n}, {ldb}, 0.0f, {c} + gi * {m} * {n}, {ldc});")


def _emit_conv_geometry(e, x, w):
    """The literal geometry of a compiled NCHW conv (N may be symbolic): (code declaring
    a fl::ConvGeom `g`, groups, M, [oh, ow]); NotCompilable when H, W, C or the filter are
    not literal or the layout is NHWC."""
    n, (c, h, wd), (m, cg, kh, kw) = _emit_literal_nchw(e, x, w)
    groups = e.attr("groups")
    if _conv_shape_error([1, c, h, wd], [m, cg, kh, kw], groups):
        e.fail(_conv_shape_error([1, c, h, wd], [m, cg, kh, kw], groups))
    strides, pads, dil, (oh, ow) = _conv_geometry(e.attrs, (h, wd), (kh, kw))
    code = (f"const fl::ConvGeom g{{{n}, {c}, {h}, {wd}, {kh}, {kw}, {oh}, {ow}, {strides[0]}, "
            f"{strides[1]}, {pads[0]}, {pads[2]}, {dil[0]}, {dil[1]}}};")
    return code, groups, m, [oh, ow]


def _cuda_conv_geometry(e, x, w):
    """The device form of a conv's geometry: ((N, C, H, W, KH, KW, OH, OW, SH, SW, PT, PL,
    DH, DW), groups, M, [oh, ow]), N a C expression, the rest literal."""
    n, (c, h, wd), (m, cg, kh, kw) = _emit_literal_nchw(e, x, w)
    groups = e.attr("groups")
    if _conv_shape_error([1, c, h, wd], [m, cg, kh, kw], groups):
        e.fail(_conv_shape_error([1, c, h, wd], [m, cg, kh, kw], groups))
    strides, pads, dil, (oh, ow) = _conv_geometry(e.attrs, (h, wd), (kh, kw))
    return (n, c, h, wd, kh, kw, oh, ow, strides[0], strides[1], pads[0], pads[2], dil[0],
            dil[1]), groups, m, [oh, ow]


def _cuda_im2col(e, x, g, cols):
    """cols[(c*KH + i)*KW + j][(n*OH + oh)*OW + ow] (runtime/conv.h im2col), one thread per
    element."""
    n, c, h, w, kh, kw, oh, ow, sh, sw, pt, pl, dh, dw = g
    ncol = e.mul(n, oh * ow)
    e.code(f"fl::cu::each({e.mul(c * kh * kw, ncol)}, [=] __device__ (int64_t t) {{ "
           f"const int64_t col = t % {ncol}, r = t / {ncol}; const int64_t j = r % {kw}, "
           f"i = (r / {kw}) % {kh}, c = r / ({kw} * {kh}); const int64_t ow = col % {ow}, "
           f"oh = (col / {ow}) % {oh}, n = col / ({ow} * {oh}); const int64_t h = oh * {sh} - "
           f"{pt} + i * {dh}, w = ow * {sw} - {pl} + j * {dw}; {cols}[t] = (h >= 0 && h < {h} "
           f"&& w >= 0 && w < {w}) ? {x}[((n * {c} + c) * {h} + h) * {w} + w] : 0.0f; }});")


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
    share_lod = None
    version = 1   # Paddle's checkpoint: attribute use_addto
    doc = ("Output = conv(Input, Filter) (+ Bias per output channel). Input NCHW (or NHWC by "
           "data_format), Filter [M, C/groups, kh, kw].")

    @staticmethod
    def infer_shape(ctx):
        xs, fs = ctx.input_shape("Input"), ctx.input_shape("Filter")
        last = channel_last(ctx.attr("data_format"))
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
        groups, last, name = attrs["groups"], channel_last(attrs["data_format"]), cls.type

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

    @staticmethod
    def emit(e):
        """im2col, one gemm per group over the whole batch (the kernel's matmul), then NCHW
        and the bias."""
        x, w, bias = e.input("Input"), e.input("Filter"), e.input("Bias")
        if e.op.input("ResidualData"):
            e.fail("ResidualData")
        e.require_float(x, w, bias)
        geom, groups, m, (oh, ow) = _emit_conv_geometry(e, x, w)
        out = e.output("Output", [x.dims[0], str(m), str(oh), str(ow)])
        ckk = e.prod(w.dims[1:])
        ncol = e.mul(x.dims[0], oh * ow)
        cols = e.scratch([e.mul(groups, ckk), ncol])
        tmp = e.scratch([str(m), ncol])
        mg = m // groups
        e.code(geom)
        e.code(f"fl::im2col({x}, g, {cols});")
        e.code(_grouped_gemm("fl::gemm", groups, False, False, mg, ncol, ckk, w, ckk, cols,
                             ncol, tmp, ncol))
        e.code(f"fl::swap01({tmp}, {out}, {m}, {x.dims[0]}, {oh * ow});")
        if bias is not None:
            e.code(f"for (int64_t i = 0; i < {out.numel()}; ++i) "
                   f"{out}[i] = {out}[i] + {bias}[(i / {oh * ow}) % {m}];")

    @staticmethod
    def cuda_emit(e):
        """im2col on the device, one device gemm per group over the whole batch, then NCHW
        with the bias (one thread per element)."""
        x, w, bias = e.input("Input"), e.input("Filter"), e.input("Bias")
        if e.op.input("ResidualData"):
            e.fail("ResidualData")
        e.require_float(x, w, bias)
        g, groups, m, (oh, ow) = _cuda_conv_geometry(e, x, w)
        n = x.dims[0]
        out = e.output("Output", [n, str(m), str(oh), str(ow)])
        ckk, mg, p = e.prod(w.dims[1:]), m // groups, oh * ow
        ncol = e.mul(n, p)
        cols = e.scratch([e.mul(groups, ckk), ncol])
        tmp = e.scratch([str(m), ncol])
        _cuda_im2col(e, x, g, cols)
        e.code(_grouped_gemm("fl::cu::gemm", groups, False, False, mg, ncol, ckk, w, ckk, cols,
                             ncol, tmp, ncol))
        add = f" + {bias}[mm]" if bias is not None else ""
        e.code(f"fl::cu::each({out.numel()}, [=] __device__ (int64_t t) {{ const int64_t q = "
               f"t % {p}, mm = (t / {p}) % {m}, nn = t / ({p} * {m}); {out}[t] = "
               f"{tmp}[(mm * {n} + nn) * {p} + q]{add}; }});")

    grad = staticmethod(_conv_grad)


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
        groups, last = attrs["groups"], channel_last(attrs["data_format"])
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

    @staticmethod
    def emit(e):
        x, w, bias, dout = e.input("Input"), e.input("Filter"), e.input("Bias"), \
            e.input("Output@GRAD")
        e.require_float(x, w, bias, dout)
        geom, groups, m, (oh, ow) = _emit_conv_geometry(e, x, w)
        ckk, mg = e.prod(w.dims[1:]), m // groups
        ncol = e.mul(x.dims[0], oh * ow)
        e.code(geom)
        d = e.scratch([str(m), ncol])      # Output@GRAD as [M, N*oh*ow]
        e.code(f"fl::swap01({dout}, {d}, {x.dims[0]}, {m}, {oh * ow});")
        if e.has_output("Filter@GRAD"):
            cols = e.scratch([e.mul(groups, ckk), ncol])
            dw = e.output("Filter@GRAD", w.dims)
            e.code(f"fl::im2col({x}, g, {cols});")
            e.code(_grouped_gemm("fl::gemm", groups, False, True, mg, ckk, ncol, d, ncol,
                                 cols, ncol, dw, ckk))
        if e.has_output("Input@GRAD"):
            dcols = e.scratch([e.mul(groups, ckk), ncol])
            dx = e.output("Input@GRAD", x.dims)
            e.code(_grouped_gemm("fl::gemm", groups, True, False, ckk, ncol, mg, w, ckk, d,
                                 ncol, dcols, ncol))
            e.code(f"fl::col2im({dcols}, g, {dx});")
        if e.has_output("Bias@GRAD") and bias is not None:
            db = e.output("Bias@GRAD", bias.dims)
            e.code(f"for (int64_t c = 0; c < {m}; ++c) {{ double s = 0; for (int64_t i = 0; "
                   f"i < {ncol}; ++i) s += {d}[c * {ncol} + i]; {db}[c] = (float)s; }}")

    @staticmethod
    def cuda_emit(e):
        """Output@GRAD to [M, N*OH*OW]; Filter@GRAD = d @ cols^T and dcols = W^T @ d by
        device gemms; Input@GRAD gathers each pixel's taps in the C++ target's order (i,
        then j), so no atomics; Bias@GRAD one thread per channel, in double."""
        x, w, bias, dout = e.input("Input"), e.input("Filter"), e.input("Bias"), \
            e.input("Output@GRAD")
        e.require_float(x, w, bias, dout)
        g, groups, m, (oh, ow) = _cuda_conv_geometry(e, x, w)
        n, c, h, wd, kh, kw, _, _, sh, sw, pt, pl, dh, dw = g
        ckk, mg, p = e.prod(w.dims[1:]), m // groups, oh * ow
        ncol = e.mul(n, p)
        d = e.scratch([str(m), ncol])
        e.code(f"fl::cu::each({e.mul(m, ncol)}, [=] __device__ (int64_t t) {{ const int64_t "
               f"q = t % {p}, nn = (t / {p}) % {n}, mm = t / ({p} * {n}); "
               f"{d}[t] = {dout}[(nn * {m} + mm) * {p} + q]; }});")
        if e.has_output("Filter@GRAD"):
            cols = e.scratch([e.mul(groups, ckk), ncol])
            dwt = e.output("Filter@GRAD", w.dims)
            _cuda_im2col(e, x, g, cols)
            e.code(_grouped_gemm("fl::cu::gemm", groups, False, True, mg, ckk, ncol, d, ncol,
                                 cols, ncol, dwt, ckk))
        if e.has_output("Input@GRAD"):
            dcols = e.scratch([e.mul(groups, ckk), ncol])
            dx = e.output("Input@GRAD", x.dims)
            e.code(_grouped_gemm("fl::cu::gemm", groups, True, False, ckk, ncol, mg, w, ckk, d,
                                 ncol, dcols, ncol))
            e.code(f"fl::cu::each({dx.numel()}, [=] __device__ (int64_t t) {{ const int64_t "
                   f"x_ = t % {wd}, y_ = (t / {wd}) % {h}, cc = (t / ({wd} * {h})) % {c}, "
                   f"nn = t / ({wd} * {h} * {c}); float acc = 0.0f; "
                   f"for (int64_t i = 0; i < {kh}; ++i) {{ const int64_t hh = y_ + {pt} - "
                   f"i * {dh}; if (hh < 0 || hh % {sh}) continue; const int64_t oh_ = hh / {sh}; "
                   f"if (oh_ >= {oh}) continue; for (int64_t j = 0; j < {kw}; ++j) {{ "
                   f"const int64_t ww = x_ + {pl} - j * {dw}; if (ww < 0 || ww % {sw}) continue; "
                   f"const int64_t ow_ = ww / {sw}; if (ow_ >= {ow}) continue; "
                   f"acc += {dcols}[((cc * {kh} + i) * {kw} + j) * {ncol} + (nn * {oh} + oh_) * "
                   f"{ow} + ow_]; }} }} {dx}[t] = acc; }});")
        if e.has_output("Bias@GRAD") and bias is not None:
            db = e.output("Bias@GRAD", bias.dims)
            e.code(f"fl::cu::each({m}, [=] __device__ (int64_t cc) {{ double s = 0; "
                   f"for (int64_t i = 0; i < {ncol}; ++i) s += {d}[cc * {ncol} + i]; "
                   f"{db}[cc] = (float)s; }});")


class DepthwiseConv2DGrad(Conv2DGrad):
    type = "depthwise_conv2d_grad"


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


def _emit_convt_geometry(e, x, w):
    """The literal geometry of a compiled NCHW conv2d_transpose (N may be symbolic): (code
    declaring the fl::ConvGeom `g` of the conv2d it transposes: the image is Output [N, M,
    oh, ow], the conv's output positions Input's [h, w]; groups, C, M/groups, [oh, ow])."""
    n, (c, h, wd), (c2, mg, kh, kw) = _emit_literal_nchw(e, x, w)
    groups = e.attr("groups")
    if c != c2 or groups < 1 or c % groups:
        e.fail(f"Input {x.dims} and Filter {w.dims} with groups={groups} do not fit")
    try:
        strides, pads, dil, (oh, ow) = _convt_geometry(e.attrs, (h, wd), (kh, kw))
    except ShapeError as err:
        e.fail(str(err))
    code = (f"const fl::ConvGeom g{{{n}, {groups * mg}, {oh}, {ow}, {kh}, {kw}, {h}, {wd}, "
            f"{strides[0]}, {strides[1]}, {pads[0]}, {pads[2]}, {dil[0]}, {dil[1]}}};")
    return code, groups, c, mg, [oh, ow]


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
            _, _, _, (oh, ow) = _convt_geometry(attrs, nchw[2:], fs[2:])
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

    @staticmethod
    def emit(e):
        """The kernel's steps: Input as [C, N*h*w], one gemm per group making the columns
        W_g^T @ X_g, col2im into Output (tap by tap, as _col2im adds), then the bias."""
        x, w, bias = e.input("Input"), e.input("Filter"), e.input("Bias")
        e.require_float(x, w, bias)
        geom, groups, c, mg, (oh, ow) = _emit_convt_geometry(e, x, w)
        n, hw = x.dims[0], int(x.dims[2]) * int(x.dims[3])
        m, cg, mgkk = groups * mg, c // groups, e.prod(w.dims[1:])
        out = e.output("Output", [n, str(m), str(oh), str(ow)])
        ncol = e.mul(n, hw)
        xg = e.scratch([str(c), ncol])
        cols = e.scratch([e.mul(groups, mgkk), ncol])
        e.code(geom)
        e.code(f"fl::swap01({x}, {xg}, {n}, {c}, {hw});")
        e.code(f"for (int64_t gi = 0; gi < {groups}; ++gi) fl::gemm(true, false, {mgkk}, {ncol}, "
               f"{cg}, 1.0f, {w} + gi * {cg} * {mgkk}, {mgkk}, {xg} + gi * {cg} * {ncol}, "
               f"{ncol}, 0.0f, {cols} + gi * {mgkk} * {ncol}, {ncol});")
        e.code(f"fl::col2im({cols}, g, {out});")
        if bias is not None:
            e.code(f"for (int64_t i = 0; i < {out.numel()}; ++i) "
                   f"{out}[i] = {out}[i] + {bias}[(i / {oh * ow}) % {m}];")

    grad = staticmethod(_conv_grad)


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

    @staticmethod
    def emit(e):
        """The kernel's steps: im2col of Output@GRAD at Input's positions, per group dX_g =
        W_g @ cols_g and dW_g = X_g @ cols_g^T (gemms), dBias summed in double."""
        x, w, bias, dout = e.input("Input"), e.input("Filter"), e.input("Bias"), \
            e.input("Output@GRAD")
        e.require_float(x, w, bias, dout)
        geom, groups, c, mg, (oh, ow) = _emit_convt_geometry(e, x, w)
        n, hw = x.dims[0], int(x.dims[2]) * int(x.dims[3])
        m, cg, mgkk = groups * mg, c // groups, e.prod(w.dims[1:])
        check_dims(e, dout, [n, str(m), str(oh), str(ow)], "Output")
        ncol = e.mul(n, hw)
        cols = e.scratch([e.mul(groups, mgkk), ncol])
        e.code(geom)
        e.code(f"fl::im2col({dout}, g, {cols});")
        if e.has_output("Input@GRAD"):
            tmp = e.scratch([str(c), ncol])
            dx = e.output("Input@GRAD", x.dims)
            e.code(f"for (int64_t gi = 0; gi < {groups}; ++gi) fl::gemm(false, false, {cg}, "
                   f"{ncol}, {mgkk}, 1.0f, {w} + gi * {cg} * {mgkk}, {mgkk}, {cols} + gi * "
                   f"{mgkk} * {ncol}, {ncol}, 0.0f, {tmp} + gi * {cg} * {ncol}, {ncol});")
            e.code(f"fl::swap01({tmp}, {dx}, {c}, {n}, {hw});")
        if e.has_output("Filter@GRAD"):
            xg = e.scratch([str(c), ncol])
            dw = e.output("Filter@GRAD", w.dims)
            e.code(f"fl::swap01({x}, {xg}, {n}, {c}, {hw});")
            e.code(f"for (int64_t gi = 0; gi < {groups}; ++gi) fl::gemm(false, true, {cg}, "
                   f"{mgkk}, {ncol}, 1.0f, {xg} + gi * {cg} * {ncol}, {ncol}, {cols} + gi * "
                   f"{mgkk} * {ncol}, {ncol}, 0.0f, {dw} + gi * {cg} * {mgkk}, {mgkk});")
        if e.has_output("Bias@GRAD") and bias is not None:
            db = e.output("Bias@GRAD", bias.dims)
            e.code(f"for (int64_t c = 0; c < {m}; ++c) {{ double s = 0; for (int64_t b = 0; "
                   f"b < {n}; ++b) for (int64_t i = 0; i < {oh * ow}; ++i) s += {dout}[(b * {m} "
                   f"+ c) * {oh * ow} + i]; {db}[c] = (float)s; }}")


# --- pool2d --------------------------------------------------------------------------------
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
            out = out_size(n, ksize[i], strides[i], pads[2 * i], pads[2 * i + 1],
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
    return [out_size(n, ksize[i], strides[i], pads[2 * i], pads[2 * i + 1],
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

    @staticmethod
    def emit(e):
        """Each window's taps in the kernel's order (rows, then columns): the first maximum
        (NaN wins, as np.maximum's), or the sum of a separable average (columns of each row
        summed, then the rows) divided as the kernel divides. NHWC walks the same planes
        with a channel stride."""
        x = e.input("X")
        e.require_float(x)
        lay = _PoolLayout(e, x, e.attrs)
        tables, (oh, ow) = _emit_pool_tables(e, e.attrs, lay.h, lay.w)
        out = e.output("Out", lay.dims(oh, ow))
        if e.attr("pooling_type") == "max":
            body = ("float v = -INFINITY; bool any = false; for (int64_t i = hs[a]; i < he[a]; "
                    "++i) for (int64_t j = ws[b]; j < we[b]; ++j) { const float t = "
                    "img[(i * W + j) * ES]; if (!any || t > v || t != t) { v = t; any = true; } }")
        else:
            body = ("float v = 0.0f; for (int64_t j = ws[b]; j < we[b]; ++j) { float col = 0.0f; "
                    "for (int64_t i = hs[a]; i < he[a]; ++i) col += img[(i * W + j) * ES]; "
                    "v += col; } v = v / div[a * OW + b];")
        e.code(tables)
        e.code(lay.planes(ow, ("const float* img", x, lay.h * lay.w),
                          ("float* o", out, oh * ow)) +
               f"for (int64_t a = 0; a < {oh}; ++a) for (int64_t b = 0; b < OW; ++b) {{ "
               f"{body} o[(a * OW + b) * ES] = v; }} }}")

    @staticmethod
    def cuda_emit(e):
        """One thread per output element over its window, taps in the C++ target's order
        (max: the first maximum, NaN wins; avg: columns of each row summed, then divided
        as the kernel divides). NCHW."""
        x = e.input("X")
        e.require_float(x)
        if x.ndim != 4 or channel_last(e.attr("data_format")):
            e.fail("not a 4-D NCHW X")
        if not (e.is_lit(x.dims[2]) and e.is_lit(x.dims[3])):
            e.fail("image size not known when compiling")
        h, w = int(x.dims[2]), int(x.dims[3])
        axes, div = _cuda_pool_windows(e, e.attrs, h, w)
        oh, ow = axes[0][4], axes[1][4]
        out = e.output("Out", [x.dims[0], x.dims[1], str(oh), str(ow)])
        if e.attr("pooling_type") == "max":
            body = ("float v = -INFINITY; bool any = false; for (int64_t i = i0; i < i1; ++i) "
                    f"for (int64_t j = j0; j < j1; ++j) {{ const float t = img[i * {w} + j]; "
                    "if (!any || t > v || t != t) { v = t; any = true; } }")
        else:
            body = ("float v = 0.0f; for (int64_t j = j0; j < j1; ++j) { float col = 0.0f; "
                    f"for (int64_t i = i0; i < i1; ++i) col += img[i * {w} + j]; v += col; }} "
                    f"v = v / {_cuda_divisor(div)};")
        e.code(f"fl::cu::each({out.numel()}, [=] __device__ (int64_t t) {{ const int64_t "
               f"b = t % {ow}, a = (t / {ow}) % {oh}, pl = t / {oh * ow}; const float* img = "
               f"{x} + pl * {h * w}; {_cuda_window(axes, 'a', 'b')} {body} {out}[t] = v; }});")

    grad = staticmethod(lambda g: g.default())


def _cuda_pool_windows(e, attrs, h, w):
    """The device form of a pool's windows: per axis (stride, pad, ksize, size) such that
    window a covers [max(a*S - P, 0), min(a*S - P + K, n)), checked against the kernel's own
    tables (_pool_windows), with the average's divisor rule ("area", or the literal of a
    fixed divisor); NotCompilable where the windows follow another rule (adaptive cells)."""
    ((ih, vh), (iw, vw)), ksize, adaptive = _pool_windows(attrs, h, w)
    if adaptive:
        e.fail("adaptive pooling")
    if attrs["global_pooling"]:
        pads, strides = [0, 0, 0, 0], [1, 1]
    else:
        pads, _ = _resolve_padding(attrs["padding_algorithm"], (h, w), ksize,
                                   [int(v) for v in attrs["strides"]], attrs["paddings"])
        strides = [int(v) for v in attrs["strides"]]
    axes = []
    for k, (idx, valid, n) in enumerate(((ih, vh, h), (iw, vw, w))):
        lo, hi = _runs(idx, valid)
        s, p, kk = strides[k], pads[2 * k], int(ksize[k])
        want_lo = [max(a * s - p, 0) for a in range(len(lo))]
        want_hi = [min(a * s - p + kk, n) for a in range(len(lo))]
        if lo != want_lo or hi != want_hi or not _contiguous(idx, valid):
            e.fail("pool windows the device form does not compute")
        axes.append((s, p, kk, n, len(lo)))
    exclusive = attrs.get("exclusive", True) or attrs["global_pooling"]
    div = "area" if exclusive else repr(float(np.float32(ksize[0] * ksize[1]))) + "f"
    return axes, div


def _cuda_window(axes, a, b):
    """C declaring the window [i0, i1) x [j0, j1) of output (a, b)."""
    (sh, ph, kh, h, _), (sw, pw, kw, w, _) = axes
    return (f"const int64_t i0 = {a} * {sh} - {ph} > 0 ? {a} * {sh} - {ph} : 0, i1 = {a} * "
            f"{sh} - {ph} + {kh} < {h} ? {a} * {sh} - {ph} + {kh} : {h}; const int64_t j0 = "
            f"{b} * {sw} - {pw} > 0 ? {b} * {sw} - {pw} : 0, j1 = {b} * {sw} - {pw} + {kw} < "
            f"{w} ? {b} * {sw} - {pw} + {kw} : {w};")


def _cuda_divisor(div):
    return ("(float)((i1 - i0) * (j1 - j0) > 1 ? (i1 - i0) * (j1 - j0) : 1)" if div == "area"
            else div)


class _PoolLayout:
    """Where compiled pooling finds the planes of X (4-D, H and W known when compiling):
    plane p (of N*C) of NCHW starts at p*H*W, its elements one apart; of NHWC, (n, c) =
    (p / C, p % C) starts at n*H*W*C + c, its elements C apart (ES)."""

    def __init__(self, e, x, attrs):
        if x.ndim != 4:
            e.fail(f"X is {x.ndim}-D")
        self.last = channel_last(attrs.get("data_format", "NCHW"))
        self.n, self.c, h, w = ((x.dims[0], x.dims[3], x.dims[1], x.dims[2]) if self.last
                                else x.dims)
        if not (e.is_lit(h) and e.is_lit(w)):
            e.fail("image size not known when compiling")
        self.h, self.w = int(h), int(w)
        self.n_planes = e.mul(self.n, self.c)

    def dims(self, oh, ow):
        """The dims of a pooled output in X's layout."""
        return ([self.n, str(oh), str(ow), self.c] if self.last
                else [self.n, self.c, str(oh), str(ow)])

    def planes(self, ow, *pointers):
        """C++ opening a loop over the planes (the caller closes its brace) that declares
        W, OW, ES and, for each (declaration, Buf, plane size) of `pointers`, that pointer
        to the Buf's plane p."""
        decls = " ".join(
            f"{decl} = {buf} + (p / ES) * {size} * ES + p % ES;" if self.last else
            f"{decl} = {buf} + p * {size};" for decl, buf, size in pointers)
        return (f"const int64_t W = {self.w}, OW = {ow}, ES = {self.c if self.last else 1}; "
                f"for (int64_t p = 0; p < {self.n_planes}; ++p) {{ {decls} ")


def _emit_pool_tables(e, attrs, h, w):
    """C tables of a compiled pool's windows over an h x w plane: rows [hs, he), columns
    [ws, we) of each output position (the kernel's _pool_windows, clipped; adaptive cells
    too), and the average's divisors (div); returns (code, (oh, ow))."""
    ((ih, vh), (iw, vw)), ksize, adaptive = _pool_windows(attrs, h, w)
    if not (_contiguous(ih, vh) and _contiguous(iw, vw)):
        e.fail("windows that are not runs of positions")
    hs, he = _runs(ih, vh)
    ws, we = _runs(iw, vw)
    if attrs.get("exclusive", True) or attrs["global_pooling"] or adaptive:
        div = np.maximum(np.outer(vh.sum(1), vw.sum(1)), 1).astype(np.float32)
    else:
        div = np.full((len(hs), len(ws)), np.float32(ksize[0] * ksize[1]), np.float32)
    if attrs["global_pooling"]:
        div = np.full((1, 1), np.float32(h * w), np.float32)

    def arr(name, values, ctype="int64_t"):
        vals = ", ".join(repr(float(v)) + "f" if ctype == "float" else str(int(v))
                         for v in np.ravel(values))
        return f"static const {ctype} {name}[] = {{{vals}}};"
    code = " ".join([arr("hs", hs), arr("he", he), arr("ws", ws), arr("we", we),
                     arr("div", div, "float")])
    return code, (len(hs), len(ws))


def _contiguous(idx, valid):
    """Whether every window's valid taps are consecutive positions."""
    for row, ok in zip(idx, valid):
        pos = row[ok]
        if len(pos) and not np.array_equal(pos, np.arange(pos[0], pos[0] + len(pos))):
            return False
    return True


def _runs(idx, valid):
    starts = [int(row[ok][0]) if ok.any() else 0 for row, ok in zip(idx, valid)]
    ends = [int(row[ok][-1]) + 1 if ok.any() else 0 for row, ok in zip(idx, valid)]
    return starts, ends


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

    @staticmethod
    def emit(e):
        """max: each window's gradient to its first maximum, summed per position in double
        (the kernel's bincount); avg: spread over the window divided as the forward."""
        x, dout = e.input("X"), e.input("Out@GRAD")
        e.require_float(x, dout)
        lay = _PoolLayout(e, x, e.attrs)
        tables, (oh, ow) = _emit_pool_tables(e, e.attrs, lay.h, lay.w)
        dx = e.output("X@GRAD", x.dims)
        hw = lay.h * lay.w
        e.code(tables)
        if e.attr("pooling_type") == "max":
            acc = e.scratch(x.dims, "double")
            e.code(f"std::memset({acc}, 0, sizeof(double) * {acc.numel()});")
            e.code(lay.planes(ow, ("const float* img", x, hw), ("double* g", acc, hw),
                              ("const float* d", dout, oh * ow)) +
                   f"for (int64_t a = 0; a < {oh}; ++a) for (int64_t b = 0; b < OW; ++b) {{ "
                   "float v = -INFINITY; int64_t at = -1; for (int64_t i = hs[a]; "
                   "i < he[a]; ++i) for (int64_t j = ws[b]; j < we[b]; ++j) { const float t = "
                   "img[(i * W + j) * ES]; if (at < 0 || t > v) { v = t; at = i * W + j; } } "
                   "if (at >= 0) g[at * ES] += (double)d[(a * OW + b) * ES]; } }")
            e.code(f"for (int64_t i = 0; i < {dx.numel()}; ++i) {dx}[i] = (float){acc}[i];")
        else:
            e.code(f"std::memset({dx}, 0, sizeof(float) * {dx.numel()});")
            e.code(lay.planes(ow, ("float* g", dx, hw), ("const float* d", dout, oh * ow)) +
                   f"for (int64_t a = 0; a < {oh}; ++a) for (int64_t b = 0; b < OW; ++b) {{ "
                   "const float v = d[(a * OW + b) * ES] / div[a * OW + b]; "
                   "for (int64_t i = hs[a]; i < he[a]; ++i) for (int64_t j = ws[b]; j < we[b]; "
                   "++j) g[(i * W + j) * ES] += v; } }")

    @staticmethod
    def cuda_emit(e):
        """One thread per input element gathering the windows that hold it, in the C++
        target's order (rows of windows, then columns): max adds each window's gradient
        where it is that window's first maximum (in double, as the kernel's bincount), avg
        the window's share."""
        x, dout = e.input("X"), e.input("Out@GRAD")
        e.require_float(x, dout)
        if x.ndim != 4 or channel_last(e.attr("data_format")):
            e.fail("not a 4-D NCHW X")
        if not (e.is_lit(x.dims[2]) and e.is_lit(x.dims[3])):
            e.fail("image size not known when compiling")
        h, w = int(x.dims[2]), int(x.dims[3])
        axes, div = _cuda_pool_windows(e, e.attrs, h, w)
        (sh, ph, kh, _, oh), (sw, pw, kw, _, ow) = axes
        dx = e.output("X@GRAD", x.dims)
        walk = (f"const int64_t nh = y + {ph} - {kh} + 1, nw = xx + {pw} - {kw} + 1; "
                f"const int64_t alo = nh > 0 ? (nh + {sh} - 1) / {sh} : 0, ahi = "
                f"(y + {ph}) / {sh} < {oh - 1} ? (y + {ph}) / {sh} : {oh - 1}; "
                f"const int64_t blo = nw > 0 ? (nw + {sw} - 1) / {sw} : 0, bhi = "
                f"(xx + {pw}) / {sw} < {ow - 1} ? (xx + {pw}) / {sw} : {ow - 1}; "
                f"for (int64_t a = alo; a <= ahi; ++a) for (int64_t b = blo; b <= bhi; ++b) {{ "
                f"{_cuda_window(axes, 'a', 'b')} if (y < i0 || y >= i1 || xx < j0 || xx >= j1) "
                f"continue; const float dv = d[a * {ow} + b];")
        if e.attr("pooling_type") == "max":
            body = ("double acc = 0.0; " + walk + " float v = -INFINITY; int64_t at = -1; "
                    f"for (int64_t i = i0; i < i1; ++i) for (int64_t j = j0; j < j1; ++j) {{ "
                    f"const float t = img[i * {w} + j]; if (at < 0 || t > v) {{ v = t; "
                    f"at = i * {w} + j; }} }} if (at == y * {w} + xx) acc += (double)dv; }} "
                    f"{dx}[t] = (float)acc;")
        else:
            body = ("float acc = 0.0f; " + walk + f" acc += dv / {_cuda_divisor(div)}; }} "
                    f"{dx}[t] = acc;")
        e.code(f"fl::cu::each({dx.numel()}, [=] __device__ (int64_t t) {{ const int64_t "
               f"xx = t % {w}, y = (t / {w}) % {h}, pl = t / {h * w}; const float* img = "
               f"{x} + pl * {h * w}; const float* d = {dout} + pl * {oh * ow}; {body} }});")


# --- max_pool2d_with_index -----------------------------------------------------------------
def _pool_with_index_attrs(attrs):
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

    @staticmethod
    def emit(e):
        """Each window's first maximum (strictly greater replaces, as the kernel's tap by
        tap scan) and its position i * W + j in the plane as Mask."""
        x = e.input("X")
        e.require_float(x)
        attrs = _pool_with_index_attrs(e.attrs)
        lay = _PoolLayout(e, x, attrs)
        tables, (oh, ow) = _emit_pool_tables(e, attrs, lay.h, lay.w)
        out = e.output("Out", lay.dims(oh, ow))
        mask = e.output("Mask", lay.dims(oh, ow), "int32_t") if e.has_output("Mask") else None
        e.code(tables)
        pointers = [("const float* img", x, lay.h * lay.w), ("float* o", out, oh * ow)]
        if mask is not None:
            pointers.append(("int32_t* mk", mask, oh * ow))
        e.code(lay.planes(ow, *pointers) +
               f"for (int64_t a = 0; a < {oh}; ++a) for (int64_t b = 0; b < OW; ++b) {{ "
               "float v = -INFINITY; int64_t at = -1; for (int64_t i = hs[a]; i < he[a]; ++i) "
               "for (int64_t j = ws[b]; j < we[b]; ++j) { const float t = img[i * W + j]; "
               "if (at < 0 || t > v) { v = t; at = i * W + j; } } o[a * OW + b] = v; "
               + ("mk[a * OW + b] = (int32_t)at; " if mask else "") + "} }")

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

    @staticmethod
    def emit(e):
        """Each Out@GRAD element added to the X position its Mask names, in double (the
        kernel's bincount), then rounded to float."""
        x, mask, dout = e.input("X"), e.input("Mask"), e.input("Out@GRAD")
        e.require_float(x, dout)
        if mask.ctype != "int32_t":
            e.fail(f"Mask is {mask.ctype}")
        lay = _PoolLayout(e, x, {})
        oh, ow = dout.dims[2], dout.dims[3]
        if not (e.is_lit(oh) and e.is_lit(ow)):
            e.fail("output size not known when compiling")
        e.same_dims(mask, dout)
        dx = e.output("X@GRAD", x.dims)
        acc = e.scratch(x.dims, "double")
        hw, ohw = lay.h * lay.w, int(oh) * int(ow)
        e.code(f"std::memset({acc}, 0, sizeof(double) * {acc.numel()});")
        e.code(f"for (int64_t p = 0; p < {lay.n_planes}; ++p) for (int64_t q = 0; q < {ohw}; "
               f"++q) {{ const int64_t at = {mask}[p * {ohw} + q]; if (at >= 0 && at < {hw}) "
               f"{acc}[p * {hw} + at] += (double){dout}[p * {ohw} + q]; }}")
        e.code(f"for (int64_t i = 0; i < {dx.numel()}; ++i) {dx}[i] = (float){acc}[i];")
