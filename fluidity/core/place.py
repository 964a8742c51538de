"""Places: where kernels run, with Paddle's classes and questions about the build.

Fluidity's kernels run on the CPU; the CUDA backend is not built yet, so
`is_compiled_with_cuda()` says False and `get_cuda_device_count()` 0, truthfully, and Fluid
programs that branch on them (`place = fluid.CUDAPlace(0) if
fluid.core.is_compiled_with_cuda() else fluid.CPUPlace()`) take their CPU path.
`CUDAPlace` and `CUDAPinnedPlace` still construct, so code that builds them runs.
"""


class Place:
    __slots__ = ()

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


class CPUPlace(Place):
    __slots__ = ()

    def __repr__(self):
        return "CPUPlace"


class CUDAPlace(Place):
    """GPU `device_id`. Accepted so Fluid code constructs it; Fluidity's kernels run on the
    CPU until the CUDA backend lands."""
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
    """Page-locked host memory for fast copies to a GPU (Paddle's); a CPU place here."""
    __slots__ = ()

    def __repr__(self):
        return "CUDAPinnedPlace"


def is_compiled_with_cuda():
    """False: this Fluidity runs its kernels on the CPU (the CUDA backend is not built)."""
    return False


def get_cuda_device_count():
    """The number of GPUs Fluidity can run on: 0 without the CUDA backend."""
    return 0


def is_compiled_with_mkldnn():
    return False
