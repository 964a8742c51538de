"""Control flow in generated code: a `while` op becomes a C++ loop and a `conditional_block`
an `if` around their sub-blocks' ops, emitted into the same segment as the ops around them
(the design's multi-block code generation; nested blocks nest).

The interpreter runs a sub-block in a child scope: the names the sub-block declares are its
own, every other name it writes is the parent's variable. Here the parent's variables a
sub-block writes are *carried*: each has one arena buffer for the whole loop or branch, that
the ops read at the start of a pass, and that the pass's final value is copied back into at
its end (so a value may not change shape from pass to pass: such a program stays
interpreted, and explain() says why). A tensor array the sub-block writes is one
segment-owned object (runtime/arrays.h) changed in place, so it is carried without copies;
values inside the body may have rows known only per pass (Emit.runtime_dim: an array
entry's rows, a DynamicRNN step's batch), their buffers reserved at the rows' bounds.

A carried value that the sub-block writes before it reads, and that had no value before,
gets a run-time flag: set when a pass writes it, it says whether the value leaves the
segment (a branch not taken leaves the scope's variable as it was, as in the interpreter)
and stops an op that reads it unset with an error.

A loop whose `while_grad` follows in the same block keeps what the gradient block reads of
each pass on tapes (runtime/arrays.h) for it (loop_grad.py compiles the while_grad); a loop
or branch whose gradient op reads its step scopes otherwise is left to the interpreter, as is
one whose sub-block has an op without a compiled form.
"""
from collections import namedtuple

from ..core.dtypes import VarType
from ..core.names import EMPTY_VAR_NAME
from .cir import ArrayBuf, NotCompilable, PassRecord
from .trip_bound import loop_bound


# --- the statements a segment function runs around its op calls (render.py writes them)
class Loop(namedtuple("Loop", "cond")):
    """`while` the one bool element of Buf `cond` is true: opens a body."""


class Branch(namedtuple("Branch", "cond nonempty")):
    """`if` the one bool element of Buf `cond` is true, or (cond None) if every Buf of
    `nonempty` has elements: opens a body."""


class End(namedtuple("End", "")):
    """Closes the innermost Loop, Branch or IfWritten."""


class Copy(namedtuple("Copy", "dst src")):
    """Buf `src`'s bytes into Buf `dst` (a carried value)."""


class SetWritten(namedtuple("SetWritten", "flag")):
    """Sets a "was written" flag."""


class IfWritten(namedtuple("IfWritten", "flag")):
    """Opens a body run when a "was written" flag is set."""


class SetDim(namedtuple("SetDim", "call")):
    """A C call that sets a dim known only as the segment runs (Emit.runtime_dim) and
    returns 0 or an op's error code."""


class Call(namedtuple("Call", "call")):
    """A runtime call of the segment function (a tape's push or read, a gradient summed
    over passes) that returns 0 or an op's error code."""


class CountPasses(namedtuple("CountPasses", "count")):
    """Sets the int64 [1] Buf `count` to 0 (before a loop whose passes are kept)."""


class NextPass(namedtuple("NextPass", "count")):
    """Adds one to `count` (at the end of a pass)."""


class Steps(namedtuple("Steps", "count n")):
    """`while` the int64 [1] Buf `count` is below the C expression `n`: opens a body that
    ends with NextPass(count) (a StaticRNN's time steps, recurrent.py)."""


class Reverse(namedtuple("Reverse", "count")):
    """Opens a body run for p = count - 1 down to 0 (C variable `pass_var(count)`)."""


def pass_var(count):
    """The C variable of a reverse loop over the passes counted in Buf `count`."""
    return f"p_{count.name}"


def lower_while(low, op, block_idx, i):
    """`while (Condition) { block }`; returns the note explain() shows. A loop whose
    `while_grad` follows in the same block keeps what the gradient block reads of each pass
    (`PassRecord`, bound to the StepScopes variable) instead of step scopes."""
    sub = sub_block(low, op)
    grad_sub = gradient_block(low, op)
    bound, fresh = _entry_bounds(low, op, block_idx, i)
    carried, lines = carry_in(low, op, sub)
    kb = low.position
    (cond_name,) = op.input("Condition")
    cond = low.read(cond_name, op)
    _require_flag_value(low, cond, "Condition")
    count, tapes, starts = None, {}, []
    if grad_sub is not None:
        count = low.temp(op.output("StepScopes")[0], [1], "int64_t", kb)
        lines.append(CountPasses(count))
        before, after = _carried_snapshots(low, sub, grad_sub, carried)
        starts = [push_tape(low, tapes, n, carried[n], kb) for n in before]
    low.control(lines + [Loop(cond)] + starts)
    n = emit_block(low, sub)
    ke = max(low.position - 1, kb)
    saves = []
    if grad_sub is not None:
        saves = _save_pass(low, sub, grad_sub, after, tapes, count, ke)
    low.control(saves + carry_out(low, carried, sub, kb, ke) + [End()])
    low.live_through(kb, ke)
    for name in fresh:
        if isinstance(low.value(name), ArrayBuf):
            low.value(name).max_entries = bound.entries[name]
    what = f"a loop over block {sub.idx} ({n} ops)" + \
        (f", at most {bound.passes} passes" if bound is not None else "")
    if grad_sub is None:
        return what
    count.last = max(count.last, ke)
    (scopes,) = op.output("StepScopes")
    read = {n for o in grad_sub.ops for n in o.input_arg_names}
    outer = {n: low.value(n) for n in read - set(sub.vars) - set(carried)
             if low.value(n) is not None}
    low.bind(scopes, PassRecord(scopes, count, tapes, outer))
    return f"{what}, keeping {len(tapes)} values a pass for its gradient"


def _entry_bounds(low, op, block_idx, i):
    """(The loop's trip_bound.LoopBound or None, the names of the arrays whose entries it
    bounds that the segment has not made before the loop: only those start empty). Only
    a loop at the segment's top level: one nested in another runs again with the arrays
    it left."""
    if not low.at_top_level:
        return None, []
    bound = loop_bound(low.program, low.program.block(block_idx), i)
    if bound is None:
        return None, []
    return bound, [n for n in bound.entries if low.value(n) is None]


def gradient_block(low, op, slot="StepScopes", grad_type="while_grad"):
    """The gradient block of the `grad_type` op that reads this loop's step scopes (output
    `slot`; a later op of the block being segmented), or None when nothing reads them;
    NotCompilable when something else does, or the gradient is refused (it runs
    interpreted: it needs scopes)."""
    (scopes,) = op.output(slot) or [EMPTY_VAR_NAME]
    if scopes == EMPTY_VAR_NAME:
        return None
    readers = [o for b in range(low.program.num_blocks) for o in low.program.block(b).ops
               if scopes in o.input_arg_names]
    if not readers:
        return None
    top = low.current_block.idx == low.block.idx
    if len(readers) != 1 or readers[0].type != grad_type or not top or \
            not any(o is readers[0] for o in low.block.ops):
        raise NotCompilable(f"'{readers[0].type}' reads its {slot} (only a {grad_type} of "
                            "a loop at the top block compiles with it)")
    if low.target.name != "cpu":          # tapes are runtime/arrays.h's host arrays
        raise NotCompilable(f"'{grad_type}' reads its {slot} (a trained loop compiles for "
                            f"C++ only, not {low.target.title})")
    if scopes in low.refused:
        raise NotCompilable(f"its {grad_type} runs interpreted (not compiled in this "
                            f"segment): it reads the {slot} the interpreter keeps")
    return sub_block(low, readers[0])


def _carried_snapshots(low, sub, grad_sub, carried):
    """(Names of the tensors the loop carries whose value at a pass's start the gradient
    block reads, those whose value at its end it reads): the interpreter's snapshots in
    its step scopes (a value the body reads first is kept as the pass found it, one it
    writes first as the pass left it). A counter updated in place is not kept: the
    gradient block restores it by its own decrement; a carried array is one object."""
    program = low.program
    if len(subtree(program, sub)) > 1 or len(subtree(program, grad_sub)) > 1:
        raise NotCompilable("a loop with nested blocks compiles without its gradient only")
    read = {n for o in grad_sub.ops for n in o.input_arg_names}
    inplace = {n for o in sub.ops for n in set(o.input_arg_names) & set(o.output_arg_names)}
    first = {}
    for n, is_write in events(program, sub):
        first.setdefault(n, is_write)
    before, after = [], []
    for n, carry in carried.items():
        if n in read and not isinstance(carry, ArrayBuf) and n not in inplace:
            (after if first.get(n, True) else before).append(n)
    return before, after


def push_tape(low, tapes, n, buf, k):
    """The statement pushing Buf `buf` (the value of `n`) on its tape, made here."""
    if buf.has_lod or buf.written or buf.rows is not None:
        raise NotCompilable(f"'{n}' carries LoD, rows or a branch's flag (kept per pass for "
                            "the gradient: not compiled)")
    rows, row_dims = (buf.dims[0], buf.dims[1:]) if buf.ndim else (1, [])
    if any(str(low.bound_of(d)) != str(d) for d in row_dims):
        raise NotCompilable(f"'{n}' changes its row dims from pass to pass")
    tape = low.own_array(f"{n}@PASSES", k)
    tape.elem, tape.row_dims, tape.bound = buf.ctype, list(row_dims), low.bound_of(rows)
    fixed = list(buf.dims) if str(low.bound_of(rows)) == str(rows) else None
    tapes[n] = (tape, str(rows), buf.ndim, fixed)
    buf.last = max(buf.last, k)
    return Call(f"fl::tape_push({tape.name}_, {buf.name}_, {rows}, {tape.row_bytes()}, err, "
                f"{k})")


def push_block_values(low, sub, read, tapes, k, block, unset=None):
    """The tape pushes of each value of block `sub` in `read` as the pass left it (only
    LoDTensors: a gradient block reading another kind of value is refused). `block` names
    the block in the refusal; `unset` is the refusal of a value no pass sets (its name
    formatted in), or None to push none for it."""
    lines = []
    for n in sorted(read & set(sub.vars)):
        if sub.vars[n].type != VarType.LOD_TENSOR:
            raise NotCompilable(f"the gradient block reads '{n}', a "
                                f"{VarType.Type.Name(sub.vars[n].type)} of {block}")
        buf = low.value(n)
        if buf is None:
            if unset is not None:
                raise NotCompilable(unset.format(n))
            continue
        lines.append(push_tape(low, tapes, n, buf, k))
    return lines


def _save_pass(low, sub, grad_sub, after, tapes, count, k):
    """The statements ending a forward pass: each body value the gradient block reads, and
    each carried value it reads as the pass left it, pushed on its tape; the pass
    counted."""
    read = {n for o in grad_sub.ops for n in o.input_arg_names}
    # a value never written in the body: the gradient reads none
    lines = push_block_values(low, sub, read, tapes, k, "the loop body")
    for n in after:
        buf = low.value(n)
        if buf is None:
            raise NotCompilable(f"'{n}' has no value after a pass")
        lines.append(push_tape(low, tapes, n, buf, k))
    return lines + [NextPass(count)]


def lower_conditional_block(low, op, block_idx, i):
    """`if (Cond) { block }`: a scalar bool Cond (is_scalar_condition), else every Cond input
    non-empty (Paddle's rule)."""
    sub = sub_block(low, op)
    _refuse_scope_readers(low, op, SCOPE_SLOTS["conditional_block"])
    conds = [low.read(n, op) for n in op.input("Cond")]
    if op.attr("is_scalar_condition"):
        if len(conds) != 1:
            raise NotCompilable(f"{len(conds)} scalar conditions")
        _require_flag_value(low, conds[0], "Cond")
        test = Branch(conds[0], ())
    else:
        test = Branch(None, tuple(conds))
    carried, lines = carry_in(low, op, sub)
    kb = low.position
    low.control(lines + [test])
    n = emit_block(low, sub)
    ke = max(low.position - 1, kb)
    low.control(carry_out(low, carried, sub, kb, ke) + [End()])
    return f"a branch over block {sub.idx} ({n} ops)"


CONTROL = {"while": lower_while, "conditional_block": lower_conditional_block}


def sub_block(low, op):
    ids = op.sub_block_ids()
    if len(ids) != 1 or not 0 < ids[0] < low.program.num_blocks:
        raise NotCompilable(f"'{op.type}' names blocks {ids}")
    return low.program.block(ids[0])


def _refuse_scope_readers(low, op, slot):
    """The scopes a control op leaves are read by its gradient op (training through the
    loop): compiled code keeps none."""
    scopes = {n for n in op.output(slot) if n != EMPTY_VAR_NAME}
    for b in range(low.program.num_blocks):
        for other in low.program.block(b).ops:
            if scopes & set(other.input_arg_names):
                raise NotCompilable(f"'{other.type}' reads its {slot} (the gradient of a "
                                    "loop or branch runs interpreted)")


def _require_flag_value(low, buf, slot):
    if buf.ctype != "bool":
        raise NotCompilable(f"{slot} '{buf.var}' is {buf.ctype}, not bool")
    n = buf.numel()
    if low.is_literal(n):
        if int(n) != 1:
            raise NotCompilable(f"{slot} '{buf.var}' has {n} elements, not one")
    else:
        low.precondition(f"{n} != 1", f"{slot} '{buf.var}' does not hold one element")


def subtree(program, block):
    """The blocks of `block` and of every control op nested in it."""
    out, todo = [], [block.idx]
    while todo:
        b = program.block(todo.pop())
        out.append(b)
        for op in b.ops:
            todo.extend(k for k in op.sub_block_ids() if 0 < k < program.num_blocks)
    return out


def events(program, block):
    """(name, is_write) in the order the block's ops touch them; a nested control op
    reads its inputs and then touches what its own blocks touch."""
    for op in block.ops:
        for n in op.input_arg_names:
            yield n, False
        for k in op.sub_block_ids():
            if 0 < k < program.num_blocks:
                yield from events(program, program.block(k))
        for n in op.output_arg_names:
            yield n, True


def carry_in(low, op, sub, shadowing=False):
    """{name: the buffer a parent variable the sub-block writes lives in across passes, or
    None when that buffer is made after the body (a value it only writes)}, and the copies
    that fill the buffers made here. Binds each carried name to its buffer. `shadowing`: the
    sub-block's own variables may have an outer variable's name (a gradient block's: each
    pass's gradients are its own, as in the interpreter's step scope)."""
    program, parent = low.program, low.current_block
    blocks = subtree(program, sub)
    local = {n for b in blocks for n in b.vars}
    for n in sorted(local):
        if not shadowing and parent.find_var_recursive(n) is not None:
            raise NotCompilable(f"block {sub.idx} declares '{n}' that an outer block declares "
                                "too")
    first = {}
    for n, is_write in events(program, sub):
        if n != EMPTY_VAR_NAME and n not in local:
            first.setdefault(n, is_write)
    written = [n for b in blocks for o in b.ops for n in _values_written(o)
               if n not in local]
    carried, lines, k = {}, [], low.position
    for n in dict.fromkeys(written):
        v = parent.find_var_recursive(n)
        if v is None:
            raise NotCompilable(f"block {sub.idx} writes '{n}' that no block declares")
        if v.type == VarType.LOD_TENSOR_ARRAY:   # changed in place: one object all along
            carry = low.value(n)
            if carry is None:
                carry = low.new_array(n, k)
            elif not isinstance(carry, ArrayBuf):
                raise NotCompilable(f"'{n}' holds no compiled tensor array")
            carry.last = max(carry.last, k)
            carried[n] = carry
            continue
        if v.type != VarType.LOD_TENSOR:
            raise NotCompilable(f"block {sub.idx} writes '{n}', a "
                                f"{VarType.Type.Name(v.type)}")
        prior = low.value(n)
        if prior is None and (first.get(n) is False or v.persistable):
            prior = low.read(n, op)
        if prior is None:
            carried[n] = None
            continue
        if prior.rows is not None:
            raise NotCompilable(f"block {sub.idx} writes SelectedRows '{n}'")
        if prior.kind == "input" and not prior.persistable:    # the caller's memory: copy
            carry = low.temp(n, prior.dims, prior.ctype, k)
            carry.share_lod(prior)
            lines.append(Copy(carry, prior))
            low.bind(n, carry)
        else:                                   # an arena value, or a parameter in place
            carry = prior
            carry.last = max(carry.last, k)
        carried[n] = carry
    return carried, lines


# the outputs of control ops that hold scopes, not values
SCOPE_SLOTS = {"while": "StepScopes", "conditional_block": "Scope"}


def _values_written(op):
    scopes = set(op.output(SCOPE_SLOTS[op.type])) if op.type in SCOPE_SLOTS else set()
    return [n for n in op.output_arg_names if n != EMPTY_VAR_NAME and n not in scopes]


def carry_out(low, carried, sub, kb, ke):
    """The statements that copy each pass's final values into the carried buffers; binds the
    parent's names to them again and forgets the sub-block's own names."""
    lines = []
    for n, carry in carried.items():
        final = low.value(n)
        if final is None:
            raise NotCompilable(f"'{n}' has no value after block {sub.idx}")
        if carry is None:                      # only written inside: made now, flagged
            carry = low.temp(n, final.dims, final.ctype, kb)
            carry.share_lod(final)
            low.flag(carry)
        elif final is not carry:
            same_shape_on_entry(low, n, carry, final, sub)
            if final.lod_src != carry.lod_src or \
                    [tuple(map(str, lv)) for lv in final.levels] != \
                    [tuple(map(str, lv)) for lv in carry.levels]:
                raise NotCompilable(f"'{n}' changes its LoD in block {sub.idx}")
        if final is not carry:
            copy = [Copy(carry, final)]
            if carry.written:
                copy.append(SetWritten(carry.written))
            if final.written:                  # set only where a nested branch set it
                copy = [IfWritten(final.written)] + copy + [End()]
            lines += copy
            final.last = max(final.last, ke)
        carry.last = max(carry.last, ke)
        low.bind(n, carry)
    for b in subtree(low.program, sub):
        for n in b.vars:
            low.bind(n, None)
    return lines


def same_shape_on_entry(low, n, carry, final, sub):
    """A carried value's final Buf has the carried buffer's type and dims: proven, or, for
    dims that are different expressions over dims the segment knows on entry (seq2seq's
    `finished` flags: the source's rows outside, the encoder state's rows inside; equal at
    run time, not provably so), checked there: the segment runs interpreted where they
    differ, as before. A dim that changes while the segment runs (a loop pass's rows) is
    not fixed by an entry check: refused."""
    if final.ctype != carry.ctype or final.ndim != carry.ndim:
        raise NotCompilable(f"'{n}' changes from {typed(carry)} to {typed(final)} in block "
                            f"{sub.idx}")
    for a, b in zip(carry.dims, final.dims):
        if a == b:
            continue
        if (a.is_literal and b.is_literal) or any(str(low.bound_of(d)) != str(d)
                                                  for d in (a, b)):
            raise NotCompilable(f"'{n}' changes from {typed(carry)} to {typed(final)} in "
                                f"block {sub.idx}")
        low.precondition(f"{a} != {b}", f"'{n}' would change from {typed(carry)} to "
                         f"{typed(final)} in block {sub.idx}")


def typed(buf):
    return f"{buf.ctype}[{', '.join(map(str, buf.dims))}]"


def emit_block(low, sub):
    with low.in_block(sub):
        for j, op in enumerate(sub.ops):
            try:
                low.emit_op(op, sub.idx, j)
            except NotCompilable as e:
                raise NotCompilable(f"block {sub.idx} #{j} {e}") from None
    return len(sub.ops)
