"""Places: where kernels run, with Paddle's classes and questions about the build.

`CPUPlace` runs programs as they are; `CUDAPlace(i)` runs them compiled to CUDA on GPU i
(fluidity/codegen/cuda.py, executor/cuda.py). The questions tell the truth about this
machine: `is_compiled_with_cuda()` is whether CUDA programs can run here (the CUDA runtime
library loads, nvcc is installed and there is a GPU; `cuda_buildable()` without the GPU),
`get_cuda_device_count()` how many GPUs
the CUDA runtime sees (cudaGetDeviceCount through libcudart; 0 without a GPU or a driver).

A CUDAPlace constructs anywhere (Fluid code builds places before it asks questions), but an
Executor, a CompiledProgram or any other runner handed one calls `require_device(place)`,
which fails at once with a DeviceError when there is no such GPU: a program never runs
silently on the CPU when it asked for a GPU. The one exception is the test hook
`FLUIDITY_CUDA_EMULATE=1`: CUDAPlace(0) then runs the generated CUDA code on a host emulation
of the device (codegen/runtime/cuda_host.h), so the device path is tested without a GPU.
"""
import ctypes
import ctypes.util
import os
import shutil

EMULATE_ENV = "FLUIDITY_CUDA_EMULATE"
_CUDART_NAMES = ("libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0")
_CUDART_DIRS = ("/usr/local/cuda/lib64", "/usr/local/cuda/lib", "/usr/lib/x86_64-linux-gnu")
_facts = {}


class Place:
    """A device; `core.Place()` itself is Paddle's place holder (`set_place(p)`)."""
    __slots__ = ("_held",)

    def __eq__(self, other):
        return type(self) is type(other) and repr(self) == repr(other)

    def __hash__(self):
        return hash(repr(self))

    # Paddle's core.Place questions
    def is_cpu_place(self):
        return isinstance(self, CPUPlace)

    def is_gpu_place(self):
        return isinstance(self, CUDAPlace)

    def is_cuda_pinned_place(self):
        return isinstance(self, CUDAPinnedPlace)

    # Paddle's core.Place as a holder of another place, and its private questions
    def set_place(self, place):
        if not isinstance(place, Place):
            raise TypeError(f"set_place needs a place, got {type(place).__name__}")
        self._held = place._resolved()

    def _resolved(self):
        return getattr(self, "_held", None) or self

    def _type(self):
        """0 CPU, 1 CUDA, 2 CUDA pinned (Paddle's place kinds, in its variant's order)."""
        p = self._resolved()
        return {CPUPlace: 0, CUDAPlace: 1, CUDAPinnedPlace: 2}.get(type(p), -1)

    def _equals(self, other):
        return isinstance(other, Place) and self._resolved() == other._resolved()


class CPUPlace(Place):
    __slots__ = ()

    def __repr__(self):
        return "CPUPlace"


class CUDAPlace(Place):
    """GPU `device_id`: programs run there compiled to CUDA (an Executor given one checks at
    once that the GPU exists: `require_device`)."""
    __slots__ = ("device_id",)

    def __init__(self, device_id=0):
        if not isinstance(device_id, int) or device_id < 0:
            raise ValueError(f"CUDAPlace: device_id must be a non-negative int, got "
                             f"{device_id!r}")
        self.device_id = device_id

    def get_device_id(self):
        return self.device_id

    gpu_device_id = get_device_id

    def __repr__(self):
        return f"CUDAPlace({self.device_id})"


class CUDAPinnedPlace(Place):
    """Page-locked host memory for fast copies to a GPU (Paddle's): host memory here, so
    code that stages data there runs; running a program on it needs a GPU as CUDAPlace."""
    __slots__ = ()

    def __repr__(self):
        return "CUDAPinnedPlace"


def cudart():
    """The CUDA runtime library (ctypes), or None when none loads."""
    if "cudart" not in _facts:
        lib = None
        names = list(_CUDART_NAMES)
        found = ctypes.util.find_library("cudart")
        if found:
            names.insert(0, found)
        names += [os.path.join(d, n) for d in _CUDART_DIRS for n in _CUDART_NAMES]
        for name in names:
            try:
                lib = ctypes.CDLL(name)
                break
            except OSError:
                continue
        _facts["cudart"] = lib
    return _facts["cudart"]


def nvcc_path():
    """The nvcc CUDA code is built with: $NVCC, else the first on PATH or in
    /usr/local/cuda/bin; None when there is none."""
    return os.environ.get("NVCC") or shutil.which("nvcc") or (
        "/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)


def is_compiled_with_cuda():
    """Whether `CUDAPlace` programs can run here: the CUDA runtime loads, nvcc is installed
    and there is at least one GPU. Fluidity builds CUDA code when a program first runs, so
    a "CUDA build" without a device to run it on is none; and Fluid programs choose their
    place with `CUDAPlace(0) if is_compiled_with_cuda() else CPUPlace()`, which must pick
    the CPU on a machine with nvcc and no GPU. `cuda_buildable()` asks the build half alone."""
    return cuda_buildable() and get_cuda_device_count() > 0


def cuda_buildable():
    """Whether CUDA code can be built here: the CUDA runtime loads and nvcc is installed
    (no GPU needed; the generated .cu is compiled for the GPU and for its host emulation)."""
    return cudart() is not None and nvcc_path() is not None


def get_cuda_device_count():
    """The GPUs the CUDA runtime sees (cudaGetDeviceCount; 0 with no GPU, no driver or no
    runtime). Asked once per process."""
    if "count" not in _facts:
        n = ctypes.c_int(0)
        lib = cudart()
        ok = lib is not None and lib.cudaGetDeviceCount(ctypes.byref(n)) == 0
        _facts["count"] = n.value if ok else 0
    return _facts["count"]


def cuda_emulated():
    """Whether the test hook FLUIDITY_CUDA_EMULATE runs CUDAPlace(0) on the host emulation."""
    return os.environ.get(EMULATE_ENV, "") not in ("", "0")


def require_device(place, what="Executor"):
    """Check that `place` can run programs here; a DeviceError saying why not otherwise.
    Returns "cpu", "cuda" (a GPU) or "emulated" (the test hook)."""
    from ..errors import DeviceError
    if isinstance(place, CPUPlace) or place is None:
        return "cpu"
    if isinstance(place, CUDAPinnedPlace):
        raise DeviceError(f"{what}: {place!r} is host memory for staging copies; run on "
                          f"fluid.CUDAPlace(i) or fluid.CPUPlace()")
    if not isinstance(place, CUDAPlace):
        raise TypeError(f"{what}: place must be a Place, got {type(place).__name__}")
    if cuda_emulated():
        if place.device_id != 0:
            raise DeviceError(f"{what}: {place!r} asked for, but the CUDA emulation "
                              f"({EMULATE_ENV}=1) has one device, CUDAPlace(0)")
        return "emulated"
    n = get_cuda_device_count()
    if place.device_id >= n:
        why = ("this machine has no NVIDIA GPU (or no driver for one)" if n == 0 else
               f"this machine has {n} GPU(s), CUDAPlace(0)..CUDAPlace({n - 1})")
        build = "" if cuda_buildable() else \
            " and cannot build for CUDA (no CUDA runtime or no nvcc)"
        raise DeviceError(f"{what}: {place!r} asked for, but CUDA is not available: {why}"
                          f"{build}. Use fluid.CPUPlace(); fluid.core.get_cuda_device_count() "
                          f"is {n}")
    return "cuda"


def is_compiled_with_mkldnn():
    return False
