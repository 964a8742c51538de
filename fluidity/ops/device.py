"""`get_places` (Paddle's controlflow/get_places_op): a PLACE_LIST variable holding the
places a program could spread over, `device_count` of them (0: every core, or every GPU)
of `device_type` ("CPU", "CUDA", or "AUTO": the kind of place the program runs on).

Fluid 0.x's ParallelDo read the list; Fluid 1.x keeps the op (`fluid.layers.device.
get_places`, deprecated for `CompiledProgram.with_data_parallel`) and programs still build
it. Nothing in a program consumes the list here either: the op makes it, and a fetch or a
test can read it."""
import os

from ..core.dtypes import VarType
from ..core.place import CPUPlace, CUDAPlace, as_concrete, get_cuda_device_count
from ..errors import ExecutionError
from .registry import OpDef, Out

DEVICE_TYPES = ("CUDA", "CPU", "AUTO")


def places_of(device_count, device_type, run_place):
    """The place list `get_places` makes when its program runs on `run_place`."""
    if device_type not in DEVICE_TYPES:
        raise ExecutionError(f"get_places: device_type must be one of {list(DEVICE_TYPES)}, "
                             f"got {device_type!r}")
    gpu = (isinstance(as_concrete(run_place), CUDAPlace) if device_type == "AUTO"
           else device_type == "CUDA")
    count = int(device_count)
    if count < 0:
        raise ExecutionError(f"get_places: device_count must be >= 0, got {count}")
    if count == 0:
        count = get_cuda_device_count() if gpu else (os.cpu_count() or 1)
    if count == 0:
        raise ExecutionError(f"get_places: cannot tell the {'GPU' if gpu else 'CPU'} "
                             f"device count (there is none)")
    if gpu:
        have = get_cuda_device_count()
        if count > have:
            raise ExecutionError(f"get_places: only {have} CUDA devices found, cannot set to "
                                 f"{count}")
        return [CUDAPlace(i) for i in range(count)]
    return [CPUPlace() for _ in range(count)]


class GetPlaces(OpDef):
    type = "get_places"
    outputs = (Out("Out"),)
    attrs = {"device_count": 0, "device_type": "AUTO"}
    kind = "ctx"
    share_lod = None
    doc = ("Out = a list of `device_count` places (0: every core or GPU) of `device_type` "
           "(CUDA, CPU, or AUTO: the kind the program runs on).")

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", type=VarType.PLACE_LIST)

    @staticmethod
    def make_step(p):
        out = p.out_one("Out")
        count, kind = p.attrs["device_count"], p.attrs["device_type"]
        if kind not in DEVICE_TYPES:
            raise ExecutionError(f"get_places: device_type must be one of "
                                 f"{list(DEVICE_TYPES)}, got {kind!r}")

        def step(frame, env):
            frame[out].value = places_of(count, kind, getattr(env.executor, "place", None))
        return step
