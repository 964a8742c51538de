"""fluid.layers.layer_function_generator: layer functions made from an op's registered schema,
as Fluid 1.8 makes its simple layers, and the decorators its layer modules use.

    relu6 = generate_layer_fn("relu6")      # relu6(x, threshold=6.0) -> Variable
    out = relu6(x=v, threshold=4.0)

Inputs are given by their slot names in snake case (`X` -> `x`, `ScaleTensor` ->
`scale_tensor`) or positionally in slot order; every other keyword is an attribute, and
`act` / `name` are the usual layer arguments.
"""
import functools
import re
import string
import warnings

from ..framework import Variable
from ..layer_helper import LayerHelper
from ..ops import registry
from ..proto import framework_pb2

__all__ = ["deprecated", "generate_layer_fn", "generate_activation_fn", "autodoc",
           "templatedoc"]


def _convert_(name):
    """A slot name in snake case: `X` -> `x`, `OutSize` -> `out_size`."""
    s = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()


def _doc(opdef):
    lines = [opdef.doc or f"The {opdef.type} operator.", "", "Args:"]
    for s in opdef.inputs:
        lines.append(f"    {_convert_(s.name)} (Variable{'s' if s.duplicable else ''}): "
                     f"input {s.name} of {opdef.type}")
    for a in opdef.attr_names(common=False):
        lines.append(f"    {a} ({framework_pb2.AttrType.Name(opdef.attr_type(a))}): "
                     f"attribute, default {opdef.defaults()[a]!r}")
    return "\n".join(lines)


def generate_layer_fn(op_type):
    """A layer function appending one `op_type` op; it returns the op's one non-intermediate
    output (ValueError for an op with several, or a duplicable one)."""
    opdef = registry.get(op_type)
    main = [s for s in opdef.outputs if not s.intermediate]
    extra = [s for s in opdef.outputs if s.intermediate]
    if len(main) != 1:
        raise ValueError(f"Only one non intermediate output operator can be automatically "
                         f"generated. {op_type}")
    if main[0].duplicable or any(s.duplicable for s in extra):
        raise ValueError(f"Only non duplicable op can be automatically generated "
                         f"({op_type})")

    def func(*args, **kwargs):
        args = list(args)
        kwargs = dict(kwargs)
        act, name = kwargs.pop("act", None), kwargs.pop("name", None)
        out = kwargs.pop(_convert_(main[0].name), None)
        dtype = None
        helper = LayerHelper(op_type, act=act, name=name)
        inputs = {}
        for s in opdef.inputs:
            val = kwargs.pop(_convert_(s.name), None)
            if val is None and args:
                val = args.pop(0)
            if val is None:
                continue
            vals = list(val) if isinstance(val, (list, tuple)) else [val]
            for v in vals:
                if not isinstance(v, Variable):
                    raise ValueError(f"input of {op_type} must be variable")
                if dtype is None:
                    dtype = v.dtype
                elif dtype != v.dtype:
                    raise ValueError(f"operator {op_type} must input same dtype. {dtype} vs "
                                     f"{v.dtype}")
            inputs[s.name] = vals
        if args:
            raise TypeError(f"{op_type}: {len(args)} positional argument(s) beyond its "
                            f"inputs {[s.name for s in opdef.inputs]}")
        unknown = [k for k in kwargs if not opdef.declares(k)]
        if unknown:
            raise TypeError(f"{op_type}: unknown argument(s) {unknown}")
        if dtype is None:   # no input: the op's dtype attribute (Fluid's fallback), fp32
            dtype = kwargs.get("dtype", "float32")
        if isinstance(out, (list, tuple)):
            out = out[0]
        out = out if out is not None else helper.create_variable_for_type_inference(dtype)
        outputs = {main[0].name: [out]}
        for s in extra:
            outputs[s.name] = [helper.create_variable_for_type_inference(dtype)]
        helper.append_op(op_type, inputs=inputs, outputs=outputs, attrs=kwargs)
        return helper.append_activation(out)

    func.__name__ = func.__qualname__ = op_type
    func.__doc__ = _doc(opdef)
    return func


def generate_activation_fn(op_type):
    """A layer function `f(x, name=None)` appending the one-input op `op_type` (X -> Out)."""
    opdef = registry.get(op_type)

    def func(x, name=None):
        if not isinstance(x, Variable):
            raise TypeError(f"{op_type}: 'x' must be a Variable, got {type(x).__name__}")
        helper = LayerHelper(op_type, name=name)
        out = helper.create_variable_for_type_inference(x.dtype)
        helper.append_op(op_type, inputs={"X": x}, outputs={"Out": out})
        return out

    func.__name__ = func.__qualname__ = op_type
    func.__doc__ = _doc(opdef)
    return func


def deprecated(func_or_class):
    """Wrap a function (or class) so that each call warns DeprecationWarning naming it."""
    @functools.wraps(func_or_class)
    def wrapper(*args, **kwargs):
        warnings.warn(f"Call to deprecated function {func_or_class.__name__}.",
                      category=DeprecationWarning, stacklevel=2)
        return func_or_class(*args, **kwargs)
    return wrapper


def autodoc(comment=""):
    """Decorator: the function's docstring becomes its op's (the op named as the function)
    followed by `comment`."""
    def impl(func):
        func.__doc__ = _doc(registry.get(func.__name__)) + comment
        return func
    return impl


def templatedoc(op_type=None):
    """Decorator: fills the docstring's `${comment}` with the op's description and
    `${<arg>_comment}` / `${<arg>_type}` with each slot's and attribute's; the op is
    `op_type`, or the function's name."""
    def impl(func):
        opdef = registry.get(op_type or func.__name__)
        values = {"comment": (opdef.doc or "").rstrip(".")}
        for s in opdef.inputs + opdef.outputs:
            values[f"{_convert_(s.name)}_comment"] = f"{s.name} of {opdef.type}"
            values[f"{_convert_(s.name)}_type"] = "Variable"
        for a in opdef.attr_names(common=False):
            values[f"{a}_comment"] = f"attribute {a} of {opdef.type}"
            values[f"{a}_type"] = framework_pb2.AttrType.Name(opdef.attr_type(a)).lower()
        func.__doc__ = string.Template(func.__doc__ or "").safe_substitute(values)
        return func
    return impl
