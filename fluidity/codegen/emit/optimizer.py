"""What both targets' emitters of the update ops share: the operands of an update in place
and Adam's operands."""
from ...ops.optimizer_ops import paddle2_epsilon


def adam_eps_scaled(e):
    """Whether the adam op being emitted adds Paddle 2.1+'s eps sqrt(1 - beta2^t) (an op
    written by Paddle >= 2.1) rather than Fluid 1.8's eps (ops.optimizer_ops.paddle2_epsilon
    decides, for the interpreter and the compiled code alike)."""
    return paddle2_epsilon({"use_global_beta_pow": e.attr("use_global_beta_pow")})

def adam_operands(e):
    """Adam's compiled case (no beta or epsilon tensors, no amsgrad): Param, Moment1,
    Moment2, Grad, Beta1Pow, Beta2Pow, LearningRate as Bufs, and beta1, beta2 and epsilon as
    double literals."""
    for t in ("Beta1Tensor", "Beta2Tensor", "EpsilonTensor"):
        if e.op.input(t):
            e.fail(f"{t} input")
    if e.attr("amsgrad"):
        e.fail("amsgrad")
    p, (m1, m2), g, lr = update_operands(e, ("Moment1", "Moment2"))
    b1p, b2p = e.input("Beta1Pow"), e.input("Beta2Pow")
    e.require_float(b1p, b2p)
    consts = tuple(repr(float(e.attr(a))) for a in ("beta1", "beta2", "epsilon"))
    return p, m1, m2, g, b1p, b2p, lr, consts


def update_operands(e, states=()):
    """Compiled update ops share this: (Param, [states], Grad, LearningRate) as Bufs of a
    float32 step without master weights, each Out the Param/state it updates in place;
    NotCompilable otherwise. A SelectedRows Grad (`g.rows` set) has rows of Param's width."""
    if e.op.input("MasterParam"):
        e.fail("master weights")
    p, g, lr = e.input("Param"), e.input("Grad"), e.input("LearningRate")
    ss = [e.input(s) for s in states]
    e.require_float(p, g, lr, *ss)
    if g.rows is None:
        e.same_dims(p, g)
    elif g.dims[1:] != p.dims[1:]:
        e.fail(f"Grad rows {g.dims[1:]} differ from Param rows {p.dims[1:]}")
    for s in ss:
        e.same_dims(p, s)
    for out, src in e.opdef.out_of.items():
        if e.has_output(out) and e.op.output(out) != e.op.input(src):
            e.fail(f"{out} is not {src}: not an update in place")
        if e.has_output(out) and src != "MasterParam":
            e.output(out, e.input(src).dims)
    return p, ss, g, lr
