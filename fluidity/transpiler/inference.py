"""The pass behind `Program.clone(for_test=True)`: turn a training program into an inference
program, in place.

* drop every op whose `op_role` has the Backward, Optimize or LRSched bit (a loss op,
  Forward|Loss, stays; the Backward|Loss seed of loss@GRAD goes);
* set `is_test` to True on every remaining op whose OpDef declares an `is_test` attribute
  (dropout, batch_norm, pool2d, lookup_table, ...): read from the registry, not a list;
* drop variables no remaining op reads or writes, except feed targets (data variables and
  outputs of feed ops) and, in a program without a backward pass, persistables; a program
  with one (a Backward|Loss op) loses the persistables only training used (learning rates,
  optimizer accumulators), as Fluid 1.8's prune_backward.

Ops inside sub-blocks are filtered the same way. In a program with a backward pass, the
blocks left without ops that no op runs (gradient blocks) are removed and the others
renumbered, as Fluid 1.8's prune_backward; otherwise every block is kept.
`inference_desc(desc)` is the same pass as a pure function of descs.
"""
from ..core.names import OpRole
from ..ir import rewrite
from ..ir.views import ProgramView
from ..ops import registry
from ..proto import framework_pb2 as pb

_DROP_ROLES = OpRole.Backward | OpRole.Optimize | OpRole.LRSched


def _drop_ops(block):
    """Remove training-only ops, a run of consecutive ops at a time."""
    drop = [i for i, op in enumerate(block.ops) if op.role & _DROP_ROLES]
    while drop:
        end = drop.pop()
        start = end
        while drop and drop[-1] == start - 1:
            start = drop.pop()
        rewrite.remove_ops(block, start, end + 1)


def set_is_test(program, also_declared_by_desc=False):
    """Set `is_test` to True on every op whose OpDef declares it (and, with
    `also_declared_by_desc`, on every op whose desc carries it)."""
    for block in program.blocks:
        for op in block.ops:
            opdef = registry.find(op.type)
            if (opdef is not None and opdef.declares("is_test")) or \
                    (also_declared_by_desc and op.has_attr("is_test")):
                rewrite.set_attr(op, "is_test", True)


def make_inference_program(program):
    """Rewrite `program` (a ProgramView: the builder's Program is one) for inference;
    returns it."""
    # a program with a backward pass (its loss@GRAD seed) loses the training state no
    # forward op uses (learning rates, optimizer accumulators), as Fluid's prune_backward
    trained = any(op.role & OpRole.Backward and op.role & OpRole.Loss
                  for block in program.blocks for op in block.ops)
    for block in program.blocks:
        _drop_ops(block)
    set_is_test(program)
    used = set()
    for block in program.blocks:
        for op in block.ops:
            used.update(op.input_arg_names)
            used.update(op.output_arg_names)
    for block in program.blocks:
        rewrite.remove_vars(block, {name for name, var in block.vars.items()
                                    if name not in used and not var.need_check_feed
                                    and (trained or not var.persistable)})
    if trained:    # the gradient blocks, left without ops, go (Fluid's prune_backward)
        run = {i for block in program.blocks for op in block.ops
               for i in _sub_blocks(op)}
        rewrite.remove_blocks(program, [b.idx for b in program.blocks[1:]
                                        if not b.ops and b.idx not in run])
    return program


def _sub_blocks(op):
    """The block indices `op` runs (its BLOCK and BLOCKS attributes)."""
    out = []
    for a in op.desc.attrs:
        if a.type == pb.BLOCK:
            out.append(a.block_idx)
        elif a.type == pb.BLOCKS:
            out.extend(a.blocks_idx)
    return out


def inference_desc(desc):
    """The inference ProgramDesc of a training ProgramDesc (`desc` is not touched)."""
    return make_inference_program(ProgramView(rewrite.copy_program(desc))).desc
