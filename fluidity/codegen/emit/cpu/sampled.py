"""C++ emitters of hierarchical_sigmoid and its gradient."""
from .. import register
from ..checks import same_dim


def _emit_hsig_inputs(e):
    """hierarchical_sigmoid(_grad)'s X [N, D], W [rows, D], Label (int64, one per row) and
    Bias (W's rows values, or None) Bufs, N, D, num_classes and the path width; code that
    stops the run at a label or tree node out of range, as the kernel does."""
    if e.op.input("PathTable") or e.op.input("PathCode"):
        e.fail("a custom tree (PathTable, PathCode)")
    x, w, lab, b = (e.input(s) for s in ("X", "W", "Label", "Bias"))
    e.require_float(x, w, b)
    if lab.ctype != "int64_t" or x.ndim != 2 or w.ndim != 2:
        e.fail("Label not int64, or X or W not a matrix")
    n, d = x.dims
    classes = int(e.attr("num_classes"))
    if classes < 2:
        e.fail(f"num_classes {classes}")
    same_dim(e, w.dims[1], d, "W has X's width")
    same_dim(e, lab.numel(), n, "Label has one class per row")
    if b is not None:
        same_dim(e, b.numel(), w.dims[0], "Bias has one value per row of W")
    e.code(f"{{ const int64_t bad = fl::hsig_bad_row({lab}, {n}, {classes}, {w.dims[0]}); "
           f"if (bad >= 0) {{ std::snprintf(err, 512, " + e.c_string(
               f"{e.op.type}: label %lld is out of range for num_classes={classes} or its "
               f"tree node for W with %lld rows") + ", "
           f"(long long){lab}[bad], (long long)({w.dims[0]})); return {2 + e.k}; }} }}")
    return x, w, lab, b, n, d, classes, (classes - 1).bit_length()


@register("hierarchical_sigmoid", "cpu")
def hierarchical_sigmoid(e):
    """Paddle's default tree (a custom PathTable runs interpreted): every label and
    node checked first, then fl::hsig_default row by row."""
    x, w, lab, b, n, d, classes, width = _emit_hsig_inputs(e)
    out = e.output("Out", [n, "1"])
    soft = e.output("PreOut", [n, str(width)]) if e.has_output("PreOut") else \
        e.scratch([n, str(width)])
    if e.has_output("W_Out"):
        w_out = e.output("W_Out", w.dims)
        e.code(f"std::memcpy({w_out}, {w}, {w.nbytes()});")
    e.code(f"fl::hsig_default({x}, {w}, {b or 'nullptr'}, {lab}, {n}, {d}, {classes}, "
           f"{width}, {out}, {soft});")


@register("hierarchical_sigmoid_grad", "cpu")
def hierarchical_sigmoid_grad(e):
    """Paddle's default tree and a dense W@GRAD (is_sparse's SelectedRows holds as many
    rows as the batch's paths have nodes, known only from the labels)."""
    if e.attr("is_sparse"):
        e.fail("is_sparse (W@GRAD's rows depend on the labels)")
    x, w, lab, b, n, d, classes, _ = _emit_hsig_inputs(e)
    dout = e.input("Out@GRAD")
    e.require_float(dout)
    same_dim(e, dout.numel(), n, "Out@GRAD has one value per row")
    dx = e.output("X@GRAD", x.dims) if e.has_output("X@GRAD") else None
    dw = e.output("W@GRAD", w.dims) if e.has_output("W@GRAD") else None
    db = e.output("Bias@GRAD", b.dims) if b is not None and e.has_output("Bias@GRAD") \
        else None
    e.code(f"fl::hsig_default_grad({x}, {w}, {b or 'nullptr'}, {lab}, {n}, {d}, {classes}, "
           f"{w.dims[0]}, {dout}, {dx or 'nullptr'}, {dw or 'nullptr'}, {db or 'nullptr'});")
