"""The detection layers as Fluid 1.8 programs use them, built and run end to end: an SSD head
trained with ssd_loss and decoded by detection_output; a YOLOv3 head trained with yolov3_loss
and decoded by yolo_box + multiclass_nms; an RPN (anchor_generator, generate_proposals)
feeding roi_align / roi_pool / psroi_pool / prroi_pool; the focal loss; the matching layers
against numpy; bad arguments; and the names left declined."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.core.tensor import LoDTensor

L = fluid.layers
rng = np.random.default_rng(20)


def _train(main, startup, feed, loss, steps):
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    return [float(exe.run(main, feed=feed, fetch_list=[loss])[0]) for _ in range(steps)], exe


def test_ssd_head_trains_and_detects():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        image = L.data("image", [3, 16, 16])
        gt_box = L.data("gt_box", [4], lod_level=1)
        gt_label = L.data("gt_label", [1], dtype="int32", lod_level=1)
        f1 = L.conv2d(image, 8, 3, stride=4, padding=1, act="relu")      # 4 x 4
        f2 = L.conv2d(f1, 8, 3, stride=2, padding=1, act="relu")         # 2 x 2
        loc, conf, box, var = L.multi_box_head(
            inputs=[f1, f2], image=image, base_size=16, num_classes=3,
            aspect_ratios=[[2.0], [2.0]], min_sizes=[4.0, 8.0], max_sizes=[8.0, 16.0],
            flip=True, clip=True)
        loss = L.reduce_sum(L.ssd_loss(loc, conf, gt_box, gt_label, box, var))
        test_prog = main.clone(for_test=True)
        fluid.optimizer.SGD(0.05).minimize(loss)
    with fluid.program_guard(test_prog, fluid.Program()):
        dets = L.detection_output(loc, conf, box, var, score_threshold=0.0, keep_top_k=5)
    boxes = np.array([[0.1, 0.1, 0.5, 0.6], [0.5, 0.4, 0.9, 0.9], [0.2, 0.3, 0.7, 0.7]],
                     np.float32)
    feed = {"image": rng.normal(size=(2, 3, 16, 16)).astype(np.float32),
            "gt_box": LoDTensor(boxes, [[0, 2, 3]]),
            "gt_label": LoDTensor(np.array([[1], [2], [1]], np.int32), [[0, 2, 3]])}
    losses, exe = _train(main, startup, feed, loss, 6)
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
    assert box.shape == (4 * 4 * 4 + 2 * 2 * 4, 4) and conf.shape[-1] == 3
    (out,) = exe.run(test_prog, feed=feed, fetch_list=[dets], return_numpy=False)
    rows = np.asarray(out)
    assert out.lod()[0][0] == 0 and len(out.lod()[0]) == 3 and rows.shape[1] == 6
    assert set(rows[:, 0].astype(int)) <= {1, 2} and (rows[:, 1] >= 0).all()


def test_yolov3_head_trains_and_decodes():
    anchors, mask, classes = [4, 5, 8, 10, 12, 14], [0, 1], 2
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        image = L.data("image", [3, 16, 16])
        gt_box = L.data("gt_box", [2, 4])
        gt_label = L.data("gt_label", [2], dtype="int32")
        img_size = L.data("img_size", [2], dtype="int32")
        head = L.conv2d(image, len(mask) * (5 + classes), 3, stride=4, padding=1)   # 4 x 4
        loss = L.reduce_mean(L.yolov3_loss(head, gt_box, gt_label, anchors, mask, classes,
                                           0.7, 4))
        boxes, scores = L.yolo_box(head, img_size, anchors[:4], classes, 0.01, 4)
        dets = L.multiclass_nms(boxes, L.transpose(scores, [0, 2, 1]), 0.01, 20, 10,
                                background_label=-1)
        fluid.optimizer.SGD(0.01).minimize(loss)
    feed = {"image": rng.normal(size=(2, 3, 16, 16)).astype(np.float32),
            "gt_box": np.array([[[0.3, 0.3, 0.3, 0.4], [0.7, 0.6, 0.5, 0.5]],
                                [[0.5, 0.5, 0.6, 0.6], [0, 0, 0, 0]]], np.float32),
            "gt_label": np.array([[0, 1], [1, 0]], np.int32),
            "img_size": np.array([[16, 16], [16, 16]], np.int32)}
    losses, exe = _train(main, startup, feed, loss, 5)
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
    b, s, d = exe.run(main, feed=feed, fetch_list=[boxes, scores, dets], return_numpy=False)
    assert np.asarray(b).shape == (2, 32, 4) and np.asarray(s).shape == (2, 32, 2)
    assert len(d.lod()[0]) == 3


def test_rpn_proposals_feed_the_roi_layers():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        image = L.data("image", [3, 32, 32])
        im_info = L.data("im_info", [3])
        feat = L.conv2d(image, 8, 3, stride=4, padding=1, act="relu")        # 8 x 8, stride 4
        anchors, variances = L.anchor_generator(feat, anchor_sizes=[8, 16],
                                                aspect_ratios=[1.0], stride=[4.0, 4.0])
        scores = L.conv2d(feat, 2, 1)
        deltas = L.conv2d(feat, 8, 1)
        rois, probs, totals = L.generate_proposals(L.sigmoid(scores), deltas, im_info, anchors,
                                                  variances, pre_nms_top_n=30,
                                                  post_nms_top_n=6, min_size=1.0,
                                                  return_rois_num=True)
        aligned = L.roi_align(feat, rois, 2, 2, spatial_scale=0.25, sampling_ratio=2)
        pooled = L.roi_pool(feat, rois, 2, 2, spatial_scale=0.25)
        ps = L.psroi_pool(L.conv2d(feat, 2 * 2 * 2, 1), rois, 2, 0.25, 2, 2)
        pr = L.prroi_pool(feat, rois, spatial_scale=0.25, pooled_height=2, pooled_width=2)
        head = L.fc(L.concat([aligned, pooled, pr], axis=1), 4)
        loss = L.mean(head) + L.mean(ps)
        fluid.optimizer.SGD(0.01).minimize(loss)
    feed = {"image": rng.normal(size=(2, 3, 32, 32)).astype(np.float32),
            "im_info": np.array([[32, 32, 1.0], [28, 30, 1.0]], np.float32)}
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    r, t, a, p = exe.run(main, feed=feed, fetch_list=[rois, totals, aligned, ps],
                         return_numpy=False)
    lod = r.lod()[0]
    assert len(lod) == 3 and lod[-1] == len(np.asarray(r)) and lod[-1] > 0
    np.testing.assert_array_equal(np.asarray(t).reshape(-1), lod[1:])
    assert np.asarray(a).shape == (lod[-1], 8, 2, 2) and np.asarray(p).shape == (lod[-1], 2, 2, 2)
    exe.run(main, feed=feed, fetch_list=[loss])           # the backward runs through them


def test_roi_layers_take_rois_lod_as_test_layers_builds_them():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data(name="x", shape=[4, 6, 6], dtype="float32")
        rois = L.data(name="rois", shape=[4], dtype="float32", lod_level=1)
        rois_lod = L.data(name="rois_lod", shape=[None], dtype="int64", lod_level=1,
                          append_batch_size=False)
        a = L.roi_pool(x, rois, 2, 2, 0.5, rois_lod)
        b = L.roi_align(x, rois, 2, 2, 0.5, 2, "roi_align", rois_lod)
    xv = rng.normal(size=(2, 4, 6, 6)).astype(np.float32)
    rv = np.array([[0, 0, 8, 8], [2, 2, 10, 6], [4, 0, 11, 11]], np.float32)
    got = fluid.Executor(fluid.CPUPlace()).run(
        main, feed={"x": xv, "rois": rv, "rois_lod": np.array([0, 1, 3], np.int64)},
        fetch_list=[a, b])
    assert got[0].shape == (3, 4, 2, 2) and got[1].shape == (3, 4, 2, 2)
    np.testing.assert_allclose(got[0][0, :, 0, 0], xv[0, :, 0:3, 0:3].max(axis=(1, 2)))


def test_focal_loss_layer():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [10, 4], append_batch_size=False)
        label = L.data("label", [10, 1], dtype="int32", append_batch_size=False)
        fg = L.data("fg", [1], dtype="int32", append_batch_size=False)
        out = L.sigmoid_focal_loss(x, label, fg, gamma=2.0, alpha=0.25)
        with pytest.raises(TypeError, match="int32"):
            L.sigmoid_focal_loss(x, L.cast(label, "int64"), fg)
    xv = rng.normal(size=(10, 4)).astype(np.float32)
    lv = rng.integers(-1, 5, size=(10, 1)).astype(np.int32)
    (got,) = fluid.Executor(fluid.CPUPlace()).run(
        main, feed={"x": xv, "label": lv, "fg": np.array([3], np.int32)}, fetch_list=[out])
    p = 1 / (1 + np.exp(-xv.astype(np.float64)))
    pos = (lv == np.arange(1, 5)).astype(np.float64)
    neg = ((lv != -1) & (lv != np.arange(1, 5))).astype(np.float64)
    want = -pos * 0.25 / 3 * (1 - p) ** 2 * np.log(p) - neg * 0.75 / 3 * p ** 2 * np.log(1 - p)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-7)


def test_matching_layers_against_numpy():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        gt = L.data("gt", [4], lod_level=1)
        priors = L.data("priors", [3, 4], append_batch_size=False)
        iou = L.iou_similarity(gt, priors)
        idx, dist = L.bipartite_match(iou, "per_prediction", 0.2)
        enc = L.box_coder(priors, [0.1, 0.1, 0.2, 0.2], gt)
        clipped = L.box_clip(gt, L.data("im_info", [3]))
    gtv = np.array([[0.1, 0.1, 0.4, 0.4], [0.5, 0.5, 0.9, 0.8], [0.0, 0.0, 0.5, 0.5]],
                   np.float32)
    pv = np.array([[0.1, 0.1, 0.35, 0.45], [0.45, 0.5, 0.9, 0.9], [0.2, 0.2, 0.5, 0.5]],
                  np.float32)
    got = fluid.Executor(fluid.CPUPlace()).run(
        main, feed={"gt": LoDTensor(gtv, [[0, 2, 3]]), "priors": pv,
                    "im_info": np.array([[1, 1, 1], [1, 1, 1]], np.float32)},
        fetch_list=[iou, idx, dist, enc, clipped])
    assert got[0].shape == (3, 3) and got[1].shape == (2, 3)
    # image 0: gt 0 best matches prior 0, gt 1 prior 1; per_prediction gives prior 2 to gt 0
    np.testing.assert_array_equal(got[1][0], [0, 1, 0])
    assert got[3].shape == (3, 3, 4)
    np.testing.assert_array_equal(got[4], np.zeros_like(gtv))   # clipped to a 1 x 1 image


def test_bad_arguments_raise_fluids_errors():
    with fluid.program_guard(fluid.Program()):
        x = L.data(name="data1", shape=[2, 1, 4, 4], dtype="int64")
        label = L.data(name="label", shape=[2, 4], dtype="float32", lod_level=1)
        with pytest.raises(TypeError, match="'input' in fluid.layers.roi_pool must be"):
            L.roi_pool(x, label, 1, 1, 1.0)
        xf = L.data(name="data2", shape=[2, 1, 4, 4], dtype="float32",
                    append_batch_size=False)
        with pytest.raises(TypeError, match="rois"):
            L.roi_pool(xf, [[1, 2, 3, 4], [2, 3, 4, 5]], 1, 1, 1.0)
        with pytest.raises(TypeError, match="spatial_scale must be float"):
            L.psroi_pool(xf, label, 1, 1, 1, 1)
        boxes = L.data("b", [5, 4])
        scores = L.data("s", [2, 5])
        with pytest.raises(TypeError, match="score_threshold"):
            L.multiclass_nms(boxes, scores, 1, 10, 10)
        with pytest.raises(ValueError, match="steps"):
            L.prior_box(xf, xf, [2.0], steps=[1.0])
        with pytest.raises(TypeError, match="prior_box_var"):
            L.box_coder(boxes, 0.1, boxes)


def test_detection_map_metric_accumulates_and_resets():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        det = L.data("det", [6], lod_level=1)
        gt_label = L.data("gt_label", [1], lod_level=1)
        gt_box = L.data("gt_box", [4], lod_level=1)
        difficult = L.data("difficult", [1], dtype="int32", lod_level=1)
        metric = fluid.metrics.DetectionMAP(det, gt_label, gt_box, difficult, class_num=3,
                                            overlap_threshold=0.5)
        cur, accum = metric.get_map_var()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    good = {"det": LoDTensor(np.array([[1, 0.9, 0.1, 0.1, 0.4, 0.4]], np.float32), [[0, 1]]),
            "gt_label": LoDTensor(np.array([[1]], np.float32), [[0, 1]]),
            "gt_box": LoDTensor(np.array([[0.1, 0.1, 0.4, 0.4]], np.float32), [[0, 1]]),
            "difficult": LoDTensor(np.array([[0]], np.int32), [[0, 1]])}
    bad = dict(good, det=LoDTensor(np.array([[1, 0.9, 0.6, 0.6, 0.9, 0.9]], np.float32),
                                   [[0, 1]]))
    c1, a1 = exe.run(main, feed=good, fetch_list=[cur, accum])
    c2, a2 = exe.run(main, feed=bad, fetch_list=[cur, accum])
    assert c1[0] == pytest.approx(1.0) and a1[0] == pytest.approx(1.0)
    assert c2[0] == pytest.approx(0.0)
    # accumulated: one hit at .9 and one miss at .9 (stable: the hit first) of 2 positives
    assert a2[0] == pytest.approx(0.5)
    metric.reset(exe)
    _, a3 = exe.run(main, feed=bad, fetch_list=[cur, accum])
    assert a3[0] == pytest.approx(0.0)
