"""Non-maximum suppression and proposal selection for detection, as Paddle 1.8 defines them:
multiclass_nms / multiclass_nms2 (SSD, YOLO and Faster R-CNN heads), generate_proposals
(RPN), FPN's distribute_fpn_proposals / collect_fpn_proposals, and RetinaNet's
retinanet_detection_output.

Outputs have as many rows as survive, so their LoD (one sequence per image) is the result;
they have no gradient in Paddle. Sorting is stable: among equal scores the lower index comes
first, as Paddle's stable sort orders them.
"""
import numpy as np

from ..core.tensor import LoDTensor
from ..errors import ExecutionError
from .boxes import BOX_SIZE
from .registry import In, OpDef, Out


def jaccard(box, boxes, normalized):
    """IoU of one box [4] with boxes [K, 4], as Paddle's NMS computes it (0 for boxes that do
    not touch; a box with max < min has area 0)."""
    extra = 0.0 if normalized else 1.0

    def area(b):
        w, h = b[..., 2] - b[..., 0], b[..., 3] - b[..., 1]
        return np.where((w < 0) | (h < 0), 0.0, (w + extra) * (h + extra))
    apart = ((boxes[:, 0] > box[2]) | (boxes[:, 2] < box[0]) | (boxes[:, 1] > box[3])
             | (boxes[:, 3] < box[1]))
    iw = np.minimum(box[2], boxes[:, 2]) - np.maximum(box[0], boxes[:, 0]) + extra
    ih = np.minimum(box[3], boxes[:, 3]) - np.maximum(box[1], boxes[:, 1]) + extra
    inter = iw * ih
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = inter / (area(box) + area(boxes) - inter)
    return np.where(apart, 0.0, iou)


def _shoelace(p):
    x, y = p[:, 0], p[:, 1]
    return 0.5 * (np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))


def _clip(subject, clip):
    """Sutherland-Hodgman: the part of polygon `subject` inside convex polygon `clip`."""
    sign = 1.0 if _shoelace(clip) >= 0 else -1.0
    out = list(subject)
    for a, b in zip(clip, np.roll(clip, -1, axis=0)):
        if not out:
            break

        def inside(p):
            return sign * ((b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0])) >= 0

        def cross(p, q):
            d1, d2 = q - p, b - a
            den = d1[0] * d2[1] - d1[1] * d2[0]
            t = ((a[0] - p[0]) * d2[1] - (a[1] - p[1]) * d2[0]) / den
            return p + t * d1
        pts, out = out, []
        for p, q in zip(pts, pts[1:] + pts[:1]):
            if inside(q):
                if not inside(p):
                    out.append(cross(p, q))
                out.append(q)
            elif inside(p):
                out.append(cross(p, q))
    return np.array(out) if len(out) >= 3 else None


def poly_iou(box, boxes):
    """IoU of one quadrilateral [8] (x1, y1, ..., x4, y4) with quadrilaterals [K, 8], for
    convex quadrilaterals (EAST's text boxes)."""
    p = box.reshape(4, 2).astype(np.float64)
    area = abs(_shoelace(p))
    res = np.zeros(len(boxes))
    for k, other in enumerate(boxes):
        q = other.reshape(4, 2).astype(np.float64)
        inter = _clip(p, q)
        ia = abs(_shoelace(inter)) if inter is not None else 0.0
        union = area + abs(_shoelace(q)) - ia
        res[k] = ia / union if union > 0 else 0.0
    return res


def overlap(box, boxes, normalized):
    """jaccard for boxes of 4 coordinates, poly_iou for quadrilaterals of 8."""
    return poly_iou(box, boxes) if box.shape[-1] == 8 else jaccard(box, boxes, normalized)


def nms(boxes, order, threshold, eta, normalized):
    """Indices of `order` (candidates, best first) kept by greedy NMS: a box is dropped when
    its IoU with a kept box exceeds the threshold, which is multiplied by `eta` after each
    kept box while it is above 0.5 (adaptive NMS)."""
    kept = []
    thr = threshold
    for idx in order:
        if kept:
            if (overlap(boxes[idx], boxes[kept], normalized) > thr).any():
                continue
        kept.append(int(idx))
        if eta < 1 and thr > 0.5:
            thr *= eta
    return kept


def top_scores(scores, threshold, top_k):
    """Indices of scores above `threshold`, best first (stable), at most top_k (-1: all)."""
    cand = np.nonzero(scores > threshold)[0]
    cand = cand[np.argsort(-scores[cand], kind="stable")]
    return cand[:top_k] if top_k > -1 else cand


# --- multiclass_nms -------------------------------------------------------------------------
class MulticlassNMS(OpDef):
    type = "multiclass_nms"
    inputs = (In("BBoxes"), In("Scores"))
    outputs = (Out("Out"),)
    attrs = {"background_label": 0, "score_threshold": 0.0, "nms_top_k": -1,
             "nms_threshold": 0.3, "nms_eta": 1.0, "keep_top_k": -1, "normalized": True}
    kind = "value"
    share_lod = None
    doc = ("Per image and class (but background_label): boxes scoring above score_threshold, "
           "the nms_top_k best, then greedy NMS at nms_threshold; then the keep_top_k best "
           "over all classes. Out [K, 6] rows (label, score, xmin, ymin, xmax, ymax), one LoD "
           "sequence per image; [[-1]] when nothing is kept. BBoxes [N, M, 4] with Scores "
           "[N, C, M] (boxes shared by the classes), or BBoxes [M, C, 4] with Scores [M, C] "
           "and a LoD over M (boxes per class).")

    @staticmethod
    def infer_shape(ctx):
        MulticlassNMS.check_shapes(ctx)
        b = ctx.input_shape("BBoxes")
        ctx.set_output("Out", [-1, b[2] + 2 if b[2] > 0 else -1], ctx.input_dtype("BBoxes"),
                       max(ctx.input_lod_level("BBoxes"), 1))

    @staticmethod
    def check_shapes(ctx):
        b, s = ctx.input_shape("BBoxes"), ctx.input_shape("Scores")
        if len(b) != 3:
            ctx.fail(f"BBoxes must be 3-D, got {b}")
        if len(s) == 3:
            if b[2] not in (BOX_SIZE, -1):
                ctx.fail(f"BBoxes' last dimension must be 4 (polygon boxes are not "
                         f"supported), got {b}")
            if -1 not in (b[1], s[2]) and b[1] != s[2]:
                ctx.fail(f"BBoxes' second dimension {b[1]} must be Scores' last {s[2]}")
        elif len(s) == 2:
            if b[2] not in (BOX_SIZE, -1):
                ctx.fail(f"BBoxes' last dimension must be 4, got {b}")
            if -1 not in (b[1], s[1]) and b[1] != s[1]:
                ctx.fail(f"BBoxes' second dimension {b[1]} must be Scores' {s[1]}")
        else:
            ctx.fail(f"Scores must be 2-D or 3-D, got {s}")

    @classmethod
    def prepare(cls, attrs, outputs):
        want_index = "Index" in outputs
        return lambda boxes, scores: multiclass_nms(boxes, scores, attrs, want_index,
                                                    cls.type)


class MulticlassNMS2(MulticlassNMS):
    type = "multiclass_nms2"
    outputs = (Out("Out"), Out("Index"))
    doc = MulticlassNMS.doc + (" Index [K, 1] (int32): each kept box's row in the flattened "
                               "input boxes.")

    @staticmethod
    def infer_shape(ctx):
        MulticlassNMS.infer_shape(ctx)
        if ctx.has_output("Index"):
            ctx.set_output("Index", [-1, 1], "int32", max(ctx.input_lod_level("BBoxes"), 1))


def _nms_one_image(boxes, scores, attrs, shared):
    """{class: kept box indices} for one image. shared: boxes [M, 4] with scores [C, M];
    else boxes [M, C, 4] with scores [M, C]."""
    classes = scores.shape[0] if shared else scores.shape[1]
    picked = {}
    for c in range(classes):
        if c == attrs["background_label"]:
            continue
        sc = scores[c] if shared else scores[:, c]
        bx = boxes if shared else boxes[:, c, :]
        order = top_scores(sc, attrs["score_threshold"], attrs["nms_top_k"])
        kept = nms(bx, order, attrs["nms_threshold"], attrs["nms_eta"], attrs["normalized"])
        picked[c] = kept if shared else sorted(kept)
    total = sum(len(v) for v in picked.values())
    keep_top_k = attrs["keep_top_k"]
    if keep_top_k > -1 and total > keep_top_k:
        pairs = [(c, i) for c in sorted(picked) for i in picked[c]]
        sc = np.array([scores[c, i] if shared else scores[i, c] for c, i in pairs])
        best = np.argsort(-sc, kind="stable")[:keep_top_k]
        picked = {}
        for k in best:
            c, i = pairs[k]
            picked.setdefault(c, []).append(i)
        if not shared:
            picked = {c: sorted(v) for c, v in picked.items()}
    return picked


def multiclass_nms(boxes_t, scores_t, attrs, want_index, op):
    boxes, scores = boxes_t._array, scores_t._array
    shared = scores.ndim == 3
    if boxes.shape[-1] != BOX_SIZE:
        raise ExecutionError(f"{op}: only boxes of 4 coordinates are supported, got BBoxes "
                             f"{list(boxes.shape)} (polygon NMS is not built)")
    if shared:
        if boxes.ndim != 3 or boxes.shape[:2] != (scores.shape[0], scores.shape[2]):
            raise ExecutionError(f"{op}: BBoxes {list(boxes.shape)} must be [N, M, 4] for "
                                 f"Scores {list(scores.shape)} [N, C, M]")
        images = [(boxes[i], scores[i], i * scores.shape[2]) for i in range(len(scores))]
    else:
        if not boxes_t._lod:
            raise ExecutionError(f"{op}: with 2-D Scores, BBoxes needs a LoD saying which "
                                 f"boxes belong to which image")
        lod = boxes_t._lod[-1]
        if boxes.shape[:2] != scores.shape or lod[-1] != len(boxes):
            raise ExecutionError(f"{op}: BBoxes {list(boxes.shape)} must be [M, C, 4] for "
                                 f"Scores {list(scores.shape)} [M, C], its LoD covering M")
        c = scores.shape[1]
        images = [(boxes[a:b], scores[a:b], a * c) for a, b in zip(lod[:-1], lod[1:])]
    rows, index, starts = [], [], [0]
    for bx, sc, offset in images:
        picked = _nms_one_image(bx, sc, attrs, shared)
        for c in sorted(picked):
            for i in picked[c]:
                if shared:
                    rows.append([c, sc[c, i], *bx[i]])
                    index.append(offset + i)
                else:
                    rows.append([c, sc[i, c], *bx[i, c]])
                    index.append(offset + i * scores.shape[1] + c)
        starts.append(len(rows))
    dtype = boxes.dtype
    if not rows:
        if want_index:
            return (LoDTensor(np.zeros((0, BOX_SIZE + 2), dtype), [starts]),
                    LoDTensor(np.zeros((0, 1), np.int32), [starts]))
        return LoDTensor(np.full((1, 1), -1, dtype), [[0, 1]])
    out = LoDTensor(np.asarray(rows, dtype), [starts])
    if want_index:
        return out, LoDTensor(np.asarray(index, np.int32).reshape(-1, 1), [starts])
    return out


# --- locality_aware_nms (EAST) --------------------------------------------------------------
def locality_merge(boxes, scores, threshold, normalized, score_threshold):
    """EAST's locality-aware merge, in place, over boxes in their given order: a box whose IoU
    with the current survivor exceeds `threshold` is folded into it (coordinates averaged,
    weighted by score; scores added) and dropped (its score set below score_threshold)."""
    keep = -1
    for i in range(len(boxes)):
        if keep > -1 and overlap(boxes[keep], boxes[i:i + 1], normalized)[0] > threshold:
            total = scores[i] + scores[keep]
            boxes[keep] = (boxes[i] * scores[i] + boxes[keep] * scores[keep]) / total
            scores[keep] = total
            scores[i] = score_threshold - 1.0
        else:
            keep = i


class LocalityAwareNMS(OpDef):
    type = "locality_aware_nms"
    inputs = (In("BBoxes"), In("Scores"))
    outputs = (Out("Out"),)
    attrs = {"background_label": -1, "score_threshold": 0.0, "nms_top_k": -1,
             "nms_threshold": 0.3, "nms_eta": 1.0, "keep_top_k": -1, "normalized": True}
    kind = "value"
    share_lod = None
    doc = ("Locality-aware NMS (EAST): per image and class, boxes in their given order are "
           "first merged into their predecessor while their IoU exceeds nms_threshold "
           "(score-weighted mean box, summed score), then multiclass_nms's selection runs on "
           "the merged boxes. BBoxes [N, M, 4] (or [N, M, 8]: convex quadrilaterals, "
           "polygon IoU) with Scores [N, C, M]; Out [K, 2 + 4 or 8] as multiclass_nms "
           "([[-1]] when nothing is kept).")

    @staticmethod
    def infer_shape(ctx):
        b, s = ctx.input_shape("BBoxes"), ctx.input_shape("Scores")
        if len(b) != 3 or len(s) != 3:
            ctx.fail(f"BBoxes {b} must be [N, M, 4] and Scores {s} [N, C, M]")
        if b[2] not in (BOX_SIZE, 8, -1):
            ctx.fail(f"BBoxes' last dimension must be 4 (boxes) or 8 (quadrilaterals), got {b}")
        if -1 not in (b[1], s[2]) and b[1] != s[2]:
            ctx.fail(f"BBoxes' second dimension {b[1]} must be Scores' last {s[2]}")
        ctx.set_output("Out", [-1, b[2] + 2 if b[2] > 0 else -1], ctx.input_dtype("BBoxes"), 1)

    @classmethod
    def prepare(cls, attrs, outputs):
        def kernel(boxes_t, scores_t):
            boxes, scores = boxes_t._array, scores_t._array
            if boxes.ndim != 3 or boxes.shape[-1] not in (BOX_SIZE, 8) or scores.ndim != 3 \
                    or boxes.shape[:2] != (scores.shape[0], scores.shape[2]):
                raise ExecutionError(f"locality_aware_nms: BBoxes {list(boxes.shape)} must be "
                                     f"[N, M, 4 or 8] for Scores {list(scores.shape)} "
                                     f"[N, C, M]")
            rows, starts = [], [0]
            for bx, sc in zip(boxes, scores):
                bx, sc = bx.astype(np.float64), sc.astype(np.float64)
                for c in range(len(sc)):
                    if c != attrs["background_label"]:
                        locality_merge(bx, sc[c], attrs["nms_threshold"], attrs["normalized"],
                                       attrs["score_threshold"])
                picked = _nms_one_image(bx, sc, attrs, True)
                rows += [[c, sc[c, i], *bx[i]] for c in sorted(picked) for i in picked[c]]
                starts.append(len(rows))
            if not rows:
                return LoDTensor(np.full((1, 1), -1, boxes.dtype), [[0, 1]])
            return LoDTensor(np.asarray(rows, boxes.dtype), [starts])
        return kernel


# --- generate_proposals (RPN) ---------------------------------------------------------------
BBOX_CLIP = np.log(1000.0 / 16.0)


def decode_proposals(anchors, deltas, variances):
    """Boxes from RPN deltas against anchors (pixel boxes; log-size deltas clipped at
    log(1000 / 16))."""
    w = anchors[:, 2] - anchors[:, 0] + 1.0
    h = anchors[:, 3] - anchors[:, 1] + 1.0
    cx, cy = anchors[:, 0] + 0.5 * w, anchors[:, 1] + 0.5 * h
    v = variances if variances is not None else np.ones_like(deltas)
    ncx = v[:, 0] * deltas[:, 0] * w + cx
    ncy = v[:, 1] * deltas[:, 1] * h + cy
    nw = np.exp(np.minimum(v[:, 2] * deltas[:, 2], BBOX_CLIP)) * w
    nh = np.exp(np.minimum(v[:, 3] * deltas[:, 3], BBOX_CLIP)) * h
    return np.stack([ncx - nw / 2, ncy - nh / 2, ncx + nw / 2 - 1, ncy + nh / 2 - 1], axis=1)


class GenerateProposals(OpDef):
    type = "generate_proposals"
    inputs = (In("Scores"), In("BboxDeltas"), In("ImInfo"), In("Anchors"), In("Variances"))
    outputs = (Out("RpnRois"), Out("RpnRoiProbs"), Out("RpnRoisLod", dispensable=True))
    attrs = {"pre_nms_topN": 6000, "post_nms_topN": 1000, "nms_thresh": 0.5, "min_size": 0.1,
             "eta": 1.0}
    kind = "value"
    share_lod = None
    doc = ("Per image: decode BboxDeltas [N, 4A, H, W] against Anchors [H, W, A, 4] for the "
           "pre_nms_topN best Scores [N, A, H, W], clip to ImInfo's image, drop boxes smaller "
           "than min_size (at the original scale) or centred outside, NMS at nms_thresh, keep "
           "post_nms_topN. RpnRois [K, 4] and RpnRoiProbs [K, 1] with one LoD sequence per "
           "image; RpnRoisLod [N, 1] the running totals (Fluid 1.8's layout).")

    @staticmethod
    def infer_shape(ctx):
        s, d = ctx.input_shape("Scores"), ctx.input_shape("BboxDeltas")
        if len(s) != 4 or len(d) != 4:
            ctx.fail(f"Scores and BboxDeltas must be 4-D [N, A, H, W] and [N, 4A, H, W], got "
                     f"{s} and {d}")
        dtype = ctx.input_dtype("BboxDeltas")
        ctx.set_output("RpnRois", [-1, BOX_SIZE], dtype, 1)
        ctx.set_output("RpnRoiProbs", [-1, 1], ctx.input_dtype("Scores"), 1)
        if ctx.has_output("RpnRoisLod"):
            ctx.set_output("RpnRoisLod", [-1, 1], "int64", 0)

    @classmethod
    def prepare(cls, attrs, outputs):
        pre_n, post_n = attrs["pre_nms_topN"], attrs["post_nms_topN"]
        thresh, min_size, eta = attrs["nms_thresh"], attrs["min_size"], attrs["eta"]

        def one_image(im, anchors, variances, deltas, scores):
            order = np.argsort(-scores, kind="stable")
            if 0 < pre_n < len(order):
                order = order[:pre_n]
            boxes = decode_proposals(anchors[order], deltas[order], variances[order])
            limit = np.array([im[1], im[0], im[1], im[0]], boxes.dtype) - 1
            boxes = np.maximum(np.minimum(boxes, limit), 0)
            ws = boxes[:, 2] - boxes[:, 0] + 1
            hs = boxes[:, 3] - boxes[:, 1] + 1
            ms = max(min_size, 1.0)
            keep = ((boxes[:, 2] - boxes[:, 0]) / im[2] + 1 >= ms) & \
                ((boxes[:, 3] - boxes[:, 1]) / im[2] + 1 >= ms) & \
                (boxes[:, 0] + ws / 2 <= im[1]) & (boxes[:, 1] + hs / 2 <= im[0])
            boxes, sc = boxes[keep], scores[order][keep]
            if thresh <= 0:
                return boxes, sc
            kept = nms(boxes, np.argsort(-sc, kind="stable"), thresh, eta, False)
            if 0 < post_n < len(kept):
                kept = kept[:post_n]
            return boxes[kept], sc[kept]

        def kernel(scores, deltas, im_info, anchors, variances):
            s, d, im = scores._array, deltas._array, np.asarray(im_info._array)
            a = anchors._array.reshape(-1, BOX_SIZE)
            v = variances._array.reshape(-1, BOX_SIZE)
            n = len(s)
            if d.shape[0] != n or d.shape[1] != 4 * s.shape[1] or d.shape[2:] != s.shape[2:] \
                    or len(a) != s[0].size or len(v) != len(a) or len(im) != n:
                raise ExecutionError(
                    f"generate_proposals: Scores {list(s.shape)}, BboxDeltas {list(d.shape)}, "
                    f"Anchors {list(anchors._array.shape)}, Variances "
                    f"{list(variances._array.shape)} and ImInfo {list(im.shape)} do not agree "
                    f"(want [N, A, H, W], [N, 4A, H, W], [H, W, A, 4] twice and [N, 3])")
            s_hwc = s.transpose(0, 2, 3, 1).reshape(n, -1)
            d_hwc = d.transpose(0, 2, 3, 1).reshape(n, -1, BOX_SIZE)
            rois, probs, lod = [], [], [0]
            for i in range(n):
                b, p = one_image(im[i], a, v, d_hwc[i], s_hwc[i])
                rois.append(b)
                probs.append(p)
                lod.append(lod[-1] + len(b))
            out_rois = LoDTensor(np.concatenate(rois).astype(d.dtype).reshape(-1, BOX_SIZE),
                                 [lod])
            out_probs = LoDTensor(np.concatenate(probs).astype(s.dtype).reshape(-1, 1), [lod])
            if "RpnRoisLod" not in outputs:
                return out_rois, out_probs, None
            totals = LoDTensor(np.asarray(lod[1:], np.int64).reshape(-1, 1))
            return out_rois, out_probs, totals
        return kernel


# --- FPN ------------------------------------------------------------------------------------
class DistributeFpnProposals(OpDef):
    type = "distribute_fpn_proposals"
    inputs = (In("FpnRois"),)
    outputs = (Out("MultiFpnRois", duplicable=True), Out("RestoreIndex"))
    attrs = {"min_level": 2, "max_level": 5, "refer_level": 4, "refer_scale": 224}
    kind = "value"
    share_lod = None
    doc = ("Each box goes to FPN level floor(log2(sqrt(area) / refer_scale + 1e-6) + "
           "refer_level) clipped to [min_level, max_level]; MultiFpnRois the boxes of each "
           "level (LoD per image), RestoreIndex [R, 1] the row of each input box in their "
           "concatenation.")

    @staticmethod
    def infer_shape(ctx):
        n = ctx.attr("max_level") - ctx.attr("min_level") + 1
        if len(ctx.op.output("MultiFpnRois")) != n:
            ctx.fail(f"MultiFpnRois must have max_level - min_level + 1 = {n} outputs")
        dtype = ctx.input_dtype("FpnRois")
        ctx.set_output("MultiFpnRois", [-1, BOX_SIZE], dtype, 1)
        ctx.set_output("RestoreIndex", [-1, 1], "int32", 0)

    @staticmethod
    def kernel(rois, *, min_level, max_level, refer_level, refer_scale):
        r = rois._array
        if not rois._lod:
            raise ExecutionError("distribute_fpn_proposals: FpnRois needs a LoD (boxes per "
                                 "image)")
        lod = rois._lod[-1]
        w, h = r[:, 2] - r[:, 0], r[:, 3] - r[:, 1]
        area = np.where((w < 0) | (h < 0), 0, (w + 1) * (h + 1))
        with np.errstate(divide="ignore"):
            lvl = np.floor(np.log2(np.sqrt(area) / refer_scale + 1e-6) + refer_level)
        lvl = np.clip(lvl, min_level, max_level).astype(np.int64)
        image = np.repeat(np.arange(len(lod) - 1), np.diff(lod))
        outs, order = [], []
        for level in range(min_level, max_level + 1):
            rows = []
            offsets = [0]
            for i in range(len(lod) - 1):
                sel = np.nonzero((lvl == level) & (image == i))[0]
                rows.extend(sel)
                offsets.append(len(rows))
            order.extend(rows)
            outs.append(LoDTensor(r[np.asarray(rows, np.int64)].reshape(-1, BOX_SIZE),
                                  [offsets]))
        restore = np.empty(len(r), np.int32)
        restore[np.asarray(order, np.int64)] = np.arange(len(r), dtype=np.int32)
        return outs, LoDTensor(restore.reshape(-1, 1))


class CollectFpnProposals(OpDef):
    type = "collect_fpn_proposals"
    inputs = (In("MultiLevelRois", duplicable=True), In("MultiLevelScores", duplicable=True))
    outputs = (Out("FpnRois"),)
    attrs = {"post_nms_topN": 0}
    kind = "value"
    share_lod = None
    doc = ("The post_nms_topN best scoring boxes over every level, grouped by image (LoD), "
           "best first within an image.")

    @staticmethod
    def infer_shape(ctx):
        if len(ctx.op.input("MultiLevelRois")) != len(ctx.op.input("MultiLevelScores")):
            ctx.fail("MultiLevelRois and MultiLevelScores must have as many inputs")
        ctx.set_output("FpnRois", [-1, BOX_SIZE], ctx.input_dtype("MultiLevelRois"), 1)

    @staticmethod
    def kernel(rois, scores, *, post_nms_topN):
        if post_nms_topN < 0:
            raise ExecutionError(f"collect_fpn_proposals: post_nms_topN must be positive, got "
                                 f"{post_nms_topN}")
        boxes, sc, image = [], [], []
        n_images = None
        for r, s in zip(rois, scores):
            if not r._lod:
                raise ExecutionError("collect_fpn_proposals: each level's rois need a LoD")
            lod = r._lod[-1]
            n_images = len(lod) - 1 if n_images is None else n_images
            boxes.append(r._array.reshape(-1, BOX_SIZE))
            sc.append(np.asarray(s._array).reshape(-1))
            image.append(np.repeat(np.arange(len(lod) - 1), np.diff(lod)))
        boxes, sc, image = np.concatenate(boxes), np.concatenate(sc), np.concatenate(image)
        top = np.argsort(-sc, kind="stable")[:post_nms_topN]
        top = top[np.argsort(image[top], kind="stable")]
        counts = np.bincount(image[top], minlength=n_images or 0)
        lod = np.concatenate([[0], np.cumsum(counts)]).tolist()
        return LoDTensor(boxes[top], [lod])


# --- retinanet_detection_output -------------------------------------------------------------
class RetinanetDetectionOutput(OpDef):
    type = "retinanet_detection_output"
    inputs = (In("BBoxes", duplicable=True), In("Scores", duplicable=True),
              In("Anchors", duplicable=True), In("ImInfo"))
    outputs = (Out("Out"),)
    attrs = {"score_threshold": 0.05, "nms_top_k": 1000, "nms_threshold": 0.3, "nms_eta": 1.0,
             "keep_top_k": 100}
    kind = "value"
    share_lod = None
    doc = ("RetinaNet's detections per image from FPN levels of deltas BBoxes [N, M_l, 4], "
           "class scores Scores [N, M_l, C] and Anchors [M_l, 4]: on each level the nms_top_k "
           "best (anchor, class) scores above score_threshold (any score on the last level), "
           "decoded and clipped to the original image; NMS per class; the keep_top_k best. "
           "Out [K, 6] rows (label + 1, score, box), best first, one LoD sequence per image.")

    @staticmethod
    def infer_shape(ctx):
        n = [len(ctx.op.input(s)) for s in ("BBoxes", "Scores", "Anchors")]
        if min(n) < 1 or len(set(n)) != 1:
            ctx.fail(f"BBoxes, Scores and Anchors must have as many levels (at least one), got "
                     f"{n}")
        b, s = ctx.input_shape("BBoxes"), ctx.input_shape("Scores")
        if len(b) != 3 or len(s) != 3 or b[2] not in (4, -1):
            ctx.fail(f"BBoxes must be [N, M, 4] and Scores [N, M, C], got {b} and {s}")
        ctx.set_output("Out", [-1, 6], ctx.input_dtype("Scores"), 1)

    @classmethod
    def prepare(cls, attrs, outputs):
        top_k, keep, thr = attrs["nms_top_k"], attrs["keep_top_k"], attrs["score_threshold"]

        def one_image(levels, im):
            h, w = np.round(im[0] / im[2]), np.round(im[1] / im[2])
            preds = {}
            for k, (deltas, scores, anchors) in enumerate(levels):
                classes = scores.shape[1]
                order = top_scores(scores.reshape(-1), thr if k < len(levels) - 1 else 0.0,
                                   top_k)
                a, c = np.divmod(order, classes)
                boxes = decode_proposals(anchors[a], deltas[a], None) / im[2]
                boxes = np.maximum(np.minimum(boxes, np.array([w, h, w, h]) - 1), 0)
                for box, cls_, score in zip(boxes, c, scores.reshape(-1)[order]):
                    preds.setdefault(int(cls_), []).append((score, box))
            pairs = []
            for c in sorted(preds):
                sc = np.array([p[0] for p in preds[c]])
                bx = np.array([p[1] for p in preds[c]]).reshape(-1, 4)
                kept = nms(bx, np.argsort(-sc, kind="stable"), attrs["nms_threshold"],
                           attrs["nms_eta"], False)
                pairs += [(sc[i], c, bx[i]) for i in kept]
            best = sorted(range(len(pairs)), key=lambda i: -pairs[i][0])
            if len(pairs) > keep:
                best = best[:keep]
            return [[pairs[i][1] + 1, pairs[i][0], *pairs[i][2]] for i in best]

        def kernel(bboxes, scores, anchors, im_info):
            im = np.asarray(im_info._array)
            n = scores[0]._array.shape[0]
            rows, lod = [], [0]
            for i in range(n):
                levels = [(b._array[i], s._array[i], a._array.reshape(-1, 4))
                          for b, s, a in zip(bboxes, scores, anchors)]
                for d, s, a in levels:
                    if len(d) != len(s) or len(a) != len(d):
                        raise ExecutionError(
                            f"retinanet_detection_output: a level's BBoxes {list(d.shape)}, "
                            f"Scores {list(s.shape)} and Anchors {list(a.shape)} must have as "
                            f"many boxes")
                rows += one_image(levels, im[i])
                lod.append(len(rows))
            dtype = scores[0]._array.dtype
            return LoDTensor(np.asarray(rows, dtype).reshape(-1, 6), [lod])
        return kernel
