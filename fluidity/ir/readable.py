"""Fluid 1.8's readable debug text of programs (`Variable/Operator/Block/Program.
_to_readable_code()`): one line per variable and per op, Python-like, as Fluid prints them.

    persist trainable param W : fluid.VarType.LOD_TENSOR.shape(23, 48).astype(VarType.FP32)
    {Out=['X']} = abs(inputs={X=['X']}, op_role = 0, ...)

(`to_string` gives Fluidity's own summary; this is the text Fluid programs and tests print.)"""
from ..core import dtypes
from ..core.dtypes import VarType
from ..proto import framework_pb2 as pb

__all__ = ["var_code", "op_code", "block_code", "program_code"]

_TENSORS = (VarType.LOD_TENSOR, VarType.SELECTED_ROWS)


def _type_name(t):
    return f"VarType.{pb.VarType.Type.Name(int(t))}"


def var_code(var, is_parameter=False, trainable=True):
    """`[persist ][trainable ]param|var name : fluid.VarType.T[.shape(...).astype(...)]`."""
    head = f"{var.name} : fluid.{_type_name(var.type)}"
    if var.type in _TENSORS:
        shape = tuple(int(d) for d in var.shape)
        head += f".shape{shape}.astype({_type_name(dtypes.to_code(var.dtype))})"
    kind = ("trainable param " if trainable else "param ") if is_parameter else "var "
    return ("persist " if var.persistable else "") + kind + head


def _slots(names, get):
    return "{" + ", ".join(f"{n}={list(get(n))}" for n in names) + "}"


def op_code(op, skip_op_callstack=True):
    """`{Out=[...]} = type(inputs={X=[...]}, attr = value, ...)`, attributes sorted by name,
    block attributes as `block[i]` / `blocks[...]`."""
    if not isinstance(skip_op_callstack, bool):
        raise TypeError(f"skip_op_callstack must be a bool, got "
                        f"{type(skip_op_callstack).__name__}")
    outputs = _slots(op.output_names, op.output)
    inputs = _slots(op.input_names, op.input)
    attrs = []
    for a in sorted(op.desc.attrs, key=lambda a: a.name):
        if skip_op_callstack and a.name == "op_callstack":
            continue
        if a.type == pb.BLOCK:
            attrs.append(f"{a.name} = block[{a.block_idx}]")
        elif a.type == pb.BLOCKS:
            attrs.append(f"{a.name} = blocks{list(a.blocks_idx)}")
        else:
            attrs.append(f"{a.name} = {op.attr(a.name)}")
    call = f"{op.type}(inputs={inputs}, {', '.join(attrs)})"
    return call if outputs == "{}" else f"{outputs} = {call}"


def block_code(block, var_line, skip_op_callstack=True):
    """`{ // block i` then its variables (`var_line(var)`), a blank line, its ops, `}`."""
    lines = [f"{{ // block {block.idx}"]
    lines += [f"    {var_line(v)}" for v in block.vars.values()]
    lines.append("")
    lines += [f"    {op_code(op, skip_op_callstack)}" for op in block.ops]
    return "\n".join(lines) + "\n}"


def program_code(program, var_line, skip_op_callstack=True):
    return "".join(block_code(b, var_line, skip_op_callstack) for b in program.blocks)
