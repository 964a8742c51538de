"""Views over a ProgramDesc: what every stage reads of a program, and nothing it may change
behind the desc's back.

`ProgramView(desc)` wraps a `ProgramDesc` in `BlockView`s, `OpView`s and `VarView`s that read
the protobuf messages in place (no copy): op slots and attributes (schema defaults filled in
from the registry), variable types, shapes and flags, and the lookup of a name through a
block's ancestors. Executors, passes and the code generator see programs only through these
views; the builder's `Program`, `Block`, `Operator` and `Variable` (fluidity/framework.py) are
subclasses that add what building needs.

A variable's own fields (shape, dtype, persistable, ...) may be set through its view. What
changes a block's structure — inserting or removing ops and variables, renaming, adding
blocks — goes through `fluidity.ir.rewrite`, which keeps the views in step with the desc and
counts every change in `ProgramView.revision` (executors key their prepared plans on it).
"""
from ..core import dtypes
from ..core.dtypes import VarType
from ..core.names import OpRole
from ..errors import ProgramError, VariableNotFoundError
from ..ops import registry
from ..proto import framework_pb2 as pb

AttrType = pb.AttrType

# Variable kinds that hold a TensorDesc (dtype and dims).
TENSORLIKE = (VarType.LOD_TENSOR, VarType.SELECTED_ROWS, VarType.LOD_TENSOR_ARRAY)


def tensor_desc(var_desc):
    """The TensorDesc inside a VarDesc for the kinds of variable that have one, else None."""
    vt = var_desc.type
    if vt.type == VarType.LOD_TENSOR:
        return vt.lod_tensor.tensor
    if vt.type == VarType.SELECTED_ROWS:
        return vt.selected_rows
    if vt.type == VarType.LOD_TENSOR_ARRAY:
        return vt.tensor_array.tensor
    return None


def fill_var_type(vt, var_type, shape, dtype, lod_level):
    """Write a VarDesc.VarType message: the container `var_type`, and for tensor-like ones
    the dtype (float32 when None), dims and lod_level."""
    vt.Clear()
    vt.type = var_type
    if var_type in TENSORLIKE:
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


def clear_dtype(var_desc):
    """Leave a tensor-like VarDesc without a data_type, as Fluid's `create_var` without a
    dtype does: the field is required, so the desc is not whole (`to_string(True)` raises
    ValueError) until an op's shape inference gives the variable its dtype. Meanwhile
    `VarView.dtype` is None (unknown: loads, feeds and checks take the value's own dtype),
    where Fluid reads the field's default, BOOL."""
    td = tensor_desc(var_desc)
    if td is not None:
        td.ClearField("data_type")


def sub_block_ids(op_desc):
    """Indices of the blocks an OpDesc's BLOCK/BLOCKS attributes name (control flow)."""
    ids = []
    for a in op_desc.attrs:
        if a.type == AttrType.BLOCK:
            ids.append(a.block_idx)
        elif a.type == AttrType.BLOCKS:
            ids.extend(a.blocks_idx)
    return ids


def args(slots):
    """Every argument name of an OpDesc's inputs or outputs, in slot order."""
    return [a for v in slots for a in v.arguments]


def op_role(op_desc):
    """An OpDesc's `op_role` attribute (OpRole.Forward when it has none)."""
    for a in op_desc.attrs:
        if a.name == "op_role":
            return a.i
    return OpRole.Forward


# ---------------------------------------------------------------------------------------
class VarView:
    """One VarDesc of a block."""

    def __init__(self, block, desc):
        self.block = block
        self.desc = desc

    @property
    def name(self):
        return self.desc.name

    @property
    def type(self):
        return self.desc.type.type

    @property
    def shape(self):
        td = tensor_desc(self.desc)
        return tuple(td.dims) if td is not None else ()

    def _set_shape(self, shape):
        td = tensor_desc(self.desc)
        if td is None:
            raise ProgramError(f"variable '{self.name}' of type {VarType.Type.Name(self.type)} "
                               f"has no shape")
        del td.dims[:]
        td.dims.extend(int(d) for d in shape)

    @property
    def dtype(self):
        """The tensor's data type code; None for a variable that holds no tensor, or one
        declared without a dtype that no op has given one yet (`clear_dtype`)."""
        td = tensor_desc(self.desc)
        return td.data_type if td is not None and td.HasField("data_type") else None

    def _set_dtype(self, dtype):
        td = tensor_desc(self.desc)
        if td is not None:
            td.data_type = dtypes.to_code(dtype)

    def _set_type(self, var_type):
        """Change the container type (e.g. LOD_TENSOR -> SELECTED_ROWS), keeping dtype/shape."""
        if self.type == var_type:
            return
        fill_var_type(self.desc.type, var_type, self.shape, self.dtype, self.lod_level)

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
    def is_parameter(self):
        return self.desc.is_parameter

    @property
    def program(self):
        return self.block.program

    def numel(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __repr__(self):
        return f"{type(self).__name__}({self.name!r})"


class OpView:
    """One OpDesc of a block."""

    def __init__(self, block, desc):
        self.block = block
        self.desc = desc

    @property
    def type(self):
        return self.desc.type

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
        return args(self.desc.inputs)

    @property
    def output_arg_names(self):
        return args(self.desc.outputs)

    def inputs_map(self):
        return {v.parameter: list(v.arguments) for v in self.desc.inputs}

    def outputs_map(self):
        return {v.parameter: list(v.arguments) for v in self.desc.outputs}

    def has_attr(self, name):
        return any(a.name == name for a in self.desc.attrs)

    def attr(self, name):
        """The attribute's value in the desc, else its schema default."""
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
        """{name: value} of the attributes the desc holds (no defaults)."""
        return {a.name: registry.read_attr(a) for a in self.desc.attrs}

    @property
    def role(self):
        return op_role(self.desc)

    def sub_block_ids(self):
        return sub_block_ids(self.desc)

    @property
    def idx(self):
        """This op's index in its block."""
        for i, op in enumerate(self.block.ops):
            if op is self:
                return i
        raise ProgramError(f"op '{self.type}' is no longer in block {self.block.idx}")

    def __repr__(self):
        return f"{type(self).__name__}({self.type!r})"


class BlockView:
    """One BlockDesc: `vars` (name -> view) and `ops` (a list parallel to the desc's)."""

    def __init__(self, program, idx):
        self.program = program
        self.desc = program.desc.blocks[idx]
        self.vars = {}
        self.ops = []
        for vd in self.desc.vars:
            self.vars[vd.name] = self.wrap_var(vd)
        for od in self.desc.ops:
            self.ops.append(self.wrap_op(od))

    # the view classes of this block's variables and ops (the builder's Block makes its own)
    def wrap_var(self, var_desc):
        return VarView(self, var_desc)

    def wrap_op(self, op_desc):
        return OpView(self, op_desc)

    @property
    def idx(self):
        return self.desc.idx

    @property
    def parent_idx(self):
        return self.desc.parent_idx

    @property
    def forward_block_idx(self):
        return self.desc.forward_block_idx

    @property
    def parent(self):
        return self.program.block(self.parent_idx) if self.parent_idx >= 0 else None

    def var(self, name):
        if not isinstance(name, str):
            raise TypeError(f"var() takes a name, got {type(name).__name__}")
        v = self.vars.get(name)
        if v is None:
            raise VariableNotFoundError(f"variable '{name}' is not in block {self.idx}")
        return v

    def has_var(self, name):
        return name in self.vars

    def find_var_recursive(self, name):
        """`name` in this block or its ancestors or, for a gradient block, in the forward
        block it differentiates and that block's ancestors (Paddle's lookup order); None
        when no block has it."""
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

    def var_recursive(self, name):
        v = self.find_var_recursive(name)
        if v is None:
            raise VariableNotFoundError(f"variable '{name}' is in neither block {self.idx} "
                                        f"nor its ancestors")
        return v

    def __repr__(self):
        return f"{type(self).__name__}({self.idx}, {len(self.vars)} vars, {len(self.ops)} ops)"


class ProgramView:
    """A ProgramDesc's blocks. `revision` counts the changes made through `ir.rewrite`."""

    def __init__(self, desc):
        if not isinstance(desc, pb.ProgramDesc):
            raise TypeError(f"ProgramView wraps a ProgramDesc, got {type(desc).__name__}")
        self.desc = desc
        self.revision = 0
        self.blocks = [self.wrap_block(i) for i in range(len(desc.blocks))]

    def wrap_block(self, idx):
        return BlockView(self, idx)

    def global_block(self):
        return self.blocks[0]

    def block(self, index):
        try:
            return self.blocks[index]
        except IndexError:
            raise ProgramError(f"program has {len(self.blocks)} blocks; no block "
                               f"{index}") from None

    @property
    def num_blocks(self):
        return len(self.blocks)

    def list_vars(self):
        for b in self.blocks:
            yield from b.vars.values()

    def __repr__(self):
        return (f"{type(self).__name__}({len(self.blocks)} blocks, "
                f"{sum(len(b.ops) for b in self.blocks)} ops)")


def as_program_view(program):
    """A ProgramView of `program`: itself when it is one (the builder's Program is), a new
    view when it is a ProgramDesc."""
    if isinstance(program, ProgramView):
        return program
    if isinstance(program, pb.ProgramDesc):
        return ProgramView(program)
    raise TypeError(f"expected a Program or ProgramDesc, got {type(program).__name__}")


def copy_data_marks(dst, src, block_map=None, strict=False):
    """Give `dst`'s variables the data marks (`is_data`, `need_check_feed`, `stop_gradient`)
    of their namesakes in `src`, block `i` of `dst` reading block `block_map[i]` of `src`
    (identity by default; a block not in the map is left alone). `strict`: a variable `src`
    lacks is a ValueError (Fluid's `_copy_data_info_from`); otherwise it is passed over (a
    transpiled program has variables of its own)."""
    if block_map is None:
        block_map = {i: i for i in range(len(dst.blocks))}
    for idx, block in enumerate(dst.blocks):
        origin = block_map.get(idx)
        if origin is None:
            continue
        if origin >= len(src.blocks):
            raise ValueError(f"block {origin} is not in the source program "
                             f"({len(src.blocks)} blocks)")
        src_vars = src.blocks[origin].vars
        for name, var in list(block.vars.items()):
            other = src_vars.get(name)
            if other is None:
                if strict:
                    raise ValueError(f"var {name} not in this block")
                continue
            if getattr(other, "is_data", False):
                var.is_data = True
            if other.desc.need_check_feed:
                var.desc.need_check_feed = True
            if other.stop_gradient:
                var.stop_gradient = True
