"""Matching and detection-loss ops against numpy references: bipartite_match (both match
types, per instance of a LoD), target_assign (with negatives), mine_hard_examples (both
mining types), sigmoid_focal_loss and yolov3_loss (forward and numeric gradients), yolo_box."""
import math

import numpy as np
import pytest

from fluidity.core.tensor import LoDTensor
from fluidity.errors import ExecutionError, ShapeError
from op_test import check_grad, check_output, run_op

rng = np.random.default_rng(13)


# --- bipartite_match, target_assign, mine_hard_examples --------------------------------------
def match_ref(dist, match_type, thr):
    n, m = dist.shape
    idx, val = -np.ones(m, int), np.zeros(m)
    rows = set(range(n))
    while rows:
        best, bj, bi = -1, -1, -1
        for j in range(m):
            if idx[j] != -1:
                continue
            for i in sorted(rows):
                if dist[i, j] >= 1e-6 and dist[i, j] > best:
                    best, bj, bi = dist[i, j], j, i
        if bj == -1:
            break
        idx[bj], val[bj] = bi, best
        rows.discard(bi)
    if match_type == "per_prediction":
        for j in range(m):
            if idx[j] == -1:
                col = [(dist[i, j], i) for i in range(n) if dist[i, j] >= max(thr, 1e-6)]
                if col:
                    v, i = max(col, key=lambda t: (t[0], -t[1]))
                    idx[j], val[j] = i, v
    return idx, val


@pytest.mark.parametrize("match_type", ["bipartite", "per_prediction"])
def test_bipartite_match(match_type):
    dist = rng.uniform(size=(5, 7))
    dist[dist < 0.2] = 0
    lod = [0, 2, 5]
    attrs = {"match_type": match_type, "dist_threshold": 0.4}
    want = [match_ref(dist[a:b], match_type, 0.4) for a, b in zip(lod[:-1], lod[1:])]
    check_output("bipartite_match", {"DistMat": LoDTensor(dist, [lod])},
                 {"ColToRowMatchIndices": np.array([w[0] for w in want], np.int32),
                  "ColToRowMatchDist": np.array([w[1] for w in want])}, attrs)
    # without a LoD: one instance
    idx, val = match_ref(dist, match_type, 0.4)
    check_output("bipartite_match", {"DistMat": dist},
                 {"ColToRowMatchIndices": idx[None].astype(np.int32),
                  "ColToRowMatchDist": val[None]}, attrs)


def test_target_assign_with_negatives():
    x = rng.normal(size=(5, 3, 2))               # 2 instances: rows 0-1 and 2-4, P = 3
    match = np.array([[1, -1, 0, -1], [2, 0, -1, -1]], np.int32)
    neg = LoDTensor(np.array([[3], [2], [3]], np.int32), [[0, 1, 3]])
    out = np.full((2, 4, 2), 7.0)
    weight = np.zeros((2, 4, 1), np.float32)
    for i, base in enumerate((0, 2)):
        for j in range(4):
            if match[i, j] > -1:
                out[i, j] = x[base + match[i, j], j % 3]
                weight[i, j] = 1
    for i, j in ((0, 3), (1, 2), (1, 3)):
        out[i, j] = 7
        weight[i, j] = 1
    check_output("target_assign", {"X": LoDTensor(x, [[0, 2, 5]]), "MatchIndices": match,
                                   "NegIndices": neg},
                 {"Out": out, "OutWeight": weight}, {"mismatch_value": 7})
    with pytest.raises(ExecutionError, match="one LoD level"):
        run_op("target_assign", {"X": x, "MatchIndices": match})


@pytest.mark.parametrize("mining", ["max_negative", "hard_example"])
def test_mine_hard_examples(mining):
    n, m = 2, 8
    cls = rng.uniform(size=(n, m))
    loc = rng.uniform(size=(n, m))
    match = np.array([[0, -1, -1, 1, -1, -1, -1, -1], [-1, -1, 2, -1, -1, 0, -1, -1]], np.int32)
    dist = rng.uniform(size=(n, m))
    attrs = {"neg_pos_ratio": 1.5, "neg_dist_threshold": 0.6, "sample_size": 3,
             "mining_type": mining}
    negs, lod, updated = [], [0], match.copy()
    for i in range(n):
        if mining == "max_negative":
            cand = [j for j in range(m) if match[i, j] == -1 and dist[i, j] < 0.6]
            k = min(int((match[i] != -1).sum() * 1.5), len(cand))
            loss = cls[i]
        else:
            cand, k, loss = list(range(m)), 3, cls[i] + loc[i]
        chosen = set(sorted(cand, key=lambda j: -loss[j])[:k])
        if mining == "hard_example":
            for j in range(m):
                if match[i, j] > -1 and j not in chosen:
                    updated[i, j] = -1
            neg = sorted(j for j in chosen if match[i, j] == -1)
        else:
            neg = sorted(chosen)
        negs += neg
        lod.append(len(negs))
    got = run_op("mine_hard_examples", {"ClsLoss": cls, "LocLoss": loc, "MatchIndices": match,
                                        "MatchDist": dist}, attrs, return_lod=True)
    np.testing.assert_array_equal(np.asarray(got["NegIndices"]._array).reshape(-1), negs)
    assert got["NegIndices"]._lod == [lod]
    np.testing.assert_array_equal(got["UpdatedMatchIndices"]._array, updated)


# --- sigmoid_focal_loss ---------------------------------------------------------------------
def focal_ref(x, label, fg, gamma, alpha):
    out = np.zeros_like(x)
    fg = max(fg, 1)
    for i in range(x.shape[0]):
        for d in range(x.shape[1]):
            g = label[i, 0]
            p = 1 / (1 + math.exp(-x[i, d]))
            if g == d + 1:
                out[i, d] = -alpha / fg * (1 - p) ** gamma * math.log(p)
            elif g != -1:
                out[i, d] = -(1 - alpha) / fg * p ** gamma * math.log(1 - p)
    return out


def test_sigmoid_focal_loss_forward_and_gradient():
    x = rng.normal(size=(6, 3))
    label = np.array([[0], [1], [3], [-1], [2], [1]], np.int32)
    fg = np.array([4], np.int32)
    ins = {"X": x, "Label": label, "FgNum": fg}
    attrs = {"gamma": 2.0, "alpha": 0.25}
    check_output("sigmoid_focal_loss", ins, {"Out": focal_ref(x, label, 4, 2.0, 0.25)}, attrs,
                 atol=1e-12)
    check_grad("sigmoid_focal_loss", ins, ["X"], attrs)
    check_grad("sigmoid_focal_loss", ins, ["X"], {"gamma": 0.5, "alpha": 0.6})


# --- YOLOv3 ---------------------------------------------------------------------------------
def sig(v):
    return 1 / (1 + np.exp(-v))


def test_yolo_box():
    n, an, classes, h = 2, 2, 3, 3
    anchors = [10, 13, 16, 30]
    x = rng.normal(size=(n, an * (5 + classes), h, h))
    img = np.array([[96, 128], [64, 64]], np.int32)
    attrs = {"anchors": anchors, "class_num": classes, "conf_thresh": 0.4,
             "downsample_ratio": 32, "clip_bbox": True}
    boxes = np.zeros((n, an * h * h, 4))
    scores = np.zeros((n, an * h * h, classes))
    for i in range(n):
        ih, iw = img[i]
        for a in range(an):
            for r in range(h):
                for c in range(h):
                    v = x[i, a * (5 + classes):(a + 1) * (5 + classes), r, c]
                    conf = sig(v[4])
                    if conf < 0.4:
                        continue
                    cx = (c + sig(v[0])) * iw / h
                    cy = (r + sig(v[1])) * ih / h
                    bw = math.exp(v[2]) * anchors[2 * a] * iw / (32 * h)
                    bh = math.exp(v[3]) * anchors[2 * a + 1] * ih / (32 * h)
                    k = a * h * h + r * h + c
                    boxes[i, k] = [max(cx - bw / 2, 0), max(cy - bh / 2, 0),
                                   min(cx + bw / 2, iw - 1), min(cy + bh / 2, ih - 1)]
                    scores[i, k] = conf * sig(v[5:])
    check_output("yolo_box", {"X": x, "ImgSize": img}, {"Boxes": boxes, "Scores": scores}, attrs,
                 atol=1e-9)


def yolo_loss_ref(x, gtbox, gtlabel, anchors, mask, classes, ignore, ratio, smooth):
    n, _, h, w = x.shape
    m = len(mask)
    size = ratio * h
    v = x.reshape(n, m, 5 + classes, h, w)
    pos, neg = (1 - min(1 / classes, 1 / 40), min(1 / classes, 1 / 40)) if smooth else (1, 0)

    def bce(z, t):
        return max(z, 0) - z * t + math.log1p(math.exp(-abs(z)))

    def ciou(a, b):
        iw = min(a[0] + a[2] / 2, b[0] + b[2] / 2) - max(a[0] - a[2] / 2, b[0] - b[2] / 2)
        ih = min(a[1] + a[3] / 2, b[1] + b[3] / 2) - max(a[1] - a[3] / 2, b[1] - b[3] / 2)
        inter = 0 if iw < 0 or ih < 0 else iw * ih
        return inter / (a[2] * a[3] + b[2] * b[3] - inter)
    loss = np.zeros(n)
    obj = np.zeros((n, m, h, w))
    for i in range(n):
        for k in range(m):
            for r in range(h):
                for c in range(w):
                    p = ((c + sig(v[i, k, 0, r, c])) / h, (r + sig(v[i, k, 1, r, c])) / h,
                         math.exp(v[i, k, 2, r, c]) * anchors[2 * mask[k]] / size,
                         math.exp(v[i, k, 3, r, c]) * anchors[2 * mask[k] + 1] / size)
                    best = max([ciou(p, g) for g in gtbox[i] if g[2] > 1e-6 and g[3] > 1e-6]
                               + [0])
                    if best > ignore:
                        obj[i, k, r, c] = -1
        for t, g in enumerate(gtbox[i]):
            if g[2] <= 1e-6 or g[3] <= 1e-6:
                continue
            ious = [ciou((0, 0, anchors[2 * a] / size, anchors[2 * a + 1] / size),
                         (0, 0, g[2], g[3])) for a in range(len(anchors) // 2)]
            best = int(np.argmax(ious))
            if best not in mask:
                continue
            k = mask.index(best)
            gi, gj = int(g[0] * w), int(g[1] * h)
            pv = v[i, k, :, gj, gi]
            scale = 2 - g[2] * g[3]
            loss[i] += scale * (bce(pv[0], g[0] * h - gi) + bce(pv[1], g[1] * h - gj)
                                + abs(pv[2] - math.log(g[2] * size / anchors[2 * best]))
                                + abs(pv[3] - math.log(g[3] * size / anchors[2 * best + 1])))
            for cl in range(classes):
                loss[i] += bce(pv[5 + cl], pos if cl == gtlabel[i, t] else neg)
            obj[i, k, gj, gi] = 1.0
        for k in range(m):
            for r in range(h):
                for c in range(w):
                    o, z = obj[i, k, r, c], v[i, k, 4, r, c]
                    loss[i] += bce(z, 1.0) * o if o > 0 else (bce(z, 0.0) if o == 0 else 0)
    return loss, obj


def yolo_inputs():
    n, h, classes = 2, 4, 2
    anchors, mask = [10, 14, 23, 27, 37, 58], [1, 2]
    x = rng.normal(scale=0.5, size=(n, len(mask) * (5 + classes), h, h))
    gtbox = np.array([[[0.3, 0.4, 0.35, 0.3], [0.7, 0.2, 0.2, 0.25], [0, 0, 0, 0]],
                      [[0.55, 0.6, 0.5, 0.45], [0.1, 0.8, 0.08, 0.1], [0.9, 0.9, 0.3, 0.2]]])
    gtlabel = np.array([[0, 1, 0], [1, 0, 1]], np.int32)
    attrs = {"anchors": anchors, "anchor_mask": mask, "class_num": classes,
             "ignore_thresh": 0.5, "downsample_ratio": 16, "use_label_smooth": True}
    return x, gtbox, gtlabel, attrs


def test_yolov3_loss_forward_and_gradient():
    x, gtbox, gtlabel, attrs = yolo_inputs()
    loss, obj = yolo_loss_ref(x, gtbox, gtlabel, attrs["anchors"], attrs["anchor_mask"],
                              attrs["class_num"], 0.5, 16, True)
    ins = {"X": x, "GTBox": gtbox, "GTLabel": gtlabel}
    got = check_output("yolov3_loss", ins, {"Loss": loss, "ObjectnessMask": obj}, attrs,
                       atol=1e-9)
    assert got["Loss"].shape == (2,)
    # the ignore mask is constant near x: the loss is smooth there
    check_grad("yolov3_loss", ins, ["X"], attrs, output_slots=["Loss"], rtol=1e-4, atol=1e-6)


def test_yolov3_loss_bad_channels():
    x, gtbox, gtlabel, attrs = yolo_inputs()
    with pytest.raises(ShapeError, match="channels must be len\\(anchor_mask\\)"):
        run_op("yolov3_loss", {"X": x[:, :5], "GTBox": gtbox, "GTLabel": gtlabel}, attrs,
               outputs=["Loss", "ObjectnessMask", "GTMatchMask"])
