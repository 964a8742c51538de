"""Losses over large class sets (Fluid 1.x signatures): nce and hsigmoid (ops in
fluidity/ops/sampled.py), sampled_softmax_with_cross_entropy (fluidity/ops/sample_logits.py)."""
import numpy as np

from ..initializer import NumpyArrayInitializer
from ..layer_helper import LayerHelper
from ..ops.sampled import SAMPLERS, alias_tables
from .checks import check_variables

__all__ = ["nce", "hsigmoid", "sampled_softmax_with_cross_entropy"]


def _check_var(layer, arg, v, ndim=None):
    check_variables(layer, **{arg: v})
    if ndim is not None and len(v.shape) != ndim:
        raise ValueError(f"{layer}: {arg} must be {ndim}-D, got shape {list(v.shape)}")


def _constant_var(helper, value, suffix):
    """A persistable variable holding `value`, set by the startup program."""
    var = helper.create_global_variable(persistable=True, dtype=str(value.dtype),
                                        shape=list(value.shape),
                                        name=f"{helper.name}.{suffix}")
    helper.set_variable_initializer(var, NumpyArrayInitializer(value))
    return var


def nce(input, label, num_total_classes, sample_weight=None, param_attr=None,
        bias_attr=None, num_neg_samples=None, name=None, sampler="uniform", custom_dist=None,
        seed=0, is_sparse=False):
    """Noise-contrastive estimation loss [N, 1] of `input` [N, D] for the true classes
    `label` [N, num_true] among num_total_classes, against num_neg_samples (default 10)
    negatives drawn by `sampler`: uniform, log_uniform or custom_dist (probabilities
    `custom_dist`, one per class)."""
    _check_var("nce", "input", input, 2)
    _check_var("nce", "label", label, 2)
    if sampler not in SAMPLERS:
        raise ValueError(f"nce: sampler must be one of {sorted(SAMPLERS)}, got {sampler!r}")
    if isinstance(num_total_classes, bool) or not isinstance(num_total_classes, int) or \
            num_total_classes <= 0:
        raise ValueError(f"nce: num_total_classes must be a positive int, got "
                         f"{num_total_classes!r}")
    k = 10 if num_neg_samples is None else int(num_neg_samples)
    helper = LayerHelper("nce", param_attr=param_attr, bias_attr=bias_attr, name=name)
    w = helper.create_parameter(param_attr, [num_total_classes, input.shape[1]], input.dtype)
    inputs = {"Input": input, "Label": label, "Weight": w}
    if bias_attr is not False:
        inputs["Bias"] = helper.create_parameter(bias_attr, [num_total_classes, 1],
                                                 input.dtype, is_bias=True)
    if sample_weight is not None:
        inputs["SampleWeight"] = sample_weight
    if sampler == "custom_dist":
        if custom_dist is None or len(custom_dist) != num_total_classes:
            raise ValueError(f"nce: the custom_dist sampler needs custom_dist, a list of "
                             f"num_total_classes={num_total_classes} probabilities")
        # as Fluid 1.8: the probabilities as given (float32), its alias tables
        alias, alias_probs = alias_tables(custom_dist)
        inputs["CustomDistProbs"] = _constant_var(helper, np.asarray(custom_dist, np.float32),
                                                  "probs")
        inputs["CustomDistAlias"] = _constant_var(helper, alias, "alias")
        inputs["CustomDistAliasProbs"] = _constant_var(helper, alias_probs, "alias_probs")
    cost = helper.create_variable_for_type_inference(input.dtype)
    logits = helper.create_variable_for_type_inference(input.dtype)
    labels = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    helper.append_op("nce", inputs=inputs,
                     outputs={"Cost": cost, "SampleLogits": logits, "SampleLabels": labels},
                     attrs={"num_total_classes": int(num_total_classes),
                            "num_neg_samples": k, "seed": int(seed),
                            "sampler": SAMPLERS[sampler], "is_sparse": bool(is_sparse),
                            "remote_prefetch": bool(is_sparse)})
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("scale", inputs={"X": cost}, outputs={"Out": out},
                     attrs={"scale": 1.0 / (k + 1)})
    return out


def hsigmoid(input, label, num_classes, param_attr=None, bias_attr=None, name=None,
             path_table=None, path_code=None, is_custom=False, is_sparse=False):
    """Hierarchical sigmoid loss [N, 1]: binary decisions along the class's path in Paddle's
    default complete tree over num_classes, or (is_custom) the paths path_table/path_code."""
    _check_var("hsigmoid", "input", input)
    _check_var("hsigmoid", "label", label)
    if len(input.shape) != 2:
        # Fluid 1.x builds this, then its kernel walks X as rows of shape[1] elements:
        # the samples' elements mixed up, a wrong loss without a word
        raise ValueError(f"hsigmoid: input must be 2-D [N, D], got shape "
                         f"{list(input.shape)}: Fluid 1.x accepts it but computes on rows of "
                         f"{input.shape[1] if len(input.shape) > 1 else '?'} consecutive "
                         f"elements, mixing samples; reshape it first "
                         f"(fluid.layers.reshape(input, [-1, D]))")
    if not is_custom:
        if num_classes is None or num_classes < 2:
            raise ValueError("hsigmoid: num_classes must not be less than 2 with the default "
                             "tree")
        if path_table is not None or path_code is not None:
            raise ValueError("hsigmoid: path_table and path_code are for a custom tree "
                             "(is_custom=True); the default tree needs only num_classes")
    else:
        for arg, v in (("path_table", path_table), ("path_code", path_code),
                       ("num_classes", num_classes)):
            if v is None:
                raise ValueError(f"hsigmoid: {arg} should not be None with a custom tree")
    rows = num_classes if is_custom else num_classes - 1
    helper = LayerHelper("hierarchical_sigmoid", param_attr=param_attr, bias_attr=bias_attr,
                         name=name)
    w = helper.create_parameter(param_attr, [rows, input.shape[1]], input.dtype)
    inputs = {"X": input, "W": w, "Label": label}
    if is_custom:
        inputs.update({"PathTable": path_table, "PathCode": path_code})
    if bias_attr is not False:
        inputs["Bias"] = helper.create_parameter(bias_attr, [rows, 1], input.dtype,
                                                 is_bias=True)
    out = helper.create_variable_for_type_inference(input.dtype)
    pre_out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("hierarchical_sigmoid", inputs=inputs,
                     outputs={"Out": out, "PreOut": pre_out},
                     attrs={"num_classes": int(num_classes), "is_sparse": bool(is_sparse),
                            "remote_prefetch": bool(is_sparse)})
    return out


def sampled_softmax_with_cross_entropy(logits, label, num_samples, num_true=1,
                                       remove_accidental_hits=True,
                                       use_customized_samples=False, customized_samples=None,
                                       customized_probabilities=None, seed=0):
    """Softmax cross-entropy [N, 1] over the true classes of `label` [N, num_true] (int64)
    and num_samples classes drawn log-uniformly from the K of `logits` [N, K] (Fluid's
    sampled softmax), divided by num_true. With use_customized_samples, the classes are
    `customized_samples` [N, num_true + num_samples] (int64; the true ones first) with their
    sampling probabilities `customized_probabilities`."""
    _check_var("sampled_softmax_with_cross_entropy", "logits", logits, 2)
    _check_var("sampled_softmax_with_cross_entropy", "label", label, 2)
    if use_customized_samples:
        _check_var("sampled_softmax_with_cross_entropy", "customized_samples",
                   customized_samples, 2)
        _check_var("sampled_softmax_with_cross_entropy", "customized_probabilities",
                   customized_probabilities, 2)
    helper = LayerHelper("sample_logits")
    tmp = helper.create_variable_for_type_inference
    samples = customized_samples if use_customized_samples else tmp("int64")
    probabilities = (customized_probabilities if use_customized_samples
                     else tmp(logits.dtype))
    sampled_logits, sampled_label = tmp(logits.dtype), tmp("int64")
    logits_dim, labels_dim = tmp(logits.dtype), tmp("int64")
    inputs = {"Logits": logits, "Labels": label}
    if use_customized_samples:
        inputs.update({"CustomizedSamples": customized_samples,
                       "CustomizedProbabilities": customized_probabilities})
    helper.append_op("sample_logits", inputs=inputs,
                     outputs={"Samples": samples, "Probabilities": probabilities,
                              "SampledLabels": sampled_label,
                              "SampledLogits": sampled_logits, "LogitsDim": logits_dim,
                              "LabelsDim": labels_dim},
                     attrs={"use_customized_samples": bool(use_customized_samples),
                            "uniq": True, "remove_accidental_hits": bool(remove_accidental_hits),
                            "num_samples": int(num_samples), "seed": int(seed)})
    soft_label, loss, softmax = tmp(logits.dtype), tmp(logits.dtype), tmp(logits.dtype)
    helper.append_op("one_hot", inputs={"X": sampled_label}, outputs={"Out": soft_label},
                     attrs={"depth": int(num_samples) + 1})
    helper.append_op("softmax_with_cross_entropy",
                     inputs={"Logits": sampled_logits, "Label": soft_label},
                     outputs={"Softmax": softmax, "Loss": loss},
                     # Fluid writes ignore_index=False here; an INT attribute stores 0
                     attrs={"soft_label": True, "ignore_index": 0,
                            "numeric_stable_mode": False})
    return loss / num_true
