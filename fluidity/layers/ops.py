"""One layer function per unary op (`layers.relu(x)`, `layers.exp(x)`, ...), generated from
the activation table so each op is defined only once."""
import inspect

from ..layer_helper import LayerHelper
from ..ops.activation import ACTIVATIONS

__all__ = list(ACTIVATIONS) + ["softmax", "erf", "atan", "asin", "acos", "tanh_shrink"]


def _unary(op_type, **defaults):
    def layer(x, name=None, **attrs):
        helper = LayerHelper(op_type, name=name)
        out = helper.create_variable_for_type_inference(x.dtype)
        helper.append_op(op_type, inputs={"X": x}, outputs={"Out": out},
                         attrs={**defaults, **attrs})
        return out
    layer.__name__ = op_type
    layer.__doc__ = f"Out = {op_type}(x), elementwise (op '{op_type}')."
    return layer


for _name in ACTIVATIONS:
    globals()[_name] = _unary(_name)


def softmax(input, use_cudnn=False, name=None, axis=-1):
    return _unary("softmax")(input, name=name, axis=axis)


erf = _unary("erf")
atan = _unary("atan")
asin = _unary("asin")
acos = _unary("acos")
tanh_shrink = _unary("tanh_shrink")

# Fluid 1.x activations with attributes: name -> the attribute parameters, in the order
# Fluid's signature takes them positionally (after x), with their defaults
_WITH_ATTRS = {
    "elu": (("alpha", 1.0),),
    "relu6": (("threshold", 6.0),),
    "hard_sigmoid": (("slope", 0.2), ("offset", 0.5)),
    "hard_swish": (("threshold", 6.0), ("scale", 6.0), ("offset", 3.0)),
    "swish": (("beta", 1.0),),
    "brelu": (("t_min", 0.0), ("t_max", 24.0)),
    "mish": (("threshold", 20.0),),
    "selu": (("scale", None), ("alpha", None)),
    "leaky_relu": (("alpha", 0.02),),
    "pow": (("factor", 1.0),),
    "gelu": (("approximate", False),),
    "stanh": (("scale_a", 0.67), ("scale_b", 1.7159)),
    "soft_relu": (("threshold", 40.0),),
    "hard_shrink": (("threshold", None),),
    "thresholded_relu": (("threshold", None),),
    "softshrink": (("alpha", None),),
}
# a Fluid argument whose op attribute has another name
_ATTR_NAME = {("softshrink", "alpha"): "lambda"}


def _with_attrs(op_type, params):
    names = [n for n, _ in params]

    def layer(x, *args, **kw):
        # Fluid's order: x, the attributes, then name (positional too)
        if len(args) > len(names) + 1:
            raise TypeError(f"{op_type}() takes at most {len(names) + 2} positional arguments")
        if len(args) == len(names) + 1:
            if "name" in kw:
                raise TypeError(f"{op_type}() got multiple values for argument 'name'")
            kw["name"] = args[-1]
            args = args[:-1]
        name = kw.pop("name", None)
        values = dict(params)
        values.update(zip(names, args))
        for k, v in kw.items():
            if k not in values:
                raise TypeError(f"{op_type}() got an unexpected keyword argument '{k}'")
            values[k] = v
        attrs = {_ATTR_NAME.get((op_type, k), k): v if isinstance(v, bool) else float(v)
                 for k, v in values.items() if v is not None}
        return _unary(op_type)(x, name=name, **attrs)
    layer.__name__ = op_type
    P = inspect.Parameter
    layer.__signature__ = inspect.Signature(
        [P("x", P.POSITIONAL_OR_KEYWORD)] +
        [P(n, P.POSITIONAL_OR_KEYWORD, default=d) for n, d in params] +
        [P("name", P.POSITIONAL_OR_KEYWORD, default=None)])
    layer.__doc__ = (f"Out = {op_type}(x; {', '.join(f'{n}={d}' for n, d in params)}), "
                     f"elementwise (op '{op_type}').")
    return layer


for _name, _params in _WITH_ATTRS.items():
    globals()[_name] = _with_attrs(_name, _params)
__all__ += list(_WITH_ATTRS)



# Fluid 1.8 keeps two generated layers under private names, for its programs that pass an
# existing `out` variable (fluid.layers.ops._scale(x=x, scale=10.0, out=v))
from .layer_function_generator import generate_layer_fn as _generate  # noqa: E402

_scale = _generate("scale")
_elementwise_div = _generate("elementwise_div")

def sign(x):
    """Out = sign(x), elementwise (op 'sign'); `x` a Variable or a numpy array (put in the
    program by `assign` first, as Fluid 1.8's sign does). The dtype check of a Variable
    (float16/32/64) is arg_checks' table's; an array's is here, before anything is built."""
    import numpy as np
    from ..framework import check_dtype
    from .tensor import assign
    if isinstance(x, np.ndarray):
        check_dtype(x.dtype, "x", ["float16", "float32", "float64"], "fluid.layers.sign")
        x = assign(x)
    return _unary("sign")(x)
