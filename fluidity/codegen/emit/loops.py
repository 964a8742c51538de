"""Loops emitters of several families write alike: one pass over the elements of
same-shaped float operands."""
from .checks import dense_only


def elementwise(e, expr, out_slot, ins, like):
    """Out = `expr` element by element over Bufs `ins` ({C name: Buf}, all of `like`'s dims,
    float32), each element loaded as `const float name = buf[i]`."""
    dense_only(e, *ins.values())
    e.require_float(*ins.values())
    for b in ins.values():
        if b is not like:
            e.same_dims(like, b)
    out = e.output(out_slot, like.dims)
    loads = " ".join(f"const float {k} = {b}[i];" for k, b in ins.items())
    e.code(f"for (int64_t i = 0; i < {like.numel()}; ++i) {{ {loads} {out}[i] = {expr}; }}")
    return out


def elementwise_slots(e, ins, outs, pre=""):
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
