"""Compiled broadcasting: how generated code walks Out = f(A, B) when the operands'
shapes differ, by Paddle's `axis` rule (the lower-rank operand lines up at `axis`; -1 is
numpy's trailing rule). Dims are C expressions as Bufs carry them."""






def _aligned_dims(big, small, axis):
    """`small` padded with "1"s to the rank of `big` by Paddle's axis rule (None where they
    do not line up); the string twin of align_for_broadcast."""
    nb = len(big)
    if axis is None or axis == -1:
        axis = nb - len(small)
    small = [str(d) for d in small]
    while small and axis + len(small) > nb and small[-1] == "1":
        small.pop()
    if axis < 0 or axis + len(small) > nb:
        return None
    return ["1"] * axis + small + ["1"] * (nb - axis - len(small))


def spans_contiguously(x_dims, y_dims, axis):
    """Whether Y, lined up with X at `axis`, covers one run of X's dims that X has in full
    (none is "1"): the (pre, n, post) loops of codegen's Emit.span then walk it."""
    if len(y_dims) > len(x_dims):
        return False
    ya = _aligned_dims(x_dims, y_dims, axis)
    if ya is None:
        return False
    cover = [k for k, d in enumerate(ya) if d != "1"]
    return not cover or all(ya[k] != "1" and str(x_dims[k]) != "1"
                            for k in range(cover[0], cover[-1] + 1))


def broadcast_plan(e, a_dims, b_dims, axis=-1):
    """How compiled code walks Out = f(A, B) under broadcasting: (out_dims, loops) where
    loops is [(trip count, A's stride, B's stride)], outermost first, as C expressions (stride
    "0" where that operand broadcasts). The lower-rank operand lines up at `axis` (Paddle's
    rule; -1 trailing, which is numpy's rule). Adjacent dims that both operands walk alike
    are merged, so a plain case is one loop. A dim that is symbolic on one side and not "1"
    on the other is checked equal at run time (else the interpreter runs the op)."""
    a_dims, b_dims = [str(d) for d in a_dims], [str(d) for d in b_dims]
    if len(a_dims) >= len(b_dims):
        a_al, b_al = a_dims, _aligned_dims(a_dims, b_dims, axis)
    else:
        a_al, b_al = _aligned_dims(b_dims, a_dims, axis), b_dims
    if a_al is None or b_al is None:
        e.fail(f"{a_dims} and {b_dims} do not line up at axis {axis}")
    out, walks = [], []             # walks: per dim, whether A / B advance along it
    for da, db in zip(a_al, b_al):
        if da == db or db == "1":
            out.append(da)
        elif da == "1":
            out.append(db)
        elif e.is_lit(da) and e.is_lit(db):
            e.fail(f"{a_dims} and {b_dims} do not broadcast")
        else:
            e.check(f"{da} != {db}", f"{e.op.type}: {a_dims} and {b_dims} differ in a dim "
                    "this compiled form does not broadcast")
            out.append(db if e.is_lit(db) else da)
        walks.append((da != "1", db != "1"))
    a_stride, b_stride = _strides(e, a_al), _strides(e, b_al)
    loops = []
    for k, d in enumerate(out):
        if d == "1":
            continue
        sa = a_stride[k] if walks[k][0] else "0"
        sb = b_stride[k] if walks[k][1] else "0"
        if loops and loops[-1][3] == walks[k]:    # merge: the outer stride is d * inner's
            loops[-1] = (e.mul(loops[-1][0], d), sa, sb, walks[k])
        else:
            loops.append((d, sa, sb, walks[k]))
    if len(loops) > 16:                           # fl::broadcast_each's index array
        e.fail(f"{len(loops)} broadcast loops")
    return out, [lp[:3] for lp in loops] or [("1", "0", "0")]


def _strides(e, dims):
    """Row-major strides of `dims` (C expressions)."""
    out, s = [], "1"
    for d in reversed(dims):
        out.append(s)
        s = e.mul(s, d)
    return out[::-1]


def broadcast_code(loops, body):
    """C++ running `body` (a lambda body over i: the flat index of Out, ia, ib: those of A
    and B) for every element of a broadcast_plan's loops (fl::broadcast_each, runtime/nn.h)."""
    dims = ", ".join(d for d, _, _ in loops)
    sa = ", ".join(s for _, s, _ in loops)
    sb = ", ".join(s for _, _, s in loops)
    return (f"{{ const int64_t bd[] = {{{dims}}}, sa[] = {{{sa}}}, sb[] = {{{sb}}}; "
            f"fl::broadcast_each({len(loops)}, bd, sa, sb, [&](int64_t i, int64_t ia, "
            f"int64_t ib) {{ {body} }}); }}")
