"""One layer function per unary op (`layers.relu(x)`, `layers.exp(x)`, ...), generated from
the activation table so each op is defined only once."""
from ..layer_helper import LayerHelper
from ..ops.activation import ACTIVATIONS

__all__ = list(ACTIVATIONS) + ["leaky_relu", "gelu", "pow", "softmax", "erf"]


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

leaky_relu = _unary("leaky_relu")
gelu = _unary("gelu")
pow = _unary("pow")


def softmax(input, use_cudnn=False, name=None, axis=-1):
    return _unary("softmax")(input, name=name, axis=axis)


erf = _unary("erf")

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
}


def _with_attrs(op_type, params):
    names = [n for n, _ in params]

    def layer(x, *args, name=None, **kw):
        if len(args) > len(names):
            raise TypeError(f"{op_type}() takes at most {len(names) + 1} positional arguments")
        values = dict(params)
        values.update(zip(names, args))
        for k, v in kw.items():
            if k not in values:
                raise TypeError(f"{op_type}() got an unexpected keyword argument '{k}'")
            values[k] = v
        attrs = {k: float(v) for k, v in values.items() if v is not None}
        return _unary(op_type)(x, name=name, **attrs)
    layer.__name__ = op_type
    layer.__doc__ = (f"Out = {op_type}(x; {', '.join(f'{n}={d}' for n, d in params)}), "
                     f"elementwise (op '{op_type}').")
    return layer


for _name, _params in _WITH_ATTRS.items():
    globals()[_name] = _with_attrs(_name, _params)
__all__ += list(_WITH_ATTRS)

