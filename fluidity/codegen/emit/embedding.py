"""What both targets' emitters of the embedding lookups share."""





def lookup_operands(e):
    """W [rows, width], int64 Ids and Out ([*Ids' dims, width]; lookup_table drops Ids'
    trailing 1) for both targets."""
    w, ids = e.input("W"), e.input("Ids")
    e.require_float(w)
    if w.rows is not None:       # ids are looked up among its row ids: the interpreter does
        e.fail("W is a SelectedRows table")
    if ids.ctype != "int64_t" or w.ndim != 2:
        e.fail("ids are not int64, or W is not [rows, width]")
    lead = ids.dims[:-1] if e.op.type == "lookup_table" and ids.ndim > 1 and \
        ids.dims[-1] == "1" else ids.dims
    out = e.output("Out", lead + w.dims[1:], lod_from=ids)
    return w, ids, out
