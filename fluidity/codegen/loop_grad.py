"""`while_grad` in generated code: the gradient block of a compiled `while` run once per
forward pass, last pass first, over the values the forward loop kept of each pass on its
tapes (control.py's lower_while; docs/architecture.md, "`while_grad`: training through a
loop"). No step scopes: each pass's gradients are bound to buffers of their own, carried
or summed across the passes as the interpreter's while_grad does (ops/control_flow.py).
"""
from collections import namedtuple

from ..core.dtypes import VarType
from ..core.names import EMPTY_VAR_NAME, GRAD_SUFFIX, grad_var_name
from .cir import ArrayBuf, NotCompilable, PassRecord, prod
from .control import (Call, Copy, End, Reverse, carry_in, carry_out, emit_block, pass_var,
                      sub_block, typed)


class SummedGrad(namedtuple("SummedGrad", "outer inner acc per_pass")):
    """The gradient of a value the loop only reads, summed over the passes: its X@GRAD name
    `outer`, the gradient block's name `inner`, the accumulator `acc`, and for an array the
    array each pass writes (`per_pass`; None for a tensor)."""


def lower_while_grad(low, op, block_idx, i):
    """The gradient of a compiled `while`: the gradient block run once per forward pass,
    last first, over the values its `PassRecord` kept. As the interpreter's while_grad:
    the gradient of an array the loop carries (a DynamicRNN memory's) is one array the
    passes write into; that of a value the loop only reads (a parameter, an input array)
    is each pass's own, summed over the passes (acc + g, in pass order); output gradients
    nobody computed are empty arrays (missing entries read as zeros, read_from_array's
    X_W form). The gradient of a tensor the loop carries (h = f(h)) is carried from pass
    to pass in a buffer of its own (from outside, or zeros; zeros again after a pass that
    does not write it)."""
    (scopes,) = op.input("StepScopes")
    rec = _pass_record(low, op, scopes)
    sub = sub_block(low, op)
    if not sub.ops:
        raise NotCompilable("its gradient block is empty")
    grads, summed, lines = _gradient_starts(low, op, i)
    carried, carry_lines = carry_in(low, op, sub, shadowing=True)
    for n, carry in carried.items():
        if not isinstance(carry, ArrayBuf) and n in rec.tapes:
            raise NotCompilable(f"the gradient block writes '{n}' that a pass kept")
    kb = low.position
    low.control(lines + carry_lines + [Reverse(rec.count)])
    p = pass_var(rec.count)
    for inner, buf in grads.items():
        low.bind(inner, buf)
    for s in summed:
        if s.per_pass is not None:
            low.control([Call(f"fl::array_clear({s.per_pass.name}_)")])
        low.bind(s.inner, s.per_pass)
    outer_before = {name: low.value(name) for name in rec.tapes}
    restore_pass(low, rec, p, kb)
    n = emit_block(low, sub)
    ke = max(low.position - 1, kb)
    ends = []
    for inner, carry in grads.items():
        if not isinstance(carry, ArrayBuf):
            ends += _pass_grad(low, inner, carry, ke)
    for s in summed:
        ends += sum_pass(low, s, rec, p, ke)
    low.control(ends + carry_out(low, carried, sub, kb, ke) + [End()])
    low.live_through(kb, ke)
    rec.count.last = max(rec.count.last, ke)
    for name, buf in outer_before.items():     # a body's value: None; a carried one: its own
        low.bind(name, buf)
    _bind_gradients(low, op, grads, summed, ke)
    low.bind(scopes, PassRecord(scopes, rec.count, rec.tapes, rec.outer, used=True))
    return f"the gradient of a loop: block {sub.idx} ({n} ops) per pass, last first"


def _pass_record(low, op, scopes):
    """The PassRecord of the forward loop, checked: compiled in this segment, the values
    from outside it the gradient reads unchanged since (the interpreter's step scopes hold
    the loop's), no gradient array read outside that nothing here writes."""
    rec = low.value(scopes)
    if not isinstance(rec, PassRecord):
        raise NotCompilable("its forward 'while' is not compiled in this segment")
    for name, buf in rec.outer.items():
        if low.value(name) is not buf:
            raise NotCompilable(f"'{name}' changes between the loop and its gradient")
    refused = low.refused & (set(op.input("Out@GRAD")) | set(op.output("X@GRAD")))
    if refused:
        raise NotCompilable(f"tensor array '{sorted(refused)[0]}' is read outside the "
                            "compiled code")
    return rec


def _gradient_starts(low, op, i):
    """({inner name: the buffer a gradient carried from pass to pass lives in}, [the
    gradients summed over the passes], the statements before the loop that fill them)."""
    block, k0 = low.current_block, low.position
    og_outer = op.input("Out@GRAD")
    og_inner = op.attr("original_output_grad") or og_outer
    if len(og_inner) != len(og_outer):
        raise NotCompilable("original_output_grad does not match Out@GRAD")
    grads, lines, summed = {}, [], []
    for outer, inner in zip(og_outer, og_inner):
        grads[inner] = _outside_grad(low, op, block, i, outer, inner, k0, lines)
    xs, gs = op.input("X"), op.output("X@GRAD")
    if len(xs) != len(gs):
        raise NotCompilable("X@GRAD is not aligned with X")
    for x, g in zip(xs, gs):
        if g == EMPTY_VAR_NAME:
            continue
        inner, xv = grad_var_name(x), block.find_var_recursive(x)
        if xv is None:
            raise NotCompilable(f"X '{x}' is not declared")
        if x in op.input("Out"):
            if inner not in grads:
                grads[inner] = _zero_grad(low, block, x, inner, k0, lines)
        else:
            summed.append(summed_grad(low, op, xv, x, g, inner, k0, lines))
    return grads, summed, lines


def _bind_gradients(low, op, grads, summed, k):
    """After the gradient loop: each X@GRAD name bound to its carried or summed buffer."""
    for buf in grads.values():
        buf.last = max(buf.last, k)
    for x, g in zip(op.input("X"), op.output("X@GRAD")):
        if g != EMPTY_VAR_NAME and x in op.input("Out"):
            low.bind(g, grads[grad_var_name(x)])
    for s in summed:
        s.acc.last = max(s.acc.last, k)
        low.bind(s.outer, s.acc)


def _outside_grad(low, op, block, i, outer, inner, k, lines):
    """The buffer an output gradient from outside the loop starts in: the segment's array
    (the passes write into it), an empty one where nobody computed it (missing entries
    read as zeros), or for a tensor a buffer of its own (the passes replace its value) that
    a copy of the gradient, or zeros, fills."""
    buf = low.value(outer)
    if buf is None and any(outer in o.output_arg_names for o in low.block.ops[:i]):
        buf = low.read(outer, op)        # made by a Python step before: the scope's
    if isinstance(buf, ArrayBuf):
        return buf
    fwd = outer.split(GRAD_SUFFIX)[0]
    fv = block.find_var_recursive(fwd)
    if buf is None:
        if fv is not None and fv.type == VarType.LOD_TENSOR_ARRAY:
            return low.own_array(outer, k)
        return _zero_grad(low, block, fwd, inner, k, lines)
    if buf.rows is not None or buf.written or buf.kind == "array":
        raise NotCompilable(f"output gradient '{outer}' is not a dense tensor")
    carry = low.temp(inner, buf.dims, buf.ctype, k)
    lines.append(Copy(carry, buf))
    buf.last = max(buf.last, k)
    return carry


def _zero_grad(low, block, x, inner, k, lines):
    """The gradient of `x`, carried by the loop, that nobody computed outside: an empty
    array, or zeros shaped like x's value."""
    xv = block.find_var_recursive(x)
    if xv is not None and xv.type == VarType.LOD_TENSOR_ARRAY:
        return low.own_array(inner, k)
    fb = low.value(x)
    if fb is None or isinstance(fb, ArrayBuf) or fb.rows is not None or \
            fb.ctype not in ("float", "double"):
        raise NotCompilable(f"the gradient of '{x}' has no value to start from")
    carry = low.temp(inner, fb.dims, fb.ctype, k)
    lines.append(Call(f"fl::zero_fill({carry.name}_, {carry.numel()})"))
    return carry


def _pass_grad(low, inner, carry, k):
    """The statements ending a gradient pass for a carried tensor's gradient: the pass's
    value copied into its buffer, or zeros where the pass wrote none (the interpreter's
    zeros_like)."""
    got = low.value(inner)
    if got is None:
        return [Call(f"fl::zero_fill({carry.name}_, {carry.numel()})")]
    if got is carry:
        return []
    if got.ctype != carry.ctype or list(map(str, got.dims)) != list(map(str, carry.dims)) \
            or got.written or got.rows is not None:
        raise NotCompilable(f"'{inner}' is {typed(got)} after a pass, {typed(carry)} "
                            "before")
    got.last = max(got.last, k)
    return [Copy(carry, got)]


def summed_grad(low, op, xv, x, g, inner, k, lines):
    """The accumulator of the gradient of `x`, a value the loop only reads: zeros (an empty
    array) before the first pass, as the interpreter's zeros_like when no pass ran."""
    if xv.type == VarType.LOD_TENSOR_ARRAY:
        return SummedGrad(g, inner, low.own_array(g, k), low.own_array(inner, k))
    if xv.type != VarType.LOD_TENSOR:
        raise NotCompilable(f"X '{x}' is a {VarType.Type.Name(xv.type)}")
    xb = low.read(x, op)
    if xb.rows is not None or xb.ctype not in ("float", "double") or \
            any(str(low.bound_of(d)) != str(d) for d in xb.dims):
        raise NotCompilable(f"the gradient of '{x}' ({xb.ctype}{xb.dims}) is not summed "
                            "in compiled code")
    acc = low.temp(g, xb.dims, xb.ctype, k)
    lines.append(Call(f"fl::zero_fill({acc.name}_, {acc.numel()})"))
    return SummedGrad(g, inner, acc, None)


def restore_pass(low, rec, p, k):
    """Binds each kept value to a buffer read from its tape at pass `p`: of its forward dims
    when they do not change from pass to pass, else with rows set per pass (values of one
    forward row count share one run-time dim)."""
    rows_of = {}
    for name, (tape, rows_key, ndim, fixed) in rec.tapes.items():
        if fixed is not None:
            buf = low.temp(name, fixed, tape.elem, k)
            low.control([Call(f"fl::tape_read({tape.name}_, {p}, {buf.name}_, "
                              f"{tape.row_bytes()})")])
            low.bind(name, buf)
            continue
        rows = rows_of.get(rows_key)
        if rows is None:
            rows = low.runtime_dim(tape.bound, lambda v, t=tape: (
                f"fl::tape_rows({t.name}_, {p}, {t.bound}, &{v}, err, {k})"), k)
            rows_of[rows_key] = rows
        dims = [rows] + list(tape.row_dims) if ndim else []
        buf = low.temp(name, dims, tape.elem, k)
        low.control([Call(f"fl::tape_read({tape.name}_, {p}, {buf.name}_, "
                          f"{tape.row_bytes()})")])
        tape.last = max(tape.last, k)
        low.bind(name, buf)


def sum_pass(low, s, rec, p, k):
    """The statements adding this pass's gradient into the accumulator."""
    if s.per_pass is not None:
        a, acc = s.per_pass, s.acc
        if a.elem is None:               # the gradient block never writes it
            return []
        if acc.elem is None:
            acc.elem, acc.row_dims, acc.bound = a.elem, a.row_dims, a.bound
        a.last = acc.last = max(a.last, k)
        return [Call(f"fl::array_accumulate<{a.elem}>({acc.name}_, {a.name}_, "
                     f"{prod(a.row_dims)}, err, {k})")]
    got, acc = low.value(s.inner), s.acc
    if got is None:
        return []
    if got.ctype != acc.ctype or list(map(str, got.dims)) != list(map(str, acc.dims)) or \
            got.written or got.rows is not None:
        raise NotCompilable(f"'{s.inner}' is {typed(got)}, its variable {typed(acc)}")
    got.last = max(got.last, k)
    first = f"{p} == {rec.count.name}_[0] - 1"
    return [Call(f"fl::accumulate({acc.name}_, {got.name}_, {acc.numel()}, {first})")]
