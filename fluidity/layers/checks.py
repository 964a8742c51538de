"""Argument checks the layers share, so that every layer refuses a bad argument in the same
words, naming itself and the argument."""
from ..framework import Variable
from ..framework import check_dtype, check_type, check_variable_and_dtype  # noqa: F401


def check_variables(layer, **args):
    """TypeError naming `layer` and the argument unless every value of `args` (argument name
    -> value) is a Variable."""
    for arg, v in args.items():
        if not isinstance(v, Variable):
            raise TypeError(f"{layer}: '{arg}' must be a Variable, got {type(v).__name__}")


def check_dtype_of(layer, arg, value, dtypes):
    """TypeError naming `layer` and `arg` unless `value` is a Variable whose dtype is one of
    `dtypes` (names: "float32", ...), as Fluid's layers refuse an input of another type."""
    from ..core import dtypes as _dt
    if not isinstance(value, Variable):
        raise TypeError(f"{layer}: '{arg}' must be a Variable, got {type(value).__name__}")
    got = _dt.name(value.dtype)
    if got not in dtypes:
        raise TypeError(f"{layer}: '{arg}' ({value.name}) must be of dtype "
                        f"{' or '.join(dtypes)}, got {got}")
