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
from ..codegen import abi
from ..core import dtypes
from ..core.lod import offsets_problem
from ..core.tensor import LoDTensor, SelectedRows
from ..errors import DeviceError, ExecutionError
from .native import ERR_BYTES, CallState, NativePlan, SegmentStep

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
        self.err = ctypes.create_string_buffer(ERR_BYTES)
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


class DeviceState(CallState):
    """A host thread's state for device segments: the arena is device memory, and each
    input has staging buffers for its copies (values, LoD offsets, row ids)."""

    def __init__(self, dev, n_in, n_out):
        super().__init__(n_in, n_out)
        self.dev = dev
        self.stage = [_Staging() for _ in range(n_in)]
        self.lods = [_Staging() for _ in range(n_in)]
        self.rows = [_Staging() for _ in range(n_in)]
        self.grow(1 << 16)

    def grow(self, need):
        self.arena = _Memory(self.dev, max(int(need), 256))
        self.arena_ptr, self.cap = self.arena.ptr, self.arena.nbytes


class DeviceSegmentStep(SegmentStep):
    """A segment of the CUDA target: every input is made a device pointer (host values
    copied up through the thread's staging buffers, a persistable's host value moved to the
    device for good, a value the segment creates allocated), outputs are DeviceTensors
    viewing the device arena (copied to the host when fetched or sparse). An input of other
    shapes than the code was built for is an error: nothing runs elsewhere."""

    def __init__(self, plan, seg, fetched):
        super().__init__(plan, seg, fetched)
        self.dev, persist = plan.dev, {n for _, n in plan._all_persist}
        self.persistable = [s.name in persist for s in self.inputs]
        self.created = [s.name in plan.lowering.created for s in self.inputs]
        self.declared = []
        for spec in self.inputs:
            v = plan.block.find_var_recursive(spec.name)
            self.declared.append(tuple(v.shape) if all(d >= 0 for d in v.shape) else None)
        self.label = (f"compiled CUDA segment of ops #{seg.first}..#{seg.last} in block "
                      f"{plan.block_idx}")

    def new_state(self):
        return DeviceState(self.dev, len(self.inputs), len(self.outputs))

    def __call__(self, frame, env):
        st = self.state()
        for spec in self.inputs:
            self.pack(frame, st, spec)
        rc = self.call(st)
        if rc == -1:     # never run elsewhere: the device code was built for other shapes
            raise ExecutionError(f"{self.label}: an input has another shape than the program "
                                 f"declares ({st.message()}); the device code runs only the "
                                 f"shapes it was built for")
        if rc:
            raise self.op_failed(rc, st)
        self.dev.sync(self.label)
        self.unpack(frame, st)

    def device_value(self, var, spec):
        """The input's value, on the device where it is to stay there (made here, or a
        persistable's host value moved up)."""
        t, j = var.value, spec.j
        if t is None or (type(t) is LoDTensor and t._array is None):
            if not self.created[j]:
                raise self.input_error(spec.name, "has no value (feed it, or run the startup "
                                                  "program)")
            t = var.value = DeviceTensor.empty(self.dev, self.declared[j], spec.dtype)
            self.dev.zero(t.ptr, t.nbytes)
        if type(t) is LoDTensor and self.persistable[j]:   # host value: moved to the device
            a, declared = np.asarray(t._array, spec.dtype), self.declared[j]
            if declared is not None and a.shape != declared and \
                    a.size == int(np.prod(declared, dtype=np.int64)):
                a = a.reshape(declared)      # a file's [1] for a 0-D, say
            t = var.value = DeviceTensor.from_host(self.dev, a, t._lod)
        return t

    def pack(self, frame, st, spec):
        """Input j's device address, dims and LoD or row ids into its record."""
        t, j, record = self.device_value(frame[spec.slot], spec), spec.j, st.args.inputs[spec.j]
        if isinstance(t, DeviceTensor):
            if t.dtype != spec.dtype:
                raise self.input_error(spec.name, f"is {t.dtype} on the device, compiled for "
                                                  f"{spec.dtype}")
            ptr, shape, lod = t.ptr, t.dims, t._lod
        elif spec.sparse and type(t) is SelectedRows:
            a, rows = _contiguous(t.value, spec.dtype), _contiguous(t.rows, np.int64)
            if rows.shape != (a.shape[0],):
                raise self.input_error(spec.name, f"has {rows.shape[0]} row ids for "
                                                  f"{a.shape[0]} rows")
            ptr, shape, lod = st.stage[j].put(self.dev, a), a.shape, None
            abi.put_aux(record, st.rows[j].put(self.dev, rows), t.height)
        elif type(t) is LoDTensor:
            a = t._array
            if a.dtype != spec.dtype:
                raise self.input_error(spec.name, f"is {a.dtype}, compiled for {spec.dtype}")
            a = _contiguous(a)
            ptr, shape, lod = st.stage[j].put(self.dev, a), a.shape, t._lod
        else:
            raise self.input_error(spec.name, f"holds a {type(t).__name__}, which the device "
                                              f"code does not take")
        if len(shape) > abi.MAX_DIMS:
            raise self.input_error(spec.name, f"has {len(shape)} dims (at most "
                                              f"{abi.MAX_DIMS} on the device)")
        abi.put_tensor(record, ptr, shape)
        if spec.lod:
            self._pack_lod(st, spec, record, lod, shape)

    def _pack_lod(self, st, spec, record, lod, shape):
        if not lod:
            raise self.input_error(spec.name, "has no LoD")
        offs = np.asarray(lod[-1], np.int64)
        bad = offsets_problem(offs, shape[0] if len(shape) else None)
        if bad is not None:          # device code trusts its LoD: checked here
            raise self.input_error(spec.name, f"has a LoD that is not offsets of its rows: "
                                              f"{bad}")
        abi.put_aux(record, st.lods[spec.j].put(self.dev, offs), offs.shape[0])

    def unpack(self, frame, st):
        """Each output the segment wrote as a DeviceTensor viewing the arena (a host copy
        when fetched; SelectedRows always to the host)."""
        arena, records, dev = st.arena, st.args.outputs, self.dev
        for spec in self.outputs:
            if spec.in_place:
                continue
            record = records[spec.j]
            shape = abi.output_shape(record, spec.ndim)
            if shape is None:
                continue
            lod = frame[spec.lod_slot].value._lod if spec.lod_slot is not None else None
            view = DeviceTensor(dev, arena.ptr + abi.output_offset(record), shape, spec.dtype,
                                lod, owner=arena)
            if spec.sparse:     # rows and values to the host: a sparse value leaving the device
                r, height = abi.output_aux(record)
                rows = np.empty(shape[0], np.int64)
                dev.copy(rows.ctypes.data, arena.ptr + r, 8 * shape[0], D2H)
                frame[spec.slot].value = SelectedRows(rows, height, view.to_host())
            elif spec.fetched:
                frame[spec.slot].value = LoDTensor(view.to_host(), lod)
            else:
                frame[spec.slot].value = view


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

    def segment_step(self, seg, fetched):
        return DeviceSegmentStep(self, seg, fetched)


__all__ = ["CudaPlan", "DeviceTensor", "Device", "device"]
