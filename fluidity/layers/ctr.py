"""Layers of Fluid 1.x's CTR / recommendation models over the ops of fluidity/ops/ctr.py:
data_norm, hash, filter_by_instag (Paddle 1.8's signatures, parameter names and program)."""
from ..errors import ArgumentTypeError
from ..layer_helper import LayerHelper
from .checks import check_variables

__all__ = ["data_norm", "hash", "filter_by_instag"]


def data_norm(input, act=None, epsilon=1e-05, param_attr=None, data_layout="NCHW",
              in_place=False, name=None, moving_mean_name=None, moving_variance_name=None,
              do_model_average_for_mean_and_var=True, slot_dim=-1, sync_stats=False,
              summary_decay_rate=0.9999999, enable_scale_and_shift=False):
    """Normalise a 2-D `input` [N, C] by statistics accumulated over all batches seen:
    Y = (X - BatchSum / BatchSize) * sqrt(BatchSize / BatchSquareSum), then
    * scale_w + bias with `enable_scale_and_shift`.

    The statistics are parameters named `<name>.batch_size`, `.batch_sum` and
    `.batch_square_sum` (`name` defaults to "dn"; initial values 1e4, 0 and 1e4, or
    param_attr's "batch_size", "batch_sum", "batch_square"). They are not learned: each
    backward pass folds the batch's own statistics into them with the summary rule
    stat = summary_decay_rate * stat + batch_stat (data_norm_grad does it in place, as
    Paddle's CUDA kernel and its parameter server do), so leave them out of the optimizer's
    `parameter_list`, as Paddle's own programs do. `slot_dim` > 0: the columns are slots of
    that width, and a slot whose first value is 0 (an absent feature) stays 0 and is not
    counted. `sync_stats` only matters across GPUs (all-reduced statistics) and is recorded.
    """
    from ..initializer import ConstantInitializer
    from ..param_attr import ParamAttr
    check_variables("data_norm", input=input)
    if data_layout not in ("NCHW", "NHWC"):
        raise ValueError(f"data_norm: unsupported data layout: {data_layout!r}")
    helper = LayerHelper("data_norm", input=input, act=act, name=name)
    dtype = input.dtype
    c = input.shape[1] if data_layout == "NCHW" else input.shape[-1]
    if param_attr is not None and not isinstance(param_attr, dict):
        raise ArgumentTypeError(f"data_norm: param_attr must be a dict of initial statistics "
                                f"('batch_size', 'batch_sum', 'batch_square', 'scale_w', "
                                f"'bias'), got {type(param_attr).__name__}")
    init = {"batch_size": 1e4, "batch_sum": 0.0, "batch_square": 1e4, "scale_w": 1.0,
            "bias": 0.0}
    init.update(param_attr or {})
    name = name or "dn"

    def param(suffix, value):
        return helper.create_parameter(
            ParamAttr(name=f"{name}.{suffix}", initializer=ConstantInitializer(float(value)),
                      trainable=True), [c], dtype)

    inputs = {"X": input}
    if enable_scale_and_shift:
        inputs["scale_w"] = param("scale_w", init["scale_w"])
        inputs["bias"] = param("bias", init["bias"])
    inputs["BatchSize"] = param("batch_size", init["batch_size"])
    inputs["BatchSum"] = param("batch_sum", init["batch_sum"])
    inputs["BatchSquareSum"] = param("batch_square_sum", init["batch_square"])
    means = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    scales = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    out = input if in_place else helper.create_variable_for_type_inference(dtype)
    helper.append_op("data_norm", inputs=inputs,
                     outputs={"Y": out, "Means": means, "Scales": scales},
                     attrs={"epsilon": float(epsilon), "slot_dim": int(slot_dim),
                            "sync_stats": bool(sync_stats),
                            "summary_decay_rate": float(summary_decay_rate),
                            "enable_scale_and_shift": bool(enable_scale_and_shift),
                            "data_layout": data_layout})
    return helper.append_activation(out, act)


def hash(input, hash_size, num_hash=1, name=None):
    """XXH64 each row of the 2-D int32/int64 `input` with seeds 0..num_hash-1, modulo
    hash_size: [N, num_hash, 1] of input's type (input's LoD kept)."""
    check_variables("hash", input=input)
    helper = LayerHelper("hash", input=input, name=name)
    out = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    helper.append_op("hash", inputs={"X": input}, outputs={"Out": out},
                     attrs={"num_hash": int(num_hash), "mod_by": int(hash_size)})
    return out


def filter_by_instag(ins, ins_tag, filter_tag, is_lod, out_val_if_empty=0):
    """Keep the instances of `ins` whose tags (the sequences of `ins_tag`) hold one of
    `filter_tag`; returns [out, loss_weight] (loss_weight 1 per kept instance, or one 0 row
    when none is kept)."""
    check_variables("filter_by_instag", ins=ins, ins_tag=ins_tag, filter_tag=filter_tag)
    helper = LayerHelper("filter_by_instag")
    out = helper.create_variable_for_type_inference(ins.dtype)
    loss_weight = helper.create_variable_for_type_inference("float32")
    mmap = helper.create_variable_for_type_inference(ins_tag.dtype)
    helper.append_op("filter_by_instag",
                     inputs={"Ins": ins, "Ins_tag": ins_tag, "Filter_tag": filter_tag},
                     outputs={"Out": out, "LossWeight": loss_weight, "IndexMap": mmap},
                     attrs={"is_lod": bool(is_lod), "out_val_if_empty": int(out_val_if_empty)})
    return [out, loss_weight]
