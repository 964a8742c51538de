"""Fluid 1.8's `fluid.executor` functions that read the scope directly, outside a run:
`global_scope`, `scope_guard`, `_switch_scope` and `_fetch_var` (a persistable variable's
value after a run, by name). Fluid marks `_fetch_var` private, but its tests and programs
call it."""
from ..core.scope import global_scope, scope_guard, switch_scope
from ..ir.views import VarView

__all__ = ["global_scope", "scope_guard"]


def _to_name_str(var):
    """A fetch target's name: a Variable's name, a name as is, or a list of them joined by
    commas as Fluid's `_to_name_str` does."""
    if isinstance(var, VarView):
        return var.name
    if isinstance(var, str):
        return var
    if isinstance(var, (list, tuple)):
        return ",".join(_to_name_str(v) for v in var)
    raise TypeError(f"{var!r} is not a Variable or the name of one "
                    f"({type(var).__name__})")


def _switch_scope(scope):
    """Make `scope` the global scope; returns the one it replaces (Fluid's `_switch_scope`)."""
    return switch_scope(scope)


def _fetch_var(name, scope=None, return_numpy=True):
    """The value of the variable `name` (a name or a Variable) in `scope` (the global scope
    by default): an ndarray, or the LoDTensor itself when `return_numpy` is False. The
    variable must live in the scope after the run, i.e. be persistable (AssertionError
    otherwise, as in Fluid)."""
    from .executor import as_numpy       # executor.py imports this module's names
    name = _to_name_str(name)
    if scope is None:
        scope = global_scope()
    var = scope.find_var(name)
    assert var is not None, (
        "Cannot find " + name + " in scope. Perhaps you need to make the variable "
        "persistable by using var.persistable = True in your program.")
    tensor = var.get_tensor()
    return as_numpy(tensor) if return_numpy else tensor
