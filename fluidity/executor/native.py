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
import threading

import numpy as np

from ..codegen import build
from ..codegen.lower import S, Lowering
from ..core.tensor import LoDTensor
from ..errors import ExecutionError
from .plan import Plan

_ERR_BYTES = 512


class SegmentOp:
    """What a compiled segment looks like to the plan's bookkeeping (profiles, errors)."""

    def __init__(self, seg):
        self.seg = seg
        self.type = f"compiled_segment[{len(seg.ops)} ops]"
        self.input_arg_names = [b.var for b in seg.inputs]
        self.output_arg_names = [b.var for b in seg.outputs]


class _ThreadState:
    """Per thread: the args vector, the error buffer and the arena of one segment."""
    __slots__ = ("args", "args_ptr", "err", "arena", "arena_ptr")

    def __init__(self, n_args):
        self.args = np.zeros(n_args, np.int64)
        self.args_ptr = self.args.ctypes.data
        self.err = ctypes.create_string_buffer(_ERR_BYTES)
        self.grow(1 << 16)

    def grow(self, need):
        self.arena = np.empty(max(int(need), 64), np.uint8)
        self.arena_ptr = self.arena.ctypes.data


class NativePlan(Plan):
    """A Plan whose runs of compilable ops are native calls."""

    def __init__(self, program, block_idx=0):
        super().__init__(program, block_idx)
        block = self.block
        fetched = [op.input("X")[0] for op in block.ops if op.type == "fetch"]
        self.lowering = low = Lowering(program, block_idx, keep=fetched)
        self.library = None
        if low.segments:
            self.library = build.load(build.compile_cached(low.source))
        steps, ops = [], []
        for part in low.parts:
            if part[0] == "py":
                steps.append(self.steps[part[1]])
                ops.append(self.ops[part[1]])
            else:
                steps.append(self._segment_step(part[1], set(fetched)))
                ops.append(SegmentOp(part[1]))
        self.steps, self.ops = steps, ops

    def explain(self):
        return self.lowering.explain()

    def _segment_step(self, seg, fetched):
        fn = getattr(self.library, seg.name)
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]
        fn.restype = ctypes.c_int
        n_args = seg.out_base + len(seg.outputs) * S
        ins = [(self.slot_of(b.var), b.var, np.dtype(_NP[b.ctype]), b.ndim, b.lod is not None)
               for b in seg.inputs]
        in_slot = {b.var: self.slot_of(b.var) for b in seg.inputs}
        outs = [(self.slot_of(b.var), np.dtype(_NP[b.ctype]), b.ndim,
                 in_slot.get(b.lod_src), b.var in fetched, b.slot is None)
                for b in seg.outputs]
        tls = threading.local()
        block_idx, seg_ops = self.block_idx, seg.ops

        def step(frame, env):
            st = getattr(tls, "st", None)
            if st is None:
                st = tls.st = _ThreadState(n_args)
            P = st.args
            keep = []                      # LoD arrays alive until the call returns
            for j, (slot, name, dt, ndim, has_lod) in enumerate(ins):
                t = frame[slot].value
                a = getattr(t, "_array", None)
                if a is None:
                    raise _input_error(seg_ops, name, "has no value (feed it, or run the "
                                       "startup program)", block_idx)
                if a.dtype != dt:
                    raise _input_error(seg_ops, name, f"is {a.dtype}, compiled for {dt}",
                                       block_idx)
                if not a.flags.c_contiguous:
                    a = np.ascontiguousarray(a)
                    keep.append(a)
                base = 1 + j * S
                P[base] = a.ctypes.data
                P[base + 1] = a.ndim
                P[base + 2:base + 2 + a.ndim] = a.shape
                if has_lod:
                    if not t._lod:
                        raise _input_error(seg_ops, name, "has no LoD", block_idx)
                    lod = np.asarray(t._lod[-1], np.int64)
                    keep.append(lod)
                    P[base + 10] = lod.ctypes.data
                    P[base + 11] = lod.shape[0]
            while True:
                rc = fn(st.args_ptr, st.arena_ptr, st.arena.shape[0], st.err)
                if rc != 1:
                    break
                st.grow(P[0])
            if rc:
                i, op = seg_ops[rc - 2] if 2 <= rc < 2 + len(seg_ops) else seg_ops[0]
                raise _op_error(op, i, st.err.value.decode(errors="replace"), block_idx)
            arena = st.arena
            base = seg.out_base
            for j, (slot, dt, ndim, lod_slot, copy, in_place) in enumerate(outs):
                if in_place:
                    continue
                o = base + j * S
                off = int(P[o])
                shape = tuple(P[o + 2:o + 2 + ndim].tolist())
                n = dt.itemsize
                for d in shape:
                    n *= d
                arr = arena[off:off + n].view(dt).reshape(shape)
                if copy:
                    arr = arr.copy()
                lod = frame[lod_slot].value._lod if lod_slot is not None else None
                frame[slot].value = LoDTensor(arr, lod)
        return step


_NP = {"float": "float32", "double": "float64", "int64_t": "int64", "int32_t": "int32",
       "bool": "bool", "uint8_t": "uint8", "int8_t": "int8"}


def _op_error(op, i, message, block_idx):
    where = op.attr("op_callstack") if op.has_attr("op_callstack") else []
    text = f"op #{i} '{op.type}' in block {block_idx} (compiled) failed: {message}"
    if where:
        text += f"\n  the op was created at {where[-1]}"
    return ExecutionError(text, op_type=op.type, op_index=i)


def _input_error(seg_ops, name, what, block_idx):
    for i, op in seg_ops:
        if name in op.input_arg_names:
            return _op_error(op, i, f"input '{name}' {what}", block_idx)
    i, op = seg_ops[0]
    return _op_error(op, i, f"input '{name}' {what}", block_idx)
