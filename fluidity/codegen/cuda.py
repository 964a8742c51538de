"""The code generator's CUDA target: a block lowered (lower.py, `target="cuda"`) to `.cu`
whose segments launch kernels over device memory, built with nvcc (or, as a test hook, with
the C++ compiler against an emulated device), and the rules that say which ops compile.

What an op compiles to on the device is its emitter registered for "cuda" (codegen/emit/
cuda/<family>.py, and the elementwise table's rows rendered as kernels): host code that
launches the named kernels of runtime/cuda_ops.h and fl::cu::gemm (cuBLAS).

A block for the device must compile whole: `lower(program, block)` raises a DeviceError
naming every op that has no CUDA form, and its variables (never a silent run on the host).
The only ops that run on the host are feed/fetch and the random initializers of `HOST_OPS`
(so a device run draws the same parameters as a CPU run); their persistable outputs are
copied to the device right after they run, and `explain()` says so.

Emulation (`FLUIDITY_CUDA_EMULATE=1`, `emulated()`): the generated `.cu` is compiled by g++
with runtime/cuda_host.h (kernels run one thread at a time, device memory is host memory,
cuBLAS is OpenBLAS), and `fluid.CUDAPlace(0)` runs on that emulated device: how tests check
the kernels and the executor's device memory without a GPU.
"""
from ..core.names import EMPTY_VAR_NAME
from ..core.place import EMULATE_ENV, cuda_emulated
from ..errors import DeviceError
from . import build
from .cir import NotCompilable
from .lower import Lowering

# ops a device run executes on the host (outputs copied to the device after): the random
# initializers, so that a program draws the same parameters on either place
HOST_OPS = frozenset({"uniform_random", "gaussian_random", "truncated_gaussian_random"})
RUN_OPS = frozenset({"feed", "fetch"})        # the executor's own: values cross here


def emulated():
    """Whether CUDAPlace runs on the host emulation of the device (the test hook,
    $FLUIDITY_CUDA_EMULATE)."""
    return cuda_emulated()


# --- lowering a block for the device -------------------------------------------------------------
def lower(program, block_idx=0, keep=()):
    """The block lowered for the device; DeviceError naming every op with no CUDA form."""
    low = Lowering(program, block_idx, keep=keep, target="cuda")
    block = low.block
    missing = []
    for part in low.python_ops:
        i, reason = part.i, part.reason
        op = block.ops[i]
        if op.type in RUN_OPS or op.type in HOST_OPS:
            continue
        ins = {s: op.input(s) for s in op.input_names if op.input(s)}
        outs = {s: [n for n in op.output(s) if n != EMPTY_VAR_NAME]
                for s in op.output_names if op.output(s)}
        missing.append(f"  op #{i} '{op.type}' (inputs {ins}, outputs {outs}): {reason}")
    if missing:
        raise DeviceError(f"block {block_idx} cannot run on the CUDA device: "
                          f"{len(missing)} op(s) have no CUDA form\n" + "\n".join(missing))
    return low


def explain(low):
    """Lowering.explain() rows with the host ops' copies said."""
    rows = []
    for i, typ, where, why in low.explain():
        if where == "python" and typ in HOST_OPS:
            why = "runs on the host; its outputs are copied to the device"
        elif where == "python" and typ in RUN_OPS:
            why = "feed copies host -> device, fetch device -> host"
        rows.append((i, typ, where, why))
    return rows


# --- building -----------------------------------------------------------------------------------
def device_source():
    """The device library's source: memory and copies (runtime/cuda_rt.h FL_CUDA_DEVICE_API)."""
    return '// fluidity CUDA device library\n#include "cuda_rt.h"\nFL_CUDA_DEVICE_API\n'


def with_device_api(source):
    """A segment library's source that also exports the device API (one library per program
    then serves both)."""
    return source + "\nFL_CUDA_DEVICE_API\n"


def compile_library(source, emulate=None):
    """Path of the library of CUDA `source`: nvcc's, or the emulated build's."""
    if emulate is None:
        emulate = emulated()
    if emulate:
        return build.compile_cuda_emulated(source)
    return build.compile_cuda_cached(source)


def check_compiles(program, block_idx=0, keep=(), archs=None):
    """Build the block's CUDA source with nvcc for `archs` (no GPU needed); its path."""
    return build.compile_cuda_cached(lower(program, block_idx, keep).source, archs)


__all__ = ["lower", "explain", "emulated",
           "compile_library", "device_source", "with_device_api", "check_compiles",
           "HOST_OPS", "EMULATE_ENV", "NotCompilable"]
