"""Forward recomputation (Fluid 1.8's RecomputeOptimizer and `append_backward(checkpoints=)`):
which forward ops the backward pass runs again, and under which names.

The user names checkpoints, activations kept from the forward pass. The forward ops are cut
into segments between consecutive checkpoints; walking the segments from the last, the
backward pass gets the gradients of the ops after a segment, then copies of the segment's
ops whose results are not kept (their non-kept variables renamed `<name>.subprog_<i>`),
then the segment's gradients reading those renamed copies. Kept are the checkpoints, the
variables used across segments, the program's inputs, parameters and every seed a dropout
reads (a `seed` op is put before each dropout, so its copy draws the same mask).

This module holds the analysis, pure over a list of ops; `backward.append_backward` emits.
A program with a control-flow op on the path is refused, as Fluid 1.8 refuses it.
"""
from . import unique_name
from .core.dtypes import VarType
from .errors import ProgramError
from .ir import rewrite

SUFFIX = ".subprog_%d"


class OpStats:
    """Which ops (by position in `ops`) read and write each variable (Fluid's ProgramStats)."""

    def __init__(self, ops):
        self.ops = list(ops)
        self.readers, self.writers = {}, {}
        for i, op in enumerate(self.ops):
            for n in op.input_arg_names:
                self.readers.setdefault(n, []).append(i)
                self.writers.setdefault(n, [])
            for n in op.output_arg_names:
                self.writers.setdefault(n, []).append(i)
                self.readers.setdefault(n, [])

    def known(self, name):
        return name in self.writers

    def sort_checkpoints(self, names):
        """The checkpoints the ops use, ordered by their last writer (an input first)."""
        keyed = [(n, max(self.writers[n]) if self.writers[n] else -1)
                 for n in dict.fromkeys(names) if self.known(n)]
        return [n for n, _ in sorted(keyed, key=lambda x: x[1])]

    def span(self, first, second):
        """(first reader of `first`, last writer of `second`) when the second comes after the
        first, else None."""
        lo = min(self.readers[first], default=len(self.ops))
        hi = max(self.writers[second], default=-1)
        return (lo, hi) if lo < hi else None

    def crossing(self, begin, end):
        """Variables written in ops[begin:end] and read after it, or read in it and written
        before it."""
        out = []
        for i in range(begin, end):
            op = self.ops[i]
            out += [n for n in op.output_arg_names if any(j >= end for j in self.readers[n])]
            out += [n for n in op.input_arg_names if any(j < begin for j in self.writers[n])]
        return out

    def inputs(self, is_persistable):
        """Variables read and never written by the ops (fed data), parameters aside."""
        return [n for n in self.writers
                if not self.writers[n] and self.readers[n] and not is_persistable(n)]

    def seeds(self):
        return [n for op in self.ops if op.type == "seed" for n in op.output_arg_names]


def segments(stats, checkpoints):
    """[begin, end) op ranges to recompute, first to last, for sorted `checkpoints`: with
    one checkpoint, everything up to its writer; with more, each stretch between two
    consecutive ones, plus the ops before the first stretch."""
    segs = []
    if len(checkpoints) == 1:
        last = max(stats.writers[checkpoints[0]], default=-1)
        if last > 0:
            segs.append([0, last + 1])
    else:
        for a, b in zip(checkpoints, checkpoints[1:]):
            s = stats.span(a, b)
            if s is not None:
                segs.append([s[0], s[1] + 1])
    if segs and segs[0][0] != 0:
        segs.insert(0, [0, segs[0][0]])
    return segs


def kept_variables(stats, segs, is_persistable):
    """What stays in memory from the forward pass besides the checkpoints."""
    kept = []
    for b, e in segs:
        kept += stats.crossing(b, e)
    kept += stats.seeds()
    kept += stats.inputs(is_persistable)
    return set(kept)


def check_no_sub_blocks(ops):
    """ProgramError for a control-flow op among `ops`: Fluid 1.8 does not recompute them."""
    for op in ops:
        if op.has_attr("sub_block"):
            raise ProgramError(f"recompute does not support ops with a sub-block: op "
                               f"'{op.type}' (inputs {op.inputs_map()}) is on the path to "
                               f"the loss")


def plan(ops, checkpoints, is_persistable):
    """The recomputation of `ops` (forward order, seeds already in place) for checkpoint
    names `checkpoints`: a list of steps (kind, ops, copies, renames), the last ops first.
    ("grads", ops, [], {}): the gradients of `ops` come next. ("recompute", segment, copies,
    renames): the segment's ops in `copies` (those writing something not kept) run again,
    then the segment's gradients, both reading and writing every variable of `renames` (a
    dict growing over the segments, as Fluid's does) under its new name. Checkpoints that
    cut nothing give one "grads" step over every op."""
    check_no_sub_blocks(ops)
    stats = OpStats(ops)
    names = stats.sort_checkpoints(checkpoints)
    segs = segments(stats, names)
    kept = kept_variables(stats, segs, is_persistable)
    in_memory = kept | set(names)
    if not segs:
        return [("grads", list(ops), [], {})]
    steps, renames, stop = [], {}, len(ops)
    for i, (b, e) in enumerate(reversed(segs)):
        steps.append(("grads", stats.ops[e:stop], [], {}))
        stop = b
        seg = stats.ops[b:e]
        for op in seg:
            for n in list(op.input_arg_names) + list(op.output_arg_names):
                if is_persistable(n) or n in names or n in kept:
                    continue
                renames.setdefault(n, n + SUFFIX % i)
        copies = [op for op in seg if any(not is_persistable(n) and n not in in_memory
                                          for n in op.output_arg_names)]
        steps.append(("recompute", seg, copies, dict(renames)))
    return steps


def add_dropout_seeds(block, ops):
    """Put a `seed` op before each dropout of `ops` (ops of `block`) and make the dropout
    read its seed from it (its `fix_seed` and `seed` attributes removed), so that the
    dropout's copy in the backward pass draws the mask the forward pass drew. Returns the
    ops with the seed ops in place; the block changes, as Fluid 1.8's does."""
    out = []
    for op in ops:
        if op.type == "dropout" and not op.input("Seed"):
            name = unique_name.generate_with_ignorable_key(
                unique_name.generate("seed") + ".tmp")
            block.create_var(name=name, dtype=VarType.INT32, shape=[1],
                             type=VarType.LOD_TENSOR, persistable=False,
                             stop_gradient=False)
            seed = int(op.attr("seed")) if op.attr("fix_seed") else 0
            out.append(block._insert_op(op.idx, type="seed", outputs={"Out": [name]},
                                        attrs={"seed": seed, "op_role": op.attr("op_role")}))
            op.set_input("Seed", [name])
            rewrite.remove_attrs(op, ("fix_seed", "seed"))
        out.append(op)
    return out
