"""detection_map: mean average precision of detections against ground truth, over one batch
or accumulated over batches (fluid.metrics.DetectionMAP), as Paddle 1.8 computes it.

Each detection (label, score, box) of an image is a true positive when its clipped box
overlaps a not yet claimed ground-truth box of its class by more than overlap_threshold
(best overlap first, detections taken by falling score), else a false positive. Per class,
precision and recall over the detections by falling score give the AP: "integral" sums
precision * recall step, "11point" averages the best precision at recall 0, 0.1, ..., 1.
The mAP is the mean over classes; a class whose positive count equals background_label is
skipped (Paddle compares the count, not the class, which skips classes with no positives
when background_label is 0).

The accumulated state is three outputs read back as inputs: AccumPosCount [class_num, 1]
(int32), AccumTruePos and AccumFalsePos ([K, 2] rows (score, flag) with one LoD sequence
per class), taken into account when HasState holds a non-zero value.
"""
import numpy as np

from ..core.tensor import LoDTensor
from ..errors import ExecutionError
from .common import is_empty
from .registry import In, OpDef, Out


def _overlap(a, b):
    """IoU of normalized boxes (0 for boxes apart)."""
    if b[0] > a[2] or b[2] < a[0] or b[1] > a[3] or b[3] < a[1]:
        return 0.0
    iw = min(a[2], b[2]) - max(a[0], b[0])
    ih = min(a[3], b[3]) - max(a[1], b[1])
    inter = iw * ih
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def _per_image(arr, lod):
    return [arr[a:b] for a, b in zip(lod[:-1], lod[1:])]


def match_detections(labels, dets, evaluate_difficult, threshold, pos_count, tp, fp):
    """Add one batch's positives per class to pos_count and its (score, flag) pairs to tp /
    fp (dicts by class, in Paddle's order)."""
    for gts in labels:
        by_class = {}
        for row in gts:
            by_class.setdefault(int(row[0]), []).append(row)
        for c, rows in sorted(by_class.items()):
            n = len(rows) if evaluate_difficult else sum(1 for r in rows if not r[1])
            if n:
                pos_count[c] = pos_count.get(c, 0) + n
    for gts, image_dets in zip(labels, dets):
        gt_by_class = {}
        for row in gts:
            gt_by_class.setdefault(int(row[0]), []).append(row)
        det_by_class = {}
        for d in image_dets:
            det_by_class.setdefault(int(d[0]), []).append(d)
        for c in sorted(det_by_class):
            preds = det_by_class[c]
            if c not in gt_by_class:
                for d in preds:
                    tp.setdefault(c, []).append((d[1], 0))
                    fp.setdefault(c, []).append((d[1], 1))
                continue
            truth = gt_by_class[c]
            claimed = [False] * len(truth)
            for d in sorted(preds, key=lambda r: -r[1]):
                box = np.clip(d[2:6], 0.0, 1.0)
                overlaps = [_overlap(box, g[2:6]) for g in truth]
                best = int(np.argmax(overlaps))
                if overlaps[best] > threshold:
                    if evaluate_difficult or not truth[best][1]:
                        hit = not claimed[best]
                        claimed[best] = True
                        tp.setdefault(c, []).append((d[1], int(hit)))
                        fp.setdefault(c, []).append((d[1], int(not hit)))
                else:
                    tp.setdefault(c, []).append((d[1], 0))
                    fp.setdefault(c, []).append((d[1], 1))


def _cumulative(pairs):
    order = sorted(range(len(pairs)), key=lambda i: -pairs[i][0])   # stable, falling score
    return np.cumsum([pairs[i][1] for i in order])


def mean_ap(ap_type, pos_count, tp, fp, background_label):
    total, count = 0.0, 0
    for c in sorted(pos_count):
        n_pos = pos_count[c]
        if n_pos == background_label:
            continue
        if c not in tp:
            count += 1
            continue
        tps, fps = _cumulative(tp[c]), _cumulative(fp[c])
        precision = tps / np.maximum(tps + fps, 1)
        recall = tps / n_pos
        if ap_type == "11point":
            best = [0.0] * 11
            start = len(recall) - 1
            for j in range(10, -1, -1):
                for i in range(start, -1, -1):
                    if recall[i] < j / 10.0:
                        start = i
                        if j > 0:
                            best[j - 1] = best[j]
                        break
                    best[j] = max(best[j], precision[i])
            total += sum(b / 11 for b in best)
        else:
            ap, prev = 0.0, 0.0
            for p, r in zip(precision, recall):
                if abs(r - prev) > 1e-6:
                    ap += p * abs(r - prev)
                prev = r
            total += ap
        count += 1
    return total / count if count else 0.0


class DetectionMAP(OpDef):
    type = "detection_map"
    inputs = (In("DetectRes"), In("Label"), In("HasState", dispensable=True),
              In("PosCount", dispensable=True), In("TruePos", dispensable=True),
              In("FalsePos", dispensable=True))
    outputs = (Out("AccumPosCount"), Out("AccumTruePos"), Out("AccumFalsePos"), Out("MAP"))
    attrs = {"class_num": 1, "background_label": 0, "overlap_threshold": 0.5,
             "evaluate_difficult": True, "ap_type": "integral"}
    kind = "value"
    share_lod = None
    doc = ("MAP [1]: the mean average precision of DetectRes [M, 6] (label, score, box; LoD "
           "per image) against Label [N, 6] (label, difficult, box) or [N, 5], with the "
           "accumulated state of earlier batches when HasState is set; the Accum* outputs "
           "carry the state on.")

    @staticmethod
    def infer_shape(ctx):
        d, lab = ctx.input_shape("DetectRes"), ctx.input_shape("Label")
        if len(d) != 2 or d[1] not in (6, -1):
            ctx.fail(f"DetectRes must be [M, 6] (label, score, xmin, ymin, xmax, ymax), got {d}")
        if len(lab) != 2 or lab[1] not in (5, 6, -1):
            ctx.fail(f"Label must be [N, 6] (label, difficult, box) or [N, 5], got {lab}")
        if ctx.attr("ap_type") not in ("integral", "11point"):
            ctx.fail(f"ap_type must be integral or 11point, got {ctx.attr('ap_type')!r}")
        ctx.set_output("MAP", [1], ctx.input_dtype("DetectRes"), 0)
        ctx.set_output("AccumPosCount", [ctx.attr("class_num"), 1], "int32", 0)
        for slot in ("AccumTruePos", "AccumFalsePos"):
            ctx.set_output(slot, [-1, 2], ctx.input_dtype("DetectRes"), 1)

    @classmethod
    def prepare(cls, attrs, outputs):
        classes = attrs["class_num"]

        def kernel(detect, label, has_state, pos_in, tp_in, fp_in):
            dets, labs = detect._array, label._array
            if not label._lod or not detect._lod:
                raise ExecutionError("detection_map: DetectRes and Label need a LoD (one "
                                     "sequence per image)")
            if len(label._lod[-1]) != len(detect._lod[-1]):
                raise ExecutionError(f"detection_map: Label has {len(label._lod[-1]) - 1} "
                                     f"images, DetectRes {len(detect._lod[-1]) - 1}")
            if labs.shape[1] == 5:      # no difficult column: none is difficult
                labs = np.concatenate([labs[:, :1], np.zeros((len(labs), 1)), labs[:, 1:]], 1)
            pos, tp, fp = {}, {}, {}
            state = (not is_empty(has_state)
                     and int(np.asarray(has_state._array).reshape(-1)[0]) != 0)
            if state and not is_empty(pos_in):
                counts = np.asarray(pos_in._array).reshape(-1)
                pos = {c: int(counts[c]) for c in range(min(classes, len(counts)))}
                for store, t in ((tp, tp_in), (fp, fp_in)):
                    arr, lod = np.asarray(t._array).reshape(-1, 2), t._lod[-1]
                    for c, (a, b) in enumerate(zip(lod[:-1], lod[1:])):
                        for score, flag in arr[a:b]:
                            store.setdefault(c, []).append((score, int(flag)))
            # detections with no box (multiclass_nms' [[-1]]) are none
            det_rows = dets if dets.shape[1] == 6 else np.zeros((0, 6), dets.dtype)
            det_lod = detect._lod[-1] if dets.shape[1] == 6 else [0] * len(detect._lod[-1])
            match_detections(_per_image(labs, label._lod[-1]), _per_image(det_rows, det_lod),
                             attrs["evaluate_difficult"], attrs["overlap_threshold"], pos, tp,
                             fp)
            m = mean_ap(attrs["ap_type"], pos, tp, fp, attrs["background_label"])
            counts = np.array([[pos.get(c, 0)] for c in range(classes)], np.int32)
            outs = []
            for store in (tp, fp):
                rows, lod = [], [0]
                for c in range(classes):
                    rows += store.get(c, [])
                    lod.append(len(rows))
                outs.append(LoDTensor(np.asarray(rows, dets.dtype).reshape(-1, 2), [lod]))
            return (LoDTensor(counts), outs[0], outs[1],
                    LoDTensor(np.array([m], dets.dtype)))
        return kernel
