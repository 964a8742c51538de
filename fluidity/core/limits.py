"""How large one tensor may be: a sane bound checked before memory is taken for a size that
a program (a model file) chose rather than the data.

A `one_hot` with depth 2**31-1, a `fill_constant` of shape [2**20, 2**20], an `expand` by a
million: numpy may grant such an allocation lazily (calloc) and the process is then killed
by the kernel when the pages are touched, with nothing said. Kernels whose output size comes
from attributes call `check_elements` first, and the compiled plans check the arena they are
asked to grow; anything above the bound is an `AllocationTooLarge` error that says what
asked for how much. The bound: `$FLUIDITY_MAX_TENSOR_BYTES`, else the memory the machine
has available (MemAvailable; physical memory where that cannot be read).
"""
import os

from ..errors import FluidityError

ENV = "FLUIDITY_MAX_TENSOR_BYTES"
SMALL = 64 << 20       # sizes up to this are never checked against the machine


class AllocationTooLarge(FluidityError, MemoryError):
    """A tensor (or a compiled segment's arena) larger than this machine can hold."""


def physical_bytes():
    """The machine's physical memory (1 TiB where it cannot be read): no tensor is larger."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1 << 40


def _available():
    """The memory this machine can give now (Linux's MemAvailable), else its physical
    memory."""
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return physical_bytes()


def max_tensor_bytes():
    """The largest tensor (bytes) a kernel may allocate: $FLUIDITY_MAX_TENSOR_BYTES, else
    the memory the machine has available now (a tensor larger than that could only be
    granted lazily and then get the process killed)."""
    text = os.environ.get(ENV)
    if text:
        try:
            return int(float(text))
        except ValueError:
            raise AllocationTooLarge(f"${ENV} must be a number of bytes, got {text!r}") \
                from None
    return max(_available(), SMALL)


def check_elements(shape, itemsize, what):
    """Raise AllocationTooLarge naming `what` when a tensor of `shape` (ints; a negative dim
    counts as 0) and `itemsize` bytes a value would exceed max_tensor_bytes(); nothing
    otherwise (at once for a size under 64 MiB)."""
    n = itemsize
    for d in shape:
        n *= max(int(d), 0)
    if n <= SMALL and ENV not in os.environ:
        return
    limit = max_tensor_bytes()
    if n > limit:
        raise AllocationTooLarge(
            f"{what}: a tensor of shape {[int(d) for d in shape]} would take {n} bytes, more "
            f"than the {limit} this machine can give one tensor now (${ENV} sets the bound)")
