"""A bound on a `while` loop's passes, and on the entries of the tensor arrays it writes,
known before the loop runs: a pure analysis over the descs.

Why: an array a loop fills has as many entries as the loop ran passes, which is data; so
`tensor_array_to_tensor` after the loop makes a value of its own size (a HeldBuf, handed
back whole) and whatever reads it runs in the next segment. Fluid 1.8's `dynamic_decode`
(the cell API's greedy and beam-search decoders) bounds its loop all the same: its body
ends with `Condition = ... and (step <= max_step_num)`, the step an int64 [1] counter from a
fill_constant before the loop, bumped by one `increment` per pass and used as every
`write_to_array` index. From that general shape the passes, and the arrays' entries, have
a bound the segment knows on entry, so the stacked value can be an ordinary arena value
whose stacked dim is set as the segment runs (emit/cpu/arrays.py).

The shape recognised, and nothing else (any doubt: no bound, today's behaviour):
- the Condition written once in the loop (nested blocks included), by an op at the body's
  top level; it is a `logical_and` chain one of whose terms is `less_than(counter, limit)`
  or `less_equal(counter, limit)` (a term is followed through an operand only when that
  operand is written once in the loop, at the top level, before its reader);
- the counter written in the loop only by one top-level `increment` (X = Out = counter)
  with an integral step >= 1; counter and limit both int32 or int64;
- the counter's and the limit's values on entry known: the last op of the loop's block
  before the `while` that writes each (nested blocks included) is a fill_constant of one
  element with an integral value in range (no ValueTensor); the limit is not written in
  the loop.
The first pass is assumed to run whatever the initial Condition says; pass p + 1 runs only
if the comparison held after pass p. An array's entries are bounded only when every op of
the loop that writes it is a top-level `write_to_array` whose index I is the counter (its
value in pass p is init + p * step, or + step after the increment); whether it held
entries before the loop is the caller's to check (an array the loop starts empty).
This module reads descs only; it is a separate module because control.py lowers, this
decides nothing but a number (and is tested on its own).
"""
import math
from collections import namedtuple

from ..core.dtypes import VarType

# the most passes (and entries) a bound may state: a loop past it keeps the unbounded path
MAX_PASSES = 1 << 16
INT_RANGES = {VarType.INT32: (-(1 << 31), (1 << 31) - 1),
              VarType.INT64: (-(1 << 63), (1 << 63) - 1)}
EXACT = 1 << 53             # integers float64 (the increment's arithmetic) holds exactly
COMPARISONS = {"less_than": lambda room: room - 1, "less_equal": lambda room: room}


class LoopBound(namedtuple("LoopBound", "counter passes entries")):
    """`passes`: at most this many passes of the loop; `entries` {array name: at most this
    many entries after the loop, if it had none before}; `counter` the counter's name."""


def loop_bound(program, block, i):
    """The LoopBound of the `while` op #i of `block`, or None when its shape is not the one
    recognised (see the module docstring). Of several comparison terms, the one bounding
    the fewest passes."""
    op = block.ops[i]
    ids = op.sub_block_ids()
    if op.type != "while" or len(ids) != 1 or not 0 < ids[0] < program.num_blocks:
        return None
    writers = _writers(program, program.block(ids[0]))
    bounds = [b for b in (_term_bound(program, block, i, writers, *term)
                          for term in _comparisons(writers, op.input("Condition")))
              if b is not None]
    return min(bounds, key=lambda b: b.passes) if bounds else None


def _term_bound(program, block, i, writers, cmp_at, cmp_op, inc_at, step):
    """The LoopBound one comparison term gives (None when its values are not known)."""
    counter, limit = cmp_op.input("X")[0], cmp_op.input("Y")[0]
    if writers.get(limit) or not _same_int_type(block, counter, limit):
        return None
    init, end = (_value_on_entry(program, block, i, n) for n in (counter, limit))
    if init is None or end is None or init < 0:
        return None
    after = 1 if cmp_at > inc_at else 0        # the comparison sees the incremented counter
    last = COMPARISONS[cmp_op.type](end - init) // step + 1 - after   # the last pass's index
    passes = max(0, last) + 1
    # every counter value the passes make is exact in the increment's float64 arithmetic
    # and in the counter's dtype (else the interpreter's counter is not this arithmetic's)
    top = init + (passes + 1) * step
    if passes > MAX_PASSES or top > min(EXACT, INT_RANGES[_dtype(block, counter)][1]):
        return None
    entries = {}
    for name, ws in writers.items():
        bound = _entries(ws, counter, inc_at, init, step, passes)
        if bound is not None:
            entries[name] = bound
    return LoopBound(counter, passes, entries)


def _writers(program, body):
    """{name: [(top-level index of the body op it is in, the op, whether the op is that
    top-level op itself)]} of every op of the body's subtree that writes the name."""
    out = {}
    for at, op in enumerate(body.ops):
        for depth, o in _subtree_ops(program, op):
            for n in o.output_arg_names:
                out.setdefault(n, []).append((at, o, depth == 0))
    return out


def _subtree_ops(program, op, depth=0, seen=frozenset()):
    """(depth, op) of `op` and of every op of the blocks nested in it (a block naming
    itself again, as a hostile file may, is not walked twice)."""
    yield depth, op
    for k in op.sub_block_ids():
        if 0 < k < program.num_blocks and k not in seen:
            for o in program.block(k).ops:
                yield from _subtree_ops(program, o, depth + 1, seen | {k})


def _only_top_writer(writers, name, before=None):
    """(index, op) of the one op of the loop writing `name`, when it is at the body's top
    level (and before position `before`); else None."""
    ws = writers.get(name, [])
    if len(ws) != 1:
        return None
    at, o, top = ws[0]
    if not top or (before is not None and at >= before):
        return None
    return at, o


def _comparisons(writers, cond):
    """(position, comparison op, increment position, step) of each `counter < / <= limit`
    term of the conjunction the body writes into the Condition, its counter written only
    by a top-level increment."""
    if len(cond) != 1:
        return
    top = _only_top_writer(writers, cond[0])
    todo = [top] if top is not None else []
    while todo:
        at, o = todo.pop()
        if o.type == "logical_and":
            for slot in ("X", "Y"):
                for n in o.input(slot):
                    w = _only_top_writer(writers, n, before=at)
                    if w is not None:
                        todo.append(w)
        elif o.type in COMPARISONS and len(o.input("X")) == 1 and len(o.input("Y")) == 1 \
                and o.input("X") != o.input("Y"):
            inc = _increment(writers, o.input("X")[0])
            if inc is not None:
                yield (at, o) + inc


def _increment(writers, counter):
    """(position, integral step >= 1) of the one op of the loop writing `counter`, when it
    is a top-level increment of it in place; else None."""
    w = _only_top_writer(writers, counter)
    if w is None or w[1].type != "increment":
        return None
    at, inc = w
    if inc.input("X") != [counter] or inc.output("Out") != [counter]:
        return None
    step = _integral(inc.attr("step"))
    return None if step is None or step < 1 else (at, step)


def _integral(v):
    """`v` as an int when it is a finite integral number (a float attribute), else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if isinstance(v, float) and (not math.isfinite(v) or v != int(v)):
        return None
    return int(v)


def _same_int_type(block, *names):
    vs = [block.find_var_recursive(n) for n in names]
    if any(v is None or v.type != VarType.LOD_TENSOR for v in vs):
        return False
    return len({v.dtype for v in vs}) == 1 and vs[0].dtype in INT_RANGES


def _dtype(block, name):
    return block.find_var_recursive(name).dtype


def _value_on_entry(program, block, i, name):
    """The one value of `name` when op #i of `block` starts: the last op before it that
    writes the name (nested blocks included) is a one-element fill_constant of the
    name's declared dtype and an integral value in its range; else None."""
    for op in reversed(block.ops[:i]):
        if not any(name in o.output_arg_names for _, o in _subtree_ops(program, op)):
            continue
        if op.type != "fill_constant" or op.output("Out") != [name] or \
                op.input("ValueTensor") or op.input("ShapeTensor") or \
                op.input("ShapeTensorList"):
            return None
        shape = op.attr("shape")
        if not isinstance(shape, (list, tuple)) or math.prod(shape) != 1 or \
                any(not isinstance(d, int) or d != 1 for d in shape):
            return None
        if op.attr("dtype") != _dtype(block, name):    # made as another type than declared
            return None
        lo, hi = INT_RANGES.get(op.attr("dtype"), (1, 0))
        text = op.attr("str_value")
        try:
            value = int(text) if text else _integral(op.attr("value"))
        except (TypeError, ValueError):
            return None
        return value if value is not None and lo <= value <= hi else None
    return None


def _entries(ws, counter, inc_at, init, step, passes):
    """The most entries an array the loop writes through `ws` holds after `passes` passes
    (when it started empty): every op writing it a write_to_array whose index is the
    counter (a control op around a nested write names the array among its outputs too,
    so a write in a nested block gives no bound); else None."""
    most = -1
    for at, o, _ in ws:
        if o.type != "write_to_array" or o.input("I") != [counter]:
            return None
        bump = 1 if at > inc_at else 0         # written after the increment
        most = max(most, init + (passes - 1 + bump) * step)
    entries = most + 1
    return entries if 0 < entries <= MAX_PASSES else None
