"""Stage 1 of lowering: which ops of a block compile together, and why the others do not.

The block's ops are taken in order. Each op is emitted into the open *segment* through the
emitter registered for its type and the target (`emit.lookup`); control-flow ops become
loops and branches around their sub-block's ops (control.py). An op that cannot be compiled
(no emitter, a form its emitter refuses: `NotCompilable` says why) is rolled back, closes the
segment and stays a Python step. What this stage leaves is plain data: the `parts` of the
block in order (`PythonOp`, `FusedOp`, `Segment`), each segment with its ops' code (`OpUnit`,
`ControlUnit`) and the buffers they touch with their lifetimes. Buffer planning
(buffers.py) and rendering (render.py) come after.
"""
import math
import re

from ..core.dtypes import VarType
from ..core.names import EMPTY_VAR_NAME
from ..ir.analysis import sub_block_vars
from ..ops import registry
from . import abi, emit
from .arena import declared_fits
from .cir import (CTYPES, ArrayBuf, Buf, Emit, HeldBuf, NotCompilable, PassRecord, TableBuf,
                  is_lit)
from .dim import Dim, bounded
from .control import CONTROL, SetDim
from .loop_grad import lower_while_grad
from .recurrent import lower_recurrent, lower_recurrent_grad
from .fusion import (conv_chain, conv_epilogue, relu_grad_into_gradient, relu_into_batch_norm,
                     sgd_into_gradient)


MAX_OP_SOURCE = 8 << 20    # an op's code larger than this runs interpreted (tables of huge dims)
# the ops lowered as C control flow around their blocks (control.py, loop_grad.py)
LOWER_BLOCKS = {**CONTROL, "while_grad": lower_while_grad, "recurrent": lower_recurrent,
                "recurrent_grad": lower_recurrent_grad}


def one_element_as_declared(dims, declared):
    """An output's dims as its variable is declared when both are one element: `[1]` in a
    Fluid 1.x program's full reduction, `[]` in one saved by Paddle 2.5+ (the emitter
    writes one element either way; the interpreter's plan shapes its results alike)."""
    declared = tuple(declared)
    if declared in ((), (1,)) and len(dims) < 2 and all(str(d) == "1" for d in dims) \
            and len(dims) != len(declared):
        return ["1"] * len(declared)
    return dims


class PythonOp:
    """Op `i` of the block runs as a Python step: `reason` says why it did not compile."""
    __slots__ = ("i", "reason")

    def __init__(self, i, reason):
        self.i, self.reason = i, reason


class FusedOp:
    """Op `i` (an update) is applied by op `into` of a segment (fusion.py), `fusion` the
    pass that fused it."""
    __slots__ = ("i", "into", "fusion")

    def __init__(self, i, into, fusion):
        self.i, self.into, self.fusion = i, into, fusion


class OpUnit:
    """An op's code in a segment: its position `k` (lifetimes, error code 2 + k), its C
    lines, the buffers it touches (its function's parameters), and guards checked before
    it runs (a value a branch not taken left unset), and `checks` [(C condition, message)]
    over dims known only as the segment runs (a loop pass's rows): when one holds, the op
    fails there as the interpreter's would. `shares` [(line index, dst Buf, src Buf)]: lines
    that only copy src into dst (Emit.copy_code), left out where the buffer plan gives dst
    src's memory."""
    __slots__ = ("k", "lines", "touched", "guards", "checks", "shares")

    def __init__(self, k, lines, touched, guards, checks=(), shares=()):
        self.k, self.lines, self.touched, self.guards = k, lines, touched, guards
        self.checks, self.shares = list(checks), list(shares)


class ControlUnit:
    """Statements of the segment function itself around op calls: `items`, each one of
    control.py's statements (Loop, Branch, End, Copy, SetWritten, IfWritten). It has no
    copy lines for the buffer plan to leave out."""
    __slots__ = ("items",)
    shares = ()

    def __init__(self, items):
        self.items = items


class Segment:
    """A run of compiled ops: `ops` [(block op index, OpView)] of the lowered block (a
    `while` or `conditional_block` among them stands for its sub-block's ops); `sites`
    [(block index, op index, OpView)] the ops emitted, sub-blocks' included, an op's
    position there being its `k`; `units` the function body in order; `bufs` every buffer,
    `inputs` those read from outside in args order; `flags` the C names of "was written"
    flags (values a branch sets); `preconditions` [(C condition, message)] under which the
    segment runs interpreted; `notes` {op index: what explain() says}; `varying` {C name:
    bound} the dims known only as the segment runs (an array entry's rows, a loop pass's
    batch: C variables set by SetDim statements, buffers sized by their bounds). The buffer
    plan sets `outputs`, `n_slots` and `inplace`."""

    def __init__(self, index):
        self.index = index
        self.name = f"fl_seg_{index}"
        self.ops, self.sites, self.units = [], [], []
        self.inputs, self.bufs, self.outputs = [], [], []
        self.flags, self.preconditions = [], []
        self.notes = {}
        self.varying = {}
        self.values = {}           # name -> the Buf holding its value when the segment ends
        self.n_slots, self.inplace = 0, []

    @property
    def first(self):
        return self.ops[0][0]

    @property
    def last(self):
        return self.ops[-1][0]

    def mark(self):
        """What `rollback` restores: the lengths of the lists an op appends to and the
        kind and lifetime of every buffer (an op may turn an input into an in-place one)."""
        return (len(self.inputs), len(self.bufs), len(self.sites), len(self.units),
                len(self.preconditions), len(self.flags), list(self.varying),
                [(b, b.kind, b.last) for b in self.bufs])

    def rollback(self, mark):
        n_in, n_bufs, n_sites, n_units, n_pre, n_flags, varying, kinds = mark
        del self.inputs[n_in:], self.bufs[n_bufs:], self.sites[n_sites:], self.units[n_units:]
        del self.preconditions[n_pre:], self.flags[n_flags:]
        for name in list(self.varying)[len(varying):]:
            del self.varying[name]
        for b, kind, last in kinds:
            b.kind, b.last = kind, last


def segment_block(program, block_idx, keep, target):
    """The parts of block `block_idx` for `target` (a targets.Target), and the names of persistables a CUDA
    segment creates (see Segmenter.write), and the fusions found ({pass name: what it
    found})."""
    refused, hints = set(), {}
    while True:
        s = Segmenter(program, block_idx, keep, target, refused, hints)
        s.run()
        if s.widened:                # an array's entries outgrew what its reads reserved
            continue
        escaping = _escaping_internals(program, s.block, s.parts, keep) - refused
        if not escaping:
            return s.parts, s.created, s.fusions
        refused |= escaping          # made by the interpreter then: segment again


def _escaping_internals(program, block, parts, keep):
    """The rank tables a segment makes that something after it reads (or the caller
    keeps): they live only inside the segment function; so do tensor arrays it never
    writes (a written one is handed back), and the passes a `while` keeps for a
    `while_grad` that is not compiled with it (the interpreter's needs step scopes)."""
    after = later_reads(program, block.ops)
    out = set()
    for seg in parts:
        if isinstance(seg, Segment):
            for name, buf in seg.values.items():
                leaves = name in after[seg.last] or name in keep
                if isinstance(buf, TableBuf) and leaves:
                    out.add(name)
                elif isinstance(buf, ArrayBuf) and leaves and (buf.elem is None or
                                                               buf.lod_bounds):
                    out.add(name)    # never written here, or entries with LoD: not handed back
                elif isinstance(buf, PassRecord) and not buf.used:   # while_grad interpreted
                    out.add(name)
    return out


class Segmenter:
    """Emits a block's ops into segments. Emit (cir.py) and control.py reach the segment
    being built through its methods: `read`, `write`, `temp`, `scratch`, `bind`, ..."""

    MAX_WIDENINGS = 4                    # per array and key: bounds that keep growing stop

    def __init__(self, program, block_idx, keep, target, refused=(), hints=None):
        self.program, self.target = program, target
        self.refused = set(refused)      # arrays and tables ops outside the segments read
        # {(array variable, key): (bound, {its summands})}: what an array's entries reserve,
        # widened by a later write (entry_bound); `widened`: segment again with them
        self.hints = hints if hints is not None else {}
        self.widened = False
        self._top = 0                    # the index of the block's op being emitted
        self.block = program.block(block_idx)
        self.block_idx = block_idx
        self.keep = set(keep)
        self.parts, self.created = [], set()
        self._seg, self._env, self._n = None, {}, 0
        self._blocks = [self.block]       # the block whose ops are being emitted, innermost last
        self.fusions = {"sgd_into_gradient": sgd_into_gradient(program, self.block, self.keep),
                        "conv_epilogue": conv_epilogue(program, self.block, self.keep),
                        "conv_chain": conv_chain(program, self.block, self.keep),
                        "relu_into_batch_norm": relu_into_batch_norm(program, self.block,
                                                                     self.keep),
                        "relu_grad_into_gradient": relu_grad_into_gradient(
                            program, self.block, self.keep)}
        self._fused, self._pending_fuse = {}, []   # op index -> (op fused into, pass name)

    def run(self):
        for i, op in enumerate(self.block.ops):
            if i in self._fused:
                self.parts.append(FusedOp(i, *self._fused[i]))
                continue
            reason = self._try(i, op)
            if reason is not None and self._reads_held(op):
                # a value the open segment makes at its own size leaves it whole: a new
                # segment reads it as an input, with no Python step between them
                self._close()
                reason = self._try(i, op)
            if reason is not None:
                self._close()
                self.parts.append(PythonOp(i, reason))
        self._close()

    # -- which ops compile ---------------------------------------------------------------
    def _reads_held(self, op):
        """Whether `op` reads a value of the open segment made in memory of its own size."""
        return any(isinstance(self._env.get(n), HeldBuf) for n in op.input_arg_names)

    def _try(self, i, op):
        """Emit op i into the open segment; the reason it cannot be compiled, or None."""
        if self._seg is None:
            self._seg = Segment(sum(isinstance(p, Segment) for p in self.parts))
        seg = self._seg
        self._top = i
        saved = (seg.mark(), dict(self._env), self._n, list(self._blocks))
        self._pending_fuse = []
        try:
            note = self.emit_op(op, self.block_idx, i)
        except NotCompilable as exc:
            mark, self._env, self._n, self._blocks = saved
            seg.rollback(mark)
            self._pending_fuse = []
            if not seg.ops:
                self._seg = None
            return str(exc)
        seg.ops.append((i, op))
        if note:
            seg.notes[i] = note
        for j, fusion in self._pending_fuse:
            self._fused[j] = (i, fusion)
        return None

    def emit_op(self, op, block_idx, i):
        """Emit `op` (#i of block `block_idx`) into the open segment: through its emitter, or
        as a loop or branch over its sub-block (control.py). Returns a note for explain() or
        None; raises NotCompilable with the reason it cannot be compiled (the caller rolls
        the segment back)."""
        opdef = registry.find(op.type)
        if opdef is None:
            raise NotCompilable(f"'{op.type}' is an unknown op")
        lower = LOWER_BLOCKS.get(op.type)
        if lower is not None:
            return lower(self, op, block_idx, i)
        rule = emit.lookup(op.type, self.target.name)
        if rule is None and opdef.kind == "ctx":
            raise NotCompilable(f"'{op.type}' acts on the run itself (feed, fetch, control "
                                "flow, I/O)")
        if op.sub_block_ids():
            raise NotCompilable(f"'{op.type}' has sub-blocks")
        if rule is None:
            raise NotCompilable(f"'{op.type}' has no {self.target.title} emitter")
        seg = self._seg
        e = Emit(self, op, opdef, registry.attrs_of(opdef, op.all_attrs()), len(seg.sites))
        try:
            rule(e)
        except NotCompilable as exc:
            raise NotCompilable(f"'{op.type}': {exc}") from None
        except MemoryError:          # tables sized by huge declared dims or attributes
            raise NotCompilable(f"'{op.type}': its compiled form needs more memory to build "
                                "than this process may take") from None
        if sum(map(len, e.lines)) > MAX_OP_SOURCE:
            raise NotCompilable(f"'{op.type}': its compiled form would be over "
                                f"{MAX_OP_SOURCE >> 20} MiB of source")
        seg.sites.append((block_idx, i, op))
        guards = [(b, f"{b.var} has no value (the branch that sets it did not run)")
                  for b in e.unset_reads]
        computed = {p.name for b in e.touched.values() for p in b.computed_lod}
        late = [(c, m) for c, m in e.preconditions
                if self._mentions_varying(c) or set(_C_NAMES.findall(c)) & computed]
        # a copy inside a loop or branch keeps its line: lifetimes there span passes
        shares = e.shares if len(self._blocks) == 1 else ()
        seg.units.append(OpUnit(e.k, e.lines, list(e.touched.values()), guards, late, shares))
        seg.preconditions += [p for p in e.preconditions if p not in late]
        return None

    def _mentions_varying(self, cond):
        return bool(self._seg.varying) and \
            bool(set(_C_NAMES.findall(cond)) & self._seg.varying.keys())

    def runtime_dim(self, bound, setter, k):
        """A new dim known only when op k runs (Emit.runtime_dim)."""
        seg = self._seg
        name = f"v{len(seg.varying)}_{k}"
        seg.varying[name] = self.bound_of(bound)
        seg.units.append(ControlUnit([SetDim(setter(name))]))
        return Dim.sym(name)

    def bound_of(self, d):
        return bounded(d, self._seg.varying)

    def write_array(self, name, elem, row_dims, op, k):
        """The ArrayBuf `name` is written into (Emit.array_output)."""
        v = self._var(name)
        if v.type != VarType.LOD_TENSOR_ARRAY:
            raise NotCompilable(f"output '{name}' is a {VarType.Type.Name(v.type)}")
        buf = self._env.get(name)
        if buf is None:
            buf = self.new_array(name, k)
        elif not isinstance(buf, ArrayBuf):
            raise NotCompilable(f"'{name}' holds no compiled tensor array")
        row_dims = list(map(_as_dim, row_dims))
        if any(d.symbols & self._seg.varying.keys() for d in row_dims):
            raise NotCompilable(f"tensor array '{name}': its entries' row dims {row_dims} "
                                "change while the segment runs")
        buf.max_entries = None       # a bound from the loop that wrote it no longer holds
        if buf.elem is None:
            buf.elem, buf.row_dims = elem, row_dims
        elif buf.elem != elem or list(map(str, buf.row_dims)) != list(map(str, row_dims)):
            raise NotCompilable(f"tensor array '{name}' holds {buf.elem}[?, {buf.row_dims}], "
                                f"not {elem}[?, {row_dims}]")
        buf.last = max(buf.last, k)
        return buf

    def entry_bound(self, array, key, bound, current=None):
        """The bound on `key` ("rows", or a LoD level's count) that the entries of ArrayBuf
        `array` keep, its reads reserve it. A first write (`current` None) takes the one a
        previous segmentation found, else `bound`; a later write whose `bound` is not among
        the summands of `current` widens it to their sum for the next segmentation (the
        reads compiled before it reserved too little) - a loop's writes and reads reach a
        fixed point when a write's bound does not grow with what it reads (beam_search's:
        beam_size rows a source). The write checks its value against `current` anyway."""
        hint = self.hints.get((array.var, key))
        if current is None:
            return hint[0] if hint is not None else bound
        summands = hint[1] if hint is not None else {str(current)}
        if str(bound) in summands or str(bound) == str(current):
            return current
        if len(summands) > self.MAX_WIDENINGS:
            raise NotCompilable(f"tensor array '{array.var}': its entries' {key} keep "
                                "growing from write to write")
        self.hints[(array.var, key)] = (current + bound, summands | {str(bound)})
        self.widened = True
        return current

    def new_array(self, name, k):
        """An empty tensor array for `name`, which the program has not written before this
        point (else its value is the scope's: NotCompilable)."""
        v = self._var(name)
        if name in self.refused:
            raise NotCompilable(f"tensor array '{name}' is read outside the compiled code")
        if v.persistable:
            raise NotCompilable(f"tensor array '{name}' is persistable")
        if any(name in _writes(self.program, o) for o in self.block.ops[:self._top]):
            raise NotCompilable(f"tensor array '{name}' has a value from before the "
                                "compiled code")
        buf = ArrayBuf(f"a{self._n}", name)
        self._n += 1
        buf.first = buf.last = k
        self._seg.bufs.append(buf)
        self._env[name] = buf
        return buf

    def own_array(self, var, k):
        """A tensor array the segment function owns that no program variable names (a loop's
        per-pass values kept for its gradient, a gradient summed over passes)."""
        buf = ArrayBuf(f"a{self._n}", var)
        self._n += 1
        buf.first = buf.last = k
        self._seg.bufs.append(buf)
        return buf

    def write_table(self, name, src, op, k):
        """A rank table of `src`'s level-0 LoD (Emit.table_output)."""
        v = self._var(name)
        if v.type != VarType.LOD_RANK_TABLE:
            raise NotCompilable(f"output '{name}' is a {VarType.Type.Name(v.type)}")
        if name in self.refused:
            raise NotCompilable(f"rank table '{name}' is read outside the compiled code")
        n = src.lod_len - 1
        buf = TableBuf(f"t{self._n}", name, "int64_t", [Dim.lit(2), n], "temp")
        self._n += 1
        buf.first = buf.last = k
        buf.levels, buf.lod_src = [(src.lod, src.lod_len)], src.lod_src   # one level only
        buf.total = src.dims[0]
        self._seg.bufs.append(buf)
        self._env[name] = buf
        return buf

    def control(self, items):
        """Statements of the segment function itself (Loop, Branch, End, Copy, ...)."""
        self._seg.units.append(ControlUnit(list(items)))

    @property
    def at_top_level(self):
        """Whether ops are being emitted at the segment's top level (outside its loops and
        branches)."""
        return len(self._blocks) == 1

    @property
    def current_block(self):
        """The block whose ops are being emitted."""
        return self._blocks[-1]

    is_literal = staticmethod(is_lit)

    def precondition(self, cond, message):
        """A run-time condition under which the segment runs interpreted (Emit.check)."""
        self._seg.preconditions.append((cond, message))

    @property
    def position(self):
        """The lifetime position of the next op emitted."""
        return len(self._seg.sites)

    def in_block(self, block):
        """Context: ops emitted meanwhile are `block`'s (their names resolve there)."""
        return _InBlock(self, block)

    def _close(self):
        seg = self._seg
        if seg is None:
            return
        self._seg = None
        end = len(seg.sites)
        for buf in self._env.values():      # a LoD computed here leaves with its value
            for lod in buf.computed_lod:
                lod.last = max(lod.last, end)
        seg.values = self._env
        self.parts.append(seg)
        self._env = {}

    def fused_update(self, grad_name, k_op):
        """(Param Buf updated in place, LearningRate Buf) when the op emitting `grad_name`
        may apply its sgd update itself (fusion.sgd_into_gradient; the sgd is then not
        emitted); else None."""
        hit = self.fusions["sgd_into_gradient"].get(grad_name)
        if hit is None or len(self._blocks) > 1:     # not from inside a loop or branch
            return None
        i_sgd, p, lr = hit
        param = self.read(p, None)
        rate = self.read(lr, None)
        if param.kind not in ("input", "inout") or not param.persistable:
            return None
        self.write(p, param.dims, param.ctype, None, k_op)
        self._pending_fuse.append((i_sgd, "sgd_into_gradient"))
        return param, rate

    def fused_epilogue(self, out_name, dims, k_op):
        """(Epilogue, {variable: Buf} of what its steps read, the Buf of its result, declared
        with `dims`) when the conv writing `out_name` may compute the per-channel ops that
        follow it (fusion.conv_epilogue; they are then not emitted); else None."""
        hit = self.fusions["conv_epilogue"].get(out_name)
        if hit is None or len(self._blocks) > 1:     # not from inside a loop or branch
            return None
        bufs = {n: self.read(n, None) for _, _, roles in hit.steps for n in roles.values()}
        if any(not all(is_lit(d) for d in b.dims) or math.prod(int(d) for d in b.dims) !=
               hit.channels or b.ctype != "float" for b in bufs.values()):
            return None                  # not one float a channel after all: unfused
        result = self.write(hit.out, dims, "float", None, k_op)
        self._pending_fuse += [(j, "conv_epilogue") for j in hit.ops]
        return hit, bufs, result

    def fused_chain(self, out_name):
        """(Chain, [(its conv op, {"Filter", "Bias": Buf or None}, {variable: Buf} of what
        its epilogue reads)] a link) when the conv writing `out_name` starts a chain of 1x1
        / depthwise convs it may run whole (fusion.conv_chain); else None. Nothing is
        fused until chain_output."""
        hit = self.fusions["conv_chain"].get(out_name)
        if hit is None or len(self._blocks) > 1:     # not from inside a loop or branch
            return None
        links = []
        for link in hit.links:
            op = self.block.ops[link.conv]
            bias = op.input("Bias")
            bufs = {"Filter": self.read(op.input("Filter")[0], None),
                    "Bias": self.read(bias[0], None) if bias else None}
            steps = link.epilogue.steps if link.epilogue else []
            epi = {n: self.read(n, None) for _, _, roles in steps for n in roles.values()}
            if any(b is not None and (b.ctype != "float" or not all(is_lit(d) for d in b.dims))
                   for b in [*bufs.values(), *epi.values()]):
                return None
            links.append((op, bufs, epi))
        return hit, links

    def chain_output(self, hit, dims, k_op):
        """The Buf (declared with `dims`) of a Chain's last result, written by the conv that
        starts it; the chain's other convs and their epilogue ops are then not emitted."""
        result = self.write(hit.out, dims, "float", None, k_op)
        self._pending_fuse += hit.ops
        return result

    def fused_relu(self, out_name, dims, k_op):
        """The Buf (declared with `dims`) of the relu's Out when the relu after the op
        writing `out_name` may be applied by that op as it writes
        (fusion.relu_into_batch_norm; the relu is then not emitted); else None."""
        hit = self.fusions["relu_into_batch_norm"].get(out_name)
        if hit is None or len(self._blocks) > 1:     # not from inside a loop or branch
            return None
        j, relu_out = hit
        result = self.write(relu_out, dims, "float", None, k_op)
        self._pending_fuse.append((j, "relu_into_batch_norm"))
        return result

    def fused_relu_grad(self, grad_name, relu_out, dims, k_op):
        """The Buf (declared with `dims`) of relu_grad's X@GRAD when the relu_grad reading
        the gradient `grad_name` (and relu's Out `relu_out`) may be applied by the op
        making that gradient (fusion.relu_grad_into_gradient; the relu_grad is then not
        emitted); else None."""
        hit = self.fusions["relu_grad_into_gradient"].get(grad_name)
        if hit is None or hit[1] != relu_out or len(self._blocks) > 1:
            return None
        j, _, dx = hit
        result = self.write(dx, dims, "float", None, k_op)
        self._pending_fuse.append((j, "relu_grad_into_gradient"))
        return result

    # -- buffers --------------------------------------------------------------------------
    def _var(self, name):
        v = self._blocks[-1].find_var_recursive(name)
        if v is None:
            raise NotCompilable(f"variable '{name}' is not declared")
        return v

    def read(self, name, op):
        """The Buf an op reads as `name`: the segment's latest write, or a new input."""
        if name == EMPTY_VAR_NAME:
            return None
        k = len(self._seg.sites)
        buf = self._env.get(name)
        if buf is None:
            buf = self._new_input(name, k)
        elif isinstance(buf, HeldBuf):
            raise NotCompilable(f"'{name}' is made in memory of its own size (handed back "
                                "whole, not read by compiled ops)")
        elif isinstance(buf, (ArrayBuf, TableBuf)) and op is not None and \
                op.type not in emit.INTERNAL_READERS:
            what = "tensor array" if isinstance(buf, ArrayBuf) else "rank table"
            raise NotCompilable(f"'{op.type}' reads '{name}', a compiled {what}")
        buf.last = k
        if buf.rows is not None:
            buf.rows.last = k
        for lod in buf.computed_lod:
            lod.last = max(lod.last, k)
        return buf

    def write_held(self, name, ctype, ndim, k):
        """A HeldBuf for `name` (Emit.held_output)."""
        v = self._var(name)
        if v.type != VarType.LOD_TENSOR or v.persistable:
            raise NotCompilable(f"output '{name}' is not a LoDTensor of the run")
        if len(self._blocks) > 1:
            raise NotCompilable(f"output '{name}' has a size known only when it is made "
                                "(compiled outside loops and branches only)")
        buf = HeldBuf(f"h{self._n}", name, ctype, ndim)
        self._n += 1
        buf.first = buf.last = k
        self._seg.bufs.append(buf)
        self._env[name] = buf
        return buf

    def lod_buf(self, what, count, k):
        """An int64 arena buffer of `count` LoD offsets an op computes (Buf.levels)."""
        return self._arena_buf(what, "int64_t", [count], "temp", k)

    def _new_input(self, name, k):
        v = self._var(name)
        if v.type not in (VarType.LOD_TENSOR, VarType.SELECTED_ROWS):
            raise NotCompilable(f"input '{name}' is a {VarType.Type.Name(v.type)}")
        ctype = CTYPES.get(v.dtype)
        if ctype is None:
            raise NotCompilable(f"input '{name}' has a dtype generated code lacks")
        j = len(self._seg.inputs)
        if len(v.shape) > abi.MAX_DIMS:
            raise NotCompilable(f"input '{name}' has more than {abi.MAX_DIMS} dims")
        if not declared_fits(v.shape, ctype):     # no value can be of that shape
            raise NotCompilable(f"input '{name}' is declared {list(v.shape)}: larger "
                                "than this machine can hold")
        shape = [Dim.lit(d) if d >= 0 else Dim.sym(f"in{j}_d{a}") for a, d in enumerate(v.shape)]
        buf = Buf(f"in{j}", name, ctype, shape, "input")
        buf.persistable = v.persistable
        buf.first = k
        if v.type == VarType.SELECTED_ROWS:     # value [rows, ...], ids, height
            buf.dims[0] = Dim.sym(f"in{j}_d0")
            buf.rows = Buf(f"in{j}_rows", name, "int64_t", [buf.dims[0]], "input")
            buf.rows.first = k
            buf.height = Dim.sym(f"in{j}_h")
        elif v.lod_level:
            buf.levels = input_levels(j, v.lod_level, name, self.target)
            buf.lod_src = name
        self._seg.inputs.append(buf)
        self._seg.bufs.append(buf)
        self._env[name] = buf
        return buf

    def state(self, name, op):
        """The Buf of a random op's [key, run] state (int64 [2], ops/random_stream.py), a
        scope variable no block declares: read and advanced in its own memory (host
        memory: only the CPU target's emitters ask for it)."""
        k = len(self._seg.sites)
        buf = self._env.get(name)
        if buf is None:
            buf = Buf(f"in{len(self._seg.inputs)}", name, "int64_t", [Dim.lit(2)], "input")
            buf.persistable, buf.first = True, k
            self._seg.inputs.append(buf)
            self._seg.bufs.append(buf)
            self._env[name] = buf
        buf.kind, buf.last = "inout", k
        return buf

    def made_here(self, name):
        buf = self._env.get(name) if self._seg is not None else None
        return buf is not None and buf.kind not in ("input", "inout")

    def value(self, name):
        """The Buf the segment holds for `name` now, or None."""
        return self._env.get(name)

    def bind(self, name, buf):
        """Make `buf` the value of `name` for the ops emitted next (None: forget it)."""
        if buf is None:
            self._env.pop(name, None)
        else:
            self._env[name] = buf

    def _arena_buf(self, var, ctype, dims, kind, k):
        buf = Buf(f"t{self._n}", var, ctype, dims, kind)
        if self._seg.varying and any(d.symbols & self._seg.varying.keys() for d in buf.dims):
            buf.cap = [self.bound_of(d) for d in buf.dims]
        self._n += 1
        buf.first = buf.last = k
        self._seg.bufs.append(buf)
        return buf

    def temp(self, name, dims, ctype, k):
        """A new arena buffer for a value of `name` (a loop's carried value)."""
        return self._arena_buf(name, ctype, dims, "temp", k)

    def flag(self, buf):
        """Give `buf` a run-time "was written" flag (a value only a branch sets)."""
        buf.written = f"ok_{buf.name}"
        self._seg.flags.append(buf.written)
        return buf.written

    def live_through(self, first, last):
        """Values alive on entering positions [first, last] stay alive to `last` (a loop's
        body runs again: what it reads from before the loop must outlive every pass)."""
        for b in self._seg.bufs:
            if b.first < first and b.last >= first:
                b.last = max(b.last, last)

    def write(self, name, dims, ctype, op, k, rows=False):
        """A new value of `name` written by op k: in place for a persistable input (its own
        memory), else a new arena buffer (with an int64 buffer of row ids for `rows`, a
        SelectedRows)."""
        v = self._var(name)
        want = VarType.SELECTED_ROWS if rows else VarType.LOD_TENSOR
        if v.type != want:
            raise NotCompilable(f"output '{name}' is a {VarType.Type.Name(v.type)}")
        dims = one_element_as_declared(dims, v.shape)
        old = self._env.get(name)
        if old is not None and old.kind in ("input", "inout") and old.persistable:
            if len(dims) != old.ndim:
                raise NotCompilable(f"'{name}' changes rank in place")
            old.kind, old.last = "inout", k
            return old
        if v.persistable and self.target.creates_persistables and old is None \
                and all(d >= 0 for d in v.shape) and not rows:
            # a parameter made on the device (startup): its memory is the plan's, passed in
            buf = self.read(name, op)
            buf.kind, buf.last = "inout", k
            self.created.add(name)
            return buf
        if v.persistable:
            raise NotCompilable(f"writes persistable '{name}' that it does not read")
        buf = self._arena_buf(name, ctype, dims, "temp", k)
        if rows:
            buf.rows = self._arena_buf(name, "int64_t", dims[:1], "temp", k)
        self._env[name] = buf
        return buf

    def scratch(self, dims, ctype, k):
        return self._arena_buf(f"(scratch of op {k})", ctype, dims, "scratch", k)


_C_NAMES = re.compile(r"[A-Za-z_]\w*")


def input_levels(j, n_levels, name, target):
    """The LoD levels of segment input j as its C names [(offsets, count)], outer first:
    the finest `in{j}_lod`/`in{j}_nlod` as with one level, an outer level k
    `in{j}_l{k}_lod`/`in{j}_l{k}_nlod` (render.py reads them from the input's record as
    abi.packed_lod lays them out). Two levels at most (beam search's), on the CPU target."""
    if n_levels > abi.MAX_LOD_LEVELS:
        raise NotCompilable(f"input '{name}' has {n_levels} LoD levels (compiled code takes "
                            f"at most {abi.MAX_LOD_LEVELS})")
    if n_levels > 1 and target.name != "cpu":
        raise NotCompilable(f"input '{name}' has {n_levels} LoD levels ({target.title} "
                            "code takes one)")
    outer = [(Dim.sym(f"in{j}_l{k}_lod"), Dim.sym(f"in{j}_l{k}_nlod"))
             for k in range(n_levels - 1)]
    return outer + [(Dim.sym(f"in{j}_lod"), Dim.sym(f"in{j}_nlod"))]


def _as_dim(d):
    return d if isinstance(d, Dim) else Dim.lit(d) if is_lit(d) else Dim.sym(str(d))


def _writes(program, op):
    """The names `op` writes, its sub-blocks' ops' included."""
    names = set(op.output_arg_names)
    for b in op.sub_block_ids():
        if 0 < b < program.num_blocks:
            for o in program.block(b).ops:
                names |= _writes(program, o)
    return names


class _InBlock:
    def __init__(self, low, block):
        self.low, self.block = low, block

    def __enter__(self):
        self.low._blocks.append(self.block)

    def __exit__(self, *exc):
        self.low._blocks.pop()


def later_reads(program, ops):
    """reads_after[i]: names read by ops after op i (sub-blocks included)."""
    after, acc = [None] * len(ops), set()
    for i in range(len(ops) - 1, -1, -1):
        after[i] = set(acc)
        op = ops[i]
        acc.update(op.input_arg_names)
        acc.update(sub_block_vars(program, op))
    return after
