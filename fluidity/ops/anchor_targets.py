"""Training targets of two-stage and one-stage detectors, as Paddle 1.8 computes them:
rpn_target_assign (Faster R-CNN's RPN: sample fg/bg anchors), retinanet_target_assign
(RetinaNet: every fg/bg anchor, with its class) and generate_proposal_labels (Fast R-CNN's
head: sample RoIs, per-class regression targets).

Boxes use pixel coordinates with Paddle's "+1" widths (x2 - x1 + 1). Ground truth comes
one sequence per image (the LoD of GtBoxes); ImInfo [N, 3] holds (height, width, scale)
per image, and the ground truth is in original-image units (scaled by `scale` here).
Sampling with use_random keeps a uniformly random subset (reservoir sampling, as Paddle);
without it, the first ones.
"""
import numpy as np

from ..core.tensor import LoDTensor
from ..errors import ExecutionError
from .registry import In, OpDef, Out, floats

_EPS = 1e-5           # Paddle's tie tolerance when matching an anchor to a gt's best IoU


def pixel_iou(a, b):
    """IoU [len(a), len(b)] of pixel boxes (widths x2 - x1 + 1)."""
    a, b = a[:, None, :], b[None, :, :]
    area_a = (a[..., 2] - a[..., 0] + 1) * (a[..., 3] - a[..., 1] + 1)
    area_b = (b[..., 2] - b[..., 0] + 1) * (b[..., 3] - b[..., 1] + 1)
    iw = np.maximum(np.minimum(a[..., 2], b[..., 2]) - np.maximum(a[..., 0], b[..., 0]) + 1, 0)
    ih = np.maximum(np.minimum(a[..., 3], b[..., 3]) - np.maximum(a[..., 1], b[..., 1]) + 1, 0)
    inter = iw * ih
    return inter / (area_a + area_b - inter)


def box_to_delta(ex, gt, weights):
    """Regression targets (dx, dy, dw, dh) of boxes `gt` from boxes `ex`, divided by
    `weights` (None: all 1)."""
    ew, eh = ex[:, 2] - ex[:, 0] + 1, ex[:, 3] - ex[:, 1] + 1
    gw, gh = gt[:, 2] - gt[:, 0] + 1, gt[:, 3] - gt[:, 1] + 1
    d = np.stack([(gt[:, 0] + 0.5 * gw - ex[:, 0] - 0.5 * ew) / ew,
                  (gt[:, 1] + 0.5 * gh - ex[:, 1] - 0.5 * eh) / eh,
                  np.log(gw / ew), np.log(gh / eh)], axis=1)
    return d if weights is None else d / np.asarray(weights, d.dtype)


def subsample(inds, num, use_random, rng):
    """At most `num` of `inds`: a random subset (order kept) or the first `num`."""
    if len(inds) <= num:
        return inds
    if use_random:
        return np.sort(rng.choice(inds, size=num, replace=False))
    return inds[:num]


def _images(op, gt_t, n_images, *others):
    """Per image (start, end) of the ground truth rows, from GtBoxes' LoD."""
    if not gt_t._lod:
        raise ExecutionError(f"{op}: GtBoxes {list(gt_t._array.shape)} needs a LoD saying "
                             f"which boxes belong to which image")
    lod = list(gt_t._lod[-1])
    if len(lod) - 1 != n_images:
        raise ExecutionError(f"{op}: GtBoxes' LoD {lod} has {len(lod) - 1} images but ImInfo "
                             f"has {n_images}")
    for name, t in others:
        if len(t._array) != lod[-1]:
            raise ExecutionError(f"{op}: {name} {list(t._array.shape)} must have one row per "
                                 f"ground-truth box ({lod[-1]})")
    return list(zip(lod[:-1], lod[1:]))


def _check_boxes(op, slot, a):
    if a.ndim != 2 or a.shape[1] != 4:
        raise ExecutionError(f"{op}: {slot} {list(a.shape)} must be [M, 4]")


def _anchor_labels(iou, positive, negative):
    """(fg candidates, bg candidates, anchor -> best gt) of Paddle's ScoreAssign: an anchor is
    fg when it is some gt's best match (within 1e-5) or its best IoU reaches `positive`; bg
    when its best IoU is below `negative`."""
    if iou.shape[1] == 0:
        return (np.zeros(0, np.int64), np.arange(iou.shape[0]),
                np.zeros(iou.shape[0], np.int64))
    best_gt = iou.argmax(axis=1)
    a_max = iou[np.arange(len(iou)), best_gt]
    g_max = iou.max(axis=0)
    fg = np.nonzero((np.abs(iou - g_max[None, :]) < _EPS).any(axis=1) | (a_max >= positive))[0]
    bg = np.nonzero(a_max < negative)[0]
    return fg, bg, best_gt


def _assign(n_anchor, fg, bg):
    """Paddle's fg/bg resolution: bg overrides fg; each overridden fg leaves a 'fake' fg
    (the first fg anchor, inside weight 0) so the location targets keep their count.
    Returns (location index, inside weights, fg, bg)."""
    label = np.full(n_anchor, -1, np.int64)
    label[fg] = 1
    fake = int((label[bg] == 1).sum())
    label[bg] = 0
    fg_now, bg_now = np.nonzero(label == 1)[0], np.nonzero(label == 0)[0]
    loc = np.concatenate([np.full(fake, fg[0] if len(fg) else 0, np.int64), fg_now])
    inside = np.concatenate([np.zeros((fake, 4)), np.ones((len(fg) - fake, 4))])
    return loc, inside, fg_now, bg_now


def _target_outputs(parts, dtype):
    """The anchor assigners' outputs from per-image lists: LocationIndex, ScoreIndex,
    TargetBBox, TargetLabel, BBoxInsideWeight (and ForegroundNumber when collected)."""
    cat = {k: np.concatenate(v) if v else np.zeros(0) for k, v in parts.items()}
    outs = [LoDTensor(cat["loc"].astype(np.int32)), LoDTensor(cat["score"].astype(np.int32)),
            LoDTensor(cat["bbox"].reshape(-1, 4).astype(dtype)),
            LoDTensor(cat["label"].reshape(-1, 1).astype(np.int32)),
            LoDTensor(cat["inside"].reshape(-1, 4).astype(dtype))]
    if "fg" in cat:
        outs.append(LoDTensor(cat["fg"].reshape(-1, 1).astype(np.int32)))
    return tuple(outs)


class RpnTargetAssign(OpDef):
    type = "rpn_target_assign"
    inputs = (In("Anchor"), In("GtBoxes"), In("IsCrowd"), In("ImInfo"))
    outputs = (Out("LocationIndex"), Out("ScoreIndex"), Out("TargetBBox"), Out("TargetLabel"),
               Out("BBoxInsideWeight"))
    attrs = {"rpn_batch_size_per_im": 256, "rpn_straddle_thresh": 0.0,
             "rpn_positive_overlap": 0.7, "rpn_negative_overlap": 0.3,
             "rpn_fg_fraction": 0.25, "use_random": True}
    kind = "value"
    share_lod = None
    doc = ("RPN training targets: per image, anchors (inside the image by "
           "rpn_straddle_thresh) matched to the non-crowd gt boxes by IoU, fg/bg sampled "
           "to rpn_batch_size_per_im with rpn_fg_fraction fg. LocationIndex / ScoreIndex "
           "index the anchors of all images (image i's anchors offset by i * M); TargetBBox "
           "the (dx, dy, dw, dh) of each located anchor's gt, TargetLabel 1 / 0.")

    @staticmethod
    def infer_shape(ctx):
        if ctx.input_shape("Anchor")[-1:] != [4]:
            ctx.fail(f"Anchor {ctx.input_shape('Anchor')} must be [M, 4]")
        dtype = ctx.input_dtype("Anchor")
        for slot in ("LocationIndex", "ScoreIndex"):
            ctx.set_output(slot, [-1], "int32")
        ctx.set_output("TargetBBox", [-1, 4], dtype)
        ctx.set_output("TargetLabel", [-1, 1], "int32")
        ctx.set_output("BBoxInsideWeight", [-1, 4], dtype)

    @classmethod
    def prepare(cls, attrs, outputs):
        op = cls.type
        rng = np.random.default_rng()

        def kernel(anchor_t, gt_t, crowd_t, info_t):
            anchors = anchor_t._array.reshape(-1, 4)
            gts, info = gt_t._array, info_t._array.reshape(-1, 3)
            crowd = crowd_t._array.reshape(-1)
            _check_boxes(op, "GtBoxes", gts)
            m = len(anchors)
            parts = {k: [] for k in ("loc", "score", "bbox", "label", "inside")}
            for i, (a, b) in enumerate(_images(op, gt_t, len(info), ("IsCrowd", crowd_t))):
                h, w, scale = info[i]
                t = attrs["rpn_straddle_thresh"]
                if t >= 0:
                    inside_ids = np.nonzero((anchors[:, 0] >= -t) & (anchors[:, 1] >= -t)
                                            & (anchors[:, 2] < w + t)
                                            & (anchors[:, 3] < h + t))[0]
                else:
                    inside_ids = np.arange(m)
                gt = gts[a:b][crowd[a:b] == 0] * scale
                iou = pixel_iou(anchors[inside_ids], gt)
                fg, bg, best = _anchor_labels(iou, attrs["rpn_positive_overlap"],
                                              attrs["rpn_negative_overlap"])
                batch, frac = attrs["rpn_batch_size_per_im"], attrs["rpn_fg_fraction"]
                if frac > 0 and batch > 0:
                    fg = subsample(fg, int(frac * batch), attrs["use_random"], rng)
                    bg = subsample(bg, batch - len(fg), attrs["use_random"], rng)
                loc, inside, fg, bg = _assign(len(inside_ids), fg, bg)
                deltas = box_to_delta(anchors[inside_ids[loc]].astype(np.float64),
                                      gt[best[loc]].astype(np.float64), None) \
                    if len(loc) else np.zeros((0, 4))
                parts["loc"].append(inside_ids[loc] + i * m)
                parts["score"].append(np.concatenate([inside_ids[fg], inside_ids[bg]]) + i * m)
                parts["label"].append(np.concatenate([np.ones(len(fg)), np.zeros(len(bg))]))
                parts["bbox"].append(deltas)
                parts["inside"].append(inside)
            return _target_outputs(parts, anchors.dtype)
        return kernel


class RetinanetTargetAssign(OpDef):
    type = "retinanet_target_assign"
    inputs = (In("Anchor"), In("GtBoxes"), In("GtLabels"), In("IsCrowd"), In("ImInfo"))
    outputs = (Out("LocationIndex"), Out("ScoreIndex"), Out("TargetBBox"), Out("TargetLabel"),
               Out("BBoxInsideWeight"), Out("ForegroundNumber"))
    attrs = {"positive_overlap": 0.5, "negative_overlap": 0.4}
    kind = "value"
    share_lod = None
    doc = ("RetinaNet training targets: rpn_target_assign's matching without sampling or "
           "straddle filtering; TargetLabel is the matched gt's class (GtLabels) for fg "
           "anchors, 0 for bg; ForegroundNumber [N, 1] the fg count + 1 per image.")

    @staticmethod
    def infer_shape(ctx):
        RpnTargetAssign.infer_shape(ctx)
        ctx.set_output("ForegroundNumber", [-1, 1], "int32")

    @classmethod
    def prepare(cls, attrs, outputs):
        op = cls.type

        def kernel(anchor_t, gt_t, label_t, crowd_t, info_t):
            anchors = anchor_t._array.reshape(-1, 4)
            gts, info = gt_t._array, info_t._array.reshape(-1, 3)
            labels, crowd = label_t._array.reshape(-1), crowd_t._array.reshape(-1)
            _check_boxes(op, "GtBoxes", gts)
            m = len(anchors)
            parts = {k: [] for k in ("loc", "score", "bbox", "label", "inside", "fg")}
            images = _images(op, gt_t, len(info), ("IsCrowd", crowd_t), ("GtLabels", label_t))
            for i, (a, b) in enumerate(images):
                keep = crowd[a:b] == 0
                gt = gts[a:b][keep] * info[i][2]
                gl = labels[a:b][keep]
                iou = pixel_iou(anchors, gt)
                fg, bg, best = _anchor_labels(iou, attrs["positive_overlap"],
                                              attrs["negative_overlap"])
                loc, inside, fg, bg = _assign(m, fg, bg)
                deltas = box_to_delta(anchors[loc].astype(np.float64),
                                      gt[best[loc]].astype(np.float64), None) \
                    if len(loc) else np.zeros((0, 4))
                parts["loc"].append(loc + i * m)
                parts["score"].append(np.concatenate([fg, bg]) + i * m)
                parts["label"].append(np.concatenate([gl[best[fg]] if len(gl) else
                                                      np.zeros(0), np.zeros(len(bg))]))
                parts["bbox"].append(deltas)
                parts["inside"].append(inside)
                parts["fg"].append([len(loc) + 1])
            return _target_outputs(parts, anchors.dtype)
        return kernel


class GenerateProposalLabels(OpDef):
    type = "generate_proposal_labels"
    inputs = (In("RpnRois"), In("GtClasses"), In("IsCrowd"), In("GtBoxes"), In("ImInfo"))
    outputs = (Out("Rois"), Out("LabelsInt32"), Out("BboxTargets"), Out("BboxInsideWeights"),
               Out("BboxOutsideWeights"))
    attrs = {"batch_size_per_im": 256, "fg_fraction": 0.25, "fg_thresh": 0.25,
             "bg_thresh_hi": 0.5, "bg_thresh_lo": 0.0,
             "bbox_reg_weights": floats([0.1, 0.1, 0.2, 0.2]), "class_nums": 81,
             "use_random": True, "is_cls_agnostic": False, "is_cascade_rcnn": False}
    kind = "value"
    share_lod = None
    doc = ("Fast R-CNN head targets: per image, the gt boxes and the RpnRois (in input "
           "scale; divided by ImInfo's scale) matched to the gt by IoU; fg (IoU >= fg_thresh, "
           "at most fg_fraction of batch_size_per_im) and bg (IoU in [bg_thresh_lo, "
           "bg_thresh_hi)) sampled. Rois scaled back; LabelsInt32 the class (0 for bg); "
           "BboxTargets / weights [R, 4 * class_nums] (4 * 2 when is_cls_agnostic), the "
           "targets divided by bbox_reg_weights in the class's 4 columns. is_cascade_rcnn: "
           "RpnRois starts with the gt boxes (dropped), every fg and bg box kept.")

    @staticmethod
    def infer_shape(ctx):
        dtype = ctx.input_dtype("RpnRois")
        width = 4 * (2 if ctx.attr("is_cls_agnostic") else ctx.attr("class_nums"))
        ctx.set_output("Rois", [-1, 4], dtype, 1)
        ctx.set_output("LabelsInt32", [-1, 1], "int32", 1)
        for slot in ("BboxTargets", "BboxInsideWeights", "BboxOutsideWeights"):
            ctx.set_output(slot, [-1, width], dtype, 1)

    @classmethod
    def prepare(cls, attrs, outputs):
        op = cls.type
        rng = np.random.default_rng()
        agnostic, n_cls = attrs["is_cls_agnostic"], attrs["class_nums"]
        width = 4 * (2 if agnostic else n_cls)

        def one_image(rois, gt, classes, crowd, scale):
            if attrs["is_cascade_rcnn"]:
                rois = rois[len(gt):]
            boxes = np.concatenate([gt, rois / scale]).astype(np.float64)
            max_ov, max_cls = np.zeros(len(boxes)), np.zeros(len(boxes), np.int64)
            to_gt = np.zeros(len(boxes), np.int64)
            if len(gt):
                iou = pixel_iou(boxes, gt.astype(np.float64))
                arg = iou.argmax(axis=1)
                best = iou[np.arange(len(boxes)), arg]
                hit = best > 0
                max_ov[hit], max_cls[hit], to_gt[hit] = best[hit], classes[arg[hit]], arg[hit]
            max_ov[np.nonzero(crowd)[0]] = -1.0
            if attrs["is_cascade_rcnn"]:
                keep = np.nonzero((boxes[:, 2] - boxes[:, 0] + 1 > 0)
                                  & (boxes[:, 3] - boxes[:, 1] + 1 > 0))[0]
                boxes, max_ov, max_cls, to_gt = boxes[keep], max_ov[keep], max_cls[keep], \
                    to_gt[keep]
            fg = np.nonzero(max_ov >= attrs["fg_thresh"])[0]
            bg = np.nonzero((max_ov < attrs["bg_thresh_hi"])
                            & (max_ov >= attrs["bg_thresh_lo"]))[0]
            if not attrs["is_cascade_rcnn"]:
                per_im = int(attrs["batch_size_per_im"])
                fg = subsample(fg, min(int(np.round(attrs["fg_fraction"] * per_im)), len(fg)),
                               attrs["use_random"], rng)
                bg = subsample(bg, max(per_im - len(fg), 0), attrs["use_random"], rng)
            keep = np.concatenate([fg, bg])
            labels = max_cls[keep].copy()
            labels[len(fg):] = 0
            sboxes = boxes[keep]
            sgt = gt[to_gt[keep]].astype(np.float64) if len(gt) else np.zeros((len(keep), 4))
            if len(gt):
                sgt[len(fg):] = gt[0]
            deltas = box_to_delta(sboxes, sgt, attrs["bbox_reg_weights"]) if len(keep) \
                else np.zeros((0, 4))
            targets = np.zeros((len(keep), width))
            inside = np.zeros((len(keep), width))
            rows = np.nonzero(labels > 0)[0]
            cls = np.ones(len(rows), np.int64) if agnostic else labels[rows]
            cols = cls[:, None] * 4 + np.arange(4)
            targets[rows[:, None], cols] = deltas[rows]
            inside[rows[:, None], cols] = 1.0
            return sboxes * scale, labels, targets, inside

        def kernel(rois_t, cls_t, crowd_t, gt_t, info_t):
            rois, info = rois_t._array.reshape(-1, 4), info_t._array.reshape(-1, 3)
            classes = cls_t._array.reshape(-1).astype(np.int64)
            crowd = crowd_t._array.reshape(-1)
            gts = gt_t._array
            _check_boxes(op, "GtBoxes", gts)
            if not rois_t._lod or len(rois_t._lod[-1]) - 1 != len(info):
                raise ExecutionError(f"{op}: RpnRois needs a LoD with one sequence of RoIs per "
                                     f"image ({len(info)} in ImInfo)")
            if classes.max(initial=0) >= (2 if agnostic else n_cls) and not agnostic:
                raise ExecutionError(f"{op}: GtClasses holds class {classes.max()} but "
                                     f"class_nums is {n_cls}")
            rlod = rois_t._lod[-1]
            images = _images(op, gt_t, len(info), ("IsCrowd", crowd_t), ("GtClasses", cls_t))
            outs, lod = [], [0]
            for i, (a, b) in enumerate(images):
                r = one_image(rois[rlod[i]:rlod[i + 1]], gts[a:b], classes[a:b], crowd[a:b],
                              info[i][2])
                outs.append(r)
                lod.append(lod[-1] + len(r[0]))
            dt = rois.dtype
            cat = [np.concatenate([o[k] for o in outs]) for k in range(4)]
            lod = [lod]
            return (LoDTensor(cat[0].reshape(-1, 4).astype(dt), lod),
                    LoDTensor(cat[1].reshape(-1, 1).astype(np.int32), lod),
                    LoDTensor(cat[2].reshape(-1, width).astype(dt), lod),
                    LoDTensor(cat[3].reshape(-1, width).astype(dt), lod),
                    LoDTensor((cat[3] > 0).reshape(-1, width).astype(dt), lod))
        return kernel
