"""`fluid.dygraph.nn`: Fluid 1.8's Layer classes (Linear, Conv2D, BatchNorm, Embedding, ...)
as they work in a static program: the constructor creates the parameters Fluid 1.8 creates
(shapes, default initializers, names), and a call appends the ops Fluid 1.8 appends (op types,
slots, attributes), after Fluid's argument checks (TypeError for a non-Variable input or a
dtype the layer refuses). layers.py says why a Layer builds static ops."""
import numbers

import numpy as np

from .. import framework
from ..core.dtypes import VarType
from ..framework import Variable, check_type, check_variable_and_dtype
from ..initializer import Constant, Normal, NumpyArrayInitializer
from ..layers.utils import convert_to_list
from ..param_attr import ParamAttr
from ..ops.sampled import alias_tables
from .layers import Layer

__all__ = ["Conv2D", "Conv3D", "Pool2D", "Linear", "BatchNorm", "Dropout", "Embedding",
           "GRUUnit", "InstanceNorm", "LayerNorm", "NCE", "PRelu", "BilinearTensorProduct",
           "Conv2DTranspose", "Conv3DTranspose", "GroupNorm", "SpectralNorm", "TreeConv"]

_FLOATS = ["float16", "float32", "float64"]


class _BiasAct(Layer):
    """What most layers end with: `out + bias` along `axis` (when there is a bias), then the
    activation, as Fluid 1.8 appends them (elementwise_add, then the act op)."""

    def _bias_act(self, pre_bias, axis=1, bias=True):
        pre_act = pre_bias
        if bias and getattr(self, "bias", None) is not None:
            pre_act = self._helper.create_variable_for_type_inference(dtype=self._dtype)
            self._helper.append_op(type="elementwise_add",
                                   inputs={"X": [pre_bias], "Y": [self.bias]},
                                   outputs={"Out": [pre_act]}, attrs={"axis": axis})
        return self._helper.append_activation(pre_act, act=self._act)

    def _tmp(self, dtype=None, stop_gradient=False):
        return self._helper.create_variable_for_type_inference(
            dtype=dtype if dtype is not None else self._dtype, stop_gradient=stop_gradient)


def _check_cudnn(use_cudnn):
    if not isinstance(use_cudnn, bool):
        raise ValueError("use_cudnn should be True or False")


class _ConvNd(_BiasAct):
    """Conv2D / Conv3D: filter [num_filters, C/groups, *k], He-normal by default."""
    _N, _OP = 2, "conv2d"

    def __init__(self, num_channels, num_filters, filter_size, stride=1, padding=0,
                 dilation=1, groups=None, param_attr=None, bias_attr=None, use_cudnn=True,
                 act=None, dtype="float32"):
        assert param_attr is not False, "param_attr should not be False here."
        super().__init__()
        _check_cudnn(use_cudnn)
        n = self._N
        self._num_channels, self._groups, self._act, self._dtype = \
            num_channels, groups, act, dtype
        self._stride = convert_to_list(stride, n, "stride")
        self._padding = convert_to_list(padding, n, "padding")
        self._dilation = convert_to_list(dilation, n, "dilation")
        self._use_cudnn, self._num_filters = use_cudnn, num_filters
        self._l_type = self._OP
        if n == 2 and num_channels == groups and num_filters % num_channels == 0 \
                and not use_cudnn:
            self._l_type = "depthwise_conv2d"
        if groups is not None and num_channels % groups:
            raise ValueError("num_channels must be divisible by groups.")
        k = convert_to_list(filter_size, n, "filter_size")
        std = (2.0 / (int(np.prod(k)) * num_channels)) ** 0.5
        self.weight = self.create_parameter(
            attr=param_attr, shape=[num_filters, num_channels // (groups or 1)] + k,
            dtype=dtype, default_initializer=Normal(0.0, std, 0))
        self.bias = self.create_parameter(attr=bias_attr, shape=[num_filters], dtype=dtype,
                                          is_bias=True)

    def forward(self, input):
        check_variable_and_dtype(input, "input", _FLOATS, type(self).__name__)
        pre_bias = self._tmp()
        self._helper.append_op(
            type=self._l_type, inputs={"Input": input, "Filter": self.weight},
            outputs={"Output": pre_bias},
            attrs={"strides": self._stride, "paddings": self._padding,
                   "dilations": self._dilation, "groups": self._groups or 1,
                   "use_cudnn": self._use_cudnn, "use_mkldnn": False})
        return self._bias_act(pre_bias)


class Conv2D(_ConvNd):
    _N, _OP = 2, "conv2d"


class Conv3D(_ConvNd):
    _N, _OP = 3, "conv3d"


class _ConvTransposeNd(_BiasAct):
    """Conv2DTranspose / Conv3DTranspose: filter [C, num_filters/groups, *k]."""
    _N, _OP = 2, "conv2d_transpose"

    def __init__(self, num_channels, num_filters, filter_size, output_size=None, padding=0,
                 stride=1, dilation=1, groups=None, param_attr=None, bias_attr=None,
                 use_cudnn=True, act=None, dtype="float32"):
        assert param_attr is not False, f"param_attr should not be False in {self._OP}."
        super().__init__()
        _check_cudnn(use_cudnn)
        n = self._N
        self._act, self._dtype, self._use_cudnn = act, dtype, use_cudnn
        self._groups = 1 if groups is None else groups
        self._padding = convert_to_list(padding, n, "padding")
        self._stride = convert_to_list(stride, n, "stride")
        self._dilation = convert_to_list(dilation, n, "dilation")
        if output_size is None:
            self._output_size = []
        elif isinstance(output_size, (list, int)):
            self._output_size = convert_to_list(output_size, n, "output_size")
        else:
            raise ValueError("output_size should be list or int")
        k = convert_to_list(filter_size, n, f"{self._OP}.filter_size")
        self.weight = self.create_parameter(
            attr=param_attr, shape=[num_channels, num_filters // self._groups] + k, dtype=dtype)
        self.bias = self.create_parameter(attr=bias_attr, shape=[num_filters], dtype=dtype,
                                          is_bias=True)

    def forward(self, input):
        check_variable_and_dtype(input, "input", _FLOATS, type(self).__name__)
        pre_bias = self._tmp(input.dtype)
        attrs = {"strides": self._stride, "paddings": self._padding,
                 "dilations": self._dilation, "groups": self._groups,
                 "use_cudnn": self._use_cudnn}
        if self._N == 2:
            attrs["output_size"] = self._output_size
        self._helper.append_op(type=self._OP,
                               inputs={"Input": [input], "Filter": [self.weight]},
                               outputs={"Output": pre_bias}, attrs=attrs)
        return self._bias_act(pre_bias)


class Conv2DTranspose(_ConvTransposeNd):
    _N, _OP = 2, "conv2d_transpose"


class Conv3DTranspose(_ConvTransposeNd):
    _N, _OP = 3, "conv3d_transpose"

    def __init__(self, num_channels, num_filters, filter_size, padding=0, stride=1,
                 dilation=1, groups=None, param_attr=None, bias_attr=None, use_cudnn=True,
                 act=None, dtype="float32"):
        # Fluid 1.8's Conv3DTranspose has no output_size
        super().__init__(num_channels, num_filters, filter_size, None, padding, stride,
                         dilation, groups, param_attr, bias_attr, use_cudnn, act, dtype)


class Pool2D(Layer):
    def __init__(self, pool_size=-1, pool_type="max", pool_stride=1, pool_padding=0,
                 global_pooling=False, use_cudnn=True, ceil_mode=False, exclusive=True):
        if pool_type not in ("max", "avg"):
            raise ValueError(f"Unknown pool_type: '{pool_type}'. It can only be 'max' or "
                             f"'avg'.")
        if global_pooling is False and pool_size == -1:
            raise ValueError("When the global_pooling is False, pool_size must be passed and "
                             f"be a valid value. Received pool_size: {pool_size}")
        _check_cudnn(use_cudnn)
        super().__init__()
        self._attrs = {
            "pooling_type": pool_type, "ksize": convert_to_list(pool_size, 2, "pool_size"),
            "global_pooling": global_pooling,
            "strides": convert_to_list(pool_stride, 2, "pool_stride"),
            "paddings": convert_to_list(pool_padding, 2, "pool_padding"),
            "use_cudnn": use_cudnn, "ceil_mode": ceil_mode, "use_mkldnn": False,
            "exclusive": exclusive}

    def forward(self, input):
        check_variable_and_dtype(input, "input", ["int8", "uint8"] + _FLOATS, "Pool2D")
        out = self._helper.create_variable_for_type_inference(self._dtype)
        self._helper.append_op(type="pool2d", inputs={"X": input}, outputs={"Out": out},
                               attrs=dict(self._attrs))
        return out


class Linear(_BiasAct):
    """out = act(input . weight + bias), weight [input_dim, output_dim] (matmul over the
    last dimension of an input of any rank)."""

    def __init__(self, input_dim, output_dim, param_attr=None, bias_attr=None, act=None,
                 dtype="float32"):
        super().__init__()
        self._act, self._dtype = act, dtype
        self.weight = self.create_parameter(shape=[input_dim, output_dim], attr=param_attr,
                                            dtype=dtype, is_bias=False)
        self.bias = self.create_parameter(shape=[output_dim], attr=bias_attr, dtype=dtype,
                                          is_bias=True)

    def forward(self, input):
        check_variable_and_dtype(input, "input", _FLOATS, "Linear")
        tmp = self._tmp()
        self._helper.append_op(type="matmul", inputs={"X": [input], "Y": [self.weight]},
                               outputs={"Out": tmp},
                               attrs={"transpose_X": False, "transpose_Y": False, "alpha": 1})
        return self._bias_act(tmp, axis=len(input.shape) - 1)


class InstanceNorm(Layer):
    def __init__(self, num_channels, epsilon=1e-05, param_attr=None, bias_attr=None,
                 dtype="float32"):
        super().__init__()
        assert bias_attr is not False, "bias_attr should not be False in InstanceNorm."
        self._epsilon, self._dtype = epsilon, dtype
        self.scale = self.create_parameter(attr=param_attr, shape=[num_channels], dtype=dtype,
                                           default_initializer=Constant(1.0), is_bias=False)
        self.bias = self.create_parameter(attr=bias_attr, shape=[num_channels], dtype=dtype,
                                          default_initializer=Constant(0.0), is_bias=True)

    def forward(self, input):
        check_variable_and_dtype(input, "input", ["float32", "float64"], "InstanceNorm")
        h = self._helper
        y = h.create_variable_for_type_inference(self._dtype)
        h.append_op(type="instance_norm",
                    inputs={"X": [input], "Scale": [self.scale], "Bias": [self.bias]},
                    outputs={"Y": [y],
                             "SavedMean": [h.create_variable_for_type_inference(
                                 self._dtype, stop_gradient=True)],
                             "SavedVariance": [h.create_variable_for_type_inference(
                                 self._dtype, stop_gradient=True)]},
                    attrs={"epsilon": self._epsilon})
        return y


class BatchNorm(_BiasAct):
    def __init__(self, num_channels, act=None, is_test=False, momentum=0.9, epsilon=1e-05,
                 param_attr=None, bias_attr=None, dtype="float32", data_layout="NCHW",
                 in_place=False, moving_mean_name=None, moving_variance_name=None,
                 do_model_average_for_mean_and_var=True, use_global_stats=False,
                 trainable_statistics=False):
        super().__init__()
        assert bias_attr is not False, "bias_attr should not be False in batch_norm."
        self._act = act
        self._dtype = "float32" if dtype == "float16" else dtype
        shape = [num_channels]
        frozen = use_global_stats and ParamAttr.to_attr(param_attr).learning_rate == 0.0
        self.weight = self.create_parameter(attr=param_attr, shape=shape, dtype=self._dtype,
                                            default_initializer=Constant(1.0))
        self.weight.stop_gradient = frozen
        self.bias = self.create_parameter(attr=bias_attr, shape=shape, dtype=self._dtype,
                                          is_bias=True)
        self.bias.stop_gradient = frozen
        self._mean = self.create_parameter(
            attr=ParamAttr(name=moving_mean_name, initializer=Constant(0.0), trainable=False,
                           do_model_average=do_model_average_for_mean_and_var),
            shape=shape, dtype=self._dtype)
        self._mean.stop_gradient = True
        self._variance = self.create_parameter(
            attr=ParamAttr(name=moving_variance_name, initializer=Constant(1.0),
                           trainable=False, do_model_average=do_model_average_for_mean_and_var),
            shape=shape, dtype=self._dtype)
        self._variance.stop_gradient = True
        self._in_place = in_place
        self._attrs = {"momentum": momentum, "epsilon": epsilon, "is_test": is_test,
                       "data_layout": data_layout, "use_mkldnn": False,
                       "fuse_with_relu": False, "use_global_stats": use_global_stats,
                       "trainable_statistics": trainable_statistics}

    def forward(self, input):
        check_variable_and_dtype(input, "input", _FLOATS, "BatchNorm")
        out = input if self._in_place else self._tmp()
        self._helper.append_op(
            type="batch_norm",
            inputs={"X": [input], "Scale": [self.weight], "Bias": [self.bias],
                    "Mean": [self._mean], "Variance": [self._variance]},
            outputs={"Y": [out], "MeanOut": [self._mean], "VarianceOut": [self._variance],
                     "SavedMean": [self._tmp(stop_gradient=True)],
                     "SavedVariance": [self._tmp(stop_gradient=True)]},
            attrs=dict(self._attrs))
        return self._bias_act(out, bias=False)


class Dropout(Layer):
    def __init__(self, p=0.5, seed=None, dropout_implementation="downgrade_in_infer",
                 is_test=False):
        super().__init__()
        assert isinstance(p, (float, int)), "p argument should be a number"
        assert 0 <= p <= 1, "p argument should between 0 and 1"
        assert seed is None or isinstance(seed, int), \
            "seed argument should be None or a integer"
        assert dropout_implementation in ("downgrade_in_infer", "upscale_in_train"), \
            "dropout_implementation argument should be 'downgrade_in_infer' or " \
            "'upscale_in_train'"
        self._p, self._seed, self._impl, self._is_test = p, seed, dropout_implementation, is_test

    def forward(self, input):
        prog = framework.default_main_program()
        if not self._seed and prog.random_seed != 0:
            self._seed = prog.random_seed
        out = self._helper.create_variable_for_type_inference(dtype=input.dtype)
        mask = self._helper.create_variable_for_type_inference(dtype=VarType.UINT8,
                                                               stop_gradient=True)
        self._helper.append_op(
            type="dropout", inputs={"X": [input]}, outputs={"Out": [out], "Mask": [mask]},
            attrs={"dropout_prob": self._p, "is_test": self._is_test,
                   "fix_seed": self._seed is not None, "seed": self._seed or 0,
                   "dropout_implementation": self._impl})
        return out


class Embedding(Layer):
    """lookup_table_v2 (ids of any shape, no trailing 1) over a [size[0], size[1]] table."""

    def __init__(self, size, is_sparse=False, is_distributed=False, padding_idx=None,
                 param_attr=None, dtype="float32"):
        super().__init__()
        self._size, self._dtype = size, dtype
        self._attrs = {
            "is_sparse": is_sparse, "is_distributed": is_distributed,
            "remote_prefetch": is_sparse and not is_distributed,
            "padding_idx": -1 if padding_idx is None else
            padding_idx if padding_idx >= 0 else size[0] + padding_idx}
        self.weight = self.create_parameter(attr=param_attr, shape=size, dtype=dtype,
                                            is_bias=False)

    def forward(self, input):
        check_variable_and_dtype(input, "input", ["int64"], "Embedding")
        out = self._helper.create_variable_for_type_inference(self._dtype)
        self._helper.append_op(type="lookup_table_v2", inputs={"Ids": input, "W": self.weight},
                               outputs={"Out": out}, attrs=dict(self._attrs))
        return out


class LayerNorm(_BiasAct):
    """layer_norm over the trailing `normalized_shape` dimensions of the input."""

    def __init__(self, normalized_shape, scale=True, shift=True, epsilon=1e-05,
                 param_attr=None, bias_attr=None, act=None, dtype="float32"):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = [normalized_shape]
        self._normalized_shape = list(normalized_shape)
        self._epsilon, self._act, self._dtype = epsilon, act, dtype
        shape = [int(np.prod(self._normalized_shape))]
        self.weight = self.create_parameter(
            attr=param_attr, shape=shape, dtype=dtype,
            default_initializer=Constant(1.0)) if scale else None
        if shift:
            assert bias_attr is not False
        self.bias = self.create_parameter(attr=bias_attr, shape=shape, dtype=dtype,
                                          is_bias=True) if shift else None

    def forward(self, input):
        shape, norm = list(input.shape), self._normalized_shape
        begin = len(shape) - len(norm)
        if begin < 0 or shape[begin:] != norm:
            raise ValueError(f"Given normalized_shape is {norm}, expected input with shape "
                             f"[*, {str(norm)[1:]}, but got input shape {shape}")
        check_variable_and_dtype(input, "input", ["float32", "float64"], "LayerNorm")
        inputs = {"X": [input]}
        if self.weight is not None:
            inputs["Scale"] = [self.weight]
        if self.bias is not None:
            inputs["Bias"] = [self.bias]
        y = self._tmp()
        self._helper.append_op(
            type="layer_norm", inputs=inputs,
            outputs={"Y": y, "Mean": self._tmp(stop_gradient=True),
                     "Variance": self._tmp(stop_gradient=True)},
            attrs={"epsilon": self._epsilon, "begin_norm_axis": begin})
        return self._bias_act(y, bias=False)


class GRUUnit(Layer):
    """One GRU step; returns (updated_hidden, reset_hidden_pre, gate) as Fluid 1.8."""
    _ACTS = {"identity": 0, "sigmoid": 1, "tanh": 2, "relu": 3}

    def __init__(self, size, param_attr=None, bias_attr=None, activation="tanh",
                 gate_activation="sigmoid", origin_mode=False, dtype="float32"):
        super().__init__()
        self.activation = self._ACTS[activation]
        self.gate_activation = self._ACTS[gate_activation]
        self._origin_mode, self._dtype = origin_mode, dtype
        d = size // 3
        self.weight = self.create_parameter(attr=param_attr, shape=[d, 3 * d], dtype=dtype)
        self.bias = self.create_parameter(attr=bias_attr, shape=[1, 3 * d], dtype=dtype,
                                          is_bias=True)

    def forward(self, input, hidden):
        check_variable_and_dtype(input, "input", ["float32", "float64"], "GRUUnit")
        check_variable_and_dtype(hidden, "hidden", ["float32", "float64"], "GRUUnit")
        inputs = {"Input": [input], "HiddenPrev": [hidden], "Weight": [self.weight]}
        if self.bias is not None:
            inputs["Bias"] = [self.bias]
        h = self._helper
        gate, reset, hid = (h.create_variable_for_type_inference(self._dtype)
                            for _ in range(3))
        h.append_op(type="gru_unit", inputs=inputs,
                    outputs={"Gate": gate, "ResetHiddenPrev": reset, "Hidden": hid},
                    attrs={"activation": self.activation,
                           "gate_activation": self.gate_activation,
                           "origin_mode": self._origin_mode})
        return hid, reset, gate


class NCE(Layer):
    """Noise-contrastive estimation over `num_total_classes`; returns the cost divided by
    num_neg_samples + 1, as Fluid 1.8's NCE layer."""
    _SAMPLERS = {"uniform": 0, "log_uniform": 1, "custom_dist": 2}

    def __init__(self, num_total_classes, dim, sample_weight=None, param_attr=None,
                 bias_attr=None, num_neg_samples=None, sampler="uniform", custom_dist=None,
                 seed=0, is_sparse=False, dtype="float32"):
        super().__init__()
        if sampler not in self._SAMPLERS:
            raise Exception("Unsupported sampler type.")
        self._dtype = dtype
        self._inputs = {"SampleWeight": sample_weight if sample_weight is not None else []}
        if sampler == "custom_dist":
            assert custom_dist is not None
            alias, probs = alias_tables(custom_dist)
            for slot, arr in (("CustomDistProbs", np.array(custom_dist, np.float32)),
                              ("CustomDistAlias", alias), ("CustomDistAliasProbs", probs)):
                p = self.create_parameter(attr=ParamAttr(), shape=arr.shape, dtype=arr.dtype,
                                          default_initializer=NumpyArrayInitializer(arr))
                p.stop_gradient = True
                self._inputs[slot] = p
        self._num_neg_samples = 10 if num_neg_samples is None else int(num_neg_samples)
        self._attrs = {"num_total_classes": int(num_total_classes),
                       "num_neg_samples": self._num_neg_samples, "seed": seed,
                       "sampler": self._SAMPLERS[sampler], "is_sparse": is_sparse,
                       "remote_prefetch": is_sparse}
        self.weight = self.create_parameter(attr=param_attr, shape=[num_total_classes, dim],
                                            is_bias=False, dtype=dtype)
        if bias_attr:
            self.bias = self.create_parameter(attr=bias_attr, shape=[num_total_classes, 1],
                                              is_bias=True, dtype=dtype)
            self._inputs["Bias"] = self.bias
        self._inputs["Weight"] = self.weight

    def forward(self, input, label, sample_weight=None):
        check_variable_and_dtype(input, "input", ["float32", "float64"], "NCE")
        check_variable_and_dtype(label, "label", ["int64"], "NCE")
        check_type(sample_weight, "sample_weight", (Variable, type(None)), "NCE")
        inputs = dict(self._inputs, Input=input, Label=label,
                      SampleWeight=sample_weight if sample_weight is not None else [])
        h = self._helper
        cost = h.create_variable_for_type_inference(dtype=input.dtype)
        h.append_op(type="nce", inputs=inputs,
                    outputs={"Cost": cost,
                             "SampleLogits": h.create_variable_for_type_inference(input.dtype),
                             "SampleLabels": h.create_variable_for_type_inference(label.dtype)},
                    attrs=dict(self._attrs))
        return cost / (self._num_neg_samples + 1)


class PRelu(Layer):
    def __init__(self, mode, channel=None, input_shape=None, param_attr=None,
                 dtype="float32"):
        super().__init__(name_scope="prelu")
        self._mode, self._dtype = mode, dtype
        if mode == "all":
            shape = [1]
        elif mode == "channel":
            assert isinstance(channel, int), \
                "channel argument is required when mode is 'channel'."
            shape = [1, channel, 1, 1]
        elif mode == "element":
            assert isinstance(input_shape, (list, tuple)), \
                "input_shape argument is required when mode is 'element'."
            shape = [1] + list(input_shape)[1:]
        else:
            raise ValueError("mode should be one of all, channel, element.")
        self.weight = self.create_parameter(attr=param_attr, shape=shape, dtype="float32",
                                            is_bias=False, default_initializer=Constant(1.0))

    def forward(self, input):
        check_variable_and_dtype(input, "input", ["float32"], "PRelu")
        out = self._helper.create_variable_for_type_inference(self._dtype)
        self._helper.append_op(type="prelu", inputs={"X": input, "Alpha": self.weight},
                               attrs={"mode": self._mode}, outputs={"Out": out})
        return out


class BilinearTensorProduct(_BiasAct):
    def __init__(self, input1_dim, input2_dim, output_dim, name=None, act=None,
                 param_attr=None, bias_attr=None, dtype="float32"):
        super().__init__()
        self._act, self._name, self._dtype = act, name, dtype
        self.weight = self.create_parameter(attr=param_attr,
                                            shape=[output_dim, input1_dim, input2_dim],
                                            dtype=dtype, is_bias=False)
        self.bias = self.create_parameter(attr=bias_attr, shape=[1, output_dim], dtype=dtype,
                                          is_bias=True)

    def forward(self, x, y):
        check_variable_and_dtype(x, "x", ["float32", "float64"], "BilinearTensorProduct")
        check_variable_and_dtype(y, "y", ["float32", "float64"], "BilinearTensorProduct")
        inputs = {"X": x, "Y": y, "Weight": self.weight}
        if self.bias is not None:
            inputs["Bias"] = self.bias
        out = self.create_variable(name=self._name, dtype=self._dtype, persistable=False)
        self._helper.append_op(type="bilinear_tensor_product", inputs=inputs,
                               outputs={"Out": out})
        return self._bias_act(out, bias=False)


class GroupNorm(_BiasAct):
    def __init__(self, channels, groups, epsilon=1e-05, param_attr=None, bias_attr=None,
                 act=None, data_layout="NCHW", dtype="float32"):
        super().__init__()
        if data_layout != "NCHW":
            raise ValueError("unsupported data layout:" + data_layout)
        self._epsilon, self._groups, self._act, self._dtype = epsilon, groups, act, dtype
        # Fluid 1.8 passes `attr or False`: no scale / bias unless an attribute is given
        self.weight = self.create_parameter(attr=param_attr or False, shape=[channels],
                                            dtype=dtype, default_initializer=Constant(1.0))
        self.bias = self.create_parameter(attr=bias_attr or False, shape=[channels],
                                          dtype=dtype, is_bias=True)

    def forward(self, input):
        check_variable_and_dtype(input, "input", ["float32", "float64"], "GroupNorm")
        inputs = {"X": input}
        if self.bias is not None:
            inputs["Bias"] = self.bias
        if self.weight is not None:
            inputs["Scale"] = self.weight
        y = self._tmp()
        self._helper.append_op(type="group_norm", inputs=inputs,
                               outputs={"Y": y, "Mean": self._tmp(stop_gradient=True),
                                        "Variance": self._tmp(stop_gradient=True)},
                               attrs={"epsilon": self._epsilon, "groups": self._groups})
        return self._bias_act(y, bias=False)


class SpectralNorm(Layer):
    def __init__(self, weight_shape, dim=0, power_iters=1, eps=1e-12, dtype="float32"):
        super().__init__()
        self._dim, self._power_iters, self._eps, self._dtype = dim, power_iters, eps, dtype
        shape = list(weight_shape)
        h = shape[dim]
        w = int(np.prod(shape)) // h
        self.weight_u = self.create_parameter(attr=ParamAttr(), shape=[h], dtype=dtype,
                                              default_initializer=Normal(0.0, 1.0))
        self.weight_u.stop_gradient = True
        self.weight_v = self.create_parameter(attr=ParamAttr(), shape=[w], dtype=dtype,
                                              default_initializer=Normal(0.0, 1.0))
        self.weight_v.stop_gradient = True

    def forward(self, weight):
        check_variable_and_dtype(weight, "weight", ["float32", "float64"], "SpectralNorm")
        out = self._helper.create_variable_for_type_inference(self._dtype)
        self._helper.append_op(
            type="spectral_norm", inputs={"Weight": weight, "U": self.weight_u,
                                          "V": self.weight_v},
            outputs={"Out": out},
            attrs={"dim": self._dim, "power_iters": self._power_iters, "eps": self._eps})
        return out


class TreeConv(_BiasAct):
    """Tree-based convolution (TBCNN) of nodes_vector [N, n, feature_size] over the trees of
    edge_set [N, E, 2] (the tree_conv op), then a bias [num_filters] added along axis 1 and
    the activation, as Fluid 1.8's TreeConv."""

    def __init__(self, feature_size, output_size, num_filters=1, max_depth=2, act="tanh",
                 param_attr=None, bias_attr=None, name=None, dtype="float32"):
        super().__init__()
        self._name, self._act, self._max_depth, self._dtype = name, act, max_depth, dtype
        if bias_attr:
            self.bias = self.create_parameter(attr=bias_attr, shape=[num_filters],
                                              dtype=dtype, is_bias=True)
        self.weight = self.create_parameter(
            attr=param_attr, shape=[feature_size, 3, output_size, num_filters], dtype=dtype,
            is_bias=False)

    def forward(self, nodes_vector, edge_set):
        check_type(nodes_vector, "nodes_vector", Variable, "TreeConv")
        check_type(edge_set, "edge_set", Variable, "TreeConv")
        out = self._tmp()
        self._helper.append_op(
            type="tree_conv", inputs={"NodesVector": nodes_vector, "EdgeSet": edge_set,
                                      "Filter": self.weight},
            outputs={"Out": out}, attrs={"max_depth": self._max_depth})
        return self._bias_act(out, axis=1)
