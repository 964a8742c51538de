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
"""
from ..errors import ProgramError
from ..ops import registry
from ..proto import framework_pb2 as pb
from ..core import dtypes
from ..core.dtypes import VarType
from .views import args, fill_var_type, sub_block_ids, tensor_desc


def _serialize_to_string(self):
    return self.SerializeToString()


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


_PROGRAM = {
    "serialize_to_string": _serialize_to_string,
    "num_blocks": lambda self: len(self.blocks),
    "block": _block,
    "get_feed_target_names": lambda self: _targets(self, "feed", "Out"),
    "get_fetch_target_names": lambda self: _targets(self, "fetch", "X"),
    "_version": lambda self: self.version.version,
    "flush": lambda self: None,
}


# --- BlockDesc ------------------------------------------------------------------------
def _name(name):
    return name.decode() if isinstance(name, bytes) else name


def _find_var(self, name):
    name = _name(name)
    for vd in self.vars:
        if vd.name == name:
            return vd
    return None


def _var(self, name):
    """The variable `name` of the block, declared (a LoDTensor) when missing, as Paddle's
    BlockDesc.var; the builder's views see it after `program._sync_with_cpp()`."""
    vd = _find_var(self, name)
    if vd is None:
        vd = self.vars.add()
        vd.name = _name(name)
        fill_var_type(vd.type, VarType.LOD_TENSOR, None, None, 0)
    return vd


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
    "get_forward_block_idx": lambda self: self.forward_block_idx,
    "serialize_to_string": _serialize_to_string,
}


# --- OpDesc ---------------------------------------------------------------------------
def _attr(self, name):
    for a in self.attrs:
        if a.name == name:
            return registry.read_attr(a)
    raise ProgramError(f"op '{self.type}' has no attribute '{name}'")


_OP = {
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


def _set_shape(self, shape):
    td = tensor_desc(self)
    if td is None:
        raise ProgramError(f"variable '{self.name}' has no shape (not a tensor)")
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


_VAR = {
    "shape": lambda self: [int(d) for d in getattr(tensor_desc(self), "dims", ())],
    "dtype": lambda self: getattr(tensor_desc(self), "data_type", None),
    "lod_level": _lod_level,
    "set_shape": _set_shape,
    "set_dtype": _set_dtype,
    "set_lod_level": _set_lod_level,
    "serialize_to_string": _serialize_to_string,
}


def install():
    """Add the methods above to the generated classes (once; idempotent)."""
    for cls, methods in ((pb.ProgramDesc, _PROGRAM), (pb.BlockDesc, _BLOCK),
                         (pb.OpDesc, _OP), (pb.VarDesc, _VAR)):
        fields = set(cls.DESCRIPTOR.fields_by_name)
        for name, fn in methods.items():
            assert name not in fields, f"{cls.__name__}.{name} would hide a protobuf field"
            setattr(cls, name, fn)


install()
