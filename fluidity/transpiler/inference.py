"""The pass behind `Program.clone(for_test=True)`: turn a training program into an inference
program, in place.

* drop every op whose `op_role` has the Backward, Optimize or LRSched bit (a loss op,
  Forward|Loss, stays; the Backward|Loss seed of loss@GRAD goes);
* set `is_test` to True on every remaining op whose OpDef declares an `is_test` attribute
  (dropout, batch_norm, pool2d, lookup_table, ...): read from the registry, not a list;
* drop variables no remaining op reads or writes, except persistables (parameters, moving
  statistics, learning rates) and feed targets (data variables and outputs of feed ops).

Blocks are kept (sub-block indices stay valid); ops inside them are filtered the same way.
"""
from ..framework import OpRole
from ..ops import registry

_DROP_ROLES = OpRole.Backward | OpRole.Optimize | OpRole.LRSched


def _role(op):
    return op.attr("op_role") if op.has_attr("op_role") else OpRole.Forward


def _drop_ops(block):
    """Remove training-only ops, a run of consecutive ops at a time."""
    drop = [i for i, op in enumerate(block.ops) if _role(op) & _DROP_ROLES]
    while drop:
        end = drop.pop()
        start = end
        while drop and drop[-1] == start - 1:
            start = drop.pop()
        block._remove_op(start, end + 1)


def _set_is_test(block):
    for op in block.ops:
        opdef = registry.find(op.type)
        if opdef is not None and opdef.declares("is_test"):
            op._set_attr("is_test", True)


def make_inference_program(program):
    """Rewrite `program` (a fresh clone) for inference; returns it."""
    for block in program.blocks:
        _drop_ops(block)
        _set_is_test(block)
    used = set()
    for block in program.blocks:
        for op in block.ops:
            used.update(op.input_arg_names)
            used.update(op.output_arg_names)
    for block in program.blocks:
        block._remove_vars({name for name, var in block.vars.items()
                             if name not in used and not var.persistable
                             and not var.need_check_feed})
    return program
