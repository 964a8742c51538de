"""NMS and proposal ops (fluidity/ops/nms.py) against numpy references: multiclass_nms and
multiclass_nms2 (shared boxes and per-class boxes with LoD, keep_top_k, adaptive eta, nothing
kept), generate_proposals, distribute_fpn_proposals and collect_fpn_proposals."""
import math

import numpy as np
import pytest

from fluidity.core.tensor import LoDTensor
from fluidity.errors import ExecutionError, ShapeError
from op_test import run_op

rng = np.random.default_rng(12)


def iou(a, b, normalized=True):
    if b[0] > a[2] or b[2] < a[0] or b[1] > a[3] or b[3] < a[1]:
        return 0.0
    e = 0 if normalized else 1
    iw = min(a[2], b[2]) - max(a[0], b[0]) + e
    ih = min(a[3], b[3]) - max(a[1], b[1]) + e
    area = lambda q: (q[2] - q[0] + e) * (q[3] - q[1] + e)   # noqa: E731
    return iw * ih / (area(a) + area(b) - iw * ih)


def greedy_nms(boxes, scores, thresh, top_k, nms_thr, eta=1.0, normalized=True):
    idx = [i for i in sorted(range(len(scores)), key=lambda i: -scores[i]) if scores[i] > thresh]
    if top_k > -1:
        idx = idx[:top_k]
    kept, t = [], nms_thr
    for i in idx:
        if all(iou(boxes[i], boxes[k], normalized) <= t for k in kept):
            kept.append(i)
            if eta < 1 and t > 0.5:
                t *= eta
    return kept


def nms_ref(boxes, scores, attrs):
    """Per image of shared boxes [N, M, 4], scores [N, C, M]: rows and LoD."""
    rows, lod = [], [0]
    for b, s in zip(boxes, scores):
        picked = {}
        for c in range(len(s)):
            if c == attrs["background_label"]:
                continue
            picked[c] = greedy_nms(b, s[c], attrs["score_threshold"], attrs["nms_top_k"],
                                   attrs["nms_threshold"], attrs.get("nms_eta", 1.0))
        allp = [(s[c][i], c, i) for c in sorted(picked) for i in picked[c]]
        if attrs["keep_top_k"] > -1 and len(allp) > attrs["keep_top_k"]:
            order = sorted(range(len(allp)), key=lambda k: -allp[k][0])[:attrs["keep_top_k"]]
            keep = {}
            for k in order:
                keep.setdefault(allp[k][1], []).append(allp[k][2])
            picked = keep
        for c in sorted(picked):
            for i in picked[c]:
                rows.append([c, s[c][i], *b[i]])
        lod.append(len(rows))
    return np.array(rows), lod


def clustered_boxes(n_images, m):
    """Boxes in two clusters so that NMS has something to suppress."""
    centres = rng.uniform(0.2, 0.8, size=(n_images, 2, 2))
    out = np.zeros((n_images, m, 4))
    for i in range(n_images):
        for j in range(m):
            c = centres[i, j % 2] + rng.normal(scale=0.03, size=2)
            out[i, j] = [c[0] - 0.1, c[1] - 0.1, c[0] + 0.1, c[1] + 0.1]
    return out


@pytest.mark.parametrize("keep_top_k,eta", [(-1, 1.0), (5, 1.0), (-1, 0.9)])
def test_multiclass_nms_shared_boxes(keep_top_k, eta):
    boxes = clustered_boxes(2, 8)
    scores = rng.uniform(size=(2, 3, 8))
    attrs = {"background_label": 0, "score_threshold": 0.1, "nms_top_k": 6,
             "nms_threshold": 0.45 if eta == 1.0 else 0.6, "nms_eta": eta,
             "keep_top_k": keep_top_k, "normalized": True}
    want, lod = nms_ref(boxes, scores, attrs)
    got = run_op("multiclass_nms2", {"BBoxes": boxes, "Scores": scores}, attrs,
                 outputs=["Out", "Index"], return_lod=True)
    np.testing.assert_allclose(got["Out"]._array, want, rtol=1e-6)
    assert got["Out"]._lod == [lod] and got["Index"]._lod == [lod]
    idx = np.asarray(got["Index"]._array).reshape(-1)
    np.testing.assert_allclose(boxes.reshape(-1, 4)[idx], want[:, 2:])


def test_multiclass_nms_per_class_boxes_with_lod():
    # boxes [M, C, 4] per class, scores [M, C], images by LoD; kept indices ascending
    m, c = 6, 3
    boxes = np.concatenate([clustered_boxes(1, m)[0][:, None, :]] * c, axis=1)
    scores = rng.uniform(size=(m, c))
    attrs = {"background_label": -1, "score_threshold": 0.05, "nms_top_k": -1,
             "nms_threshold": 0.3, "nms_eta": 1.0, "keep_top_k": -1, "normalized": False}
    rows, lod = [], [0]
    for a, b in ((0, 4), (4, 6)):
        for cls in range(c):
            kept = sorted(greedy_nms(boxes[a:b, cls], scores[a:b, cls], 0.05, -1, 0.3,
                                     normalized=False))
            rows += [[cls, scores[a + i, cls], *boxes[a + i, cls]] for i in kept]
        lod.append(len(rows))
    got = run_op("multiclass_nms", {"BBoxes": LoDTensor(boxes, [[0, 4, 6]]), "Scores": scores},
                 attrs, return_lod=True)
    np.testing.assert_allclose(got["Out"]._array, np.array(rows), rtol=1e-6)
    assert got["Out"]._lod == [lod]


def test_multiclass_nms_nothing_kept():
    boxes, scores = clustered_boxes(2, 3), np.full((2, 2, 3), 0.01)
    attrs = {"score_threshold": 0.5, "nms_top_k": -1, "keep_top_k": -1}
    got = run_op("multiclass_nms", {"BBoxes": boxes, "Scores": scores}, attrs, return_lod=True)
    np.testing.assert_array_equal(got["Out"]._array, [[-1]])
    assert got["Out"]._lod == [[0, 1]]
    got2 = run_op("multiclass_nms2", {"BBoxes": boxes, "Scores": scores}, attrs,
                  outputs=["Out", "Index"], return_lod=True)
    # the op writes [0, 6] and [0, 1]; fetched, as in Fluid 1.8, they come back as [0]
    assert got2["Out"]._array.shape == (0,) and got2["Index"]._array.shape == (0,)
    assert got2["Out"]._lod == [[0, 0, 0]] and got2["Index"]._array.dtype == np.int32


def test_multiclass_nms_bad_input():
    with pytest.raises(ShapeError, match="Scores must be 2-D or 3-D"):
        run_op("multiclass_nms", {"BBoxes": np.zeros((1, 2, 4)), "Scores": np.zeros((2,))})
    with pytest.raises(ShapeError, match="polygon"):
        run_op("multiclass_nms", {"BBoxes": np.zeros((1, 2, 8)), "Scores": np.zeros((1, 3, 2))})
    with pytest.raises(ExecutionError, match="needs a LoD"):
        run_op("multiclass_nms", {"BBoxes": np.zeros((2, 3, 4)), "Scores": np.zeros((2, 3))})


def test_generate_proposals():
    n, a, h, w = 2, 2, 3, 3
    anchors = np.zeros((h, w, a, 4))
    for i in range(h):
        for j in range(w):
            for k in range(a):
                s = 8 * (k + 1)
                anchors[i, j, k] = [j * 8, i * 8, j * 8 + s, i * 8 + s]
    var = np.full((h, w, a, 4), 0.5)
    scores = rng.uniform(size=(n, a, h, w))
    deltas = rng.normal(scale=0.3, size=(n, 4 * a, h, w))
    im_info = np.array([[24.0, 24.0, 1.0], [20.0, 16.0, 2.0]])
    attrs = {"pre_nms_topN": 12, "post_nms_topN": 5, "nms_thresh": 0.5, "min_size": 2.0,
             "eta": 1.0}
    want_rois, want_probs, lod = [], [], [0]
    for i in range(n):
        sc = scores[i].transpose(1, 2, 0).reshape(-1)
        dl = deltas[i].reshape(a, 4, h, w).transpose(2, 3, 0, 1).reshape(-1, 4)
        an, vr = anchors.reshape(-1, 4), var.reshape(-1, 4)
        order = sorted(range(len(sc)), key=lambda k: -sc[k])[:12]
        props = []
        for k in order:
            aw, ah = an[k, 2] - an[k, 0] + 1, an[k, 3] - an[k, 1] + 1
            cx = vr[k, 0] * dl[k, 0] * aw + an[k, 0] + aw / 2
            cy = vr[k, 1] * dl[k, 1] * ah + an[k, 1] + ah / 2
            bw = math.exp(min(vr[k, 2] * dl[k, 2], math.log(1000 / 16))) * aw
            bh = math.exp(min(vr[k, 3] * dl[k, 3], math.log(1000 / 16))) * ah
            b = [cx - bw / 2, cy - bh / 2, cx + bw / 2 - 1, cy + bh / 2 - 1]
            hh, ww = im_info[i, 0], im_info[i, 1]
            b = [max(min(b[0], ww - 1), 0), max(min(b[1], hh - 1), 0),
                 max(min(b[2], ww - 1), 0), max(min(b[3], hh - 1), 0)]
            ok = ((b[2] - b[0]) / im_info[i, 2] + 1 >= 2 and (b[3] - b[1]) / im_info[i, 2] + 1 >= 2
                  and b[0] + (b[2] - b[0] + 1) / 2 <= ww and b[1] + (b[3] - b[1] + 1) / 2 <= hh)
            if ok:
                props.append((sc[k], b))
        boxes = np.array([b for _, b in props])
        kept = greedy_nms(boxes, np.array([s for s, _ in props]), -np.inf, -1, 0.5,
                          normalized=False)[:5]
        want_rois += [props[k][1] for k in kept]
        want_probs += [props[k][0] for k in kept]
        lod.append(len(want_rois))
    got = run_op("generate_proposals", {"Scores": scores, "BboxDeltas": deltas,
                                        "ImInfo": im_info, "Anchors": anchors,
                                        "Variances": var}, attrs, return_lod=True)
    np.testing.assert_allclose(got["RpnRois"]._array, np.array(want_rois), rtol=1e-6)
    np.testing.assert_allclose(got["RpnRoiProbs"]._array.reshape(-1), want_probs)
    assert got["RpnRois"]._lod == [lod]
    np.testing.assert_array_equal(np.asarray(got["RpnRoisLod"]._array).reshape(-1), lod[1:])


def test_distribute_and_collect_fpn_proposals():
    rois = np.array([[0, 0, 10, 10], [0, 0, 100, 100], [0, 0, 300, 300],
                     [5, 5, 40, 60], [0, 0, 600, 500]], np.float64)
    attrs = {"min_level": 2, "max_level": 5, "refer_level": 4, "refer_scale": 224}
    got = run_op("distribute_fpn_proposals", {"FpnRois": LoDTensor(rois, [[0, 3, 5]])}, attrs,
                 outputs={"MultiFpnRois": 4, "RestoreIndex": 1}, return_lod=True)
    levels = []
    for r in rois:
        scale = math.sqrt((r[2] - r[0] + 1) * (r[3] - r[1] + 1))
        levels.append(min(max(math.floor(math.log2(scale / 224 + 1e-6) + 4), 2), 5))
    order = []
    for k, lvl in enumerate(range(2, 6)):
        sel = [i for i in range(5) if levels[i] == lvl]
        order += sel
        np.testing.assert_array_equal(got["MultiFpnRois"][k]._array.reshape(-1, 4), rois[sel])
        per_image = [sum(1 for i in sel if i < 3), sum(1 for i in sel if i >= 3)]
        assert got["MultiFpnRois"][k]._lod == [[0, per_image[0], sum(per_image)]]
    restore = np.asarray(got["RestoreIndex"]._array).reshape(-1)
    np.testing.assert_array_equal(np.array(order)[restore], np.arange(5))

    scores = [LoDTensor(rng.uniform(size=(len(lv._array), 1)), lv._lod)
              for lv in got["MultiFpnRois"]]
    multi = [(f"r{k}", lv) for k, lv in enumerate(got["MultiFpnRois"])]
    out = run_op("collect_fpn_proposals",
                 {"MultiLevelRois": multi,
                  "MultiLevelScores": [(f"s{k}", s) for k, s in enumerate(scores)]},
                 {"post_nms_topN": 3}, return_lod=True)
    allr = np.concatenate([lv._array.reshape(-1, 4) for lv in got["MultiFpnRois"]])
    alls = np.concatenate([s._array.reshape(-1) for s in scores])
    img = np.concatenate([np.repeat([0, 1], np.diff(lv._lod[0])) for lv in got["MultiFpnRois"]])
    top = sorted(sorted(range(len(alls)), key=lambda k: -alls[k])[:3], key=lambda k: img[k])
    np.testing.assert_array_equal(out["FpnRois"]._array, allr[top])
    n0 = sum(1 for k in top if img[k] == 0)
    assert out["FpnRois"]._lod == [[0, n0, 3]]


def test_retinanet_detection_output():
    # two levels, one image; classes 2; the last level keeps scores under the threshold
    anchors = [np.array([[0, 0, 9, 9], [10, 10, 19, 19], [0, 0, 19, 19]], np.float64),
               np.array([[5, 5, 14, 14], [0, 10, 9, 19]], np.float64)]
    deltas = [rng.normal(scale=0.1, size=(1, 3, 4)), rng.normal(scale=0.1, size=(1, 2, 4))]
    scores = [np.array([[[0.9, 0.01], [0.2, 0.6], [0.85, 0.3]]]),
              np.array([[[0.04, 0.5], [0.02, 0.03]]])]
    im_info = np.array([[40.0, 40.0, 2.0]])
    attrs = {"score_threshold": 0.05, "nms_top_k": 3, "keep_top_k": 4, "nms_threshold": 0.3,
             "nms_eta": 1.0}
    preds = {}
    for k, (d, s, a) in enumerate(zip(deltas, scores, anchors)):
        flat = s[0].reshape(-1)
        thr = 0.05 if k == 0 else 0.0
        order = [i for i in sorted(range(len(flat)), key=lambda i: -flat[i]) if flat[i] > thr][:3]
        for i in order:
            j, c = divmod(i, 2)
            w, h = a[j, 2] - a[j, 0] + 1, a[j, 3] - a[j, 1] + 1
            cx, cy = d[0, j, 0] * w + a[j, 0] + w / 2, d[0, j, 1] * h + a[j, 1] + h / 2
            bw, bh = math.exp(d[0, j, 2]) * w, math.exp(d[0, j, 3]) * h
            box = np.array([cx - bw / 2, cy - bh / 2, cx + bw / 2 - 1, cy + bh / 2 - 1]) / 2.0
            box = np.clip(box, 0, 19)
            preds.setdefault(c, []).append((flat[i], box))
    pairs = []
    for c in sorted(preds):
        sc = [p[0] for p in preds[c]]
        bx = np.array([p[1] for p in preds[c]])
        pairs += [(sc[i], c, bx[i]) for i in greedy_nms(bx, np.array(sc), -1, -1, 0.3,
                                                         normalized=False)]
    pairs = sorted(pairs, key=lambda t: -t[0])[:4]
    want = np.array([[c + 1, s, *b] for s, c, b in pairs])
    got = run_op("retinanet_detection_output",
                 {"BBoxes": [("b0", deltas[0]), ("b1", deltas[1])],
                  "Scores": [("s0", scores[0]), ("s1", scores[1])],
                  "Anchors": [("a0", anchors[0]), ("a1", anchors[1])], "ImInfo": im_info},
                 attrs, return_lod=True)
    np.testing.assert_allclose(got["Out"]._array, want, rtol=1e-6)
    assert got["Out"]._lod == [[0, len(want)]]


def test_locality_aware_nms_merges_neighbours_before_nms():
    # boxes 0 and 1 overlap (IoU 0.82 > 0.3): merged into one, score-weighted, scores added;
    # box 2 stands apart; box 3 scores below the threshold
    boxes = np.array([[[0, 0, 10, 10], [0, 1, 10, 11], [20, 20, 30, 30], [40, 40, 50, 50]]],
                     np.float32)
    scores = np.array([[[0.6, 0.2, 0.5, 0.05]]], np.float32)
    attrs = {"score_threshold": 0.1, "nms_top_k": -1, "keep_top_k": -1, "nms_threshold": 0.3,
             "normalized": False, "background_label": -1}
    got = run_op("locality_aware_nms", {"BBoxes": boxes, "Scores": scores}, attrs,
                 return_lod=True)["Out"]
    merged = (boxes[0, 0] * 0.6 + boxes[0, 1] * 0.2) / 0.8
    want = np.array([[0, 0.8, *merged], [0, 0.5, 20, 20, 30, 30]], np.float32)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
    assert [list(v) for v in got.lod()] == [[0, 2]]
    # quadrilaterals: the same squares as 8 coordinates give the same selection
    quads = np.stack([boxes[..., [0, 1, 2, 1, 2, 3, 0, 3]]])[0]
    q = run_op("locality_aware_nms", {"BBoxes": quads, "Scores": scores},
               dict(attrs, normalized=True), return_lod=True)["Out"]
    assert np.asarray(q).shape == (2, 10)
    np.testing.assert_allclose(np.asarray(q)[:, 1], [0.8, 0.5], rtol=1e-6)
    empty = run_op("locality_aware_nms", {"BBoxes": boxes, "Scores": scores},
                   dict(attrs, score_threshold=2.0))["Out"]
    np.testing.assert_array_equal(empty, [[-1]])
