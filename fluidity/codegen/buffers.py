"""Stage 2 of lowering: a segment's buffer plan. Which values leave the segment (its
outputs: read by a later op, kept for a fetch, or a variable of an outer block), and where
every temporary, output and scratch buffer lives: slots of one arena, coloured by lifetime
(`ir.memory_plan.colour_by_lifetime`: buffers whose lifetimes never overlap share a slot),
sized at run time from their symbolic dims. Persistables are updated in their own memory
and take no slot. A value an op only copies (Emit.copy_code) shares its source's slot when
no later op reads the source: the copy is then left out.
"""
from ..ir.memory_plan import colour_by_lifetime
from .cir import ArrayBuf, HeldBuf

ARENA_KINDS = ("temp", "output", "scratch")


def plan_buffers(seg, later, keep, block):
    """Set `seg.outputs` (in args order), each arena buffer's `slot`, `seg.n_slots` and
    `seg.inplace`. `later`: names ops after the segment read; `keep`: names the caller
    keeps (fetches); `block`: the lowered block (a value of an outer block's variable
    leaves too)."""
    seg.outputs = _outputs(seg, later, keep, block)
    arena = [b for b in seg.bufs if b.kind in ARENA_KINDS]
    sizes = {b.name: b.alloc_nbytes() for b in arena}
    life = {b.name: (b.first, b.last) for b in arena}
    copies = _copies(seg)
    same = dict(sizes)
    for dst, src in copies:        # of one size by copy_code's contract, however written
        same[dst] = same[src]
    slots, seg.inplace, seg.n_slots = colour_by_lifetime(same, life, copies)
    for b in arena:
        b.slot = slots[b.name]
    return seg


def _copies(seg):
    """[(dst, src) buffer names] of the copies (OpUnit.shares) whose source no op reads
    after the copying one: arena values of one ctype, neither a SelectedRows nor sized by
    a bound. colour_by_lifetime takes a pair when their sizes are also the same."""
    pairs = []
    for unit in seg.units:
        for _, dst, src in unit.shares:
            if src.kind == "temp" and dst.kind in ("temp", "output") and \
                    src.last == unit.k and dst.first == unit.k and src.ctype == dst.ctype \
                    and src.rows is None and dst.rows is None and \
                    src.cap is None and dst.cap is None:
                pairs.append((dst.name, src.name))
    return pairs


def shared_copy_lines(seg, unit):
    """The indexes of `unit`'s lines left out: copies whose two buffers share a slot."""
    return {at for at, dst, src in unit.shares if (dst.name, src.name) in seg.inplace}


def _outputs(seg, later, keep, block):
    """The values that leave the segment; a temp that leaves becomes an output, alive to
    the segment's end; a tensor array that leaves is handed back whole (its record: the
    address of a block the caller copies and frees, abi.py)."""
    end, outs = len(seg.sites), []
    for name, buf in seg.values.items():
        if isinstance(buf, (ArrayBuf, HeldBuf)):     # handed back as blocks
            if name in later or name in keep:
                outs.append(buf)
        elif buf.kind == "inout":
            outs.append(buf)
        elif buf.kind == "temp":
            v = block.find_var_recursive(name)
            outside = v is not None and v.name not in block.vars
            if name in later or name in keep or outside:
                buf.kind, buf.last = "output", end
                if buf.rows is not None:
                    buf.rows.kind, buf.rows.last = "output", end
                outs.append(buf)
    return outs


def slot_members(seg):
    """{slot: [the buffers that share it]} of a planned segment."""
    members = {}
    for b in seg.bufs:
        if b.slot is not None:
            members.setdefault(b.slot, []).append(b)
    return members
