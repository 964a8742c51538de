"""Loss layers (Fluid 1.x signatures)."""
from ..core import dtypes
from ..layer_helper import LayerHelper
from ..ops.loss import IGNORE_INDEX
from .checks import check_variables
from .manip import one_op_layer

__all__ = ["cross_entropy", "softmax_with_cross_entropy", "sigmoid_cross_entropy_with_logits",
           "square_error_cost", "huber_loss", "smooth_l1", "log_loss"]


def _tmp(helper, dtype, stop_gradient=False):
    return helper.create_variable_for_type_inference(dtype, stop_gradient=stop_gradient)


def cross_entropy(input, label, soft_label=False, ignore_index=IGNORE_INDEX):
    """Cross entropy of probabilities `input` [N, D] against int64 class ids [N, 1] (op
    cross_entropy2) or, with soft_label, distributions [N, D] (op cross_entropy).
    Returns [N, 1] (Label's shape for a Label [N]). input must be a float16/32/64 Variable
    (TypeError otherwise, as Fluid 1.8)."""
    check_variables("cross_entropy", input=input, label=label)
    if dtypes.name(input.dtype) not in ("float16", "float32", "float64"):
        raise TypeError(f"cross_entropy: input ({input.name}) must be float16, float32 or "
                        f"float64, got {dtypes.name(input.dtype)}")
    helper = LayerHelper("cross_entropy")
    out = _tmp(helper, input.dtype)
    if soft_label:
        helper.append_op("cross_entropy", inputs={"X": input, "Label": label},
                         outputs={"Y": out},
                         attrs={"soft_label": True, "ignore_index": ignore_index})
        return out
    xshape, match_x = _tmp(helper, input.dtype, True), _tmp(helper, input.dtype, True)
    helper.append_op("cross_entropy2", inputs={"X": input, "Label": label},
                     outputs={"Y": out, "XShape": xshape, "MatchX": match_x},
                     attrs={"ignore_index": ignore_index})
    return out


def softmax_with_cross_entropy(logits, label, soft_label=False, ignore_index=IGNORE_INDEX,
                               numeric_stable_mode=True, return_softmax=False, axis=-1):
    """Cross entropy of softmax(logits) along `axis`; returns loss (the logits' shape with
    size 1 on `axis`), or (loss, softmax) with return_softmax."""
    helper = LayerHelper("softmax_with_cross_entropy")
    softmax, loss = _tmp(helper, logits.dtype), _tmp(helper, logits.dtype)
    helper.append_op("softmax_with_cross_entropy", inputs={"Logits": logits, "Label": label},
                     outputs={"Softmax": softmax, "Loss": loss},
                     attrs={"soft_label": soft_label, "ignore_index": ignore_index,
                            "numeric_stable_mode": numeric_stable_mode, "axis": axis})
    return (loss, softmax) if return_softmax else loss


def sigmoid_cross_entropy_with_logits(x, label, ignore_index=IGNORE_INDEX, name=None,
                                      normalize=False):
    """Elementwise logistic loss of logits `x` against targets `label` (same shape)."""
    helper = LayerHelper("sigmoid_cross_entropy_with_logits", name=name)
    out = _tmp(helper, x.dtype)
    helper.append_op("sigmoid_cross_entropy_with_logits", inputs={"X": x, "Label": label},
                     outputs={"Out": out},
                     attrs={"ignore_index": ignore_index, "normalize": normalize})
    return out


def square_error_cost(input, label):
    """(input - label)^2, elementwise (ops elementwise_sub + square)."""
    helper = LayerHelper("square_error_cost")
    minus = _tmp(helper, input.dtype)
    helper.append_op("elementwise_sub", inputs={"X": input, "Y": label},
                     outputs={"Out": minus})
    square = _tmp(helper, input.dtype)
    helper.append_op("square", inputs={"X": minus}, outputs={"Out": square})
    return square


def huber_loss(input, label, delta):
    """Huber loss of residual label - input: quadratic within `delta`, linear outside."""
    helper = LayerHelper("huber_loss")
    residual, out = _tmp(helper, input.dtype, True), _tmp(helper, input.dtype)
    helper.append_op("huber_loss", inputs={"X": input, "Y": label},
                     outputs={"Out": out, "Residual": residual},
                     attrs={"delta": float(delta)})
    return out


def smooth_l1(x, y, inside_weight=None, outside_weight=None, sigma=None):
    """Smooth L1 loss per row: [N, 1] (op smooth_l1_loss)."""
    helper = LayerHelper("smooth_l1_loss")
    diff, loss = _tmp(helper, x.dtype, True), _tmp(helper, x.dtype)
    inputs = {"X": x, "Y": y}
    if inside_weight is not None:
        inputs["InsideWeight"] = inside_weight
    if outside_weight is not None:
        inputs["OutsideWeight"] = outside_weight
    helper.append_op("smooth_l1_loss", inputs=inputs, outputs={"Diff": diff, "Out": loss},
                     attrs={"sigma": float(sigma) if sigma is not None else 1.0})
    return loss


def log_loss(input, label, epsilon=1e-4, name=None):
    """Negative log likelihood of probabilities `input` [N, 1] for 0/1 `label` [N, 1]."""
    helper = LayerHelper("log_loss", name=name)
    loss = _tmp(helper, input.dtype)
    helper.append_op("log_loss", inputs={"Predicted": input, "Labels": label},
                     outputs={"Loss": loss}, attrs={"epsilon": float(epsilon)})
    return loss


# --- Fluid 1.x losses (ops in fluidity/ops/ranking_loss.py, soft_label.py, center_loss.py;
# composites over other layers) ---------------------------------------------------------------
__all__ += ["ctc_greedy_decoder", "rank_loss", "margin_rank_loss", "bpr_loss", "kldiv_loss",
            "teacher_student_sigmoid_loss", "mse_loss", "npair_loss", "dice_loss",
            "center_loss", "warpctc", "edit_distance"]


def rank_loss(label, left, right, name=None):
    """RankNet loss of scores `left`, `right` [N, 1] for `label` [N, 1] (1: left ranks
    higher): log(1 + exp(left - right)) - label * (left - right)."""
    check_variables("rank_loss", label=label, left=left, right=right)
    return one_op_layer("rank_loss", {"Label": label, "Left": left, "Right": right},
                        dtype=left.dtype, name=name)


def margin_rank_loss(label, left, right, margin=0.1, name=None):
    """max(0, -label * (left - right) + margin), elementwise."""
    check_variables("margin_rank_loss", label=label, left=left, right=right)
    helper = LayerHelper("margin_rank_loss", name=name)
    out, act = _tmp(helper, left.dtype), _tmp(helper, left.dtype, True)
    helper.append_op("margin_rank_loss", inputs={"X1": left, "X2": right, "Label": label},
                     outputs={"Out": out, "Activated": act}, attrs={"margin": float(margin)})
    return out


def bpr_loss(input, label, name=None):
    """Bayesian personalized ranking loss of scores `input` [N, C] for the positive class
    ids `label` [N, 1]; returns [N, 1]."""
    check_variables("bpr_loss", input=input, label=label)
    return one_op_layer("bpr_loss", {"X": input, "Label": label}, name=name, out_slot="Y")


def kldiv_loss(x, target, reduction="mean", name=None):
    """KL divergence of `target` (probabilities) from `x` (log-probabilities), reduced by
    'none', 'sum', 'mean' or 'batchmean'."""
    check_variables("kldiv_loss", x=x, target=target)
    if reduction not in ("none", "sum", "mean", "batchmean"):
        raise ValueError(f"kldiv_loss: 'reduction' must be 'none', 'sum', 'mean' or "
                         f"'batchmean', got {reduction!r}")
    return one_op_layer("kldiv_loss", {"X": x, "Target": target}, {"reduction": reduction},
                        name=name, out_slot="Loss")


def teacher_student_sigmoid_loss(input, label, soft_max_up_bound=15.0,
                                 soft_max_lower_bound=-15.0):
    """Sigmoid loss against a click label that may carry a teacher's score (see the op)."""
    check_variables("teacher_student_sigmoid_loss", input=input, label=label)
    return one_op_layer("teacher_student_sigmoid_loss", {"X": input, "Label": label},
                        {"soft_max_up_bound": float(soft_max_up_bound),
                         "soft_max_lower_bound": float(soft_max_lower_bound)}, out_slot="Y")


def mse_loss(input, label):
    """The mean of (input - label)^2."""
    from .manip import reduce_mean
    check_variables("mse_loss", input=input, label=label)
    return reduce_mean(square_error_cost(input, label))


def npair_loss(anchor, positive, labels, l2_reg=0.002):
    """N-pair loss (Sohn 2016): softmax cross entropy of anchor @ positive^T against the
    rows' same-label distribution, plus l2_reg / 4 times the mean squared norms."""
    from . import manip, nn, ops
    check_variables("npair_loss", anchor=anchor, positive=positive, labels=labels)
    lab = manip.reshape(labels, [-1, 1])
    same = manip.cast(manip.equal(lab, manip.transpose(lab, [1, 0])), anchor.dtype)
    same = nn.elementwise_div(same, manip.reduce_sum(same, dim=1, keep_dim=True), axis=0)
    l2 = nn.elementwise_add(manip.reduce_mean(manip.reduce_sum(ops.square(anchor), 1)),
                            manip.reduce_mean(manip.reduce_sum(ops.square(positive), 1)))
    l2 = nn.scale(l2, 0.25 * l2_reg)
    sim = nn.matmul(anchor, positive, transpose_y=True)
    ce = softmax_with_cross_entropy(sim, same, soft_label=True)
    ce = manip.reduce_sum(nn.elementwise_mul(same, ce), dim=0)
    return nn.elementwise_add(l2, manip.reduce_mean(ce))


def dice_loss(input, label, epsilon=0.00001, name=None):
    """1 - 2|X∩Y| / (|X| + |Y|) averaged over the batch, for probabilities `input`
    [N, ..., C] and class ids `label` [N, ..., 1]."""
    from . import manip, nn
    check_variables("dice_loss", input=input, label=label)
    onehot = manip.cast(manip.one_hot(label, input.shape[-1]), input.dtype)
    dims = list(range(1, len(input.shape)))
    inse = manip.reduce_sum(nn.elementwise_mul(input, onehot), dim=dims)
    denom = nn.elementwise_add(manip.reduce_sum(input, dim=dims),
                               manip.reduce_sum(onehot, dim=dims))
    score = nn.elementwise_div(nn.scale(inse, 2.0), nn.scale(denom, 1.0, float(epsilon)))
    return manip.reduce_mean(nn.scale(score, -1.0, 1.0), name=name)




def warpctc(input, label, blank=0, norm_by_times=False, input_length=None,
            label_length=None):
    """The CTC loss [num_sequences, 1] of unnormalized logits `input` (LoD [T, K], or padded
    [T_max, B, K] with input_length) against int32 labels (LoD [L, 1], or padded [B, L_max]
    with label_length); `blank` is the blank class."""
    check_variables("warpctc", input=input, label=label)
    if (input_length is None) != (label_length is None):
        raise ValueError("warpctc: give both input_length and label_length, or neither")
    helper = LayerHelper("warpctc")
    grad, loss = _tmp(helper, input.dtype, True), _tmp(helper, input.dtype)
    inputs = {"Logits": input, "Label": label}
    if input_length is not None:
        inputs.update(LogitsLength=input_length, LabelLength=label_length)
    helper.append_op("warpctc", inputs=inputs, outputs={"WarpCTCGrad": grad, "Loss": loss},
                     attrs={"blank": int(blank), "norm_by_times": bool(norm_by_times)})
    return loss


def ctc_greedy_decoder(input, blank, input_length=None, padding_value=0, name=None):
    """Best-path CTC decoding of probabilities `input` (LoD [T, K], or padded [B, T, K] with
    input_length): the argmax class per step, repeats merged, blanks removed. Returns the
    LoD int64 ids (a lone -1 where all are empty), or (padded ids, their lengths)."""
    from .metric import topk
    from . import manip
    check_variables("ctc_greedy_decoder", input=input)
    _, ids = topk(input, 1)
    helper = LayerHelper("ctc_greedy_decoder", name=name)
    attrs = {"blank": int(blank), "merge_repeated": True, "padding_value": int(padding_value)}
    if input_length is None:
        out = helper.create_variable_for_type_inference("int64", stop_gradient=True)
        helper.append_op("ctc_align", inputs={"Input": ids}, outputs={"Output": out},
                         attrs=attrs)
        return out
    ids = manip.squeeze(ids, [2])
    out = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    out_len = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    helper.append_op("ctc_align", inputs={"Input": ids, "InputLength": input_length},
                     outputs={"Output": out, "OutputLength": out_len}, attrs=attrs)
    return out, out_len


def edit_distance(input, label, normalized=True, ignored_tokens=None, input_length=None,
                  label_length=None):
    """(the Levenshtein distance [N, 1] of each hypothesis in `input` to its reference in
    `label` — divided by the reference length when normalized —, the number of pairs [1]).
    Both are LoD int64 [*, 1], or padded [N, T] with input_length / label_length;
    ignored_tokens (LoD input only) are dropped from both first (op sequence_erase)."""
    check_variables("edit_distance", input=input, label=label)
    if (input_length is None) != (label_length is None):
        raise ValueError("edit_distance: give both input_length and label_length, or neither")
    helper = LayerHelper("edit_distance")
    if ignored_tokens:
        from ..ops import registry
        if input_length is not None:
            raise ValueError("edit_distance: ignored_tokens work on LoD input only")
        if registry.find("sequence_erase") is None:
            raise NotImplementedError("edit_distance: ignored_tokens needs the op "
                                      "sequence_erase, which is not built")
        input, label = (_erase(helper, v, ignored_tokens) for v in (input, label))
    inputs = {"Hyps": input, "Refs": label}
    if input_length is not None:
        inputs.update(HypsLength=input_length, RefsLength=label_length)
    out = _tmp(helper, "float32", True)
    num = _tmp(helper, "int64", True)
    helper.append_op("edit_distance", inputs=inputs,
                     outputs={"Out": out, "SequenceNum": num},
                     attrs={"normalized": bool(normalized)})
    return out, num


def _erase(helper, x, tokens):
    out = helper.create_variable_for_type_inference(x.dtype, stop_gradient=True,
                                                    lod_level=x.lod_level)
    helper.append_op("sequence_erase", inputs={"X": x}, outputs={"Out": out},
                     attrs={"tokens": [int(t) for t in tokens]})
    return out


def center_loss(input, label, num_classes, alpha, param_attr=None, update_center=True):
    """||input - centers[label]||^2 / 2 per row ([N, 1]), the class centers a
    [num_classes, D] parameter that the op moves toward its samples at rate `alpha` (a
    float or a [1] Variable) when update_center."""
    from ..framework import Variable
    from .tensor import create_global_var
    check_variables("center_loss", input=input, label=label)
    helper = LayerHelper("center_loss", param_attr=param_attr)
    centers = helper.create_parameter(param_attr, [int(num_classes), input.shape[1]],
                                      input.dtype)
    centers.stop_gradient = True
    rate = alpha if isinstance(alpha, Variable) else create_global_var(
        [1], float(alpha), "float32", persistable=True, name=None)
    diff, loss = _tmp(helper, input.dtype, True), _tmp(helper, input.dtype)
    helper.append_op("center_loss",
                     inputs={"X": input, "Label": label, "Centers": centers,
                             "CenterUpdateRate": rate},
                     outputs={"SampleCenterDiff": diff, "Loss": loss, "CentersOut": centers},
                     attrs={"cluster_num": int(num_classes), "need_update": bool(update_center)})
    return loss
