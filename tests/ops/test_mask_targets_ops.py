"""generate_mask_labels against a plain-loop numpy reference of Mask R-CNN's mask targets
(COCO's polygon rasterization written point by point), the shapes of simple polygons, the
image without foreground, the layer end to end, and its errors."""
import math

import numpy as np
import pytest

import fluidity as fluid
from fluidity.core.tensor import LoDTensor
from fluidity.errors import ExecutionError
from fluidity.ops.mask_targets import poly_to_mask
from op_test import run_op


def ref_poly_mask(xy, h, w):
    """COCO's rleFrPoly, one point at a time: upsample 5x, walk each edge, keep the column
    crossings, and fill between alternate boundary positions (column-major)."""
    pts = [(int(5.0 * float(xy[i]) + 0.5), int(5.0 * float(xy[i + 1]) + 0.5))
           for i in range(0, len(xy), 2)]
    pts.append(pts[0])
    u, v = [], []
    for (xs, ys), (xe, ye) in zip(pts[:-1], pts[1:]):
        dx, dy = abs(xe - xs), abs(ye - ys)
        flip = (dx >= dy and xs > xe) or (dx < dy and ys > ye)
        if flip:
            xs, xe, ys, ye = xe, xs, ye, ys
        if dx >= dy:
            s = 0.0 if dx == 0 else (ye - ys) / dx
            for d in range(dx + 1):
                t = dx - d if flip else d
                u.append(xs + t)
                v.append(int(ys + s * t + 0.5))
        else:
            s = 0.0 if dy == 0 else (xe - xs) / dy
            for d in range(dy + 1):
                t = dy - d if flip else d
                v.append(ys + t)
                u.append(int(xs + s * t + 0.5))
    bounds = []
    for j in range(1, len(u)):
        if u[j] == u[j - 1]:
            continue
        xd = ((u[j] if u[j] < u[j - 1] else u[j] - 1) + 0.5) / 5.0 - 0.5
        if math.floor(xd) != xd or xd < 0 or xd > w - 1:
            continue
        yd = ((v[j] if v[j] < v[j - 1] else v[j - 1]) + 0.5) / 5.0 - 0.5
        yd = math.ceil(min(max(yd, 0), h))
        bounds.append(int(xd) * h + yd)
    flat = np.zeros(h * w, np.uint8)
    inside = 0
    bounds = sorted(bounds)
    for p in range(h * w):
        while bounds and bounds[0] == p:
            bounds.pop(0)
            inside ^= 1
        flat[p] = inside
    return flat.reshape(w, h).T


def ref_targets(info, classes, crowd, objects, rois, labels, n_cls, res):
    """(mask_rois, roi_has_mask, masks) of one image, as Fluid 1.8 defines them."""
    scale = np.float32(info[2])
    keep = [j for j in range(len(classes)) if classes[j] > 0 and crowd[j] == 0]
    polys = [objects[j] for j in keep]
    fg = [i for i in range(len(labels)) if labels[i] > 0]
    if not fg:
        bg = [i for i in range(len(labels)) if labels[i] == 0][:1]
        return rois[bg], np.array(bg), -np.ones((1, n_cls * res * res), np.int32)
    boxes = []
    for obj in polys:
        pts = np.concatenate(obj).reshape(-1, 2)
        boxes.append([pts[:, 0].min(), pts[:, 1].min(), pts[:, 0].max(), pts[:, 1].max()])
    masks = -np.ones((len(fg), n_cls * res * res), np.int32)
    for r, i in enumerate(fg):
        box = rois[i] / scale
        best, best_iou = 0, 0.0
        for g, b in enumerate(boxes):
            iw = min(box[2], b[2]) - max(box[0], b[0]) + 1
            ih = min(box[3], b[3]) - max(box[1], b[1]) + 1
            if iw > 0 and ih > 0:
                a1 = (box[2] - box[0] + 1) * (box[3] - box[1] + 1)
                a2 = (b[2] - b[0] + 1) * (b[3] - b[1] + 1)
                iou = iw * ih / (a1 + a2 - iw * ih)
                if iou > best_iou:
                    best, best_iou = g, iou
        w = max(box[2] - box[0], np.float32(1))
        h = max(box[3] - box[1], np.float32(1))
        m = np.zeros((res, res), np.uint8)
        for p in polys[best]:
            q = np.array(p, np.float32).reshape(-1, 2)
            q = np.stack([(q[:, 0] - box[0]) * np.float32(res) / w,
                          (q[:, 1] - box[1]) * np.float32(res) / h], 1).reshape(-1)
            m |= ref_poly_mask(q, res, res)
        c = labels[i]
        masks[r, c * res * res:(c + 1) * res * res] = m.reshape(-1)
    return rois[fg], np.array(fg), masks


def test_simple_polygons_rasterize_as_expected():
    square = poly_to_mask([0, 0, 8, 0, 8, 8, 0, 8], 8, 8)
    assert square.dtype == np.uint8 and square.all()
    tri = poly_to_mask([0, 0, 8, 0, 0, 8], 8, 8)        # below the line x + y = 8
    y, x = np.mgrid[0:8, 0:8] + 0.5                      # pixel centres
    assert tri[x + y < 7].all() and not tri[x + y > 9].any()
    inner = poly_to_mask([2, 2, 6, 2, 6, 6, 2, 6], 8, 8)
    assert inner.sum() == 16 and inner[2:6, 2:6].all()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_polygons_match_the_reference(seed):
    rng = np.random.default_rng(seed)
    for _ in range(10):
        k = int(rng.integers(3, 9))
        xy = rng.uniform(-3, 17, 2 * k).astype(np.float32)
        np.testing.assert_array_equal(poly_to_mask(xy, 14, 14), ref_poly_mask(xy, 14, 14))


def _case(rng, n_cls=5, res=7):
    """Two images: the first with foreground RoIs, the second with none."""
    objects, points, lod1, lod2, gt_lod = [], [], [], [], []
    for n_gt in (3, 1):
        gt_lod.append(n_gt)
        for _ in range(n_gt):
            obj = []
            for _ in range(int(rng.integers(1, 3))):
                k = int(rng.integers(3, 7))
                xy = rng.uniform(0, 40, (k, 2)).astype(np.float32)
                obj.append(xy.reshape(-1))
                points.append(xy)
                lod2.append(k)
            objects.append(obj)
            lod1.append(len(obj))
    classes = np.array([[2], [0], [4], [3]], np.int32)     # gt 1 is background: skipped
    crowd = np.zeros((4, 1), np.int32)
    corner = rng.uniform(0, 20, (12, 2))
    rois = np.concatenate([corner, corner + rng.uniform(5, 20, (12, 2))], 1).astype(np.float32)
    labels = np.array([[1], [0], [3], [4], [0], [2], [0], [0], [0], [0], [0], [0]], np.int32)
    info = np.array([[40, 40, 1.0], [40, 40, 1.0]], np.float32)

    def offsets(lengths):
        return [0] + list(np.cumsum(lengths))
    ins = {"ImInfo": info,
           "GtClasses": LoDTensor(classes, [offsets(gt_lod)]),
           "IsCrowd": LoDTensor(crowd, [offsets(gt_lod)]),
           "GtSegms": LoDTensor(np.concatenate(points),
                                [offsets(gt_lod), offsets(lod1), offsets(lod2)]),
           "Rois": LoDTensor(rois, [[0, 6, 12]]),
           "LabelsInt32": LoDTensor(labels, [[0, 6, 12]])}
    want = [ref_targets(info[0], classes[:3, 0], crowd[:3, 0], objects[:3], rois[:6],
                        labels[:6, 0], n_cls, res),
            ref_targets(info[1], classes[3:, 0], crowd[3:, 0], objects[3:], rois[6:],
                        labels[6:, 0], n_cls, res)]
    return ins, want, {"num_classes": n_cls, "resolution": res}


def test_generate_mask_labels_matches_the_reference():
    ins, want, attrs = _case(np.random.default_rng(7))
    out = run_op("generate_mask_labels", ins, attrs, return_lod=True)
    lod = [[0, 4, 5]]                      # 4 foreground RoIs, then one background row
    for slot, k, dtype in (("MaskRois", 0, np.float32), ("RoiHasMaskInt32", 1, np.int32),
                           ("MaskInt32", 2, np.int32)):
        got = out[slot]
        assert got.lod() == lod, slot
        a = np.asarray(got._array)
        assert a.dtype == dtype, slot
        np.testing.assert_array_equal(
            a, np.concatenate([w[k].reshape(len(w[k]), -1) for w in want]), err_msg=slot)
    masks = np.asarray(out["MaskInt32"]._array)
    assert (masks[4] == -1).all() and set(np.unique(masks[:4])) <= {-1, 0, 1}


def test_the_layer_builds_and_runs_with_lod_feeds():
    ins, want, attrs = _case(np.random.default_rng(8))
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        im_info = fluid.data("im_info", [None, 3], "float32")
        gt_classes = fluid.data("gt_classes", [None, 1], "int32", lod_level=1)
        is_crowd = fluid.data("is_crowd", [None, 1], "int32", lod_level=1)
        gt_segms = fluid.data("gt_segms", [None, 2], "float32", lod_level=3)
        rois = fluid.data("rois", [None, 4], "float32", lod_level=1)
        labels = fluid.data("labels", [None, 1], "int32", lod_level=1)
        outs = fluid.layers.generate_mask_labels(im_info, gt_classes, is_crowd, gt_segms,
                                                 rois, labels, num_classes=5, resolution=7)
    assert [o.shape[1:] for o in outs] == [(4,), (1,), (5 * 7 * 7,)]
    assert [o.dtype for o in outs] == [rois.dtype, gt_classes.dtype, gt_classes.dtype]
    assert all(o.stop_gradient for o in outs)
    exe = fluid.Executor(fluid.CPUPlace())
    feed = dict(zip(["im_info", "gt_classes", "is_crowd", "gt_segms", "rois", "labels"],
                    [ins[k] for k in ("ImInfo", "GtClasses", "IsCrowd", "GtSegms", "Rois",
                                      "LabelsInt32")]))
    got = exe.run(main, feed=feed, fetch_list=list(outs))
    np.testing.assert_array_equal(got[2], np.concatenate([w[2] for w in want]))
    with pytest.raises(TypeError, match="resolution"):
        fluid.layers.generate_mask_labels(im_info, gt_classes, is_crowd, gt_segms, rois,
                                          labels, num_classes=5, resolution=7.0)


def test_bad_inputs_are_named():
    ins, _, attrs = _case(np.random.default_rng(9))
    points = ins["GtSegms"]._array
    flat = dict(ins, GtSegms=LoDTensor(points, [[0, len(points)]]))
    with pytest.raises(ExecutionError, match=r"GtSegms .* needs 3 level"):
        run_op("generate_mask_labels", flat, attrs)
    big = dict(ins, LabelsInt32=LoDTensor(np.full((12, 1), 9, np.int32), [[0, 6, 12]]))
    with pytest.raises(ExecutionError, match="class 9 but num_classes is 5"):
        run_op("generate_mask_labels", big, attrs)
    no_gt = dict(ins, GtClasses=LoDTensor(np.zeros((4, 1), np.int32), ins["GtClasses"]._lod))
    with pytest.raises(ExecutionError, match="image 0 has foreground RoIs but no"):
        run_op("generate_mask_labels", no_gt, attrs)
