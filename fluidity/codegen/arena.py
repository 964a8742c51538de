"""Whether a value a program declares could exist at all on this machine.

The arena of a segment is sized at run time, overflow-checked (render.py, runtime/sizes.h):
a size that does not fit an int64 makes the segment return MISMATCH before it writes
anything, so its ops run interpreted and say what is too large; a size that fits but exceeds
the memory this process may take is refused when the arena is asked to grow
(executor/native.py). An input declared with literal dims no value could have (more bytes
than the machine's physical memory) is not compiled at all: its code could never run, and
emitters would build tables of those dims.
"""
from ..core.limits import physical_bytes
from .cir import SIZEOF


def declared_fits(shape, ctype):
    """Whether a value of declared `shape` (its known dims; -1 counts as 1) and C type could
    exist on this machine (no more bytes than its physical memory)."""
    n = SIZEOF[ctype]
    for d in shape:
        n *= max(int(d), 1)
    return n <= physical_bytes()
