"""fluid.layers.detection: Fluid 1.8's detection layers (SSD, YOLOv3, Faster R-CNN / FPN,
RetinaNet's loss), with Fluid's arguments, defaults and results. Ops in fluidity/ops/boxes.py,
nms.py, box_match.py and detection_loss.py.

Boxes are (xmin, ymin, xmax, ymax). A variable-length list of boxes per image is a LoDTensor
with one sequence per image (ground truth, proposals, detections). The names of Fluid's
`detection` module this file does not build are in fluidity/layers/declined.py, with why.
"""
import math

from ..framework import Variable
from ..layer_helper import LayerHelper
from .checks import check_dtype_of

__all__ = ["prior_box", "density_prior_box", "multi_box_head", "bipartite_match",
           "target_assign", "detection_output", "ssd_loss", "sigmoid_focal_loss",
           "anchor_generator", "generate_proposals", "iou_similarity", "box_coder",
           "polygon_box_transform", "yolov3_loss", "yolo_box", "box_clip", "multiclass_nms",
           "distribute_fpn_proposals", "box_decoder_and_assign", "collect_fpn_proposals",
           "roi_perspective_transform", "retinanet_detection_output",
           "rpn_target_assign", "retinanet_target_assign", "generate_proposal_labels",
           "generate_mask_labels", "locality_aware_nms",
           # Fluid 1.6-1.7 (its op remains in 1.8, written by detection_output)
           "multiclass_nms2"]

_FLOATS = ("float32", "float64")


def _seq(v):
    return isinstance(v, (list, tuple))


def _var(layer, arg, v):
    if not isinstance(v, Variable):
        raise TypeError(f"{layer}: {arg} must be a Variable, got {type(v).__name__}")


def _typed(layer, arg, v, kind):
    """TypeError unless `v` is a `kind` (int, float or bool; True is no int here)."""
    if not isinstance(v, kind) or (kind is not bool and isinstance(v, bool)):
        raise TypeError(f"{layer}: {arg} must be {kind.__name__}, got {type(v).__name__} "
                        f"({v!r})")


def _temps(helper, *dtypes):
    return [helper.create_variable_for_type_inference(d) for d in dtypes]


def _stop(*vs):
    for v in vs:
        v.stop_gradient = True
    return vs if len(vs) > 1 else vs[0]


# --- geometry -------------------------------------------------------------------------------
def iou_similarity(x, y, box_normalized=True, name=None):
    """IoU [N, M] of every box of `x` [N, 4] (a LoDTensor) with every box of `y` [M, 4]."""
    _var("iou_similarity", "x", x)
    _var("iou_similarity", "y", y)
    helper = LayerHelper("iou_similarity", name=name)
    (out,) = _temps(helper, x.dtype)
    helper.append_op("iou_similarity", inputs={"X": x, "Y": y}, outputs={"Out": out},
                     attrs={"box_normalized": bool(box_normalized)})
    return out


def box_coder(prior_box, prior_box_var, target_box, code_type="encode_center_size",
              box_normalized=True, name=None, axis=0):
    """Encode `target_box` [N, 4] against `prior_box` [M, 4] into offsets [N, M, 4], or
    (decode_center_size) decode offsets [N, M, 4] back to boxes. `prior_box_var` is a
    Variable [M, 4] or a list of 4 variances."""
    check_dtype_of("box_coder", "prior_box", prior_box, _FLOATS)
    check_dtype_of("box_coder", "target_box", target_box, _FLOATS)
    helper = LayerHelper("box_coder", name=name)
    (out,) = _temps(helper, prior_box.dtype)
    inputs = {"PriorBox": prior_box, "TargetBox": target_box}
    attrs = {"code_type": code_type, "box_normalized": bool(box_normalized), "axis": int(axis)}
    if isinstance(prior_box_var, Variable):
        inputs["PriorBoxVar"] = prior_box_var
    elif isinstance(prior_box_var, list):
        attrs["variance"] = [float(v) for v in prior_box_var]
    else:
        raise TypeError("box_coder: prior_box_var must be a Variable or a list of 4 numbers, "
                        f"got {type(prior_box_var).__name__}")
    helper.append_op("box_coder", inputs=inputs, outputs={"OutputBox": out}, attrs=attrs)
    return out


def box_clip(input, im_info, name=None):
    """Boxes of each image clipped to the image's original size (im_info rows: height, width,
    scale)."""
    check_dtype_of("box_clip", "input", input, _FLOATS)
    check_dtype_of("box_clip", "im_info", im_info, _FLOATS)
    helper = LayerHelper("box_clip", name=name)
    (out,) = _temps(helper, input.dtype)
    helper.append_op("box_clip", inputs={"Input": input, "ImInfo": im_info},
                     outputs={"Output": out})
    return out


def polygon_box_transform(input, name=None):
    """EAST's geometry map [N, 2K, H, W] of offsets to absolute coordinates."""
    check_dtype_of("polygon_box_transform", "input", input, _FLOATS)
    helper = LayerHelper("polygon_box_transform", name=name)
    (out,) = _temps(helper, input.dtype)
    helper.append_op("polygon_box_transform", inputs={"Input": input},
                     outputs={"Output": out})
    return out


def box_decoder_and_assign(prior_box, prior_box_var, target_box, box_score, box_clip,
                           name=None):
    """(decoded boxes [N, C * 4] of every class, the box of the best non-background class
    [N, 4]) from per-class deltas against the priors (Cascade R-CNN)."""
    for arg, v in (("prior_box", prior_box), ("target_box", target_box),
                   ("box_score", box_score)):
        check_dtype_of("box_decoder_and_assign", arg, v, _FLOATS)
    helper = LayerHelper("box_decoder_and_assign", name=name)
    decoded, assigned = _temps(helper, prior_box.dtype, prior_box.dtype)
    helper.append_op("box_decoder_and_assign",
                     inputs={"PriorBox": prior_box, "PriorBoxVar": prior_box_var,
                             "TargetBox": target_box, "BoxScore": box_score},
                     outputs={"DecodeBox": decoded, "OutputAssignBox": assigned},
                     attrs={"box_clip": float(box_clip)})
    return decoded, assigned


# --- priors and anchors ---------------------------------------------------------------------
def prior_box(input, image, min_sizes, max_sizes=None, aspect_ratios=[1.0],
              variance=[0.1, 0.1, 0.2, 0.2], flip=False, clip=False, steps=[0.0, 0.0],
              offset=0.5, name=None, min_max_aspect_ratios_order=False):
    """SSD priors: (boxes, variances), each [H, W, num_priors, 4], for the feature map
    `input` of the image `image` (both NCHW)."""
    _var("prior_box", "input", input)
    _var("prior_box", "image", image)
    min_sizes = list(min_sizes) if _seq(min_sizes) else [min_sizes]
    aspect_ratios = list(aspect_ratios) if _seq(aspect_ratios) else [aspect_ratios]
    if not (_seq(steps) and len(steps) == 2):
        raise ValueError("prior_box: steps should be a list or tuple with length 2, "
                         "(step_width, step_height)")
    attrs = {"min_sizes": [float(s) for s in min_sizes],
             "aspect_ratios": [float(a) for a in aspect_ratios],
             "variances": [float(v) for v in variance], "flip": bool(flip), "clip": bool(clip),
             "step_w": float(steps[0]), "step_h": float(steps[1]), "offset": float(offset),
             "min_max_aspect_ratios_order": bool(min_max_aspect_ratios_order)}
    if max_sizes is not None:
        max_sizes = list(max_sizes) if _seq(max_sizes) else [max_sizes]
        if max_sizes and max_sizes[0] > 0:
            attrs["max_sizes"] = [float(s) for s in max_sizes]
    helper = LayerHelper("prior_box", name=name)
    box, var = _temps(helper, input.dtype, input.dtype)
    helper.append_op("prior_box", inputs={"Input": input, "Image": image},
                     outputs={"Boxes": box, "Variances": var}, attrs=attrs)
    return _stop(box, var)


def density_prior_box(input, image, densities=None, fixed_sizes=None, fixed_ratios=None,
                      variance=[0.1, 0.1, 0.2, 0.2], clip=False, steps=[0.0, 0.0], offset=0.5,
                      flatten_to_2d=False, name=None):
    """Densely tiled priors (boxes, variances): [H, W, num_priors, 4], or [H * W *
    num_priors, 4] with flatten_to_2d."""
    _var("density_prior_box", "input", input)
    _var("density_prior_box", "image", image)
    for arg, v in (("densities", densities), ("fixed_sizes", fixed_sizes),
                   ("fixed_ratios", fixed_ratios)):
        if not _seq(v):
            raise TypeError(f"density_prior_box: {arg} should be a list or a tuple")
    if len(densities) != len(fixed_sizes):
        raise ValueError("density_prior_box: densities and fixed_sizes length should be equal")
    if not (_seq(steps) and len(steps) == 2):
        raise ValueError("density_prior_box: steps should be a list or tuple with length 2, "
                         "(step_width, step_height)")
    helper = LayerHelper("density_prior_box", name=name)
    box, var = _temps(helper, input.dtype, input.dtype)
    helper.append_op("density_prior_box", inputs={"Input": input, "Image": image},
                     outputs={"Boxes": box, "Variances": var},
                     attrs={"variances": [float(v) for v in variance], "clip": bool(clip),
                            "step_w": float(steps[0]), "step_h": float(steps[1]),
                            "offset": float(offset), "densities": [int(d) for d in densities],
                            "fixed_sizes": [float(s) for s in fixed_sizes],
                            "fixed_ratios": [float(r) for r in fixed_ratios],
                            "flatten_to_2d": bool(flatten_to_2d)})
    return _stop(box, var)


def anchor_generator(input, anchor_sizes=None, aspect_ratios=None,
                     variance=[0.1, 0.1, 0.2, 0.2], stride=None, offset=0.5, name=None):
    """Faster R-CNN anchors (anchors, variances), each [H, W, num_anchors, 4] in pixels."""
    _var("anchor_generator", "input", input)
    anchor_sizes = list(anchor_sizes) if _seq(anchor_sizes) else [anchor_sizes]
    aspect_ratios = list(aspect_ratios) if _seq(aspect_ratios) else [aspect_ratios]
    if not (_seq(stride) and len(stride) == 2):
        raise ValueError("anchor_generator: stride should be a list or tuple with length 2, "
                         "(stride_width, stride_height)")
    helper = LayerHelper("anchor_generator", name=name)
    anchor, var = _temps(helper, input.dtype, input.dtype)
    helper.append_op("anchor_generator", inputs={"Input": input},
                     outputs={"Anchors": anchor, "Variances": var},
                     attrs={"anchor_sizes": [float(s) for s in anchor_sizes],
                            "aspect_ratios": [float(a) for a in aspect_ratios],
                            "variances": [float(v) for v in variance],
                            "stride": [float(s) for s in stride], "offset": float(offset)})
    return _stop(anchor, var)


def multi_box_head(inputs, image, base_size, num_classes, aspect_ratios, min_ratio=None,
                   max_ratio=None, min_sizes=None, max_sizes=None, steps=None, step_w=None,
                   step_h=None, offset=0.5, variance=[0.1, 0.1, 0.2, 0.2], flip=True,
                   clip=False, kernel_size=1, pad=0, stride=1, name=None,
                   min_max_aspect_ratios_order=False):
    """SSD's heads over several feature maps: (locations [N, P, 4], confidences [N, P,
    num_classes], prior boxes [P, 4], their variances [P, 4]), P the priors of all maps."""
    from . import manip, nn
    if not _seq(inputs):
        raise ValueError("multi_box_head: inputs should be a list or tuple")
    n_layers = len(inputs)
    if n_layers <= 2:
        if min_sizes is None or max_sizes is None or len(min_sizes) != n_layers or \
                len(max_sizes) != n_layers:
            raise ValueError("multi_box_head: with at most two inputs, min_sizes and "
                             "max_sizes must be given, one per input")
    elif min_sizes is None and max_sizes is None:
        step = int(math.floor((max_ratio - min_ratio) / (n_layers - 2)))
        min_sizes, max_sizes = [], []
        for ratio in range(min_ratio, max_ratio + 1, step):
            min_sizes.append(base_size * ratio / 100.0)
            max_sizes.append(base_size * (ratio + step) / 100.0)
        min_sizes = [base_size * 0.1] + min_sizes
        max_sizes = [base_size * 0.2] + max_sizes
    for arg, v in (("aspect_ratios", aspect_ratios if aspect_ratios else None),
                   ("step_h", step_h), ("step_w", step_w), ("steps", steps)):
        if v is not None and not (_seq(v) and len(v) == n_layers):
            raise ValueError(f"multi_box_head: {arg} should be a list or tuple with one entry "
                             f"per input ({n_layers})")
    if steps is not None:
        step_w = step_h = steps
    locs, confs, boxes, variances = [], [], [], []
    for i, feature in enumerate(inputs):
        mn = min_sizes[i] if _seq(min_sizes[i]) else [min_sizes[i]]
        mx = max_sizes[i] if _seq(max_sizes[i]) else [max_sizes[i]]
        ar = []
        if aspect_ratios is not None:
            ar = aspect_ratios[i] if _seq(aspect_ratios[i]) else [aspect_ratios[i]]
        step = [step_w[i] if step_w else 0.0, step_h[i] if step_w else 0.0]
        box, var = prior_box(feature, image, mn, mx, ar, variance, flip, clip, step, offset,
                             None, min_max_aspect_ratios_order)
        boxes.append(box)
        variances.append(var)
        n_boxes = box.shape[2]
        for out, width in ((locs, n_boxes * 4), (confs, n_boxes * num_classes)):
            head = nn.conv2d(feature, num_filters=width, filter_size=kernel_size,
                             padding=pad, stride=stride)
            head = manip.transpose(head, perm=[0, 2, 3, 1])
            out.append(nn.flatten(head, axis=1))
    if len(boxes) == 1:
        box, var, loc, conf = boxes[0], variances[0], locs[0], confs[0]
    else:
        box = manip.concat([nn.flatten(b, axis=3) for b in boxes])
        var = manip.concat([nn.flatten(v, axis=3) for v in variances])
        loc = manip.reshape(manip.concat(locs, axis=1), shape=[0, -1, 4])
        conf = manip.reshape(manip.concat(confs, axis=1), shape=[0, -1, num_classes])
    _stop(box, var)
    return loc, conf, box, var


# --- matching and SSD -----------------------------------------------------------------------
def bipartite_match(dist_matrix, match_type=None, dist_threshold=None, name=None):
    """(ColToRowMatchIndices [N, M] int32, ColToRowMatchDist [N, M]) of greedy bipartite
    matching per instance of `dist_matrix` (a LoDTensor: rows = ground truth)."""
    _var("bipartite_match", "dist_matrix", dist_matrix)
    helper = LayerHelper("bipartite_match", name=name)
    idx, dist = _temps(helper, "int32", dist_matrix.dtype)
    attrs = {}
    if match_type is not None:
        attrs["match_type"] = match_type
    if dist_threshold is not None:
        attrs["dist_threshold"] = float(dist_threshold)
    helper.append_op("bipartite_match", inputs={"DistMat": dist_matrix},
                     outputs={"ColToRowMatchIndices": idx, "ColToRowMatchDist": dist},
                     attrs=attrs)
    return idx, dist


def target_assign(input, matched_indices, negative_indices=None, mismatch_value=None,
                  name=None):
    """(targets [N, M, K], weights [N, M, 1]) gathered from `input` (a LoDTensor [rows, P,
    K]) by `matched_indices`; negatives get mismatch_value with weight 1."""
    _var("target_assign", "input", input)
    _var("target_assign", "matched_indices", matched_indices)
    helper = LayerHelper("target_assign", name=name)
    out, weight = _temps(helper, input.dtype, "float32")
    inputs = {"X": input, "MatchIndices": matched_indices}
    if negative_indices is not None:
        inputs["NegIndices"] = negative_indices
    attrs = {} if mismatch_value is None else {"mismatch_value": int(mismatch_value)}
    helper.append_op("target_assign", inputs=inputs, outputs={"Out": out, "OutWeight": weight},
                     attrs=attrs)
    return out, weight


def ssd_loss(location, confidence, gt_box, gt_label, prior_box, prior_box_var=None,
             background_label=0, overlap_threshold=0.5, neg_pos_ratio=3.0, neg_overlap=0.5,
             loc_loss_weight=1.0, conf_loss_weight=1.0, match_type="per_prediction",
             mining_type="max_negative", normalize=True, sample_size=None):
    """SSD's multibox loss [N, 1]: match priors to ground truth, mine hard negatives, then
    softmax cross-entropy on the confidences and smooth L1 on the encoded locations, summed
    per image (divided by the matched count with normalize). `gt_box` / `gt_label` are
    LoDTensors (ground truth per image)."""
    from . import loss as L
    from . import manip, nn
    if mining_type != "max_negative":
        raise ValueError("ssd_loss: only mining_type == max_negative is supported")
    for arg, v in (("location", location), ("confidence", confidence), ("gt_box", gt_box),
                   ("gt_label", gt_label), ("prior_box", prior_box)):
        _var("ssd_loss", arg, v)
    helper = LayerHelper("ssd_loss")
    conf_shape = manip.shape(confidence)

    def flat2d(v):
        return nn.flatten(v, axis=2)

    iou = iou_similarity(gt_box, prior_box)
    matched, matched_dist = bipartite_match(iou, match_type, overlap_threshold)
    gt_label = manip.reshape(gt_label, shape=(len(gt_label.shape) - 1) * (0,) + (-1, 1))
    gt_label.stop_gradient = True
    target_label, _ = target_assign(gt_label, matched, mismatch_value=background_label)
    confidence = flat2d(confidence)
    target_label = flat2d(manip.cast(target_label, "int64"))
    target_label.stop_gradient = True
    conf_loss = L.softmax_with_cross_entropy(confidence, target_label)
    actual_shape = manip.slice(conf_shape, axes=[0], starts=[0], ends=[2])
    actual_shape.stop_gradient = True
    conf_loss = manip.reshape(conf_loss, shape=(-1, 0), actual_shape=actual_shape)
    conf_loss.stop_gradient = True
    neg_indices, updated = _temps(helper, "int32", matched.dtype)
    helper.append_op("mine_hard_examples",
                     inputs={"ClsLoss": conf_loss, "MatchIndices": matched,
                             "MatchDist": matched_dist},
                     outputs={"NegIndices": neg_indices, "UpdatedMatchIndices": updated},
                     attrs={"neg_pos_ratio": float(neg_pos_ratio),
                            "neg_dist_threshold": float(neg_overlap),
                            "mining_type": mining_type,
                            "sample_size": int(sample_size or 0)})
    encoded = _encode(prior_box, prior_box_var, gt_box)
    target_bbox, target_loc_weight = target_assign(encoded, updated,
                                                   mismatch_value=background_label)
    target_label, target_conf_weight = target_assign(gt_label, updated,
                                                     negative_indices=neg_indices,
                                                     mismatch_value=background_label)
    target_label = manip.cast(flat2d(target_label), "int64")
    conf_loss = L.softmax_with_cross_entropy(confidence, target_label)
    target_conf_weight = flat2d(target_conf_weight)
    conf_loss = conf_loss * target_conf_weight
    _stop(target_label, target_conf_weight)
    loc_loss = L.smooth_l1(flat2d(location), flat2d(target_bbox))
    target_loc_weight = flat2d(target_loc_weight)
    loc_loss = loc_loss * target_loc_weight
    _stop(target_bbox, target_loc_weight)
    total = conf_loss * conf_loss_weight + loc_loss * loc_loss_weight
    total = manip.reshape(total, shape=(-1, 0), actual_shape=actual_shape)
    total = manip.reduce_sum(total, dim=1, keep_dim=True)
    if normalize:
        total = total / manip.reduce_sum(target_loc_weight)
    return total


def _encode(prior_box, prior_box_var, gt_box):
    """Ground truth encoded against the priors, with the priors' variances when given."""
    helper = LayerHelper("box_coder")
    (out,) = _temps(helper, prior_box.dtype)
    inputs = {"PriorBox": prior_box, "TargetBox": gt_box}
    attrs = {"code_type": "encode_center_size"}
    if isinstance(prior_box_var, Variable):
        inputs["PriorBoxVar"] = prior_box_var
    elif prior_box_var is not None:
        attrs["variance"] = [float(v) for v in prior_box_var]
    helper.append_op("box_coder", inputs=inputs, outputs={"OutputBox": out}, attrs=attrs)
    return out


def detection_output(loc, scores, prior_box, prior_box_var, background_label=0,
                     nms_threshold=0.3, nms_top_k=400, keep_top_k=200, score_threshold=0.01,
                     nms_eta=1.0, return_index=False):
    """SSD's detections: decode `loc` [N, P, 4] against the priors, softmax `scores` [N, P,
    C], multi-class NMS. A LoDTensor [K, 6] (label, score, box) per image ([[-1]] when
    nothing is detected); with return_index also each detection's prior index [K, 1]."""
    from . import manip, ops
    decoded = box_coder(prior_box, prior_box_var, loc, code_type="decode_center_size")
    probs = manip.transpose(ops.softmax(scores), perm=[0, 2, 1])
    probs.stop_gradient = True
    helper = LayerHelper("detection_output")
    attrs = {"background_label": 0, "nms_threshold": float(nms_threshold),
             "nms_top_k": int(nms_top_k), "keep_top_k": int(keep_top_k),
             "score_threshold": float(score_threshold), "nms_eta": 1.0}
    (out,) = _temps(helper, decoded.dtype)
    if return_index:
        (index,) = _temps(helper, "int32")
        helper.append_op("multiclass_nms2", inputs={"Scores": probs, "BBoxes": decoded},
                         outputs={"Out": out, "Index": index}, attrs=attrs)
        return _stop(out, index)
    helper.append_op("multiclass_nms", inputs={"Scores": probs, "BBoxes": decoded},
                     outputs={"Out": out}, attrs=attrs)
    return _stop(out)


def multiclass_nms(bboxes, scores, score_threshold, nms_top_k, keep_top_k, nms_threshold=0.3,
                   normalized=True, nms_eta=1.0, background_label=0, name=None):
    """Multi-class NMS: a LoDTensor [K, 6] of (label, score, xmin, ymin, xmax, ymax) per
    image; [[-1]] when nothing is kept."""
    check_dtype_of("multiclass_nms", "BBoxes", bboxes, _FLOATS)
    check_dtype_of("multiclass_nms", "Scores", scores, _FLOATS)
    for arg, v, kind in (("score_threshold", score_threshold, float),
                         ("nms_top_k", nms_top_k, int), ("keep_top_k", keep_top_k, int),
                         ("nms_threshold", nms_threshold, float),
                         ("normalized", normalized, bool), ("nms_eta", nms_eta, float),
                         ("background_label", background_label, int)):
        _typed("multiclass_nms", arg, v, kind)
    helper = LayerHelper("multiclass_nms", name=name)
    (out,) = _temps(helper, bboxes.dtype)
    helper.append_op("multiclass_nms", inputs={"BBoxes": bboxes, "Scores": scores},
                     outputs={"Out": out},
                     attrs={"background_label": background_label,
                            "score_threshold": score_threshold, "nms_top_k": nms_top_k,
                            "nms_threshold": nms_threshold, "nms_eta": nms_eta,
                            "keep_top_k": keep_top_k, "normalized": normalized})
    return _stop(out)


def multiclass_nms2(bboxes, scores, score_threshold, nms_top_k, keep_top_k, nms_threshold=0.3,
                    normalized=True, nms_eta=1.0, background_label=0, return_index=False,
                    name=None):
    """multiclass_nms that also gives (return_index) each kept box's row [K, 1] in the
    flattened input boxes (Fluid 1.6-1.7's layer)."""
    check_dtype_of("multiclass_nms2", "BBoxes", bboxes, _FLOATS)
    check_dtype_of("multiclass_nms2", "Scores", scores, _FLOATS)
    helper = LayerHelper("multiclass_nms2", name=name)
    out, index = _temps(helper, bboxes.dtype, "int32")
    helper.append_op("multiclass_nms2", inputs={"BBoxes": bboxes, "Scores": scores},
                     outputs={"Out": out, "Index": index},
                     attrs={"background_label": int(background_label),
                            "score_threshold": float(score_threshold),
                            "nms_top_k": int(nms_top_k), "nms_threshold": float(nms_threshold),
                            "nms_eta": float(nms_eta), "keep_top_k": int(keep_top_k),
                            "normalized": bool(normalized)})
    _stop(out, index)
    return (out, index) if return_index else out


def detection_map(detect_res, label, class_num, background_label=0, overlap_threshold=0.3,
                  evaluate_difficult=True, has_state=None, input_states=None, out_states=None,
                  ap_version="integral"):
    """The mAP [1] of `detect_res` (detection_output's rows) against `label` ([N, 6] rows
    (label, difficult, box) or [N, 5], LoD per image); with `has_state` / `input_states` /
    `out_states` (pos count, true positives, false positives) it accumulates over batches,
    as fluid.metrics.DetectionMAP uses it. Fluid 1.8 defines it here, outside __all__."""
    helper = LayerHelper("detection_map")
    tmp = helper.create_variable_for_type_inference
    map_out = tmp("float32")
    pos, tp, fp = out_states if out_states is not None else (tmp("int32"), tmp("float32"),
                                                             tmp("float32"))
    inputs = {"Label": label, "DetectRes": detect_res}
    if has_state is not None:
        inputs["HasState"] = has_state
    if input_states is not None:
        inputs.update(zip(("PosCount", "TruePos", "FalsePos"), input_states))
    helper.append_op("detection_map", inputs=inputs,
                     outputs={"MAP": map_out, "AccumPosCount": pos, "AccumTruePos": tp,
                              "AccumFalsePos": fp},
                     attrs={"overlap_threshold": float(overlap_threshold),
                            "evaluate_difficult": bool(evaluate_difficult),
                            "ap_type": ap_version, "class_num": int(class_num)})
    # (Fluid 1.8 leaves the op's background_label at its default, 0, whatever is passed)
    return map_out


def retinanet_detection_output(bboxes, scores, anchors, im_info, score_threshold=0.05,
                               nms_top_k=1000, keep_top_k=100, nms_threshold=0.3, nms_eta=1.0):
    """RetinaNet's detections from per-level lists of deltas [N, M_l, 4], class scores [N,
    M_l, C] and anchors [M_l, 4], and im_info [N, 3]: a LoDTensor [K, 6] of (label + 1,
    score, box) per image, best first."""
    for arg, vs in (("bboxes", bboxes), ("scores", scores), ("anchors", anchors)):
        if not isinstance(vs, list):
            raise TypeError(f"retinanet_detection_output: {arg} must be a list, got "
                            f"{type(vs).__name__}")
        for i, v in enumerate(vs):
            check_dtype_of("retinanet_detection_output", f"{arg[:-1]}{i}", v, _FLOATS)
    check_dtype_of("retinanet_detection_output", "im_info", im_info, _FLOATS)
    helper = LayerHelper("retinanet_detection_output")
    (out,) = _temps(helper, scores[0].dtype)
    helper.append_op("retinanet_detection_output",
                     inputs={"BBoxes": bboxes, "Scores": scores, "Anchors": anchors,
                             "ImInfo": im_info},
                     outputs={"Out": out},
                     attrs={"score_threshold": float(score_threshold),
                            "nms_top_k": int(nms_top_k), "nms_threshold": float(nms_threshold),
                            "keep_top_k": int(keep_top_k), "nms_eta": 1.0})
    return _stop(out)


# --- losses and YOLO ------------------------------------------------------------------------
def sigmoid_focal_loss(x, label, fg_num, gamma=2.0, alpha=0.25):
    """RetinaNet's focal loss [N, C] of logits `x` for labels `label` [N, 1] (int32, 1..C;
    0 background, -1 ignored), normalized by `fg_num` (int32 [1])."""
    check_dtype_of("sigmoid_focal_loss", "x", x, _FLOATS)
    check_dtype_of("sigmoid_focal_loss", "label", label, ("int32",))
    check_dtype_of("sigmoid_focal_loss", "fg_num", fg_num, ("int32",))
    helper = LayerHelper("sigmoid_focal_loss")
    (out,) = _temps(helper, x.dtype)
    helper.append_op("sigmoid_focal_loss", inputs={"X": x, "Label": label, "FgNum": fg_num},
                     outputs={"Out": out}, attrs={"gamma": float(gamma), "alpha": float(alpha)})
    return out


def yolo_box(x, img_size, anchors, class_num, conf_thresh, downsample_ratio, clip_bbox=True,
             name=None):
    """YOLOv3's (boxes [N, A * H * W, 4], scores [N, A * H * W, class_num]) from the head
    `x` and the images' sizes `img_size` [N, 2] (int32 height, width)."""
    _var("yolo_box", "x", x)
    _var("yolo_box", "img_size", img_size)
    if not _seq(anchors):
        raise TypeError("yolo_box: anchors must be a list or tuple")
    _typed("yolo_box", "class_num", class_num, int)
    _typed("yolo_box", "conf_thresh", conf_thresh, float)
    helper = LayerHelper("yolo_box", name=name)
    boxes, scores = _temps(helper, x.dtype, x.dtype)
    helper.append_op("yolo_box", inputs={"X": x, "ImgSize": img_size},
                     outputs={"Boxes": boxes, "Scores": scores},
                     attrs={"anchors": [int(a) for a in anchors], "class_num": class_num,
                            "conf_thresh": conf_thresh, "downsample_ratio": int(downsample_ratio),
                            "clip_bbox": bool(clip_bbox)})
    return boxes, scores


def yolov3_loss(x, gt_box, gt_label, anchors, anchor_mask, class_num, ignore_thresh,
                downsample_ratio, gt_score=None, use_label_smooth=True, name=None):
    """YOLOv3's loss [N] for the head `x` of one level (anchors `anchor_mask` of `anchors`)
    against gt boxes [N, B, 4] (cx, cy, w, h as fractions of the image; w or h 0: padding),
    labels [N, B] (int32) and optional scores [N, B] (mixup)."""
    for arg, v in (("x", x), ("gt_box", gt_box), ("gt_label", gt_label)):
        _var("yolov3_loss", arg, v)
    if gt_score is not None:
        _var("yolov3_loss", "gt_score", gt_score)
    for arg, v in (("anchors", anchors), ("anchor_mask", anchor_mask)):
        if not _seq(v):
            raise TypeError(f"yolov3_loss: {arg} must be a list or tuple")
    _typed("yolov3_loss", "class_num", class_num, int)
    _typed("yolov3_loss", "ignore_thresh", ignore_thresh, float)
    if not isinstance(use_label_smooth, bool):
        raise TypeError("yolov3_loss: use_label_smooth must be a bool value")
    helper = LayerHelper("yolov3_loss", name=name)
    loss, obj_mask, match_mask = _temps(helper, x.dtype, x.dtype, "int32")
    inputs = {"X": x, "GTBox": gt_box, "GTLabel": gt_label}
    if gt_score is not None:
        inputs["GTScore"] = gt_score
    helper.append_op("yolov3_loss", inputs=inputs,
                     outputs={"Loss": loss, "ObjectnessMask": obj_mask,
                              "GTMatchMask": match_mask},
                     attrs={"anchors": [int(a) for a in anchors],
                            "anchor_mask": [int(a) for a in anchor_mask],
                            "class_num": class_num, "ignore_thresh": ignore_thresh,
                            "downsample_ratio": int(downsample_ratio),
                            "use_label_smooth": use_label_smooth})
    return loss


def roi_perspective_transform(input, rois, transformed_height, transformed_width,
                              spatial_scale=1.0, name=None):
    """Warp each quadrilateral ROI of `rois` (a LoDTensor [R, 8]: four corners, clockwise from
    the top left) to transformed_height x transformed_width: (out [R, C, th, tw], mask [R, 1,
    th, tw] int32, transform matrices [R, 9])."""
    check_dtype_of("roi_perspective_transform", "input", input, ("float32",))
    check_dtype_of("roi_perspective_transform", "rois", rois, ("float32",))
    _typed("roi_perspective_transform", "transformed_height", transformed_height, int)
    _typed("roi_perspective_transform", "transformed_width", transformed_width, int)
    _typed("roi_perspective_transform", "spatial_scale", spatial_scale, float)
    helper = LayerHelper("roi_perspective_transform", name=name)
    out, mask, matrix, idx, wt = _temps(helper, input.dtype, "int32", input.dtype, "int32",
                                        input.dtype)
    helper.append_op("roi_perspective_transform", inputs={"X": input, "ROIs": rois},
                     outputs={"Out": out, "Out2InIdx": idx, "Out2InWeights": wt, "Mask": mask,
                              "TransformMatrix": matrix},
                     attrs={"transformed_height": transformed_height,
                            "transformed_width": transformed_width,
                            "spatial_scale": spatial_scale})
    return out, mask, matrix


# --- RPN and FPN ----------------------------------------------------------------------------
def generate_proposals(scores, bbox_deltas, im_info, anchors, variances, pre_nms_top_n=6000,
                       post_nms_top_n=1000, nms_thresh=0.5, min_size=0.1, eta=1.0, name=None,
                       return_rois_num=False):
    """RPN proposals: (rois [K, 4], their probabilities [K, 1]), LoDTensors with one
    sequence per image; with return_rois_num also the running totals of rois per image
    [N, 1] (int64, Fluid 1.8's RpnRoisLod)."""
    for arg, v in (("scores", scores), ("bbox_deltas", bbox_deltas), ("im_info", im_info),
                   ("anchors", anchors), ("variances", variances)):
        _var("generate_proposals", arg, v)
    helper = LayerHelper("generate_proposals", name=name)
    rois, probs, totals = _temps(helper, bbox_deltas.dtype, scores.dtype, "int64")
    helper.append_op("generate_proposals",
                     inputs={"Scores": scores, "BboxDeltas": bbox_deltas, "ImInfo": im_info,
                             "Anchors": anchors, "Variances": variances},
                     outputs={"RpnRois": rois, "RpnRoiProbs": probs, "RpnRoisLod": totals},
                     attrs={"pre_nms_topN": int(pre_nms_top_n),
                            "post_nms_topN": int(post_nms_top_n),
                            "nms_thresh": float(nms_thresh), "min_size": float(min_size),
                            "eta": float(eta)})
    _stop(rois, probs, totals)
    return (rois, probs, totals) if return_rois_num else (rois, probs)


def distribute_fpn_proposals(fpn_rois, min_level, max_level, refer_level, refer_scale,
                             name=None):
    """(the rois of each FPN level min_level..max_level, the index [R, 1] restoring the input
    order from their concatenation)."""
    check_dtype_of("distribute_fpn_proposals", "fpn_rois", fpn_rois, _FLOATS)
    helper = LayerHelper("distribute_fpn_proposals", name=name)
    levels = [helper.create_variable_for_type_inference(fpn_rois.dtype)
              for _ in range(max_level - min_level + 1)]
    (restore,) = _temps(helper, "int32")
    helper.append_op("distribute_fpn_proposals", inputs={"FpnRois": fpn_rois},
                     outputs={"MultiFpnRois": levels, "RestoreIndex": restore},
                     attrs={"min_level": int(min_level), "max_level": int(max_level),
                            "refer_level": int(refer_level), "refer_scale": int(refer_scale)})
    return levels, restore


def collect_fpn_proposals(multi_rois, multi_scores, min_level, max_level, post_nms_top_n,
                          name=None):
    """The post_nms_top_n best scoring rois over the levels min_level..max_level, grouped by
    image (a LoDTensor [K, 4])."""
    for arg, v in (("multi_rois", multi_rois), ("multi_scores", multi_scores)):
        if not isinstance(v, list):
            raise TypeError(f"collect_fpn_proposals: {arg} must be a list, got "
                            f"{type(v).__name__}")
    check_dtype_of("collect_fpn_proposals", "multi_rois", multi_rois[0], _FLOATS)
    n = max_level - min_level + 1
    helper = LayerHelper("collect_fpn_proposals", name=name)
    (out,) = _temps(helper, multi_rois[0].dtype)
    helper.append_op("collect_fpn_proposals",
                     inputs={"MultiLevelRois": multi_rois[:n],
                             "MultiLevelScores": multi_scores[:n]},
                     outputs={"FpnRois": out}, attrs={"post_nms_topN": int(post_nms_top_n)})
    return _stop(out)


# --- training targets (ops in fluidity/ops/anchor_targets.py) ----------------------------------
def _anchor_target_checks(layer, **args):
    for arg, (v, dtypes) in args.items():
        check_dtype_of(layer, arg, v, dtypes)


def _gather_predictions(cls_logits, bbox_pred, num_classes, score_index, loc_index):
    from .manip import gather, reshape
    return (gather(reshape(cls_logits, (-1, num_classes)), score_index),
            gather(reshape(bbox_pred, (-1, 4)), loc_index))


def rpn_target_assign(bbox_pred, cls_logits, anchor_box, anchor_var, gt_boxes, is_crowd,
                      im_info, rpn_batch_size_per_im=256, rpn_straddle_thresh=0.0,
                      rpn_fg_fraction=0.5, rpn_positive_overlap=0.7, rpn_negative_overlap=0.3,
                      use_random=True):
    """Faster R-CNN's RPN targets: anchors matched to the ground truth and sampled (op
    rpn_target_assign). Returns (predicted scores, predicted locations, target labels,
    target boxes, inside weights): the predictions gathered at the sampled anchors."""
    for arg, v in (("bbox_pred", bbox_pred), ("cls_logits", cls_logits),
                   ("anchor_box", anchor_box), ("gt_boxes", gt_boxes), ("is_crowd", is_crowd),
                   ("im_info", im_info)):
        _var("rpn_target_assign", arg, v)
    helper = LayerHelper("rpn_target_assign")
    loc, score, label, bbox, inside = _temps(helper, "int32", "int32", "int32",
                                             anchor_box.dtype, anchor_box.dtype)
    helper.append_op("rpn_target_assign",
                     inputs={"Anchor": anchor_box, "GtBoxes": gt_boxes, "IsCrowd": is_crowd,
                             "ImInfo": im_info},
                     outputs={"LocationIndex": loc, "ScoreIndex": score, "TargetLabel": label,
                              "TargetBBox": bbox, "BBoxInsideWeight": inside},
                     attrs={"rpn_batch_size_per_im": int(rpn_batch_size_per_im),
                            "rpn_straddle_thresh": float(rpn_straddle_thresh),
                            "rpn_positive_overlap": float(rpn_positive_overlap),
                            "rpn_negative_overlap": float(rpn_negative_overlap),
                            "rpn_fg_fraction": float(rpn_fg_fraction),
                            "use_random": bool(use_random)})
    _stop(loc, score, label, bbox, inside)
    scores, locs = _gather_predictions(cls_logits, bbox_pred, 1, score, loc)
    return scores, locs, label, bbox, inside


def retinanet_target_assign(bbox_pred, cls_logits, anchor_box, anchor_var, gt_boxes, gt_labels,
                            is_crowd, im_info, num_classes=1, positive_overlap=0.5,
                            negative_overlap=0.4):
    """RetinaNet's targets: every fg / bg anchor with its class (op
    retinanet_target_assign). Returns (predicted scores, predicted locations, target labels,
    target boxes, inside weights, foreground count + 1 per image)."""
    _anchor_target_checks("retinanet_target_assign", bbox_pred=(bbox_pred, _FLOATS),
                          cls_logits=(cls_logits, _FLOATS), anchor_box=(anchor_box, _FLOATS),
                          anchor_var=(anchor_var, _FLOATS), gt_boxes=(gt_boxes, _FLOATS),
                          gt_labels=(gt_labels, ("int32",)), is_crowd=(is_crowd, ("int32",)),
                          im_info=(im_info, _FLOATS))
    helper = LayerHelper("retinanet_target_assign")
    loc, score, label, bbox, inside, fg_num = _temps(
        helper, "int32", "int32", "int32", anchor_box.dtype, anchor_box.dtype, "int32")
    helper.append_op("retinanet_target_assign",
                     inputs={"Anchor": anchor_box, "GtBoxes": gt_boxes, "GtLabels": gt_labels,
                             "IsCrowd": is_crowd, "ImInfo": im_info},
                     outputs={"LocationIndex": loc, "ScoreIndex": score, "TargetLabel": label,
                              "TargetBBox": bbox, "BBoxInsideWeight": inside,
                              "ForegroundNumber": fg_num},
                     attrs={"positive_overlap": float(positive_overlap),
                            "negative_overlap": float(negative_overlap)})
    _stop(loc, score, label, bbox, inside, fg_num)
    scores, locs = _gather_predictions(cls_logits, bbox_pred, num_classes, score, loc)
    return scores, locs, label, bbox, inside, fg_num


def generate_proposal_labels(rpn_rois, gt_classes, is_crowd, gt_boxes, im_info,
                             batch_size_per_im=256, fg_fraction=0.25, fg_thresh=0.25,
                             bg_thresh_hi=0.5, bg_thresh_lo=0.0,
                             bbox_reg_weights=[0.1, 0.1, 0.2, 0.2], class_nums=None,
                             use_random=True, is_cls_agnostic=False, is_cascade_rcnn=False):
    """Fast R-CNN head targets from RPN proposals (op generate_proposal_labels). Returns
    (rois, labels_int32, bbox_targets, bbox_inside_weights, bbox_outside_weights), one
    sequence per image."""
    for arg, v in (("rpn_rois", rpn_rois), ("gt_classes", gt_classes), ("is_crowd", is_crowd),
                   ("gt_boxes", gt_boxes), ("im_info", im_info)):
        _var("generate_proposal_labels", arg, v)
    if class_nums is None and not is_cls_agnostic:
        raise ValueError("generate_proposal_labels: class_nums must be given")
    helper = LayerHelper("generate_proposal_labels")
    rois, labels, targets, inside, outside = _temps(
        helper, rpn_rois.dtype, "int32", rpn_rois.dtype, rpn_rois.dtype, rpn_rois.dtype)
    helper.append_op("generate_proposal_labels",
                     inputs={"RpnRois": rpn_rois, "GtClasses": gt_classes,
                             "IsCrowd": is_crowd, "GtBoxes": gt_boxes, "ImInfo": im_info},
                     outputs={"Rois": rois, "LabelsInt32": labels, "BboxTargets": targets,
                              "BboxInsideWeights": inside, "BboxOutsideWeights": outside},
                     attrs={"batch_size_per_im": int(batch_size_per_im),
                            "fg_fraction": float(fg_fraction), "fg_thresh": float(fg_thresh),
                            "bg_thresh_hi": float(bg_thresh_hi),
                            "bg_thresh_lo": float(bg_thresh_lo),
                            "bbox_reg_weights": [float(w) for w in bbox_reg_weights],
                            "class_nums": int(class_nums if class_nums is not None else 2),
                            "use_random": bool(use_random),
                            "is_cls_agnostic": bool(is_cls_agnostic),
                            "is_cascade_rcnn": bool(is_cascade_rcnn)})
    return _stop(rois, labels, targets, inside, outside)


def generate_mask_labels(im_info, gt_classes, is_crowd, gt_segms, rois, labels_int32,
                         num_classes, resolution):
    """Mask R-CNN's mask-branch targets (op generate_mask_labels) from the RoIs and labels
    of generate_proposal_labels and the ground truth's polygons (`gt_segms`: [S, 2] points,
    3 LoD levels: objects per image, polygons per object, points per polygon). Returns
    (mask_rois, roi_has_mask_int32, mask_int32), one sequence per image; mask_int32 is
    [P, num_classes * resolution ** 2], -1 outside each RoI's class."""
    for arg, v in (("im_info", im_info), ("gt_classes", gt_classes), ("is_crowd", is_crowd),
                   ("gt_segms", gt_segms), ("rois", rois), ("labels_int32", labels_int32)):
        _var("generate_mask_labels", arg, v)
    _typed("generate_mask_labels", "num_classes", num_classes, int)
    _typed("generate_mask_labels", "resolution", resolution, int)
    helper = LayerHelper("generate_mask_labels")
    mask_rois, has_mask, masks = _temps(helper, rois.dtype, gt_classes.dtype,
                                        gt_classes.dtype)
    helper.append_op("generate_mask_labels",
                     inputs={"ImInfo": im_info, "GtClasses": gt_classes, "IsCrowd": is_crowd,
                             "GtSegms": gt_segms, "Rois": rois, "LabelsInt32": labels_int32},
                     outputs={"MaskRois": mask_rois, "RoiHasMaskInt32": has_mask,
                              "MaskInt32": masks},
                     attrs={"num_classes": num_classes, "resolution": resolution})
    return _stop(mask_rois, has_mask, masks)


def locality_aware_nms(bboxes, scores, score_threshold, nms_top_k, keep_top_k,
                       nms_threshold=0.3, normalized=True, nms_eta=1., background_label=-1,
                       name=None):
    """EAST's locality-aware NMS (op locality_aware_nms): boxes merged with their overlapping
    predecessors, then multiclass NMS. Scores [N, 1, M] (one class, as Fluid)."""
    check_dtype_of("locality_aware_nms", "bboxes", bboxes, _FLOATS)
    check_dtype_of("locality_aware_nms", "scores", scores, _FLOATS)
    for arg, v, kind in (("background_label", background_label, int),
                         ("score_threshold", score_threshold, float),
                         ("nms_top_k", nms_top_k, int), ("nms_eta", nms_eta, float),
                         ("nms_threshold", nms_threshold, float),
                         ("keep_top_k", keep_top_k, int), ("normalized", normalized, bool)):
        _typed("locality_aware_nms", arg, v, kind)
    if len(scores.shape) != 3 or scores.shape[1] != 1:
        raise ValueError(f"locality_aware_nms only support one class, Tensor score shape must "
                         f"be [N, 1, M], got {list(scores.shape)}")
    helper = LayerHelper("locality_aware_nms", name=name)
    (out,) = _temps(helper, bboxes.dtype)
    helper.append_op("locality_aware_nms", inputs={"BBoxes": bboxes, "Scores": scores},
                     outputs={"Out": out},
                     attrs={"background_label": background_label,
                            "score_threshold": score_threshold, "nms_top_k": nms_top_k,
                            "nms_threshold": nms_threshold, "nms_eta": nms_eta,
                            "keep_top_k": keep_top_k, "normalized": normalized})
    return _stop(out)
