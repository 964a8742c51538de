"""Checks the C emitters of the Fluid 1.x sequence, similarity and CRF ops share (ops never
import codegen; `e` is the codegen's Emit): a dim pair that must agree, a LoD that must be
offsets of its tensor's rows."""


def same_dim(e, a, b, what):
    """Dims a and b (C expressions) are equal: proven, or refused now when both are literals
    that differ, else checked at run time (a mismatch runs the op interpreted, where its
    kernel names what is wrong)."""
    a, b = str(a), str(b)
    if a == b:
        return
    if e.is_lit(a) and e.is_lit(b):
        e.fail(f"{what} ({a} vs {b})")
    e.check(f"{a} != {b}", f"{e.op.type}: {what}")


def sequences(e, x, slot):
    """The number of sequences of LoD input `x` (input `slot`) as a C expression; its LoD
    must be ascending offsets from 0 to its rows (checked at run time: otherwise the op runs
    interpreted and its kernel reports the LoD)."""
    if x.lod is None:
        e.fail(f"{slot} has no LoD")
    e.check(f"!fl::lod_is_offsets({x.lod}, {x.lod_len}, {x.dims[0]})",
            f"{e.op.type}: the LoD of {slot} is not offsets of its rows")
    return f"({x.lod_len} - 1)"
