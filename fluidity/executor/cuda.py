"""The CUDA plan: a block compiled whole for the device (codegen/cuda.py) and run there by
`Executor(fluid.CUDAPlace(0))`.

Memory. A value on the device is a `DeviceTensor`: device memory it owns (persistables:
parameters, optimizer state, learning rates) or a view of the plan's device arena (a
segment's temporaries and outputs, valid until the segment runs again). Persistables stay on
the device across runs: the startup program makes them there (fill_constant on the device;
the random initializers of codegen/cuda.HOST_OPS run on the host and their outputs are
copied up at once), and the main program updates them in place. Every crossing is an
explicit copy: a fed value is copied in when a segment reads it (through a per-thread
staging buffer per input), a fetched one copied out when its segment ends, and a host
tensor a persistable holds (set by `load`, `set`, or a CPU run in the same scope) is moved
to the device the first time a segment reads it. Reading a DeviceTensor from Python
(`np.array(scope.find_var(n).get_tensor())`, `save`, fetching a parameter) copies it to the
host; `tensor.set(array)` copies into its device memory.

The device library (memory, copies, synchronisation) is the same runtime compiled once; on
the emulated device (FLUIDITY_CUDA_EMULATE=1) it is host memory, so this module's logic
runs in tests without a GPU.
"""
import ctypes
import threading

import numpy as np

from ..codegen import build
from ..codegen import cuda as cuda_target
from ..codegen.lower import S
from ..core import dtypes
from ..core.dtypes import numpy_of_ctype
from ..core.lod import offsets_problem
from ..core.tensor import LoDTensor, SelectedRows
from ..errors import DeviceError, ExecutionError
from .native import NativePlan, _ERR_BYTES, _input_error, op_error

H2D, D2H, D2D = 1, 2, 3
_devices = {}
_lock = threading.Lock()


def _contiguous(a, dtype=None):
    """`a` as a C-contiguous array, 0-D kept 0-D (np.ascontiguousarray makes it 1-D)."""
    a = np.asarray(a, dtype)
    return a if a.flags.c_contiguous else a.copy(order="C")


class Device:
    """The device library: memory and copies on the GPU (or its emulation)."""

    def __init__(self, emulate):
        self.emulate = emulate
        path = cuda_target.compile_library(cuda_target.device_source(), emulate)
        lib = build.load(path)
        for name, res, args in (
                ("fl_cuda_device_count", ctypes.c_int, []),
                ("fl_cuda_malloc", ctypes.c_void_p, [ctypes.c_int64]),
                ("fl_cuda_free", None, [ctypes.c_void_p]),
                ("fl_cuda_copy", ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p,
                                                ctypes.c_int64, ctypes.c_int]),
                ("fl_cuda_zero", ctypes.c_int, [ctypes.c_void_p, ctypes.c_int64]),
                ("fl_cuda_sync", ctypes.c_int, [ctypes.c_void_p])):
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args
        self.lib = lib
        self.err = ctypes.create_string_buffer(_ERR_BYTES)
        if lib.fl_cuda_device_count() < 1:
            raise DeviceError("the CUDA runtime sees no device")

    def malloc(self, nbytes):
        p = self.lib.fl_cuda_malloc(int(nbytes))
        if not p:
            raise DeviceError(f"out of device memory: cannot allocate {int(nbytes)} bytes")
        return p

    def free(self, ptr):
        if ptr:
            self.lib.fl_cuda_free(ptr)

    def copy(self, dst, src, nbytes, kind):
        if nbytes and self.lib.fl_cuda_copy(dst, src, int(nbytes), kind):
            raise DeviceError(f"a {('', 'host->device', 'device->host', 'device->device')[kind]}"
                              f" copy of {int(nbytes)} bytes failed")

    def zero(self, ptr, nbytes):
        if nbytes:
            self.lib.fl_cuda_zero(ptr, int(nbytes))

    def sync(self, what):
        """Wait for the device; a DeviceError naming `what` when a kernel failed."""
        if self.lib.fl_cuda_sync(self.err):
            raise DeviceError(f"{what}: {self.err.value.decode(errors='replace')}")


def device(emulate=None):
    """The process's Device (one for the GPU, one for the emulation)."""
    emulate = cuda_target.emulated() if emulate is None else emulate
    with _lock:
        d = _devices.get(emulate)
        if d is None:
            d = _devices[emulate] = Device(emulate)
    return d


class _Memory:
    """Device bytes owned by one tensor, freed with it."""
    __slots__ = ("dev", "ptr", "nbytes", "__weakref__")

    def __init__(self, dev, nbytes):
        self.dev, self.nbytes = dev, int(nbytes)
        self.ptr = dev.malloc(max(self.nbytes, 1))

    def __del__(self):
        try:
            self.dev.free(self.ptr)
        except Exception:     # interpreter shutdown: the library may be gone
            pass


class DeviceTensor(LoDTensor):
    """A LoDTensor whose data lives on the device: `ptr` with `dims` and `dtype`, owned
    (`memory`) or a view of a plan's arena (`owner` keeps the arena alive). Its `_array` is
    a host copy (every read copies device -> host; assigning copies host -> device), so code
    that reads tensors as numpy (fetch, save, get_tensor) moves them to the host."""
    __slots__ = ("dev", "ptr", "dims", "dtype", "memory", "owner")

    def __init__(self, dev, ptr, dims, dtype, lod=None, memory=None, owner=None):
        self.dev, self.ptr, self.dims, self.dtype = dev, ptr, tuple(int(d) for d in dims), \
            np.dtype(dtype)
        self.memory, self.owner = memory, owner
        self._lod = lod if lod else []

    @classmethod
    def empty(cls, dev, dims, dtype, lod=None):
        nbytes = int(np.prod(dims, dtype=np.int64)) * np.dtype(dtype).itemsize
        mem = _Memory(dev, nbytes)
        return cls(dev, mem.ptr, dims, dtype, lod, mem)

    @classmethod
    def from_host(cls, dev, array, lod=None):
        a = _contiguous(array)
        t = cls.empty(dev, a.shape, a.dtype, lod)
        dev.copy(t.ptr, a.ctypes.data, a.nbytes, H2D)
        return t

    @property
    def nbytes(self):
        return int(np.prod(self.dims, dtype=np.int64)) * self.dtype.itemsize

    def to_host(self):
        """The values as a new numpy array (a device -> host copy)."""
        out = np.empty(self.dims, self.dtype)
        self.dev.sync("before copying a device tensor to the host")
        self.dev.copy(out.ctypes.data, self.ptr, self.nbytes, D2H)
        return out

    def _get_array(self):
        return self.to_host()

    def _set_array(self, array):
        if array is None:
            raise DeviceError("a device tensor cannot be emptied (drop the variable)")
        a = _contiguous(array)
        if a.shape != self.dims or a.dtype != self.dtype or self.memory is None:
            mem = _Memory(self.dev, a.nbytes)
            self.memory, self.ptr, self.owner = mem, mem.ptr, None
            self.dims, self.dtype = a.shape, a.dtype
        self.dev.copy(self.ptr, a.ctypes.data, a.nbytes, H2D)

    _array = property(_get_array, _set_array)

    def set(self, array, place=None):
        self._set_array(np.asarray(array))

    def shape(self):
        return list(self.dims)

    def _dtype(self):
        return dtypes.to_code(self.dtype)

    def is_initialized(self):
        return True

    def __repr__(self):
        return f"DeviceTensor({list(self.dims)}, {self.dtype}, lod={self._lod})"


class _Staging:
    """A reusable device buffer for one input's copies (grown as needed)."""
    __slots__ = ("mem",)

    def __init__(self):
        self.mem = None

    def put(self, dev, array):
        if self.mem is None or self.mem.nbytes < array.nbytes:
            self.mem = _Memory(dev, max(array.nbytes, 64))
        dev.copy(self.mem.ptr, array.ctypes.data, array.nbytes, H2D)
        return self.mem.ptr


class _ThreadState:
    __slots__ = ("args", "args_ptr", "err", "arena", "cap", "stage", "lods", "rows")

    def __init__(self, dev, n_args, n_in):
        self.args = np.zeros(n_args, np.int64)
        self.args_ptr = self.args.ctypes.data
        self.err = ctypes.create_string_buffer(_ERR_BYTES)
        self.stage = [_Staging() for _ in range(n_in)]
        self.lods = [_Staging() for _ in range(n_in)]
        self.rows = [_Staging() for _ in range(n_in)]
        self.grow(dev, 1 << 16)

    def grow(self, dev, need):
        self.arena = _Memory(dev, max(int(need), 256))
        self.cap = self.arena.nbytes


class CudaPlan(NativePlan):
    """A NativePlan of the CUDA target: every op of the block on the device (DeviceError at
    preparation naming any that cannot be), its segments' memory device memory."""

    def __init__(self, program, block_idx=0, emulate=None):
        self.dev = device(emulate)
        super().__init__(program, block_idx)

    def lower(self, program, block_idx, fetched):
        return cuda_target.lower(program, block_idx, fetched)

    def load(self, low):
        return build.load(cuda_target.compile_library(low.source, self.dev.emulate))

    def explain(self):
        return cuda_target.explain(self.lowering)

    def python_step(self, i):
        """feed/fetch as they are; a host op (random initializer) with its persistable
        outputs copied to the device right after."""
        step = self.steps[i]
        op = self.ops[i]
        if op.type not in cuda_target.HOST_OPS:
            return step
        persist = {n for _, n in self._all_persist}
        outs = [(self.slot_of(n), n) for n in op.output_arg_names if n in persist]
        dev = self.dev

        def host_then_copy(frame, env):
            step(frame, env)
            for slot, _ in outs:
                t = frame[slot].value
                if type(t) is LoDTensor and t._array is not None:
                    frame[slot].value = DeviceTensor.from_host(dev, t._array, t._lod)
        return host_then_copy

    def _segment_step(self, seg, fetched):
        fn = getattr(self.library, seg.name)
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]
        fn.restype = ctypes.c_int
        dev = self.dev
        n_args = seg.out_base + len(seg.outputs) * S
        block = self.block
        created = self.lowering.created
        persist = {n for _, n in self._all_persist}
        ins = []
        for b in seg.inputs:
            v = block.find_var_recursive(b.var)
            declared = tuple(v.shape) if all(d >= 0 for d in v.shape) else None
            ins.append((self.slot_of(b.var), b.var, numpy_of_ctype(b.ctype), b.ndim,
                        b.lod is not None, b.rows is not None, b.var in persist, declared,
                        b.var in created))
        in_slot = {b.var: self.slot_of(b.var) for b in seg.inputs}
        outs = [(self.slot_of(b.var), numpy_of_ctype(b.ctype), b.ndim, in_slot.get(b.lod_src),
                 b.var in fetched, b.slot is None, b.rows is not None, b.var)
                for b in seg.outputs]
        tls = threading.local()
        block_idx, seg_ops, sites = self.block_idx, seg.ops, seg.sites
        n_in, out_base = len(ins), seg.out_base
        label = f"compiled CUDA segment of ops #{seg.first}..#{seg.last} in block {block_idx}"

        def fail(name, what):
            return _input_error(seg_ops, name, what, block_idx)

        def step(frame, env):
            st = tls.__dict__.get("st")
            if st is None:
                st = tls.st = _ThreadState(dev, n_args, n_in)
            P = st.args
            for j, (slot, name, dt, ndim, has_lod, sparse, persistable, declared, made) in \
                    enumerate(ins):
                var = frame[slot]
                t = var.value
                base = 1 + j * S
                if t is None or (type(t) is LoDTensor and t._array is None):
                    if not made:
                        raise fail(name, "has no value (feed it, or run the startup program)")
                    t = var.value = DeviceTensor.empty(dev, declared, dt)   # made here
                    dev.zero(t.ptr, t.nbytes)
                if type(t) is LoDTensor and persistable:   # host value: moved to the device
                    a = np.asarray(t._array, dt)
                    if declared is not None and a.shape != declared and \
                            a.size == int(np.prod(declared, dtype=np.int64)):
                        a = a.reshape(declared)      # a file's [1] for a 0-D, say
                    t = var.value = DeviceTensor.from_host(dev, a, t._lod)
                if isinstance(t, DeviceTensor):
                    if t.dtype != dt:
                        raise fail(name, f"is {t.dtype} on the device, compiled for {dt}")
                    ptr, shape, lod = t.ptr, t.dims, t._lod
                elif sparse and type(t) is SelectedRows:
                    a = _contiguous(t.value, dt)
                    rows = _contiguous(t.rows, np.int64)
                    if rows.shape != (a.shape[0],):
                        raise fail(name, f"has {rows.shape[0]} row ids for {a.shape[0]} rows")
                    ptr, shape, lod = st.stage[j].put(dev, a), a.shape, None
                    P[base + 10] = st.rows[j].put(dev, rows)
                    P[base + 11] = t.height
                elif type(t) is LoDTensor:
                    a = t._array
                    if a.dtype != dt:
                        raise fail(name, f"is {a.dtype}, compiled for {dt}")
                    a = _contiguous(a)
                    ptr, shape, lod = st.stage[j].put(dev, a), a.shape, t._lod
                else:
                    raise fail(name, f"holds a {type(t).__name__}, which the device code "
                                     f"does not take")
                if len(shape) > 8:
                    raise fail(name, f"has {len(shape)} dims (at most 8 on the device)")
                P[base] = ptr
                P[base + 1] = len(shape)
                P[base + 2:base + 2 + len(shape)] = shape
                if has_lod:
                    if not lod:
                        raise fail(name, "has no LoD")
                    offs = np.asarray(lod[-1], np.int64)
                    bad = offsets_problem(offs, shape[0] if len(shape) else None)
                    if bad is not None:          # device code trusts its LoD: checked here
                        raise fail(name, f"has a LoD that is not offsets of its rows: {bad}")
                    P[base + 10] = st.lods[j].put(dev, offs)
                    P[base + 11] = offs.shape[0]
            rc = fn(st.args_ptr, st.arena.ptr, st.cap, st.err)
            while rc == 1:
                st.grow(dev, P[0])
                rc = fn(st.args_ptr, st.arena.ptr, st.cap, st.err)
            if rc == -1:     # never run elsewhere: the device code was built for other shapes
                raise ExecutionError(f"{label}: an input has another shape than the program "
                                     f"declares ({st.err.value.decode(errors='replace')}); "
                                     f"the device code runs only the shapes it was built for")
            if rc:
                b, i, op = sites[rc - 2] if 2 <= rc < 2 + len(sites) else \
                    (block_idx,) + seg_ops[0]
                raise op_error(op, i, st.err.value.decode(errors="replace"), b)
            dev.sync(label)
            arena = st.arena
            for j, (slot, dt, ndim, lod_slot, copy, in_place, sparse, name) in enumerate(outs):
                if in_place:
                    continue
                o = out_base + j * S
                if P[o + 1] < 0:
                    continue
                shape = tuple(P[o + 2:o + 2 + ndim].tolist())
                ptr = arena.ptr + int(P[o])
                lod = frame[lod_slot].value._lod if lod_slot is not None else None
                view = DeviceTensor(dev, ptr, shape, dt, lod, owner=arena)
                if sparse:       # rows and values to the host: a sparse value leaving the device
                    n = shape[0]
                    rows = np.empty(n, np.int64)
                    dev.copy(rows.ctypes.data, arena.ptr + int(P[o + 10]), 8 * n, D2H)
                    frame[slot].value = SelectedRows(rows, int(P[o + 11]), view.to_host())
                elif copy:
                    frame[slot].value = LoDTensor(view.to_host(), lod)
                else:
                    frame[slot].value = view
        return step


__all__ = ["CudaPlan", "DeviceTensor", "Device", "device"]
