"""Checks emitters make of their operands' shapes: proven now where the dims are literals,
refused (NotCompilable) where literals disagree, else preconditions tested at run time
(a mismatch runs the segment interpreted, where the kernel names what is wrong)."""






def same_dim(e, a, b, what):
    """Dims a and b (C expressions) are equal: proven, or refused now when both are literals
    that differ, else checked at run time."""
    a, b = str(a), str(b)
    if a == b:
        return
    if e.is_lit(a) and e.is_lit(b):
        e.fail(f"{what} ({a} vs {b})")
    e.check(f"{a} != {b}", f"{e.op.type}: {what}")


def check_dims(e, buf, dims, what):
    """Buf `buf` has `dims` (C expressions; `what` names them): NotCompilable where the rank
    or two literals differ, run-time checks where a dim is symbolic."""
    if buf.ndim != len(dims):
        e.fail(f"{buf.var}{buf.dims} is not {what}{list(dims)}")
    for got, want in zip(buf.dims, dims):
        if got != str(want):
            if e.is_lit(got) and e.is_lit(want):
                e.fail(f"{buf.var}{buf.dims} is not {what}{list(dims)}")
            e.check(f"{got} != {want}", f"{e.op.type}: {buf.var} is not {what}'s shape")


def sequences(e, x, slot):
    """The number of sequences of LoD input `x` (input `slot`) as a C expression; its LoD
    must be ascending offsets from 0 to its rows (checked at run time: otherwise the op runs
    interpreted and its kernel reports the LoD)."""
    if x.lod is None:
        e.fail(f"{slot} has no LoD")
    e.check(f"!fl::lod_is_offsets({x.lod}, {x.lod_len}, {x.dims[0]})",
            f"{e.op.type}: the LoD of {slot} is not offsets of its rows")
    return x.lod_len - 1


def dense_only(e, *bufs):
    """NotCompilable for a SelectedRows input (its Buf holds the rows, the kernel a dense
    tensor)."""
    for b in bufs:
        if b is not None and b.rows is not None:
            e.fail(f"{b.var} is SelectedRows")


def random_seed(e, slot, default):
    """The C expression of a random op's seed: input `slot`'s first value (an int32 or
    int64 tensor, checked non-empty) when the op has one, else `default` (an int the
    emitter read from the op's attributes); 0 means the op's [key, run] state."""
    if e.op.input(slot):
        s = e.input(slot)
        if s.ctype not in ("int32_t", "int64_t"):
            e.fail(f"{slot} is {s.ctype}")
        e.check(f"{s.numel()} < 1", f"{e.op.type}: {slot} is empty")
        return f"(int64_t){s}[0]"
    return f"{int(default)}LL"
