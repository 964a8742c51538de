"""Layers Fluid 1.8 added to fluid.layers.nn: unbind and inplace_abn. Ops in
fluidity/ops/nn_fluid18.py."""
import numbers

from ..errors import ShapeError
from ..framework import Variable
from ..layer_helper import LayerHelper
from .checks import check_dtype_of

__all__ = ["unbind", "inplace_abn"]


def unbind(input, axis=0):
    """The slices of `input` along `axis` (that dim removed), a list of Variables."""
    check_dtype_of("unbind", "input", input, ("float32", "float64", "int32", "int64"))
    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
        raise TypeError(f"The type of 'axis'  must be int, but received {type(axis)}.")
    axis = int(axis)
    rank = len(input.shape)
    if not -rank <= axis < rank:
        raise ValueError(f"unbind: axis {axis} is out of range for input of rank {rank}")
    n = input.shape[axis % rank]
    if n < 0:
        raise ShapeError(f"unbind: the size of dim {axis} of input {list(input.shape)} must be "
                         f"known (it is the number of outputs)")
    helper = LayerHelper("unbind")
    outs = [helper.create_variable_for_type_inference(input.dtype) for _ in range(n)]
    helper.append_op("unbind", inputs={"X": input}, outputs={"Out": outs},
                     attrs={"axis": axis})
    return outs


def inplace_abn(input, act=None, is_test=False, momentum=0.9, epsilon=1e-05, param_attr=None,
                bias_attr=None, data_layout="NCHW", name=None, moving_mean_name=None,
                moving_variance_name=None, do_model_average_for_mean_and_var=True,
                use_global_stats=False, act_alpha=1.0):
    """batch_norm followed by an invertible activation (None/identity, leaky_relu or elu with
    `act_alpha`), in one op whose gradient needs only its output. Fluid writes the result
    over `input`; Fluidity gives it a variable of its own (the values are the same, and
    `input` keeps its value for other readers)."""
    from ..initializer import ConstantInitializer
    from ..param_attr import ParamAttr
    if act not in (None, "identity", "leaky_relu", "elu"):
        raise ValueError("inplace_abn only support act as None, 'identity', 'leaky_relu', "
                         f"'elu' currently, got {act!r}")
    if bias_attr is False:
        raise ValueError("inplace_abn: bias_attr should not be False")
    check_dtype_of("inplace_abn", "input", input, ("float32", "float64"))
    if data_layout not in ("NCHW", "NHWC"):
        raise ValueError(f"unsupported data layout: {data_layout}")
    helper = LayerHelper("inplace_abn", name=name)
    dtype = input.dtype
    c = input.shape[1] if data_layout == "NCHW" else input.shape[-1]
    if c < 0:
        raise ShapeError(f"inplace_abn: the channel dim of input {list(input.shape)} must be "
                         f"known")
    scale = helper.create_parameter(param_attr, [c], dtype,
                                    default_initializer=ConstantInitializer(1.0))
    bias = helper.create_parameter(bias_attr, [c], dtype, is_bias=True)
    stats = []
    for stat_name, init in ((moving_mean_name, 0.0), (moving_variance_name, 1.0)):
        v = helper.create_parameter(
            ParamAttr(name=stat_name, initializer=ConstantInitializer(init), trainable=False,
                      do_model_average=do_model_average_for_mean_and_var), [c], dtype)
        v.stop_gradient = True
        stats.append(v)
    mean, variance = stats
    tmp = helper.create_variable_for_type_inference
    saved_mean, saved_variance = tmp(dtype, stop_gradient=True), tmp(dtype, stop_gradient=True)
    out = tmp(dtype)
    inputs = {"X": input, "Scale": scale, "Bias": bias, "Mean": mean, "Variance": variance}
    attrs = {"epsilon": float(epsilon), "is_test": bool(is_test), "data_layout": data_layout,
             "use_mkldnn": False, "fuse_with_relu": False,
             "use_global_stats": bool(use_global_stats), "activation": act or "identity",
             "alpha": float(act_alpha)}
    if isinstance(momentum, Variable):
        inputs["MomentumTensor"] = momentum
    else:
        attrs["momentum"] = float(momentum)
    helper.append_op("inplace_abn", inputs=inputs,
                     outputs={"Y": out, "MeanOut": mean, "VarianceOut": variance,
                              "SavedMean": saved_mean, "SavedVariance": saved_variance},
                     attrs=attrs)
    return out
