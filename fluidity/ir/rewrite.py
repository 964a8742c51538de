"""Rewriting programs: insert, remove and rename ops and variables, add blocks.

Every function here changes a program through its views (`ir.views`), keeps the views in step
with the desc, and counts the change in the program's `revision`. Passes take a ProgramDesc,
rewrite a copy (`copy_program`) and return it, so their input is never touched; the builder's
in-place methods (`Block.append_op`, ...) are these same functions applied to the program
being built.

    prog = ProgramView(copy_program(desc))
    b = prog.global_block()
    op = insert_op(b, 0, "scale", {"X": ["x"]}, {"Out": ["y"]}, {"scale": 2.0})
    remove_ops(b, 3, 5)
    return prog.desc
"""
from ..core.dtypes import VarType
from ..errors import ArgumentTypeError, ProgramError, VariableNotFoundError
from ..ops import registry
from ..proto import framework_pb2 as pb
from .infer_shape import InferShapeContext
from ..core.names import EMPTY_VAR_NAME
from .views import ProgramView, VarView, fill_var_type


def copy_program(desc):
    """A deep copy of a ProgramDesc."""
    out = pb.ProgramDesc()
    out.CopyFrom(desc)
    return out


def touch(program):
    """Count a change made to `program`'s descs other than through this module."""
    program.revision += 1


# --- ops ---------------------------------------------------------------------------------
def _names(value, what):
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        out = []
        for v in value:
            out.extend(_names(v, what))
        return out
    if isinstance(value, VarView):
        return [value.name]
    if isinstance(value, str):
        return [value]
    raise ArgumentTypeError(f"{what}: expected a Variable or a variable name, got "
                            f"{type(value).__name__}")


def _fill_slots(repeated, slots, given, op_type, what):
    given = dict(given or {})
    declared = {s.name for s in slots}
    for name in given:
        if name not in declared:
            raise ProgramError(f"op '{op_type}' has no {what} slot '{name}'; its {what}s are "
                               f"{[s.name for s in slots]}")
    filled = []
    for s in slots:
        names = _names(given.get(s.name), f"op '{op_type}' {what} '{s.name}'")
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


def write_attr(op_desc, name, value):
    """Set attribute `name` of an OpDesc, stored as its schema's AttrType (else the type
    the value suggests)."""
    opdef = registry.find(op_desc.type)
    type_ = opdef.attr_type(name) if opdef is not None else None
    if type_ is None:
        type_ = registry.attr_type_of(value)
    registry.check_value(type_, name, value, op_desc.type)   # before an Attr is added
    for a in op_desc.attrs:
        if a.name == name:
            registry.write_attr(a, name, value, type_)
            return
    registry.write_attr(op_desc.attrs.add(), name, value, type_)


def make_op_desc(op_type, inputs=None, outputs=None, attrs=None):
    """A new OpDesc of a registered op type: slots checked against its schema (names or
    variables), the given attributes and every declared default (but the common ones)
    written, in name order. An attribute given as None is left out."""
    opdef = registry.get(op_type)
    od = pb.OpDesc(type=op_type)
    _fill_slots(od.inputs, opdef.inputs, inputs, op_type, "input")
    _fill_slots(od.outputs, opdef.outputs, outputs, op_type, "output")
    attrs = dict(attrs or {})
    for name, default in opdef.defaults().items():
        if name not in attrs and name not in registry.COMMON_ATTRS and default is not None:
            attrs[name] = default
    for name in sorted(attrs):
        if attrs[name] is not None:
            write_attr(od, name, attrs[name])
    return od


def insert_op_desc(block, index, op_desc):
    """Insert (a copy of) `op_desc` at `index` of `block` (past the end: append); returns its
    view."""
    ops = block.desc.ops
    if index >= len(block.ops):
        ops.add().CopyFrom(op_desc)
        op = block.wrap_op(ops[len(ops) - 1])
        block.ops.append(op)
    else:
        index = max(index, 0)
        ops.insert(index, op_desc)
        op = block.wrap_op(ops[index])
        block.ops.insert(index, op)
    touch(block.program)
    return op


def insert_op(block, index, op_type, inputs=None, outputs=None, attrs=None, infer_shape=False):
    """Insert a new op at `index` of `block`; returns its view. With `infer_shape`, its
    inputs must exist and its OpDef sets its outputs' shapes; if either fails the op is
    removed again and the error raised."""
    op = insert_op_desc(block, index, make_op_desc(op_type, inputs, outputs, attrs))
    if infer_shape:
        opdef = registry.get(op_type)
        try:
            check_inputs_exist(op)
            if opdef.infer_shape is not None:
                opdef.infer(InferShapeContext(op))
        except Exception:
            remove_op(block, op)
            raise
    return op


def append_op(block, op_type, inputs=None, outputs=None, attrs=None, infer_shape=False):
    return insert_op(block, len(block.ops), op_type, inputs, outputs, attrs, infer_shape)


def check_inputs_exist(op):
    """Raise VariableNotFoundError for an input name no block on the op's lookup path
    declares."""
    block = op.block
    for slot in op.input_names:
        for n in op.input(slot):
            if n != EMPTY_VAR_NAME and block.find_var_recursive(n) is None:
                raise VariableNotFoundError(
                    f"op '{op.type}': input '{slot}' names variable '{n}', which is not "
                    f"declared in block {block.idx} or its ancestors")


def remove_ops(block, start, end=None):
    """Remove ops [start, end) of `block` (one op when end is None)."""
    end = start + 1 if end is None else end
    del block.desc.ops[start:end]
    del block.ops[start:end]
    for op, od in zip(block.ops, block.desc.ops):   # views of later ops follow their descs
        op.desc = od
    touch(block.program)


def remove_op(block, op):
    """Remove the op whose view is `op`."""
    remove_ops(block, op.idx)


def set_attr(op, name, value):
    write_attr(op.desc, name, value)
    touch(op.block.program)


def remove_attrs(op, names):
    """Drop attributes `names` from an op's desc (schema defaults apply again)."""
    keep = [a for a in op.desc.attrs if a.name not in names]
    if len(keep) != len(op.desc.attrs):
        del op.desc.attrs[:]
        op.desc.attrs.extend(keep)
        touch(op.block.program)


def _set_slot(repeated, slot, names):
    for v in repeated:
        if v.parameter == slot:
            del v.arguments[:]
            v.arguments.extend(names)
            return
    var = repeated.add()
    var.parameter = slot
    var.arguments.extend(names)


def set_inputs(op, slot, names):
    _set_slot(op.desc.inputs, slot, _names(names, f"op '{op.type}' input '{slot}'"))
    touch(op.block.program)


def set_outputs(op, slot, names):
    _set_slot(op.desc.outputs, slot, _names(names, f"op '{op.type}' output '{slot}'"))
    touch(op.block.program)


def rename_arg(op, old, new):
    """Rename variable `old` to `new` wherever `op` reads or writes it."""
    for slots in (op.desc.inputs, op.desc.outputs):
        for v in slots:
            for i, a in enumerate(v.arguments):
                if a == old:
                    v.arguments[i] = new
    touch(op.block.program)


# --- variables -----------------------------------------------------------------------------
def add_var(block, name, type=VarType.LOD_TENSOR, shape=None, dtype=None, lod_level=None,
            persistable=False, stop_gradient=False, need_check_feed=False, is_parameter=False):
    """Declare a new variable in `block`; returns its view. The name must be new there."""
    if name in block.vars:
        raise ProgramError(f"block {block.idx} already declares variable '{name}'")
    vd = block.desc.vars.add()
    vd.name = name
    fill_var_type(vd.type, type, shape, dtype, lod_level)
    vd.persistable = bool(persistable)
    vd.stop_gradient = bool(stop_gradient)
    vd.need_check_feed = bool(need_check_feed)
    if is_parameter:
        vd.is_parameter = True
    v = block.vars[name] = block.wrap_var(vd)
    touch(block.program)
    return v


def remove_vars(block, names):
    """Drop the variables `names` declares in `block` (names it lacks are ignored), in one
    pass over the desc."""
    names = {n for n in names if n in block.vars}
    if not names:
        return
    for i in range(len(block.desc.vars) - 1, -1, -1):
        if block.desc.vars[i].name in names:
            del block.desc.vars[i]
    for n in names:
        del block.vars[n]
    by_name = {vd.name: vd for vd in block.desc.vars}
    for n, v in block.vars.items():       # views of the others follow their descs
        v.desc = by_name[n]
    touch(block.program)


def rename_var(block, old, new):
    """Rename variable `old` of `block` to `new`, in its declaration and in every op of the
    block that uses it; returns its view."""
    if new in block.vars:
        raise ProgramError(f"cannot rename '{old}' to '{new}': '{new}' exists")
    if old not in block.vars:
        raise VariableNotFoundError(f"cannot rename '{old}': block {block.idx} does not "
                                    f"declare it")
    v = block.vars.pop(old)
    v.desc.name = new
    block.vars[new] = v
    for op in block.ops:
        rename_arg(op, old, new)
    touch(block.program)
    return v


# --- blocks --------------------------------------------------------------------------------
def add_block(program, parent_idx):
    """Append a new, empty block whose parent is `parent_idx`; returns its view."""
    bd = program.desc.blocks.add()
    bd.idx = len(program.desc.blocks) - 1
    bd.parent_idx = parent_idx
    block = program.wrap_block(bd.idx)
    program.blocks.append(block)
    touch(program)
    return block


def remove_blocks(program, idxs):
    """Drop blocks `idxs` (never block 0, never one a remaining op runs): the others are
    renumbered in order, and their parent, forward-block and sub-block references follow."""
    idxs = set(idxs)
    if 0 in idxs:
        raise ProgramError("remove_blocks: block 0 cannot be removed")
    keep = [i for i in range(len(program.desc.blocks)) if i not in idxs]
    new_idx = {old: new for new, old in enumerate(keep)}
    for old in keep:
        for od in program.desc.blocks[old].ops:
            for a in od.attrs:
                used = [a.block_idx] if a.type == pb.BLOCK else \
                    list(a.blocks_idx) if a.type == pb.BLOCKS else []
                if any(i in idxs for i in used):
                    raise ProgramError(f"remove_blocks: op '{od.type}' of block {old} runs "
                                       f"block {used}, which would be removed")
    for i in sorted(idxs, reverse=True):
        del program.desc.blocks[i]
    views = [program.blocks[old] for old in keep]
    for new, (old, view) in enumerate(zip(keep, views)):
        bd = program.desc.blocks[new]
        bd.idx = new
        bd.parent_idx = -1 if old == 0 else new_idx.get(bd.parent_idx, 0)
        if bd.HasField("forward_block_idx") and bd.forward_block_idx >= 0:
            bd.forward_block_idx = new_idx.get(bd.forward_block_idx, -1)
        for od in bd.ops:
            for a in od.attrs:
                if a.type == pb.BLOCK:
                    a.block_idx = new_idx[a.block_idx]
                elif a.type == pb.BLOCKS:
                    a.blocks_idx[:] = [new_idx[i] for i in a.blocks_idx]
        # views follow their descs (as remove_vars)
        view.desc = bd
        by_name = {vd.name: vd for vd in bd.vars}
        for n, v in view.vars.items():
            v.desc = by_name[n]
        for op, od in zip(view.ops, bd.ops):
            op.desc = od
    program.blocks[:] = views
    touch(program)


# --- passes as pure functions ---------------------------------------------------------------
def on_copy(desc, pass_, *args, **kwargs):
    """Run `pass_(program_view, *args, **kwargs)`, a pass that rewrites a ProgramView in
    place, on a copy of `desc`: returns (the new ProgramDesc, what the pass returned). `desc`
    is not touched."""
    view = ProgramView(copy_program(desc))
    result = pass_(view, *args, **kwargs)
    return view.desc, result
