"""Scope: a tree of name -> Variable maps (Paddle's framework::Scope).

`var(name)` finds or creates locally; `find_var(name)` walks up the parent chain.
A runtime `Variable` is a holder whose `value` is a LoDTensor, SelectedRows,
LoDTensorArray, a list of scopes (step scopes) or a feed/fetch list.
"""
import contextlib
import threading

import numpy as np

from ..errors import EnforceNotMet, FluidityError
from .rank_table import LoDRankTable
from .tensor import LoDTensor, LoDTensorArray, SelectedRows


class Variable:
    __slots__ = ("name", "value", "_scalar")

    def __init__(self, name, value=None):
        self.name = name
        self.value = value
        self._scalar = None     # (kind, the tensor set_int / set_float stored), for is_int

    def _get(self, cls):
        if self.value is None:
            self.value = cls()
        elif not isinstance(self.value, cls):
            raise FluidityError(f"variable '{self.name}' holds a {type(self.value).__name__}, "
                                f"not a {cls.__name__}")
        return self.value

    def get_tensor(self):
        return self._get(LoDTensor)

    get_lod_tensor = get_tensor

    def get_selected_rows(self):
        return self._get(SelectedRows)

    def get_lod_tensor_array(self):
        return self._get(LoDTensorArray)

    def get_lod_rank_table(self):
        """The LoDRankTable a lod_rank_table op wrote here (an empty one if none yet)."""
        return self._get(LoDRankTable)

    def is_initialized(self):
        v = self.value
        return v is not None and (not isinstance(v, LoDTensor) or v._array is not None)

    def set_value(self, value):
        self.value = value

    # Paddle's scalar holders (a variable holding one float or int, not a tensor); read by
    # ops as a one-element tensor
    def set_float(self, value):
        self.value = LoDTensor(np.array([value], dtype=np.float32))
        self._scalar = ("float", self.value)

    def set_int(self, value):
        self.value = LoDTensor(np.array([value], dtype=np.int32))
        self._scalar = ("int", self.value)

    def _holds_scalar(self, kind):
        return self._scalar is not None and self._scalar[0] == kind and \
            self._scalar[1] is self.value

    def is_int(self):
        """Whether the variable holds an int set by `set_int` (Paddle's `Variable.is_int`)."""
        return self._holds_scalar("int")

    def is_float(self):
        return self._holds_scalar("float")

    def get_fetch_list(self):
        """The fetch holder's list (Paddle's FETCH_LIST: a list of LoDTensors, one a
        column), made empty when the variable holds nothing yet."""
        return self._get(list)

    get_feed_list = get_fetch_list

    def get_float(self):
        return float(self.get_tensor()._array.reshape(-1)[0])

    def get_int(self):
        return int(self.get_tensor()._array.reshape(-1)[0])

    def __repr__(self):
        return f"Variable({self.name!r}, {self.value!r})"


class Scope:
    """`revision` counts the changes to which names this scope holds (a variable made,
    erased, renamed, or all dropped), so that what binds a scope's Variables once (a
    prepared run, executor/direct.py) knows when to bind them again."""
    __slots__ = ("_vars", "_parent", "_kids", "_pooled", "revision", "__weakref__")

    def __init__(self, parent=None):
        self._vars = {}
        self.revision = 0
        self._parent = parent
        self._kids = []
        # Paddle keeps each root scope made from Python in a pool until
        # `_remove_from_pool` deletes it; a kid belongs to its parent, not to the pool
        self._pooled = parent is None

    def _remove_from_pool(self):
        """Delete this root scope (Paddle's `_Scope._remove_from_pool`): its variables and
        kids are dropped; deleting it again is an error, as in Paddle."""
        if not self._pooled:
            raise EnforceNotMet("Deleting a nonexistent scope is not allowed. The scope "
                                "was deleted already or is not a root scope made from "
                                "Python")
        self._pooled = False
        self.drop_kids()
        self._clear()

    def var(self, name):
        """The local variable `name`, created if missing (never looks at parents)."""
        v = self._vars.get(name)
        if v is None:
            v = self._vars[name] = Variable(name)
            self.revision += 1
        return v

    def find_var(self, name):
        """`name` here or in the nearest ancestor; None if nowhere."""
        s = self
        while s is not None:
            v = s._vars.get(name)
            if v is not None:
                return v
            s = s._parent
        return None

    def find_local_var(self, name):
        return self._vars.get(name)

    def find_scope(self, name):
        """The scope in the parent chain that holds `name`."""
        s = self
        while s is not None:
            if name in s._vars:
                return s
            s = s._parent
        return None

    def new_scope(self):
        kid = Scope(self)
        self._kids.append(kid)
        return kid

    def _clear(self):
        self._vars.clear()
        self.revision += 1

    def drop_kids(self):
        for k in self._kids:
            k.drop_kids()
            k._clear()
        self._kids = []

    def delete_scope(self, kid):
        try:
            self._kids.remove(kid)
        except ValueError:
            raise FluidityError("delete_scope: not a kid of this scope") from None
        kid.drop_kids()
        kid._clear()

    def local_lookup(self):
        """`lookup(name)`: this scope's own Variable of that name or None, as fast as a dict
        lookup (for binding a plan's frame once per run)."""
        return self._vars.get

    def has_kid(self, kid):
        return kid in self._kids

    def kids(self):
        return list(self._kids)

    @property
    def parent(self):
        return self._parent

    def root(self):
        s = self
        while s._parent is not None:
            s = s._parent
        return s

    def erase_vars(self, names):
        for n in names:
            self._vars.pop(n, None)
        self.revision += 1

    def rename(self, old, new):
        if new in self._vars:
            raise FluidityError(f"rename: '{new}' already exists in the scope")
        v = self._vars.pop(old)
        v.name = new
        self._vars[new] = v
        self.revision += 1

    def local_var_names(self):
        return list(self._vars)

    def __contains__(self, name):
        return self.find_var(name) is not None

    def __repr__(self):
        return f"Scope({len(self._vars)} vars, {len(self._kids)} kids)"


class _ThreadScope(threading.local):
    """The scope a `scope_guard` made global on this thread (None outside any): a class
    default, so that reading it outside a guard costs no AttributeError (global_scope is
    on every `exe.run` without a scope)."""
    scope = None


_global = _ThreadScope()
_global_scope = Scope()


def global_scope():
    s = _global.scope
    return _global_scope if s is None else s


def switch_scope(scope):
    """Make `scope` the process's global scope (outside any `scope_guard`); returns the one
    it replaces (Fluid's `executor._switch_scope`)."""
    global _global_scope
    if not isinstance(scope, Scope):
        raise TypeError(f"switch_scope takes a Scope, got {type(scope).__name__}")
    prev, _global_scope = _global_scope, scope
    return prev


@contextlib.contextmanager
def scope_guard(scope):
    """Make `scope` the global scope inside the block (per thread)."""
    prev = _global.scope
    _global.scope = scope
    try:
        yield scope
    finally:
        _global.scope = prev


def set_feed_variable(scope, value, var_name, index):
    """Put `value` (a LoDTensor) in column `index` of the feed holder `var_name` of `scope`,
    as the executor's feed op reads it (Paddle's `core.set_feed_variable`)."""
    if not isinstance(value, (LoDTensor, SelectedRows, LoDTensorArray)):
        raise TypeError(f"set_feed_variable: the value for '{var_name}' must be a LoDTensor, "
                        f"got {type(value).__name__}")
    if int(index) < 0:
        raise ValueError(f"set_feed_variable: column {index} of '{var_name}' is negative")
    holder = scope.var(var_name).get_feed_list()
    if len(holder) <= index:
        holder.extend([None] * (index + 1 - len(holder)))
    holder[index] = value


def get_fetch_variable(scope, var_name, index):
    """The value in column `index` of the fetch holder `var_name` of `scope` (Paddle's
    `core.get_fetch_variable`); an error naming the holder when it has no such column."""
    var = scope.find_var(var_name)
    if var is None:
        raise EnforceNotMet(f"get_fetch_variable: no fetch holder '{var_name}' in the scope")
    holder = var.get_fetch_list()
    if not 0 <= index < len(holder) or holder[index] is None:
        raise EnforceNotMet(f"get_fetch_variable: the fetch holder '{var_name}' has "
                            f"{len(holder)} columns and nothing in column {index}")
    return holder[index]
