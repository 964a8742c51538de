"""generate_mask_labels: Mask R-CNN's mask-branch targets. Per image, each foreground RoI
(LabelsInt32 > 0) takes the ground-truth object whose polygons' bounding box it overlaps
most, and that object's polygons are rasterized inside the RoI to a resolution x resolution
binary mask, placed in the RoI's class's block of a num_classes * resolution^2 row (-1
elsewhere: "don't care"). An image with no foreground RoI gives one row for its first
background RoI, all -1.

Polygons are rasterized as COCO's mask API does (`rleFrPoly`, which Fluid 1.x follows):
the polygon is upsampled 5x, its edges walked pixel by pixel, the points where an edge
crosses a pixel column's centre kept as column-major boundary positions, and the mask is
the run-length parity between them. Everything rounds as that code does (double
arithmetic, truncation toward zero), so masks match Fluid's bit for bit.
"""
import numpy as np

from ..core.tensor import LoDTensor
from ..errors import ExecutionError
from .anchor_targets import pixel_iou
from .registry import In, OpDef, Out

_UPSAMPLE = 5.0


def _edge_points(x, y):
    """The integer points (u, v) along the closed polygon (x, y) (upsampled corners), each
    edge walked one step per unit of its longer side, as COCO's rleFrPoly walks it."""
    us, vs = [], []
    for xs, ys, xe, ye in zip(x[:-1], y[:-1], x[1:], y[1:]):
        dx, dy = abs(xe - xs), abs(ye - ys)
        flip = (dx >= dy and xs > xe) or (dx < dy and ys > ye)
        if flip:
            xs, xe, ys, ye = xe, xs, ye, ys
        if dx >= dy:
            t = np.arange(dx + 1)
            t = dx - t if flip else t
            s = 0.0 if dx == 0 else (ye - ys) / dx
            us.append(t + xs)
            vs.append(np.trunc(ys + s * t + 0.5).astype(np.int64))
        else:
            t = np.arange(dy + 1)
            t = dy - t if flip else t
            s = 0.0 if dy == 0 else (xe - xs) / dy
            vs.append(t + ys)
            us.append(np.trunc(xs + s * t + 0.5).astype(np.int64))
    return np.concatenate(us), np.concatenate(vs)


def poly_to_mask(xy, h, w):
    """The [h, w] uint8 mask of one polygon `xy` (x0, y0, x1, y1, ... in mask pixels)."""
    xy = np.asarray(xy, np.float64).reshape(-1, 2)      # Fluid rounds in double
    x = np.trunc(_UPSAMPLE * xy[:, 0] + 0.5).astype(np.int64)
    y = np.trunc(_UPSAMPLE * xy[:, 1] + 0.5).astype(np.int64)
    u, v = _edge_points(np.append(x, x[0]), np.append(y, y[0]))
    # where the walk moves to another column: the crossing of that column's centre
    moved = np.nonzero(u[1:] != u[:-1])[0] + 1
    uj, up, vj, vp = u[moved], u[moved - 1], v[moved], v[moved - 1]
    xd = (np.where(uj < up, uj, uj - 1) + 0.5) / _UPSAMPLE - 0.5
    keep = (np.floor(xd) == xd) & (xd >= 0) & (xd <= w - 1)
    yd = (np.where(vj < vp, vj, vp) + 0.5) / _UPSAMPLE - 0.5
    yd = np.ceil(np.clip(yd, 0, h))
    pos = xd[keep].astype(np.int64) * h + yd[keep].astype(np.int64)
    # the runs between sorted boundary positions alternate 0, 1, 0, ...: a pixel is set
    # when an odd number of boundary positions lie at or before it (column-major order)
    toggles = np.bincount(pos, minlength=h * w + 1)[:h * w]
    return (np.cumsum(toggles) % 2).astype(np.uint8).reshape(w, h).T


def polys_to_mask_in_box(polys, box, m):
    """The [m, m] mask of an object's polygons (union) rasterized inside `box`, in float32
    as Fluid scales them."""
    box = np.asarray(box, np.float32)
    w = max(box[2] - box[0], np.float32(1))
    h = max(box[3] - box[1], np.float32(1))
    mask = np.zeros((m, m), np.uint8)
    for p in polys:
        p = np.asarray(p, np.float32).reshape(-1, 2)
        scaled = np.stack([(p[:, 0] - box[0]) * np.float32(m) / w,
                           (p[:, 1] - box[1]) * np.float32(m) / h], axis=1)
        mask |= poly_to_mask(scaled, m, m)
    return mask


def polys_boxes(objects):
    """[n, 4] tight boxes (x0, y0, x1, y1) of each object's polygons."""
    out = np.zeros((len(objects), 4), np.float32)
    for i, polys in enumerate(objects):
        pts = np.concatenate([np.asarray(p, np.float32).reshape(-1, 2) for p in polys])
        out[i] = [pts[:, 0].min(), pts[:, 1].min(), pts[:, 0].max(), pts[:, 1].max()]
    return out


def _lod_of(op, slot, t, levels):
    lod = t._lod
    if len(lod) != levels:
        raise ExecutionError(f"{op}: {slot} {list(t._array.shape)} needs {levels} level(s) "
                             f"of LoD, has {len(lod)}")
    return [list(map(int, level)) for level in lod]


class GenerateMaskLabels(OpDef):
    type = "generate_mask_labels"
    inputs = (In("ImInfo"), In("GtClasses"), In("IsCrowd"), In("GtSegms"), In("Rois"),
              In("LabelsInt32"))
    outputs = (Out("MaskRois"), Out("RoiHasMaskInt32"), Out("MaskInt32"))
    attrs = {"num_classes": 0, "resolution": 0}
    kind = "value"
    share_lod = None
    doc = ("Mask R-CNN's mask targets, per image: MaskRois the foreground Rois (or the first "
           "background one when an image has none), RoiHasMaskInt32 their index among the "
           "image's Rois, MaskInt32 [P, num_classes * resolution^2]: the polygons of the gt "
           "object (GtClasses > 0, not IsCrowd) whose box the RoI overlaps most, rasterized "
           "in the RoI, in its class's block; -1 elsewhere. GtSegms: [S, 2] points with 3 "
           "LoD levels (objects per image, polygons per object, points per polygon).")

    @staticmethod
    def infer_shape(ctx):
        info, segms = ctx.input_shape("ImInfo"), ctx.input_shape("GtSegms")
        if len(info) != 2:
            ctx.fail(f"ImInfo must be [batch, 3], got {list(info)}")
        if len(segms) != 2 or segms[1] != 2:
            ctx.fail(f"GtSegms must be [points, 2], got {list(segms)}")
        n, res = ctx.attr("num_classes"), ctx.attr("resolution")
        if n <= 0 or res <= 0:
            ctx.fail(f"num_classes ({n}) and resolution ({res}) must be positive")
        level = ctx.input_lod_level("Rois")
        ctx.set_output("MaskRois", [-1, 4], ctx.input_dtype("Rois"), level)
        ctx.set_output("RoiHasMaskInt32", [-1, 1], "int32", level)
        ctx.set_output("MaskInt32", [-1, n * res * res], "int32", level)

    @classmethod
    def prepare(cls, attrs, outputs):
        op, n_cls, res = cls.type, int(attrs["num_classes"]), int(attrs["resolution"])
        if n_cls <= 0 or res <= 0:
            raise ExecutionError(f"{op}: num_classes ({n_cls}) and resolution ({res}) must "
                                 f"be positive")
        width = n_cls * res * res

        def one_image(i, info, classes, crowd, objects, rois, labels):
            scale = np.float32(info[2])
            keep = np.nonzero((classes > 0) & (crowd == 0))[0]
            polys = [objects[j] for j in keep]
            fg = np.nonzero(labels > 0)[0]
            if len(fg):
                if not polys:
                    raise ExecutionError(f"{op}: image {i} has foreground RoIs but no "
                                         f"ground-truth object with a class > 0 that is "
                                         f"not crowd to take a mask from")
                boxes = rois[fg] / scale
                best = pixel_iou(boxes, polys_boxes(polys)).argmax(axis=1)
                masks = -np.ones((len(fg), width), np.int32)
                for r, (box, g, c) in enumerate(zip(boxes, best, labels[fg])):
                    masks[r, c * res * res:(c + 1) * res * res] = \
                        polys_to_mask_in_box(polys[g], box, res).reshape(-1)
                return boxes * scale, fg, masks
            bg = np.nonzero(labels == 0)[0]
            if not len(bg):
                raise ExecutionError(f"{op}: image {i} has no foreground and no background "
                                     f"RoI (every LabelsInt32 < 0)")
            return (rois[bg[:1]] / scale * scale, bg[:1],
                    -np.ones((1, width), np.int32))

        def kernel(info_t, cls_t, crowd_t, segms_t, rois_t, labels_t):
            info = info_t._array.reshape(-1, 3) if info_t._array.size % 3 == 0 else None
            if info is None:
                raise ExecutionError(f"{op}: ImInfo {list(info_t._array.shape)} must be "
                                     f"[batch, 3] (height, width, scale)")
            rois = rois_t._array
            if rois.ndim != 2 or rois.shape[1] != 4:
                raise ExecutionError(f"{op}: Rois {list(rois.shape)} must be [R, 4]")
            classes = cls_t._array.reshape(-1).astype(np.int64)
            crowd = crowd_t._array.reshape(-1)
            labels = labels_t._array.reshape(-1).astype(np.int64)
            points = segms_t._array
            if points.ndim != 2 or points.shape[1] != 2:
                raise ExecutionError(f"{op}: GtSegms {list(points.shape)} must be [S, 2]")
            (gl,) = _lod_of(op, "GtClasses", cls_t, 1)
            (rl,) = _lod_of(op, "Rois", rois_t, 1)
            objs, polys, pts = _lod_of(op, "GtSegms", segms_t, 3)
            n = len(gl) - 1
            checks = (("ImInfo", len(info), n), ("GtSegms' images", len(objs) - 1, n),
                      ("Rois' images", len(rl) - 1, n), ("IsCrowd", len(crowd), gl[-1]),
                      ("GtSegms' objects", objs[-1], gl[-1]),
                      ("LabelsInt32", len(labels), rl[-1]), ("Rois", len(rois), rl[-1]),
                      ("GtSegms' points", len(points), pts[-1]))
            for what, got, want in checks:
                if got != want:
                    raise ExecutionError(f"{op}: {what} has {got} rows/sequences where "
                                         f"GtClasses' and Rois' LoD say {want}")
            if labels.size and labels.max() >= n_cls:
                raise ExecutionError(f"{op}: LabelsInt32 holds class {int(labels.max())} but "
                                     f"num_classes is {n_cls}")
            objects = [[points[pts[p]:pts[p + 1]].reshape(-1) for p in range(polys[o],
                                                                               polys[o + 1])]
                       for o in range(len(polys) - 1)]
            if any(not len(p) for obj in objects for p in obj) or \
                    any(not obj for obj in objects):
                raise ExecutionError(f"{op}: GtSegms has an empty polygon or an object with "
                                     f"no polygon")
            parts, lod = [], [0]
            for i in range(n):
                if rl[i] == rl[i + 1]:
                    lod.append(lod[-1])
                    continue
                g = slice(gl[i], gl[i + 1])
                r = slice(rl[i], rl[i + 1])
                part = one_image(i, info[i], classes[g], crowd[g], objects[objs[i]:objs[i + 1]],
                                 rois[r], labels[r])
                parts.append(part)
                lod.append(lod[-1] + len(part[0]))
            lod = [lod]
            cat = [np.concatenate([p[k] for p in parts]) if parts else None for k in range(3)]
            if not parts:
                cat = [np.zeros((0, 4)), np.zeros(0), np.zeros((0, width))]
            return (LoDTensor(cat[0].reshape(-1, 4).astype(rois.dtype), lod),
                    LoDTensor(cat[1].reshape(-1, 1).astype(np.int32), lod),
                    LoDTensor(cat[2].reshape(-1, width).astype(np.int32), lod))
        return kernel
