"""Readable text of a program, block, op or variable (`fluidity show`, `Program.to_string`)."""
from ..core import dtypes
from ..core.dtypes import VarType
from .views import TENSORLIKE


def printable(text):
    """`text` with control and other unprintable characters escaped (as repr() writes
    them), so a name read from a hostile file cannot move the cursor, recolour the
    terminal or forge a line of the listing."""
    text = str(text)
    return text if text.isprintable() else repr(text)[1:-1]


# attributes of every op that say nothing about what it computes
_HIDDEN_ATTRS = {"op_callstack", "op_role_var", "op_namescope", "op_device", "with_quant_attr"}


def format_var(v, details=False):
    """`name : float32[-1, 3] (persistable, ...)`; `details` adds every flag of the desc
    (Fluid's `to_string(with_details=True)`)."""
    if details:
        d = v.desc
        extra = (f"persistable={d.persistable}, stop_gradient={d.stop_gradient}, "
                 f"need_check_feed={d.need_check_feed}, is_parameter={v.is_parameter}")
        return f"{format_var(v)} {{{extra}}}"
    t = v.type
    flags = []
    if v.persistable:
        flags.append("persistable")
    if v.is_parameter:
        flags.append("parameter")
    if v.stop_gradient:
        flags.append("stop_gradient")
    if t in TENSORLIKE:
        kind = {VarType.LOD_TENSOR: "", VarType.SELECTED_ROWS: "selected_rows ",
                VarType.LOD_TENSOR_ARRAY: "tensor_array "}[t]
        lod = f" lod_level={v.lod_level}" if v.lod_level else ""
        desc = f"{kind}{dtypes.name(v.dtype)}{list(v.shape)}{lod}"
    else:
        desc = VarType.Type.Name(t).lower()
    return f"{printable(v.name)} : {desc}" + (f" ({', '.join(flags)})" if flags else "")


def _fmt_attr(value):
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list) and len(value) > 8:
        return "[" + ", ".join(_fmt_attr(x) for x in value[:8]) + f", ... ({len(value)})]"
    return repr(value)


def format_op(op, show_role=False, details=False):
    """`out = type(X=x) {attrs}`; `details` shows every attribute the desc holds, the
    framework's own (role, name scope, call stack) included."""
    def slots(m):
        return ", ".join(f"{printable(k)}={printable(v[0]) if len(v) == 1 else v}"
                         for k, v in m.items() if v)
    attrs = {k: v for k, v in op.all_attrs().items() if details or k not in _HIDDEN_ATTRS}
    if not (show_role or details) and attrs.get("op_role") == 0:
        attrs.pop("op_role")
    a = ", ".join(f"{printable(k)}={_fmt_attr(v)}" for k, v in sorted(attrs.items()))
    return f"{slots(op.outputs_map())} = {printable(op.type)}({slots(op.inputs_map())})" + (
        f" {{{a}}}" if a else "")


def format_block(block, var_key=None, details=False):
    """The block's variables (in desc order, or sorted by `var_key(name)`) and ops."""
    head = f"block {block.idx}" + (f" (parent {block.parent_idx})" if block.parent_idx >= 0
                                   else "")
    if block.forward_block_idx >= 0:
        head += f" (forward block {block.forward_block_idx})"
    lines = [head + ":", "  vars:"]
    vs = block.vars.values()
    if var_key is not None:
        vs = sorted(vs, key=lambda v: var_key(v.name))
    lines += [f"    {format_var(v, details)}" for v in vs]
    lines.append("  ops:")
    lines += [f"    {format_op(op, details=details)}" for op in block.ops]
    return "\n".join(lines)


def format_program(program, var_key=None, details=False):
    head = f"program (version {program.desc.version.version}"
    if program.desc.op_version_map.pair:
        head += f", {len(program.desc.op_version_map.pair)} op versions"
    head += ")"
    return "\n".join([head] + [format_block(b, var_key, details) for b in program.blocks])
