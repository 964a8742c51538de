"""What both targets' emitters of cross_entropy2 and softmax_with_cross_entropy share:
their operands and checks."""







def refuse_squeezed_label(e, x, label):
    """A Label without the class dim makes Y Label-shaped (the kernel's rule); the compiled
    form writes Y [.., 1], so such an op runs interpreted."""
    if label.ndim == x.ndim - 1:
        e.fail("Label without the class dim (Y takes Label's shape)")


def cross_entropy2_operands(e):
    """cross_entropy2's checks and buffers for both targets: X, Label, X's rows and
    classes, Y, MatchX and ignore_index."""
    x, label = e.input("X"), e.input("Label")
    e.require_float(x)
    if label.ctype != "int64_t":
        e.fail("labels are not int64")
    refuse_squeezed_label(e, x, label)
    rows, cols = e.prod(x.dims[:-1]), x.dims[-1]
    e.check(f"{label.numel()} != {rows}", "cross_entropy2: Label needs one id per row of X")
    y = e.output("Y", x.dims[:-1] + ["1"])
    match = e.output("MatchX", x.dims[:-1] + ["1"])
    if e.has_output("XShape"):
        e.output("XShape", x.dims + ["0"])
    ig = e.attr("ignore_index")
    return x, label, rows, cols, y, match, ig


def cross_entropy_grad2_operands(e):
    """cross_entropy_grad2's checks and buffers for both targets: Label, MatchX, Y@GRAD,
    X's rows and classes, X@GRAD and ignore_index."""
    label, match, xshape, dy = (e.input("Label"), e.input("MatchX"), e.input("XShape"),
                                e.input("Y@GRAD"))
    e.require_float(match, dy)
    if label.ctype != "int64_t":
        e.fail("labels are not int64")
    dims = xshape.dims[:-1]
    rows, cols = e.prod(dims[:-1]), dims[-1]
    g = e.output("X@GRAD", dims, dy.ctype)
    ig = e.attr("ignore_index")
    return label, match, dy, rows, cols, g, ig


# --- softmax_with_cross_entropy on logits ------------------------------------------------
def softmax_xent_operands(e):
    """softmax_with_cross_entropy's compiled case for both targets (hard int64 labels over
    the last axis, with softmax): Logits, Label, rows, classes, Softmax and Loss."""
    if e.attr("soft_label") or not e.attr("use_softmax"):
        e.fail("soft labels, or no softmax")
    x, label = e.input("Logits"), e.input("Label")
    e.require_float(x)
    if label.ctype != "int64_t":
        e.fail("labels are not int64")
    if e.attr("axis") % x.ndim != x.ndim - 1:
        e.fail("classes on another axis than the last")
    rows, cols = e.prod(x.dims[:-1]), x.dims[-1]
    e.check(f"{label.numel()} != {rows}", "softmax_with_cross_entropy: Label needs one "
            "id per row of Logits")
    prob = e.output("Softmax", x.dims)
    loss = e.output("Loss", x.dims[:-1] + ["1"])
    return x, label, rows, cols, prob, loss


def softmax_xent_grad_operands(e):
    """softmax_with_cross_entropy_grad's compiled case for both targets (as the forward's):
    Label, Softmax, Loss@GRAD, rows, classes and Logits@GRAD."""
    if e.attr("soft_label") or not e.attr("use_softmax"):
        e.fail("soft labels, or no softmax")
    label, prob, dloss = e.input("Label"), e.input("Softmax"), e.input("Loss@GRAD")
    e.require_float(prob, dloss)
    if label.ctype != "int64_t":
        e.fail("labels are not int64")
    if e.attr("axis") % prob.ndim != prob.ndim - 1:
        e.fail("classes on another axis than the last")
    rows, cols = e.prod(prob.dims[:-1]), prob.dims[-1]
    d = e.output("Logits@GRAD", prob.dims)
    return label, prob, dloss, rows, cols, d
