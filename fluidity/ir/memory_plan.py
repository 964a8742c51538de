"""A static memory plan: temporaries placed at offsets of one arena.

Input: each temporary's size and lifetime (first write, last use) over a fixed op order, and
the in-place pairs (op i may write output `o` into input `x`'s memory when op i is x's last
use and both have the same size and dtype). In-place partners become one *group* whose
lifetime is the union of theirs. Groups are then placed by size-sorted interval colouring
(onert's "WIC" planner): largest first, each at the best-fitting gap among the groups already
placed whose lifetimes overlap its own; groups that never live at the same time share bytes.

`capacity` is the arena size the plan needs; `naive_bytes` the sum of all sizes (what keeping
every temporary, as the interpreter does, costs); `live_bytes` the most bytes alive at any op,
a lower bound for any plan.
"""
import bisect

import numpy as np

from ..core import dtypes

ALIGN = 64


def _round(n):
    return (n + ALIGN - 1) // ALIGN * ALIGN


def var_nbytes(var, batch):
    """Bytes of a dense variable whose -1 dims are `batch`; None when its desc can't say."""
    shape, dt = var.shape, var.dtype
    if not shape or dt is None or any(d == 0 or d < -1 for d in shape):
        return None
    try:
        itemsize = np.dtype(dtypes.to_numpy(dt)).itemsize
    except Exception:
        return None
    n = itemsize
    for d in shape:
        n *= batch if d == -1 else d
    return n


class _Group:
    __slots__ = ("names", "size", "first", "last", "offset")

    def __init__(self, name, size, first, last):
        self.names, self.size, self.first, self.last = [name], size, first, last
        self.offset = None


def place(groups):
    """Set each group's offset; return the capacity (size-sorted interval colouring)."""
    placed = []   # groups already placed, sorted by offset
    capacity = 0
    for g in sorted(groups, key=lambda g: (-g.size, g.first, g.names[0])):
        busy = [(p.offset, p.offset + p.size) for p in placed
                if p.first <= g.last and g.first <= p.last]
        best, best_gap, at = None, None, 0
        for lo, hi in busy:          # busy is sorted by offset
            gap = lo - at
            if gap >= g.size and (best_gap is None or gap < best_gap):
                best, best_gap = at, gap
            at = max(at, hi)
        g.offset = best if best is not None else at
        capacity = max(capacity, g.offset + g.size)
        bisect.insort(placed, g, key=lambda p: p.offset)
    return capacity


def group_in_place(sizes, lifetimes, inplace):
    """In-place partners as one group: ({name: its group}, [(out, x) pairs taken]). `sizes`
    may be numbers or any values compared with == (the code generator's size expressions);
    a pair is taken when x's lifetime ends where out's begins and their sizes are equal."""
    group_of = {}
    for n, size in sizes.items():
        first, last = lifetimes[n]
        group_of[n] = _Group(n, size, first, last)
    taken = []
    for out, x in inplace:
        g, go = group_of[x], group_of[out]
        if go is g or len(go.names) > 1 or g.last != lifetimes[x][1] or go.size != g.size:
            continue
        g.names.append(out)
        g.last = max(g.last, go.last)
        group_of[out] = g
        taken.append((out, x))
    return group_of, taken


def colour_by_lifetime(sizes, lifetimes, inplace=()):
    """For sizes known only at run time: ({name: slot}, [in-place pairs taken], n slots).
    Groups that never live at the same time share a slot (interval colouring in order of
    first write, which uses the fewest slots); a slot's size is then the largest of its
    members' sizes, and slots lie side by side in one arena."""
    group_of, taken = group_in_place(sizes, lifetimes, inplace)
    groups = sorted({id(g): g for g in group_of.values()}.values(),
                    key=lambda g: (g.first, g.names[0]))
    free, slot_of_group, n = [], {}, 0     # free: (last use, slot) of slots whose group ended
    busy = []
    for g in groups:
        busy.sort()
        while busy and busy[0][0] < g.first:
            free.append(busy.pop(0)[1])
        if free:
            slot = free.pop(0)
        else:
            slot, n = n, n + 1
        slot_of_group[id(g)] = slot
        busy.append((g.last, slot))
    return {name: slot_of_group[id(g)] for name, g in group_of.items()}, taken, n


class MemoryPlan:
    """Where each planned temporary lives: `offsets[name] = (offset, nbytes)`."""

    def __init__(self, sizes, lifetimes, inplace=(), batch=None, label="block 0"):
        """sizes: {name: nbytes}; lifetimes: {name: (first, last)}; inplace: [(out, x)]
        pairs in op order, already checked to be legal for the op."""
        self.batch, self.label = batch, label
        group_of, self.inplace = group_in_place(
            {n: _round(size) for n, size in sizes.items()}, lifetimes, inplace)
        groups = list({id(g): g for g in group_of.values()}.values())
        self.capacity = place(groups)
        self.offsets = {n: (group_of[n].offset, sizes[n]) for n in sizes}
        self.naive_bytes = sum(sizes.values())
        self.live_bytes = self._live_peak(groups)
        self.n_groups = len(groups)

    @staticmethod
    def _live_peak(groups):
        events = []
        for g in groups:
            events.append((g.first, 0, g.size))
            events.append((g.last, 1, -g.size))
        live = peak = 0
        for _, _, d in sorted(events):
            live += d
            peak = max(peak, live)
        return peak

    def report(self):
        mib = 1 << 20
        ratio = self.capacity / self.naive_bytes if self.naive_bytes else 1.0
        batch = f", batch {self.batch}" if self.batch is not None else ""
        return (f"memory plan of {self.label}{batch}: {len(self.offsets)} temporaries in "
                f"{self.n_groups} groups ({len(self.inplace)} in place)\n"
                f"  naive sum {self.naive_bytes / mib:.2f} MiB -> arena "
                f"{self.capacity / mib:.2f} MiB ({ratio:.1%}); "
                f"live lower bound {self.live_bytes / mib:.2f} MiB")

    __str__ = report
