"""`recurrent` and `recurrent_grad` (StaticRNN) in generated code, on the loop machinery of
control.py and loop_grad.py (docs/architecture.md, "`recurrent`: StaticRNN as a loop").

The forward op is a loop of one pass per time step, counted in an int64 [1] buffer (the
steps are dim 0 of the first input, known at run time): each pass reads row t of every
input into a buffer bound to the step input's name, the memories (`ex_states`) are carried
buffers filled from `initial_states` and refilled from `states` at the pass's end, and
each step output is written into row t of its stacked buffer (t = the pass, or the passes
left with `reverse`). A `recurrent_grad` that follows in the same block gets what its
gradient block reads of the step block's values on tapes, as a `while` keeps its passes
for `while_grad` (a PassRecord bound to `step_scopes`).

The gradient op runs its block once per kept pass, last first, as the interpreter's
recurrent_grad (ops/recurrent.py): the output gradients' row t bound to the step outputs'
gradient names (zeros where none was computed), each state's gradient carried from the
later step's ex_state gradient (zeros at the last step), the parameters' gradients summed
over the steps (acc + g, last step first), the inputs' gradients written into row t of
zeros, the initial states' gradients the first step's ex_state gradients.

Refused (the ops then run interpreted): a step block with nested blocks or that writes a
name it does not declare, reads of its own names before they are written, LoD on a memory,
a memory or state of a literally other shape, targets other than C++; the forward without
its gradient in the same segment when one follows (the interpreter's needs step scopes).
Checked before the segment runs (else its ops run interpreted): one step at least where
there are outputs, no input with fewer steps than the first, states of their memories'
shapes.
"""
from ..core.dtypes import VarType
from ..core.names import EMPTY_VAR_NAME, grad_var_name
from .cir import NotCompilable, PassRecord, dense_tensor, is_lit
from .control import (Call, Copy, CountPasses, End, NextPass, Reverse, Steps, emit_block,
                      events, gradient_block, pass_var, push_block_values, sub_block,
                      subtree, typed)
from .loop_grad import restore_pass, sum_pass, summed_grad


def lower_recurrent(low, op, block_idx, i):
    """The time steps as one loop over the step block; returns explain()'s note."""
    sub = sub_block(low, op)
    check_step_block(low, op, sub, set(op.input("inputs")) | set(op.attr("ex_states")))
    scopes = _one_name(op.output("step_scopes"))
    grad_sub = gradient_block(low, op, "step_scopes", "recurrent_grad")
    if grad_sub is not None and not op.attr("is_train"):
        raise NotCompilable("is_train is off but a recurrent_grad reads its step scopes")
    seqs = [low.read(n, op) for n in op.input("inputs")]
    n = _steps_of(low, op, seqs)
    kb = low.position
    names = set(sub.vars) | set(op.input("inputs")) | set(op.attr("ex_states"))
    count = low.temp(scopes, [1], "int64_t", kb)
    t = f"({n}) - 1 - {count.name}_[0]" if op.attr("reverse") else f"{count.name}_[0]"
    mems, lines = _memories(low, op, kb)
    shadowed = {name: low.value(name) for name in names}
    starts = [_step_row(low, name, seq, t, kb) for name, seq in zip(op.input("inputs"), seqs)]
    low.control([CountPasses(count)] + lines + [Steps(count, n)] + starts)
    for ex, mem in mems.items():
        low.bind(ex, mem)
    emit_block(low, sub)
    ke = max(low.position - 1, kb)
    tapes, outer, saves = {}, {}, []
    if grad_sub is not None:
        saves, outer = _keep_step(low, sub, grad_sub, tapes, ke)
    stacked, writes = _stack_outputs(low, op, n, t, kb, ke)
    ends = writes + _next_memories(low, op, mems, ke) + [NextPass(count), End()]
    low.control(saves + ends)
    low.live_through(kb, ke)
    count.last = max(count.last, ke)
    for name in names:
        low.bind(name, shadowed[name])
    for name, buf in stacked.items():
        low.bind(name, buf)
    if grad_sub is None:
        return f"a loop over the {n} time steps of block {sub.idx} ({len(sub.ops)} ops)"
    low.bind(scopes, PassRecord(scopes, count, tapes, outer))
    return (f"a loop over the {n} time steps of block {sub.idx} ({len(sub.ops)} ops), "
            f"keeping {len(tapes)} values a step for its gradient")


def _one_name(names):
    """The one step_scopes name of a desc (a hostile one may give none or several)."""
    if len(names) != 1 or names[0] == EMPTY_VAR_NAME:
        raise NotCompilable(f"step_scopes names {len(names)} variables, not one")
    return names[0]


def check_step_block(low, op, sub, given):
    """NotCompilable unless the step block (or the gradient block) is one flat block at the
    top that writes only names it declares (the interpreter's step scope holds them) and
    reads each of them only after writing it, or when the op gives it (`given`)."""
    if low.target.name != "cpu":          # row_read and tapes are runtime/arrays.h's
        raise NotCompilable(f"'{op.type}' compiles for C++ only, not {low.target.title}")
    if low.current_block.idx != low.block.idx:
        raise NotCompilable(f"'{op.type}' inside another block's loop or branch")
    if len(subtree(low.program, sub)) > 1:
        raise NotCompilable(f"block {sub.idx} holds blocks of its own")
    ex, st, init = op.attr("ex_states"), op.attr("states"), op.input("initial_states")
    if not len(ex) == len(st) == len(init) or len(set(ex)) != len(ex):
        raise NotCompilable("ex_states, states and initial_states do not pair up")
    written = set()
    for name, is_write in events(low.program, sub):
        if name == EMPTY_VAR_NAME:
            continue
        if is_write:
            if name not in sub.vars:
                raise NotCompilable(f"block {sub.idx} writes '{name}' that it does not "
                                    "declare")
            written.add(name)
        elif name in sub.vars and name not in written and name not in given:
            raise NotCompilable(f"block {sub.idx} reads '{name}' before a step sets it")


def _steps_of(low, op, seqs):
    """The number of time steps (dim 0 of the first input); every other input has at
    least as many rows, and a program with outputs at least one step (else the
    interpreter's error: the segment runs interpreted)."""
    if not seqs:
        raise NotCompilable("no input sequence (the interpreter's error)")
    for name, seq in zip(op.input("inputs"), seqs):
        if not dense_tensor(seq) or seq.written or seq.ndim == 0:
            raise NotCompilable(f"input '{name}' is not a dense tensor with time steps")
    n = seqs[0].dims[0]
    if str(low.bound_of(n)) != str(n):
        raise NotCompilable("the number of steps changes while the segment runs")
    for name, seq in zip(op.input("inputs")[1:], seqs[1:]):
        _at_least(low, seq.dims[0], n, f"input '{name}' has fewer steps than the first")
    if op.output("outputs"):
        _at_least(low, n, 1, "no time steps (the interpreter's error)")
    return n


def _at_least(low, a, b, message):
    """Dim `a` >= `b`: proven now, refused, or a precondition (else run interpreted)."""
    if is_lit(a) and is_lit(b):
        if int(a) < int(b):
            raise NotCompilable(message)
    elif str(a) != str(b):
        low.precondition(f"({a}) < ({b})", message)


def _step_row(low, name, seq, t, k):
    """The statement reading row t of input `seq` into a buffer bound to `name`."""
    row = low.temp(name, list(seq.dims[1:]), seq.ctype, k)
    seq.last = max(seq.last, k)
    low.bind(name, row)
    return Call(f"fl::row_read({row.name}_, {seq.name}_, {t}, {seq.dims[0]}, {row.nbytes()}, "
                f"err, {k})")


def _memories(low, op, k):
    """({ex_state: its carried buffer}, the copies of the initial states into them)."""
    mems, lines = {}, []
    for ex, name in zip(op.attr("ex_states"), op.input("initial_states")):
        init = low.read(name, op)
        if not dense_tensor(init) or init.written or init.has_lod:
            raise NotCompilable(f"initial state '{name}' is not a dense tensor without LoD")
        mem = low.temp(ex, list(init.dims), init.ctype, k)
        lines.append(Copy(mem, init))
        mems[ex] = mem
    return mems, lines


def _next_memories(low, op, mems, k):
    """The copies of each step's `states` into the memories, ending a pass; a state of
    other dims than its memory's (the initial state's) runs interpreted."""
    lines = []
    for ex, name in zip(op.attr("ex_states"), op.attr("states")):
        mem, final = mems[ex], low.value(name)
        mem.last = max(mem.last, k)              # carried: alive through every pass
        if not dense_tensor(final):
            raise NotCompilable(f"state '{name}' has no dense value after a step")
        if final is mem:
            continue
        _same_dims(low, final, mem, f"state '{name}' differs in shape from its memory")
        final.last = max(final.last, k)
        lines.append(Copy(mem, final))
    return lines


def _same_dims(low, a, b, message):
    """Bufs a and b of one ctype and rank, and dims proven equal now or checked before the
    segment runs (a precondition: else the segment runs interpreted)."""
    if a.ctype != b.ctype or a.ndim != b.ndim:
        raise NotCompilable(f"{message}: {typed(a)} vs {typed(b)}")
    for x, y in zip(a.dims, b.dims):
        if str(x) == str(y):
            continue
        if is_lit(x) and is_lit(y) or str(low.bound_of(x)) != str(x) or \
                str(low.bound_of(y)) != str(y):
            raise NotCompilable(f"{message}: {typed(a)} vs {typed(b)}")
        low.precondition(f"({x}) != ({y})", message)


def _stack_outputs(low, op, n, t, kb, ke):
    """({output: its stacked [steps, ...] buffer}, the statements writing each step's
    value into row t), made before the loop, alive through it."""
    stacked, lines = {}, []
    for name in op.output("outputs"):
        step = low.value(name)
        if not dense_tensor(step) or step.written:
            raise NotCompilable(f"output '{name}' has no dense value after a step")
        if any(str(low.bound_of(d)) != str(d) for d in step.dims):
            raise NotCompilable(f"output '{name}' changes its dims from step to step")
        out = low.temp(name, [n] + list(step.dims), step.ctype, kb)
        out.last = max(out.last, ke)
        step.last = max(step.last, ke)
        stacked[name] = out
        lines.append(Call(f"fl::row_write({out.name}_, {step.name}_, {t}, {n}, "
                          f"{step.nbytes()}, err, {ke})"))
    return stacked, lines


def _keep_step(low, sub, grad_sub, tapes, k):
    """(The pushes of every step block value the gradient block reads, as the step left
    it (the interpreter's step scope after the step), {name: Buf} of the values from
    outside it reads)."""
    read = {n for o in grad_sub.ops for n in o.input_arg_names} - {EMPTY_VAR_NAME}
    lines = push_block_values(low, sub, read, tapes, k, "the step block",
                              unset="the gradient block reads '{}' that no step sets")
    outer = {n: low.value(n) for n in read - set(sub.vars) - set(grad_sub.vars)
             if low.value(n) is not None}
    return lines, outer


def lower_recurrent_grad(low, op, block_idx, i):
    """The gradient block once per kept step, last first (the module's docstring)."""
    scopes = _one_name(op.input("step_scopes"))
    rec = _step_record(low, op, scopes)
    sub = sub_block(low, op)
    og_inner = [grad_var_name(n) for n in op.input("outputs")]
    st_inner = [grad_var_name(n) for n in op.attr("states")]
    check_step_block(low, op, sub, set(og_inner) | set(st_inner))
    _state_grad_readers(sub, st_inner)
    kb, reverse = low.position, op.attr("reverse")
    p = pass_var(rec.count)
    t = f"{rec.count.name}_[0] - 1 - {p}" if reverse else p
    ogs, og_lines, starts = _output_grads(low, op, i, t, kb)
    dstates, lines = _state_grads(low, op, kb)
    x_accs, summed = _input_grads(low, op, kb, lines)
    names = set(sub.vars) | set(rec.tapes) | set(og_inner) | set(st_inner)
    shadowed = {name: low.value(name) for name in names}
    for name in sub.vars:
        low.bind(name, None)
    low.control(og_lines + lines + [Reverse(rec.count)] + starts)
    restore_pass(low, rec, p, kb)
    for name, buf in list(zip(og_inner, ogs)) + list(zip(st_inner, dstates)):
        low.bind(name, buf)
    emit_block(low, sub)
    ke = max(low.position - 1, kb)
    ends = [c for s in summed for c in sum_pass(low, s, rec, p, ke)]
    ends += _write_input_grads(low, op, x_accs, t, ke) + _carry_state_grads(low, op,
                                                                            dstates, ke)
    low.control(ends + [End()])
    low.live_through(kb, ke)
    for buf in ogs + dstates + list(x_accs.values()) + [s.acc for s in summed]:
        buf.last = max(buf.last, ke)
    rec.count.last = max(rec.count.last, ke)
    for name in names:
        low.bind(name, shadowed[name])
    _bind_grads(low, op, dstates, x_accs, summed)
    low.bind(scopes, PassRecord(scopes, rec.count, rec.tapes, rec.outer, used=True))
    return (f"the gradient of a StaticRNN: block {sub.idx} ({len(sub.ops)} ops) per step, "
            "last first")


def _step_record(low, op, scopes):
    """The PassRecord of the forward `recurrent`, compiled in this segment, the values from
    outside it that the gradient reads unchanged since (the step scopes hold those)."""
    rec = low.value(scopes)
    if not isinstance(rec, PassRecord):
        raise NotCompilable("its forward 'recurrent' is not compiled in this segment (an "
                            "op between them runs interpreted, or the forward is refused)")
    for name, buf in rec.outer.items():
        if low.value(name) is not buf:
            raise NotCompilable(f"'{name}' changes between the recurrent and its gradient")
    return rec


def _state_grad_readers(sub, st_inner):
    """A state's gradient is unset at the last step; the interpreter's
    rnn_memory_helper_grad reads that as zeros, which is what the compiled step binds: any
    other reader of it is refused."""
    for o in sub.ops:
        hit = set(o.input_arg_names) & set(st_inner)
        if hit and (o.type != "rnn_memory_helper_grad" or hit & set(o.input("X"))):
            raise NotCompilable(f"'{o.type}' reads the state gradient '{sorted(hit)[0]}' "
                                "(unset at the last step)")


def _output_grads(low, op, i, t, k):
    """([the buffer each step output's gradient name is bound to], statements before the
    loop, statements at each step's start): row t of the output gradient, or zeros where
    nobody computed it (the interpreter's zeros_like of the output)."""
    outs, ogs = op.input("outputs"), op.input("outputs@GRAD")
    if ogs and len(ogs) != len(outs):
        raise NotCompilable("outputs@GRAD is not aligned with outputs")
    bufs, before, starts = [], [], []
    for j, out in enumerate(outs):
        name = ogs[j] if ogs else EMPTY_VAR_NAME
        g = low.value(name) if name != EMPTY_VAR_NAME else None
        if g is None and name != EMPTY_VAR_NAME and \
                any(name in o.output_arg_names for o in low.block.ops[:i]):
            g = low.read(name, op)          # made by a Python step before: the scope's
        if g is None:
            ob = low.read(out, op)
            row = low.temp(grad_var_name(out), list(ob.dims[1:]), ob.ctype, k)
            before.append(Call(f"fl::zero_fill({row.name}_, {row.numel()})"))
        else:
            if not dense_tensor(g) or g.written or g.ndim == 0:
                raise NotCompilable(f"output gradient '{name}' is not a dense tensor")
            row = low.temp(grad_var_name(out), list(g.dims[1:]), g.ctype, k)
            g.last = max(g.last, k)
            starts.append(Call(f"fl::row_read({row.name}_, {g.name}_, {t}, {g.dims[0]}, "
                               f"{row.nbytes()}, err, {k})"))
        bufs.append(row)
    return bufs, before, starts


def _state_grads(low, op, k):
    """[the buffer carrying each state's gradient from step to step, shaped like its
    initial state], the zero fills before the loop."""
    bufs, lines = [], []
    for name in op.input("initial_states"):
        init = low.read(name, op)
        if init.ctype not in ("float", "double") or init.rows is not None:
            raise NotCompilable(f"initial state '{name}' is {typed(init)}, not a float tensor")
        buf = low.temp(grad_var_name(name), list(init.dims), init.ctype, k)
        lines.append(Call(f"fl::zero_fill({buf.name}_, {buf.numel()})"))
        bufs.append(buf)
    return bufs, lines


def _input_grads(low, op, k, lines):
    """({input: its gradient, zeros before the loop}, [SummedGrad of each parameter])."""
    block, accs, summed = low.current_block, {}, []
    for slot in ("inputs", "parameters", "initial_states"):
        got = op.output(slot + "@GRAD")
        if got and len(got) != len(op.input(slot)):
            raise NotCompilable(f"{slot}@GRAD is not aligned with {slot}")
    for x, g in zip(op.input("inputs"), op.output("inputs@GRAD")):
        if g == EMPTY_VAR_NAME:
            continue
        xb = low.read(x, op)
        if xb.ctype not in ("float", "double"):
            raise NotCompilable(f"input '{x}' is {typed(xb)}, not a float tensor")
        accs[x] = low.temp(g, list(xb.dims), xb.ctype, k)
        lines.append(Call(f"fl::zero_fill({accs[x].name}_, {accs[x].numel()})"))
    for x, g in zip(op.input("parameters"), op.output("parameters@GRAD")):
        if g != EMPTY_VAR_NAME:
            xv = block.find_var_recursive(x)
            if xv is None or xv.type != VarType.LOD_TENSOR:
                raise NotCompilable(f"parameter '{x}' is not a tensor")
            summed.append(summed_grad(low, op, xv, x, g, grad_var_name(x), k, lines))
    return accs, summed


def _write_input_grads(low, op, accs, t, k):
    """The statements writing each step's input gradient into row t (a step that writes
    none leaves the row zero, as the interpreter)."""
    lines = []
    for x, acc in accs.items():
        got = low.value(grad_var_name(x))
        if got is None:
            continue
        if got.ctype != acc.ctype or list(map(str, got.dims)) != \
                list(map(str, acc.dims[1:])) or got.rows is not None or got.written:
            raise NotCompilable(f"the step gradient of '{x}' is {typed(got)}, its rows "
                                f"{typed(acc)}")
        got.last = max(got.last, k)
        lines.append(Call(f"fl::row_write({acc.name}_, {got.name}_, {t}, {acc.dims[0]}, "
                          f"{got.nbytes()}, err, {k})"))
    return lines


def _carry_state_grads(low, op, dstates, k):
    """The copies of each step's ex_state gradient into the carried buffer the earlier
    step reads as its state's gradient (left zeros where the block writes none)."""
    lines = []
    for ex, buf in zip(op.attr("ex_states"), dstates):
        got = low.value(grad_var_name(ex))
        if got is None or got is buf:
            continue
        if got.ctype != buf.ctype or list(map(str, got.dims)) != list(map(str, buf.dims)) \
                or got.rows is not None or got.written:
            raise NotCompilable(f"the gradient of '{ex}' is {typed(got)}, its initial "
                                f"state's {typed(buf)}")
        got.last = max(got.last, k)
        lines.append(Copy(buf, got))
    return lines


def _bind_grads(low, op, dstates, x_accs, summed):
    """After the loop: each gradient output bound to its buffer."""
    for x, g in zip(op.input("inputs"), op.output("inputs@GRAD")):
        if g != EMPTY_VAR_NAME:
            low.bind(g, x_accs[x])
    for buf, g in zip(dstates, op.output("initial_states@GRAD")):
        if g != EMPTY_VAR_NAME:
            low.bind(g, buf)
    for s in summed:
        low.bind(s.outer, s.acc)
