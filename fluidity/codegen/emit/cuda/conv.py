"""CUDA emitters of conv2d and pool2d and their gradients (runtime/cuda_ops.h: im2col and
cuBLAS gemms per group; pooling one thread per element). NCHW, image sizes known when
compiling."""
import numpy as np

from ....ops.common import channel_last
from ....ops.conv import conv_geometry, conv_shape_error, pool_windows, resolve_padding
from .. import register
from ..conv import contiguous, emit_literal_nchw, grouped_gemm, runs


def _cuda_conv_geometry(e, x, w):
    """The device form of a conv's geometry: ((N, C, H, W, KH, KW, OH, OW, SH, SW, PT, PL,
    DH, DW), groups, M, [oh, ow]), N a C expression, the rest literal."""
    n, (c, h, wd), (m, cg, kh, kw) = emit_literal_nchw(e, x, w)
    groups = e.attr("groups")
    if conv_shape_error([1, c, h, wd], [m, cg, kh, kw], groups):
        e.fail(conv_shape_error([1, c, h, wd], [m, cg, kh, kw], groups))
    strides, pads, dil, (oh, ow) = conv_geometry(e.attrs, (h, wd), (kh, kw))
    return (n, c, h, wd, kh, kw, oh, ow, strides[0], strides[1], pads[0], pads[2], dil[0],
            dil[1]), groups, m, [oh, ow]


def _geom(g):
    """A fl::cu::Geom initializer of the geometry tuple."""
    return "fl::cu::Geom{" + ", ".join(str(v) for v in g) + "}"


def _cuda_pool_windows(e, attrs, h, w):
    """The device form of a pool's windows: per axis (stride, pad, ksize, size) such that
    window a covers [max(a*S - P, 0), min(a*S - P + K, n)), checked against the kernel's own
    tables (pool_windows), with the average's divisor rule ("area", or the literal of a
    fixed divisor); NotCompilable where the windows follow another rule (adaptive cells)."""
    ((ih, vh), (iw, vw)), ksize, adaptive = pool_windows(attrs, h, w)
    if adaptive:
        e.fail("adaptive pooling")
    if attrs["global_pooling"]:
        pads, strides = [0, 0, 0, 0], [1, 1]
    else:
        pads, _ = resolve_padding(attrs["padding_algorithm"], (h, w), ksize,
                                   [int(v) for v in attrs["strides"]], attrs["paddings"])
        strides = [int(v) for v in attrs["strides"]]
    axes = []
    for k, (idx, valid, n) in enumerate(((ih, vh, h), (iw, vw, w))):
        lo, hi = runs(idx, valid)
        s, p, kk = strides[k], pads[2 * k], int(ksize[k])
        want_lo = [max(a * s - p, 0) for a in range(len(lo))]
        want_hi = [min(a * s - p + kk, n) for a in range(len(lo))]
        if lo != want_lo or hi != want_hi or not contiguous(idx, valid):
            e.fail("pool windows the device form does not compute")
        axes.append((s, p, kk, n, len(lo)))
    exclusive = attrs.get("exclusive", True) or attrs["global_pooling"]
    div = "area" if exclusive else repr(float(np.float32(ksize[0] * ksize[1]))) + "f"
    return axes, div


def _pool_windows_of(e, x):
    """The windows and divisor of pooling float X, a 4-D NCHW image of sizes known when
    compiling (NotCompilable otherwise)."""
    e.require_float(x)
    if x.ndim != 4 or channel_last(e.attr("data_format")):
        e.fail("not a 4-D NCHW X")
    if not (e.is_lit(x.dims[2]) and e.is_lit(x.dims[3])):
        e.fail("image size not known when compiling")
    return _cuda_pool_windows(e, e.attrs, int(x.dims[2]), int(x.dims[3]))


def _axes(axes, div):
    """The fl::cu::PoolAxis initializers of both axes and the divisor (0: the window's area)."""
    ah, aw = ("fl::cu::PoolAxis{" + ", ".join(str(v) for v in ax) + "}" for ax in axes)
    return ah, aw, "0.0f" if div == "area" else div


@register("conv2d", "cuda")
@register("depthwise_conv2d", "cuda")
def conv2d(e):
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
    e.code(f"fl::cu::im2col({x}, {_geom(g)}, {cols});")
    e.code(grouped_gemm("fl::cu::gemm", groups, False, False, mg, ncol, ckk, w, ckk, cols,
                         ncol, tmp, ncol))
    e.code(f"fl::cu::conv_output({tmp}, {bias if bias is not None else 'nullptr'}, {out}, "
           f"{n}, {m}, {p});")


@register("conv2d_grad", "cuda")
@register("depthwise_conv2d_grad", "cuda")
def conv2d_grad(e):
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
    e.code(f"fl::cu::conv_dout({dout}, {d}, {n}, {m}, {p});")
    if e.has_output("Filter@GRAD"):
        cols = e.scratch([e.mul(groups, ckk), ncol])
        dwt = e.output("Filter@GRAD", w.dims)
        e.code(f"fl::cu::im2col({x}, {_geom(g)}, {cols});")
        e.code(grouped_gemm("fl::cu::gemm", groups, False, True, mg, ckk, ncol, d, ncol,
                             cols, ncol, dwt, ckk))
    if e.has_output("Input@GRAD"):
        dcols = e.scratch([e.mul(groups, ckk), ncol])
        dx = e.output("Input@GRAD", x.dims)
        e.code(grouped_gemm("fl::cu::gemm", groups, True, False, ckk, ncol, mg, w, ckk, d,
                             ncol, dcols, ncol))
        e.code(f"fl::cu::col2im_gather({dcols}, {_geom(g)}, {dx});")
    if e.has_output("Bias@GRAD") and bias is not None:
        db = e.output("Bias@GRAD", bias.dims)
        e.code(f"fl::cu::row_sums_double({d}, {db}, {m}, {ncol});")


@register("pool2d", "cuda")
def pool2d(e):
    """One thread per output element over its window, taps in the C++ target's order
    (max: the first maximum, NaN wins; avg: columns of each row summed, then divided
    as the kernel divides). NCHW."""
    x = e.input("X")
    axes, div = _pool_windows_of(e, x)
    oh, ow = axes[0][4], axes[1][4]
    out = e.output("Out", [x.dims[0], x.dims[1], str(oh), str(ow)])
    ah, aw, div = _axes(axes, div)
    e.code(f"fl::cu::pool2d({x}, {out}, {e.mul(x.dims[0], x.dims[1])}, {ah}, {aw}, "
           f"{'true' if e.attr('pooling_type') == 'max' else 'false'}, {div});")


@register("pool2d_grad", "cuda")
def pool2d_grad(e):
    """One thread per input element gathering the windows that hold it, in the C++
    target's order (rows of windows, then columns): max adds each window's gradient
    where it is that window's first maximum (in double, as the kernel's bincount), avg
    the window's share."""
    x, dout = e.input("X"), e.input("Out@GRAD")
    e.require_float(dout)
    axes, div = _pool_windows_of(e, x)
    dx = e.output("X@GRAD", x.dims)
    ah, aw, div = _axes(axes, div)
    e.code(f"fl::cu::pool2d_grad({x}, {dout}, {dx}, {e.mul(x.dims[0], x.dims[1])}, {ah}, {aw}, "
           f"{'true' if e.attr('pooling_type') == 'max' else 'false'}, {div});")
