"""Fluid's `fluid.debugger`: a program as readable code, and a block drawn with Graphviz.

`pprint_program_codes(program)` and `pprint_block_codes(block, show_backward=False)` give
one line per variable (`name : float32[5, 10] (persistable)`) and per op
(`Out=out = mul(X=x, Y=y) {x_num_col_dims=1}`), as `fluidity show` prints them;
`draw_block_graphviz(block, highlights=None, path="./temp.dot")` writes the block's
dataflow as a DOT file (and a PDF when Graphviz is installed): parameters as boxes,
other variables as arguments, ops between them, `highlights` (variable names) in colour.
"""
from .core.dtypes import VarType
from .core.names import GRAD_SUFFIX, OpRole
from .graphviz import GraphPreviewGenerator
from .ir.format import format_op, format_var, printable
from .ir.views import op_role

__all__ = ["pprint_program_codes", "pprint_block_codes", "draw_block_graphviz", "repr_var",
           "repr_attr", "repr_data_type"]


def repr_data_type(type):  # noqa: A002 -- Fluid's argument name
    """A VarType code's name in lower case ('fp32', 'lod_tensor')."""
    return VarType.Type.Name(type).lower()


def repr_var(var):
    """One variable as a line of code."""
    return format_var(var)


def repr_attr(op):
    """An op's attributes as `name=value` pairs (the framework's own left out)."""
    text = format_op(op)
    return text[text.index("{") + 1:-1] if text.endswith("}") else ""


def _is_backward(op):
    return bool(op_role(op.desc if not hasattr(op.desc, "proto") else op.desc.proto)
                & OpRole.Backward) or any(GRAD_SUFFIX in n for n in op.output_arg_names)


def pprint_block_codes(block, show_backward=False):
    """Block `block` (a Block of a Program) as code: its variables, then its ops; backward
    ops only with `show_backward`."""
    lines = [f"// block-{block.idx}  parent-{block.parent_idx}"]
    lines += [repr_var(v) for v in block.vars.values()]
    lines.append("")
    lines += [format_op(op) for op in block.ops if show_backward or not _is_backward(op)]
    return "\n".join(lines) + "\n"


def pprint_program_codes(program):
    """Every block of `program` as code (`pprint_block_codes`)."""
    return "\n".join(pprint_block_codes(block) for block in program.blocks)


def draw_block_graphviz(block, highlights=None, path="./temp.dot"):
    """Write block `block`'s dataflow graph to the DOT file `path` (a PDF beside it when
    Graphviz's `dot` is installed); variables named in `highlights` are coloured."""
    highlights = set(highlights or ())
    graph = GraphPreviewGenerator(f"some graph of block {block.idx}")
    nodes = {}

    def var_node(name):
        node = nodes.get(name)
        if node is None:
            var = block.vars.get(name)
            if var is not None and var.is_parameter:
                node = graph.add_param(printable(name), repr_data_type(var.dtype)
                                       if var.dtype is not None else "",
                                       highlight=name in highlights)
            else:
                node = graph.add_arg(printable(name), highlight=name in highlights)
            nodes[name] = node
        return node

    for op in block.ops:
        op_node = graph.add_op(printable(op.type))
        for name in op.input_arg_names:
            graph.add_edge(var_node(name), op_node, highlight=name in highlights)
        for name in op.output_arg_names:
            graph.add_edge(op_node, var_node(name), highlight=name in highlights)
    graph(path, show=False)
    return path
