"""The multi-batch-merge pass (Fluid's `multi_batch_merge_pass`, a graph pass a user
inserts into `BuildStrategy._finalize_strategy_and_create_passes()` with its
`num_repeats`): a training step runs its forward and backward `num_repeats` times, one
after the other, and the optimizer once, on the mean of the repeats' gradients.

    multi_batch_merge(desc, num_repeats) -> desc

is a pure function of ProgramDescs (the input is never touched). Block 0's ops are
classed by role as Fluid's pass classes them: forward (role Forward, or with the Loss
bit) and backward; optimize (Optimize, Dist or RPC bits), whose `op_role_var` pairs name
the parameter gradients; learning-rate schedule (LRSched). Any other role is an error.
The new block 0 is:

* repeat i = 0 .. num_repeats-1: a copy of every forward and backward op, in order, with
  each parameter gradient `g` it reads or writes renamed `g.repeat.<i>` (declared like
  `g`) and the `op_role_var` of an op writing one cleared. Other variables keep their
  names: a later repeat reads the same fed data and overwrites the earlier one's
  temporaries (the fetched loss is the last repeat's);
* per gradient: `sum` of its repeats into `g`, then `scale` by 1/num_repeats in place (role
  Backward, `op_role_var` [param, g]: what the data-parallel pass all-reduces);
* the learning-rate ops, then the optimize ops, unchanged.

One difference from Fluid 1.8: its pass renames batch_norm's running Mean and Variance
per repeat (`.repeat.<i>`) to variables no startup program initializes; here every repeat
updates the one running mean and variance in turn.
"""
from ..core.names import OpRole
from ..errors import ProgramError
from ..ir import rewrite
from ..ir.views import ProgramView
from ..proto import framework_pb2 as pb

NAME = "multi_batch_merge_pass"


def _kind(op):
    """"fb" (forward/backward), "opt" or "lr", as Fluid's pass classes an op by its role."""
    role = op.role
    if role == OpRole.Forward or role & (OpRole.Backward | OpRole.Loss):
        return "fb"
    if role & (OpRole.Optimize | OpRole.Dist | OpRole.RPC):
        return "opt"
    if role & OpRole.LRSched:
        return "lr"
    raise ProgramError(f"{NAME}: op '{op.type}' has op_role {role}, which is neither "
                       f"forward, backward, optimize nor learning-rate schedule")


def _grad_params(opt_ops):
    """{gradient: parameter} from the optimize ops' op_role_var pairs, in order."""
    out = {}
    for op in opt_ops:
        rv = list(op.attr("op_role_var") or []) if op.has_attr("op_role_var") else []
        for p, g in zip(rv[0::2], rv[1::2]):
            out.setdefault(g, p)
    return out


def _check_sub_blocks(prog, grads):
    """Refuse a program whose control-flow blocks write a parameter gradient: renaming it
    per repeat would need their ops renamed too."""
    for block in prog.blocks[1:]:
        for op in block.ops:
            hit = set(op.output_arg_names) & set(grads)
            if hit:
                raise NotImplementedError(
                    f"{NAME}: block {block.idx} writes parameter gradient {sorted(hit)[0]!r} "
                    f"inside control flow; merging its repeats is not built")


def multi_batch_merge(desc, num_repeats):
    """The ProgramDesc of `desc` with its forward and backward repeated `num_repeats`
    times and their gradients averaged before one optimizer step (see the module)."""
    if isinstance(num_repeats, bool) or not isinstance(num_repeats, int) or num_repeats < 1:
        raise ValueError(f"{NAME}: num_repeats must be an int >= 1, got {num_repeats!r}")
    prog = ProgramView(rewrite.copy_program(desc))
    b0 = prog.global_block()
    kinds = [(_kind(op), op) for op in b0.ops]
    fb = [op for k, op in kinds if k == "fb"]
    lr = [op for k, op in kinds if k == "lr"]
    opt = [op for k, op in kinds if k == "opt"]
    grad_of = _grad_params(opt)
    _check_sub_blocks(prog, grad_of)
    repeated = {}            # gradient -> [its repeats' names], in the order first met
    new_ops = []
    for i in range(num_repeats):
        for op in fb:
            od = pb.OpDesc()
            od.CopyFrom(op.desc)
            writes_grad = False
            for slots, is_out in ((od.inputs, False), (od.outputs, True)):
                for v in slots:
                    for j, a in enumerate(v.arguments):
                        if a in grad_of:
                            v.arguments[j] = f"{a}.repeat.{i}"
                            names = repeated.setdefault(a, [])
                            if v.arguments[j] not in names:
                                names.append(v.arguments[j])
                            writes_grad |= is_out
            if writes_grad:
                for a in od.attrs:
                    if a.name == "op_role_var":
                        del a.strings[:]
            new_ops.append(od)
    for g, names in repeated.items():
        src = b0.find_var_recursive(g)
        if src is None:
            raise ProgramError(f"{NAME}: parameter gradient '{g}' is not declared")
        for n in names:
            if n not in b0.vars:
                rewrite.add_var(b0, n, src.type, src.shape, src.dtype, src.lod_level)
        new_ops.append(rewrite.make_op_desc("sum", {"X": names}, {"Out": [g]},
                                            {"op_role": OpRole.Backward}))
        new_ops.append(rewrite.make_op_desc(
            "scale", {"X": [g]}, {"Out": [g]},
            {"scale": 1.0 / num_repeats, "op_role": OpRole.Backward,
             "op_role_var": [grad_of[g], g]}))
    for op in lr + opt:
        new_ops.append(op.desc)
    kept = [_copy(od) for od in new_ops]
    rewrite.remove_ops(b0, 0, len(b0.ops))
    for od in kept:
        rewrite.insert_op_desc(b0, len(b0.ops), od)
    return prog.desc


def _copy(od):
    out = pb.OpDesc()
    out.CopyFrom(od)
    return out
