"""Lower one block of a program to compiled segments and Python ops.

The block's ops are taken in the block's order. A run of ops that all have a compiled form
(`emitters.rule_for`) for the dtypes and shapes this program gives them becomes one
*segment*: one C++ function over the values it reads from outside (its inputs, passed in as
pointers and dims), the temporaries it makes (at offsets of one arena, coloured by lifetime
with `ir.memory_plan`) and the values later ops, fetches or the scope need from it (its
outputs: in the arena too, except persistables, which are updated in their own memory). An
op with no compiled form cuts the segment there and runs as a Python step; `explain()` says
which ops ran where and why.

Dims the desc knows are literals in the code (checked against the values at run time); -1
dims are read from the inputs, so one build serves every batch size and every LoD.

An input whose rank or literal dims differ from the desc's at run time (a value of a shape
the program does not declare) makes the function return -1 before it writes anything; the
native plan then runs that segment's ops interpreted (and says so once).

Calling convention of `fl_seg_N(int64_t* args, char* arena, int64_t cap, char* err)`:
args[0] is written with the arena bytes needed when `cap` is too small (return 1); input k
occupies args[1 + k*S ...] = (data pointer, ndim, dims[8], lod pointer, lod length); output
j occupies args[out_base + j*S ...] = (arena offset or -1 for a persistable updated in
place, ndim, dims[8], rows offset, height). Return 0 on success, 2 + op index (within the
segment) with a message in `err` when an op finds bad input.
"""
import re

from ..core.dtypes import VarType
from ..core.names import EMPTY_VAR_NAME
from ..ir.analysis import sub_block_vars
from ..ir.memory_plan import colour_by_lifetime
from ..ops import registry
from .arena import arena_lines, declared_fits
from .cir import CTYPES, Buf, Emit, NotCompilable, c_string, checked_source, is_lit
from .emitters import rule_for

def _one_element_as_declared(dims, declared):
    """An output's dims as its variable is declared when both are one element: `[1]` in a
    Fluid 1.x program's full reduction, `[]` in one saved by Paddle 2.5+ (the emitter
    writes one element either way; the interpreter's plan shapes its results alike)."""
    declared = tuple(declared)
    if declared in ((), (1,)) and len(dims) < 2 and all(str(d) == "1" for d in dims) \
            and len(dims) != len(declared):
        return ["1"] * len(declared)
    return dims


S = 12           # int64 slots per tensor in args
MAX_DIMS = 8
ALIGN = 64
MAX_OP_SOURCE = 8 << 20    # an op's code larger than this runs interpreted (tables of huge dims)


class Segment:
    """A run of compiled ops: `ops` [(block op index, OpView)] of the lowered block (a
    `while` or `conditional_block` among them stands for its sub-block's ops), `inputs` /
    `outputs` [Buf] in args order, the C function's `name` and its `lines`.

    `sites` [(block index, op index, OpView)] are the ops emitted, sub-blocks' included; an
    op's position there (its `k`) orders buffer lifetimes and is its error code (2 + k).
    `units` is the function body in order: ("op", k, lines, touched bufs) for an op's own
    function, ("ctl", lines) for the loops and branches of control flow around them."""

    def __init__(self, index):
        self.index = index
        self.name = f"fl_seg_{index}"
        self.ops = []
        self.sites = []
        self.inputs = []
        self.outputs = []
        self.bufs = []
        self.units = []
        self.flags = []          # C names of "this value was written" flags (cond branches)
        self.inplace = []        # (out buf name, in buf name) taken
        self.preconditions = []  # (C condition, message): run interpreted when one holds
        self.notes = {}          # block op index -> what explain() says of it
        self.lines = []

    @property
    def first(self):
        return self.ops[0][0]

    @property
    def last(self):
        return self.ops[-1][0]

    @property
    def out_base(self):
        return 1 + len(self.inputs) * S


class Lowering:
    """One block lowered. `parts` lists, in order, ("py", op index, reason) and
    ("native", Segment); `source` is the C++ translation unit of all segments."""

    def __init__(self, program, block_idx=0, keep=(), target="cpu"):
        """keep: names whose values must leave a segment even if no later op reads them
        (fetch targets of the caller); target: "cpu" (C++) or "cuda" (codegen/cuda.py: the
        ops' CUDA emitters, device pointers in args and arena)."""
        self.program = program
        self.target = target
        self.created = set()     # cuda: persistables a segment makes (the plan allocates them)
        self.block = program.block(block_idx)
        self.block_idx = block_idx
        self.keep = set(keep)
        self.parts = []
        self.segments = []
        self._seg = None
        self._env = {}
        self._n = 0
        self._blocks = [self.block]    # the block whose ops are being emitted, innermost last
        ops = self.block.ops
        self._reads_after = self._later_reads(ops)
        self._updates = self._fusable_updates(ops)
        self._fused = {}           # sgd op index -> the op index its update was fused into
        self._pending_fuse = None
        for i, op in enumerate(ops):
            if i in self._fused:
                self.parts.append(("fused", i, self._fused[i]))
                continue
            reason = self._try(i, op)
            if reason is not None:
                self._close()
                self.parts.append(("py", i, reason))
        self._close()
        self.source = self._render()

    # -- which ops compile ---------------------------------------------------------------
    def _try(self, i, op):
        """Emit op i into the open segment; the reason it cannot be compiled, or None."""
        if self._seg is None:
            self._seg = Segment(len(self.segments))
        seg = self._seg
        saved = self._snapshot()
        self._pending_fuse = None
        try:
            note = self.emit_op(op, self.block_idx, i)
        except NotCompilable as exc:
            self._restore(saved)
            self._pending_fuse = None
            if not seg.ops:
                self._seg = None
            return str(exc)
        seg.ops.append((i, op))
        if note:
            seg.notes[i] = note
        if self._pending_fuse is not None:
            self._fused[self._pending_fuse] = i
        return None

    def emit_op(self, op, block_idx, i):
        """Emit `op` (#i of block `block_idx`) into the open segment: through its emitter, or
        as a loop or branch over its sub-block (codegen/control.py). Returns a note for
        explain() or None; raises NotCompilable with the reason it cannot be compiled (the
        caller restores the state it saved)."""
        from .control import CONTROL     # control.py lowers sub-blocks through this module
        opdef = registry.find(op.type)
        if opdef is None:
            raise NotCompilable(f"'{op.type}' is an unknown op")
        if op.type in CONTROL:
            return CONTROL[op.type](self, op, block_idx, i)
        rule = rule_for(opdef, self.target)
        if rule is None and opdef.kind == "ctx":
            raise NotCompilable(f"'{op.type}' acts on the run itself (feed, fetch, control "
                                "flow, I/O)")
        if op.sub_block_ids():
            raise NotCompilable(f"'{op.type}' has sub-blocks")
        if rule is None:
            raise NotCompilable(f"'{op.type}' has no {'CUDA' if self.target == 'cuda' else 'C++'}"
                                " emitter")
        seg = self._seg
        attrs = registry.attrs_of(opdef, op.all_attrs())
        e = Emit(self, op, opdef, attrs, len(seg.sites))
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
        guards = [f'if (!{b.written}) return fl::fail(err, {e.k}, '
                  f'{c_string(f"{b.var} has no value (the branch that sets it did not run)")});'
                  for b in e.unset_reads]
        seg.units.append(("op", e.k, e.lines, list(e.touched.values()), guards))
        seg.preconditions += e.preconditions
        return None

    def control(self, lines):
        """Lines of the segment function itself (loops and branches around op calls)."""
        self._seg.units.append(("ctl", list(lines)))

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

    def _snapshot(self):
        seg = self._seg
        kinds = [(b, b.kind, b.last) for b in seg.bufs]
        return (dict(self._env), len(seg.inputs), len(seg.bufs), self._n, len(seg.sites),
                len(seg.units), len(seg.preconditions), len(seg.flags), kinds,
                list(self._blocks))

    def _restore(self, saved):
        seg = self._seg
        (self._env, n_in, n_bufs, self._n, n_sites, n_units, n_pre, n_flags, kinds,
         self._blocks) = saved
        del seg.inputs[n_in:], seg.bufs[n_bufs:], seg.sites[n_sites:], seg.units[n_units:]
        del seg.preconditions[n_pre:], seg.flags[n_flags:]
        for b, kind, last in kinds:
            b.kind, b.last = kind, last

    def _close(self):
        seg = self._seg
        if seg is None:
            return
        self._seg = None
        self._finish(seg)
        self.segments.append(seg)
        self.parts.append(("native", seg))
        self._env = {}

    def _fusable_updates(self, ops):
        """{gradient name: (sgd op index, Param, LearningRate)} for sgd updates whose Grad
        (dense or SelectedRows) only that sgd reads and where no op between its maker and the sgd
        touches Param or writes LearningRate: the maker may apply the update itself, in
        the same arithmetic, without the gradient in memory."""
        readers, writers = {}, {}
        for i, op in enumerate(ops):
            for n in op.input_arg_names:
                readers.setdefault(n, []).append(i)
            for n in op.output_arg_names:
                writers.setdefault(n, []).append(i)
            for n in sub_block_vars(self.program, op):
                readers.setdefault(n, []).append(i)
        out = {}
        for i, op in enumerate(ops):
            if op.type != "sgd" or op.input("MasterParam"):
                continue
            (g,), (p,), (lr,) = op.input("Grad"), op.input("Param"), op.input("LearningRate")
            v = self.block.find_var_recursive(g)
            makers = writers.get(g, [])
            if v is None or v.persistable or g in self.keep or \
                    v.type not in (VarType.LOD_TENSOR, VarType.SELECTED_ROWS) \
                    or readers.get(g) != [i] or len(makers) != 1 or op.output("ParamOut") != [p]:
                continue
            k = makers[0]
            between = range(k + 1, i)
            touch_p = readers.get(p, []) + writers.get(p, [])
            if any(j in between for j in touch_p + writers.get(lr, [])):
                continue
            out[g] = (i, p, lr)
        return out

    def fused_update(self, grad_name, k_op):
        """(Param Buf updated in place, LearningRate Buf) when the op emitting `grad_name`
        may apply its sgd update itself (the sgd is then skipped); else None."""
        hit = self._updates.get(grad_name)
        if hit is None or len(self._blocks) > 1:     # not from inside a loop or branch
            return None
        i_sgd, p, lr = hit
        param = self.read(p, None)
        rate = self.read(lr, None)
        if param.kind not in ("input", "inout") or not param.persistable:
            return None
        self.write(p, param.dims, param.ctype, None, k_op)
        self._pending_fuse = i_sgd
        return param, rate

    # -- buffers --------------------------------------------------------------------------
    def _var(self, name, op):
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
            v = self._var(name, op)
            if v.type not in (VarType.LOD_TENSOR, VarType.SELECTED_ROWS):
                raise NotCompilable(f"input '{name}' is a {VarType.Type.Name(v.type)}")
            ctype = CTYPES.get(v.dtype)
            if ctype is None:
                raise NotCompilable(f"input '{name}' has a dtype generated code lacks")
            j = len(self._seg.inputs)
            if len(v.shape) > MAX_DIMS:
                raise NotCompilable(f"input '{name}' has more than {MAX_DIMS} dims")
            if not declared_fits(v.shape, ctype):     # no value can be of that shape
                raise NotCompilable(f"input '{name}' is declared {list(v.shape)}: larger "
                                    "than this machine can hold")
            dims = [d if d >= 0 else f"in{j}_d{a}" for a, d in enumerate(v.shape)]
            buf = Buf(f"in{j}", name, ctype, dims, "input")
            buf.persistable = v.persistable
            buf.first = k
            if v.type == VarType.SELECTED_ROWS:     # value [rows, ...], ids, height
                buf.dims[0] = f"in{j}_d0"
                buf.rows = Buf(f"in{j}_rows", name, "int64_t", [buf.dims[0]], "input")
                buf.rows.first = k
                buf.height = f"in{j}_h"
            elif v.lod_level:
                if v.lod_level > 1:
                    raise NotCompilable(f"input '{name}' has {v.lod_level} LoD levels")
                buf.lod, buf.lod_len, buf.lod_src = f"in{j}_lod", f"in{j}_nlod", name
            self._seg.inputs.append(buf)
            self._seg.bufs.append(buf)
            self._env[name] = buf
        buf.last = k
        if buf.rows is not None:
            buf.rows.last = k
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

    def temp(self, name, dims, ctype, k):
        """A new arena buffer for a value of `name` (a loop's carried value)."""
        buf = Buf(f"t{self._n}", name, ctype, dims, "temp")
        self._n += 1
        buf.first = buf.last = k
        self._seg.bufs.append(buf)
        return buf

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
        v = self._var(name, op)
        want = VarType.SELECTED_ROWS if rows else VarType.LOD_TENSOR
        if v.type != want:
            raise NotCompilable(f"output '{name}' is a {VarType.Type.Name(v.type)}")
        dims = _one_element_as_declared(dims, v.shape)
        old = self._env.get(name)
        if old is not None and old.kind in ("input", "inout") and old.persistable:
            if len(dims) != old.ndim:
                raise NotCompilable(f"'{name}' changes rank in place")
            old.kind = "inout"
            old.last = k
            return old
        if v.persistable and self.target == "cuda" and old is None \
                and all(d >= 0 for d in v.shape) and not rows:
            # a parameter made on the device (startup): its memory is the plan's, passed in
            buf = self.read(name, op)
            buf.kind, buf.last = "inout", k
            self.created.add(name)
            return buf
        if v.persistable:
            raise NotCompilable(f"writes persistable '{name}' that it does not read")
        buf = Buf(f"t{self._n}", name, ctype, dims, "temp")
        self._n += 1
        buf.first = buf.last = k
        self._seg.bufs.append(buf)
        if rows:
            buf.rows = Buf(f"t{self._n}", name, "int64_t", dims[:1], "temp")
            self._n += 1
            buf.rows.first = buf.rows.last = k
            self._seg.bufs.append(buf.rows)
        self._env[name] = buf
        return buf

    def scratch(self, dims, ctype, k):
        buf = Buf(f"t{self._n}", f"(scratch of op {k})", ctype, dims, "scratch")
        self._n += 1
        buf.first = buf.last = k
        self._seg.bufs.append(buf)
        return buf

    # -- finishing a segment -----------------------------------------------------------------
    def _later_reads(self, ops):
        """reads_after[i]: names read by ops after op i (sub-blocks included)."""
        after, acc = [None] * len(ops), set()
        for i in range(len(ops) - 1, -1, -1):
            after[i] = set(acc)
            op = ops[i]
            acc.update(op.input_arg_names)
            acc.update(sub_block_vars(self.program, op))
        return after

    def _finish(self, seg):
        n_ops = len(seg.sites)
        later = self._reads_after[seg.last]
        for name, buf in self._env.items():
            if buf.kind == "inout":
                seg.outputs.append(buf)
            elif buf.kind == "temp":
                v = self.block.find_var_recursive(name)
                outside = v is not None and v.name not in self.block.vars
                if name in later or name in self.keep or outside:
                    buf.kind = "output"
                    buf.last = n_ops
                    if buf.rows is not None:
                        buf.rows.kind, buf.rows.last = "output", n_ops
                    seg.outputs.append(buf)
        arena = [b for b in seg.bufs if b.kind in ("temp", "output", "scratch")]
        sizes = {b.name: b.nbytes() for b in arena}
        life = {b.name: (b.first, b.last) for b in arena}
        slots, seg.inplace, seg.n_slots = colour_by_lifetime(sizes, life)
        for b in arena:
            b.slot = slots[b.name]
        seg.lines = self._function(seg)

    def _op_functions(self, seg):
        """One function per op: its buffers as restrict parameters (distinct buffers never
        share memory: arena slots of values alive at once differ, inputs are outside the
        arena), so the compiler vectorizes without alias checks (GCC honours restrict on
        parameters)."""
        L = []
        for unit in seg.units:
            if unit[0] != "op":
                continue
            _, k, lines, touched, _ = unit
            block_idx, i, op = seg.sites[k]
            params = [f"{b.ctype}* __restrict__ {b.name}" for b in touched]
            params += [f"const int64_t* {n}" if n.endswith("_lod") else f"const int64_t {n}"
                       for n in _symbols(lines, touched)]
            L.append(f"// block {block_idx} #{i} {op.type}")
            L.append(f"static __attribute__((noinline)) int {seg.name}_op{k}("
                     f"{', '.join(params + ['char* err'])}) {{")
            L += [f"  {line}" for line in lines]
            L.append("  return 0;")
            L.append("}")
        return L

    def _function(self, seg):
        L = self._op_functions(seg)
        L.append(f'extern "C" int {seg.name}(int64_t* args, char* arena, int64_t cap, char* err) {{')
        for j, b in enumerate(seg.inputs):
            base = 1 + j * S
            L.append(f"  {b.ctype}* const {b.name}_ = ({b.ctype}*)args[{base}];")
            L.append(f"  if (args[{base + 1}] != {b.ndim}) return fl::mismatch(err, "
                     f'{c_string(f"{b.var}: rank is not {b.ndim}")});')
            for a, d in enumerate(b.dims):
                if is_lit(d):
                    L.append(f"  if (args[{base + 2 + a}] != {d}) return fl::mismatch(err, "
                             f'{c_string(f"{b.var}: dim {a} is not {d}")});')
                else:
                    L.append(f"  const int64_t {d} = args[{base + 2 + a}];")
            if b.lod is not None:
                L.append(f"  const int64_t* {b.lod} = (const int64_t*)args[{base + 10}];")
                L.append(f"  const int64_t {b.lod_len} = args[{base + 11}];")
            if b.rows is not None:
                L.append(f"  int64_t* const {b.rows.name}_ = (int64_t*)args[{base + 10}];")
                L.append(f"  const int64_t {b.height} = args[{base + 11}];")
        for cond, msg in seg.preconditions:
            L.append(f'  if ({cond}) return fl::mismatch(err, {c_string(msg)});')
        L += arena_lines(seg)      # slot sizes from the dims, then offsets: overflow-checked
        for b in seg.bufs:
            if b.slot is not None:
                L.append(f"  {b.ctype}* const {b.name}_ = ({b.ctype}*)(arena + off{b.slot});")
        L += [f"  bool {f} = false;" for f in seg.flags]
        depth = 1
        for unit in seg.units:
            if unit[0] == "ctl":
                for line in unit[1]:
                    depth -= line.startswith("}")
                    L.append("  " * depth + line)
                    depth += line.endswith("{")
                continue
            _, k, lines, touched, guards = unit
            block_idx, i, op = seg.sites[k]
            pad = "  " * depth
            L += [pad + g for g in guards]
            args = ", ".join([f"{b.name}_" for b in touched] + _symbols(lines, touched))
            L.append(f"{pad}if (int rc = {seg.name}_op{k}({args}{', ' if args else ''}err)) "
                     f"return rc;  // block {block_idx} #{i} {op.type}")
        base = seg.out_base
        for j, b in enumerate(seg.outputs):
            o = base + j * S
            L.append(f"  args[{o}] = {'off' + str(b.slot) if b.slot is not None else -1};")
            L.append(f"  args[{o + 1}] = {b.written + ' ? ' if b.written else ''}{b.ndim}"
                     f"{' : -1' if b.written else ''};")
            for a, d in enumerate(b.dims):
                L.append(f"  args[{o + 2 + a}] = {d};")
            if b.rows is not None:
                L.append(f"  args[{o + 10}] = off{b.rows.slot};")
                L.append(f"  args[{o + 11}] = {b.height};")
        L.append("  return 0;")
        L.append("}")
        return L

    def _render(self):
        runtime = "cuda_rt.h" if self.target == "cuda" else "fluidity.h"
        head = ["// generated by fluidity.codegen from block "
                f"{self.block_idx} of a program; do not edit", f'#include "{runtime}"',
                "#include <algorithm>", ""]
        out = list(head)
        for seg in self.segments:
            out += seg.lines + [""]
        return checked_source("\n".join(out))

    # -- reporting --------------------------------------------------------------------------
    def explain(self):
        """[(block op index, op type, where: 'segment N' or 'python', why)] in block order."""
        rows, where = [], {}
        for part in self.parts:
            if part[0] == "native":
                where.update((i, f"segment {part[1].index}") for i, _ in part[1].ops)
        for part in self.parts:
            if part[0] == "py":
                _, i, reason = part
                rows.append((i, self.block.ops[i].type, "python", reason))
            elif part[0] == "fused":
                _, i, into = part
                rows.append((i, self.block.ops[i].type, where.get(into, "?"),
                             f"fused into #{into} {self.block.ops[into].type}"))
            else:
                seg = part[1]
                rows += [(i, op.type, f"segment {seg.index}", seg.notes.get(i, ""))
                         for i, op in seg.ops]
        return sorted(rows)


class _InBlock:
    def __init__(self, low, block):
        self.low, self.block = low, block

    def __enter__(self):
        self.low._blocks.append(self.block)

    def __exit__(self, *exc):
        self.low._blocks.pop()


_SYMBOL = re.compile(r"\bin\d+_(?:d\d+|lod|nlod|h)\b")


def _symbols(lines, touched):
    """The run-time dims and LoD names an op's code uses (they become its parameters)."""
    text = "\n".join(lines) + " " + " ".join(d for b in touched for d in b.dims)
    text += " " + " ".join(f"{b.lod} {b.lod_len}" for b in touched if b.lod)
    text += " " + " ".join(str(b.height) for b in touched if b.height)
    return sorted(set(_SYMBOL.findall(text)))
