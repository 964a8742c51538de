"""Paddle's C++ desc API, read side, on the ProgramDesc protobuf messages themselves.

In Fluid, `program.desc` is a C++ ProgramDesc with methods: `program.desc.serialize_to_string()`,
`desc.num_blocks()`, `desc.block(0).op(3).input("X")`, `block.var("w").shape()`. In Fluidity
`program.desc` *is* the protobuf message (the single source of truth), so those methods are
added here to the generated message classes, reading the message in place: there is no
second copy to keep in step, and no `flush()` is ever needed (it is kept as the no-op it is
here).

Only names that no protobuf field already takes are added. Where Paddle's method and the
message's field share a name (`op_desc.type()`, `var_desc.name()`, `.persistable()`), the
field wins: `op.desc.type` is the op type string, `var.desc.name` the name. The builder's
Operator / Variable give both spellings (`op.type`, `var.name`).

The write side, as Fluid 1.8's tests and tools use it on a bare desc (`core.ProgramDesc()`):
`append_block`, `block.var(name)` (which declares the variable when the block lacks it, as
Paddle's), `append_op` / `_prepend_op` / `_insert_op` / `_remove_op`, `var.set_type /
set_shape / set_dtype / set_lod_level` (and the reader's plural forms), `op.set_type /
set_input / set_output / _set_attr / set_block_attr / check_attrs / infer_shape(block)`.
A Program whose desc was changed this way calls `_sync_with_cpp()` to see the change.
"""
from ..core import dtypes
from ..core.dtypes import VarType
from ..errors import ProgramError
from ..ops import registry
from ..proto import framework_pb2 as pb
from . import rewrite
from .infer_shape import InferShapeContext
from .views import OpView, VarView, args, fill_var_type, sub_block_ids, tensor_desc


def _text(name):
    return name.decode() if isinstance(name, bytes) else name


def _serialize_to_string(self):
    """The bytes, written as Fluid writes them even where a required field is unset (a
    variable declared without a dtype); parsing them back names that field."""
    return self.SerializePartialToString()


# --- ProgramDesc ----------------------------------------------------------------------
def _block(self, index):
    if not 0 <= index < len(self.blocks):
        raise ProgramError(f"program has {len(self.blocks)} blocks; no block {index}")
    return self.blocks[index]


def _targets(self, op_type, slot):
    """The names the feed (Out) or fetch (X) ops of block 0 carry, in `col` order."""
    found = []
    for op in self.blocks[0].ops if self.blocks else ():
        if op.type == op_type:
            col = next((a.i for a in op.attrs if a.name == "col"), 0)
            found.append((col, _slot(op.outputs if op_type == "feed" else op.inputs, slot)[0]))
    return [name for _, name in sorted(found)]


def _slot(slots, name):
    for v in slots:
        if v.parameter == name:
            return list(v.arguments)
    return []


def _append_block(self, parent):
    b = self.blocks.add()
    b.idx, b.parent_idx = len(self.blocks) - 1, parent.idx
    return b


_PROGRAM = {
    "append_block": _append_block,
    "serialize_to_string": _serialize_to_string,
    "num_blocks": lambda self: len(self.blocks),
    "block": _block,
    "get_feed_target_names": lambda self: _targets(self, "feed", "Out"),
    "get_fetch_target_names": lambda self: _targets(self, "fetch", "X"),
    "_version": lambda self: self.version.version,
    "flush": lambda self: None,
}


# --- BlockDesc ------------------------------------------------------------------------
def _find_var(self, name):
    name = _text(name)
    for vd in self.vars:
        if vd.name == name:
            return vd
    return None


def _var(self, name):
    """The variable `name` of the block, declared (a LoD tensor) when it has none: Paddle's
    `BlockDesc.var`; `find_var` only looks. The builder's
    views see it after `program._sync_with_cpp()`."""
    vd = _find_var(self, name)
    if vd is None:
        vd = self.vars.add(name=_text(name))
        fill_var_type(vd.type, VarType.LOD_TENSOR, None, None, 0)
    return vd


def _remove_var(self, name):
    name = _text(name)
    keep = [v for v in self.vars if v.name != name]
    del self.vars[:]
    self.vars.extend(keep)


def _op(self, index):
    if not 0 <= index < len(self.ops):
        raise ProgramError(f"block {self.idx} has {len(self.ops)} ops; no op {index}")
    return self.ops[index]


_BLOCK = {
    "id": property(lambda self: self.idx),
    "parent": property(lambda self: self.parent_idx),
    "op_size": lambda self: len(self.ops),
    "op": _op,
    "var": _var,
    "find_var": _find_var,
    "has_var": lambda self, name: _find_var(self, name) is not None,
    "all_vars": lambda self: list(self.vars),
    "_remove_op": lambda self, start, end: self.ops.__delitem__(slice(start, end)),
    "_remove_var": _remove_var,
    "_set_forward_block_idx": lambda self, idx: setattr(self, "forward_block_idx", idx),
    "get_forward_block_idx": lambda self: self.forward_block_idx,
    "serialize_to_string": _serialize_to_string,
}


# --- OpDesc ---------------------------------------------------------------------------
def _attr(self, name):
    for a in self.attrs:
        if a.name == name:
            return registry.read_attr(a)
    raise ProgramError(f"op '{self.type}' has no attribute '{name}'")


def _set_slot(slots, slot, names):
    for v in slots:
        if v.parameter == slot:
            del v.arguments[:]
            v.arguments.extend(_text(n) for n in names)
            return
    slots.add(parameter=slot, arguments=[_text(n) for n in names])


def _attr_type(self, name):
    for a in self.attrs:
        if a.name == name:
            return a.type
    raise ProgramError(f"op '{self.type}' has no attribute '{name}'")


def _set_block_attr(self, name, block):
    for a in list(self.attrs):
        if a.name == name:
            self.attrs.remove(a)
    self.attrs.add(name=name, type=pb.AttrType.BLOCK, block_idx=block.idx)


def _check_attrs(self):
    """Write the schema's default of every attribute the op does not set (Paddle's
    CheckAttrs); an op type the registry does not know is left as it is."""
    opdef = registry.find(self.type)
    if opdef is None:
        return
    have = {a.name for a in self.attrs}
    for name, default in sorted(opdef.defaults().items()):
        if name not in have and name not in registry.COMMON_ATTRS and default is not None:
            rewrite.write_attr(self, name, default)


class _BlockOfDesc:
    """A block seen from a bare BlockDesc (its own variables only), for `infer_shape`."""

    def __init__(self, block_desc):
        self.desc = block_desc
        self.program = None

    def find_var_recursive(self, name):
        vd = _find_var(self.desc, name)
        return VarView(self, vd) if vd is not None else None


def _infer_shape(self, block):
    """Set the shapes of this op's outputs in BlockDesc `block` (Paddle's
    `OpDesc.infer_shape(block)`), by the op's schema."""
    opdef = registry.get(self.type)
    if opdef.infer_shape is not None:
        opdef.infer(InferShapeContext(OpView(_BlockOfDesc(block), self)))


_OP = {
    "set_type": lambda self, t: setattr(self, "type", t),
    "set_input": lambda self, slot, names: _set_slot(self.inputs, slot, names),
    "set_output": lambda self, slot, names: _set_slot(self.outputs, slot, names),
    "_set_attr": lambda self, name, value: rewrite.write_attr(self, name, value),
    "remove_attr": lambda self, name: [self.attrs.remove(a) for a in list(self.attrs)
                                       if a.name == name] and None,
    "attr_type": _attr_type,
    "set_block_attr": _set_block_attr,
    "_block_attr_id": lambda self, name: _attr(self, name),
    "check_attrs": _check_attrs,
    "infer_shape": _infer_shape,
    "input": lambda self, slot: _slot(self.inputs, slot),
    "output": lambda self, slot: _slot(self.outputs, slot),
    "input_names": lambda self: [v.parameter for v in self.inputs],
    "output_names": lambda self: [v.parameter for v in self.outputs],
    "input_arg_names": lambda self: args(self.inputs),
    "output_arg_names": lambda self: args(self.outputs),
    "attr": _attr,
    "has_attr": lambda self, name: any(a.name == name for a in self.attrs),
    "attr_names": lambda self: [a.name for a in self.attrs],
    "block_attr_id": lambda self, name: _attr(self, name),
    "sub_block_ids": sub_block_ids,
    "serialize_to_string": _serialize_to_string,
}


# --- VarDesc --------------------------------------------------------------------------
def _lod_level(self):
    t = self.type
    if t.HasField("lod_tensor"):
        return t.lod_tensor.lod_level
    if t.HasField("tensor_array"):
        return t.tensor_array.lod_level
    return 0


def _retype(self, var_type):
    td = tensor_desc(self)
    shape = list(td.dims) if td is not None else None
    dtype = td.data_type if td is not None else None
    fill_var_type(self.type, var_type, shape, dtype, _lod_level(self))


def _set_dims(self, shape):
    td = tensor_desc(self)
    if td is None:
        raise ProgramError(f"variable '{self.name}' of type {VarType.Type.Name(self.type.type)} "
                           f"has no shape")
    del td.dims[:]
    td.dims.extend(int(d) for d in shape)


def _set_dtype(self, dtype):
    td = tensor_desc(self)
    if td is None:
        raise ProgramError(f"variable '{self.name}' has no dtype (not a tensor)")
    td.data_type = dtypes.to_code(dtype)


def _set_lod_level(self, level):
    t = self.type
    if t.type == VarType.LOD_TENSOR:
        t.lod_tensor.lod_level = int(level)
    elif t.type == VarType.LOD_TENSOR_ARRAY:
        t.tensor_array.lod_level = int(level)
    else:
        raise ProgramError(f"variable '{self.name}' has no LoD level")


def _reader_tensors(self, n=None):
    """A READER variable's LoDTensorDescs (`n` of them, made as needed)."""
    ts = self.type.reader.lod_tensor
    while n is not None and len(ts) < n:
        ts.add().tensor.data_type = VarType.FP32
    return ts


def _set_many(self, values, write):
    for t, v in zip(_reader_tensors(self, len(values)), values):
        write(t, v)


_VAR = {
    "shape": lambda self: [int(d) for d in getattr(tensor_desc(self), "dims", ())],
    "dtype": lambda self: getattr(tensor_desc(self), "data_type", None),
    "lod_level": _lod_level,
    "set_type": _retype,
    "set_shape": _set_dims,
    "set_dtype": _set_dtype,
    "set_lod_level": _set_lod_level,
    "set_persistable": lambda self, p: setattr(self, "persistable", bool(p)),
    "set_stop_gradient": lambda self, s: setattr(self, "stop_gradient", bool(s)),
    "set_need_check_feed": lambda self, c: setattr(self, "need_check_feed", bool(c)),
    "shapes": lambda self: [list(t.tensor.dims) for t in _reader_tensors(self)],
    "dtypes": lambda self: [t.tensor.data_type for t in _reader_tensors(self)],
    "lod_levels": lambda self: [t.lod_level for t in _reader_tensors(self)],
    "set_shapes": lambda self, shapes: _set_many(
        self, shapes, lambda t, s: (t.tensor.ClearField("dims"), t.tensor.dims.extend(s))),
    "set_dtypes": lambda self, ds: _set_many(
        self, ds, lambda t, d: setattr(t.tensor, "data_type", int(d))),
    "set_lod_levels": lambda self, ls: _set_many(
        self, ls, lambda t, v: setattr(t, "lod_level", int(v))),
    "serialize_to_string": _serialize_to_string,
    # Paddle's VarDesc is hashable (`set(block.all_vars())`); a message compares by content,
    # so it hashes by its name, which equal descs share
    "__hash__": lambda self: hash(self.name),
}


# Paddle's `var_desc.type()` gives the variable's type code. Here `var_desc.type` is the
# field, a VarType message; calling that message gives its type code, so both spellings work
# (`var.desc.type.type` and `var.desc.type()`), as `op_desc.type` does for ops (op_desc.py).
_VAR_TYPE = {"__call__": lambda self: self.type}


def install():
    """Add the methods above to the generated classes (once; idempotent)."""
    for cls, methods in ((pb.ProgramDesc, _PROGRAM), (pb.BlockDesc, _BLOCK),
                         (pb.OpDesc, _OP), (pb.VarDesc, _VAR), (pb.VarType, _VAR_TYPE)):
        fields = set(cls.DESCRIPTOR.fields_by_name)
        for name, fn in methods.items():
            assert name not in fields, f"{cls.__name__}.{name} would hide a protobuf field"
            setattr(cls, name, fn)


install()
