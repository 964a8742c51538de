"""Fluid's `fluid.default_scope_funcs`: a per-thread stack of scopes for code that creates
variables without passing a scope around.

The bottom of each thread's stack is a root Scope made on first use; `enter_local_scope`
pushes a kid of the current scope, `leave_local_scope` pops it and drops the kids of the
scope below, and `scoped_function(f)` runs `f` between the two, so every variable `f`
creates is gone when it returns (a variable of an outer scope stays visible inside)."""
import threading

from .core.scope import Scope

__all__ = ["get_cur_scope", "enter_local_scope", "leave_local_scope", "var", "find_var",
           "scoped_function"]

_local = threading.local()


def _stack():
    stack = getattr(_local, "scopes", None)
    if stack is None:
        stack = _local.scopes = []
    if not stack:
        stack.append(Scope())
    return stack


def get_cur_scope():
    """The innermost scope of this thread's stack."""
    return _stack()[-1]


def enter_local_scope():
    """Push a new kid of the current scope."""
    stack = _stack()
    stack.append(stack[-1].new_scope())


def leave_local_scope():
    """Pop the current scope and drop it (with its variables) from its parent. Leaving the
    root scope is an error: there is nothing to return to."""
    stack = _stack()
    if len(stack) < 2:
        raise RuntimeError("leave_local_scope: no local scope was entered")
    stack.pop()
    stack[-1].drop_kids()


def var(name):
    """The variable `name` of the current scope, created there if missing."""
    return get_cur_scope().var(name)


def find_var(name):
    """The variable `name` of the current scope or an enclosing one; None if none has it."""
    return get_cur_scope().find_var(name)


def scoped_function(func):
    """Run `func()` in a new local scope, left (and dropped) however `func` ends."""
    enter_local_scope()
    try:
        return func()
    finally:
        leave_local_scope()
