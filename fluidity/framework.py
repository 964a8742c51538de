"""Program, Block, Variable, Parameter, Operator: the builder's views over the ProgramDesc.

The protobuf `ProgramDesc` is the single source of truth. These classes are the IR's views
(`fluidity.ir.views`) plus what building a program needs: creating variables and parameters,
appending ops with shape inference, the op-role and name-scope context, default programs,
`clone`. Every change goes to the desc through `fluidity.ir.rewrite`. What Paddle also keeps
only in Python (a Parameter's trainable flag, initializer, regularizer) lives on the Python
objects, as in Paddle; everything an executor needs to run is in the desc.
"""
import contextlib
import warnings
import difflib
import os

import numpy as np
import re
import sys
import traceback

from . import unique_name
from .core import defaults, dtypes
from .core.dtypes import VarType
from .core.serialization import read_file
from .core.names import EMPTY_VAR_NAME, GRAD_SUFFIX, OpRole, grad_var_name  # noqa: F401
from .core.names import CONTROL_DEP_VAR_PREFIX, TEMP_VAR_NAME  # noqa: F401
from .core.names import ZERO_SUFFIX as ZERO_VAR_SUFFIX  # noqa: F401  (Fluid's names)
GRAD_VAR_SUFFIX = GRAD_SUFFIX
from .errors import (ArgumentTypeError, DTypeError, ProgramError, ProgramFormatError,
                     ShapeError, UnknownOpError)
from .ir import desc_check, rewrite
from .ir.format import format_block, format_op, format_program, format_var  # noqa: F401
from .ir import readable as _readable
from .ir.infer_shape import InferShapeContext  # noqa: F401
from .ir.op_desc import OpDesc
from .ir.op_proto import OpProtoHolder  # noqa: F401 -- Fluid's framework.OpProtoHolder
from .ir.views import (TENSORLIKE, BlockView, OpView, ProgramView, VarView, clear_dtype,
                       copy_data_marks)
from .ops import registry
from .proto import framework_pb2 as pb
from .transpiler import inference, prune
# places, modes and versions (the end of this file)
from .core.place import (CPUPlace, CUDAPinnedPlace, CUDAPlace, cuda_emulated,  # noqa: F401
                         get_cuda_device_count, is_compiled_with_cuda, require_device,
                         cpu_places, cuda_pinned_places, cuda_places)
from .errors import declined

# Program version written into saved programs (Paddle 2.6.0 as major*1e6+minor*1e3+patch).
CURRENT_PROGRAM_VERSION = 2006000


# ---------------------------------------------------------------------------------------
# name scopes and op roles (build-time context)
# ---------------------------------------------------------------------------------------
class NameScope:
    """One node of Fluid's tree of name scopes. Entering `name_scope(p)` again under the
    same parent makes a new child `p_1`, `p_2`, ... (Fluid's rule), so two uses of one
    prefix stay apart in the ops' `op_namescope` ('/s1/' then '/s1_1/')."""

    def __init__(self, name="", parent=None):
        self._children = {}
        self._name = name
        self._parent = parent

    def child(self, prefix):
        kids = self._children.setdefault(prefix, [])
        kid = NameScope(prefix if not kids else f"{prefix}_{len(kids)}", self)
        kids.append(kid)
        return kid

    def parent(self):
        return self._parent

    def name(self):
        return self._name


_name_scope = NameScope()
_op_role_stack = [OpRole.Forward]
# the op_role_var an op built now records (Program._optimized_guard sets it)
_op_role_var_stack = [[]]


@contextlib.contextmanager
def name_scope(prefix=None):
    """Group the ops built inside under a name, recorded in their `op_namescope`
    attribute ('/outer/inner/'); a prefix used again under the same scope gets a suffix
    (`_1`, `_2`, ...), as in Fluid. The prefix must not be empty (AssertionError, as
    Fluid's)."""
    global _name_scope
    assert prefix, "namescope prefix can not be empty."
    _name_scope = _name_scope.child(prefix)
    try:
        yield
    finally:
        _name_scope = _name_scope.parent()


_current_device = None       # fluid.device_guard's device for the ops built in its context


@contextlib.contextmanager
def device_guard(device=None):
    """Ops built in the context get `op_device` = device ('cpu' or 'gpu'; '' or None: no
    choice), as Fluid 1.8 records it; an op without a kernel (control flow, feed/fetch, I/O)
    gets none, with a warning. The executors here run every op on the place they were
    given, so the attribute is kept for the program's readers (and Paddle), not acted on."""
    global _current_device
    if device not in ("cpu", "gpu", "", None):
        raise ValueError(f"The Attr(device) should be 'cpu' or 'gpu', and it can also be "
                         f"empty string or None when there is no need to specify device. "
                         f"But received {device}")
    previous, _current_device = _current_device, device
    try:
        yield
    finally:
        _current_device = previous


def _full_name_scope():
    """The current name scope as Fluid writes it in `op_namescope`: '/', '/s1/', ..."""
    names, scope = [], _name_scope
    while scope is not None and scope.parent() is not None:
        names.append(scope.name())
        scope = scope.parent()
    return "/" + "".join(n + "/" for n in reversed(names))


_current_namescope = _full_name_scope


@contextlib.contextmanager
def op_role_guard(role):
    _op_role_stack.append(role)
    try:
        yield
    finally:
        _op_role_stack.pop()


_PKG_DIR = os.path.dirname(os.path.abspath(__file__))


def _user_callsite():
    """'file:line' of the innermost frame outside the fluidity package (for error messages)."""
    f = sys._getframe(2)
    while f is not None:
        fn = f.f_code.co_filename
        if not os.path.abspath(fn).startswith(_PKG_DIR):
            return f"{fn}:{f.f_lineno}"
        f = f.f_back
    return ""


# ---------------------------------------------------------------------------------------
# Variable, Parameter, Operator
# ---------------------------------------------------------------------------------------
def _check_to_string_args(throw_on_error, with_details):
    assert isinstance(throw_on_error, bool) and isinstance(with_details, bool), (
        "throw_on_error and with_details of to_string must be bools")


def _check_initialized(message, what):
    """ValueError naming the required fields `message` lacks (Fluid's `_debug_string_`)."""
    missing = message.FindInitializationErrors()
    if missing:
        raise ValueError(f"{missing} are not initialized.\nThe message of the {what} is:\n"
                         f"{message}")


def _var_line(var):
    """ir/readable.py's line of a variable, a Parameter's marked (trainable or not)."""
    is_param = isinstance(var, Parameter) or bool(getattr(var.desc, "is_parameter", False))
    return _readable.var_code(var, is_param, bool(getattr(var, "trainable", True)))


class Variable(VarView):
    """A variable of a block being built. `a + b`, `x * 2.0`, ... build elementwise ops
    (`layers/math_op_patch.py` adds them)."""

    def __init__(self, block, type=VarType.LOD_TENSOR, name=None, shape=None, dtype=None,
                 lod_level=None, capacity=None, persistable=None, error_clip=None,
                 stop_gradient=False, is_data=False, need_check_feed=False,
                 belong_to_optimizer=False, **kwargs):
        """A view of a VarDesc of `block`. Internally `Variable(block, var_desc)`; Fluid's
        form `Variable(block, name=..., shape=..., dtype=...)` declares the variable in the
        block first (or takes the one already declared under that name), as Fluid does."""
        if isinstance(type, pb.VarDesc):
            desc = type
        else:
            desc = block.create_var(name=name, shape=shape, dtype=dtype, type=type,
                                    lod_level=lod_level, persistable=persistable,
                                    stop_gradient=stop_gradient,
                                    need_check_feed=need_check_feed or is_data).desc
        super().__init__(block, desc)
        self.op = None  # the op that last wrote it at build time (for layers' convenience)
        # a variable layers.data / fluid.data declared, as Fluid marks it on the Python side
        # (not in the desc; clone and _copy_data_info_from carry it over, as Fluid's do)
        self.is_data = bool(is_data)

    @property
    def name(self):
        return self.desc.name

    @name.setter
    def name(self, new):
        rewrite.rename_var(self.block, self.desc.name, new)

    def _set_info(self, key, value):
        """Attach a Python value to this variable object under `key` (Fluid's private
        `_set_info`, used by its distributed code to mark variables; not part of the
        desc, so neither saved nor cloned)."""
        self.__dict__.setdefault("_info", {})[key] = value

    def _get_info(self, key):
        """The value `_set_info` attached under `key`, None when there is none."""
        return self.__dict__.get("_info", {}).get(key)

    @property
    def grad_name(self):
        """The name of this variable's gradient, `<name>@GRAD`."""
        return grad_var_name(self.name)

    def to_string(self, throw_on_error=False, with_details=False):
        _check_to_string_args(throw_on_error, with_details)
        if throw_on_error:
            _check_initialized(self.desc, f"variable '{self.name}'")
        return format_var(self, details=with_details)

    def _to_readable_code(self):
        """Fluid 1.8's one-line text of this variable (ir/readable.py)."""
        return _var_line(self)

    __str__ = to_string

    def __repr__(self):
        return f"Variable({format_var(self)})"

    def astype(self, dtype):
        """A new variable holding this one cast to `dtype` (a `cast` op, as Fluid's
        static-graph `Variable.astype`)."""
        out = self.block.create_var(name=unique_name.generate("cast.tmp"), dtype=dtype,
                                    shape=self.shape, lod_level=self.lod_level)
        self.block.append_op("cast", inputs={"X": [self]}, outputs={"Out": [out]},
                             attrs={"in_dtype": self.dtype, "out_dtype": out.dtype})
        return out

    __hash__ = object.__hash__

    def __getitem__(self, item):
        """`x[i]`, `x[a:b]`, `x[:, ::2]`, `x[::-1]`, `x[var]`: a `slice` op (`strided_slice`
        when a step is not 1; `reverse` for a whole axis walked backwards), as Fluid 1.8
        builds it. An int (or a Variable) index drops its axis (decrease_axis); dropping
        every axis leaves shape [1], as Fluid 1.x's slice does."""
        return _getitem(self, item)

    def __iter__(self):
        # without this, iterating would call __getitem__(0), (1), ... and build slice ops
        # without end (a -1 dim has no last index)
        raise TypeError(f"Variable '{self.name}' is not iterable (it is a node of a "
                        f"program, not a value): index it (x[i]) or pass a list of Variables")


_OPEN_END = 10000000   # Fluid's end of an open slice (`x[a:]`)


def _index_tensor(block, value):
    """An int32 [1] tensor holding `value` (a Variable as is), for a slice bound."""
    if isinstance(value, Variable):
        value.stop_gradient = True
        return value
    out = block.create_var(name=unique_name.generate("_generated_var"), dtype="int32",
                           shape=[1])
    block.append_op("fill_constant", outputs={"Out": out},
                    attrs={"shape": [1], "dtype": out.dtype, "value": float(value),
                           "force_cpu": True})
    out.stop_gradient = True
    return out


def _getitem(var, item):
    items = item if isinstance(item, tuple) else (item,)
    if len(items) > max(len(var.shape), 1):
        raise IndexError(f"too many indices for Variable '{var.name}' of shape "
                         f"{list(var.shape)}: {len(items)}")
    block = var.block
    axes, starts, ends, steps, decrease, reverse = [], [], [], [], [], []
    for dim, it in enumerate(items):
        if isinstance(it, slice):
            if it.start is None and it.stop is None and it.step is None:
                continue
            step = 1 if it.step is None else it.step
            if it.start is None and it.stop is None and step < 0:
                if step != -1:
                    raise IndexError(f"Variable '{var.name}'[{item!r}]: a whole axis "
                                     f"walked back with step {step}; only ::-1 is supported")
                reverse.append(dim)
                continue
            axes.append(dim)
            starts.append(0 if it.start is None else it.start)
            ends.append(_OPEN_END if it.stop is None else it.stop)
            steps.append(step)
        elif isinstance(it, Variable) or (isinstance(it, int) and not isinstance(it, bool)):
            size = var.shape[dim] if dim < len(var.shape) else -1
            if isinstance(it, int) and size >= 0 and not -size <= it < size:
                raise IndexError(f"index {it} is out of range for dim {dim} (size {size}) "
                                 f"of Variable '{var.name}'")
            axes.append(dim)
            decrease.append(dim)
            starts.append(it)
            steps.append(1)
            if isinstance(it, Variable):
                one = _index_tensor(block, 1)
                end = block.create_var(name=unique_name.generate("_generated_var"),
                                       dtype="int32", shape=[1])
                block.append_op("elementwise_add", {"X": it, "Y": one}, {"Out": end},
                                {"axis": -1})
                ends.append(end)
            else:
                ends.append(it + 1 if it != -1 else _OPEN_END)
        else:
            raise TypeError(f"Variable '{var.name}' indexed by {type(it).__name__}: use "
                            f"ints, slices or int Variables")
    out = var
    if axes:
        strided = any(s != 1 for s in steps)
        inputs = {"Input": [var]}
        attrs = {"axes": axes, "decrease_axis": decrease}
        for key, slot, values in (("starts", "StartsTensorList", starts),
                                  ("ends", "EndsTensorList", ends),
                                  ("strides", "StridesTensorList", steps if strided else None)):
            if values is None:
                continue
            if any(isinstance(v, Variable) for v in values):
                inputs[slot] = [_index_tensor(block, v) for v in values]
                attrs[key] = [-1 if isinstance(v, Variable) else v for v in values]
            else:
                attrs[key] = list(values)
        flags = [1] * len(axes)
        for k in range(len(axes)):
            if any(isinstance(v[k], Variable) for v in (starts, ends, steps)):
                flags[k] = -1
        attrs["infer_flags"] = flags
        kind = "strided_slice" if strided else "slice"
        out = block.create_var(name=unique_name.generate_with_ignorable_key(
            f"{var.name}_{kind}"), dtype=var.dtype)
        block.append_op(kind, inputs, {"Out": [out]}, attrs)
    if reverse:
        rev = block.create_var(name=unique_name.generate_with_ignorable_key(
            f"{var.name}_slice_reverse"), dtype=var.dtype)
        block.append_op("reverse", {"X": out}, {"Out": [rev]}, {"axis": reverse})
        out = rev
    return out


class Parameter(Variable):
    """A persistable variable that training updates. Python-side attributes follow Fluid."""

    def __init__(self, block, desc, trainable=True, optimize_attr=None, regularizer=None,
                 gradient_clip_attr=None, do_model_average=None, initializer=None):
        super().__init__(block, desc)
        self.trainable = trainable
        self.optimize_attr = optimize_attr or {"learning_rate": 1.0}
        self.regularizer = regularizer
        self.gradient_clip_attr = gradient_clip_attr
        self.do_model_average = do_model_average
        self.initializer = initializer

    def __repr__(self):
        return f"Parameter({format_var(self)})"


def _py_attr(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


class Operator(OpView):
    """An op of a block being built. Its `desc` is Paddle's OpDesc API over the op's desc
    message (`op.desc.type()`, `op.desc.set_attr(...)`, `op.desc.infer_shape(block.desc)`;
    `op.desc.proto` is the message itself): ir/op_desc.py."""

    @property
    def desc(self):
        return self._desc

    @desc.setter
    def desc(self, od):
        self._desc = OpDesc(od, self)

    @property
    def type(self):
        return self._desc.proto.type

    def _rename_input(self, old, new):
        for v in self.desc.inputs:
            for i, a in enumerate(v.arguments):
                if a == old:
                    v.arguments[i] = new
        rewrite.touch(self.block.program)

    def _rename_output(self, old, new):
        for v in self.desc.outputs:
            for i, a in enumerate(v.arguments):
                if a == old:
                    v.arguments[i] = new
        rewrite.touch(self.block.program)

    def set_input(self, slot, names):
        rewrite.set_inputs(self, slot, names)

    def set_output(self, slot, names):
        rewrite.set_outputs(self, slot, names)

    def _set_attr(self, name, value):
        rewrite.set_attr(self, name, value)

    _update_desc_attr = _set_attr

    def _block_attr_id(self, name):
        return self.attr(name)

    def attr_type(self, name):
        """The `core.AttrType` attribute `name` is stored as (the desc's, else the op
        schema's)."""
        return self._desc.attr_type(name)

    def to_string(self, throw_on_error=False):
        if throw_on_error:
            _check_initialized(self.desc.proto, f"op '{self.type}'")
        return format_op(self)

    def _to_readable_code(self, skip_op_callstack=True):
        """Fluid 1.8's one-line text of this op (ir/readable.py)."""
        return _readable.op_code(self, skip_op_callstack)

    __str__ = to_string

    def __repr__(self):
        return f"Operator({format_op(self)})"


# ---------------------------------------------------------------------------------------
# Block
# ---------------------------------------------------------------------------------------
# ops that write a parameter in place without initializing it (Block.create_parameter)
_NOT_INIT_OPS = frozenset({"c_broadcast", "c_sync_comm_stream"})


class Block(BlockView):
    def wrap_var(self, var_desc):
        return (Parameter if var_desc.is_parameter else Variable)(self, var_desc)

    def wrap_op(self, op_desc):
        return Operator(self, op_desc)

    def _set_forward_block_idx(self, idx):
        self.desc.forward_block_idx = idx

    # -- variables --------------------------------------------------------------------
    def create_var(self, name=None, shape=None, dtype=None, type=VarType.LOD_TENSOR,
                   lod_level=None, persistable=None, stop_gradient=False, error_clip=None,
                   need_check_feed=False, **kwargs):
        if name is None:
            name = unique_name.generate("_generated_var")
        if isinstance(dtype, str) or dtype is not None and not isinstance(dtype, int):
            dtype = dtypes.to_code(dtype)
        if name in self.vars:  # Fluid semantics: re-declaring returns the same variable
            v = self.vars[name]
            if shape is not None and v.type in TENSORLIKE:
                if v.shape and tuple(int(d) for d in shape) != tuple(v.shape):
                    raise ValueError(f"Variable {name} has been created before. the previous "
                                     f"shape is {v.shape}; the new shape is {tuple(shape)}. "
                                     f"They are not matched.")
                v._set_shape(shape)
            if dtype is not None:
                if v.dtype is not None and v.shape and dtype != v.dtype:
                    raise ValueError(f"Variable {name} has been created before. The previous "
                                     f"data type is {dtypes.name(v.dtype)}; the new data type "
                                     f"is {dtypes.name(dtype)}. They are not matched.")
                v._set_dtype(dtype)
            if persistable is not None:
                v.persistable = persistable
            return v
        v = rewrite.add_var(self, name, type, shape, dtype, lod_level, persistable,
                            stop_gradient, need_check_feed)
        if dtype is None:   # Fluid leaves it unset: an op's shape inference gives it one
            clear_dtype(v.desc)
        if _dygraph_tracer_ is not None:   # eager mode: a variable with a value (dygraph/)
            v = _dygraph_tracer_.eager_var(v)
        return v

    def create_parameter(self, name=None, shape=None, dtype="float32", type=VarType.LOD_TENSOR,
                         trainable=True, initializer=None, regularizer=None,
                         optimize_attr=None, gradient_clip_attr=None, do_model_average=None,
                         stop_gradient=False, **kwargs):
        """A Parameter of the program's global block (whichever block is asked, as Fluid).
        With `initializer`, its init op goes into this block (Fluid's rule: a layer creates
        the parameter in the startup program's block with the initializer and in the main
        program's without), unless an op there already writes it."""
        if shape is None:
            raise ValueError("The shape of Parameter should not be None")
        if dtype is None:
            raise ValueError("The dtype of Parameter should not be None")
        if len(shape) == 0:
            raise ValueError("The dimensions of shape for Parameter must be greater than 0")
        if any(int(d) < 0 for d in shape):
            raise ShapeError(f"Each dimension of shape for Parameter must be greater than 0, "
                             f"but received {list(shape)} (parameter '{name}')")
        if name is None:
            name = unique_name.generate("_generated_var")
        block = self.program.global_block()
        if name in block.vars:  # Fluid shares a parameter among layers by name
            old = block.vars[name]
            if not isinstance(old, Parameter) or list(old.shape) != [int(d) for d in shape] \
                    or old.dtype != dtypes.to_code(dtype):
                raise ProgramError(
                    f"cannot create parameter '{name}' {list(shape)} {dtypes.name(dtype)}: "
                    f"block {block.idx} already has {format_var(old)}")
            p = old
        else:
            p = rewrite.add_var(block, name, type, shape, dtypes.to_code(dtype), 0,
                                persistable=True, stop_gradient=stop_gradient,
                                is_parameter=True)
            Parameter.__init__(p, block, p.desc, trainable=trainable,
                               optimize_attr=optimize_attr, regularizer=regularizer,
                               gradient_clip_attr=gradient_clip_attr,
                               do_model_average=do_model_average, initializer=initializer)
        if initializer is not None:
            # a collective program broadcasts each parameter after its initializer (in
            # place): those ops pass a value on, they do not initialize it (as in Fluid)
            writers = [op for op in block.ops if name in op.output_arg_names
                       and op.type not in _NOT_INIT_OPS]
            if len(writers) > 1:
                raise RuntimeError(f"param {name} is inited by multiple init ops "
                                   f"{[op.type for op in writers]}")
            if not writers:
                initializer(p, self)
        return p

    # Fluid's names for the views' lookups
    _find_var_recursive = BlockView.find_var_recursive
    _var_recursive = BlockView.var_recursive

    def all_parameters(self):
        return [v for v in self.vars.values() if isinstance(v, Parameter)]

    def iter_parameters(self):
        return iter(self.all_parameters())

    def _remove_var(self, name):
        rewrite.remove_vars(self, [name])

    def _remove_vars(self, names):
        rewrite.remove_vars(self, names)

    def _rename_var(self, old, new):
        return rewrite.rename_var(self, old, new)

    # -- ops --------------------------------------------------------------------------
    def append_op(self, type=None, inputs=None, outputs=None, attrs=None, infer_shape=True,
                  **kwargs):
        tracer = _dygraph_tracer_
        if tracer is None:
            return self._insert_op(len(self.ops), type, inputs, outputs, attrs, infer_shape)
        # eager mode (dygraph/): the op is recorded as in a static program, then run at once
        tracer.sync_vars(self, inputs)
        op = self._insert_op(len(self.ops), type, inputs, outputs, attrs, infer_shape)
        tracer.run_op(op)
        return op

    def prepend_op(self, type=None, inputs=None, outputs=None, attrs=None, infer_shape=True,
                   **kwargs):
        return self._insert_op(0, type, inputs, outputs, attrs, infer_shape)

    def _insert_op(self, index, type=None, inputs=None, outputs=None, attrs=None,
                   infer_shape=True):
        """Insert an op built in the current context: its op_role (op_role_guard), name
        scope and the user's call site are recorded; shapes are inferred."""
        if type is None:
            raise ValueError("`type` to initialized an Operator can not be None.")
        if not isinstance(type, str) or registry.find(type) is None:
            close = difflib.get_close_matches(str(type), list(registry.all_ops()), n=3)
            raise UnknownOpError(f'Operator "{type}" has not been registered.' + (
                f" (did you mean {', '.join(close)}?)" if close else ""))
        opdef = registry.get(type)
        # numpy values are taken as the Python values they hold (as Fluid's pybind does)
        attrs = {k: _py_attr(v) for k, v in (attrs or {}).items()}
        # the attributes Fluid 1.8 writes on every op it builds
        attrs.setdefault("op_role", _op_role_stack[-1])
        attrs.setdefault("op_role_var", list(_op_role_var_stack[-1]))
        attrs.setdefault("op_namescope", _current_namescope())
        site = _user_callsite()
        attrs.setdefault("op_callstack", [site] if site else [])
        if _current_device is not None:
            if opdef.kind != "ctx":
                attrs["op_device"] = _current_device
            else:
                warnings.warn(f"The Op({type}) is not support to set device.")
            if "force_cpu" in attrs and (attrs["force_cpu"] is not False or (
                    type == "less_than" and attrs["force_cpu"] is not None)):
                warnings.warn(f"The Attr(force_cpu) of Op({type}) will be deprecated in the "
                              f"future, please use 'device_guard' instead. 'device_guard' has "
                              f"higher priority when they are used at the same time.")
        attrs.setdefault("op_device", "")
        op = rewrite.insert_op(self, index, type, inputs, outputs, attrs,
                               infer_shape=infer_shape and opdef.infer_shape is not None)
        for n in op.output_arg_names:
            v = self.find_var_recursive(n)
            if v is not None:
                v.op = op
        return op

    _insert_op_without_sync = _insert_op

    _prepend_op = prepend_op

    def _remove_op(self, index, end=None):
        rewrite.remove_ops(self, index, end)

    def _sync_with_desc(self):
        """Rebuild the wrappers after the desc was changed directly (variables that were
        there keep their Python objects: a Parameter its trainable flag, regularizer...)."""
        old, old_ops = self.vars, {id(op.desc.proto): op for op in self.ops}
        self.__init__(self.program, self.idx)
        for name, v in list(self.vars.items()):
            keep = old.get(name)
            if keep is not None and type(keep) is type(v):
                keep.desc = v.desc
                self.vars[name] = keep
        # and the ops that were there keep theirs (an OpTest holds its op object)
        self.ops = [old_ops.get(id(op.desc.proto), op) for op in self.ops]

    _sync_with_cpp = _sync_with_desc

    def to_string(self, throw_on_error=False, with_details=False):
        _check_to_string_args(throw_on_error, with_details)
        if throw_on_error:
            _check_initialized(self.desc, f"block {self.idx}")
        return format_block(self, details=with_details)

    def _to_readable_code(self, skip_op_callstack=True):
        """Fluid 1.8's text of this block: its variables, then its ops (ir/readable.py)."""
        return _readable.block_code(self, _var_line, skip_op_callstack)

    __str__ = to_string

    def __repr__(self):
        return f"Block({self.idx}, {len(self.vars)} vars, {len(self.ops)} ops)"


# ---------------------------------------------------------------------------------------
# Program
# ---------------------------------------------------------------------------------------
class Program(ProgramView):
    def __init__(self, desc=None):
        self._random_seed = 0
        if desc is None:
            desc = pb.ProgramDesc()
            b = desc.blocks.add()
            b.idx, b.parent_idx = 0, -1
            desc.version.version = CURRENT_PROGRAM_VERSION
        super().__init__(desc)
        self.current_block_idx = 0
        self.random_seed = 0
        self._is_test = False
        self._sync_version_map()

    def wrap_block(self, idx):
        return Block(self, idx)

    @property
    def random_seed(self):
        return self._random_seed

    @random_seed.setter
    def random_seed(self, seed):
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise ValueError(f"Program.random_seed's input seed must be an integer, but "
                             f"received {type(seed).__name__}")
        self._random_seed = seed

    def _sync_with_cpp(self):
        """Bring the Python views in step with the desc after it was changed directly
        (`program.desc.append_block`, `block.desc._remove_op`, ...), as Fluid's."""
        for i in range(len(self.blocks), len(self.desc.blocks)):
            self.blocks.append(self.wrap_block(i))
        for b in self.blocks:
            b._sync_with_desc()
        rewrite.touch(self)

    @contextlib.contextmanager
    def _optimized_guard(self, param_and_grads):
        """Ops built inside get Fluid's Optimize role and record `param_and_grads` (variables
        or names) as their op_role_var, as the optimizer's own update ops do: model scripts
        that write their own update step use this."""
        names = [v.name if isinstance(v, Variable) else v for v in param_and_grads]
        _op_role_var_stack.append(names)
        try:
            with op_role_guard(OpRole.Optimize):
                yield
        finally:
            _op_role_var_stack.pop()

    @contextlib.contextmanager
    def _lr_schedule_guard(self, is_with_opt=False):
        """Ops built inside get Fluid's LRSched role (LRSched | Optimize with `is_with_opt`,
        for learning-rate ops among the update ops) and no op_role_var. Fluid 1.8's model
        scripts (the Transformer's noam decay) build their learning-rate schedule in one."""
        role = OpRole.LRSched | OpRole.Optimize if is_with_opt else OpRole.LRSched
        _op_role_var_stack.append([])
        try:
            with op_role_guard(role):
                yield
        finally:
            _op_role_var_stack.pop()

    def _copy_param_info_from(self, other):
        """Give this program's parameters the Python-side attributes (trainable, optimize
        and regularizer settings, ...) of `other`'s of the same names, as Fluid's (for a
        program rebuilt from `other`'s desc)."""
        if not isinstance(other, Program):
            raise TypeError(f"_copy_param_info_from should be invoked with Program, got "
                            f"{type(other).__name__}")
        block = self.global_block()
        for p in other.global_block().all_parameters():
            v = block.vars.get(p.name)
            if v is None:
                continue
            block.vars[p.name] = Parameter(block, v.desc, p.trainable, p.optimize_attr,
                                           p.regularizer, p.gradient_clip_attr,
                                           p.do_model_average, p.initializer)

    def _copy_data_info_from(self, other, pruned_origin_block_id_map=None):
        """Fluid's: every variable of this program takes `is_data`, `need_check_feed` and
        `stop_gradient` from its namesake in `other` (block i of this program reads block
        `pruned_origin_block_id_map[i]` of `other`, i by default); a variable `other` lacks
        is a ValueError, as Fluid's `block.var`."""
        if not isinstance(other, Program):
            raise TypeError(f"Function Program._copy_data_info_from() needs to pass in a "
                            f"source Program, but received {type(other).__name__}")
        copy_data_marks(self, other, pruned_origin_block_id_map, strict=True)

    def _copy_dist_param_info_from(self, other):
        """Copy the distributed-training marks of `other` (a transpiled program's
        `_is_distributed`, endpoints, ...), as Fluid's."""
        if not isinstance(other, Program):
            raise TypeError(f"_copy_dist_param_info_from should be invoked with Program, got "
                            f"{type(other).__name__}")
        for name in ("_is_distributed", "_is_chief", "_parameters_on_pservers", "_endpoints",
                     "_ps_endpoint", "_trainers_endpoints", "_distributed_lookup_table"):
            if hasattr(other, name):
                setattr(self, name, getattr(other, name))

    # -- structure ---------------------------------------------------------------------
    def current_block(self):
        return self.blocks[self.current_block_idx]

    def _create_block(self, parent_idx=None):
        parent = self.current_block_idx if parent_idx is None else parent_idx
        block = rewrite.add_block(self, parent)
        self.current_block_idx = block.idx
        return block

    def _rollback(self):
        self.current_block_idx = self.current_block().parent_idx

    def all_parameters(self):
        return [p for b in self.blocks for p in b.all_parameters()]

    # -- (de)serialization -------------------------------------------------------------
    def _sync_version_map(self):
        """Record the version of every op type used (Paddle's op_version_map)."""
        used = {od.type for bd in self.desc.blocks for od in bd.ops}
        have = {p.op_name for p in self.desc.op_version_map.pair}
        for t in sorted(used - have):
            opdef = registry.find(t)
            if opdef is not None and opdef.version:
                pair = self.desc.op_version_map.pair.add()
                pair.op_name = t
                pair.op_version.version = opdef.version

    def serialize_to_string(self):
        """The desc's bytes. As Fluid's, a desc missing a required field (a variable declared
        without a dtype that no op has given one) is written as it is; reading it back
        names the missing field."""
        self._sync_version_map()
        return self.desc.SerializePartialToString()

    def _serialize(self):
        return self.serialize_to_string()

    @staticmethod
    def parse_from_string(binary_str):
        """A Program from a serialized ProgramDesc, checked before use (ir.desc_check):
        corrupt bytes raise ProgramFormatError (a ValueError) naming the field at fault."""
        return Program(desc_check.parse_program_desc(binary_str))

    @staticmethod
    def _construct_from_desc(desc):
        return Program(desc)

    def clone(self, for_test=False):
        """A deep copy. for_test=True: inference copy (backward/optimizer ops dropped,
        `is_test` attributes set)."""
        p = Program(rewrite.copy_program(self.desc))  # our own desc: no need to check it
        p.random_seed = self.random_seed
        p._is_test = for_test
        # carry Python-side Parameter attributes over
        for b_old, b_new in zip(self.blocks, p.blocks):
            for name, v in b_old.vars.items():
                if isinstance(v, Parameter):
                    nv = b_new.vars[name]
                    np_ = Parameter(b_new, nv.desc, v.trainable, v.optimize_attr, v.regularizer,
                                    v.gradient_clip_attr, v.do_model_average, v.initializer)
                    b_new.vars[name] = np_
                else:
                    b_new.vars[name].stop_gradient = v.stop_gradient
        copy_data_marks(p, self)
        if for_test:
            inference.make_inference_program(p)
        return p

    def _prune(self, targets):
        """A new Program with what `targets` (Variables, Operators' outputs or names) need
        (Paddle's name)."""
        return self._prune_with_input([], targets)

    def _prune_with_input(self, feeded_var_names, targets):
        """A new Program with what `targets` need given that `feeded_var_names` are fed
        (feeding a variable cuts off its producers)."""
        def names(xs, what, ops):
            out = []
            for x in xs if isinstance(xs, (list, tuple, set)) else [xs]:
                if isinstance(x, str):
                    out.append(x)
                elif isinstance(x, VarView):
                    out.append(x.name)
                elif ops is not None and isinstance(x, OpView):   # an op to run, as Fluid
                    if x.block is None or x.block.idx != 0 or x.block.program is not self:
                        raise ValueError(f"Program._prune_with_input: the target op "
                                         f"'{x.type}' is not an op of this program's "
                                         f"global block")
                    ops.append(x.idx)
                else:
                    kinds = "Variable or Operator" if ops is not None else "str"
                    raise ValueError(f"All {what} of Program._prune_with_input() can only be "
                                     f"{kinds}, but received {type(x)}.")
            return out
        feeds = names(feeded_var_names, "feeded_var_names", None)
        target_ops = []
        targets = names(targets, "targets", target_ops)
        prune.check_targets(self, targets)
        p = Program(prune.prune_desc(self.desc, targets, feeds, target_ops))
        copy_data_marks(p, self, {0: 0})      # the global block keeps its index
        return p

    def _inference_optimize(self, prune_read_op=True):
        """A copy for inference as Fluid's (transpiler.prune.inference_optimize on a copy):
        every `is_test` attribute set to True and, with `prune_read_op`, the reader ops
        (`read` and what feeds it) and reader variables dropped, so the copy is fed by feed
        ops."""
        p = Program(rewrite.copy_program(self.desc))
        p.random_seed = self.random_seed
        return prune.inference_optimize(p, prune_read_op)

    def to_string(self, throw_on_error=False, with_details=False):
        """The program as readable text; `with_details` adds every variable flag and op
        attribute; `throw_on_error` raises ValueError when the desc lacks a required field
        (Fluid's check before printing)."""
        _check_to_string_args(throw_on_error, with_details)
        if throw_on_error:
            _check_initialized(self.desc, "program")
        return format_program(self, details=with_details)

    def _to_readable_code(self, skip_op_callstack=True):
        """Fluid 1.8's text of this program, block after block (ir/readable.py)."""
        return _readable.program_code(self, _var_line, skip_op_callstack)

    __str__ = to_string

    def __repr__(self):
        return (f"Program({len(self.blocks)} blocks, "
                f"{sum(len(b.ops) for b in self.blocks)} ops)")


# ---------------------------------------------------------------------------------------
# default programs (held in core.defaults, where the executor finds the main one)
# ---------------------------------------------------------------------------------------
defaults.set_main_program(Program())
defaults.set_startup_program(Program())


def default_main_program():
    return defaults.main_program()


def _get_var(name, program=None):
    """Variable `name` of the global block of `program` (default: the main program)."""
    program = program if program is not None else default_main_program()
    if not isinstance(name, str) or not isinstance(program, Program):
        raise TypeError(f"_get_var(name, program): a str and a Program, got "
                        f"{type(name).__name__} and {type(program).__name__}")
    return program.global_block().var(name)


def convert_np_dtype_to_dtype_(np_dtype):
    """The VarType of a numpy dtype (DTypeError, a TypeError, for one with none)."""
    return dtypes.to_code(np.dtype(np_dtype))


def default_startup_program():
    return defaults.startup_program()


def switch_main_program(program):
    return defaults.set_main_program(program)


def switch_startup_program(program):
    return defaults.set_startup_program(program)


@contextlib.contextmanager
def program_guard(main_program, startup_program=None):
    """Build into `main_program` (and put initializers into `startup_program`)."""
    if not isinstance(main_program, Program):
        raise TypeError("program_guard: main_program must be a Program")
    old_main = switch_main_program(main_program)
    old_startup = None
    if startup_program is not None:
        if not isinstance(startup_program, Program):
            raise TypeError("program_guard: startup_program must be a Program")
        old_startup = switch_startup_program(startup_program)
    try:
        yield
    finally:
        switch_main_program(old_main)
        if old_startup is not None:
            switch_startup_program(old_startup)


# ---------------------------------------------------------------------------------------
# places, modes and versions (Fluid 1.x defines these in framework.py too)
# ---------------------------------------------------------------------------------------
FLUID_API_VERSION = "1.8.0"   # the Fluid API level Fluidity implements (fluidity/version.py)


# cpu_places / cuda_places / cuda_pinned_places: core/place.py (imported above)


# The tracer of the eager mode (fluidity/dygraph/) while a `fluid.dygraph.guard()` is
# active, else None: Block.create_var and Block.append_op then give variables values and run
# ops as they are appended.
_dygraph_tracer_ = None


def in_dygraph_mode():
    """Whether a `fluid.dygraph.guard()` is active (ops run as they are appended)."""
    return _dygraph_tracer_ is not None


def _dygraph_tracer():
    return _dygraph_tracer_


@contextlib.contextmanager
def _dygraph_guard(tracer):
    """Make `tracer` the eager mode's tracer inside the block (Fluid's name)."""
    global _dygraph_tracer_
    prev, _dygraph_tracer_ = _dygraph_tracer_, tracer
    try:
        yield
    finally:
        _dygraph_tracer_ = prev


_in_dygraph_mode = in_dygraph_mode      # Fluid 1.8's private spelling, which its code calls


class OpProtoHolder:
    """Fluid's `OpProtoHolder.instance().get_op_proto(type)`: the OpProto (framework.proto's
    message: input/output slots with their duplicable/dispensable/intermediate flags,
    attributes with their types, the op's comment) of a registered op, made from its
    OpDef."""
    _instance = None

    @classmethod
    def instance(cls):
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def __init__(self):
        self._protos = {}

    def get_op_proto(self, type):
        proto = self._protos.get(type)
        if proto is None:
            if registry.find(type) is None:
                raise ValueError(f'Operator "{type}" has not been registered.')
            proto = self._protos[type] = _op_proto(registry.get(type))
        return proto

    def update_op_proto(self):
        self._protos.clear()

    @staticmethod
    def generated_op_attr_names():
        return {"op_role", "op_role_var", "op_namescope", "op_callstack", "op_device"}


def _op_proto(opdef):
    proto = pb.OpProto(type=opdef.type, comment=opdef.doc or opdef.type)
    for slots, field in ((opdef.inputs, proto.inputs), (opdef.outputs, proto.outputs)):
        for s in slots:
            field.add(name=s.name, comment=s.name, duplicable=s.duplicable,
                      dispensable=s.dispensable, intermediate=bool(getattr(s, "intermediate",
                                                                           False)))
    for name, default in sorted(opdef.defaults().items()):
        t = opdef.attr_type(name)
        if t is None:
            if default is None:
                continue
            t = registry.attr_type_of(default)
        proto.attrs.add(name=name, type=t, comment=name,
                        generated=name in registry.COMMON_ATTRS)
    return proto


# -- Fluid 1.8's argument checks (fluid.data_feeder's): what its layers call ------------------
def check_type(input, input_name, expected_type, op_name, extra_message=""):
    """TypeError unless `input` is an `expected_type` (a type or tuple of types)."""
    if not isinstance(input, expected_type):
        raise ArgumentTypeError(f"The type of '{input_name}' in {op_name} must be "
                                f"{_type_names(expected_type)}, but received "
                                f"{type(input).__name__}. {extra_message}".rstrip())


# the dtypes Fluid 1.8's convert_dtype knows: another one is a ValueError wherever it is checked
_FLUID_DTYPES = frozenset({"bool", "float16", "float32", "float64", "int8", "int16", "int32",
                           "int64", "uint8"})


def check_dtype(input_dtype, input_name, expected_dtype, op_name, extra_message=""):
    """TypeError unless dtype `input_dtype` (any spelling) is one of `expected_dtype`
    (names such as 'float32'); ValueError for a dtype Fluid 1.8 does not know at all."""
    name = dtypes.name(input_dtype) if input_dtype is not None else None
    if name not in _FLUID_DTYPES:
        raise DTypeError(f"The data type of '{input_name}' in {op_name}: dtype must be any of "
                         f"{sorted(_FLUID_DTYPES)}, got {name}")
    if name not in expected_dtype:
        raise ArgumentTypeError(f"The data type of '{input_name}' in {op_name} must be "
                                f"{list(expected_dtype)}, but received {name}. "
                                f"{extra_message}".rstrip())


def check_variable_and_dtype(input, input_name, expected_dtype, op_name, extra_message=""):
    """`check_type(input, Variable)`, then `check_dtype` of its dtype."""
    check_type(input, input_name, Variable, op_name, extra_message)
    check_dtype(input.dtype, input_name, expected_dtype, op_name, extra_message)


def _type_names(t):
    return " or ".join(x.__name__ for x in (t if isinstance(t, tuple) else (t,)))


def convert_np_dtype_to_dtype_(np_dtype):
    """The VarType code of a numpy dtype (or any dtype spelling), as Fluid's."""
    return dtypes.to_code(np_dtype)


def _version_parts(v, what):
    """The four numbers of a version string ('1.6' is 1.6.0.0), after Fluid's checks: a str
    (TypeError otherwise), of the form 1 to 4 dot-separated numbers (ValueError)."""
    if not isinstance(v, str):     # Fluid's check and error type
        raise TypeError(f"The type of '{what}' in require_version must be str, but "
                        f"received {type(v)}.")
    if not re.fullmatch(r"\d+(\.\d+){0,3}", v):
        raise ValueError(f"The value of '{what}' in require_version must be in format "
                         f"'\\d+(\\.\\d+){{0,3}}', like '1.5.2.0', but received {v!r}")
    parts = [int(x) for x in v.split(".")]
    return tuple(parts + [0] * (4 - len(parts)))


def require_version(min_version, max_version=None):
    """Check that the Fluid version this build implements (`fluidity.version`, read now:
    1.8.0) lies in [min_version, max_version]; raise an Exception saying so otherwise, as
    Fluid checks its installed version. A version of all zeros (a development build) only
    warns, as in Fluid."""
    from . import version          # read at call time, as Fluid reads paddle.version
    lo = _version_parts(min_version, "min_version")
    hi = None if max_version is None else _version_parts(max_version, "max_version")
    have = tuple(int(x) for x in (version.major, version.minor, version.patch, version.rc))
    wanted = f"in [{min_version}, {max_version}]" if hi is not None else \
        f"{min_version} or higher"
    if have == (0, 0, 0, 0):
        warnings.warn(f"PaddlePaddle version {wanted} required, but {version.full_version} "
                      f"installed. Maybe you are using a develop version, please make sure "
                      f"the version is good with your code.")
        return
    if have < lo or (hi is not None and have > hi):
        raise Exception(f"VersionError: PaddlePaddle version {wanted} required, but "
                        f"{version.full_version} installed (Fluidity implements the Fluid "
                        f"{version.full_version} API).")


load_op_library = declined(
    "load_op_library", "custom C++ operator libraries cannot be loaded; an op here is a "
    "Python class (docs/ops.md: add one there)")


# -- loading (h2-loaders) -------------------------------------------------------------------
def load_program_file(path):
    """A Program from a file holding a serialized ProgramDesc (`__model__`, `.pdmodel`),
    checked before use; every problem (unreadable, empty, corrupt) raises a FluidityError
    naming the file, a ProgramFormatError (a ValueError) for the bytes themselves."""
    path = os.fspath(path)
    data = read_file(path)
    if not data:
        raise ProgramFormatError(f"{path}: empty file, not a program")
    return Program(desc_check.parse_program_desc(data, path))

