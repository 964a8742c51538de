"""Box geometry for detection, as Paddle 1.8 defines it: prior and anchor generation
(prior_box, density_prior_box, anchor_generator), box encoding (box_coder,
box_decoder_and_assign), overlaps (iou_similarity), clipping (box_clip) and EAST's
polygon_box_transform. None of them has a gradient in Paddle.

Boxes are (xmin, ymin, xmax, ymax). A box is "normalized" when its coordinates are
fractions of the image; an unnormalized box (pixel indices) is one pixel wider than
xmax - xmin, which is why `box_normalized=False` adds 1 to widths and heights.
"""
import numpy as np

from ..core.tensor import LoDTensor
from ..errors import ExecutionError
from .registry import In, OpDef, Out, floats, ints

BOX_SIZE = 4


def box_area(b, normalized):
    """Area of boxes [..., 4]; 0 for a box whose max is below its min."""
    w, h = b[..., 2] - b[..., 0], b[..., 3] - b[..., 1]
    extra = 0 if normalized else 1
    area = (w + extra) * (h + extra)
    return np.where((w < 0) | (h < 0), 0, area)


def iou_matrix(a, b, normalized=True):
    """IoU of every box of `a` [N, 4] with every box of `b` [M, 4]: [N, M] (iou_similarity's
    arithmetic: widths and heights of the intersection clipped at 0)."""
    a, b = a[:, None, :], b[None, :, :]
    extra = 0 if normalized else 1
    area_a = (a[..., 2] - a[..., 0] + extra) * (a[..., 3] - a[..., 1] + extra)
    area_b = (b[..., 2] - b[..., 0] + extra) * (b[..., 3] - b[..., 1] + extra)
    iw = np.minimum(a[..., 2], b[..., 2]) - np.maximum(a[..., 0], b[..., 0]) + extra
    ih = np.minimum(a[..., 3], b[..., 3]) - np.maximum(a[..., 1], b[..., 1]) + extra
    inter = np.maximum(iw, 0) * np.maximum(ih, 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return inter / (area_a + area_b - inter)


def _check_boxes(ctx, slot, rank=2):
    s = ctx.input_shape(slot)
    if len(s) != rank or s[-1] not in (BOX_SIZE, -1):
        ctx.fail(f"{slot} must be a {rank}-D tensor of boxes [..., 4], got {s}")
    return s


class IouSimilarity(OpDef):
    type = "iou_similarity"
    inputs = (In("X"), In("Y"))
    outputs = (Out("Out"),)
    attrs = {"box_normalized": True}
    share_lod = "X"
    doc = ("Out[i, j] = area(X[i] & Y[j]) / area(X[i] | Y[j]) for boxes X [N, 4] (a "
           "LoDTensor: one sequence per image) and Y [M, 4].")

    @staticmethod
    def infer_shape(ctx):
        x, y = _check_boxes(ctx, "X"), _check_boxes(ctx, "Y")
        ctx.set_output("Out", [x[0], y[0]], ctx.input_dtype("X"), ctx.input_lod_level("X"))

    @staticmethod
    def kernel(x, y, *, box_normalized):
        return iou_matrix(x, y, box_normalized).astype(x.dtype, copy=False)


# --- box_coder ------------------------------------------------------------------------------
def _center_size(b, normalized):
    """(center x, center y, width, height) of boxes [..., 4]."""
    extra = 0 if normalized else 1
    w, h = b[..., 2] - b[..., 0] + extra, b[..., 3] - b[..., 1] + extra
    return b[..., 0] + w / 2, b[..., 1] + h / 2, w, h


def encode_center_size(target, prior, var, normalized):
    """[N, M, 4] offsets of each target box [N, 4] from each prior [M, 4], divided by the
    variances `var` ([M, 4], [4] or None)."""
    px, py, pw, ph = _center_size(prior[None, :, :], normalized)
    extra = 0 if normalized else 1
    t = target[:, None, :]
    tx, ty = (t[..., 2] + t[..., 0]) / 2, (t[..., 3] + t[..., 1]) / 2
    tw, th = t[..., 2] - t[..., 0] + extra, t[..., 3] - t[..., 1] + extra
    with np.errstate(divide="ignore"):
        out = np.stack([(tx - px) / pw, (ty - py) / ph, np.log(np.abs(tw / pw)),
                        np.log(np.abs(th / ph))], axis=-1)
    if var is not None:
        out = out / (var[None, :, :] if var.ndim == 2 else var)
    return out


def decode_center_size(target, prior, var, normalized, axis):
    """Boxes [N, M, 4] from offsets `target` [N, M, 4] against priors [M, 4] (axis 0: prior j
    for column j) or [N, 4] (axis 1: prior i for row i)."""
    p = prior[None, :, :] if axis == 0 else prior[:, None, :]
    px, py, pw, ph = _center_size(p, normalized)
    if var is None:
        v = np.ones(4, target.dtype)
    elif var.ndim == 1:
        v = var
    else:
        v = var[None, :, :] if axis == 0 else var[:, None, :]
    v = np.broadcast_to(v, target.shape)
    cx = v[..., 0] * target[..., 0] * pw + px
    cy = v[..., 1] * target[..., 1] * ph + py
    w = np.exp(v[..., 2] * target[..., 2]) * pw
    h = np.exp(v[..., 3] * target[..., 3]) * ph
    extra = 0 if normalized else 1
    return np.stack([cx - w / 2, cy - h / 2, cx + w / 2 - extra, cy + h / 2 - extra], axis=-1)


class BoxCoder(OpDef):
    type = "box_coder"
    inputs = (In("PriorBox"), In("PriorBoxVar", dispensable=True), In("TargetBox"))
    outputs = (Out("OutputBox"),)
    attrs = {"code_type": "encode_center_size", "box_normalized": True, "axis": 0,
             "variance": floats()}
    kind = "value"
    share_lod = None
    doc = ("encode_center_size: OutputBox[i, j] = ((tx - px) / pw, (ty - py) / ph, "
           "log(tw / pw), log(th / ph)) / variance for target box i and prior j; "
           "decode_center_size: the inverse, from offsets TargetBox [N, M, 4]. The variance is "
           "PriorBoxVar [M, 4] or the attribute `variance` (4 numbers), not both.")

    @staticmethod
    def infer_shape(ctx):
        code, axis = ctx.attr("code_type"), ctx.attr("axis")
        prior, target = ctx.input_shape("PriorBox"), ctx.input_shape("TargetBox")
        if len(prior) != 2 or prior[1] not in (BOX_SIZE, -1):
            ctx.fail(f"PriorBox must be [M, 4], got {prior}")
        if ctx.has_input("PriorBoxVar"):
            var = ctx.input_shape("PriorBoxVar")
            if var != prior and not (len(var) == 2 and -1 in var + prior):
                ctx.fail(f"PriorBoxVar {var} must have PriorBox's shape {prior}")
        dtype = ctx.input_dtype("PriorBox")
        if code == "encode_center_size":
            if len(target) != 2 or target[1] not in (BOX_SIZE, -1):
                ctx.fail(f"TargetBox must be [N, 4] to encode, got {target}")
            ctx.set_output("OutputBox", [target[0], prior[0], BOX_SIZE], dtype,
                           ctx.input_lod_level("TargetBox"))
        elif code == "decode_center_size":
            if len(target) != 3:
                ctx.fail(f"TargetBox must be [N, M, 4] to decode, got {target}")
            if axis not in (0, 1):
                ctx.fail(f"axis must be 0 or 1, got {axis}")
            lod_from = "PriorBox" if axis == 1 else "TargetBox"
            ctx.set_output("OutputBox", target, dtype, ctx.input_lod_level(lod_from))
        else:
            ctx.fail(f"code_type must be encode_center_size or decode_center_size, got {code!r}")

    @staticmethod
    def kernel(prior, prior_var, target, *, code_type, box_normalized, axis, variance):
        p, t = prior._array, target._array
        var = prior_var._array if prior_var is not None else None
        if var is not None and len(variance):
            raise ExecutionError("box_coder: PriorBoxVar and the attribute variance cannot be "
                                 "given together")
        if len(variance) and len(variance) != BOX_SIZE:
            raise ExecutionError(f"box_coder: variance must have 4 numbers, got {variance}")
        if var is None and len(variance):
            var = np.asarray(variance, p.dtype)
        if code_type == "encode_center_size":
            if t.ndim != 2 or p.ndim != 2:
                raise ExecutionError(f"box_coder: to encode, TargetBox must be [N, 4] and "
                                     f"PriorBox [M, 4], got {list(t.shape)} and {list(p.shape)}")
            out = encode_center_size(t, p, var, box_normalized)
            return LoDTensor(out.astype(p.dtype), target._lod)
        want = t.shape[1] if axis == 0 else t.shape[0]
        if t.ndim != 3 or len(p) != want or t.shape[2] != p.shape[1]:
            raise ExecutionError(f"box_coder: to decode along axis {axis}, TargetBox "
                                 f"{list(t.shape)} must have PriorBox's {len(p)} boxes in dim "
                                 f"{1 - axis} and {p.shape[1]} coordinates")
        out = decode_center_size(t, p, var, box_normalized, axis)
        return LoDTensor(out.astype(p.dtype), prior._lod if axis == 1 else target._lod)


class BoxDecoderAndAssign(OpDef):
    type = "box_decoder_and_assign"
    inputs = (In("PriorBox"), In("PriorBoxVar"), In("TargetBox"), In("BoxScore"))
    outputs = (Out("DecodeBox"), Out("OutputAssignBox"))
    attrs = {"box_clip": 4.135}
    share_lod = "TargetBox"
    doc = ("DecodeBox[i, c] = the box of class c decoded from TargetBox [N, C * 4] against "
           "prior i (unnormalized, log-size deltas clipped at box_clip); OutputAssignBox[i] = "
           "the decoded box of the best scoring non-background class (the prior if none).")

    @staticmethod
    def infer_shape(ctx):
        t, s = ctx.input_shape("TargetBox"), ctx.input_shape("BoxScore")
        if len(t) != 2 or len(s) != 2:
            ctx.fail(f"TargetBox and BoxScore must be 2-D, got {t} and {s}")
        dtype = ctx.input_dtype("PriorBox")
        lod = ctx.input_lod_level("TargetBox")
        ctx.set_output("DecodeBox", t, dtype, lod)
        ctx.set_output("OutputAssignBox", [t[0], BOX_SIZE], dtype, lod)

    @staticmethod
    def kernel(prior, prior_var, target, score, *, box_clip):
        n, classes = score.shape
        if target.shape != (n, classes * BOX_SIZE) or len(prior) != n:
            raise ExecutionError(f"box_decoder_and_assign: TargetBox {list(target.shape)} must "
                                 f"be [N, classes * 4] for BoxScore {list(score.shape)} and "
                                 f"PriorBox {list(prior.shape)}")
        d = target.reshape(n, classes, BOX_SIZE)
        var = prior_var.reshape(-1)[:BOX_SIZE]
        pw = prior[:, 2] - prior[:, 0] + 1
        ph = prior[:, 3] - prior[:, 1] + 1
        px, py = prior[:, 0] + pw / 2, prior[:, 1] + ph / 2
        dw = np.minimum(var[2] * d[..., 2], box_clip)
        dh = np.minimum(var[3] * d[..., 3], box_clip)
        cx = var[0] * d[..., 0] * pw[:, None] + px[:, None]
        cy = var[1] * d[..., 1] * ph[:, None] + py[:, None]
        w, h = np.exp(dw) * pw[:, None], np.exp(dh) * ph[:, None]
        boxes = np.stack([cx - w / 2, cy - h / 2, cx + w / 2 - 1, cy + h / 2 - 1], axis=-1)
        # the best class after the background (0), if any scores above -1 (Paddle's start)
        fg = score[:, 1:]
        best = (np.argmax(fg, axis=1) + 1) if classes > 1 else np.zeros(n, np.int64)
        found = (fg.max(axis=1) > -1) if classes > 1 else np.zeros(n, bool)
        assign = np.where(found[:, None], boxes[np.arange(n), best], prior[:, :BOX_SIZE])
        return boxes.reshape(n, -1).astype(prior.dtype), assign.astype(prior.dtype)


# --- priors and anchors ---------------------------------------------------------------------
def expand_aspect_ratios(ratios, flip):
    """1.0, then each ratio not already there (within 1e-6), and its inverse when `flip`."""
    out = [1.0]
    for r in ratios:
        if any(abs(r - o) < 1e-6 for o in out):
            continue
        out.append(float(r))
        if flip:
            out.append(1.0 / r)
    return out


def _steps(attrs, feature, image):
    """(step_w, step_h): the attributes, or image size / feature size when either is 0."""
    sw, sh = attrs["step_w"], attrs["step_h"]
    if sw == 0 or sh == 0:
        return image[1] / feature[1], image[0] / feature[0]
    return sw, sh


def prior_sizes(min_sizes, max_sizes, ratios, min_max_order):
    """(width, height) of each prior at one position, in Paddle's order."""
    sizes = []
    for s, mn in enumerate(min_sizes):
        by_ratio = [(mn * np.sqrt(r), mn / np.sqrt(r)) for r in ratios]
        big = [(np.sqrt(mn * max_sizes[s]),) * 2] if len(max_sizes) else []
        if min_max_order:
            sizes += [(mn, mn)] + big + [wh for wh, r in zip(by_ratio, ratios)
                                         if abs(r - 1.0) >= 1e-6]
        else:
            sizes += by_ratio + big
    return np.asarray(sizes, np.float64)


def _grid_boxes(centers_x, centers_y, sizes, img_w, img_h):
    """[H, W, P, 4] boxes of sizes [P, 2] centred at each grid point, over the image size."""
    cx = centers_x[None, :, None]
    cy = centers_y[:, None, None]
    hw, hh = sizes[:, 0] / 2, sizes[:, 1] / 2
    return np.stack(np.broadcast_arrays((cx - hw) / img_w, (cy - hh) / img_h,
                                        (cx + hw) / img_w, (cy + hh) / img_h), axis=-1)


def _check_variances(op, variances):
    if len(variances) != BOX_SIZE or any(v <= 0 for v in variances):
        raise ExecutionError(f"{op}: variances must be 4 positive numbers, got {variances}")


class PriorBox(OpDef):
    type = "prior_box"
    inputs = (In("Input", no_grad=True), In("Image", no_grad=True))
    outputs = (Out("Boxes"), Out("Variances"))
    attrs = {"min_sizes": floats(), "max_sizes": floats(), "aspect_ratios": floats(),
             "variances": floats(), "flip": True, "clip": True, "step_w": 0.0, "step_h": 0.0,
             "offset": 0.5, "min_max_aspect_ratios_order": False, "use_mkldnn": False,
             "use_quantizer": False}
    share_lod = None
    doc = ("SSD prior boxes [H, W, num_priors, 4] (normalized to Image) at each position of "
           "Input's H x W grid, one per min_size and aspect ratio (and per max_size: the square "
           "of side sqrt(min * max)); Variances the same shape, filled with `variances`.")

    @staticmethod
    def infer_shape(ctx):
        x, img = ctx.input_shape("Input"), ctx.input_shape("Image")
        if len(x) != 4 or len(img) != 4:
            ctx.fail("Input and Image must be 4-D (NCHW)")
        mins, maxs = ctx.attr("min_sizes"), ctx.attr("max_sizes")
        if not mins:
            ctx.fail("min_sizes must not be empty")
        if maxs and (len(maxs) != len(mins) or any(b <= a for a, b in zip(mins, maxs))):
            ctx.fail(f"max_sizes {list(maxs)} must pair with min_sizes {list(mins)}, each "
                     f"greater")
        n = len(expand_aspect_ratios(ctx.attr("aspect_ratios"), ctx.attr("flip"))) * len(mins)
        n += len(maxs)
        for slot in ("Boxes", "Variances"):
            ctx.set_output(slot, [x[2], x[3], n, BOX_SIZE], ctx.input_dtype("Input"), 0)

    @classmethod
    def prepare(cls, attrs, outputs):
        ratios = expand_aspect_ratios(attrs["aspect_ratios"], attrs["flip"])
        sizes = prior_sizes(attrs["min_sizes"], attrs["max_sizes"], ratios,
                            attrs["min_max_aspect_ratios_order"])
        variances, offset = list(attrs["variances"]), attrs["offset"]
        _check_variances("prior_box", variances)

        def kernel(x, image):
            fh, fw = x.shape[2:]
            ih, iw = image.shape[2:]
            sw, sh = _steps(attrs, (fh, fw), (ih, iw))
            boxes = _grid_boxes((np.arange(fw) + offset) * sw, (np.arange(fh) + offset) * sh,
                                sizes, iw, ih)
            if attrs["clip"]:
                boxes = np.clip(boxes, 0.0, 1.0)
            var = np.broadcast_to(np.asarray(variances), boxes.shape)
            return boxes.astype(x.dtype), np.ascontiguousarray(var, x.dtype)
        return kernel


class DensityPriorBox(OpDef):
    type = "density_prior_box"
    inputs = (In("Input", no_grad=True), In("Image", no_grad=True))
    outputs = (Out("Boxes"), Out("Variances"))
    attrs = {"variances": floats(), "clip": True, "flatten_to_2d": False, "step_w": 0.0,
             "step_h": 0.0, "offset": 0.5, "fixed_sizes": floats(), "fixed_ratios": floats(),
             "densities": ints()}
    share_lod = None
    doc = ("Prior boxes laid densely: for each fixed_size s (with density d) and fixed ratio, "
           "a d x d grid of boxes inside each step cell; [H, W, num_priors, 4], or "
           "[H * W * num_priors, 4] with flatten_to_2d.")

    @staticmethod
    def infer_shape(ctx):
        x, img = ctx.input_shape("Input"), ctx.input_shape("Image")
        if len(x) != 4 or len(img) != 4:
            ctx.fail("Input and Image must be 4-D (NCHW)")
        sizes, dens = ctx.attr("fixed_sizes"), ctx.attr("densities")
        if len(sizes) != len(dens):
            ctx.fail(f"fixed_sizes {list(sizes)} and densities {list(dens)} must have the same "
                     f"length")
        n = sum(len(ctx.attr("fixed_ratios")) * d * d for d in dens)
        if ctx.attr("flatten_to_2d"):
            shape = [x[2] * x[3] * n if x[2] > 0 and x[3] > 0 else -1, BOX_SIZE]
        else:
            shape = [x[2], x[3], n, BOX_SIZE]
        for slot in ("Boxes", "Variances"):
            ctx.set_output(slot, shape, ctx.input_dtype("Input"), 0)

    @classmethod
    def prepare(cls, attrs, outputs):
        variances = list(attrs["variances"])
        _check_variances("density_prior_box", variances)
        sizes, ratios = list(attrs["fixed_sizes"]), list(attrs["fixed_ratios"])
        dens = [int(d) for d in attrs["densities"]]

        def kernel(x, image):
            fh, fw = x.shape[2:]
            ih, iw = image.shape[2:]
            sw, sh = _steps(attrs, (fh, fw), (ih, iw))
            step_avg = int((sw + sh) * 0.5)
            cx = (np.arange(fw) + attrs["offset"]) * sw
            cy = (np.arange(fh) + attrs["offset"]) * sh
            parts = []
            for size, d in zip(sizes, dens):
                shift = step_avg // d
                for r in ratios:
                    bw, bh = size * np.sqrt(r), size / np.sqrt(r)
                    grid = np.arange(d) * shift - step_avg / 2.0 + shift / 2.0
                    # d x d centres per cell: rows (di) outer, columns (dj) inner
                    ox = np.tile(grid, d)
                    oy = np.repeat(grid, d)
                    x0 = (cx[None, :, None] + ox) - bw / 2
                    y0 = (cy[:, None, None] + oy) - bh / 2
                    x1, y1 = x0 + bw, y0 + bh
                    parts.append(np.stack(np.broadcast_arrays(
                        np.maximum(x0 / iw, 0), np.maximum(y0 / ih, 0),
                        np.minimum(x1 / iw, 1), np.minimum(y1 / ih, 1)), axis=-1))
            boxes = (np.concatenate(parts, axis=2) if parts
                     else np.zeros((fh, fw, 0, BOX_SIZE)))
            if attrs["clip"]:
                boxes = np.clip(boxes, 0.0, 1.0)
            if attrs["flatten_to_2d"]:
                boxes = boxes.reshape(-1, BOX_SIZE)
            var = np.broadcast_to(np.asarray(variances), boxes.shape)
            return boxes.astype(x.dtype), np.ascontiguousarray(var, x.dtype)
        return kernel


class AnchorGenerator(OpDef):
    type = "anchor_generator"
    inputs = (In("Input", no_grad=True),)
    outputs = (Out("Anchors"), Out("Variances"))
    attrs = {"anchor_sizes": floats(), "aspect_ratios": floats(), "variances": floats(),
             "stride": floats([16.0, 16.0]), "offset": 0.5}
    share_lod = None
    doc = ("Faster R-CNN anchors [H, W, num_anchors, 4] in pixels, one per aspect ratio and "
           "anchor size at each position of Input's grid (stride apart); Variances the same "
           "shape, filled with `variances`.")

    @staticmethod
    def infer_shape(ctx):
        x = ctx.input_shape("Input")
        if len(x) != 4:
            ctx.fail(f"Input must be 4-D (NCHW), got {x}")
        sizes = ctx.attr("anchor_sizes")
        if not sizes or any(s <= 0 for s in sizes):
            ctx.fail(f"anchor_sizes must be positive numbers, got {list(sizes)}")
        n = len(ctx.attr("aspect_ratios")) * len(sizes)
        for slot in ("Anchors", "Variances"):
            ctx.set_output(slot, [x[2], x[3], n, BOX_SIZE], ctx.input_dtype("Input"), 0)

    @classmethod
    def prepare(cls, attrs, outputs):
        variances = list(attrs["variances"])
        _check_variances("anchor_generator", variances)
        sw, sh = attrs["stride"][:2]
        sizes = []
        for ar in attrs["aspect_ratios"]:
            for size in attrs["anchor_sizes"]:
                base_w = np.round(np.sqrt(sw * sh / ar))
                base_h = np.round(base_w * ar)
                sizes.append((size / sw * base_w, size / sh * base_h))
        sizes = np.asarray(sizes, np.float64).reshape(-1, 2)
        offset = attrs["offset"]

        def kernel(x):
            fh, fw = x.shape[2:]
            cx = np.arange(fw) * sw + offset * (sw - 1)
            cy = np.arange(fh) * sh + offset * (sh - 1)
            half_w, half_h = 0.5 * (sizes[:, 0] - 1), 0.5 * (sizes[:, 1] - 1)
            anchors = np.stack(np.broadcast_arrays(
                cx[None, :, None] - half_w, cy[:, None, None] - half_h,
                cx[None, :, None] + half_w, cy[:, None, None] + half_h), axis=-1)
            var = np.broadcast_to(np.asarray(variances), anchors.shape)
            return anchors.astype(x.dtype), np.ascontiguousarray(var, x.dtype)
        return kernel


# --- clipping and EAST's geometry ----------------------------------------------------------
class BoxClip(OpDef):
    type = "box_clip"
    inputs = (In("Input"), In("ImInfo"))
    outputs = (Out("Output"),)
    attrs = {}
    kind = "value"
    share_lod = None
    doc = ("Boxes of image i (the i-th sequence of Input's LoD) clipped to [0, W - 1] x [0, "
           "H - 1], where H, W = round(ImInfo[i][0:2] / ImInfo[i][2]) (the original size).")

    @staticmethod
    def infer_shape(ctx):
        s, im = ctx.input_shape("Input"), ctx.input_shape("ImInfo")
        if s[-1] not in (BOX_SIZE, -1):
            ctx.fail(f"Input's last dimension must be 4, got {s}")
        if len(im) != 2 or im[1] not in (3, -1):
            ctx.fail(f"ImInfo must be [N, 3] (height, width, scale), got {im}")
        ctx.set_output("Output", s, ctx.input_dtype("Input"), ctx.input_lod_level("Input"))

    @staticmethod
    def kernel(boxes, im_info):
        b, im = boxes._array, np.asarray(im_info._array)
        lod = boxes._lod[-1] if boxes._lod else [0, len(b)]
        if len(lod) - 1 != len(im):
            raise ExecutionError(f"box_clip: Input has {len(lod) - 1} images (its LoD) but "
                                 f"ImInfo has {len(im)}")
        out = np.empty_like(b)
        for i in range(len(im)):
            h = np.round(im[i, 0] / im[i, 2])
            w = np.round(im[i, 1] / im[i, 2])
            part = b[lod[i]:lod[i + 1]]
            limit = np.array([w, h, w, h], b.dtype) - 1
            out[lod[i]:lod[i + 1]] = np.maximum(np.minimum(part, limit), 0)
        return LoDTensor(out, boxes._lod)


class PolygonBoxTransform(OpDef):
    type = "polygon_box_transform"
    inputs = (In("Input"),)
    outputs = (Out("Output"),)
    attrs = {}
    share_lod = None
    doc = ("EAST's geometry map to coordinates: Output[n, c, h, w] = 4 * w - Input[n, c, h, w] "
           "for even c (x offsets), 4 * h - Input[n, c, h, w] for odd c (y offsets).")

    @staticmethod
    def infer_shape(ctx):
        s = ctx.input_shape("Input")
        if len(s) != 4:
            ctx.fail(f"Input must be 4-D, got {s}")
        if s[1] > 0 and s[1] % 2:
            ctx.fail(f"Input's second dimension must be even, got {s[1]}")
        ctx.set_output("Output", s, ctx.input_dtype("Input"), 0)

    @staticmethod
    def kernel(x):
        n, c, h, w = x.shape
        grid = np.where((np.arange(c) % 2 == 0)[:, None, None],
                        np.arange(w)[None, None, :] * 4, np.arange(h)[None, :, None] * 4)
        return (grid[None] - x).astype(x.dtype)
