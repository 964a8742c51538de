"""What a block's ops read and write, as the executors, memory passes and the code generator
see it.

All facts come from the ProgramDesc alone (through `ir.views`):

* `op_uses(op)`: the names an op reads and writes. An op with sub-blocks (`while`,
  `conditional_block`, ... : BLOCK/BLOCKS attributes) reads *and* writes every name any op of
  its sub-blocks uses, so those variables are live across the whole parent op.
* `dependencies(ops)`: the edges a dataflow schedule must respect: read-after-write,
  write-after-read and write-after-write on every name, plus barriers around ops whose effects
  the names don't tell (`ctx` ops other than feed/fetch/delete_var: I/O, control flow).
  The block's own order is one topological order of this graph.
* `topological_order(...)`: Kahn's algorithm, lowest op index first among ready ops.
* `temporaries(block, ops)`: the variables a memory plan may reuse or free, with their first
  and last use in the given order.
"""
import heapq

from ..core.dtypes import VarType
from ..core.names import EMPTY_VAR_NAME
from ..ops import registry

# ctx ops whose reads and writes are exactly their slots
_PLAIN_CTX = frozenset({"feed", "fetch", "delete_var"})


def sub_block_vars(program, op):
    """Every name used by the ops of `op`'s sub-blocks, nested ones included."""
    names, todo, seen = set(), list(op.sub_block_ids()), set()
    while todo:
        b = todo.pop()
        if b in seen or not 0 <= b < program.num_blocks:
            continue
        seen.add(b)
        for sub in program.block(b).ops:
            names.update(sub.input_arg_names)
            names.update(sub.output_arg_names)
            todo.extend(sub.sub_block_ids())
    names.discard(EMPTY_VAR_NAME)
    return names


def op_uses(program, op):
    """(reads, writes) of `op` as sets of names."""
    reads = {n for n in op.input_arg_names if n != EMPTY_VAR_NAME}
    writes = {n for n in op.output_arg_names if n != EMPTY_VAR_NAME}
    if op.type == "delete_var":
        writes |= reads     # it ends the variables' lifetimes
    sub = sub_block_vars(program, op)
    return reads | sub, writes | sub


def is_barrier(op):
    """Whether `op` must run alone: control flow, or a ctx op other than feed/fetch/delete."""
    if op.sub_block_ids():
        return True
    opdef = registry.find(op.type)
    return (opdef is None or opdef.kind == "ctx") and op.type not in _PLAIN_CTX


def dependencies(program, ops):
    """succ[i]: ops that must wait for op i; n_pred[i]: how many ops op i waits for."""
    n = len(ops)
    succ = [set() for _ in range(n)]
    last_write, readers = {}, {}
    last_barrier, since_barrier = None, []
    for i, op in enumerate(ops):
        reads, writes = op_uses(program, op)
        deps = set()
        for r in reads:
            if r in last_write:
                deps.add(last_write[r])
        for w in writes:
            if w in last_write:
                deps.add(last_write[w])
            deps.update(readers.get(w, ()))
        if is_barrier(op):
            deps.update(since_barrier)
            last_barrier, since_barrier = i, []
        elif last_barrier is not None:
            deps.add(last_barrier)
        since_barrier.append(i)
        deps.discard(i)
        for d in deps:
            succ[d].add(i)
        for r in reads:
            readers.setdefault(r, []).append(i)
        for w in writes:
            last_write[w] = i
            readers[w] = [i] if w in reads else []
    succ = [sorted(s) for s in succ]
    n_pred = [0] * n
    for s in succ:
        for j in s:
            n_pred[j] += 1
    return succ, n_pred


def topological_order(succ, n_pred):
    count = list(n_pred)
    ready = [i for i, c in enumerate(count) if c == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for j in succ[i]:
            count[j] -= 1
            if count[j] == 0:
                heapq.heappush(ready, j)
    if len(order) != len(succ):
        raise AssertionError("the dependency graph of a block has a cycle")
    return order


class Temp:
    """A variable a memory plan may reuse or free: where it is first written and last used
    (indices into the order analysed; a `delete_var` naming it is no use, it sets
    `deleted`), whether any op reads it, and whether a ctx op writes it."""
    __slots__ = ("name", "var", "first", "last", "ctx_written", "read", "deleted")

    def __init__(self, name, var, first):
        self.name, self.var, self.first, self.last = name, var, first, first
        self.ctx_written = self.read = self.deleted = False

    def __repr__(self):
        return f"Temp({self.name!r}, {self.first}..{self.last})"


def temporaries(program, block, ops, skip=()):
    """{name: Temp} of the non-persistable variables declared in `block` whose first use in
    `ops` is a write, except fed ones (feed outputs), fetched ones (fetch inputs), those in
    `skip` and those any sub-block uses."""
    excluded = set(skip)
    temps = {}
    for i, op in enumerate(ops):
        excluded |= sub_block_vars(program, op)
        if op.type == "feed":
            excluded.update(op.output_arg_names)
        elif op.type == "fetch":
            excluded.update(op.input_arg_names)
        reads, writes = op_uses(program, op)
        if op.type == "delete_var":
            for n in reads:
                if n in temps:
                    temps[n].deleted = True
            continue
        opdef = registry.find(op.type)
        ctx = opdef is None or opdef.kind == "ctx"
        for n in reads:
            t = temps.get(n)
            if t is None:
                excluded.add(n)         # read before written: its value comes from outside
            else:
                t.last = i
                t.read = True
        for n in writes:
            t = temps.get(n)
            if t is None and n not in excluded:
                v = block.vars.get(n)
                if v is None or v.persistable:
                    excluded.add(n)
                    continue
                t = temps[n] = Temp(n, v, i)
            if t is not None:
                t.last = i
                t.ctx_written |= ctx
    return {n: t for n, t in temps.items() if n not in excluded}


def is_dense(var):
    return var.type == VarType.LOD_TENSOR
