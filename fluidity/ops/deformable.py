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

from ..core.tensor import LoDTensor
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
    step = attrs.get("im2col_step", 64)
    if xs[0] > step and xs[0] % step:
        raise ShapeError(f"{op}: Input batchsize must be smaller than or divide im2col_step. "
                         f"But received Input batchsize:[{xs[0]}], im2col_step:[{step}]")
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


# --- deformable_psroi_pooling -------------------------------------------------------------------
def _psroi_plan(attrs, x, rois_t, trans):
    """Sampling geometry of deformable (PS)RoI pooling, as Paddle's kernel: for every box r,
    output channel, bin (ph, pw) and sample (ih, iw) the four bilinear corners (flat indices
    into Input), their weights, the validity of the sample, and the box/part indices the
    Trans gradient needs."""
    from .roi import roi_batch_ids, round_half_away
    n, c, height, width = x.shape
    rois = rois_t._array.reshape(-1, 4).astype(np.float64)
    batch = roi_batch_ids("deformable_psroi_pooling", rois_t, n)
    ph_n, pw_n, s = attrs["pooled_height"], attrs["pooled_width"], attrs["sample_per_part"]
    out_dim, (gh_n, gw_n) = attrs["output_dim"], attrs["group_size"]
    part_h_n, part_w_n = attrs["part_size"]
    no_trans, scale = attrs["no_trans"], attrs["spatial_scale"]
    if c != out_dim * gh_n * gw_n:
        raise ShapeError(f"deformable_psroi_pooling: Input {list(x.shape)} must have "
                         f"output_dim * group_size = {out_dim * gh_n * gw_n} channels")
    n_cls = 1 if no_trans else trans.shape[1] // 2
    if not no_trans and (trans.shape[0] != len(rois) or trans.shape[2:] != (part_h_n, part_w_n)
                         or n_cls < 1 or out_dim % n_cls):
        raise ShapeError(f"deformable_psroi_pooling: Trans {list(trans.shape)} must be "
                         f"[{len(rois)}, 2 * classes, {part_h_n}, {part_w_n}] with classes "
                         f"dividing output_dim {out_dim}")
    per_cls = out_dim // n_cls
    r_ = np.arange(len(rois))
    start_w = round_half_away(rois[:, 0]) * scale - 0.5
    start_h = round_half_away(rois[:, 1]) * scale - 0.5
    roi_w = np.maximum((round_half_away(rois[:, 2]) + 1) * scale - 0.5 - start_w, 0.1)
    roi_h = np.maximum((round_half_away(rois[:, 3]) + 1) * scale - 0.5 - start_h, 0.1)
    bin_w, bin_h = roi_w / pw_n, roi_h / ph_n
    ph, pw = np.arange(ph_n), np.arange(pw_n)
    part_h = np.floor(ph / ph_n * part_h_n).astype(np.int64)
    part_w = np.floor(pw / pw_n * part_h_n).astype(np.int64)     # (Paddle: part_height here)
    cls = np.arange(out_dim) // per_cls
    if no_trans:
        tx = ty = np.zeros((len(rois), out_dim, ph_n, pw_n))
    else:
        t = trans.astype(np.float64)
        tx = t[r_[:, None, None, None], 2 * cls[None, :, None, None],
               part_h[None, None, :, None], part_w[None, None, None, :]] * attrs["trans_std"]
        ty = t[r_[:, None, None, None], 2 * cls[None, :, None, None] + 1,
               part_h[None, None, :, None], part_w[None, None, None, :]] * attrs["trans_std"]
    R = (slice(None), None, None, None)
    wstart = pw[None, None, None, :] * bin_w[R] + start_w[R] + tx * roi_w[R]
    hstart = ph[None, None, :, None] * bin_h[R] + start_h[R] + ty * roi_h[R]
    k = np.arange(s)
    w = wstart[..., None, None] + (k * (bin_w / s)[:, None])[:, None, None, None, None, :]
    h = hstart[..., None, None] + (k * (bin_h / s)[:, None])[:, None, None, None, :, None]
    w, h = np.broadcast_arrays(w, h)                       # [R, D, ph, pw, s(h), s(w)]
    valid = (w >= -0.5) & (w <= width - 0.5) & (h >= -0.5) & (h <= height - 0.5)
    w, h = np.clip(w, 0, width - 1), np.clip(h, 0, height - 1)
    x0, y0 = np.floor(w).astype(np.int64), np.floor(h).astype(np.int64)
    x1, y1 = np.ceil(w).astype(np.int64), np.ceil(h).astype(np.int64)
    dx, dy = w - x0, h - y0
    gw = np.clip(np.floor(pw * gw_n / pw_n).astype(np.int64), 0, gw_n - 1)
    gh = np.clip(np.floor(ph * gh_n / ph_n).astype(np.int64), 0, gh_n - 1)
    ch = (np.arange(out_dim)[:, None, None] * gh_n + gh[None, :, None]) * gw_n + gw[None, None, :]
    base = ((batch[:, None, None, None] * c + ch[None]) * height * width)[..., None, None]
    corners = [(base + y0 * width + x0, (1 - dx) * (1 - dy)),
               (base + y1 * width + x0, (1 - dx) * dy),
               (base + y0 * width + x1, dx * (1 - dy)),
               (base + y1 * width + x1, dx * dy)]
    return dict(corners=corners, valid=valid, dx=dx, dy=dy, roi_w=roi_w, roi_h=roi_h,
                cls=cls, part_h=part_h, part_w=part_w, n_cls=n_cls)


class DeformablePSROIPooling(OpDef):
    type = "deformable_psroi_pooling"
    inputs = (In("Input"), In("ROIs"), In("Trans"))
    outputs = (Out("TopCount", intermediate=True), Out("Output"))
    attrs = {"no_trans": False, "spatial_scale": 1.0, "output_dim": 1,
             "group_size": ints([1, 1]), "pooled_height": 1, "pooled_width": 1,
             "part_size": ints([1, 1]), "sample_per_part": 1, "trans_std": 0.1}
    kind = "value"
    share_lod = None
    doc = ("Deformable (position-sensitive) RoI pooling: each of pooled_height x "
           "pooled_width bins of a box (ROIs [R, 4], LoD per image, scaled by spatial_scale) "
           "moves by Trans [R, 2 * classes, part_size] times trans_std and the box size "
           "(unless no_trans), and averages sample_per_part^2 bilinear samples of its "
           "channel group. Output and TopCount (the samples inside the image) "
           "[R, output_dim, pooled_height, pooled_width].")

    @staticmethod
    def infer_shape(ctx):
        xs, rs = ctx.input_shape("Input"), ctx.input_shape("ROIs")
        if len(xs) != 4 or len(rs) != 2 or rs[1] not in (4, -1):
            ctx.fail(f"Input {xs} must be [N, C, H, W] and ROIs {rs} [R, 4]")
        gh, gw = ctx.attr("group_size")
        c = ctx.attr("output_dim") * gh * gw
        if xs[1] >= 0 and xs[1] != c:
            ctx.fail(f"Input {xs} must have output_dim * group_size = {c} channels")
        out = [rs[0], ctx.attr("output_dim"), ctx.attr("pooled_height"),
               ctx.attr("pooled_width")]
        ctx.set_output("Output", out, ctx.input_dtype("Input"))
        ctx.set_output("TopCount", out, ctx.input_dtype("Input"))

    @classmethod
    def prepare(cls, attrs, outputs):
        def kernel(x_t, rois_t, trans_t):
            x = x_t._array
            plan = _psroi_plan(attrs, x, rois_t, trans_t._array)
            flat = x.reshape(-1).astype(np.float64)
            val = sum(flat[idx] * wt for idx, wt in plan["corners"])
            val = np.where(plan["valid"], val, 0.0)
            count = plan["valid"].sum(axis=(-2, -1))
            with np.errstate(invalid="ignore", divide="ignore"):
                out = np.where(count > 0, val.sum(axis=(-2, -1)) / count, 0.0)
            return LoDTensor(count.astype(x.dtype)), LoDTensor(out.astype(x.dtype))
        return kernel

    grad = staticmethod(lambda g: g.op(
        "deformable_psroi_pooling_grad",
        {"Input": g.input("Input"), "ROIs": g.input("ROIs"), "Trans": g.input("Trans"),
         "TopCount": g.output("TopCount"), "Output@GRAD": g.output_grad("Output")},
        {"Input@GRAD": g.input_grad("Input"), "Trans@GRAD": g.input_grad("Trans")},
        g.attrs()))


class DeformablePSROIPoolingGrad(OpDef):
    type = "deformable_psroi_pooling_grad"
    inputs = (In("Input"), In("ROIs"), In("Trans"), In("TopCount"), In("Output@GRAD"))
    outputs = (Out("Input@GRAD", dispensable=True), Out("Trans@GRAD", dispensable=True))
    attrs = DeformablePSROIPooling.attrs
    kind = "value"
    infer_shape = None
    share_lod = None

    @classmethod
    def prepare(cls, attrs, outputs):
        def kernel(x_t, rois_t, trans_t, count_t, dout_t):
            x, trans = x_t._array, trans_t._array
            plan = _psroi_plan(attrs, x, rois_t, trans)
            count = plan["valid"].sum(axis=(-2, -1))
            dout = dout_t._array.astype(np.float64)
            with np.errstate(invalid="ignore", divide="ignore"):
                diff = np.where(count > 0, dout / count, 0.0)[..., None, None]
            diff = np.where(plan["valid"], diff, 0.0)
            dx = np.zeros(x.size)
            for idx, wt in plan["corners"]:
                dx += np.bincount(idx.ravel(), weights=(wt * diff).ravel(), minlength=x.size)
            dtrans = np.zeros(trans.shape)
            if not attrs["no_trans"]:
                flat = x.reshape(-1).astype(np.float64)
                (i00, _), (i01, _), (i10, _), (i11, _) = plan["corners"]
                u00, u01, u10, u11 = flat[i00], flat[i01], flat[i10], flat[i11]
                dxs, dys, std = plan["dx"], plan["dy"], attrs["trans_std"]
                gx = ((u11 - u01) * dys + (u10 - u00) * (1 - dys)) * std * diff
                gy = ((u11 - u10) * dxs + (u01 - u00) * (1 - dxs)) * std * diff
                gx = gx.sum(axis=(-2, -1)) * plan["roi_w"][:, None, None, None]
                gy = gy.sum(axis=(-2, -1)) * plan["roi_h"][:, None, None, None]
                r, d, ph, pw = np.meshgrid(np.arange(gx.shape[0]), np.arange(gx.shape[1]),
                                           np.arange(gx.shape[2]), np.arange(gx.shape[3]),
                                           indexing="ij")
                where = (r, 2 * plan["cls"][d], plan["part_h"][ph], plan["part_w"][pw])
                np.add.at(dtrans, where, gx)
                np.add.at(dtrans, (where[0], where[1] + 1, where[2], where[3]), gy)
            return (LoDTensor(dx.reshape(x.shape).astype(x.dtype)),
                    LoDTensor(dtrans.astype(trans.dtype)))
        return kernel
