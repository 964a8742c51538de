"""Memory passes over the IR (Paddle's memory_optimization_transpiler), for every executor.

* `memory_optimize(program, skip_opt_set=None, print_log=False)`: liveness over the global
  block's op list, then each new temporary takes the *name* of a dead one with the same shape
  and dtype (all its later uses are renamed), so at run time it overwrites the dead one's
  variable and the dead value is freed. The renamed variables leave the block.
* `release_memory(program, skip_opt_set=None)`: inserts a `delete_var` op right after the
  last use of each temporary, which drops its value there.

Both leave alone, so results stay bit-identical: persistable variables; fed and fetched ones
(outputs of `feed` and inputs of `fetch` ops, when the program has them); variables no op
reads, which are the program's results (the loss, say); everything in `skip_opt_set` (names
or Variables: add the intermediates you fetch, as in Paddle); variables any sub-block reads
or writes (they are live across the whole control-flow op); variables read before they are
written (their values come from outside the run). Only the global block is rewritten.

Both rewrite a ProgramView (the builder's Program is one) in place, as Paddle's do, through
`ir.rewrite`; `ir.rewrite.on_copy(desc, memory_optimize)` is the pure form.
"""
import logging

from ..core.dtypes import VarType
from ..ir import rewrite
from ..ir.analysis import temporaries
from ..ir.memory_plan import var_nbytes
from ..ir.views import VarView


logger = logging.getLogger("fluidity")


def _skip_names(skip_opt_set):
    return {v.name if isinstance(v, VarView) else str(v) for v in (skip_opt_set or ())}


def _candidates(program, skip_opt_set, types):
    block = program.global_block()
    temps = temporaries(program, block, block.ops, _skip_names(skip_opt_set))
    return block, {n: t for n, t in temps.items() if t.read and t.var.type in types}


def _rename_in_op(op, old, new):
    rewrite.rename_arg(op, old, new)
    if op.has_attr("op_role_var"):
        names = op.attr("op_role_var")
        if old in names:
            rewrite.set_attr(op, "op_role_var", [new if n == old else n for n in names])


def memory_optimize(input_program, skip_opt_set=None, print_log=False, level=0,
                    skip_grads=False):
    """Reuse dead temporaries' variables for new ones of the same shape and dtype.
    `level` is accepted for Paddle compatibility; shapes must match exactly (Paddle's 0).
    `skip_grads=True` leaves gradient (`@GRAD`) variables alone, as Fluid's default does;
    Fluidity's default reuses them too (results are the same either way).
    print_log: each reuse and the bytes saved go to the `fluidity` logger at INFO (a
    library writes to its logger, not to stdout; `logging.basicConfig(level=logging.INFO)`
    shows them)."""
    program = input_program
    if skip_grads:
        skip_opt_set = set(skip_opt_set or ()) | {
            n for b in program.blocks for n in b.vars if "@GRAD" in n}
    block, cands = _candidates(program, skip_opt_set, (VarType.LOD_TENSOR,))
    cands = {n: t for n, t in cands.items() if not t.ctx_written and t.var.shape}
    ops = block.ops
    last = {n: t.last for n, t in cands.items()}
    pool = []                   # dead names, oldest first
    reused = []                 # (new name, the dead name it takes)
    for i, op in enumerate(ops):
        reads = set(op.input_arg_names)
        for x in dict.fromkeys(op.output_arg_names):
            t = cands.get(x)
            if t is None or t.first != i or x in reads:
                continue
            key = (tuple(t.var.shape), t.var.dtype)
            for k in range(len(pool) - 1, -1, -1):
                c = cands[pool[k]]
                if (tuple(c.var.shape), c.var.dtype) == key:
                    name = pool.pop(k)
                    for later in ops[i:]:
                        _rename_in_op(later, x, name)
                    last[name] = last.pop(x)
                    reused.append((x, name))
                    break
        for n in dict.fromkeys(op.input_arg_names + op.output_arg_names):
            if last.get(n) == i:
                pool.append(n)
    rewrite.remove_vars(block, [x for x, _ in reused])
    program._is_mem_optimized = True
    if print_log:
        saved = sum(var_nbytes(cands[x].var, 1) or 0 for x, _ in reused)
        for x, c in reused:
            v = cands[x].var
            logger.info("memory_optimize: '%s' %s reuses '%s'", x, list(v.shape), c)
        logger.info("memory_optimize: %d of %d temporaries reuse a dead one's variable, %d "
                    "bytes fewer at batch size 1", len(reused), len(cands), saved)
    return reused


def release_memory(input_program, skip_opt_set=None):
    """Insert `delete_var` ops that drop each temporary's value after its last use.
    Returns the number of ops inserted."""
    program = input_program
    block, cands = _candidates(program, skip_opt_set,
                               (VarType.LOD_TENSOR, VarType.SELECTED_ROWS))
    ops = block.ops
    dead = {}
    for n, t in cands.items():
        if not t.deleted:
            dead.setdefault(t.last, []).append(n)
    for i in sorted(dead, reverse=True):
        role = ops[i].attr("op_role")
        rewrite.insert_op(block, i + 1, "delete_var", {"X": sorted(dead[i])}, {},
                          {"op_role": role})
    return len(dead)
