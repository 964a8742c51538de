"""Prune a program to what some target variables need (Paddle's `core.prune` behind
`Program._prune_with_input`), and the inference clean-up `save_inference_model` applies.

Walking block 0 backwards, an op is kept when it writes a variable that a target or a kept
op needs and it is not an optimizer op; a kept op's inputs become needed, except fed
variables: feeding a variable cuts off the ops that produce it. An op with sub-blocks
(while, conditional_block, ...) also needs every variable read inside them, and its
sub-blocks are kept whole. Blocks no kept op refers to are dropped and the rest renumbered.
Block 0 keeps only the variables that kept ops (or kept sub-blocks) mention, plus the
targets, sorted by name as Paddle writes them. The result is a new Program built from the
new desc; the input is not touched.
"""
from ..core.dtypes import VarType
from ..errors import ProgramError
from ..framework import OpRole, Program
from ..ops import registry
from ..proto import framework_pb2 as pb

AttrType = pb.AttrType


def _args(slots):
    return [a for v in slots for a in v.arguments]


def _role(od):
    for a in od.attrs:
        if a.name == "op_role":
            return a.i
    return OpRole.Forward


def _sub_blocks(od):
    for a in od.attrs:
        if a.type == AttrType.BLOCK:
            yield a.block_idx
        elif a.type == AttrType.BLOCKS:
            yield from a.blocks_idx


def _block_tree(desc, idx, acc):
    """Add block `idx` and every block its ops (transitively) refer to, to `acc`."""
    if idx in acc:
        return acc
    if not 0 <= idx < len(desc.blocks):
        raise ProgramError(f"an op refers to block {idx}; the program has {len(desc.blocks)}")
    acc.add(idx)
    for od in desc.blocks[idx].ops:
        for b in _sub_blocks(od):
            _block_tree(desc, b, acc)
    return acc


def _names(x):
    return [getattr(v, "name", v) for v in (x if isinstance(x, (list, tuple)) else [x])]


def prune_desc(desc, targets, feeds=()):
    """A new ProgramDesc holding what block 0 of `desc` needs to compute `targets` (variable
    names) given that `feeds` are fed."""
    feeds = set(feeds)
    b0 = desc.blocks[0]
    needed = {t for t in targets if t not in feeds}
    keep = []
    for od in reversed(b0.ops):
        if _role(od) & OpRole.Optimize or not any(o in needed for o in _args(od.outputs)):
            keep.append(False)
            continue
        keep.append(True)
        reads = _args(od.inputs)
        for b in _sub_blocks(od):
            for sub in _block_tree(desc, b, set()):
                for sod in desc.blocks[sub].ops:
                    reads += _args(sod.inputs)
        needed.update(n for n in reads if n not in feeds)
    keep.reverse()
    kept_ops = [od for od, k in zip(b0.ops, keep) if k]

    reachable = {0}
    for od in kept_ops:
        for b in _sub_blocks(od):
            _block_tree(desc, b, reachable)
    order = sorted(reachable)
    new_idx = {old: new for new, old in enumerate(order)}

    mentioned = set(targets)
    for od in kept_ops:
        mentioned.update(_args(od.inputs) + _args(od.outputs))
    for old in order[1:]:
        for od in desc.blocks[old].ops:
            mentioned.update(_args(od.inputs) + _args(od.outputs))

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


def prune(program, targets, feeded_var_names=()):
    """A new Program with what `targets` (Variables or names) need, `feeded_var_names`
    cutting off their producers."""
    targets = _names(targets)
    block = program.global_block()
    for t in targets:
        if block._find_var_recursive(t) is None:
            raise ProgramError(f"prune: target '{t}' is not a variable of the program")
    return Program(prune_desc(program.desc, targets, _names(feeded_var_names)))


def inference_optimize(program):
    """Paddle's `_inference_optimize(prune_read_op=True)`, in place: drop block 0's ops up to
    and including a `read` op and its READER variables, and set every `is_test` attribute
    (on ops whose desc or OpDef has one) to True."""
    b0 = program.global_block()
    reads = [i for i, op in enumerate(b0.ops) if op.type == "read"]
    if reads:
        b0._remove_op(0, reads[0] + 1)
    for name in [n for n, v in b0.vars.items() if v.type == VarType.READER]:
        b0._remove_var(name)
    for block in program.blocks:
        for op in block.ops:
            opdef = registry.find(op.type)
            if op.has_attr("is_test") or (opdef is not None and opdef.declares("is_test")):
                op._set_attr("is_test", True)
    return program
