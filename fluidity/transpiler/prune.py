"""Prune a program to what some target variables need (Paddle's `core.prune` behind
`Program._prune_with_input`), and the inference clean-up `save_inference_model` applies.

Walking block 0 backwards, an op is kept when it writes a variable that a target or a kept
op needs and it is not an optimizer op; a kept op's inputs become needed, except fed
variables: feeding a variable cuts off the ops that produce it. An op with sub-blocks
(while, conditional_block, ...) also needs every variable read inside them, and its
sub-blocks are kept whole. Blocks no kept op refers to are dropped and the rest renumbered.
Block 0 keeps only the variables that kept ops (or kept sub-blocks) mention, plus the
targets, sorted by name as Paddle writes them. The result is a new ProgramDesc; the input is
not touched (`Program._prune_with_input` wraps it for the builder).
"""
from ..core.dtypes import VarType
from ..core.names import OpRole
from ..errors import ProgramError
from ..ir import rewrite
from ..ir.views import args, op_role, sub_block_ids
from ..proto import framework_pb2 as pb
from .inference import set_is_test

AttrType = pb.AttrType


def _block_tree(desc, idx, acc):
    """Add block `idx` and every block its ops (transitively) refer to, to `acc`."""
    if idx in acc:
        return acc
    if not 0 <= idx < len(desc.blocks):
        raise ProgramError(f"an op refers to block {idx}; the program has {len(desc.blocks)}")
    acc.add(idx)
    for od in desc.blocks[idx].ops:
        for b in sub_block_ids(od):
            _block_tree(desc, b, acc)
    return acc


def prune_desc(desc, targets, feeds=(), target_ops=()):
    """A new ProgramDesc holding what block 0 of `desc` needs to compute `targets` (variable
    names) given that `feeds` are fed, and to run the ops of block 0 at the indices
    `target_ops` (kept whatever their role: an optimizer op is kept only so, as in Fluid,
    where passing `minimize`'s ops picks which optimizer a run applies)."""
    feeds = set(feeds)
    target_ops = set(target_ops)
    b0 = desc.blocks[0]
    needed = {t for t in targets if t not in feeds}
    keep = []
    for i in range(len(b0.ops) - 1, -1, -1):
        od = b0.ops[i]
        if i not in target_ops and (op_role(od) & OpRole.Optimize or
                                    not any(o in needed for o in args(od.outputs))):
            keep.append(False)
            continue
        keep.append(True)
        reads = args(od.inputs)
        for b in sub_block_ids(od):
            for sub in _block_tree(desc, b, set()):
                for sod in desc.blocks[sub].ops:
                    reads += args(sod.inputs)
        needed.update(n for n in reads if n not in feeds)
    keep.reverse()
    kept_ops = [od for od, k in zip(b0.ops, keep) if k]

    reachable = {0}
    for od in kept_ops:
        for b in sub_block_ids(od):
            _block_tree(desc, b, reachable)
    order = sorted(reachable)
    new_idx = {old: new for new, old in enumerate(order)}

    mentioned = set(targets)
    for od in kept_ops:
        mentioned.update(args(od.inputs) + args(od.outputs))
    for old in order[1:]:
        for od in desc.blocks[old].ops:
            mentioned.update(args(od.inputs) + args(od.outputs))

    out = pb.ProgramDesc()
    out.version.CopyFrom(desc.version)
    out.op_version_map.CopyFrom(desc.op_version_map)
    for old in order:
        src = desc.blocks[old]
        bd = out.blocks.add()
        bd.idx = new_idx[old]
        bd.parent_idx = -1 if old == 0 else new_idx.get(src.parent_idx, 0)
        if src.HasField("forward_block_idx"):
            bd.forward_block_idx = new_idx.get(src.forward_block_idx, -1)
        if old == 0:
            bd.vars.extend(sorted((v for v in src.vars if v.name in mentioned),
                                  key=lambda v: v.name))
            ops = kept_ops
        else:
            bd.vars.extend(src.vars)
            ops = src.ops
        for od in ops:
            nod = bd.ops.add()
            nod.CopyFrom(od)
            for a in nod.attrs:
                if a.type == AttrType.BLOCK:
                    a.block_idx = new_idx[a.block_idx]
                elif a.type == AttrType.BLOCKS:
                    a.blocks_idx[:] = [new_idx[i] for i in a.blocks_idx]
    return out


def check_targets(program, targets):
    """Raise ProgramError for a target name block 0 of `program` (a view) cannot find."""
    block = program.global_block()
    for t in targets:
        if block.find_var_recursive(t) is None:
            raise ProgramError(f"prune: target '{t}' is not a variable of the program")


def inference_optimize(program, prune_read_op=True):
    """Paddle's `Program._inference_optimize`, in place over a ProgramView (the builder's
    `Program._inference_optimize` runs it on a copy; `save_inference_model` on its pruned
    program): every `is_test` attribute (on ops whose desc or OpDef has one) set to True and,
    with `prune_read_op`, block 0's ops up to and including its first `read` op and its
    READER variables dropped, so the program is fed by feed ops."""
    if prune_read_op:
        b0 = program.global_block()
        reads = [i for i, op in enumerate(b0.ops) if op.type == "read"]
        if reads:
            rewrite.remove_ops(b0, 0, reads[0] + 1)
        rewrite.remove_vars(b0, [n for n, v in b0.vars.items() if v.type == VarType.READER])
    set_is_test(program, also_declared_by_desc=True)
    return program
