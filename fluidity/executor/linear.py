"""The linear executor: a fixed op order and a static memory plan over it.

At prepare time the block's ops get a topological order of their dependency graph
(`analysis.dependencies`; the block's own order is one, and the lowest-index-first sort keeps
it), and every temporary its lifetime over that order (first write, last use). The dense
temporaries (`temporaries(...)`, LoD tensors with a known shape and dtype, written by
array/value kernels) are placed at offsets of one arena by `MemoryPlan`: tensors whose
lifetimes don't overlap share bytes, and an op declared `inplace = {"Out": "X"}` writes into
X's bytes when it is X's last reader. The plan is made for the batch size of the first run
(-1 dims of the descs bound to the fed batch), once per batch size, and shown by
`plan.memory.report()` or `strategy.memory_report()` (planned arena bytes against the naive
sum of all temporaries).

Running an op: kernels `prepare` returns as `registry.Allocating` write straight into their output's planned
bytes (`alloc(shape, dtype)`); other kernels' results are copied in. After each op, values of
temporaries past their last use are dropped, and an output that is not planned but views
planned bytes (a sparse gradient slicing its input, say) gets its own copy, so no live value
ever points at bytes a later tensor reuses. Outputs larger than their plan (a shape the descs
didn't predict) simply keep their own array.

Use it through the Executor: `fluid.Executor(place, strategy=ExecutionStrategy("linear"))`.
Results are bit-identical to the interpreter's; temporaries that are not fetched hold no value
after the run.
"""
import functools
import math
import threading

import numpy as np

from ..core.tensor import LoDTensor, LoDTensorArray, SelectedRows
from ..ir.analysis import dependencies, is_dense, temporaries, topological_order
from ..ir.memory_plan import MemoryPlan, var_nbytes
from ..ops import registry
from .plan import OpPrep, Plan


def _address(a):
    return a.__array_interface__["data"][0]


class _Arena:
    """One run's view of the arena: planned bytes per frame slot, copies in and out."""
    __slots__ = ("arena", "base", "slots")

    def __init__(self, arena, slots):
        self.arena, self.base, self.slots = arena, _address(arena), slots

    def alloc(self, slot, shape, dtype):
        dtype = np.dtype(dtype)
        n = math.prod(shape) * dtype.itemsize
        off, size = self.slots[slot]
        if n > size:
            return np.empty(shape, dtype)
        return self.arena[off:off + n].view(dtype).reshape(shape)

    def place(self, frame, slot):
        """Move a planned output into its bytes (a no-op when the kernel wrote it there)."""
        v = frame[slot].value
        if type(v) is not LoDTensor:
            return self.detach(frame, slot)
        a = v._array
        if not isinstance(a, np.ndarray) or a.dtype.hasobject:
            return
        off, size = self.slots[slot]
        if a.base is self.arena and a.flags.c_contiguous and _address(a) == self.base + off:
            return
        if a.nbytes > size:
            return self.detach(frame, slot)
        view = self.arena[off:off + a.nbytes].view(a.dtype).reshape(a.shape)
        np.copyto(view, a)          # overlap-safe (in place over a dying input)
        frame[slot].value = LoDTensor(view, v._lod)

    def detach(self, frame, slot):
        """Give an unplanned output that views the arena its own copy."""
        v = frame[slot].value
        arena = self.arena
        if type(v) is LoDTensor:
            a = v._array
            if a is not None and getattr(a, "base", None) is arena:
                frame[slot].value = LoDTensor(a.copy(), v._lod)
        elif type(v) is SelectedRows:
            if getattr(v.value, "base", None) is arena:
                frame[slot].value = SelectedRows(v.rows, v.height, v.value.copy())
        elif isinstance(v, LoDTensorArray):
            if any(getattr(t._array, "base", None) is arena for t in v):
                frame[slot].value = LoDTensorArray(
                    LoDTensor(t._array.copy(), t._lod) if t._array is not None else t
                    for t in v)


class LinearPlan(Plan):
    """A Plan whose steps run in a fixed topological order over a static memory plan."""

    def __init__(self, program, block_idx=0):
        super().__init__(program, block_idx)
        succ, n_pred = dependencies(program, self.ops)
        order = topological_order(succ, n_pred)
        self.ops = [self.ops[i] for i in order]
        steps = [self.steps[i] for i in order]
        # what no op reads is a result of the program (a loss, a gradient): kept, own array
        self.temps = {n: t for n, t in temporaries(program, self.block, self.ops).items()
                      if t.read}
        self.planned = {n: t for n, t in self.temps.items()
                        if is_dense(t.var) and not t.ctx_written
                        and var_nbytes(t.var, 1) is not None}
        self._inplace = self._inplace_pairs()
        self._tls = threading.local()
        self._memory = {}       # batch -> MemoryPlan
        self._arenas = []       # arenas free for the next run
        self._lock = threading.Lock()
        self.memory = None      # the plan of the latest run
        self._feed_holders = [self.slot_of(op.input("X")[0]) for op in self.ops
                              if op.type == "feed"]
        self._dies = {}         # op index -> slots whose values are dropped after it
        for n, t in self.temps.items():
            self._dies.setdefault(t.last, []).append(self.slot_of(n))
        self.steps = [self._linear_step(i, op, s) for i, (op, s) in
                      enumerate(zip(self.ops, steps))]

    # -- prepare ------------------------------------------------------------------------
    def _inplace_pairs(self):
        """[(op index, out, x)]: an output that may reuse a dying input's bytes."""
        pairs = []
        for i, op in enumerate(self.ops):
            opdef = registry.find(op.type)
            for out_slot, in_slot in (opdef.inplace.items() if opdef else ()):
                outs, ins = op.output(out_slot), op.input(in_slot)
                if not outs or not ins:
                    continue
                o, x = self.planned.get(outs[0]), self.planned.get(ins[0])
                if o and x and o is not x and x.last == i and o.first == i \
                        and o.var.dtype == x.var.dtype:
                    pairs.append((i, o.name, x.name))
                    break
        return pairs

    def _out_step(self, op):
        """A step running the op's Allocating kernel into its planned bytes, or None."""
        opdef = registry.find(op.type)
        if opdef is None or opdef.kind != "array" \
                or len(opdef.outputs) != 1 or any(s.duplicable for s in opdef.inputs):
            return None
        outs = op.output(opdef.outputs[0].name)
        if len(outs) != 1 or outs[0] not in self.planned:
            return None
        prep = OpPrep(self, op, opdef, registry.attrs_of(opdef, op.all_attrs()))
        fn = opdef.kernel_for(prep.attrs, prep.present_outputs())
        if not isinstance(fn, registry.Allocating):
            return None
        kout = fn.into
        ins = [prep.in_one(s.name) for s in opdef.inputs]
        o = prep.out_one(opdef.outputs[0].name)
        source = opdef.lod_source(prep.attrs)
        lod_i = prep.in_one(source) if opdef.slot(source or "") else None
        tls = self._tls

        def step(frame, env):
            r = kout(*[frame[i].value._array if i is not None else None for i in ins],
                     functools.partial(tls.arena.alloc, o))
            lod = frame[lod_i].value._lod if lod_i is not None else None
            # Fluid's ShareLoD, where the output has the rows the LoD counts (plan.py)
            frame[o].value = LoDTensor(r, lod if not lod or r.shape[:1] == tuple(lod[-1][-1:])
                                       else None)
        return step

    def _linear_step(self, i, op, step):
        inplace_out = {o for j, o, _x in self._inplace if j == i}
        writes = list(dict.fromkeys(op.output_arg_names))
        place = [self.slot_of(n) for n in writes if n in self.planned and n not in inplace_out]
        place += [self.slot_of(n) for n in inplace_out]
        reads_planned = any(n in self.planned for n in op.input_arg_names)
        detach = [self.slot_of(n) for n in writes
                  if reads_planned and n in self._slot and n not in self.planned]
        release = self._dies.get(i, [])
        step = self._out_step(op) or step
        if not (place or detach or release):
            return step
        tls = self._tls

        def linear_step(frame, env):
            step(frame, env)
            arena = tls.arena
            for s in detach:
                arena.detach(frame, s)
            for s in place:
                arena.place(frame, s)
            for s in release:
                frame[s].value = None
        return linear_step

    # -- memory ---------------------------------------------------------------------------
    def memory_plan(self, batch):
        """The MemoryPlan for fed batch size `batch` (made once per batch size)."""
        mp = self._memory.get(batch)
        if mp is None:
            sizes = {n: var_nbytes(t.var, batch) for n, t in self.planned.items()}
            life = {n: (t.first, t.last) for n, t in self.planned.items()}
            mp = MemoryPlan(sizes, life, [(o, x) for _i, o, x in self._inplace], batch,
                            f"block {self.block_idx} ({len(self.ops)} ops)")
            mp.slots = {self.slot_of(n): v for n, v in mp.offsets.items()}
            self._memory[batch] = mp
        return mp

    def _batch(self, frame):
        for h in self._feed_holders:
            for t in frame[h].value or ():
                a = getattr(t, "_array", None)
                if a is not None and a.ndim:
                    return a.shape[0]
        return 1

    def run(self, frame, env):
        with self._lock:
            mp = self.memory = self.memory_plan(self._batch(frame))
            arena = self._arenas.pop() if self._arenas else None
        if arena is None or arena.nbytes < mp.capacity:
            arena = np.empty(max(mp.capacity, 1), np.uint8)
        self._tls.arena = _Arena(arena, mp.slots)
        try:
            super().run(frame, env)
        finally:
            self._tls.arena = None
            self._arenas.append(arena)
