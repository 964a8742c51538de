"""The native plan: a block's compiled segments run as native calls, its other ops as Python
steps between them (`ExecutionStrategy("native")`, or `fluid.CompiledProgram(program)
.with_native_code()`).

The block is lowered by `fluidity.codegen` (lower.py says how); its segments become one C++
library, built once (cached by the source's hash) and loaded with ctypes, whose calls release
the GIL. A segment's step hands the function its inputs' data pointers, dims and LoD, an
arena (per thread, grown when the function asks for more) and reads back where its outputs
are; outputs are numpy views of the arena, valid until the segment runs again, so values a
fetch takes are copied. Persistables (parameters, optimizer state) are updated in their own
memory, as the interpreter does. An op that finds bad input stops the run with an
ExecutionError naming it, as in the interpreter.
"""
import ctypes
import logging
import threading

import numpy as np

from ..codegen import build
from ..codegen.lower import S, Lowering
from ..core.dtypes import numpy_of_ctype
from ..core.limits import max_tensor_bytes
from ..core.lod import offsets_problem
from ..core.tensor import LoDTensor, SelectedRows
from ..errors import ExecutionError
from .plan import Plan

_ERR_BYTES = 512
logger = logging.getLogger("fluidity")


class SegmentOp:
    """What a compiled segment looks like to the plan's bookkeeping (profiles, errors)."""
    input_names = ()

    def __init__(self, seg):
        self.seg = seg
        self.type = f"compiled_segment[{len(seg.ops)} ops: #{seg.first}..#{seg.last}]"
        self.input_arg_names = [b.var for b in seg.inputs]
        self.output_arg_names = [b.var for b in seg.outputs]

    def has_attr(self, name):
        return False


class _ThreadState:
    """Per thread: the args vector, the error buffer and the arena of one segment, and the
    input arrays last passed (a parameter's pointer and dims are written once)."""
    __slots__ = ("args", "args_ptr", "err", "arena", "arena_ptr", "cap", "seen", "shapes")

    def __init__(self, n_args, n_in):
        self.args = np.zeros(n_args, np.int64)
        self.args_ptr = self.args.ctypes.data
        self.err = ctypes.create_string_buffer(_ERR_BYTES)
        self.seen, self.shapes = [None] * n_in, [None] * n_in
        self.grow(1 << 16)

    def grow(self, need):
        self.arena = np.empty(max(int(need), 64), np.uint8)
        self.arena_ptr = self.arena.ctypes.data
        self.cap = self.arena.shape[0]


class NativePlan(Plan):
    """A Plan whose runs of compilable ops are native calls."""

    def __init__(self, program, block_idx=0):
        super().__init__(program, block_idx)
        block = self.block
        fetched = [op.input("X")[0] for op in block.ops if op.type == "fetch"]
        self.lowering = low = self.lower(program, block_idx, fetched)
        self.library = None
        if low.segments:
            self.library = self.load(low)
        steps, ops, used = [], [], set()
        self._interpreted = self.steps     # every op's Python step: a segment's fallback
        self._all_persist = list(self.persist)
        self._fused_into = {}
        for part in low.parts:
            if part[0] == "fused":         # an update applied by the op that made its grad
                self._fused_into.setdefault(part[2], []).append(part[1])
                continue
            if part[0] == "py":
                steps.append(self.python_step(part[1]))
                op = self.ops[part[1]]
                ops.append(op)
                used.update(op.input_arg_names + op.output_arg_names)
            else:
                steps.append(self._segment_step(part[1], set(fetched)))
                ops.append(SegmentOp(part[1]))
                used.update(b.var for b in part[1].inputs + part[1].outputs)
        self.steps, self.ops = steps, ops
        self._block_index = [op.seg.first if isinstance(op, SegmentOp) else op.idx
                             for op in ops]
        # a value only a segment makes and uses never needs a scope variable: bind the others
        self.local = [(i, n) for i, n in self.local if n in used]
        self.persist = [(i, n) for i, n in self.persist if n in used]
        self.outer = [(i, n) for i, n in self.outer if n in used]

    # -- what a target plan (executor/cuda.py) changes ---------------------------------------
    @staticmethod
    def lower(program, block_idx, fetched):
        """The block's Lowering (the C++ target here)."""
        return Lowering(program, block_idx, keep=fetched)

    @staticmethod
    def load(low):
        """The loaded library of the lowering's source."""
        return build.load(build.compile_cached(low.source))

    def python_step(self, i):
        """The step that runs op i of the block outside the compiled code."""
        return self.steps[i]

    def explain(self):
        return self.lowering.explain()

    def _segment_step(self, seg, fetched):
        fn = getattr(self.library, seg.name)
        interpreted = self._interpreted_segment(seg)
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]
        fn.restype = ctypes.c_int
        n_args = seg.out_base + len(seg.outputs) * S
        ins = [(self.slot_of(b.var), b.var, numpy_of_ctype(b.ctype), b.ndim, b.lod is not None,
                b.rows is not None) for b in seg.inputs]
        in_slot = {b.var: self.slot_of(b.var) for b in seg.inputs}
        outs = [(self.slot_of(b.var), numpy_of_ctype(b.ctype), b.ndim,
                 in_slot.get(b.lod_src), b.var in fetched, b.slot is None, b.rows is not None)
                for b in seg.outputs]
        tls = threading.local()
        block_idx, seg_ops, sites = self.block_idx, seg.ops, seg.sites
        n_in, out_base = len(ins), seg.out_base

        def fail(name, what):
            return _input_error(seg_ops, name, what, block_idx)

        def step(frame, env):
            st = tls.__dict__.get("st")
            if st is None:
                st = tls.st = _ThreadState(n_args, n_in)
            P, seen = st.args, st.seen
            keep = None                    # arrays alive until the call returns
            for j, (slot, name, dt, ndim, has_lod, sparse) in enumerate(ins):
                t = frame[slot].value
                a = t.value if sparse and type(t) is SelectedRows else getattr(t, "_array", None)
                base = 1 + j * S
                if a is None:
                    raise fail(name, "has no value (feed it, or run the startup program)")
                if a.ndim > 8:
                    return interpreted(frame, env, f"{name} has {a.ndim} dims")
                if a is not seen[j] or a.shape != st.shapes[j]:
                    if a.dtype != dt:
                        raise fail(name, f"is {a.dtype}, compiled for {dt}")
                    if not a.flags.c_contiguous:
                        a = np.ascontiguousarray(a)
                    seen[j], st.shapes[j] = a, a.shape    # parameters hit this cache
                    P[base] = a.__array_interface__["data"][0]
                    P[base + 1] = a.ndim
                    P[base + 2:base + 2 + a.ndim] = a.shape
                if sparse:
                    rows = np.ascontiguousarray(t.rows, np.int64)
                    if rows.shape != (a.shape[0],):
                        raise fail(name, f"has {rows.shape[0]} row ids for {a.shape[0]} rows")
                    keep = (keep or []) + [rows]
                    P[base + 10] = rows.__array_interface__["data"][0]
                    P[base + 11] = t.height
                elif has_lod:
                    if not t._lod:
                        raise fail(name, "has no LoD")
                    lod = np.asarray(t._lod[-1], np.int64)
                    bad = offsets_problem(lod, a.shape[0] if a.ndim else None)
                    if bad is not None:        # generated code indexes rows with it
                        raise fail(name, f"has a LoD that is not offsets of its rows: {bad}")
                    keep = (keep or []) + [lod]
                    P[base + 10] = lod.__array_interface__["data"][0]
                    P[base + 11] = lod.shape[0]
            rc = fn(st.args_ptr, st.arena_ptr, st.cap, st.err)
            while rc == 1:
                if P[0] > max_tensor_bytes():      # the interpreter's kernels say what is
                    return interpreted(frame, env, f"an arena of {int(P[0])} bytes")  # too big
                st.grow(P[0])
                rc = fn(st.args_ptr, st.arena_ptr, st.cap, st.err)
            if rc == -1:                   # inputs of other shapes than the program says
                return interpreted(frame, env, st.err.value.decode(errors="replace"))
            if rc:
                b, i, op = sites[rc - 2] if 2 <= rc < 2 + len(sites) else \
                    (block_idx,) + seg_ops[0]
                raise op_error(op, i, st.err.value.decode(errors="replace"), b)
            arena = st.arena
            for j, (slot, dt, ndim, lod_slot, copy, in_place, sparse) in enumerate(outs):
                if in_place:
                    continue
                o = out_base + j * S
                if P[o + 1] < 0:           # a branch that sets it did not run: keep the scope's
                    continue
                shape = tuple(P[o + 2:o + 2 + ndim].tolist())
                off = int(P[o])
                n = dt.itemsize
                for d in shape:
                    n *= d
                arr = arena[off:off + n].view(dt).reshape(shape)
                if sparse:
                    r = int(P[o + 10])
                    rows = arena[r:r + 8 * shape[0]].view(np.int64)
                    frame[slot].value = SelectedRows(rows.copy() if copy else rows,
                                                     int(P[o + 11]), arr.copy() if copy else arr)
                    continue
                if copy:
                    arr = arr.copy()
                lod = frame[lod_slot].value._lod if lod_slot is not None else None
                frame[slot].value = LoDTensor(arr, lod)
        return step


    def _interpreted_segment(self, seg):
        """The segment's ops as Python steps (sgd updates fused into them right after their
        gradient's op), for inputs the compiled code was not made for; says so once. An op
        that fails is named as the interpreter names it."""

        order = []
        for i, _ in seg.ops:
            order.append(i)
            order += self._fused_into.get(i, [])
        idx = order
        names = sorted({n for i in idx for n in self.ops_by_index(i)})
        slots = [(self.slot_of(n), n) for n in names]
        persist = {n for _, n in self._all_persist}
        warned = []

        def run(frame, env, why):
            if not warned:
                warned.append(why)
                logger.warning("compiled segment of ops #%d..#%d in block %d was built for "
                               "other input shapes (%s): its ops run interpreted",
                               seg.first, seg.last, self.block_idx, why)
            for i, n in slots:           # bind what only the segment used, as frame() would
                if frame[i] is None:
                    v = env.scope.find_var(n) if n in persist else None
                    frame[i] = v if v is not None else env.scope.var(n)
            for i in order:
                try:
                    self._interpreted[i](frame, env)
                except Exception as exc:
                    if isinstance(exc, ExecutionError) and exc.op_index is not None:
                        raise
                    raise self.describe_failure(self.block.ops[i], i, frame, exc) from exc
        return run

    def block_index_of(self, i):
        return self._block_index[i]

    def ops_by_index(self, i):
        """The names op i of the block uses that have frame slots."""
        op = self.block.ops[i]
        return [n for n in op.input_arg_names + op.output_arg_names if n in self._slot]




def op_error(op, i, message, block_idx):
    where = op.attr("op_callstack") if op.has_attr("op_callstack") else []
    text = f"op #{i} '{op.type}' in block {block_idx} (compiled) failed: {message}"
    if where:
        text += f"\n  the op was created at {where[-1]}"
    return ExecutionError(text, op_type=op.type, op_index=i)


def _input_error(seg_ops, name, what, block_idx):
    for i, op in seg_ops:
        if name in op.input_arg_names:
            return op_error(op, i, f"input '{name}' {what}", block_idx)
    i, op = seg_ops[0]
    return op_error(op, i, f"input '{name}' {what}", block_idx)
