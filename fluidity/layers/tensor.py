"""Tensor-creating layers."""
import numpy as np

from ..core import dtypes
from ..framework import default_main_program
from ..layer_helper import LayerHelper
from .checks import check_type, check_variables

__all__ = ["fill_constant", "create_tensor", "create_parameter", "create_global_var", "assign"]


def fill_constant(shape, dtype, value, force_cpu=False, out=None, name=None):
    """A tensor of `shape` filled with `value`, as Fluid 1.8's: `shape` a list of ints and
    [1]-shaped int Variables (`[layers.shape(x)[0], 1]`) or one int Variable; `value` a
    number or a [1] Variable (the ValueTensor input); `str_value` keeps an integer exact."""
    from ..framework import Variable
    helper = LayerHelper("fill_constant", name=name)
    attrs = {"force_cpu": bool(force_cpu)}
    inputs = {}
    if isinstance(value, Variable):
        inputs["ValueTensor"] = value
    else:
        attrs["value"] = float(value)
        attrs["str_value"] = (str(int(value)) if dtypes.to_numpy(dtype).kind in "iu"
                              else str(float(value)))
    attrs["shape"], shape_ins = _shape_inputs("fill_constant", shape)
    inputs.update(shape_ins)
    if out is None:
        out = helper.create_variable_for_type_inference(dtype)
    attrs["dtype"] = out.dtype
    helper.append_op("fill_constant", inputs=inputs, outputs={"Out": out}, attrs=attrs)
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
    from ..initializer import Initializer
    from ..param_attr import ParamAttr
    _check_shape_items(shape, "create_parameter")
    check_type(attr, "attr", (type(None), ParamAttr, str), "create_parameter")
    check_type(default_initializer, "default_initializer", (type(None), Initializer),
               "create_parameter")
    helper = LayerHelper("create_parameter", name=name)
    attr = copy.copy(ParamAttr.to_attr(attr))
    if name is not None and attr.name is None:
        attr.name = name
    return helper.create_parameter(attr, shape, dtype, is_bias=is_bias,
                                   default_initializer=default_initializer)


def _check_shape_items(shape, layer):
    """Fluid's check of a shape given as numbers: a list, tuple or ndarray of ints."""
    check_type(shape, "shape", (list, tuple, np.ndarray), layer)
    for d in shape:
        check_type(d, "item of shape", (int, np.integer), layer)


def _one_number(value, what):
    """`value` as a float: a number, or a one-element array (Fluid 1.x's programs pass
    `np.random.randn(1)`, which numpy 1.x's float() took; numpy 2 takes only 0-D)."""
    arr = np.asarray(value)
    if arr.size != 1:
        raise TypeError(f"create_global_var: '{what}' must be one number, got an array of "
                        f"shape {list(arr.shape)}")
    return float(arr.reshape(-1)[0])


def create_global_var(shape, value, dtype, persistable=False, force_cpu=False, name=None):
    """A variable of the global block filled with `value` by the startup program (Fluid's
    layers.create_global_var: counters, learning rates)."""
    from ..initializer import ConstantInitializer
    _check_shape_items(shape, "create_global_var")
    helper = LayerHelper("global_var", name=name)
    var = helper.create_global_variable(persistable=persistable, dtype=dtype,
                                        shape=[int(d) for d in shape], name=name)
    helper.set_variable_initializer(var, ConstantInitializer(_one_number(value, 'value'),
                                                         force_cpu=force_cpu))
    return var


def assign(input, output=None):
    helper = LayerHelper("assign")
    if isinstance(input, np.ndarray):
        key = {"float32": "fp32_values", "int32": "int32_values", "int64": "int64_values",
               "bool": "bool_values"}.get(str(input.dtype))
        if key is None:                   # Fluid's rule: what assign_value's attributes hold
            raise TypeError(f"When the type of 'input' in assign is numpy.ndarray, the data "
                            f"type of 'input' must be bool, float32, int32 or int64, but "
                            f"received {input.dtype}")
        if output is None:
            output = helper.create_variable_for_type_inference(input.dtype)
        helper.append_op("assign_value", outputs={"Out": output},
                         attrs={"shape": list(input.shape), "dtype": dtypes.to_code(input.dtype),
                                key: input.reshape(-1).tolist()})
        return output
    if output is None:
        output = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("assign", inputs={"X": input}, outputs={"Out": output})
    return output


# --- Fluid 1.x creation layers over fill_constant, fill_any_like, range, linspace, eye, diag,
# the random ops and the whole-tensor checks ---------------------------------------------------
__all__ += ["zeros", "ones", "zeros_like", "ones_like", "range", "linspace", "eye", "diag",
            "reverse", "has_inf", "has_nan", "isfinite", "uniform_random", "gaussian_random",
            "uniform_random_batch_size_like", "gaussian_random_batch_size_like",
            "sampling_id"]


def _int_tensor(helper, v):
    """An int32 [1] tensor holding `v` (an int), or `v` itself if it is a Variable."""
    from ..framework import Variable
    if isinstance(v, Variable):
        return v
    t = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    helper.append_op("fill_constant", outputs={"Out": t},
                     attrs={"shape": [1], "dtype": dtypes.VarType.INT32, "value": float(v)})
    return t


def ints_or_tensors(helper, values):
    """A list attribute a caller may give as ints, a Variable, or ints mixed with Variables.
    Returns (attribute ints, 1-D tensor or None, tensor list or None); entries a tensor
    decides are -1 in the attribute."""
    from ..framework import Variable
    if isinstance(values, Variable):
        return [], values, None
    values = list(values)
    if not any(isinstance(v, Variable) for v in values):
        return [int(v) for v in values], None, None
    attr = [-1 if isinstance(v, Variable) else int(v) for v in values]
    return attr, None, [_int_tensor(helper, v) for v in values]


def _check_shape(layer, shape):
    if not isinstance(shape, (list, tuple)) or not all(
            isinstance(d, int) and not isinstance(d, bool) for d in shape):
        raise TypeError(f"{layer}: 'shape' must be a list or tuple of ints, got {shape!r}")
    return [int(d) for d in shape]


def zeros(shape, dtype, force_cpu=False):
    """A tensor of `shape` filled with 0 (fill_constant)."""
    return fill_constant(_check_shape("zeros", shape), dtype, 0.0, force_cpu=force_cpu)


def ones(shape, dtype, force_cpu=False):
    """A tensor of `shape` filled with 1 (fill_constant)."""
    return fill_constant(_check_shape("ones", shape), dtype, 1.0, force_cpu=force_cpu)


def _fill_like(layer, x, value, out):
    check_variables(layer, x=x)
    helper = LayerHelper(layer)
    if out is None:
        out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("fill_any_like", inputs={"X": x}, outputs={"Out": out},
                     attrs={"value": float(value), "dtype": -1})
    out.stop_gradient = True
    return out


def zeros_like(x, out=None):
    """A tensor shaped and typed like `x`, filled with 0."""
    return _fill_like("zeros_like", x, 0.0, out)


def ones_like(x, out=None):
    """A tensor shaped and typed like `x`, filled with 1."""
    return _fill_like("ones_like", x, 1.0, out)


def _scalar_tensor(helper, v, dtype):
    """`v` itself if a Variable, else a [1] tensor of `dtype` holding it."""
    from ..framework import Variable
    if isinstance(v, Variable):
        return v
    return fill_constant([1], dtype, v)


def range(start, end, step, dtype):
    """[start, start + step, ...) up to `end`; each bound a number or a [1] Variable."""
    helper = LayerHelper("range")
    ins = {k: _scalar_tensor(helper, v, dtype)
           for k, v in (("Start", start), ("End", end), ("Step", step))}
    out = helper.create_variable_for_type_inference(dtype)
    helper.append_op("range", inputs=ins, outputs={"Out": out})
    out.stop_gradient = True
    return out


def linspace(start, stop, num, dtype):
    """`num` evenly spaced values from `start` to `stop` inclusive."""
    helper = LayerHelper("linspace")
    ins = {"Start": _scalar_tensor(helper, start, dtype),
           "Stop": _scalar_tensor(helper, stop, dtype),
           "Num": _scalar_tensor(helper, num, "int32")}
    out = helper.create_variable_for_type_inference(dtype)
    helper.append_op("linspace", inputs=ins, outputs={"Out": out},
                     attrs={"dtype": dtypes.to_code(dtype)})
    return out


def eye(num_rows, num_columns=None, batch_shape=None, dtype="float32"):
    """The [num_rows, num_columns] identity, repeated over `batch_shape` leading dims."""
    for arg, v in (("num_rows", num_rows), ("num_columns", num_columns)):
        if v is not None and (not isinstance(v, int) or v < 0):
            raise TypeError(f"eye: '{arg}' must be a non-negative int, got {v!r}")
    helper = LayerHelper("eye")
    out = helper.create_variable_for_type_inference(dtype)
    helper.append_op("eye", outputs={"Out": out},
                     attrs={"num_rows": num_rows,
                            "num_columns": -1 if num_columns is None else num_columns,
                            "dtype": dtypes.to_code(dtype)})
    out.stop_gradient = True
    if batch_shape:
        if not isinstance(batch_shape, (list, tuple)):
            raise TypeError(f"eye: 'batch_shape' must be a list of ints, got {batch_shape!r}")
        cols = num_rows if num_columns is None else num_columns
        shaped = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
        xshape = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
        helper.append_op("reshape2", inputs={"X": out}, outputs={"Out": shaped, "XShape": xshape},
                         attrs={"shape": [1] * len(batch_shape) + [num_rows, cols]})
        out = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
        helper.append_op("expand", inputs={"X": shaped}, outputs={"Out": out},
                         attrs={"expand_times": [int(b) for b in batch_shape] + [1, 1]})
    return out


def diag(diagonal):
    """The square matrix with the 1-D `diagonal` (a Variable or a numpy array) on its
    diagonal."""
    import numpy as np
    if isinstance(diagonal, np.ndarray):
        diagonal = assign(diagonal)
    check_variables("diag", diagonal=diagonal)
    helper = LayerHelper("diag")
    out = helper.create_variable_for_type_inference(diagonal.dtype)
    helper.append_op("diag", inputs={"Diagonal": diagonal}, outputs={"Out": out})
    out.stop_gradient = True
    return out


def reverse(x, axis):
    """`x` reversed along `axis` (an int or a list of ints)."""
    check_variables("reverse", x=x)
    axis = [axis] if isinstance(axis, int) else list(axis)
    helper = LayerHelper("reverse")
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("reverse", inputs={"X": x}, outputs={"Out": out}, attrs={"axis": axis})
    return out


def _whole_check(op_type, layer):
    def check(x):
        check_variables(layer, x=x)
        helper = LayerHelper(layer)
        out = helper.create_variable_for_type_inference("bool", stop_gradient=True)
        helper.append_op(op_type, inputs={"X": x}, outputs={"Out": out})
        return out
    check.__name__ = layer
    check.__doc__ = f"A [1] bool tensor: op '{op_type}' over all of x."
    return check


has_inf = _whole_check("isinf", "has_inf")
has_nan = _whole_check("isnan", "has_nan")
isfinite = _whole_check("isfinite", "isfinite")


def _random(op_type, layer, inputs, dtype, attrs):
    helper = LayerHelper(layer)
    out = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    helper.append_op(op_type, inputs=inputs, outputs={"Out": out},
                     attrs={**attrs, "dtype": dtypes.to_code(dtype)})
    return out


def _shape_inputs(layer, shape):
    """(shape attribute, ShapeTensor / ShapeTensorList inputs) of a `shape` argument."""
    from ..framework import Variable
    if not isinstance(shape, (list, tuple, Variable)):
        raise TypeError(f"{layer}: 'shape' must be a list, tuple or Variable, got "
                        f"{type(shape).__name__}")
    attr, tensor, tensors = ints_or_tensors(LayerHelper(layer), shape)
    ins = {}
    if tensor is not None:
        ins["ShapeTensor"] = tensor
    if tensors is not None:
        ins["ShapeTensorList"] = tensors
    return attr, ins


def uniform_random(shape, dtype="float32", min=-1.0, max=1.0, seed=0):
    """A tensor of `shape` drawn from U[min, max); a nonzero `seed` repeats the draw."""
    attr, ins = _shape_inputs("uniform_random", shape)
    return _random("uniform_random", "uniform_random", ins, dtype,
                   {"shape": attr, "min": float(min), "max": float(max), "seed": int(seed)})


def gaussian_random(shape, mean=0.0, std=1.0, seed=0, dtype="float32"):
    """A tensor of `shape` drawn from N(mean, std^2)."""
    attr, ins = _shape_inputs("gaussian_random", shape)
    return _random("gaussian_random", "gaussian_random", ins, dtype,
                   {"shape": attr, "mean": float(mean), "std": float(std), "seed": int(seed)})


def _batch_size_like(op_type, input, shape, dtype, input_dim_idx, output_dim_idx, attrs):
    check_variables(op_type, input=input)
    return _random(op_type, op_type, {"Input": input}, dtype,
                   {"shape": _check_shape(op_type, shape), "input_dim_idx": input_dim_idx,
                    "output_dim_idx": output_dim_idx, **attrs})


def uniform_random_batch_size_like(input, shape, dtype="float32", input_dim_idx=0,
                                   output_dim_idx=0, min=-1.0, max=1.0, seed=0):
    """U[min, max) of `shape`, its output_dim_idx dim sized as input's input_dim_idx dim."""
    return _batch_size_like("uniform_random_batch_size_like", input, shape, dtype,
                            input_dim_idx, output_dim_idx,
                            {"min": float(min), "max": float(max), "seed": int(seed)})


def gaussian_random_batch_size_like(input, shape, input_dim_idx=0, output_dim_idx=0,
                                    mean=0.0, std=1.0, seed=0, dtype="float32"):
    """N(mean, std^2) of `shape`, its output_dim_idx dim sized as input's input_dim_idx dim."""
    return _batch_size_like("gaussian_random_batch_size_like", input, shape, dtype,
                            input_dim_idx, output_dim_idx,
                            {"mean": float(mean), "std": float(std), "seed": int(seed)})


def sampling_id(x, min=0.0, max=1.0, seed=0, dtype="float32"):
    """One int64 id per row of `x` (probabilities), drawn from that row's distribution."""
    check_variables("sampling_id", x=x)
    helper = LayerHelper("sampling_id")
    out = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    helper.append_op("sampling_id", inputs={"X": x}, outputs={"Out": out},
                     attrs={"min": float(min), "max": float(max), "seed": int(seed)})
    return out


__all__ += ["autoincreased_step_counter"]


def autoincreased_step_counter(counter_name=None, begin=1, step=1):
    """A persistable int64 [1] counter that the main program increments by `step` first
    thing on every run, from begin - 1 (so it reads `begin` on the first run when step is 1,
    as Fluid's). One per name."""
    from ..initializer import ConstantInitializer
    helper = LayerHelper("global_step_counter")
    name = counter_name or "@STEP_COUNTER@"
    block = helper.main_program.global_block()
    if name in block.vars:
        return block.vars[name]
    counter = helper.create_global_variable(name=name, dtype="int64", shape=[1],
                                            persistable=True)
    helper.set_variable_initializer(counter, ConstantInitializer(float(begin - 1),
                                                                 force_cpu=True))
    block.prepend_op("increment", {"X": counter}, {"Out": counter}, {"step": float(step)})
    counter.stop_gradient = True
    return counter
