"""Tensor-creating layers."""
from ..core import dtypes
from ..framework import default_main_program
from ..layer_helper import LayerHelper

__all__ = ["fill_constant", "create_tensor", "create_parameter", "create_global_var", "assign"]


def fill_constant(shape, dtype, value, force_cpu=False, out=None, name=None):
    helper = LayerHelper("fill_constant", name=name)
    if out is None:
        out = helper.create_variable_for_type_inference(dtype)
    helper.append_op("fill_constant", outputs={"Out": out},
                     attrs={"shape": [int(d) for d in shape], "dtype": dtypes.to_code(dtype),
                            "value": float(value)})
    out.stop_gradient = True
    return out


def create_tensor(dtype, name=None, persistable=False):
    helper = LayerHelper("create_tensor", name=name)
    return helper.block().create_var(name=helper.name, dtype=dtype, persistable=persistable)


def create_parameter(shape, dtype, name=None, attr=None, is_bias=False,
                     default_initializer=None):
    """A trainable parameter of `shape` (Fluid's layers.create_parameter): named by `name` or
    `attr`, initialized in the startup program (Xavier, or 0 for a bias, unless
    `default_initializer` or the attr's initializer says otherwise)."""
    import copy
    from ..param_attr import ParamAttr
    if not isinstance(shape, (list, tuple)) or not all(isinstance(d, int) for d in shape):
        raise TypeError(f"create_parameter: shape must be a list of ints, got {shape!r}")
    helper = LayerHelper("create_parameter", name=name)
    attr = copy.copy(ParamAttr.to_attr(attr))
    if name is not None and attr.name is None:
        attr.name = name
    return helper.create_parameter(attr, shape, dtype, is_bias=is_bias,
                                   default_initializer=default_initializer)


def create_global_var(shape, value, dtype, persistable=False, force_cpu=False, name=None):
    """A variable of the global block filled with `value` by the startup program (Fluid's
    layers.create_global_var: counters, learning rates)."""
    from ..initializer import ConstantInitializer
    helper = LayerHelper("global_var", name=name)
    var = helper.create_global_variable(persistable=persistable, dtype=dtype,
                                        shape=[int(d) for d in shape], name=name)
    helper.set_variable_initializer(var, ConstantInitializer(float(value), force_cpu=force_cpu))
    return var


def assign(input, output=None):
    import numpy as np
    helper = LayerHelper("assign")
    if isinstance(input, np.ndarray):
        if output is None:
            output = helper.create_variable_for_type_inference(input.dtype)
        key = {"float32": "fp32_values", "int32": "int32_values", "int64": "int64_values",
               "bool": "bool_values"}[str(input.dtype)]
        helper.append_op("assign_value", outputs={"Out": output},
                         attrs={"shape": list(input.shape), "dtype": dtypes.to_code(input.dtype),
                                key: input.reshape(-1).tolist()})
        return output
    if output is None:
        output = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("assign", inputs={"X": input}, outputs={"Out": output})
    return output
