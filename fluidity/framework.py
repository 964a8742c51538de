"""Program, Block, Variable, Parameter, Operator: thin Python views over the ProgramDesc.

The protobuf `ProgramDesc` is the single source of truth. A `Block` wraps one `BlockDesc` and
keeps, for fast lookup, a name -> Variable map and an op list parallel to the desc's repeated
fields; every mutation goes to the desc first. What Paddle also keeps only in Python
(a Parameter's trainable flag, initializer, regularizer) lives on the Python objects, as in
Paddle; everything an executor needs to run is in the desc.
"""
import contextlib
import os
import sys
import traceback

# Names first: op families imported through `.ops` may import them from this module
# while it is still loading.
from .core.names import EMPTY_VAR_NAME, GRAD_SUFFIX, grad_var_name  # noqa: E402,I001

from . import unique_name
from .core import dtypes
from .core.dtypes import VarType
from .errors import ProgramError, ShapeError, VariableNotFoundError
from .ops import registry
from .proto import framework_pb2 as pb

# Program version written into saved programs (Paddle 2.6.0 as major*1e6+minor*1e3+patch).
CURRENT_PROGRAM_VERSION = 2006000


class OpRole:
    Forward = 0x0000
    Backward = 0x0001
    Optimize = 0x0002
    RPC = 0x0004
    Dist = 0x0008
    LRSched = 0x0010
    Loss = 0x0100
    NotSpecified = 0x1000


# ---------------------------------------------------------------------------------------
# name scopes and op roles (build-time context)
# ---------------------------------------------------------------------------------------
_name_scope_stack = []
_op_role_stack = [OpRole.Forward]


@contextlib.contextmanager
def name_scope(prefix=None):
    """Group ops under a name (recorded in their `op_namescope` attribute)."""
    _name_scope_stack.append(prefix or "")
    try:
        yield
    finally:
        _name_scope_stack.pop()


def _current_namescope():
    return "/" + "/".join(p for p in _name_scope_stack if p) + ("/" if _name_scope_stack else "")


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
# Variable
# ---------------------------------------------------------------------------------------
def _tensor_desc(var_desc):
    """The TensorDesc inside a VarDesc for the kinds of variable that have one."""
    vt = var_desc.type
    if vt.type == VarType.LOD_TENSOR:
        return vt.lod_tensor.tensor
    if vt.type == VarType.SELECTED_ROWS:
        return vt.selected_rows
    if vt.type == VarType.LOD_TENSOR_ARRAY:
        return vt.tensor_array.tensor
    return None


_TENSORLIKE = (VarType.LOD_TENSOR, VarType.SELECTED_ROWS, VarType.LOD_TENSOR_ARRAY)


class Variable:
    """A view of one VarDesc in a block."""

    def __init__(self, block, desc):
        self.block = block
        self.desc = desc
        self.op = None  # the op that last wrote it at build time (for layers' convenience)

    # -- identity -------------------------------------------------------------------------
    @property
    def name(self):
        return self.desc.name

    @name.setter
    def name(self, new):
        self.block._rename_var(self.desc.name, new)

    @property
    def type(self):
        return self.desc.type.type

    # -- tensor description ---------------------------------------------------------------
    @property
    def shape(self):
        td = _tensor_desc(self.desc)
        return tuple(td.dims) if td is not None else ()

    def _set_shape(self, shape):
        td = _tensor_desc(self.desc)
        if td is None:
            raise ProgramError(f"variable '{self.name}' of type {VarType.Type.Name(self.type)} "
                               f"has no shape")
        del td.dims[:]
        td.dims.extend(int(d) for d in shape)

    @property
    def dtype(self):
        td = _tensor_desc(self.desc)
        return td.data_type if td is not None else None

    def _set_dtype(self, dtype):
        td = _tensor_desc(self.desc)
        if td is not None:
            td.data_type = dtypes.to_code(dtype)

    @property
    def lod_level(self):
        vt = self.desc.type
        if vt.type == VarType.LOD_TENSOR:
            return vt.lod_tensor.lod_level
        if vt.type == VarType.LOD_TENSOR_ARRAY:
            return vt.tensor_array.lod_level
        return 0

    @lod_level.setter
    def lod_level(self, level):
        vt = self.desc.type
        if vt.type == VarType.LOD_TENSOR:
            vt.lod_tensor.lod_level = int(level)
        elif vt.type == VarType.LOD_TENSOR_ARRAY:
            vt.tensor_array.lod_level = int(level)

    @property
    def persistable(self):
        return self.desc.persistable

    @persistable.setter
    def persistable(self, p):
        self.desc.persistable = bool(p)

    @property
    def stop_gradient(self):
        return self.desc.stop_gradient

    @stop_gradient.setter
    def stop_gradient(self, s):
        self.desc.stop_gradient = bool(s)

    @property
    def need_check_feed(self):
        return self.desc.need_check_feed

    @property
    def program(self):
        return self.block.program

    def _set_type(self, var_type):
        """Change the container type (e.g. LOD_TENSOR -> SELECTED_ROWS), keeping dtype/shape."""
        if self.type == var_type:
            return
        shape, dtype, lod = self.shape, self.dtype, self.lod_level
        _fill_var_type(self.desc.type, var_type, shape, dtype, lod)

    def numel(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def to_string(self, throw_on_error=False, with_details=False):
        return format_var(self)

    __str__ = to_string

    def __repr__(self):
        return f"Variable({format_var(self)})"

    # Fluid users write `a + b`, `x * 2.0`: build elementwise/scale ops.
    def _binary(self, other, op, reverse=False):
        from .layers import math_op_patch
        return math_op_patch.binary(self, other, op, reverse)

    def __add__(self, o): return self._binary(o, "elementwise_add")
    def __radd__(self, o): return self._binary(o, "elementwise_add", True)
    def __sub__(self, o): return self._binary(o, "elementwise_sub")
    def __rsub__(self, o): return self._binary(o, "elementwise_sub", True)
    def __mul__(self, o): return self._binary(o, "elementwise_mul")
    def __rmul__(self, o): return self._binary(o, "elementwise_mul", True)
    def __truediv__(self, o): return self._binary(o, "elementwise_div")
    def __rtruediv__(self, o): return self._binary(o, "elementwise_div", True)
    def __pow__(self, o): return self._binary(o, "elementwise_pow")
    def __neg__(self): return self._binary(-1.0, "elementwise_mul")
    __hash__ = object.__hash__


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


def _fill_var_type(vt, var_type, shape, dtype, lod_level):
    vt.Clear()
    vt.type = var_type
    if var_type in _TENSORLIKE:
        if var_type == VarType.LOD_TENSOR:
            td = vt.lod_tensor.tensor
            vt.lod_tensor.lod_level = int(lod_level or 0)
        elif var_type == VarType.SELECTED_ROWS:
            td = vt.selected_rows
        else:
            td = vt.tensor_array.tensor
            vt.tensor_array.lod_level = int(lod_level or 0)
        td.data_type = dtypes.to_code(dtype if dtype is not None else "float32")
        if shape is not None:
            td.dims.extend(int(d) for d in shape)


# ---------------------------------------------------------------------------------------
# Operator
# ---------------------------------------------------------------------------------------
class Operator:
    """A view of one OpDesc in a block."""

    def __init__(self, block, desc):
        self.block = block
        self.desc = desc

    @property
    def type(self):
        return self.desc.type

    def _slots(self, outputs):
        return self.desc.outputs if outputs else self.desc.inputs

    def input(self, slot):
        for v in self.desc.inputs:
            if v.parameter == slot:
                return list(v.arguments)
        return []

    def output(self, slot):
        for v in self.desc.outputs:
            if v.parameter == slot:
                return list(v.arguments)
        return []

    @property
    def input_names(self):
        return [v.parameter for v in self.desc.inputs]

    @property
    def output_names(self):
        return [v.parameter for v in self.desc.outputs]

    @property
    def input_arg_names(self):
        return [a for v in self.desc.inputs for a in v.arguments]

    @property
    def output_arg_names(self):
        return [a for v in self.desc.outputs for a in v.arguments]

    def inputs_map(self):
        return {v.parameter: list(v.arguments) for v in self.desc.inputs}

    def outputs_map(self):
        return {v.parameter: list(v.arguments) for v in self.desc.outputs}

    def _rename_input(self, old, new):
        for v in self.desc.inputs:
            for i, a in enumerate(v.arguments):
                if a == old:
                    v.arguments[i] = new

    def _rename_output(self, old, new):
        for v in self.desc.outputs:
            for i, a in enumerate(v.arguments):
                if a == old:
                    v.arguments[i] = new

    def set_input(self, slot, names):
        _set_slot(self.desc.inputs, slot, names)

    def set_output(self, slot, names):
        _set_slot(self.desc.outputs, slot, names)

    # -- attributes -------------------------------------------------------------------
    def has_attr(self, name):
        return any(a.name == name for a in self.desc.attrs)

    def attr(self, name):
        for a in self.desc.attrs:
            if a.name == name:
                return registry.read_attr(a)
        opdef = registry.find(self.type)
        if opdef is not None and opdef.declares(name):
            return opdef.defaults()[name]
        raise ProgramError(f"op '{self.type}' has no attribute '{name}'")

    @property
    def attr_names(self):
        return [a.name for a in self.desc.attrs]

    def all_attrs(self):
        return {a.name: registry.read_attr(a) for a in self.desc.attrs}

    def _set_attr(self, name, value):
        _write_attr(self.desc, self.type, name, value)
        self.block.program._bump()

    _update_desc_attr = _set_attr

    def _block_attr_id(self, name):
        return self.attr(name)

    def to_string(self, throw_on_error=False):
        return format_op(self)

    __str__ = to_string

    def __repr__(self):
        return f"Operator({format_op(self)})"


def _set_slot(repeated, slot, names):
    names = [n.name if isinstance(n, Variable) else n for n in names]
    for v in repeated:
        if v.parameter == slot:
            del v.arguments[:]
            v.arguments.extend(names)
            return
    var = repeated.add()
    var.parameter = slot
    var.arguments.extend(names)


def _write_attr(op_desc, op_type, name, value):
    opdef = registry.find(op_type)
    type_ = opdef.attr_type(name) if opdef is not None else None
    if type_ is None:
        type_ = registry.attr_type_of(value)
    for a in op_desc.attrs:
        if a.name == name:
            registry.write_attr(a, name, value, type_)
            return
    registry.write_attr(op_desc.attrs.add(), name, value, type_)


def _as_name_list(value, what):
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        out = []
        for v in value:
            out.extend(_as_name_list(v, what))
        return out
    if isinstance(value, Variable):
        return [value.name]
    if isinstance(value, str):
        return [value]
    raise ProgramError(f"{what}: expected a Variable or a variable name, got "
                       f"{type(value).__name__}")


# ---------------------------------------------------------------------------------------
# Build-time shape inference context
# ---------------------------------------------------------------------------------------
class InferShapeContext:
    """What an op's `infer_shape` sees at build time: its inputs' VarDescs and attributes."""

    def __init__(self, op):
        self.op = op
        self.block = op.block
        self.opdef = registry.get(op.type)

    def attr(self, name):
        return self.op.attr(name)

    def _var(self, name):
        return self.block._find_var_recursive(name)

    def has_input(self, slot):
        return bool(self.op.input(slot))

    def has_output(self, slot):
        return bool(self.op.output(slot))

    def input_var(self, slot, i=0):
        names = self.op.input(slot)
        if i >= len(names):
            raise ShapeError(f"op '{self.op.type}': input slot '{slot}' has no variable #{i}")
        v = self._var(names[i])
        if v is None:
            raise VariableNotFoundError(f"op '{self.op.type}': input '{slot}' names variable "
                                        f"'{names[i]}', which is not in the program")
        return v

    def input_vars(self, slot):
        return [self.input_var(slot, i) for i in range(len(self.op.input(slot)))]

    def input_shape(self, slot, i=0):
        return list(self.input_var(slot, i).shape)

    def input_shapes(self, slot):
        return [list(v.shape) for v in self.input_vars(slot)]

    def input_dtype(self, slot, i=0):
        return self.input_var(slot, i).dtype

    def input_lod_level(self, slot, i=0):
        return self.input_var(slot, i).lod_level

    def input_type(self, slot, i=0):
        return self.input_var(slot, i).type

    def output_vars(self, slot):
        out = []
        for n in self.op.output(slot):
            v = self._var(n)
            if v is None:
                raise VariableNotFoundError(f"op '{self.op.type}': output '{slot}' names "
                                            f"variable '{n}', which is not in the program")
            out.append(v)
        return out

    def set_output(self, slot, shape=None, dtype=None, lod_level=None, i=None, type=None):
        """Set the shape/dtype/lod_level of output `slot` (all its vars, or only #i)."""
        vars_ = self.output_vars(slot)
        if i is not None:
            vars_ = vars_[i:i + 1]
        for v in vars_:
            if type is not None:
                v._set_type(type)
            if shape is not None and v.type in _TENSORLIKE:
                v._set_shape(shape)
            if dtype is not None:
                v._set_dtype(dtype)
            if lod_level is not None:
                v.lod_level = lod_level

    def same_as_first_input(self):
        if not self.opdef.inputs or not self.opdef.outputs:
            return
        first = self.opdef.inputs[0].name
        if not self.has_input(first):
            return
        src = self.input_var(first)
        for s in self.opdef.outputs:
            if self.has_output(s.name) and not s.intermediate:
                self.set_output(s.name, src.shape, src.dtype, src.lod_level)

    def share(self, in_slot, out_slot, dtype=None):
        src = self.input_var(in_slot)
        self.set_output(out_slot, src.shape, dtype if dtype is not None else src.dtype,
                        src.lod_level)

    def fail(self, message):
        """Raise a ShapeError naming this op and its inputs' shapes."""
        shapes = ", ".join(f"{s}={[list(self._var(n).shape) if self._var(n) else '?' for n in self.op.input(s)]}"
                           for s in self.op.input_names)
        raise ShapeError(f"op '{self.op.type}' ({shapes}): {message}")


# ---------------------------------------------------------------------------------------
# Block
# ---------------------------------------------------------------------------------------
class Block:
    def __init__(self, program, idx):
        self.program = program
        self.desc = program.desc.blocks[idx]
        self.vars = {}
        self.ops = []
        for vd in self.desc.vars:
            cls = Parameter if vd.is_parameter else Variable
            self.vars[vd.name] = cls(self, vd)
        for od in self.desc.ops:
            self.ops.append(Operator(self, od))

    @property
    def idx(self):
        return self.desc.idx

    @property
    def parent_idx(self):
        return self.desc.parent_idx

    @property
    def forward_block_idx(self):
        return self.desc.forward_block_idx

    def _set_forward_block_idx(self, idx):
        self.desc.forward_block_idx = idx

    @property
    def parent(self):
        return self.program.block(self.parent_idx) if self.parent_idx >= 0 else None

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
            if shape is not None and v.type in _TENSORLIKE:
                v._set_shape(shape)
            if dtype is not None:
                v._set_dtype(dtype)
            if persistable is not None:
                v.persistable = persistable
            return v
        vd = self.desc.vars.add()
        vd.name = name
        _fill_var_type(vd.type, type, shape, dtype, lod_level)
        vd.persistable = bool(persistable)
        vd.stop_gradient = bool(stop_gradient)
        vd.need_check_feed = bool(need_check_feed)
        v = Variable(self, vd)
        self.vars[name] = v
        self.program._bump()
        return v

    def create_parameter(self, name, shape, dtype="float32", type=VarType.LOD_TENSOR,
                         trainable=True, initializer=None, regularizer=None,
                         optimize_attr=None, gradient_clip_attr=None, do_model_average=None,
                         stop_gradient=False, **kwargs):
        if any(int(d) < 0 for d in shape):
            raise ShapeError(f"parameter '{name}' needs a fully known shape, got {list(shape)}")
        if name in self.vars:  # Fluid shares a parameter among layers by name
            old = self.vars[name]
            if not isinstance(old, Parameter) or list(old.shape) != [int(d) for d in shape] \
                    or old.dtype != dtypes.to_code(dtype):
                raise ProgramError(
                    f"cannot create parameter '{name}' {list(shape)} {dtypes.name(dtype)}: "
                    f"block {self.idx} already has {format_var(old)}")
            return old
        vd = self.desc.vars.add()
        vd.name = name
        _fill_var_type(vd.type, type, shape, dtypes.to_code(dtype), 0)
        vd.persistable = True
        vd.is_parameter = True
        vd.stop_gradient = bool(stop_gradient)
        p = Parameter(self, vd, trainable=trainable, optimize_attr=optimize_attr,
                      regularizer=regularizer, gradient_clip_attr=gradient_clip_attr,
                      do_model_average=do_model_average, initializer=initializer)
        self.vars[name] = p
        self.program._bump()
        if initializer is not None:
            initializer(p, self.program._startup_block_for(p))
        return p

    def var(self, name):
        if not isinstance(name, str):
            raise TypeError(f"var() takes a name, got {type(name).__name__}")
        v = self.vars.get(name)
        if v is None:
            raise VariableNotFoundError(f"variable '{name}' is not in block {self.idx}")
        return v

    def has_var(self, name):
        return name in self.vars

    def _find_var_recursive(self, name):
        """`name` in this block or its ancestors or, for a gradient block, in the forward
        block it differentiates and that block's ancestors (Paddle's lookup order)."""
        v = self.vars.get(name)
        if v is not None or (self.forward_block_idx < 0 and self.parent_idx < 0):
            return v
        todo, seen = [self], set()
        while todo:
            b = todo.pop()
            if b.idx in seen:
                continue
            seen.add(b.idx)
            v = b.vars.get(name)
            if v is not None:
                return v
            if b.parent_idx >= 0:
                todo.append(self.program.blocks[b.parent_idx])
            if b.forward_block_idx >= 0:
                todo.append(self.program.blocks[b.forward_block_idx])
        return None

    def _var_recursive(self, name):
        v = self._find_var_recursive(name)
        if v is None:
            raise VariableNotFoundError(f"variable '{name}' is in neither block {self.idx} "
                                        f"nor its ancestors")
        return v

    def all_parameters(self):
        return [v for v in self.vars.values() if isinstance(v, Parameter)]

    def iter_parameters(self):
        return iter(self.all_parameters())

    def _remove_var(self, name):
        self._remove_vars([name])

    def _remove_vars(self, names):
        """Drop variables in one pass over the desc (then rebind the wrappers once)."""
        names = {n for n in names if n in self.vars}
        if not names:
            return
        for i in range(len(self.desc.vars) - 1, -1, -1):
            if self.desc.vars[i].name in names:
                del self.desc.vars[i]
        for n in names:
            del self.vars[n]
        # descs of remaining vars moved: rebind wrappers to the live messages
        self._rebind_vars()
        self.program._bump()

    def _rebind_vars(self):
        by_name = {vd.name: vd for vd in self.desc.vars}
        for n, v in self.vars.items():
            v.desc = by_name[n]

    def _rename_var(self, old, new):
        if new in self.vars:
            raise ProgramError(f"cannot rename '{old}' to '{new}': '{new}' exists")
        v = self.vars.pop(old)
        v.desc.name = new
        self.vars[new] = v
        for op in self.ops:
            op._rename_input(old, new)
            op._rename_output(old, new)
        self.program._bump()
        return v

    # -- ops --------------------------------------------------------------------------
    def append_op(self, type=None, inputs=None, outputs=None, attrs=None, infer_shape=True,
                  **kwargs):
        return self._insert_op(len(self.ops), type, inputs, outputs, attrs, infer_shape)

    def prepend_op(self, type=None, inputs=None, outputs=None, attrs=None, infer_shape=True,
                   **kwargs):
        return self._insert_op(0, type, inputs, outputs, attrs, infer_shape)

    def _insert_op(self, index, type=None, inputs=None, outputs=None, attrs=None,
                   infer_shape=True):
        opdef = registry.get(type)
        od = pb.OpDesc(type=type)
        _fill_slots(od.inputs, opdef.inputs, inputs, type, "input")
        _fill_slots(od.outputs, opdef.outputs, outputs, type, "output")
        attrs = dict(attrs or {})
        for name, default in opdef.defaults().items():
            if name not in attrs and name not in registry.COMMON_ATTRS and default is not None:
                attrs[name] = default
        attrs.setdefault("op_role", _op_role_stack[-1])
        if _name_scope_stack:
            attrs.setdefault("op_namescope", _current_namescope())
        site = _user_callsite()
        if site:
            attrs.setdefault("op_callstack", [site])
        for name in sorted(attrs):
            if attrs[name] is None:
                continue
            _write_attr(od, type, name, attrs[name])
        if index >= len(self.ops):
            self.desc.ops.append(od)
            op = Operator(self, self.desc.ops[len(self.desc.ops) - 1])
            self.ops.append(op)
        else:
            self.desc.ops.insert(index, od)
            op = Operator(self, self.desc.ops[index])
            self.ops.insert(index, op)
        self.program._bump()
        if infer_shape and opdef.infer_shape is not None:
            self._check_inputs_exist(op, opdef)
            try:
                opdef.infer_shape(InferShapeContext(op))
            except Exception:
                self._remove_op(self.ops.index(op))
                raise
        for n in op.output_arg_names:
            v = self._find_var_recursive(n)
            if v is not None:
                v.op = op
        return op

    _insert_op_without_sync = _insert_op

    def _check_inputs_exist(self, op, opdef):
        for slot in op.input_names:
            for n in op.input(slot):
                if n != EMPTY_VAR_NAME and self._find_var_recursive(n) is None:
                    self._remove_op(self.ops.index(op))
                    raise VariableNotFoundError(
                        f"op '{op.type}': input '{slot}' names variable '{n}', which is not "
                        f"declared in block {self.idx} or its ancestors")

    def _remove_op(self, index, end=None):
        end = index + 1 if end is None else end
        del self.desc.ops[index:end]
        del self.ops[index:end]
        self._rebind_ops()
        self.program._bump()

    def _rebind_ops(self):
        for op, od in zip(self.ops, self.desc.ops):
            op.desc = od

    def _sync_with_desc(self):
        """Rebuild the wrappers after the desc was changed directly."""
        self.__init__(self.program, self.idx)

    def to_string(self, throw_on_error=False, with_details=False):
        return format_block(self)

    __str__ = to_string

    def __repr__(self):
        return f"Block({self.idx}, {len(self.vars)} vars, {len(self.ops)} ops)"


def _fill_slots(repeated, slots, given, op_type, what):
    given = dict(given or {})
    declared = {s.name: s for s in slots}
    for name in given:
        if name not in declared:
            raise ProgramError(f"op '{op_type}' has no {what} slot '{name}'; its {what}s are "
                               f"{[s.name for s in slots]}")
    filled = []
    for s in slots:
        names = _as_name_list(given.get(s.name), f"op '{op_type}' {what} '{s.name}'")
        if not names:
            if what == "input" and not s.dispensable:
                raise ProgramError(f"op '{op_type}' needs {what} '{s.name}'")
            if s.name not in given:
                continue
        if len(names) > 1 and not s.duplicable:
            raise ProgramError(f"op '{op_type}' {what} '{s.name}' takes one variable, "
                               f"got {len(names)}: {names}")
        filled.append((s.name, names))
    # Paddle emits slots sorted by name (std::map order); keep that for byte-identity.
    for slot, names in sorted(filled):
        var = repeated.add()
        var.parameter = slot
        var.arguments.extend(names)


# ---------------------------------------------------------------------------------------
# Program
# ---------------------------------------------------------------------------------------
class Program:
    def __init__(self, desc=None):
        if desc is None:
            desc = pb.ProgramDesc()
            b = desc.blocks.add()
            b.idx, b.parent_idx = 0, -1
            desc.version.version = CURRENT_PROGRAM_VERSION
        self.desc = desc
        self.blocks = [Block(self, i) for i in range(len(desc.blocks))]
        self.current_block_idx = 0
        self.random_seed = 0
        self._seed_counter = 0
        self._version = 0          # bumped by every mutation; executors key caches on it
        self._is_test = False
        self._startup = None       # the startup program parameters' initializers go to
        self._sync_version_map()

    # -- structure ---------------------------------------------------------------------
    def _bump(self):
        self._version += 1

    def global_block(self):
        return self.blocks[0]

    def block(self, index):
        try:
            return self.blocks[index]
        except IndexError:
            raise ProgramError(f"program has {len(self.blocks)} blocks; no block {index}") from None

    def current_block(self):
        return self.blocks[self.current_block_idx]

    @property
    def num_blocks(self):
        return len(self.blocks)

    def _create_block(self, parent_idx=None):
        parent = self.current_block_idx if parent_idx is None else parent_idx
        bd = self.desc.blocks.add()
        bd.idx = len(self.desc.blocks) - 1
        bd.parent_idx = parent
        self.blocks.append(Block(self, bd.idx))
        self.current_block_idx = bd.idx
        self._bump()
        return self.current_block()

    def _rollback(self):
        self.current_block_idx = self.current_block().parent_idx

    def list_vars(self):
        for b in self.blocks:
            yield from b.vars.values()

    def all_parameters(self):
        return [p for b in self.blocks for p in b.all_parameters()]

    def _startup_block_for(self, param):
        return (self._startup or default_startup_program()).global_block()

    # -- ids for random ops ------------------------------------------------------------
    def _next_seed(self):
        """A per-op seed derived from `random_seed`, so programs with a seed are reproducible."""
        if not self.random_seed:
            return 0
        self._seed_counter += 1
        return (self.random_seed * 1000003 + self._seed_counter) % (2**31 - 1)

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
        self._sync_version_map()
        return self.desc.SerializeToString()

    def _serialize(self):
        return self.serialize_to_string()

    @staticmethod
    def parse_from_string(binary_str):
        desc = pb.ProgramDesc()
        try:
            desc.ParseFromString(binary_str)
        except Exception as e:
            raise ProgramError(f"not a ProgramDesc (protobuf parse failed: {e})") from None
        if not desc.blocks:
            raise ProgramError("ProgramDesc has no blocks")
        for i, bd in enumerate(desc.blocks):
            if bd.idx != i:
                raise ProgramError(f"block #{i} says its idx is {bd.idx}")
            if (i == 0 and bd.parent_idx != -1) or (i > 0 and not 0 <= bd.parent_idx < len(desc.blocks)):
                raise ProgramError(f"block {i} has parent_idx {bd.parent_idx}, out of range")
        return Program(desc)

    @staticmethod
    def _construct_from_desc(desc):
        return Program(desc)

    def clone(self, for_test=False):
        """A deep copy. for_test=True: inference copy (backward/optimizer ops dropped,
        `is_test` attributes set)."""
        p = Program.parse_from_string(self.desc.SerializeToString())
        p.random_seed = self.random_seed
        p._startup = self._startup
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
        if for_test:
            from .transpiler import inference
            inference.make_inference_program(p)
        return p

    def to_string(self, throw_on_error=False, with_details=False):
        return format_program(self)

    __str__ = to_string

    def __repr__(self):
        return (f"Program({len(self.blocks)} blocks, "
                f"{sum(len(b.ops) for b in self.blocks)} ops)")


# ---------------------------------------------------------------------------------------
# default programs
# ---------------------------------------------------------------------------------------
_main_program = Program()
_startup_program = Program()


def default_main_program():
    return _main_program


def default_startup_program():
    return _startup_program


def switch_main_program(program):
    global _main_program
    old, _main_program = _main_program, program
    return old


def switch_startup_program(program):
    global _startup_program
    old, _startup_program = _startup_program, program
    return old


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
# readable printing (`fluidity show`, Program.to_string)
# ---------------------------------------------------------------------------------------
_HIDDEN_ATTRS = {"op_callstack", "op_role_var", "op_namescope", "op_device", "with_quant_attr"}


def format_var(v):
    t = v.type
    flags = []
    if v.persistable:
        flags.append("persistable")
    if isinstance(v, Parameter) or v.desc.is_parameter:
        flags.append("parameter")
    if v.stop_gradient:
        flags.append("stop_gradient")
    if t in _TENSORLIKE:
        kind = {VarType.LOD_TENSOR: "", VarType.SELECTED_ROWS: "selected_rows ",
                VarType.LOD_TENSOR_ARRAY: "tensor_array "}[t]
        lod = f" lod_level={v.lod_level}" if v.lod_level else ""
        desc = f"{kind}{dtypes.name(v.dtype)}{list(v.shape)}{lod}"
    else:
        desc = VarType.Type.Name(t).lower()
    return f"{v.name} : {desc}" + (f" ({', '.join(flags)})" if flags else "")


def _fmt_attr(value):
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list) and len(value) > 8:
        return "[" + ", ".join(_fmt_attr(x) for x in value[:8]) + f", ... ({len(value)})]"
    return repr(value)


def format_op(op, show_role=False):
    def slots(m):
        return ", ".join(f"{k}={v[0] if len(v) == 1 else v}" for k, v in m.items() if v)
    attrs = {k: v for k, v in op.all_attrs().items() if k not in _HIDDEN_ATTRS}
    if not show_role and attrs.get("op_role") == 0:
        attrs.pop("op_role")
    a = ", ".join(f"{k}={_fmt_attr(v)}" for k, v in sorted(attrs.items()))
    return f"{slots(op.outputs_map())} = {op.type}({slots(op.inputs_map())})" + (
        f" {{{a}}}" if a else "")


def format_block(block):
    head = f"block {block.idx}" + (f" (parent {block.parent_idx})" if block.parent_idx >= 0
                                   else "")
    if block.forward_block_idx >= 0:
        head += f" (forward block {block.forward_block_idx})"
    lines = [head + ":", "  vars:"]
    lines += [f"    {format_var(v)}" for v in block.vars.values()]
    lines.append("  ops:")
    lines += [f"    {format_op(op)}" for op in block.ops]
    return "\n".join(lines)


def format_program(program):
    head = f"program (version {program.desc.version.version}"
    if program.desc.op_version_map.pair:
        head += f", {len(program.desc.op_version_map.pair)} op versions"
    head += ")"
    return "\n".join([head] + [format_block(b) for b in program.blocks])
