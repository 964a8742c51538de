"""`a + b`, `x * 2.0`, `a == b` on Variables, as Fluid 1.8's math_op_patch builds them:
elementwise ops (`scale` when the other side is a number and the op allows it), comparisons
(`equal`, `not_equal`, `less_than`, ... : a bool Variable, so `a == b` is an op, not Python's
identity), the other operand cast to the left one's dtype, `axis` 0 when the right operand's
first dim is the batch's (-1).

Because `==` builds an op, never test a Variable's membership in a list (`v in vars`) or
compare Variables with `==` to mean identity: use `is`, or names (Fluid has the same rule).

`monkey_patch_variable()` (run when `fluidity.layers` is imported, as Paddle's of that name)
gives the builder's Variable these operators: they build layers, which the framework itself
does not import.
"""
from ..core import dtypes
from ..framework import Variable
from ..layer_helper import LayerHelper

_SCALAR_AS_SCALE = {
    "elementwise_add": lambda v: (1.0, v), "elementwise_sub": lambda v: (1.0, -v),
    "elementwise_mul": lambda v: (v, 0.0), "elementwise_div": lambda v: (1.0 / v, 0.0),
}


def binary(x, other, op_type, reverse=False):
    helper = LayerHelper(op_type)
    if isinstance(other, bool) or not isinstance(other, (int, float, Variable)):
        return NotImplemented
    integer = dtypes.to_numpy(x.dtype).kind in "iub" if x.dtype is not None else False
    if isinstance(other, (int, float)):
        if integer and op_type == "elementwise_div":
            pass                            # an integer division is not a scale (Fluid's rule)
        elif not reverse and op_type in _SCALAR_AS_SCALE:
            scale, bias = _SCALAR_AS_SCALE[op_type](float(other))
            out = helper.create_variable_for_type_inference(x.dtype)
            helper.append_op("scale", inputs={"X": x}, outputs={"Out": out},
                             attrs={"scale": scale, "bias": bias})
            return out
        if reverse and op_type in ("elementwise_add", "elementwise_mul"):
            return binary(x, other, op_type)
        if reverse and op_type == "elementwise_sub":
            out = helper.create_variable_for_type_inference(x.dtype)
            helper.append_op("scale", inputs={"X": x}, outputs={"Out": out},
                             attrs={"scale": -1.0, "bias": float(other)})
            return out
        from .tensor import fill_constant
        other = fill_constant([1], x.dtype, float(other))
    if other.dtype != x.dtype and x.dtype is not None:
        other = other.astype(x.dtype)
    axis = 0 if other.shape and other.shape[0] == -1 else -1
    a, b = (other, x) if reverse else (x, other)
    out = helper.create_variable_for_type_inference("bool" if op_type in _COMPARISONS
                                                    else x.dtype)
    helper.append_op(op_type, inputs={"X": a, "Y": b}, outputs={"Out": out},
                     attrs={"axis": axis})
    return out


_OPERATORS = {"__add__": ("elementwise_add", False), "__radd__": ("elementwise_add", True),
              "__sub__": ("elementwise_sub", False), "__rsub__": ("elementwise_sub", True),
              "__mul__": ("elementwise_mul", False), "__rmul__": ("elementwise_mul", True),
              "__truediv__": ("elementwise_div", False),
              "__rtruediv__": ("elementwise_div", True),
              "__pow__": ("elementwise_pow", False), "__rpow__": ("elementwise_pow", True),
              "__floordiv__": ("elementwise_floordiv", False),
              "__mod__": ("elementwise_mod", False),
              # comparisons (a bool Variable), as Fluid 1.8's
              "__eq__": ("equal", False), "__ne__": ("not_equal", False),
              "__lt__": ("less_than", False), "__le__": ("less_equal", False),
              "__gt__": ("greater_than", False), "__ge__": ("greater_equal", False)}
_COMPARISONS = {"equal", "not_equal", "less_than", "less_equal", "greater_than",
                "greater_equal"}


def _operator(op_type, reverse):
    def method(self, other):
        return binary(self, other, op_type, reverse)
    return method


def monkey_patch_variable():
    for name, (op_type, reverse) in _OPERATORS.items():
        setattr(Variable, name, _operator(op_type, reverse))
    Variable.__hash__ = object.__hash__      # (setting __eq__ does not unset it here)
    Variable.__neg__ = lambda self: binary(self, -1.0, "elementwise_mul")
    from .variable_index import getitem, not_iterable   # var[i], var[:, 0], var[t]
    Variable.__getitem__ = getitem
    Variable.__iter__ = not_iterable
