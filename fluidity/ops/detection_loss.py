"""Detection heads' losses and decoders, as Paddle 1.8 defines them: sigmoid_focal_loss
(RetinaNet), yolo_box (YOLOv3's decoder) and yolov3_loss, with the gradients Paddle has.

YOLOv3's X is [N, A * (5 + classes), H, W]: for each of the A anchors of the level, the
channels tx, ty, tw, th, objectness and one logit per class.
"""
import numpy as np

from ..errors import ExecutionError
from .common import sigmoid
from .registry import In, OpDef, Out, ints

FLT_MIN = np.finfo(np.float32).tiny


# --- sigmoid_focal_loss ---------------------------------------------------------------------
def _focal_parts(x, label, fg_num, alpha):
    """Positive and negative masks scaled by alpha / fg and (1 - alpha) / fg, and p."""
    classes = x.shape[1]
    g = label.reshape(-1, 1).astype(np.int64)
    d = np.arange(1, classes + 1)[None, :]
    fg = max(int(np.asarray(fg_num).reshape(-1)[0]), 1)
    pos = (g == d).astype(x.dtype) * (alpha / fg)
    neg = ((g != -1) & (g != d)).astype(x.dtype) * ((1 - alpha) / fg)
    return pos, neg, sigmoid(x)


def _log1m_sigmoid(x):
    """log(1 - sigmoid(x)), stable for large |x|."""
    return -x * (x >= 0) - np.log1p(np.exp(x - 2 * x * (x >= 0)))


class SigmoidFocalLoss(OpDef):
    type = "sigmoid_focal_loss"
    inputs = (In("X"), In("Label", no_grad=True), In("FgNum", no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"gamma": 2.0, "alpha": 0.25}
    share_lod = "X"
    doc = ("Out[i, d] = -alpha / fg * (1 - p)^gamma * log(p) where Label[i] == d + 1, "
           "-(1 - alpha) / fg * p^gamma * log(1 - p) for the other classes (none for Label "
           "-1), p = sigmoid(X[i, d]), fg = max(FgNum, 1). Labels count from 1 (0: "
           "background).")

    @staticmethod
    def infer_shape(ctx):
        x, lab, fg = (ctx.input_shape(s) for s in ("X", "Label", "FgNum"))
        if len(x) != 2 or len(lab) != 2 or lab[1] not in (1, -1):
            ctx.fail(f"X must be [N, C] and Label [N, 1], got {x} and {lab}")
        if -1 not in (x[0], lab[0]) and x[0] != lab[0]:
            ctx.fail(f"X and Label must have as many rows, got {x} and {lab}")
        if len(fg) != 1 or fg[0] not in (1, -1):
            ctx.fail(f"FgNum must be [1], got {fg}")
        ctx.share("X", "Out")

    @staticmethod
    def kernel(x, label, fg_num, *, gamma, alpha):
        pos, neg, p = _focal_parts(x, label, fg_num, alpha)
        term_pos = (1 - p) ** gamma * np.log(np.maximum(p, FLT_MIN))
        term_neg = p ** gamma * _log1m_sigmoid(x)
        return (-pos * term_pos - neg * term_neg).astype(x.dtype)

    @staticmethod
    def grad(g):
        g.op("sigmoid_focal_loss_grad",
             {"X": g.input("X"), "Label": g.input("Label"), "FgNum": g.input("FgNum"),
              "Out@GRAD": g.output_grad("Out")}, {"X@GRAD": g.input_grad("X")}, g.attrs())


class SigmoidFocalLossGrad(OpDef):
    type = "sigmoid_focal_loss_grad"
    inputs = (In("X"), In("Label"), In("FgNum"), In("Out@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True),)
    attrs = SigmoidFocalLoss.attrs
    infer_shape = None

    @staticmethod
    def kernel(x, label, fg_num, dout, *, gamma, alpha):
        pos, neg, p = _focal_parts(x, label, fg_num, alpha)
        term_pos = (1 - p) ** gamma * (1 - p - p * gamma * np.log(np.maximum(p, FLT_MIN)))
        term_neg = p ** gamma * (_log1m_sigmoid(x) * (1 - p) * gamma - p)
        return ((-pos * term_pos - neg * term_neg) * dout).astype(x.dtype)


# --- yolo_box -------------------------------------------------------------------------------
def _yolo_check(op, x_shape, anchors, class_num, mask_num=None):
    an = (len(anchors) // 2) if mask_num is None else mask_num
    if not anchors or len(anchors) % 2:
        raise ExecutionError(f"{op}: anchors must be pairs (w, h), got {list(anchors)}")
    if class_num <= 0:
        raise ExecutionError(f"{op}: class_num must be positive, got {class_num}")
    if len(x_shape) != 4 or x_shape[1] != an * (5 + class_num):
        raise ExecutionError(f"{op}: X {list(x_shape)} must be [N, {an} * (5 + {class_num}), "
                             f"H, W]")


class YoloBox(OpDef):
    type = "yolo_box"
    inputs = (In("X"), In("ImgSize"))
    outputs = (Out("Boxes"), Out("Scores"))
    attrs = {"class_num": 1, "anchors": ints(), "downsample_ratio": 32, "conf_thresh": 0.01,
             "clip_bbox": True}
    share_lod = None
    doc = ("YOLOv3's boxes [N, A * H * W, 4] (xmin, ymin, xmax, ymax in ImgSize's pixels) and "
           "class scores [N, A * H * W, classes] (objectness * sigmoid(class logit)); both 0 "
           "where the objectness is below conf_thresh.")

    @staticmethod
    def infer_shape(ctx):
        x, im = ctx.input_shape("X"), ctx.input_shape("ImgSize")
        anchors, classes = ctx.attr("anchors"), ctx.attr("class_num")
        an = len(anchors) // 2
        if len(x) != 4:
            ctx.fail(f"X must be 4-D, got {x}")
        if not anchors or len(anchors) % 2:
            ctx.fail(f"anchors must be pairs (w, h), got {list(anchors)}")
        if classes <= 0:
            ctx.fail(f"class_num must be positive, got {classes}")
        if x[1] > 0 and x[1] != an * (5 + classes):
            ctx.fail(f"X's channels must be {an} * (5 + {classes}), got {x[1]}")
        if len(im) != 2 or im[1] not in (2, -1):
            ctx.fail(f"ImgSize must be [N, 2] (height, width), got {im}")
        boxes = an * x[2] * x[3] if x[2] > 0 and x[3] > 0 else -1
        ctx.set_output("Boxes", [x[0], boxes, 4], ctx.input_dtype("X"), 0)
        ctx.set_output("Scores", [x[0], boxes, classes], ctx.input_dtype("X"), 0)

    @staticmethod
    def kernel(x, img_size, *, class_num, anchors, downsample_ratio, conf_thresh, clip_bbox):
        _yolo_check("yolo_box", x.shape, anchors, class_num)
        n, _, h, w = x.shape
        an = len(anchors) // 2
        input_size = downsample_ratio * h
        v = x.reshape(n, an, 5 + class_num, h, w)
        conf = sigmoid(v[:, :, 4])
        keep = conf >= conf_thresh
        img = np.asarray(img_size).reshape(n, 2).astype(x.dtype)
        ih, iw = img[:, 0][:, None, None, None], img[:, 1][:, None, None, None]
        col = np.arange(w)[None, None, None, :]
        row = np.arange(h)[None, None, :, None]
        aw = np.asarray(anchors[0::2], x.dtype)[None, :, None, None]
        ah = np.asarray(anchors[1::2], x.dtype)[None, :, None, None]
        # Paddle divides both coordinates by the grid's height (square grids in practice)
        cx = (col + sigmoid(v[:, :, 0])) * iw / h
        cy = (row + sigmoid(v[:, :, 1])) * ih / h
        bw = np.exp(v[:, :, 2]) * aw * iw / input_size
        bh = np.exp(v[:, :, 3]) * ah * ih / input_size
        boxes = np.stack([cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2], axis=-1)
        if clip_bbox:
            boxes[..., 0] = np.maximum(boxes[..., 0], 0)
            boxes[..., 1] = np.maximum(boxes[..., 1], 0)
            boxes[..., 2] = np.minimum(boxes[..., 2], iw - 1)
            boxes[..., 3] = np.minimum(boxes[..., 3], ih - 1)
        scores = conf[:, :, None] * sigmoid(v[:, :, 5:])       # [N, A, C, H, W]
        boxes = np.where(keep[..., None], boxes, 0)
        scores = np.where(keep[:, :, None], scores, 0).transpose(0, 1, 3, 4, 2)
        return (boxes.reshape(n, -1, 4).astype(x.dtype),
                scores.reshape(n, -1, class_num).astype(x.dtype))


# --- yolov3_loss ----------------------------------------------------------------------------
def _bce(x, label):
    return np.maximum(x, 0) - x * label + np.log1p(np.exp(-np.abs(x)))


def _center_iou(b1, b2):
    """IoU of boxes given as (cx, cy, w, h) (broadcasting)."""
    def overlap(c1, w1, c2, w2):
        return np.minimum(c1 + w1 / 2, c2 + w2 / 2) - np.maximum(c1 - w1 / 2, c2 - w2 / 2)
    iw = overlap(b1[0], b1[2], b2[0], b2[2])
    ih = overlap(b1[1], b1[3], b2[1], b2[3])
    inter = np.where((iw < 0) | (ih < 0), 0.0, iw * ih)
    with np.errstate(divide="ignore", invalid="ignore"):
        return inter / (b1[2] * b1[3] + b2[2] * b2[3] - inter)


class _Yolo:
    """What yolov3_loss and its gradient share: shapes, the gt-to-anchor matching and the
    per-gt targets, computed once per call."""

    def __init__(self, x, gt_box, gt_label, gt_score, attrs):
        self.anchors, self.mask = list(attrs["anchors"]), list(attrs["anchor_mask"])
        self.classes = attrs["class_num"]
        _yolo_check("yolov3_loss", x.shape, self.anchors, self.classes, len(self.mask))
        n, _, h, w = x.shape
        self.n, self.h, self.w, self.m = n, h, w, len(self.mask)
        self.b = gt_box.shape[1]
        if gt_box.shape != (n, self.b, 4) or gt_label.shape[:2] != (n, self.b):
            raise ExecutionError(f"yolov3_loss: GTBox {list(gt_box.shape)} must be [N, B, 4] "
                                 f"and GTLabel {list(gt_label.shape)} [N, B] for X "
                                 f"{list(x.shape)}")
        self.input_size = attrs["downsample_ratio"] * h
        self.v = x.reshape(n, self.m, 5 + self.classes, h, w)
        self.score = (np.ones((n, self.b), x.dtype) if gt_score is None
                      else np.asarray(gt_score, x.dtype).reshape(n, self.b))
        if attrs["use_label_smooth"]:
            smooth = min(1.0 / self.classes, 1.0 / 40)
            self.pos, self.neg = 1.0 - smooth, smooth
        else:
            self.pos, self.neg = 1.0, 0.0
        self.gt, self.label = gt_box, np.asarray(gt_label).astype(np.int64)
        self.valid = (gt_box[..., 2] >= 1e-6) & (gt_box[..., 3] >= 1e-6)
        self.targets = self._match()

    def _match(self):
        """[(image, gt, mask index, row, col, anchor)] of the gts an anchor of this level
        predicts, and GTMatchMask [N, B]."""
        aw = np.asarray(self.anchors[0::2], np.float64) / self.input_size
        ah = np.asarray(self.anchors[1::2], np.float64) / self.input_size
        match = np.full((self.n, self.b), -1, np.int32)
        out = []
        for i in range(self.n):
            for t in range(self.b):
                if not self.valid[i, t]:
                    continue
                g = self.gt[i, t]
                iou = _center_iou((0.0, 0.0, aw, ah), (0.0, 0.0, g[2], g[3]))
                best, best_iou = 0, 0.0
                for a, v in enumerate(iou):      # the first best, above 0
                    if v > best_iou:
                        best, best_iou = a, v
                k = self.mask.index(best) if best in self.mask else -1
                match[i, t] = k
                if k >= 0:
                    out.append((i, t, k, int(g[1] * self.h), int(g[0] * self.w), best))
        self.match = match
        return out

    def location_targets(self, i, t, gj, gi, anchor):
        g = self.gt[i, t]
        return (g[0] * self.h - gi, g[1] * self.h - gj,
                np.log(g[2] * self.input_size / self.anchors[2 * anchor]),
                np.log(g[3] * self.input_size / self.anchors[2 * anchor + 1]),
                (2.0 - g[2] * g[3]) * self.score[i, t])

    def objectness_mask(self, ignore_thresh):
        """ObjectnessMask [N, M, H, W]: the gt's score where a gt is assigned, -1 where a
        prediction overlaps some gt by more than ignore_thresh, else 0."""
        v, h, w = self.v, self.h, self.w
        col = np.arange(w)[None, None, :]
        row = np.arange(h)[None, :, None]
        aw = np.asarray([self.anchors[2 * a] for a in self.mask])[:, None, None]
        ah = np.asarray([self.anchors[2 * a + 1] for a in self.mask])[:, None, None]
        mask = np.zeros((self.n, self.m, h, w), v.dtype)
        for i in range(self.n):
            pred = ((col + sigmoid(v[i, :, 0])) / h, (row + sigmoid(v[i, :, 1])) / h,
                    np.exp(v[i, :, 2]) * aw / self.input_size,
                    np.exp(v[i, :, 3]) * ah / self.input_size)
            best = np.zeros((self.m, h, w))
            for t in np.nonzero(self.valid[i])[0]:
                g = self.gt[i, t]
                best = np.maximum(best, _center_iou(pred, tuple(g)))
            mask[i][best > ignore_thresh] = -1
        for i, t, k, gj, gi, _ in self.targets:
            mask[i, k, gj, gi] = self.score[i, t]
        return mask


class Yolov3Loss(OpDef):
    type = "yolov3_loss"
    inputs = (In("X"), In("GTBox", no_grad=True), In("GTLabel", no_grad=True),
              In("GTScore", dispensable=True, no_grad=True))
    outputs = (Out("Loss"), Out("ObjectnessMask", intermediate=True),
               Out("GTMatchMask", intermediate=True))
    attrs = {"class_num": 1, "anchors": ints(), "anchor_mask": ints(), "downsample_ratio": 32,
             "ignore_thresh": 0.7, "use_label_smooth": True}
    share_lod = None
    doc = ("YOLOv3's loss per image [N]: for each gt box (cx, cy, w, h, fractions of the "
           "image) matched to an anchor of anchor_mask, sigmoid cross-entropy on tx, ty and L1 "
           "on tw, th (scaled by (2 - w * h) * score), sigmoid cross-entropy on the classes "
           "(label-smoothed); objectness cross-entropy everywhere but where a prediction "
           "overlaps a gt by more than ignore_thresh.")

    @staticmethod
    def infer_shape(ctx):
        x, gb, gl = (ctx.input_shape(s) for s in ("X", "GTBox", "GTLabel"))
        anchors, mask = ctx.attr("anchors"), ctx.attr("anchor_mask")
        classes = ctx.attr("class_num")
        if len(x) != 4 or (x[2] > 0 and x[3] > 0 and x[2] != x[3]):
            ctx.fail(f"X must be 4-D with H == W, got {x}")
        if x[1] > 0 and x[1] != len(mask) * (5 + classes):
            ctx.fail(f"X's channels must be len(anchor_mask) * (5 + class_num) = "
                     f"{len(mask)} * (5 + {classes}), got {x[1]}")
        if len(gb) != 3 or gb[2] not in (4, -1) or len(gl) != 2:
            ctx.fail(f"GTBox must be [N, B, 4] and GTLabel [N, B], got {gb} and {gl}")
        if not anchors or len(anchors) % 2 or any(a >= len(anchors) // 2 for a in mask):
            ctx.fail(f"anchors {list(anchors)} must be pairs and anchor_mask {list(mask)} "
                     f"index them")
        if classes <= 0:
            ctx.fail(f"class_num must be positive, got {classes}")
        dtype = ctx.input_dtype("X")
        ctx.set_output("Loss", [x[0]], dtype, 0)
        ctx.set_output("ObjectnessMask", [x[0], len(mask), x[2], x[3]], dtype, 0)
        ctx.set_output("GTMatchMask", [gb[0], gb[1]], "int32", 0)

    @classmethod
    def prepare(cls, attrs, outputs):
        def kernel(x, gt_box, gt_label, gt_score):
            y = _Yolo(x, gt_box, gt_label, gt_score, attrs)
            loss = np.zeros(y.n, np.float64)
            for i, t, k, gj, gi, anchor in y.targets:
                tx, ty, tw, th, scale = y.location_targets(i, t, gj, gi, anchor)
                p = y.v[i, k, :, gj, gi]
                loss[i] += (_bce(p[0], tx) + _bce(p[1], ty) + abs(tw - p[2])
                            + abs(th - p[3])) * scale
                lab = np.where(np.arange(y.classes) == y.label[i, t], y.pos, y.neg)
                loss[i] += (_bce(p[5:], lab) * y.score[i, t]).sum()
            obj = y.objectness_mask(attrs["ignore_thresh"])
            logit = y.v[:, :, 4]
            per = np.where(obj > 1e-5, _bce(logit, 1.0) * obj,
                           np.where(obj > -0.5, _bce(logit, 0.0), 0.0))
            loss += per.reshape(y.n, -1).sum(axis=1)
            return loss.astype(x.dtype), obj, y.match
        return kernel

    @staticmethod
    def grad(g):
        g.op("yolov3_loss_grad",
             {"X": g.input("X"), "GTBox": g.input("GTBox"), "GTLabel": g.input("GTLabel"),
              "GTScore": g.input("GTScore"), "Loss@GRAD": g.output_grad("Loss"),
              "ObjectnessMask": g.output("ObjectnessMask"),
              "GTMatchMask": g.output("GTMatchMask")},
             {"X@GRAD": g.input_grad("X")}, g.attrs())


class Yolov3LossGrad(OpDef):
    type = "yolov3_loss_grad"
    inputs = (In("X"), In("GTBox"), In("GTLabel"), In("GTScore", dispensable=True),
              In("Loss@GRAD"), In("ObjectnessMask"), In("GTMatchMask"))
    outputs = (Out("X@GRAD", dispensable=True),)
    attrs = Yolov3Loss.attrs
    share_lod = None
    infer_shape = None

    @classmethod
    def prepare(cls, attrs, outputs):
        def kernel(x, gt_box, gt_label, gt_score, dloss, obj, _match):
            y = _Yolo(x, gt_box, gt_label, gt_score, attrs)
            d = np.asarray(dloss, np.float64).reshape(-1)
            dv = np.zeros(y.v.shape, np.float64)
            for i, t, k, gj, gi, anchor in y.targets:
                tx, ty, tw, th, scale = y.location_targets(i, t, gj, gi, anchor)
                p = y.v[i, k, :, gj, gi]
                dv[i, k, 0, gj, gi] += (sigmoid(p[0]) - tx) * scale * d[i]
                dv[i, k, 1, gj, gi] += (sigmoid(p[1]) - ty) * scale * d[i]
                dv[i, k, 2, gj, gi] += np.sign(p[2] - tw) * scale * d[i]
                dv[i, k, 3, gj, gi] += np.sign(p[3] - th) * scale * d[i]
                lab = np.where(np.arange(y.classes) == y.label[i, t], y.pos, y.neg)
                dv[i, k, 5:, gj, gi] += (sigmoid(p[5:]) - lab) * y.score[i, t] * d[i]
            s = sigmoid(y.v[:, :, 4])
            dv[:, :, 4] = np.where(obj > 1e-5, (s - 1.0) * obj,
                                   np.where(obj > -0.5, s, 0.0)) * d[:, None, None, None]
            return dv.reshape(x.shape).astype(x.dtype)
        return kernel
