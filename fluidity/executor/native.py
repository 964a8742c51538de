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
from ..codegen import abi
from ..codegen.cir import ArrayBuf, HeldBuf
from ..codegen.lower import Lowering
from ..codegen.segment import FusedOp, PythonOp
from ..core.dtypes import numpy_of_ctype
from ..core.limits import max_tensor_bytes
from ..core.tensor import LoDTensor, LoDTensorArray, SelectedRows
from ..errors import ExecutionError
from .plan import Plan

ERR_BYTES = 512
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


class InputSpec:
    """What a segment step knows of input j: its frame slot, variable, dtype, rank, and
    whether the segment reads its LoD or its SelectedRows ids."""
    __slots__ = ("j", "slot", "name", "dtype", "ndim", "lod", "sparse")

    def __init__(self, plan, j, buf):
        self.j, self.slot, self.name = j, plan.slot_of(buf.var), buf.var
        self.dtype, self.ndim = numpy_of_ctype(buf.ctype), buf.ndim
        self.lod, self.sparse = len(buf.levels), buf.rows is not None   # LoD levels read


class OutputSpec:
    """What a segment step knows of output j: its frame slot, variable, dtype, rank, the
    frame slot of the input whose LoD it carries, whether a fetch takes it (then copied out
    of the arena), whether it was updated in its own memory, whether it is SelectedRows,
    whether it is a tensor array (handed back as a block the step copies and frees: `ndim`
    is then its entries' rank), and which record field holds the address of the block it
    is handed back in, if any (`block`: codegen/render.py's exports_block)."""
    __slots__ = ("j", "slot", "name", "dtype", "ndim", "lod_slot", "fetched", "in_place",
                 "sparse", "array", "lod_block", "held", "block")

    def __init__(self, plan, j, buf, in_slots, fetched):
        self.j, self.slot, self.name = j, plan.slot_of(buf.var), buf.var
        self.array = isinstance(buf, ArrayBuf)
        self.held = isinstance(buf, HeldBuf)     # a value handed back whole as a block
        if self.array:
            self.dtype, self.ndim = numpy_of_ctype(buf.elem), 1 + len(buf.row_dims)
        elif self.held:
            self.dtype, self.ndim = numpy_of_ctype(buf.elem), buf.held_ndim
        else:
            self.dtype, self.ndim = numpy_of_ctype(buf.ctype), buf.ndim
        self.lod_slot = in_slots.get(buf.lod_src)
        # a LoD the segment computed: handed back as a block (abi.lod_of_block) to free
        self.lod_block = not (self.array or self.held) and buf.rows is None and \
            bool(buf.computed_lod)
        self.fetched = buf.var in fetched
        self.in_place = buf.slot is None and not (self.array or self.held)
        self.sparse = buf.rows is not None
        self.block = abi.DATA if self.array or self.held else \
            abi.AUX if self.lod_block else None


class CallState:
    """One thread's means of calling a segment: its argument vector (codegen.abi.Args), error
    buffer and arena (`arena_ptr`, `cap`; a target's subclass says how it grows)."""

    def __init__(self, n_in, n_out):
        self.args = abi.Args(n_in, n_out)
        self.err = ctypes.create_string_buffer(ERR_BYTES)
        self.arena_ptr, self.cap = None, 0

    def message(self):
        return self.err.value.decode(errors="replace")


ARENA_ALIGN = 64        # bytes; render.CPP's align_bytes


class HostState(CallState):
    """A host thread's state: the arena is numpy bytes (outputs are views of it), and the
    arrays last passed per input (a parameter's record is written once)."""

    def __init__(self, n_in, n_out):
        super().__init__(n_in, n_out)
        self.seen, self.shapes = [None] * n_in, [None] * n_in
        self.grow(1 << 16)

    def grow(self, need):
        # the arena's slots are 64-byte aligned from its start (render.py), so the start is
        # too: numpy's own allocation is only 16-byte aligned, and a vector load that
        # straddles two cache lines costs a kernel streaming through a plane up to 2x
        n = max(int(need), 64)
        raw = np.empty(n + ARENA_ALIGN, np.uint8)
        skip = -raw.ctypes.data % ARENA_ALIGN
        self.arena = raw[skip:skip + n]
        self.arena_ptr = self.arena.ctypes.data
        self.cap = self.arena.shape[0]


class SegmentStep:
    """A compiled segment as one step of a plan, whatever the target: the library's
    function, the specs of its inputs and outputs, a CallState per thread, the call
    (growing the arena as the segment asks) and the reading of its return code. A target
    subclass packs inputs into the argument records (`pack`) and makes values of the output
    records (`unpack`), both through codegen.abi."""

    def __init__(self, plan, seg, fetched):
        fn = getattr(plan.library, seg.name)
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]
        fn.restype = ctypes.c_int
        self.fn, self.seg, self.block_idx = fn, seg, plan.block_idx
        self.inputs = [InputSpec(plan, j, b) for j, b in enumerate(seg.inputs)]
        in_slots = {s.name: s.slot for s in self.inputs}
        self.outputs = [OutputSpec(plan, j, b, in_slots, fetched)
                        for j, b in enumerate(seg.outputs)]
        self.release = None
        self.blocks = [o for o in self.outputs if o.block is not None]
        if self.blocks:
            self.release = plan.library.fl_array_release
            self.release.argtypes, self.release.restype = [ctypes.c_void_p], None
        self._tls = threading.local()

    def new_state(self):
        raise NotImplementedError

    def state(self):
        st = self._tls.__dict__.get("st")
        if st is None:
            st = self._tls.st = self.new_state()
        return st

    def call(self, st):
        """Run the segment over the packed args; its return code (never 1)."""
        rc = self.fn(st.args.address, st.arena_ptr, st.cap, st.err)
        while rc == 1:
            self.check_arena(st.args.need)
            st.grow(st.args.need)
            rc = self.fn(st.args.address, st.arena_ptr, st.cap, st.err)
        return rc

    def check_arena(self, need):
        """Called before the arena grows to `need` bytes: a target may refuse (raise)."""

    def op_failed(self, rc, st):
        """The ExecutionError of return code rc = 2 + the failing op's position."""
        sites = self.seg.sites
        b, i, op = sites[rc - 2] if 2 <= rc < 2 + len(sites) else \
            (self.block_idx,) + self.seg.ops[0]
        return op_error(op, i, st.message(), b)

    def input_error(self, name, what):
        return _input_error(self.seg.ops, name, what, self.block_idx)


class Interpret(Exception):
    """An input the segment was not built for: run its ops interpreted (the message)."""


class HostSegmentStep(SegmentStep):
    """A segment of the C++ target: inputs are numpy arrays passed by address, outputs
    numpy views of the thread's arena (copied when fetched); any input of another shape
    than the desc declares runs the segment's ops interpreted."""

    def __init__(self, plan, seg, fetched):
        super().__init__(plan, seg, fetched)
        self.interpreted = plan._interpreted_segment(seg)

    def new_state(self):
        return HostState(len(self.inputs), len(self.outputs))

    def __call__(self, frame, env):
        st = self.state()
        try:
            alive = self.pack(frame, st)     # arrays the call reads
        except Interpret as why:
            return self.interpreted(frame, env, str(why))
        try:
            rc = self.call(st)
        except Interpret as why:          # the interpreter's kernels say what is too big
            return self.interpreted(frame, env, str(why))
        del alive
        if rc == -1:                   # inputs of other shapes than the program says
            return self.interpreted(frame, env, st.message())
        if rc:
            raise self.op_failed(rc, st)
        self.unpack(frame, st)

    def check_arena(self, need):
        if need > max_tensor_bytes():
            raise Interpret(f"an arena of {int(need)} bytes")

    def pack(self, frame, st):
        """Write each input's record (a parameter's only when its array changed); the
        arrays that must stay alive for the call."""
        records, seen, keep = st.args.inputs, st.seen, []
        for spec in self.inputs:
            j = spec.j
            t = frame[spec.slot].value
            a = t.value if spec.sparse and type(t) is SelectedRows else \
                getattr(t, "_array", None)
            if a is None:
                raise self.input_error(spec.name, "has no value (feed it, or run the startup "
                                                  "program)")
            if a.ndim > abi.MAX_DIMS:
                raise Interpret(f"{spec.name} has {a.ndim} dims")
            if a is not seen[j] or a.shape != st.shapes[j]:
                if a.dtype != spec.dtype:
                    raise self.input_error(spec.name, f"is {a.dtype}, compiled for {spec.dtype}")
                if not a.flags.c_contiguous:
                    a = np.ascontiguousarray(a)
                seen[j], st.shapes[j] = a, a.shape          # parameters hit this cache
                abi.put_tensor(records[j], a.__array_interface__["data"][0], a.shape)
            if spec.sparse:
                keep.append(self._pack_rows(records[j], spec, t, a))
            elif spec.lod:
                keep.append(self._pack_lod(records[j], spec, t, a))
        return keep

    def _pack_rows(self, record, spec, t, a):
        rows = np.ascontiguousarray(t.rows, np.int64)
        if rows.shape != (a.shape[0],):
            raise self.input_error(spec.name, f"has {rows.shape[0]} row ids for "
                                              f"{a.shape[0]} rows")
        abi.put_aux(record, rows.__array_interface__["data"][0], t.height)
        return rows

    def _pack_lod(self, record, spec, t, a):
        if not t._lod:
            raise self.input_error(spec.name, "has no LoD")
        packed = abi.packed_lod(t._lod, spec.lod, a.shape[0] if a.ndim else None)
        if isinstance(packed, str):        # generated code indexes rows with it
            raise self.input_error(spec.name, packed)
        lod, count = packed
        abi.put_aux(record, lod.__array_interface__["data"][0], count)
        return lod

    def unpack(self, frame, st):
        """Bind each output the segment wrote to a view of the arena (a copy if fetched) or
        a copy of the block it was handed back in. Every block of the call is freed once
        its outputs are bound, or should binding fail (out of memory copying one): the
        call handed them all over when it returned 0."""
        if self.release is None:
            return self.bind(frame, st)
        records = st.args.outputs            # a LoD's block only where its value was written
        made = [int(records[o.j][o.block]) for o in self.blocks
                if o.block == abi.DATA or abi.output_shape(records[o.j], o.ndim) is not None]
        try:
            self.bind(frame, st)
        finally:
            for addr in made:
                self.release(addr)

    def bind(self, frame, st):
        """unpack's binding: blocks are copied here, and freed by unpack."""
        arena, records = st.arena, st.args.outputs
        for spec in self.outputs:
            if spec.in_place:
                continue
            record = records[spec.j]
            if spec.array:
                frame[spec.slot].value = _array_of_block(spec, record)
                continue
            if spec.held:
                frame[spec.slot].value = LoDTensor(*abi.held_of_block(
                    abi.output_offset(record), spec.dtype))
                continue
            shape = abi.output_shape(record, spec.ndim)
            if shape is None:          # a branch that sets it did not run: keep the scope's
                continue
            off, n = abi.output_offset(record), spec.dtype.itemsize
            for d in shape:
                n *= d
            arr = arena[off:off + n].view(spec.dtype).reshape(shape)
            if spec.fetched:
                arr = arr.copy()
            if spec.sparse:
                r, height = abi.output_aux(record)
                rows = arena[r:r + 8 * shape[0]].view(np.int64)
                frame[spec.slot].value = SelectedRows(rows.copy() if spec.fetched else rows,
                                                      height, arr)
                continue
            if spec.lod_block:
                lod = abi.lod_of_block(record)
            else:
                lod = frame[spec.lod_slot].value._lod if spec.lod_slot is not None else None
            frame[spec.slot].value = LoDTensor(arr, lod)


def _array_of_block(spec, record):
    """The LoDTensorArray in a block runtime/arrays.h's array_export made: int64 n, int64
    rows[n] (-1: never written: an empty entry, as the interpreter's write leaves a gap),
    then the entries' bytes."""
    addr = abi.output_offset(record)
    shape = abi.output_shape(record, spec.ndim)
    n, row_dims = shape[0], tuple(shape[1:])
    rows = np.ctypeslib.as_array((ctypes.c_int64 * (1 + n)).from_address(addr))[1:]
    row_bytes = spec.dtype.itemsize * int(np.prod(row_dims, dtype=np.int64))
    out, at = LoDTensorArray(), addr + 8 * (1 + n)
    for r in rows.tolist():
        if r < 0:
            list.append(out, LoDTensor())
            continue
        nbytes = r * row_bytes
        data = np.empty((r,) + row_dims, spec.dtype)
        if nbytes:
            ctypes.memmove(data.ctypes.data, at, nbytes)
        at += nbytes
        list.append(out, LoDTensor(data))
    return out


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
            if isinstance(part, FusedOp):  # an update applied by the op that made its grad
                self._fused_into.setdefault(part.into, []).append(part.i)
            elif isinstance(part, PythonOp):
                steps.append(self.python_step(part.i))
                op = self.ops[part.i]
                ops.append(op)
                used.update(op.input_arg_names + op.output_arg_names)
            else:
                steps.append(self.segment_step(part, set(fetched)))
                ops.append(SegmentOp(part))
                used.update(b.var for b in part.inputs + part.outputs)
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

    def segment_step(self, seg, fetched):
        """The step that runs compiled segment `seg` (`fetched`: names fetches take)."""
        return HostSegmentStep(self, seg, fetched)

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
