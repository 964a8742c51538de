"""What both targets' emitters of sequence_pool share: the operands."""



POOLTYPES = ("SUM", "AVERAGE", "SQRT", "MAX", "MIN", "FIRST", "LAST")


def pool_operands(e):
    """sequence_pool's X (with a LoD), Out, MaxIndex (None when absent), the pooltype, X's
    sequences b and row width w (C expressions) and pad_value as a float literal."""
    x = e.input("X")
    e.require_float(x)
    ptype = e.attr("pooltype").upper()
    if x.lod is None or ptype not in POOLTYPES:
        e.fail("X has no LoD, or an unknown pooltype")
    b, w = x.lod_len - 1, e.prod(x.dims[1:])
    out = e.output("Out", [b] + x.dims[1:], lod_from=False)
    arg = ptype in ("MAX", "MIN")
    idx = None
    if e.has_output("MaxIndex"):
        idx = e.output("MaxIndex", ([b] if arg else ["0"]) + x.dims[1:], "int32_t",
                       lod_from=False)
    elif arg:
        e.fail("MAX/MIN pooling without its MaxIndex output")
    return x, out, idx, ptype, b, w, e.literal(float(e.attr("pad_value")))


def pool_grad_operands(e):
    """X (with a LoD), Out@GRAD, the pooltype, X@GRAD, X's sequences and row width (C
    expressions)."""
    x, d = e.input("X"), e.input("Out@GRAD")
    e.require_float(x, d)
    ptype = e.attr("pooltype").upper()
    if x.lod is None or ptype not in POOLTYPES:
        e.fail("X has no LoD, or an unknown pooltype")
    g = e.output("X@GRAD", x.dims, lod_from=x)
    b, w = x.lod_len - 1, e.prod(x.dims[1:])
    return x, d, ptype, g, b, w
