"""What the C emitters of the Fluid 1.x sequence, loss, similarity and CRF ops share (ops
never import codegen; `e` is the codegen's Emit): a dim pair that must agree, a LoD that
must be offsets of its tensor's rows, a float32 constant as numpy rounds a Python scalar,
and one loop over same-shaped operands."""


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


def f32(v):
    """Python number `v` as the float32 numpy makes of it in float32 arithmetic (a weak
    scalar: the double, rounded once)."""
    return f"((float){float(v)!r})" if v == v and abs(v) != float("inf") else \
        ("NAN" if v != v else ("INFINITY" if v > 0 else "-INFINITY"))


def elementwise(e, ins, outs, pre=""):
    """One loop over the elements of same-shaped float operands: `ins` [(C name, Buf)] loaded
    as const floats, then C statements `pre`, then each output slot of `outs` [(slot, C
    expression)] the op has stored (shaped and LoD'd as the first input, or its share_lod).
    Operands of other shapes run the op interpreted (its kernel names the mismatch)."""
    first = ins[0][1]
    e.require_float(*(b for _, b in ins))
    for _, b in ins[1:]:
        e.same_dims(first, b)
    stores = []
    for slot, expr in outs:
        if e.has_output(slot):
            stores.append(f"{e.output(slot, first.dims)}[i] = {expr};")
    if not stores:
        return
    loads = " ".join(f"const float {n} = {b}[i];" for n, b in ins)
    e.code(f"for (int64_t i = 0; i < {first.numel()}; ++i) {{ {loads} {pre} "
           f"{' '.join(stores)} }}")
