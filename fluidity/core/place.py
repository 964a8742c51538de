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
import warnings

EMULATE_ENV = "FLUIDITY_CUDA_EMULATE"
_CUDART_NAMES = ("libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0")
_CUDART_DIRS = ("/usr/local/cuda/lib64", "/usr/local/cuda/lib", "/usr/lib/x86_64-linux-gnu")
_facts = {}


class Place:
    """Where a tensor lives or a program runs (Paddle's `core.Place`). The concrete places
    (CPUPlace, CUDAPlace, CUDAPinnedPlace) are Places; a bare `core.Place()` is Fluid's
    generic holder, given one of them with `set_place(p)` (reader code converts places so)."""
    __slots__ = ("_held",)

    def __init__(self):
        self._held = None

    def _target(self):
        """The concrete place this one is (itself, or what a generic Place holds)."""
        if type(self) is Place:
            if self._held is None:
                raise ValueError("this fluid.core.Place holds no place yet: call "
                                 "set_place(fluid.CPUPlace()) (or a CUDAPlace) first")
            return self._held
        return self

    def set_place(self, place):
        """Make this generic Place hold `place` (a CPUPlace, CUDAPlace, CUDAPinnedPlace or
        another Place)."""
        if type(self) is not Place:
            raise TypeError(f"set_place is a method of a generic fluid.core.Place, not of "
                            f"{type(self).__name__}")
        if not isinstance(place, Place):
            raise TypeError(f"set_place: expected a place, got {type(place).__name__}")
        self._held = place._target()

    def __eq__(self, other):
        if not isinstance(other, Place):
            return NotImplemented
        a, b = _concrete_or_none(self), _concrete_or_none(other)
        return a is not None and type(a) is type(b) and repr(a) == repr(b)

    def __hash__(self):
        return hash(repr(_concrete_or_none(self)))

    def __repr__(self):
        held = _concrete_or_none(self)
        return repr(held) if held is not None else "Place(unset)"

    # Paddle's core.Place questions
    def is_cpu_place(self):
        return isinstance(self._target(), CPUPlace)

    def is_gpu_place(self):
        return isinstance(self._target(), CUDAPlace)

    def is_cuda_pinned_place(self):
        return isinstance(self._target(), CUDAPinnedPlace)

    def gpu_device_id(self):
        t = self._target()
        if not isinstance(t, CUDAPlace):
            raise ValueError(f"gpu_device_id: {t!r} is not a CUDAPlace")
        return t.device_id

    def _type(self):
        """Paddle's place kind index (its Place variant: CUDAPlace 0, CPUPlace 1,
        CUDAPinnedPlace 2), what Fluid compares to check places are of one kind."""
        return _TYPE_INDEX[type(self._target())]

    def _equals(self, other):
        return self == other


def _concrete_or_none(place):
    return place._held if type(place) is Place else place


class CPUPlace(Place):
    __slots__ = ()

    def __repr__(self):
        return "CPUPlace"


class CUDAPlace(Place):
    """GPU `device_id`: programs run there compiled to CUDA (an Executor given one checks at
    once that the GPU exists: `require_device`)."""
    __slots__ = ("device_id",)

    def __init__(self, device_id=0):
        if isinstance(device_id, bool) or not isinstance(device_id, int) or device_id < 0:
            raise ValueError(f"CUDAPlace: device_id must be a non-negative int, got "
                             f"{device_id!r}")
        self.device_id = device_id

    def get_device_id(self):
        return self.device_id

    _get_device_id = get_device_id

    def gpu_device_id(self):
        return self.device_id

    def __repr__(self):
        return f"CUDAPlace({self.device_id})"


class CUDAPinnedPlace(Place):
    """Page-locked host memory for fast copies to a GPU (Paddle's): host memory here, so
    code that stages data there runs; running a program on it needs a GPU as CUDAPlace."""
    __slots__ = ()

    def __repr__(self):
        return "CUDAPinnedPlace"


_TYPE_INDEX = {CUDAPlace: 0, CPUPlace: 1, CUDAPinnedPlace: 2}


def as_concrete(place):
    """`place` itself, or the concrete place a generic `core.Place` holds (None stays None)."""
    return place._target() if isinstance(place, Place) else place


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
    place = as_concrete(place)
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


# --- the place lists Fluid programs ask for (fluid.cpu_places, fluid.cuda_places) ---------
CPU_NUM_ENV = "CPU_NUM"
_warned_cpu_num = []


def cpu_num():
    """The number of CPU places (Fluid's `CPU_NUM`; 1 when unset, and then set to 1 in the
    environment, with Fluid's one-time warning when the machine has more cores)."""
    if CPU_NUM_ENV not in os.environ:
        cores = os.cpu_count() or 1
        if cores > 1 and not _warned_cpu_num:
            _warned_cpu_num.append(True)
            warnings.warn(f"CPU_NUM is not set: one CPU place is used. Set CPU_NUM in the "
                          f"environment to the number of CPU places a data-parallel program "
                          f"should run on (this machine has {cores} cores)", stacklevel=3)
        os.environ[CPU_NUM_ENV] = "1"
    raw = os.environ[CPU_NUM_ENV]
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"CPU_NUM must be a positive integer, got {raw!r}") from None
    if n < 1:
        raise ValueError(f"CPU_NUM must be a positive integer, got {raw!r}")
    return n


def cpu_places(device_count=None):
    """`device_count` CPUPlaces (default: `CPU_NUM`, see `cpu_num`), the places a
    data-parallel CompiledProgram runs its replicas on and a DataLoader feeds."""
    if device_count is None:
        device_count = cpu_num()
    if isinstance(device_count, bool) or not isinstance(device_count, int) or device_count < 1:
        raise ValueError(f"cpu_places: device_count must be a positive int, got "
                         f"{device_count!r}")
    return [CPUPlace() for _ in range(device_count)]


def _cuda_count(what):
    """The CUDA devices programs can run on (the emulated one under the test hook), or a
    DeviceError when there are none."""
    from ..errors import DeviceError
    n = 1 if cuda_emulated() else get_cuda_device_count()
    if n == 0:
        raise DeviceError(f"{what}: CUDA is not available: no GPU here "
                          f"(fluid.core.get_cuda_device_count() is 0). Use fluid.CPUPlace() "
                          f"or fluid.cpu_places().")
    return n


def _cuda_ids(what):
    """The GPU ids to use: FLAGS_selected_gpus ("0,1") when set, else every GPU."""
    n = _cuda_count(what)
    selected = os.environ.get("FLAGS_selected_gpus", "")
    if selected:
        try:
            return [int(s) for s in selected.split(",")]
        except ValueError:
            raise ValueError(f"FLAGS_selected_gpus must be comma-separated GPU ids, got "
                             f"{selected!r}") from None
    return list(range(n))


def cuda_places(device_ids=None):
    """CUDAPlaces of `device_ids` (an id or a list; default: FLAGS_selected_gpus, else every
    GPU), each checked to exist here (DeviceError otherwise, as Fluid without a GPU)."""
    if device_ids is None:
        ids = _cuda_ids("cuda_places")
    else:
        _cuda_count("cuda_places")
        ids = list(device_ids) if isinstance(device_ids, (list, tuple)) else [device_ids]
    places = [CUDAPlace(i) for i in ids]
    for p in places:
        require_device(p, "cuda_places")
    return places


def cuda_pinned_places(device_count=None):
    """`device_count` CUDAPinnedPlaces (default: one per GPU in use)."""
    if device_count is None:
        device_count = len(_cuda_ids("cuda_pinned_places"))
    else:
        _cuda_count("cuda_pinned_places")
    return [CUDAPinnedPlace() for _ in range(device_count)]
