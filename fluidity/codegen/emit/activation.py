"""What both targets' emitters of softmax share: its operands (the table-driven
activations are emit/elementwise.py's rows)."""



def softmax_grad_operands(e):
    """softmax_grad's compiled case (softmax over the last axis): Out, Out@GRAD and X@GRAD."""
    o, d = e.input("Out"), e.input("Out@GRAD")
    e.require_float(o, d)
    if e.attr("axis") % max(o.ndim, 1) != o.ndim - 1:
        e.fail("softmax over another axis than the last")
    e.same_dims(o, d)
    dx = e.output("X@GRAD", o.dims)
    return o, d, dx


def softmax_operands(e):
    """softmax's compiled case (over the last axis): X and Out."""
    x = e.input("X")
    e.require_float(x)
    if e.attr("axis") % max(x.ndim, 1) != x.ndim - 1:
        e.fail("softmax over another axis than the last")
    return x, e.output("Out", x.dims)


