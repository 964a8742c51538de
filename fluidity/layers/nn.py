"""Neural-network layers: fc, embedding, mean, elementwise_*, matmul, ..."""
import numbers

from ..core import dtypes
from ..core.dtypes import VarType
from ..errors import ShapeError
from ..framework import Variable
from ..layer_helper import LayerHelper
from ..ops.math import ELEMENTWISE
from .checks import check_dtype_of, check_variables
from .manip import one_op_layer, tensor_array_to_tensor  # noqa: F401 (in nn's __all__)

__all__ = ["fc", "embedding", "mean", "mul", "matmul", "scale", "sum", "sums"] + list(ELEMENTWISE)


def fc(input, size, num_flatten_dims=1, param_attr=None, bias_attr=None, act=None,
       name=None, is_test=False):
    """out = act(sum_i flatten(input_i) @ W_i + b). Several inputs each get their own weight;
    `num_flatten_dims` says how many leading dims stay (the rest are flattened into one)."""
    helper = LayerHelper("fc", input=input, param_attr=param_attr, bias_attr=bias_attr,
                         act=act, name=name)
    inputs = input if isinstance(input, (list, tuple)) else [input]
    from ..param_attr import ParamAttr
    attrs = param_attr if isinstance(param_attr, (list, tuple)) else [param_attr] * len(inputs)
    dtype = inputs[0].dtype
    partials = []
    for x, attr in zip(inputs, attrs):
        shape = list(x.shape)
        if len(shape) <= num_flatten_dims:
            raise ShapeError(f"fc '{helper.name}': input '{x.name}' has shape {shape}; it needs "
                             f"more than num_flatten_dims={num_flatten_dims} dims")
        in_features = 1
        for d in shape[num_flatten_dims:]:
            if d < 0:
                raise ShapeError(f"fc '{helper.name}': input '{x.name}' has unknown dim in "
                                 f"{shape[num_flatten_dims:]} (only leading dims may be -1)")
            in_features *= d
        w = helper.create_parameter(attr, [in_features, size], dtype)
        out = helper.create_variable_for_type_inference(dtype)
        helper.append_op("mul", inputs={"X": x, "Y": w}, outputs={"Out": out},
                         attrs={"x_num_col_dims": num_flatten_dims, "y_num_col_dims": 1})
        partials.append(out)
    if len(partials) == 1:
        pre_bias = partials[0]
    else:
        pre_bias = helper.create_variable_for_type_inference(dtype)
        helper.append_op("sum", inputs={"X": partials}, outputs={"Out": pre_bias})
    pre_act = helper.append_bias_op(pre_bias, bias_attr, dim_start=num_flatten_dims)
    return helper.append_activation(pre_act, act)


def embedding(input, size, is_sparse=False, is_distributed=False, padding_idx=None,
              param_attr=None, dtype="float32", name=None):
    """Rows of a [vocab, dim] table for int64 ids of shape [..., 1] (op lookup_table);
    is_sparse=True makes its gradient a SelectedRows of the looked-up rows only."""
    return table_lookup("lookup_table", input, size, is_sparse, is_distributed, padding_idx,
                        param_attr, dtype, name)


def table_lookup(op_type, input, size, is_sparse, is_distributed, padding_idx, param_attr,
                 dtype, name=None):
    """The embedding layers' one build: a [vocab, dim] table parameter and the op
    `op_type` looking `input`'s ids up in it. `fluid.layers.embedding` (lookup_table: ids
    [..., 1], the last 1 replaced by dim) and `fluid.embedding` (lookup_table_v2: dim
    appended to ids of any shape) differ only in the op, whose shape rule that is. A
    negative `padding_idx` counts from the end of the vocabulary; None is -1 (no padding)."""
    layer = "fluid.layers.embedding" if op_type == "lookup_table" else "fluid.embedding"
    check_variables(layer, input=input)
    if dtypes.name(input.dtype) != "int64":
        raise TypeError(f"{layer}: input ({input.name}) must be int64 ids, got "
                        f"{dtypes.name(input.dtype)}")
    if dtypes.name(dtype) not in ("float16", "float32", "float64"):
        raise TypeError(f"{layer}: dtype must be float16, float32 or float64, got "
                        f"{dtypes.name(dtype)}")
    helper = LayerHelper("embedding", param_attr=param_attr, name=name)
    w = helper.create_parameter(param_attr, list(size), dtype)
    out = helper.create_variable_for_type_inference(dtype)
    pad = -1 if padding_idx is None else (padding_idx if padding_idx >= 0
                                          else size[0] + padding_idx)
    helper.append_op(op_type, inputs={"W": w, "Ids": input}, outputs={"Out": out},
                     attrs={"is_sparse": is_sparse, "is_distributed": is_distributed,
                            "padding_idx": pad})
    return out


def mean(x, name=None):
    return one_op_layer("mean", {"X": x}, name=name)


def sum(x, name=None):
    """Elementwise sum of a list of variables (op `sum`)."""
    xs = list(x) if isinstance(x, (list, tuple)) else [x]
    return one_op_layer("sum", {"X": xs}, name=name)


def sums(input, out=None):
    """The elementwise sum of the Variables in `input`, written to `out` if given."""
    xs = list(input) if isinstance(input, (list, tuple)) else [input]
    helper = LayerHelper("sum")
    if out is None:
        out = helper.create_variable_for_type_inference(xs[0].dtype)
    helper.append_op("sum", inputs={"X": xs}, outputs={"Out": out})
    return out


def mul(x, y, x_num_col_dims=1, y_num_col_dims=1, name=None):
    return one_op_layer("mul", {"X": x, "Y": y}, {"x_num_col_dims": x_num_col_dims,
                                                  "y_num_col_dims": y_num_col_dims}, name=name)


def matmul(x, y, transpose_x=False, transpose_y=False, alpha=1.0, name=None):
    """alpha * op(x) @ op(y); x and y float16/32/64 Variables (TypeError otherwise, as
    Fluid 1.8)."""
    check_variables("matmul", x=x, y=y)
    for arg, v in (("x", x), ("y", y)):
        if dtypes.name(v.dtype) not in ("float16", "float32", "float64"):
            raise TypeError(f"matmul: '{arg}' ({v.name}) must be float16, float32 or float64, "
                            f"got {dtypes.name(v.dtype)}")
    return one_op_layer("matmul", {"X": x, "Y": y}, {"transpose_X": transpose_x,
                                                     "transpose_Y": transpose_y,
                                                     "alpha": float(alpha)}, name=name)


def scale(x, scale=1.0, bias=0.0, bias_after_scale=True, act=None, name=None):
    helper = LayerHelper("scale", name=name, act=act)
    out = one_op_layer("scale", {"X": x}, {"scale": float(scale), "bias": float(bias),
                                           "bias_after_scale": bias_after_scale}, helper=helper)
    return helper.append_activation(out, act)


def _elementwise_layer(op_type):
    def layer(x, y, axis=-1, act=None, name=None):
        helper = LayerHelper(op_type, name=name, act=act)
        out = one_op_layer(op_type, {"X": x, "Y": y}, {"axis": axis}, helper=helper)
        return helper.append_activation(out, act)
    layer.__name__ = op_type
    layer.__doc__ = f"Out = {op_type}(x, y) with Paddle's axis broadcasting."
    return layer


for _t in ELEMENTWISE:
    globals()[_t] = _elementwise_layer(_t)


# --- convolution, pooling, normalization, dropout (ops in fluidity/ops/conv.py, norm.py, nn.py) ---
__all__ += ["conv2d", "pool2d", "batch_norm", "inplace_abn", "layer_norm", "dropout", "flatten"]


def int_list(v, n, what):
    """`v` as a list of n ints: an int repeated n times, or n ints (a ValueError naming
    `what` otherwise). The 2-D and 3-D conv/pool layers read their sizes so."""
    if isinstance(v, int):
        return [v] * n
    v = [int(d) for d in v]
    if len(v) != n:
        raise ValueError(f"{what} must be an int or {n} ints, got {v}")
    return v


def pair(v, what):
    return int_list(v, 2, what)


def triple(v, what):
    return int_list(v, 3, what)


def padding_attrs(padding, what, nd=2, data_format=None):
    """(paddings, padding_algorithm) of a conv/pool layer over `nd` spatial dims, as Fluid
    1.8 reads its `padding`: 'SAME' / 'VALID'; an int; nd ints; 2*nd ints (before, after per
    dim); or one [before, after] pair per dim of the input, batch and channel pairs zero.
    Symmetric before/after pairs fold to one value per dim, as Fluid writes them."""
    if isinstance(padding, str):
        algo = padding.upper()
        if algo not in ("SAME", "VALID"):
            raise ValueError(f"{what}: Unknown padding: '{padding}'. It can only be 'SAME' or "
                             f"'VALID'.")
        return [0] * nd, algo
    if isinstance(padding, numbers.Integral):
        return [int(padding)] * nd, "EXPLICIT"
    padding = list(padding)
    if len(padding) == nd + 2 and all(isinstance(p, (list, tuple)) for p in padding):
        last = data_format in ("NHWC", "NDHWC")
        outer = (0, nd + 1) if last else (0, 1)
        for i in outer:
            if [int(v) for v in padding[i]] != [0, 0]:
                raise ValueError(f"{what}: Non-zero padding({padding}) in the batch or channel "
                                 f"dimensions is not supported.")
        spatial = padding[1:nd + 1] if last else padding[2:]
        padding = [int(v) for pair_ in spatial for v in pair_]
    else:
        padding = [int(p) for p in padding]
    if len(padding) == 2 * nd and all(padding[2 * i] == padding[2 * i + 1] for i in range(nd)):
        padding = padding[::2]
    if len(padding) not in (nd, 2 * nd):
        raise ValueError(f"{what}: padding needs {nd} or {2 * nd} values, got {padding}")
    return padding, "EXPLICIT"


def conv2d(input, num_filters, filter_size, stride=1, padding=0, dilation=1, groups=None,
           param_attr=None, bias_attr=None, use_cudnn=True, act=None, name=None,
           data_format="NCHW"):
    """2-D convolution of an NCHW (or NHWC) input with `num_filters` filters of
    `filter_size`, plus a per-filter bias and `act`. Weights default to
    N(0, sqrt(2 / (kh * kw * C))) as in Fluid; groups == C (and use_cudnn=False) makes it a
    depthwise_conv2d."""
    helper = LayerHelper("conv2d", input=input, param_attr=param_attr, bias_attr=bias_attr,
                         act=act, name=name)
    if not isinstance(use_cudnn, bool):
        raise ValueError(f"Attr(use_cudnn) should be True or False. Received Attr(use_cudnn): "
                         f"{use_cudnn}.")
    if data_format not in ("NCHW", "NHWC"):
        raise ValueError(f"conv2d: data_format must be 'NCHW' or 'NHWC', got {data_format!r}")
    channel_last = data_format == "NHWC"
    if len(input.shape) != 4:
        raise ShapeError(f"conv2d '{helper.name}': input '{input.name}' must be 4-D, got "
                         f"{list(input.shape)}")
    num_channels = input.shape[3 if channel_last else 1]
    if num_channels < 0:
        raise ShapeError(f"conv2d '{helper.name}': the channel dim of input '{input.name}' "
                         f"{list(input.shape)} must be known")
    groups = 1 if groups is None else int(groups)
    if num_channels % groups:
        raise ShapeError(f"conv2d '{helper.name}': {num_channels} input channels are not "
                         f"divisible by groups={groups}")
    op_type = "conv2d"
    if num_channels == groups and num_filters % num_channels == 0 and not use_cudnn:
        op_type = "depthwise_conv2d"
    filter_size = pair(filter_size, "filter_size")
    paddings, algo = padding_attrs(padding, "conv2d", 2, data_format)
    filter_shape = [num_filters, num_channels // groups] + filter_size
    from ..initializer import NormalInitializer
    std = (2.0 / (filter_size[0] * filter_size[1] * num_channels)) ** 0.5
    w = helper.create_parameter(param_attr, filter_shape, input.dtype,
                                default_initializer=NormalInitializer(0.0, std))
    pre_bias = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op(op_type, inputs={"Input": input, "Filter": w}, outputs={"Output": pre_bias},
                     attrs={"strides": pair(stride, "stride"), "paddings": paddings,
                            "dilations": pair(dilation, "dilation"), "groups": groups,
                            "use_cudnn": use_cudnn, "use_mkldnn": False,
                            "fuse_relu_before_depthwise_conv": False,
                            "padding_algorithm": algo, "data_format": data_format})
    c_axis = 3 if channel_last else 1
    pre_act = helper.append_bias_op(pre_bias, bias_attr, dim_start=c_axis, dim_end=c_axis + 1)
    return helper.append_activation(pre_act, act)


def pool2d(input, pool_size=-1, pool_type="max", pool_stride=1, pool_padding=0,
           global_pooling=False, use_cudnn=True, ceil_mode=False, name=None, exclusive=True,
           data_format="NCHW"):
    """Max or average pooling (op pool2d); `exclusive` averages over the unpadded elements."""
    if pool_type not in ("max", "avg"):
        raise ValueError(f"pool2d: pool_type must be 'max' or 'avg', got {pool_type!r}")
    if not isinstance(use_cudnn, bool):
        raise TypeError(f"Attr(use_cudnn) should be True or False. Received Attr(use_cudnn): "
                        f"{use_cudnn}.")
    if not global_pooling and pool_size == -1:
        raise ValueError("pool2d: give pool_size, or global_pooling=True")
    if data_format not in ("NCHW", "NHWC"):
        raise ValueError(f"Attr(data_format) of Op(fluid.layers.pool2d) should be 'NCHW' or "
                         f"'NHWC'. Received Attr(data_format): {data_format}.")
    paddings, algo = padding_attrs(pool_padding, "pool2d", 2, data_format)
    if algo == "VALID" and ceil_mode:
        raise ValueError("pool2d: ceil_mode must be False with padding 'VALID'")
    helper = LayerHelper("pool2d", name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("pool2d", inputs={"X": input}, outputs={"Out": out},
                     attrs={"pooling_type": pool_type,
                            "ksize": [1, 1] if pool_size == -1 else pair(pool_size, "pool_size"),
                            "global_pooling": global_pooling,
                            "strides": pair(pool_stride, "pool_stride"), "paddings": paddings,
                            "padding_algorithm": algo, "use_cudnn": use_cudnn,
                            "ceil_mode": ceil_mode, "use_mkldnn": False,
                            "exclusive": exclusive, "data_format": data_format})
    return out


def _batch_norm_parameters(helper, c, dtype, param_attr, bias_attr, moving_mean_name,
                           moving_variance_name, do_model_average):
    """The parameters of batch_norm and inplace_abn over `c` channels, in Fluid's order (so
    in Fluid's names): Scale (1), Bias (0), and the persistable, non-trainable moving mean (0)
    and variance (1) that the op updates in place while training and uses when is_test."""
    from ..initializer import ConstantInitializer
    from ..param_attr import ParamAttr
    scale = helper.create_parameter(param_attr, [c], dtype,
                                    default_initializer=ConstantInitializer(1.0))
    bias = helper.create_parameter(bias_attr, [c], dtype, is_bias=True)
    stats = []
    for stat_name, init in ((moving_mean_name, 0.0), (moving_variance_name, 1.0)):
        v = helper.create_parameter(
            ParamAttr(name=stat_name, initializer=ConstantInitializer(init), trainable=False,
                      do_model_average=do_model_average), [c], dtype)
        v.stop_gradient = True
        stats.append(v)
    return (scale, bias, *stats)


def batch_norm(input, act=None, is_test=False, momentum=0.9, epsilon=1e-05, param_attr=None,
               bias_attr=None, data_layout="NCHW", in_place=False, name=None,
               moving_mean_name=None, moving_variance_name=None,
               do_model_average_for_mean_and_var=True, fuse_with_relu=False,
               use_global_stats=False):
    """Batch normalization over the channel dim (1 for NCHW, last for NHWC). Creates Scale (1)
    and Bias (0) parameters and the persistable, non-trainable moving mean (0) and variance
    (1), which the op updates in place while training and uses when is_test."""
    helper = LayerHelper("batch_norm", input=input, param_attr=param_attr,
                         bias_attr=bias_attr, act=act, name=name)
    dtype = input.dtype
    shape = list(input.shape)
    c = shape[-1] if data_layout == "NHWC" else shape[1]
    if c < 0:
        raise ShapeError(f"batch_norm '{helper.name}': the channel dim of input "
                         f"'{input.name}' {shape} must be known")
    scale, bias, mean, variance = _batch_norm_parameters(
        helper, c, dtype, param_attr, bias_attr, moving_mean_name, moving_variance_name,
        do_model_average_for_mean_and_var)
    saved_mean = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    saved_variance = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    out = input if in_place else helper.create_variable_for_type_inference(dtype)
    helper.append_op("batch_norm",
                     inputs={"X": input, "Scale": scale, "Bias": bias, "Mean": mean,
                             "Variance": variance},
                     outputs={"Y": out, "MeanOut": mean, "VarianceOut": variance,
                              "SavedMean": saved_mean, "SavedVariance": saved_variance},
                     attrs={"momentum": float(momentum), "epsilon": float(epsilon),
                            "is_test": is_test, "data_layout": data_layout,
                            "use_mkldnn": False, "fuse_with_relu": bool(fuse_with_relu),
                            "use_global_stats": use_global_stats})
    return helper.append_activation(out, act)


def inplace_abn(input, act=None, is_test=False, momentum=0.9, epsilon=1e-05, param_attr=None,
                bias_attr=None, data_layout="NCHW", name=None, moving_mean_name=None,
                moving_variance_name=None, do_model_average_for_mean_and_var=True,
                use_global_stats=False, act_alpha=1.0):
    """batch_norm followed by an invertible activation (None/identity, leaky_relu or elu with
    `act_alpha`), in one op whose gradient needs only its output. Fluid writes the result
    over `input`; Fluidity gives it a variable of its own (the values are the same, and
    `input` keeps its value for other readers)."""
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
    scale, bias, mean, variance = _batch_norm_parameters(
        helper, c, dtype, param_attr, bias_attr, moving_mean_name, moving_variance_name,
        do_model_average_for_mean_and_var)
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


def layer_norm(input, scale=True, shift=True, begin_norm_axis=1, epsilon=1e-05,
               param_attr=None, bias_attr=None, act=None, name=None):
    """Normalize over the dims from begin_norm_axis on, then a learned per-element scale (1)
    and shift (0) of shape [prod(input.shape[begin_norm_axis:])]."""
    from ..initializer import ConstantInitializer
    helper = LayerHelper("layer_norm", input=input, param_attr=param_attr,
                         bias_attr=bias_attr, act=act, name=name)
    dtype = input.dtype
    norm_dims = list(input.shape[begin_norm_axis:])
    if not norm_dims or any(d < 0 for d in norm_dims):
        raise ShapeError(f"layer_norm '{helper.name}': input '{input.name}' "
                         f"{list(input.shape)} needs known dims from begin_norm_axis="
                         f"{begin_norm_axis} on")
    size = 1
    for d in norm_dims:
        size *= d
    inputs = {"X": input}
    if scale:
        inputs["Scale"] = helper.create_parameter(param_attr, [size], dtype,
                                                  default_initializer=ConstantInitializer(1.0))
    if shift:
        inputs["Bias"] = helper.create_parameter(bias_attr, [size], dtype, is_bias=True)
    mean = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    variance = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    out = helper.create_variable_for_type_inference(dtype)
    helper.append_op("layer_norm", inputs=inputs,
                     outputs={"Y": out, "Mean": mean, "Variance": variance},
                     attrs={"epsilon": float(epsilon), "begin_norm_axis": begin_norm_axis})
    return helper.append_activation(out, act)


def dropout(x, dropout_prob, is_test=False, seed=None, name=None,
            dropout_implementation="downgrade_in_infer"):
    """Zero each element with probability dropout_prob while training (scaling per
    `dropout_implementation`). A seed (or the program's random_seed) fixes the mask."""
    helper = LayerHelper("dropout", name=name)
    if (seed is None or seed == 0) and helper.main_program.random_seed != 0:
        seed = helper.main_program.random_seed
    out = helper.create_variable_for_type_inference(x.dtype)
    mask = helper.create_variable_for_type_inference("uint8", stop_gradient=True)
    helper.append_op("dropout", inputs={"X": x}, outputs={"Out": out, "Mask": mask},
                     attrs={"dropout_prob": float(dropout_prob), "is_test": is_test,
                            "fix_seed": seed is not None,
                            "seed": int(seed) if seed is not None else 0,
                            "dropout_implementation": dropout_implementation})
    return out


def flatten(x, axis=1, name=None):
    """x as a matrix [prod(x.shape[:axis]), prod(x.shape[axis:])] (op flatten2)."""
    if not 0 <= axis <= len(x.shape):
        raise ValueError(f"flatten: axis must be in [0, {len(x.shape)}], got {axis}")
    helper = LayerHelper("flatten2", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    x_shape = helper.create_variable_for_type_inference(x.dtype, stop_gradient=True)
    helper.append_op("flatten2", inputs={"X": x}, outputs={"Out": out, "XShape": x_shape},
                     attrs={"axis": axis})
    return out


# --- label_smooth, cos_sim, l2_normalize (ops in fluidity/ops/soft_label.py, vector_norm.py) ---
__all__ += ["label_smooth", "cos_sim", "l2_normalize"]


def label_smooth(label, prior_dist=None, epsilon=0.1, dtype="float32", name=None):
    """(1 - epsilon) * label + epsilon * prior_dist (uniform over the classes by default),
    for one-hot `label` [..., C]."""
    check_variables("label_smooth", label=label)
    if not 0.0 <= epsilon <= 1.0:
        raise ValueError(f"label_smooth: 'epsilon' must be in [0, 1], got {epsilon}")
    inputs = {"X": label}
    if prior_dist is not None:
        inputs["PriorDist"] = prior_dist
    return one_op_layer("label_smooth", inputs, {"epsilon": float(epsilon)}, dtype=dtype,
                        name=name)


def cos_sim(X, Y):
    """Cosine similarity of the rows of X [N, D] and Y [N, D] (or [1, D]); returns [N, 1]."""
    check_variables("cos_sim", X=X, Y=Y)
    helper = LayerHelper("cos_sim")
    out = helper.create_variable_for_type_inference(X.dtype)
    xn = helper.create_variable_for_type_inference(X.dtype, stop_gradient=True)
    yn = helper.create_variable_for_type_inference(X.dtype, stop_gradient=True)
    helper.append_op("cos_sim", inputs={"X": X, "Y": Y},
                     outputs={"Out": out, "XNorm": xn, "YNorm": yn})
    return out


def l2_normalize(x, axis, epsilon=1e-12, name=None):
    """x / sqrt(sum(x^2 along axis) + epsilon) (op norm); a 1-D x is normalized whole."""
    check_variables("l2_normalize", x=x)
    if len(x.shape) == 1:
        axis = 0
    helper = LayerHelper("l2_normalize", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    norm = helper.create_variable_for_type_inference(x.dtype, stop_gradient=True)
    helper.append_op("norm", inputs={"X": x}, outputs={"Out": out, "Norm": norm},
                     attrs={"axis": 1 if axis is None else int(axis),
                            "epsilon": float(epsilon)})
    return out


# --- multiplex, bilinear_tensor_product, add_position_encoding, fsp_matrix,
# continuous_value_model, mean_iou, affine_grid, random_crop, tensor_array_to_tensor
# (ops in fluidity/ops/indexing.py, bilinear_products.py, sequence_context.py, ctr.py,
# metric.py, image_geometry.py, tensor_array.py) ------------------------------------------------
__all__ += ["multiplex", "bilinear_tensor_product", "add_position_encoding", "fsp_matrix",
            "continuous_value_model", "mean_iou", "affine_grid", "random_crop",
            "tensor_array_to_tensor"]


def multiplex(inputs, index):
    """Row i of the result is row i of inputs[index[i]] (index: int32 [N, 1])."""
    if not isinstance(inputs, (list, tuple)) or len(inputs) < 2:
        raise ValueError("multiplex: inputs must be a list of at least 2 Variables")
    check_variables("multiplex", index=index, **{f"inputs[{i}]": v for i, v in enumerate(inputs)})
    return one_op_layer("multiplex", {"Ids": index, "X": list(inputs)}, dtype=inputs[0].dtype)


def bilinear_tensor_product(x, y, size, act=None, name=None, param_attr=None,
                            bias_attr=None):
    """out[:, k] = x @ W[k] @ y^T + b[k] for a learned W [size, M, N] and bias [1, size]."""
    check_variables("bilinear_tensor_product", x=x, y=y)
    helper = LayerHelper("bilinear_tensor_product", param_attr=param_attr,
                         bias_attr=bias_attr, act=act, name=name)
    w = helper.create_parameter(param_attr, [size, x.shape[1], y.shape[1]], x.dtype)
    inputs = {"X": x, "Y": y, "Weight": w}
    if bias_attr is not False:
        inputs["Bias"] = helper.create_parameter(bias_attr, [1, size], x.dtype, is_bias=True)
    out = one_op_layer("bilinear_tensor_product", inputs, helper=helper)
    return helper.append_activation(out, act)


def add_position_encoding(input, alpha, beta, name=None):
    """alpha * input + beta * the sinusoid position encoding, for input [B, T, D]."""
    check_variables("add_position_encoding", input=input)
    return one_op_layer("add_position_encoding", {"X": input},
                        {"alpha": float(alpha), "beta": float(beta)}, name=name)


def fsp_matrix(x, y):
    """The FSP matrix [B, C1, C2] of feature maps x [B, C1, H, W] and y [B, C2, H, W]."""
    check_variables("fsp_matrix", x=x, y=y)
    return one_op_layer("fsp", {"X": x, "Y": y})


def continuous_value_model(input, cvm, use_cvm=True):
    """CTR show/click columns of `input` turned into log features (use_cvm) or dropped."""
    check_variables("continuous_value_model", input=input, cvm=cvm)
    helper = LayerHelper("cvm")
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("cvm", inputs={"X": input, "CVM": cvm}, outputs={"Y": out},
                     attrs={"use_cvm": bool(use_cvm)})
    return out


def mean_iou(input, label, num_classes):
    """(mean IoU [1], wrong [C] int32, correct [C] int32) of predicted vs true class ids."""
    check_variables("mean_iou", input=input, label=label)
    helper = LayerHelper("mean_iou")
    iou = helper.create_variable_for_type_inference("float32", stop_gradient=True)
    wrong = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    correct = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    helper.append_op("mean_iou", inputs={"Predictions": input, "Labels": label},
                     outputs={"OutMeanIou": iou, "OutWrong": wrong, "OutCorrect": correct},
                     attrs={"num_classes": int(num_classes)})
    return iou, wrong, correct


def affine_grid(theta, out_shape, name=None):
    """The [N, H, W, 2] sampling grid of affine transforms theta [N, 2, 3] for out_shape
    [N, C, H, W] (a list or an int Variable)."""
    from ..framework import Variable
    check_variables("affine_grid", theta=theta)
    inputs, attrs = {"Theta": theta}, {}
    if isinstance(out_shape, Variable):
        inputs["OutputShape"] = out_shape
    elif isinstance(out_shape, (list, tuple)) and len(out_shape) == 4:
        attrs["output_shape"] = [int(d) for d in out_shape]
    else:
        raise TypeError(f"affine_grid: out_shape must be a list of 4 ints or a Variable, got "
                        f"{out_shape!r}")
    helper = LayerHelper("affine_grid", name=name)
    out = helper.create_variable_for_type_inference(theta.dtype)
    helper.append_op("affine_grid", inputs=inputs, outputs={"Output": out}, attrs=attrs)
    return out


def random_crop(x, shape, seed=None):
    """A random crop of `shape` (the trailing dims) of each instance of x; seed: an int, an
    int64 Variable, or None for a random one."""
    import numpy as np
    from ..framework import Variable
    check_variables("random_crop", x=x)
    helper = LayerHelper("random_crop")
    out = helper.create_variable_for_type_inference(x.dtype)
    seed_out = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    inputs, startup = {"X": x}, 0
    if isinstance(seed, Variable):
        inputs["Seed"] = seed
    else:
        startup = int(np.random.randint(1, 2 ** 31)) if seed is None else int(seed)
    helper.append_op("random_crop", inputs=inputs, outputs={"Out": out, "SeedOut": seed_out},
                     attrs={"shape": [int(d) for d in shape], "startup_seed": startup})
    return out


# --- py_func (op in fluidity/ops/py_func.py) ---------------------------------------------------
__all__ += ["py_func"]


def py_func(func, x, out, backward_func=None, skip_vars_in_backward_input=None):
    """Run the Python function `func` on the LoDTensors of `x` (a Variable or a list) and
    write what it returns into `out` (Variables the caller created with their shapes and
    dtypes, or None). `backward_func`, if given, gets the non-skipped inputs, outputs and
    output gradients and returns the inputs' gradients."""
    from ..framework import Variable
    from ..ops.py_func import register_callable
    if not callable(func):
        raise TypeError(f"py_func: 'func' must be callable, got {type(func).__name__}")
    if backward_func is not None and not callable(backward_func):
        raise TypeError("py_func: 'backward_func' must be callable")
    xs = [] if x is None else list(x) if isinstance(x, (list, tuple)) else [x]
    outs = [] if out is None else list(out) if isinstance(out, (list, tuple)) else [out]
    for v in xs + outs:
        if not isinstance(v, Variable):
            raise TypeError(f"py_func: x and out must be Variables, got {type(v).__name__}")
    skip = skip_vars_in_backward_input or []
    skip = [skip] if isinstance(skip, Variable) else list(skip)
    names = {v.name for v in xs + outs}
    for v in skip:
        if v.name not in names:
            raise ValueError(f"py_func: skip_vars_in_backward_input '{v.name}' is neither in "
                             f"x nor in out")
    helper = LayerHelper("py_func")
    helper.append_op("py_func", inputs={"X": xs}, outputs={"Out": outs},
                     attrs={"forward_callable_id": register_callable(func),
                            "backward_callable_id": register_callable(backward_func)
                            if backward_func is not None else -1,
                            "backward_skip_vars": [v.name for v in skip]})
    return out


# --- grid_sampler, spectral_norm (ops in fluidity/ops/image_geometry.py, spectral_norm.py) -----
__all__ += ["grid_sampler", "spectral_norm"]


def grid_sampler(x, grid, name=None):
    """Bilinear samples of x [N, C, H, W] at grid [N, H', W', 2] ((x, y) in [-1, 1])."""
    check_variables("grid_sampler", x=x, grid=grid)
    helper = LayerHelper("grid_sampler", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("grid_sampler", inputs={"X": x, "Grid": grid}, outputs={"Output": out})
    return out


def spectral_norm(weight, dim=0, power_iters=1, eps=1e-12, name=None):
    """weight / its largest singular value (weight as a matrix with `dim` first), estimated
    by power iteration from fixed random vectors u, v (non-trainable parameters)."""
    from ..initializer import NormalInitializer
    from ..param_attr import ParamAttr
    check_variables("spectral_norm", weight=weight)
    shape = list(weight.shape)
    if not -len(shape) <= dim < len(shape) or any(d < 0 for d in shape):
        raise ValueError(f"spectral_norm: dim {dim} must index the known shape {shape}")
    dim %= len(shape)
    h = shape[dim]
    w = 1
    for i, d in enumerate(shape):
        if i != dim:
            w *= d
    helper = LayerHelper("spectral_norm", name=name)
    u, v = (helper.create_parameter(ParamAttr(trainable=False), [n], weight.dtype,
                                    default_initializer=NormalInitializer(0.0, 1.0))
            for n in (h, w))
    u.stop_gradient = v.stop_gradient = True
    out = helper.create_variable_for_type_inference(weight.dtype)
    helper.append_op("spectral_norm", inputs={"Weight": weight, "U": u, "V": v},
                     outputs={"Out": out},
                     attrs={"dim": dim, "power_iters": int(power_iters), "eps": float(eps)})
    return out


# --- row_conv, im2sequence (ops in fluidity/ops/sequence_context.py, image_geometry.py) -------
__all__ += ["row_conv", "im2sequence"]


def row_conv(input, future_context_size, param_attr=None, act=None):
    """Lookahead convolution over each sequence of `input` (LoD [T, D], or padded
    [B, T, D]) with a learned filter [future_context_size + 1, D]."""
    check_variables("row_conv", input=input)
    if not isinstance(future_context_size, int) or future_context_size < 0:
        raise ValueError(f"row_conv: future_context_size must be an int >= 0, got "
                         f"{future_context_size!r}")
    helper = LayerHelper("row_conv", param_attr=param_attr, act=act)
    w = helper.create_parameter(param_attr, [future_context_size + 1, input.shape[-1]],
                                input.dtype)
    out = one_op_layer("row_conv", {"X": input, "Filter": w}, helper=helper)
    return helper.append_activation(out, act)


def im2sequence(input, filter_size=1, stride=1, padding=0, input_image_size=None,
                out_stride=1, name=None):
    """The filter_size patches of each image of `input` [N, C, H, W] as the rows of one
    sequence per image (a LoD tensor [N * L, C * kh * kw]); padding an int, [h, w] or
    [up, left, down, right]. With `input_image_size` [N, 2] (each image's real height and
    width; a batch of several), image i gives only the patches covering its real size
    divided by `out_stride`."""
    check_variables("im2sequence", input=input)
    padding = [padding] * 4 if isinstance(padding, int) else [int(p) for p in padding]
    if len(padding) == 2:
        padding = padding * 2
    if len(padding) != 4:
        raise ValueError(f"im2sequence: padding needs 1, 2 or 4 values, got {padding}")
    inputs = {"X": input}
    attrs = {"kernels": pair(filter_size, "filter_size"), "strides": pair(stride, "stride"),
             "paddings": padding}
    if input_image_size is not None:
        check_variables("im2sequence", input_image_size=input_image_size)
        inputs["Y"] = input_image_size
        attrs["out_stride"] = pair(out_stride, "out_stride")
    helper = LayerHelper("im2sequence", name=name)
    out = helper.create_variable_for_type_inference(input.dtype, lod_level=1)
    helper.append_op("im2sequence", inputs=inputs, outputs={"Out": out}, attrs=attrs)
    return out
