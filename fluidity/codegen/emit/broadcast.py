"""Compiled broadcasting: how generated code walks Out = f(A, B) when the operands'
shapes differ, by Paddle's `axis` rule (ops.common.align_for_broadcast, the one rule: the
lower-rank operand lines up at `axis`; -1 is numpy's trailing rule). Dims are Dims."""
from ...errors import ShapeError
from ...ops.common import align_for_broadcast
from ..dim import dim, dims


def _aligned_dims(big, small, axis):
    """`small` padded with 1s to the rank of `big` by Paddle's axis rule, or None where they
    do not line up."""
    try:
        return dims(align_for_broadcast(dims(big), dims(small), axis))
    except ShapeError:
        return None


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
    loops is [(trip count, A's stride, B's stride)], outermost first, as Dims (stride 0
    where that operand broadcasts). The lower-rank operand lines up at `axis` (Paddle's
    rule; -1 trailing, which is numpy's rule). Adjacent dims that both operands walk alike
    are merged, so a plain case is one loop. A dim that is symbolic on one side and not "1"
    on the other is checked equal at run time (else the interpreter runs the op)."""
    a_dims, b_dims = dims(a_dims), dims(b_dims)
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
        sa = a_stride[k] if walks[k][0] else dim(0)
        sb = b_stride[k] if walks[k][1] else dim(0)
        if loops and loops[-1][3] == walks[k]:    # merge: the outer stride is d * inner's
            loops[-1] = (e.mul(loops[-1][0], d), sa, sb, walks[k])
        else:
            loops.append((d, sa, sb, walks[k]))
    if len(loops) > 16:                           # fl::broadcast_each's index array
        e.fail(f"{len(loops)} broadcast loops")
    return out, [lp[:3] for lp in loops] or [(dim(1), dim(0), dim(0))]


def _strides(e, shape):
    """Row-major strides of `shape` (Dims)."""
    out, s = [], dim(1)
    for d in reversed(shape):
        out.append(s)
        s = e.mul(s, d)
    return out[::-1]


def broadcast_code(loops, body):
    """C++ running `body` (a lambda body over i: the flat index of Out, ia, ib: those of A
    and B) for every element of a broadcast_plan's loops (fl::broadcast_each, runtime/nn.h)."""
    dims = ", ".join(str(d) for d, _, _ in loops)
    sa = ", ".join(str(s) for _, s, _ in loops)
    sb = ", ".join(str(s) for _, _, s in loops)
    return (f"{{ const int64_t bd[] = {{{dims}}}, sa[] = {{{sa}}}, sb[] = {{{sb}}}; "
            f"fl::broadcast_each({len(loops)}, bd, sa, sb, [&](int64_t i, int64_t ia, "
            f"int64_t ib) {{ {body} }}); }}")
