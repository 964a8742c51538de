"""The lines of a segment function that size its arena, overflow-checked.

Each arena slot is as large as the largest value that lives in it (lower.py colours values by
lifetime); slots follow one another. Every size is computed by runtime/sizes.h - a value's
bytes are `fl::mul` products of its dims (cir.mul), `fl::slot_size` takes the largest of a
slot's and aligns it, `fl::add_size` adds up the offsets - and any that does not fit (an
overflowed product, a negative dim, more than 2^62 bytes) makes the function return
MISMATCH before it writes anything, so its ops run interpreted and say what is too large.
A size that fits but exceeds the memory this process may take is refused by the caller when
it is asked to grow the arena (executor/native.py). An input declared with literal dims no
value could have (more bytes than the machine's physical memory) is not compiled at all: its
code could never run, and emitters would build tables of those dims.
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


def arena_lines(seg):
    """C lines (indented for the segment function) defining off<s> for each slot of `seg`
    and `need`, returning MISMATCH when a size does not fit and 1 (args[0] = need) when the
    arena given is too small."""
    members = {}
    for b in seg.bufs:
        if b.slot is not None:
            members.setdefault(b.slot, []).append(b)
    L = []
    for s in range(seg.n_slots):
        sizes = ", ".join(f"(int64_t){b.nbytes()}" for b in members.get(s, []))
        L.append(f"  const int64_t sz{s} = fl::slot_size({{{sizes}}});")
    off = "0"
    for s in range(seg.n_slots):
        L.append(f"  const int64_t off{s} = {off};")
        off = f"fl::add_size(off{s}, sz{s})"
    L.append(f"  const int64_t need = {off};")
    L.append('  if (need < 0) return fl::mismatch(err, "a size of the compiled values does not '
             'fit an int64 (or a dim is negative)");')
    L.append("  if (need > cap) { args[0] = need; return 1; }")
    return L
