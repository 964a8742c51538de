"""Multi-way branches of Fluid 1.8 over `cond`: case (the first true predicate's branch) and
switch_case (the branch of an int index); is_empty."""
from ..core import dtypes
from ..core.dtypes import VarType
from ..framework import Variable
from ..layer_helper import LayerHelper
from .checks import check_variables
from .control_flow import cond
from .manip import cast, equal
from .tensor import fill_constant

__all__ = ["case", "switch_case", "is_empty"]


def _describe(x):
    return f"a {dtypes.name(x.dtype)} Variable" if isinstance(x, Variable) else \
        type(x).__name__


def _check_fn(layer, what, fn):
    if not callable(fn):
        raise TypeError(f"{layer}: {what} must be callable, got {type(fn).__name__}")


def _chain(pred_fn_pairs, default):
    """cond(p0, f0, lambda: cond(p1, f1, ... default)) built from the last pair up."""
    false_fn = default
    for pred, fn in reversed(pred_fn_pairs):
        false_fn = (lambda p, f, rest: lambda: cond(p, f, rest))(pred, fn, false_fn)
    return false_fn()


def case(pred_fn_pairs, default=None, name=None):
    """The outputs of the fn of the first (pred, fn) pair whose bool [1] pred is true, else
    of default() (the last pair's fn when default is None)."""
    if not isinstance(pred_fn_pairs, (list, tuple)) or not pred_fn_pairs:
        raise TypeError("case: pred_fn_pairs must be a non-empty list or tuple of "
                        "(pred, fn) pairs")
    pairs = []
    for pair in pred_fn_pairs:
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise TypeError(f"case: each of pred_fn_pairs must be a (pred, fn) tuple, got "
                            f"{pair!r}")
        pred, fn = pair
        check_variables("case", pred=pred)
        _check_fn("case", "fn", fn)
        pairs.append((pred, fn))
    if default is None:
        pairs, default = pairs[:-1], pairs[-1][1]
    _check_fn("case", "default", default)
    return _chain(pairs, default)


def switch_case(branch_index, branch_fns, default=None, name=None):
    """The outputs of branch_fns[branch_index] (a dict {int: fn}, a list of (int, fn) or a
    list of fns indexed by position), else of default() (the largest index's fn when
    default is None)."""
    if not isinstance(branch_index, Variable) or branch_index.dtype not in (
            VarType.UINT8, VarType.INT32, VarType.INT64):
        raise TypeError(f"switch_case: branch_index must be a uint8, int32 or int64 "
                        f"Variable, got {_describe(branch_index)}")
    if branch_index.dtype == VarType.UINT8:    # compared as int64, as Fluid casts it
        branch_index = cast(branch_index, "int64")
    if isinstance(branch_fns, dict):
        items = list(branch_fns.items())
    elif isinstance(branch_fns, (list, tuple)) and branch_fns:
        items = list(enumerate(branch_fns)) if all(callable(b) for b in branch_fns) \
            else list(branch_fns)
    else:
        raise TypeError(f"switch_case: branch_fns must be a non-empty dict, list or tuple "
                        f"(of fns or of (int, fn) pairs), got {type(branch_fns).__name__}")
    for pair in items:
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise TypeError(f"switch_case: each element of branch_fns must be a callable or "
                            f"an (int, fn) 2-tuple, got {pair!r}")
    keys = set()
    for key, fn in items:
        if not isinstance(key, int) or isinstance(key, bool):
            raise TypeError(f"switch_case: branch keys must be ints, got {key!r}")
        if key in keys:
            raise ValueError(f"switch_case: branch key {key} appears twice")
        keys.add(key)
        _check_fn("switch_case", f"the fn of branch {key}", fn)
    items.sort(key=lambda kv: kv[0])
    if default is None:
        items, default = items[:-1], items[-1][1]
    _check_fn("switch_case", "default", default)
    dtype = dtypes.name(branch_index.dtype)
    pairs = [(equal(branch_index, fill_constant([1], dtype, k)), fn) for k, fn in items]
    return _chain(pairs, default)


def is_empty(x, cond=None):
    """A bool [1]: whether `x` has no elements (written into `cond` when given)."""
    check_variables("is_empty", x=x)
    helper = LayerHelper("is_empty")
    if cond is None:
        cond = helper.create_variable_for_type_inference("bool", stop_gradient=True)
    helper.append_op("is_empty", inputs={"X": x}, outputs={"Out": cond})
    return cond
