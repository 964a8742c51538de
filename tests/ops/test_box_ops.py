"""Box geometry ops (fluidity/ops/boxes.py) against loop-by-loop numpy references of Paddle
1.8's definitions: iou_similarity, box_coder (encode, decode on both axes, variance as input
or attribute), prior_box (both orders), density_prior_box, anchor_generator, box_clip,
polygon_box_transform, box_decoder_and_assign; and their bad input."""
import math

import numpy as np
import pytest

from fluidity.core.tensor import LoDTensor
from fluidity.errors import ExecutionError, ShapeError
from op_test import check_output, run_op

rng = np.random.default_rng(11)


def random_boxes(n, scale=1.0):
    xy = rng.uniform(0, 0.6, size=(n, 2)) * scale
    wh = rng.uniform(0.05, 0.4, size=(n, 2)) * scale
    return np.concatenate([xy, xy + wh], axis=1)


def iou_ref(a, b, normalized=True):
    e = 0 if normalized else 1
    out = np.zeros((len(a), len(b)))
    for i, p in enumerate(a):
        for j, q in enumerate(b):
            iw = max(min(p[2], q[2]) - max(p[0], q[0]) + e, 0)
            ih = max(min(p[3], q[3]) - max(p[1], q[1]) + e, 0)
            inter = iw * ih
            area = ((p[2] - p[0] + e) * (p[3] - p[1] + e) + (q[2] - q[0] + e) * (q[3] - q[1] + e))
            out[i, j] = inter / (area - inter)
    return out


@pytest.mark.parametrize("normalized", [True, False])
def test_iou_similarity(normalized):
    x, y = random_boxes(3, 10), random_boxes(4, 10)
    x[0] = y[1]   # identical: 1
    x[1] = [20, 20, 21, 21]   # apart: 0
    want = iou_ref(x, y, normalized)
    got = check_output("iou_similarity", {"X": LoDTensor(x, [[0, 1, 3]]), "Y": y},
                       {"Out": want}, {"box_normalized": normalized})
    assert got["Out"][0, 1] == pytest.approx(1.0)


def encode_ref(t, p, var, normalized):
    e = 0 if normalized else 1
    out = np.zeros((len(t), len(p), 4))
    for i in range(len(t)):
        for j in range(len(p)):
            pw, ph = p[j, 2] - p[j, 0] + e, p[j, 3] - p[j, 1] + e
            pcx, pcy = p[j, 0] + pw / 2, p[j, 1] + ph / 2
            tw, th = t[i, 2] - t[i, 0] + e, t[i, 3] - t[i, 1] + e
            tcx, tcy = (t[i, 0] + t[i, 2]) / 2, (t[i, 1] + t[i, 3]) / 2
            v = var[j] if var.ndim == 2 else var
            out[i, j] = [(tcx - pcx) / pw / v[0], (tcy - pcy) / ph / v[1],
                         math.log(tw / pw) / v[2], math.log(th / ph) / v[3]]
    return out


def decode_ref(t, p, var, normalized, axis):
    e = 0 if normalized else 1
    out = np.zeros(t.shape)
    for i in range(t.shape[0]):
        for j in range(t.shape[1]):
            k = j if axis == 0 else i
            pw, ph = p[k, 2] - p[k, 0] + e, p[k, 3] - p[k, 1] + e
            pcx, pcy = p[k, 0] + pw / 2, p[k, 1] + ph / 2
            v = var[k] if var.ndim == 2 else var
            cx = v[0] * t[i, j, 0] * pw + pcx
            cy = v[1] * t[i, j, 1] * ph + pcy
            w, h = math.exp(v[2] * t[i, j, 2]) * pw, math.exp(v[3] * t[i, j, 3]) * ph
            out[i, j] = [cx - w / 2, cy - h / 2, cx + w / 2 - e, cy + h / 2 - e]
    return out


@pytest.mark.parametrize("normalized", [True, False])
def test_box_coder_encode_with_variance_input_and_attribute(normalized):
    prior, target = random_boxes(5, 10), random_boxes(3, 10)
    var = rng.uniform(0.1, 0.3, size=(5, 4))
    want = encode_ref(target, prior, var, normalized)
    check_output("box_coder", {"PriorBox": prior, "PriorBoxVar": var, "TargetBox": target},
                 {"OutputBox": want}, {"box_normalized": normalized})
    v4 = [0.1, 0.1, 0.2, 0.2]
    check_output("box_coder", {"PriorBox": prior, "TargetBox": target},
                 {"OutputBox": encode_ref(target, prior, np.array(v4), normalized)},
                 {"box_normalized": normalized, "variance": v4})


@pytest.mark.parametrize("axis", [0, 1])
def test_box_coder_decode_on_either_axis(axis):
    prior = random_boxes(4)
    target = rng.normal(scale=0.5, size=(4, 4, 4) if axis == 1 else (2, 4, 4))
    var = rng.uniform(0.1, 0.3, size=(4, 4))
    check_output("box_coder", {"PriorBox": prior, "PriorBoxVar": var, "TargetBox": target},
                 {"OutputBox": decode_ref(target, prior, var, True, axis)},
                 {"code_type": "decode_center_size", "axis": axis})
    check_output("box_coder", {"PriorBox": prior, "TargetBox": target},
                 {"OutputBox": decode_ref(target, prior, np.ones(4), False, axis)},
                 {"code_type": "decode_center_size", "axis": axis, "box_normalized": False})


def test_box_coder_refuses_variance_twice_and_bad_shapes():
    prior, target = random_boxes(2), random_boxes(3)
    with pytest.raises(ExecutionError, match="cannot be given together"):
        run_op("box_coder", {"PriorBox": prior, "PriorBoxVar": np.ones((2, 4)),
                             "TargetBox": target}, {"variance": [1.0, 1, 1, 1]})
    with pytest.raises(ShapeError, match="TargetBox must be \\[N, M, 4\\] to decode"):
        run_op("box_coder", {"PriorBox": prior, "TargetBox": target},
               {"code_type": "decode_center_size"})


def prior_ref(fh, fw, ih, iw, mins, maxs, ratios, flip, clip, offset, minmax_order):
    real = [1.0]
    for r in ratios:
        if all(abs(r - o) >= 1e-6 for o in real):
            real.append(r)
            if flip:
                real.append(1 / r)
    sw, sh = iw / fw, ih / fh
    out = []
    for h in range(fh):
        for w in range(fw):
            cx, cy = (w + offset) * sw, (h + offset) * sh
            cell = []
            for s, mn in enumerate(mins):
                sizes = [(mn * math.sqrt(r), mn / math.sqrt(r)) for r in real]
                big = [(math.sqrt(mn * maxs[s]),) * 2] if maxs else []
                if minmax_order:
                    sizes = [(mn, mn)] + big + [sz for sz, r in zip(sizes, real)
                                                if abs(r - 1) >= 1e-6]
                else:
                    sizes = sizes + big
                for bw, bh in sizes:
                    cell.append([(cx - bw / 2) / iw, (cy - bh / 2) / ih, (cx + bw / 2) / iw,
                                 (cy + bh / 2) / ih])
            out.append(cell)
    boxes = np.array(out).reshape(fh, fw, -1, 4)
    return np.clip(boxes, 0, 1) if clip else boxes


@pytest.mark.parametrize("minmax_order", [False, True])
def test_prior_box(minmax_order):
    feat, image = np.zeros((1, 2, 3, 4), np.float32), np.zeros((1, 3, 12, 16), np.float32)
    attrs = {"min_sizes": [2.0, 4.0], "max_sizes": [5.0, 9.0], "aspect_ratios": [2.0, 3.0],
             "variances": [0.1, 0.1, 0.2, 0.2], "flip": True, "clip": True,
             "min_max_aspect_ratios_order": minmax_order}
    boxes = prior_ref(3, 4, 12, 16, [2, 4], [5, 9], [2.0, 3.0], True, True, 0.5, minmax_order)
    var = np.broadcast_to([0.1, 0.1, 0.2, 0.2], boxes.shape)
    check_output("prior_box", {"Input": feat, "Image": image},
                 {"Boxes": boxes, "Variances": var}, attrs)


def test_density_prior_box():
    feat, image = np.zeros((1, 1, 2, 2), np.float32), np.zeros((1, 3, 8, 8), np.float32)
    attrs = {"variances": [0.1, 0.1, 0.2, 0.2], "clip": True, "fixed_sizes": [4.0, 2.0],
             "fixed_ratios": [1.0, 2.0], "densities": [2, 1], "flatten_to_2d": True}
    step = 4.0
    boxes = []
    for h in range(2):
        for w in range(2):
            cx, cy = (w + 0.5) * step, (h + 0.5) * step
            for size, d in ((4.0, 2), (2.0, 1)):
                shift = int(step) // d
                for r in (1.0, 2.0):
                    bw, bh = size * math.sqrt(r), size / math.sqrt(r)
                    for di in range(d):
                        for dj in range(d):
                            x = cx - step / 2 + shift / 2 + dj * shift
                            y = cy - step / 2 + shift / 2 + di * shift
                            boxes.append([max((x - bw / 2) / 8, 0), max((y - bh / 2) / 8, 0),
                                          min((x + bw / 2) / 8, 1), min((y + bh / 2) / 8, 1)])
    boxes = np.array(boxes)
    check_output("density_prior_box", {"Input": feat, "Image": image},
                 {"Boxes": boxes, "Variances": np.broadcast_to([0.1, 0.1, 0.2, 0.2],
                                                               boxes.shape)}, attrs)


def test_anchor_generator():
    feat = np.zeros((1, 1, 2, 3), np.float32)
    sizes, ratios, stride, offset = [32.0, 64.0], [0.5, 1.0], [16.0, 16.0], 0.5
    out = np.zeros((2, 3, 4, 4))
    for h in range(2):
        for w in range(3):
            cx, cy = w * 16 + offset * 15, h * 16 + offset * 15
            k = 0
            for ar in ratios:
                for s in sizes:
                    base_w = round(math.sqrt(256 / ar))
                    base_h = round(base_w * ar)
                    aw, ah = s / 16 * base_w, s / 16 * base_h
                    out[h, w, k] = [cx - (aw - 1) / 2, cy - (ah - 1) / 2, cx + (aw - 1) / 2,
                                    cy + (ah - 1) / 2]
                    k += 1
    check_output("anchor_generator", {"Input": feat},
                 {"Anchors": out, "Variances": np.broadcast_to([0.1, 0.1, 0.2, 0.2],
                                                               out.shape)},
                 {"anchor_sizes": sizes, "aspect_ratios": ratios, "stride": stride,
                  "variances": [0.1, 0.1, 0.2, 0.2], "offset": offset})


def test_box_clip_per_image():
    boxes = rng.uniform(-5, 30, size=(5, 4))
    im_info = np.array([[20.0, 24.0, 2.0], [10.0, 10.0, 1.0]])
    want = boxes.copy()
    for rows, (h, w, s) in ((range(0, 2), im_info[0]), (range(2, 5), im_info[1])):
        hh, ww = round(h / s), round(w / s)
        for r in rows:
            want[r] = np.maximum(np.minimum(boxes[r], [ww - 1, hh - 1, ww - 1, hh - 1]), 0)
    check_output("box_clip", {"Input": LoDTensor(boxes, [[0, 2, 5]]), "ImInfo": im_info},
                 {"Output": want})
    with pytest.raises(ExecutionError, match="ImInfo has 2"):
        run_op("box_clip", {"Input": LoDTensor(boxes, [[0, 5]]), "ImInfo": im_info})


def test_polygon_box_transform():
    x = rng.normal(size=(2, 4, 3, 5))
    want = np.empty_like(x)
    for n in range(2):
        for c in range(4):
            for h in range(3):
                for w in range(5):
                    want[n, c, h, w] = (4 * w if c % 2 == 0 else 4 * h) - x[n, c, h, w]
    check_output("polygon_box_transform", {"Input": x}, {"Output": want})
    with pytest.raises(ShapeError, match="even"):
        run_op("polygon_box_transform", {"Input": np.zeros((1, 3, 2, 2))})


def test_box_decoder_and_assign():
    n, classes = 3, 3
    prior = random_boxes(n, 20)
    var = np.array([[0.1, 0.1, 0.2, 0.2]])
    deltas = rng.normal(size=(n, classes * 4))
    deltas[0, 2] = 50.0     # clipped at box_clip
    score = rng.uniform(size=(n, classes))
    decoded = np.zeros((n, classes * 4))
    assign = np.zeros((n, 4))
    for i in range(n):
        pw, ph = prior[i, 2] - prior[i, 0] + 1, prior[i, 3] - prior[i, 1] + 1
        pcx, pcy = prior[i, 0] + pw / 2, prior[i, 1] + ph / 2
        for c in range(classes):
            d = deltas[i, 4 * c:4 * c + 4]
            cx, cy = 0.1 * d[0] * pw + pcx, 0.1 * d[1] * ph + pcy
            w = math.exp(min(0.2 * d[2], 4.135)) * pw
            h = math.exp(min(0.2 * d[3], 4.135)) * ph
            decoded[i, 4 * c:4 * c + 4] = [cx - w / 2, cy - h / 2, cx + w / 2 - 1, cy + h / 2 - 1]
        best = 1 + int(np.argmax(score[i, 1:]))
        assign[i] = decoded[i, 4 * best:4 * best + 4]
    check_output("box_decoder_and_assign",
                 {"PriorBox": prior, "PriorBoxVar": var, "TargetBox": deltas, "BoxScore": score},
                 {"DecodeBox": decoded, "OutputAssignBox": assign}, {"box_clip": 4.135})
