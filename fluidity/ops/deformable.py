"""Deformable convolution (Fluid 1.8's deformable_conv, v2 with a modulation Mask, and
deformable_conv_v1 without one) and their gradients.

Each kernel tap k of output position p reads Input at its regular position (p * stride -
padding + k * dilation) moved by a learned fractional Offset, sampled bilinearly (a corner
outside the image reads 0; a position at or beyond -1 / the image size reads 0), and,
in v2, scaled by Mask. The channels split into `deformable_groups`, each with its own
offsets and masks. Once the taps are sampled into columns [N, C, K, P], the op is conv2d's
grouped matrix product.

Offset [N, 2 * dg * kh * kw, oh, ow]: channel 2 * k of a group is the row (h) offset of tap
k = i * kw + j, channel 2 * k + 1 its column (w) offset. Mask [N, dg * kh * kw, oh, ow].
"""
import numpy as np

from ..errors import ShapeError
from .registry import In, OpDef, Out, ints

_CORNERS = ((0, 0), (0, 1), (1, 0), (1, 1))


def deformable_out_size(n, k, s, p, d):
    return -1 if n < 0 else (n + 2 * p - (d * (k - 1) + 1)) // s + 1


def _geometry(attrs, xs, ws, offs, masks, op):
    """(oh, ow) of the op after checking Input/Filter/Offset/Mask shapes; ShapeError names
    the op and the shapes at fault."""
    strides, pads, dil = (list(attrs[a]) for a in ("strides", "paddings", "dilations"))
    groups, dg = attrs["groups"], attrs["deformable_groups"]
    if len(xs) != 4 or len(ws) != 4:
        raise ShapeError(f"{op}: Input {list(xs)} and Filter {list(ws)} must both be 4-D")
    if len(strides) != 2 or len(pads) != 2 or len(dil) != 2:
        raise ShapeError(f"{op}: strides {strides}, paddings {pads} and dilations {dil} must "
                         f"have 2 values each")
    if min(strides) <= 0 or min(dil) <= 0 or groups < 1 or dg < 1:
        raise ShapeError(f"{op}: strides {strides}, dilations {dil}, groups {groups} and "
                         f"deformable_groups {dg} must be positive")
    if xs[1] >= 0 and xs[1] != ws[1] * groups:
        raise ShapeError(f"{op}: Input {list(xs)} has {xs[1]} channels but Filter {list(ws)} "
                         f"with groups={groups} expects {ws[1] * groups}")
    if ws[0] >= 0 and ws[0] % groups:
        raise ShapeError(f"{op}: Filter {list(ws)} has {ws[0]} output channels, not divisible "
                         f"by groups={groups}")
    if xs[1] >= 0 and xs[1] % dg:
        raise ShapeError(f"{op}: {xs[1]} input channels are not divisible by "
                         f"deformable_groups={dg}")
    oh, ow = (deformable_out_size(xs[2 + i], ws[2 + i], strides[i], pads[i], dil[i])
              for i in range(2))
    if (xs[2] >= 0 and oh <= 0) or (xs[3] >= 0 and ow <= 0):
        raise ShapeError(f"{op}: output size {[oh, ow]} of Input {list(xs)} and Filter "
                         f"{list(ws)} is not positive")
    taps = ws[2] * ws[3]
    for slot, shape, per_tap in (("Offset", offs, 2), ("Mask", masks, 1)):
        if shape is None:
            continue
        want = [xs[0], dg * per_tap * taps, oh, ow]
        if len(shape) != 4 or any(a >= 0 and b >= 0 and a != b for a, b in zip(shape, want)):
            raise ShapeError(f"{op}: {slot} {list(shape)} must be {want} (N, deformable_groups "
                             f"* {per_tap} * kh * kw, output height, output width)")
    return oh, ow


def _positions(attrs, offset, kh, kw, oh, ow, dg):
    """Sampling rows and columns [N, dg, K, oh * ow] of every tap."""
    (sh, sw), (ph, pw), (dh, dw) = (attrs[a] for a in ("strides", "paddings", "dilations"))
    n = offset.shape[0]
    off = offset.reshape(n, dg, kh * kw, 2, oh * ow)
    ki, kj = np.divmod(np.arange(kh * kw), kw)
    oi, oj = np.divmod(np.arange(oh * ow), ow)
    base_h = (oi * sh - ph)[None, :] + (ki * dh)[:, None]          # [K, P]
    base_w = (oj * sw - pw)[None, :] + (kj * dw)[:, None]
    return base_h + off[:, :, :, 0], base_w + off[:, :, :, 1]


def _corners(h, w, height, width):
    """Per bilinear corner: (flat index, weight, d weight / dh, d weight / dw), with weight
    and derivatives zero where the corner or the sampling point is outside."""
    inside = (h > -1) & (w > -1) & (h < height) & (w < width)
    h0, w0 = np.floor(h), np.floor(w)
    lh, lw = h - h0, w - w0
    out = []
    for a, b in _CORNERS:
        hc, wc = h0 + a, w0 + b
        ok = inside & (hc >= 0) & (hc < height) & (wc >= 0) & (wc < width)
        fh, fw = (lh if a else 1 - lh), (lw if b else 1 - lw)
        dfh, dfw = (1.0 if a else -1.0), (1.0 if b else -1.0)
        idx = np.where(ok, hc * width + wc, 0).astype(np.int64)
        out.append((idx, np.where(ok, fh * fw, 0), np.where(ok, dfh * fw, 0),
                    np.where(ok, fh * dfw, 0)))
    return out


def _sample(xg, corners):
    """Bilinear samples [N, dg, cg, K, P] of xg [N, dg, cg, H * W]."""
    n, dg, cg, _ = xg.shape
    shape = corners[0][0].shape                                     # [N, dg, K, P]
    val = 0
    for idx, wt, _, _ in corners:
        v = np.take_along_axis(xg, idx.reshape(n, dg, 1, -1), axis=-1)
        val = val + v.reshape(n, dg, cg, *shape[2:]) * wt[:, :, None]
    return val


class _Plan:
    """What forward and backward share for one batch: the sampled columns and corners."""

    def __init__(self, attrs, x, offset, w):
        n, c, height, width = x.shape
        m, _, kh, kw = w.shape
        self.dg, self.groups = attrs["deformable_groups"], attrs["groups"]
        self.oh, self.ow = (deformable_out_size(x.shape[2 + i], w.shape[2 + i],
                                                attrs["strides"][i], attrs["paddings"][i],
                                                attrs["dilations"][i]) for i in range(2))
        h, wp = _positions(attrs, offset, kh, kw, self.oh, self.ow, self.dg)
        self.corners = _corners(h, wp, height, width)
        self.xg = x.reshape(n, self.dg, c // self.dg, height * width)
        self.val = _sample(self.xg, self.corners)                   # [N, dg, cg, K, P]
        self.k = kh * kw

    def columns(self, mask):
        cols = self.val if mask is None else self.val * mask[:, :, None]
        n, g = cols.shape[0], self.groups
        return cols.reshape(n, g, -1, self.oh * self.ow)            # [N, G, C/G*K, P]


def _check(attrs, x, offset, mask, w, op):
    _geometry(attrs, x.shape, w.shape, offset.shape, None if mask is None else mask.shape, op)


def _forward(attrs, x, offset, mask, w, op):
    _check(attrs, x, offset, mask, w, op)
    dg = attrs["deformable_groups"]
    plan = _Plan(attrs, x, offset, w)
    if mask is not None:
        mask = mask.reshape(x.shape[0], dg, plan.k, -1)
    cols = plan.columns(mask)
    g, m = attrs["groups"], w.shape[0]
    out = np.einsum("gmc,ngcp->ngmp", w.reshape(g, m // g, -1), cols)
    return np.ascontiguousarray(out.reshape(x.shape[0], m, plan.oh, plan.ow), dtype=x.dtype)


def _backward(attrs, x, offset, mask, w, dout, op):
    """(dInput, dOffset, dMask or None, dFilter)."""
    _check(attrs, x, offset, mask, w, op)
    n, c, height, width = x.shape
    m = w.shape[0]
    g, dg = attrs["groups"], attrs["deformable_groups"]
    plan = _Plan(attrs, x, offset, w)
    cg, k, p = c // dg, plan.k, plan.oh * plan.ow
    if mask is not None:
        mask = mask.reshape(n, dg, k, p)
    d = dout.reshape(n, g, m // g, p)
    dw = np.einsum("ngmp,ngcp->gmc", d, plan.columns(mask)).reshape(w.shape)
    dcols = np.einsum("gmc,ngmp->ngcp", w.reshape(g, m // g, -1), d)
    dcols = dcols.reshape(n, dg, cg, k, p)
    dmask = None if mask is None else (dcols * plan.val).sum(axis=2)     # [N, dg, K, P]
    dval = dcols if mask is None else dcols * mask[:, :, None]
    # input: each corner's weight times dval, summed into its pixel
    dx = np.zeros(n * dg * cg * height * width, dtype=np.float64)
    plane = (np.arange(n * dg * cg) * height * width).reshape(n, dg, cg, 1, 1)
    dh = dwv = 0
    for idx, wt, dwt_h, dwt_w in plan.corners:
        flat = (plane + idx[:, :, None]).ravel()
        dx += np.bincount(flat, weights=(dval * wt[:, :, None]).ravel(), minlength=dx.size)
        v = np.take_along_axis(plan.xg, idx.reshape(n, dg, 1, -1), axis=-1)
        v = v.reshape(n, dg, cg, k, p)
        dh = dh + (dval * v * dwt_h[:, :, None]).sum(axis=2)
        dwv = dwv + (dval * v * dwt_w[:, :, None]).sum(axis=2)
    doff = np.stack([dh, dwv], axis=3).reshape(offset.shape)       # [N, dg, K, 2, P]
    return (dx.reshape(x.shape).astype(x.dtype), doff.astype(offset.dtype),
            None if dmask is None else dmask.reshape(n, dg * k, plan.oh, plan.ow)
            .astype(x.dtype), dw.astype(w.dtype))


_ATTRS = {"strides": ints([1, 1]), "paddings": ints([0, 0]), "dilations": ints([1, 1]),
          "groups": 1, "deformable_groups": 1, "im2col_step": 64}


def _infer(ctx, op, with_mask):
    xs, ws, offs = (ctx.input_shape(s) for s in ("Input", "Filter", "Offset"))
    masks = ctx.input_shape("Mask") if with_mask else None
    try:
        oh, ow = _geometry({a: ctx.attr(a) for a in _ATTRS}, xs, ws, offs, masks, op)
    except ShapeError as e:
        ctx.fail(str(e))
    if ws[0] >= 0 and ws[0] % ctx.attr("deformable_groups"):
        ctx.fail(f"output num_filter {ws[0]} must divide deformable group size "
                 f"{ctx.attr('deformable_groups')}")
    ctx.set_output("Output", [xs[0], ws[0], oh, ow], ctx.input_dtype("Input"))


class DeformableConv(OpDef):
    type = "deformable_conv"
    inputs = (In("Input"), In("Offset"), In("Mask"), In("Filter"))
    outputs = (Out("Output"),)
    attrs = dict(_ATTRS)
    share_lod = None
    doc = ("Modulated deformable convolution (v2): each tap of the Filter reads Input at its "
           "position moved by Offset, sampled bilinearly and scaled by Mask. Input "
           "[N, C, H, W], Offset [N, 2*dg*kh*kw, oh, ow], Mask [N, dg*kh*kw, oh, ow], "
           "Filter [M, C/groups, kh, kw] -> Output [N, M, oh, ow].")

    @staticmethod
    def infer_shape(ctx):
        _infer(ctx, "deformable_conv", True)

    @classmethod
    def prepare(cls, attrs, outputs):
        def kernel(x, offset, mask, w):
            return _forward(attrs, x, offset, mask, w, "deformable_conv")
        return kernel

    grad = staticmethod(lambda g: g.op(
        "deformable_conv_grad",
        {"Input": g.input("Input"), "Offset": g.input("Offset"), "Mask": g.input("Mask"),
         "Filter": g.input("Filter"), "Output@GRAD": g.output_grad("Output")},
        {"Input@GRAD": g.input_grad("Input"), "Offset@GRAD": g.input_grad("Offset"),
         "Mask@GRAD": g.input_grad("Mask"), "Filter@GRAD": g.input_grad("Filter")},
        g.attrs()))


class DeformableConvGrad(OpDef):
    type = "deformable_conv_grad"
    inputs = (In("Input"), In("Offset"), In("Mask"), In("Filter"), In("Output@GRAD"))
    outputs = (Out("Input@GRAD", dispensable=True), Out("Offset@GRAD", dispensable=True),
               Out("Mask@GRAD", dispensable=True), Out("Filter@GRAD", dispensable=True))
    attrs = DeformableConv.attrs
    infer_shape = None
    share_lod = None

    @classmethod
    def prepare(cls, attrs, outputs):
        def kernel(x, offset, mask, w, dout):
            return _backward(attrs, x, offset, mask, w, dout, "deformable_conv_grad")
        return kernel


class DeformableConvV1(OpDef):
    type = "deformable_conv_v1"
    inputs = (In("Input"), In("Offset"), In("Filter"))
    outputs = (Out("Output"),)
    attrs = dict(_ATTRS)
    share_lod = None
    doc = ("Deformable convolution (v1): deformable_conv without a Mask (every tap weighs "
           "1).")

    @staticmethod
    def infer_shape(ctx):
        _infer(ctx, "deformable_conv_v1", False)

    @classmethod
    def prepare(cls, attrs, outputs):
        def kernel(x, offset, w):
            return _forward(attrs, x, offset, None, w, "deformable_conv_v1")
        return kernel

    grad = staticmethod(lambda g: g.op(
        "deformable_conv_v1_grad",
        {"Input": g.input("Input"), "Offset": g.input("Offset"), "Filter": g.input("Filter"),
         "Output@GRAD": g.output_grad("Output")},
        {"Input@GRAD": g.input_grad("Input"), "Offset@GRAD": g.input_grad("Offset"),
         "Filter@GRAD": g.input_grad("Filter")},
        g.attrs()))


class DeformableConvV1Grad(OpDef):
    type = "deformable_conv_v1_grad"
    inputs = (In("Input"), In("Offset"), In("Filter"), In("Output@GRAD"))
    outputs = (Out("Input@GRAD", dispensable=True), Out("Offset@GRAD", dispensable=True),
               Out("Filter@GRAD", dispensable=True))
    attrs = DeformableConvV1.attrs
    infer_shape = None
    share_lod = None

    @classmethod
    def prepare(cls, attrs, outputs):
        def kernel(x, offset, w, dout):
            dx, doff, _, dw = _backward(attrs, x, offset, None, w, dout,
                                        "deformable_conv_v1_grad")
            return dx, doff, dw
        return kernel
