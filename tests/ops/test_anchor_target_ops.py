"""rpn_target_assign, retinanet_target_assign, generate_proposal_labels
(fluidity/ops/anchor_targets.py) on small hand-worked cases, and their layers."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.core.tensor import LoDTensor
from fluidity.errors import ExecutionError
from op_test import run_op

# four anchors: 0 and 1 overlap the ground truth, 2 and 3 lie far from it
ANCHORS = np.array([[0, 0, 9, 9], [2, 2, 11, 11], [30, 30, 39, 39], [50, 50, 59, 59]],
                   np.float32)
GT = np.array([[0, 0, 9, 9]], np.float32)           # in original-image units (scale 1 here)
INFO = np.array([[64, 64, 1.0]], np.float32)


def delta(ex, gt):
    """(dx, dy, dw, dh) with '+1' widths, written out for one pair."""
    ew, eh = ex[2] - ex[0] + 1, ex[3] - ex[1] + 1
    gw, gh = gt[2] - gt[0] + 1, gt[3] - gt[1] + 1
    return [(gt[0] + gw / 2 - ex[0] - ew / 2) / ew, (gt[1] + gh / 2 - ex[1] - eh / 2) / eh,
            np.log(gw / ew), np.log(gh / eh)]


def test_rpn_target_assign_labels_and_deltas():
    # IoU(anchor 1, gt) = 64 / 136 = 0.47: neither fg (< 0.7, not the gt's best) nor bg
    out = run_op("rpn_target_assign",
                 {"Anchor": ANCHORS, "GtBoxes": LoDTensor(GT, [[0, 1]]),
                  "IsCrowd": LoDTensor(np.array([0], np.int32), [[0, 1]]), "ImInfo": INFO},
                 {"rpn_batch_size_per_im": 4, "rpn_fg_fraction": 0.5, "use_random": False,
                  "rpn_straddle_thresh": 0.0})
    np.testing.assert_array_equal(out["LocationIndex"], [0])
    np.testing.assert_array_equal(out["ScoreIndex"], [0, 2, 3])
    np.testing.assert_array_equal(np.asarray(out["TargetLabel"]).ravel(), [1, 0, 0])
    np.testing.assert_allclose(out["TargetBBox"], [delta(ANCHORS[0], GT[0])], atol=1e-6)
    np.testing.assert_array_equal(out["BBoxInsideWeight"], np.ones((1, 4)))


def test_rpn_straddle_and_crowd_and_sampling():
    gts = np.concatenate([GT, [[30, 30, 39, 39]]]).astype(np.float32)
    crowd = LoDTensor(np.array([0, 1], np.int32), [[0, 2]])       # the second gt is crowd
    anchors = np.concatenate([ANCHORS, [[-5, -5, 4, 4]]]).astype(np.float32)
    out = run_op("rpn_target_assign",
                 {"Anchor": anchors, "GtBoxes": LoDTensor(gts, [[0, 2]]), "IsCrowd": crowd,
                  "ImInfo": INFO},
                 {"rpn_batch_size_per_im": 2, "rpn_fg_fraction": 0.5, "use_random": False})
    # anchor 4 straddles the border (dropped); the crowd gt matches nothing; one bg kept
    np.testing.assert_array_equal(out["LocationIndex"], [0])
    np.testing.assert_array_equal(out["ScoreIndex"], [0, 2])
    random = run_op("rpn_target_assign",
                    {"Anchor": anchors, "GtBoxes": LoDTensor(gts, [[0, 2]]), "IsCrowd": crowd,
                     "ImInfo": INFO},
                    {"rpn_batch_size_per_im": 2, "rpn_fg_fraction": 0.5, "use_random": True})
    assert len(random["ScoreIndex"]) == 2 and random["ScoreIndex"][1] in (2, 3)


def test_retinanet_target_assign_gives_classes_and_fg_count():
    out = run_op("retinanet_target_assign",
                 {"Anchor": ANCHORS, "GtBoxes": LoDTensor(np.concatenate([GT, GT]), [[0, 1, 2]]),
                  "GtLabels": LoDTensor(np.array([[7], [3]], np.int32), [[0, 1, 2]]),
                  "IsCrowd": LoDTensor(np.zeros(2, np.int32), [[0, 1, 2]]),
                  "ImInfo": np.concatenate([INFO, INFO])},
                 {"positive_overlap": 0.4, "negative_overlap": 0.3})
    # anchors 0 and 1 are fg (IoU 1 and 0.47 >= 0.4), 2 and 3 bg, in both images
    np.testing.assert_array_equal(out["LocationIndex"], [0, 1, 4, 5])
    np.testing.assert_array_equal(out["ScoreIndex"], [0, 1, 2, 3, 4, 5, 6, 7])
    np.testing.assert_array_equal(np.asarray(out["TargetLabel"]).ravel(),
                                  [7, 7, 0, 0, 3, 3, 0, 0])
    np.testing.assert_array_equal(np.asarray(out["ForegroundNumber"]).ravel(), [3, 3])
    np.testing.assert_allclose(np.asarray(out["TargetBBox"])[1], delta(ANCHORS[1], GT[0]),
                               atol=1e-6)


def test_generate_proposal_labels_targets_per_class():
    rois = np.array([[0, 0, 9, 9], [1, 1, 10, 10], [40, 40, 49, 49]], np.float32) * 2
    out = run_op("generate_proposal_labels",
                 {"RpnRois": LoDTensor(rois, [[0, 3]]),
                  "GtClasses": LoDTensor(np.array([2], np.int32), [[0, 1]]),
                  "IsCrowd": LoDTensor(np.array([0], np.int32), [[0, 1]]),
                  "GtBoxes": LoDTensor(GT, [[0, 1]]),
                  "ImInfo": np.array([[64, 64, 2.0]], np.float32)},
                 {"batch_size_per_im": 8, "fg_fraction": 0.5, "fg_thresh": 0.5,
                  "bg_thresh_hi": 0.5, "bg_thresh_lo": 0.0, "class_nums": 3,
                  "bbox_reg_weights": [0.1, 0.1, 0.2, 0.2], "use_random": False},
                 return_lod=True)
    rois_out, lod = np.asarray(out["Rois"]), out["Rois"].lod()
    # the gt itself and the first two RoIs (scaled back by 1/2: IoU 1 and 81/121) are fg
    # with class 2; the third is bg
    np.testing.assert_allclose(rois_out, np.concatenate([GT * 2, rois]), rtol=1e-6)
    assert [list(level) for level in lod] == [[0, 4]]
    np.testing.assert_array_equal(np.asarray(out["LabelsInt32"]).ravel(), [2, 2, 2, 0])
    targets = np.asarray(out["BboxTargets"])
    assert targets.shape == (4, 12)
    want = np.array(delta(rois[1] / 2, GT[0])) / [0.1, 0.1, 0.2, 0.2]
    np.testing.assert_allclose(targets[2, 8:12], want, rtol=1e-5, atol=1e-6)
    assert not targets[:, :8].any() and not targets[3].any()
    inside = np.asarray(out["BboxInsideWeights"])
    np.testing.assert_array_equal(inside[:3, 8:], np.ones((3, 4)))
    np.testing.assert_array_equal(np.asarray(out["BboxOutsideWeights"]), inside)


def test_ground_truth_without_lod_is_refused():
    with pytest.raises(ExecutionError, match="rpn_target_assign: GtBoxes .* needs a LoD"):
        run_op("rpn_target_assign", {"Anchor": ANCHORS, "GtBoxes": GT,
                                     "IsCrowd": np.array([0], np.int32), "ImInfo": INFO})


def test_layers_gather_the_predictions_at_the_sampled_anchors():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        bbox_pred = fluid.data("bbox_pred", [1, 4, 4], "float32")
        cls = fluid.data("cls", [1, 4, 1], "float32")
        anchor = fluid.data("anchor", [4, 4], "float32")
        var = fluid.data("var", [4, 4], "float32")
        gt = fluid.data("gt", [None, 4], "float32", lod_level=1)
        crowd = fluid.data("crowd", [None, 1], "int32", lod_level=1)
        info = fluid.data("info", [1, 3], "float32")
        scores, locs, label, bbox, inside = fluid.layers.rpn_target_assign(
            bbox_pred, cls, anchor, var, gt, crowd, info, rpn_batch_size_per_im=4,
            use_random=False)
        with pytest.raises(TypeError):
            fluid.layers.retinanet_target_assign(bbox_pred, cls, anchor, var, gt,
                                                 fluid.data("lab", [None, 1], "float32"),
                                                 crowd, info, 1)
    pred = np.arange(16, dtype=np.float32).reshape(1, 4, 4)
    logits = np.array([[[0.5], [1.5], [2.5], [3.5]]], np.float32)
    exe = fluid.Executor(fluid.CPUPlace())
    s, loc = exe.run(main, feed={"bbox_pred": pred, "cls": logits, "anchor": ANCHORS,
                                 "var": np.ones((4, 4), np.float32),
                                 "gt": LoDTensor(GT, [[0, 1]]),
                                 "crowd": LoDTensor(np.zeros((1, 1), np.int32), [[0, 1]]),
                                 "info": INFO}, fetch_list=[scores, locs])
    np.testing.assert_array_equal(s.ravel(), [0.5, 2.5, 3.5])
    np.testing.assert_array_equal(loc, pred[0, :1])
