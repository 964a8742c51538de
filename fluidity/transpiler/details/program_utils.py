"""Op lookups over a Block, by the variables ops read or write."""

__all__ = ["delete_ops", "find_op_by_input_arg", "find_op_by_output_arg"]


def delete_ops(block, ops):
    """Remove each of `ops` from `block` (an op not in the block is skipped)."""
    for op in ops:
        current = list(block.ops)
        for idx, o in enumerate(current):
            if o is op or (hasattr(o, "desc") and hasattr(op, "desc") and o.desc is op.desc):
                block._remove_op(idx)
                break


def find_op_by_input_arg(block, arg_name):
    """Index of the first op of `block` that reads `arg_name`, or -1."""
    for i, op in enumerate(block.ops):
        if arg_name in op.input_arg_names:
            return i
    return -1


def find_op_by_output_arg(block, arg_name, reverse=False):
    """Index of the first (`reverse`: last) op of `block` that writes `arg_name`, or -1."""
    ops = list(block.ops)
    order = range(len(ops) - 1, -1, -1) if reverse else range(len(ops))
    for i in order:
        if arg_name in ops[i].output_arg_names:
            return i
    return -1
