"""Loss ops: cross_entropy, cross_entropy2, softmax_with_cross_entropy,
sigmoid_cross_entropy_with_logits, huber_loss, smooth_l1_loss, log_loss, bce_loss, hinge_loss.

Hard labels are integer class ids with the class axis of size 1; a label equal to
`ignore_index` gives that position a zero loss and a zero gradient, any other id outside
[0, classes) is an error. Soft labels are distributions of the input's shape.
Logs are Paddle's "tolerable" ones: log(0) is -1e20, never -inf, so 0 * log(0) stays 0.
"""
import numpy as np

from ..errors import ExecutionError, ShapeError
from .common import grad_maker, sigmoid
from .registry import In, OpDef, Out

IGNORE_INDEX = -100  # Paddle's kIgnoreIndex
_APPROX_INF = 1e20   # Paddle's TolerableValue bound


def _log(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.clip(np.log(x), -_APPROX_INF, _APPROX_INF)


def _log_softmax(x, axis):
    """log(softmax(x)) by log-sum-exp: exact for logits of any magnitude."""
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def _hard_labels(op, label, like, axis, ignore_index, squeezed_ok=False):
    """Validate hard labels against `like` (the input whose `axis` holds the classes).
    Returns (ids safe to gather with take_along_axis, mask of ignored positions), both with
    a size-1 class axis. `squeezed_ok`: Label may also lack the class axis (cross_entropy's
    Label [N] for X [N, C], Paddle 1.8)."""
    want = like.shape[:axis] + (1,) + like.shape[axis + 1:]
    if label.dtype.kind not in "iu":
        # Fluid builds such a program and fails when it runs; so does this, saying why
        raise ExecutionError(f"{op}: hard labels must be integer class ids (int64), got "
                             f"{label.dtype} Label; cast it, or use soft_label=True for "
                             f"distributions")
    if squeezed_ok and label.shape == like.shape[:axis] + like.shape[axis + 1:]:
        label = np.expand_dims(label, axis)
    if label.shape != want:
        raise ExecutionError(f"{op}: hard Label has shape {list(label.shape)}, want "
                             f"{list(want)} (input {list(like.shape)}, class axis {axis})")
    ids = label.astype(np.int64, copy=False)
    ignored = ids == ignore_index
    depth = like.shape[axis]
    bad = ~ignored & ((ids < 0) | (ids >= depth))
    if bad.any():
        raise ExecutionError(f"{op}: label {int(ids[bad][0])} is out of range [0, {depth}) "
                             f"(ignore_index={ignore_index})")
    return np.where(ignored, 0, ids), ignored


def _fast_hard_labels(x, label, axis, soft_label, use_softmax, ignore_index):
    """(row indices, label ids) when the common case applies — 2-D input, classes last,
    hard labels all in range and none ignored — else None (the general path checks and
    reports)."""
    if soft_label or not use_softmax or x.ndim != 2 or axis != 1 or \
            label.shape != (x.shape[0], 1) or label.dtype.kind not in "iu":
        return None
    ids = label.reshape(-1)
    if ids.size and (ids.min() < 0 or ids.max() >= x.shape[1]):
        return None
    if 0 <= ignore_index < x.shape[1] and (ids == ignore_index).any():
        return None
    return np.arange(x.shape[0]), ids


def _soft_labels(op, label, like):
    if label.shape != like.shape:
        raise ExecutionError(f"{op}: soft Label has shape {list(label.shape)}, want the "
                             f"input's {list(like.shape)}")
    return label


def _check_labels(ctx, x_slot, soft, axis=-1, squeezed_ok=False):
    """Build-time check of Label against the input in `x_slot`; returns the canonical axis.
    `squeezed_ok`: hard labels may lack the class axis (Label [N] for X [N, C])."""
    xs, ls = ctx.input_shape(x_slot), ctx.input_shape("Label")
    rank = len(xs)
    if not -rank <= axis < rank:
        ctx.fail(f"axis {axis} is out of range for {x_slot} of rank {rank}")
    axis %= rank
    if squeezed_ok and not soft and len(ls) == rank - 1:
        ls = ls[:axis] + [1] + ls[axis:]
    if len(ls) != rank:
        ctx.fail(f"{x_slot} and Label must have the same rank, got {xs} and {ls}")
    for i, (a, b) in enumerate(zip(xs, ls)):
        if i == axis and not soft:
            if b > 0 and b != 1:
                ctx.fail(f"hard Label must have size 1 on the class axis {axis}, got {ls}")
        elif a > 0 and b > 0 and a != b:
            ctx.fail(f"{x_slot} {xs} and Label {ls} differ in dim {i}")
    return axis      # a float hard Label builds (as in Fluid) and fails when run (_hard_labels)


def _loss_shape(xs, axis):
    return xs[:axis] + [1] + xs[axis + 1:]


# --- cross_entropy on probabilities ------------------------------------------------------
class CrossEntropy(OpDef):
    type = "cross_entropy"
    inputs = (In("X"), In("Label", no_grad=True))
    outputs = (Out("Y"),)
    attrs = {"soft_label": False, "ignore_index": IGNORE_INDEX}
    doc = ("Y = -log(X[Label]) (hard) or -sum(Label * log(X)) (soft) over the last axis; "
           "X holds probabilities.")

    @staticmethod
    def infer_shape(ctx):
        axis = _check_labels(ctx, "X", ctx.attr("soft_label"), squeezed_ok=True)
        ctx.set_output("Y", _label_loss_shape(ctx), ctx.input_dtype("X"),
                       ctx.input_lod_level("X"))

    @staticmethod
    def kernel(x, label, *, soft_label, ignore_index):
        if soft_label:
            y = -(_soft_labels(CrossEntropy.type, label, x) * _log(x)).sum(-1, keepdims=True)
        else:
            ids, ignored = _hard_labels(CrossEntropy.type, label, x, x.ndim - 1, ignore_index,
                                        squeezed_ok=True)
            y = np.where(ignored, 0, -_log(np.take_along_axis(x, ids, -1)))
            y = y.reshape(label.shape)      # Label's own shape: [N] stays [N]
        return y.astype(x.dtype, copy=False)


    grad = staticmethod(lambda g: g.op(
        "cross_entropy_grad", {"X": g.input("X"), "Label": g.input("Label"),
                               "Y@GRAD": g.output_grad("Y")},
        {"X@GRAD": g.input_grad("X")}, g.attrs()))


class CrossEntropyGrad(OpDef):
    type = "cross_entropy_grad"
    inputs = (In("X"), In("Label"), In("Y@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = CrossEntropy.attrs
    infer_shape = None

    @staticmethod
    def kernel(x, label, dy, *, soft_label, ignore_index):
        if soft_label:
            return (-label * dy / x).astype(x.dtype, copy=False)
        ids, ignored = _hard_labels(CrossEntropy.type, label, x, x.ndim - 1, ignore_index,
                                    squeezed_ok=True)
        dy = dy.reshape(ids.shape)
        return _scatter_last(x.shape, ids, np.where(ignored, 0, -dy / np.take_along_axis(
            x, ids, -1)), x.dtype)


def _label_loss_shape(ctx):
    """Y's shape for hard labels as Paddle 1.8 infers it: Label's, its class dim 1 (a
    Label without the class dim gives Y without it); soft labels: X's, class dim 1."""
    xs, ls = ctx.input_shape("X"), ctx.input_shape("Label")
    if len(ls) == len(xs) - 1 and not (ctx.opdef.declares("soft_label") and
                                       ctx.attr("soft_label")):
        return list(ls)
    return _loss_shape(xs, len(xs) - 1)


def _refuse_squeezed_label(e, x, label):
    """A Label without the class dim makes Y Label-shaped (the kernel's rule); the compiled
    form writes Y [.., 1], so such an op runs interpreted."""
    if label.ndim == x.ndim - 1:
        e.fail("Label without the class dim (Y takes Label's shape)")


def _scatter_last(shape, ids, values, dtype, axis=-1):
    out = np.zeros(shape, dtype=dtype)
    np.put_along_axis(out, ids, values.astype(dtype, copy=False), axis)
    return out


class CrossEntropy2(OpDef):
    type = "cross_entropy2"
    inputs = (In("X"), In("Label", no_grad=True))
    outputs = (Out("Y"), Out("XShape"), Out("MatchX"))
    attrs = {"ignore_index": IGNORE_INDEX}
    doc = ("Hard-label cross_entropy that keeps MatchX = X[Label] (and X's shape in XShape, "
           "dims X + [0]) so the gradient needs no X.")

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        axis = _check_labels(ctx, "X", False, squeezed_ok=True)
        dt, lod = ctx.input_dtype("X"), ctx.input_lod_level("X")
        ctx.set_output("Y", _label_loss_shape(ctx), dt, lod)
        ctx.set_output("MatchX", _loss_shape(xs, axis), dt, lod)
        ctx.set_output("XShape", xs + [0], dt, lod)

    @staticmethod
    def kernel(x, label, *, ignore_index):
        ids, ignored = _hard_labels(CrossEntropy2.type, label, x, x.ndim - 1, ignore_index,
                                    squeezed_ok=True)
        # MatchX [.., 1] whatever Label's shape, 0 where the label is ignored (Paddle 1.8)
        match = np.where(ignored, 0, np.take_along_axis(x, ids, -1)).astype(x.dtype)
        y = np.where(ignored, 0, -_log(match)).astype(x.dtype, copy=False)
        return y.reshape(label.shape), np.empty(x.shape + (0,), x.dtype), match


    grad = staticmethod(lambda g: g.op(
        "cross_entropy_grad2", {"Label": g.input("Label"), "MatchX": g.output("MatchX"),
                                "XShape": g.output("XShape"), "Y@GRAD": g.output_grad("Y")},
        {"X@GRAD": g.input_grad("X")}, g.attrs()))


class CrossEntropyGrad2(OpDef):
    type = "cross_entropy_grad2"   # Paddle's name (not cross_entropy2_grad)
    inputs = (In("Label"), In("MatchX"), In("XShape"), In("Y@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = CrossEntropy2.attrs
    share_lod = "XShape"
    infer_shape = None

    @staticmethod
    def kernel(label, match, xshape, dy, *, ignore_index):
        shape = xshape.shape[:-1]
        ids = label.astype(np.int64, copy=False).reshape(match.shape)
        dy = dy.reshape(match.shape)
        ignored = ids == ignore_index
        return _scatter_last(shape, np.where(ignored, 0, ids),
                             np.where(ignored, 0, -dy / match), dy.dtype)


class SoftmaxWithCrossEntropy(OpDef):
    type = "softmax_with_cross_entropy"
    inputs = (In("Logits"), In("Label", no_grad=True))
    outputs = (Out("Softmax", intermediate=True), Out("Loss"))
    attrs = {"soft_label": False, "use_softmax": True, "numeric_stable_mode": True,
             "ignore_index": IGNORE_INDEX, "axis": -1}
    share_lod = "Logits"
    doc = ("Softmax = softmax(Logits) along `axis`; Loss = cross entropy of Softmax and "
           "Label, computed by log-sum-exp (always numerically stable). use_softmax=False "
           "takes Logits as probabilities.")

    @staticmethod
    def infer_shape(ctx):
        axis = _check_labels(ctx, "Logits", ctx.attr("soft_label"), ctx.attr("axis"))
        if axis != len(ctx.input_shape("Logits")) - 1 and not ctx.attr("numeric_stable_mode"):
            ctx.fail("axis must be the last one when numeric_stable_mode is False")
        xs, dt, lod = ctx.input_shape("Logits"), ctx.input_dtype("Logits"), \
            ctx.input_lod_level("Logits")
        ctx.set_output("Softmax", xs, dt, lod)
        ctx.set_output("Loss", _loss_shape(xs, axis), dt, lod)

    @staticmethod
    def kernel(logits, label, *, soft_label, use_softmax, ignore_index, axis):
        op, axis = SoftmaxWithCrossEntropy.type, axis % logits.ndim
        fast = _fast_hard_labels(logits, label, axis, soft_label, use_softmax, ignore_index)
        if fast is not None:  # [N, C] logits, in-range hard labels: plain fancy indexing
            rows, ids = fast
            shifted = logits - logits.max(axis=1, keepdims=True)
            e = np.exp(shifted)
            s = e.sum(axis=1, keepdims=True)
            loss = np.log(s) - shifted[rows, ids][:, None]
            return e / s, loss.astype(logits.dtype, copy=False)
        if use_softmax:
            logp = _log_softmax(logits, axis)
            prob = np.exp(logp)
        else:
            prob, logp = logits.copy(), _log(logits)
        if soft_label:
            loss = -(_soft_labels(op, label, logits) * logp).sum(axis=axis, keepdims=True)
        else:
            ids, ignored = _hard_labels(op, label, logits, axis, ignore_index)
            loss = np.where(ignored, 0, -np.take_along_axis(logp, ids, axis))
        dt = logits.dtype
        return prob.astype(dt, copy=False), loss.astype(dt, copy=False)


    grad = staticmethod(lambda g: g.op(
        "softmax_with_cross_entropy_grad",
        {"Label": g.input("Label"), "Softmax": g.output("Softmax"),
         "Loss@GRAD": g.output_grad("Loss")},
        {"Logits@GRAD": g.input_grad("Logits")}, g.attrs()))


class SoftmaxWithCrossEntropyGrad(OpDef):
    type = "softmax_with_cross_entropy_grad"
    inputs = (In("Label"), In("Softmax"), In("Loss@GRAD"))
    outputs = (Out("Logits@GRAD"),)
    attrs = SoftmaxWithCrossEntropy.attrs
    share_lod = "Softmax"
    infer_shape = None

    @staticmethod
    def kernel(label, prob, dloss, *, soft_label, use_softmax, ignore_index, axis):
        op, axis, dt = SoftmaxWithCrossEntropy.type, axis % prob.ndim, prob.dtype
        fast = _fast_hard_labels(prob, label, axis, soft_label, use_softmax, ignore_index)
        if fast is not None and dloss.shape == (prob.shape[0], 1):
            rows, ids = fast
            d = prob * dloss
            d[rows, ids] -= dloss[:, 0]
            return d.astype(dt, copy=False)
        if soft_label:
            target = _soft_labels(op, label, prob)
            d = (prob - target) if use_softmax else -target / prob
            return (d * dloss).astype(dt, copy=False)
        ids, ignored = _hard_labels(op, label, prob, axis, ignore_index)
        dloss = np.where(ignored, 0, dloss)
        if not use_softmax:  # gradient of -log(prob[label]) only touches the label's entry
            return _scatter_last(prob.shape, ids, -dloss / np.take_along_axis(prob, ids, axis),
                                 dt, axis)
        d = prob * dloss
        np.put_along_axis(d, ids, np.take_along_axis(d, ids, axis) - dloss, axis)
        return d.astype(dt, copy=False)


# --- elementwise losses ----------------------------------------------------------------------
def _same_shape(ctx, a, b):
    sa, sb = ctx.input_shape(a), ctx.input_shape(b)
    if len(sa) != len(sb) or any(x > 0 and y > 0 and x != y for x, y in zip(sa, sb)):
        ctx.fail(f"{a} {sa} and {b} {sb} must have the same shape")
    return sa


def _runtime_same_shape(op, a, b, names=("X", "Label")):
    if a.shape != b.shape:
        raise ExecutionError(f"{op}: {names[0]} {list(a.shape)} and {names[1]} "
                             f"{list(b.shape)} must have the same shape")


def _x_label_grad(g):
    """Grad op reading X, Label and Out@GRAD, writing X@GRAD."""
    g.op(g.fwd.type + "_grad", {"X": g.input("X"), "Label": g.input("Label"),
                                "Out@GRAD": g.output_grad("Out")},
         {"X@GRAD": g.input_grad("X")}, g.attrs())


class SigmoidCrossEntropyWithLogits(OpDef):
    type = "sigmoid_cross_entropy_with_logits"
    inputs = (In("X"), In("Label", no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"normalize": False, "ignore_index": IGNORE_INDEX}
    doc = ("Out = max(X, 0) - X * Label + log(1 + exp(-|X|)), elementwise; 0 where Label == "
           "ignore_index; normalize divides by the number of positions not ignored.")

    @staticmethod
    def infer_shape(ctx):
        _same_shape(ctx, "X", "Label")
        ctx.share("X", "Out")

    @staticmethod
    def _weight(label, normalize, ignore_index):
        """1/norm where counted, 0 where ignored (Paddle compares int(label))."""
        keep = np.trunc(label) != ignore_index
        return keep / max(int(keep.sum()), 1) if normalize else keep

    @staticmethod
    def kernel(x, label, *, normalize, ignore_index):
        op = SigmoidCrossEntropyWithLogits
        _runtime_same_shape(op.type, x, label)
        out = np.maximum(x, 0) - x * label + np.log1p(np.exp(-np.abs(x)))
        return (out * op._weight(label, normalize, ignore_index)).astype(x.dtype, copy=False)

    grad = staticmethod(_x_label_grad)


class SigmoidCrossEntropyWithLogitsGrad(OpDef):
    type = "sigmoid_cross_entropy_with_logits_grad"
    inputs = (In("X"), In("Label"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = SigmoidCrossEntropyWithLogits.attrs
    infer_shape = None

    @staticmethod
    def kernel(x, label, dout, *, normalize, ignore_index):
        w = SigmoidCrossEntropyWithLogits._weight(label, normalize, ignore_index)
        return ((sigmoid(x) - label) * dout * w).astype(x.dtype, copy=False)


class HuberLoss(OpDef):
    type = "huber_loss"
    inputs = (In("X"), In("Y"))
    outputs = (Out("Residual", intermediate=True), Out("Out"))
    attrs = {"delta": 1.0}
    doc = "Residual = Y - X; Out = r^2/2 where |r| <= delta, else delta * (|r| - delta/2)."

    @staticmethod
    def infer_shape(ctx):
        _same_shape(ctx, "X", "Y")
        ctx.share("X", "Residual")
        ctx.share("X", "Out")

    @staticmethod
    def kernel(x, y, *, delta):
        _runtime_same_shape(HuberLoss.type, x, y, ("X", "Y"))
        r = y - x
        a = np.abs(r)
        out = np.where(a <= delta, 0.5 * r * r, delta * (a - 0.5 * delta))
        return r, out.astype(x.dtype, copy=False)


    grad = staticmethod(lambda g: g.op(
        "huber_loss_grad", {"Residual": g.output("Residual"), "Out@GRAD": g.output_grad("Out")},
        {"X@GRAD": g.input_grad("X"), "Y@GRAD": g.input_grad("Y")}, g.attrs()))


class HuberLossGrad(OpDef):
    type = "huber_loss_grad"
    inputs = (In("Residual"), In("Out@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True), Out("Y@GRAD", dispensable=True))
    attrs = HuberLoss.attrs
    share_lod = "Residual"
    infer_shape = None

    @staticmethod
    def kernel(r, dout, *, delta):
        dr = (np.clip(r, -delta, delta) * dout).astype(r.dtype, copy=False)
        return -dr, dr


def _smooth_l1_grad(g):
    ins = {"Diff": g.output("Diff"), "Out@GRAD": g.output_grad("Out")}
    for w in ("InsideWeight", "OutsideWeight"):
        if g.input(w):
            ins[w] = g.input(w)
    g.op("smooth_l1_loss_grad", ins,
         {"X@GRAD": g.input_grad("X"), "Y@GRAD": g.input_grad("Y")}, g.attrs())


class SmoothL1Loss(OpDef):
    type = "smooth_l1_loss"
    share_lod = None
    lod_outputs = ("Diff", "Out")
    inputs = (In("X"), In("Y"), In("InsideWeight", dispensable=True, no_grad=True),
              In("OutsideWeight", dispensable=True, no_grad=True))
    outputs = (Out("Diff", intermediate=True), Out("Out"))
    attrs = {"sigma": 1.0}
    doc = ("Diff = (X - Y) * InsideWeight; Out[i] = sum over the row of OutsideWeight * "
           "smooth_l1(Diff), where smooth_l1(d) = (sigma d)^2/2 if |d| < 1/sigma^2 else "
           "|d| - 0.5/sigma^2. Out is [N, 1].")

    @staticmethod
    def infer_shape(ctx):
        xs = _same_shape(ctx, "X", "Y")
        if len(xs) < 2:
            ctx.fail(f"X must have rank >= 2 ([N, ...]), got {xs}")
        for w in ("InsideWeight", "OutsideWeight"):
            if ctx.has_input(w):
                _same_shape(ctx, "X", w)
        ctx.share("X", "Diff")
        ctx.set_output("Out", [xs[0], 1], ctx.input_dtype("X"))

    @staticmethod
    def kernel(x, y, inside, outside, *, sigma):
        _runtime_same_shape(SmoothL1Loss.type, x, y, ("X", "Y"))
        s2 = sigma * sigma
        d = x - y if inside is None else (x - y) * inside
        a = np.abs(d)
        val = np.where(a < 1.0 / s2, 0.5 * s2 * d * d, a - 0.5 / s2)
        if outside is not None:
            val = val * outside
        out = val.reshape(x.shape[0], -1).sum(axis=1, keepdims=True)
        return d.astype(x.dtype, copy=False), out.astype(x.dtype, copy=False)


    grad = staticmethod(_smooth_l1_grad)


class SmoothL1LossGrad(OpDef):
    type = "smooth_l1_loss_grad"
    inputs = (In("InsideWeight", dispensable=True), In("OutsideWeight", dispensable=True),
              In("Diff"), In("Out@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True), Out("Y@GRAD", dispensable=True))
    attrs = SmoothL1Loss.attrs
    share_lod = None
    infer_shape = None

    @staticmethod
    def kernel(inside, outside, d, dout, *, sigma):
        s2 = sigma * sigma
        g = np.where(np.abs(d) < 1.0 / s2, s2 * d, np.sign(d))
        for w in (inside, outside):
            if w is not None:
                g = g * w
        g = (g * dout.reshape((-1,) + (1,) * (d.ndim - 1))).astype(d.dtype, copy=False)
        return g, -g


class LogLoss(OpDef):
    type = "log_loss"
    inputs = (In("Predicted"), In("Labels", no_grad=True))
    outputs = (Out("Loss"),)
    attrs = {"epsilon": 1e-4}
    share_lod = "Predicted"
    doc = "Loss = -Labels * log(P + eps) - (1 - Labels) * log(1 - P + eps); P is [N, 1]."

    @staticmethod
    def infer_shape(ctx):
        ps = _same_shape(ctx, "Predicted", "Labels")
        if len(ps) != 2 or ps[1] not in (1, -1):
            ctx.fail(f"Predicted must be [N, 1], got {ps}")
        ctx.share("Predicted", "Loss")

    @staticmethod
    def kernel(p, label, *, epsilon):
        _runtime_same_shape(LogLoss.type, p, label, ("Predicted", "Labels"))
        out = -label * np.log(p + epsilon) - (1 - label) * np.log(1 - p + epsilon)
        return out.astype(p.dtype, copy=False)


    grad = staticmethod(lambda g: g.op(
        "log_loss_grad", {"Predicted": g.input("Predicted"), "Labels": g.input("Labels"),
                          "Loss@GRAD": g.output_grad("Loss")},
        {"Predicted@GRAD": g.input_grad("Predicted")}, g.attrs()))


class LogLossGrad(OpDef):
    type = "log_loss_grad"
    inputs = (In("Predicted"), In("Labels"), In("Loss@GRAD"))
    outputs = (Out("Predicted@GRAD"),)
    attrs = LogLoss.attrs
    share_lod = "Predicted"
    infer_shape = None

    @staticmethod
    def kernel(p, label, dloss, *, epsilon):
        d = -label / (p + epsilon) + (1 - label) / (1 - p + epsilon)
        return (d * dloss).astype(p.dtype, copy=False)


class BceLoss(OpDef):
    type = "bce_loss"
    inputs = (In("X"), In("Label", no_grad=True))
    outputs = (Out("Out"),)
    doc = ("Out = -(Label * log(X) + (1 - Label) * log(1 - X)), logs floored at -100; X must "
           "lie in [0, 1].")

    @staticmethod
    def infer_shape(ctx):
        _same_shape(ctx, "X", "Label")
        ctx.share("X", "Out")

    @staticmethod
    def kernel(x, label):
        _runtime_same_shape(BceLoss.type, x, label)
        if x.size and (x.min() < 0 or x.max() > 1):
            raise ExecutionError(f"bce_loss: X must lie in [0, 1], got values in "
                                 f"[{x.min()}, {x.max()}]")
        with np.errstate(divide="ignore"):
            lx, l1x = np.maximum(np.log(x), -100), np.maximum(np.log(1 - x), -100)
        return (-(label * lx + (1 - label) * l1x)).astype(x.dtype, copy=False)


    grad = staticmethod(_x_label_grad)


class BceLossGrad(OpDef):
    type = "bce_loss_grad"
    inputs = (In("X"), In("Label"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    infer_shape = None

    @staticmethod
    def kernel(x, label, dout):
        return (dout * (x - label) / np.maximum((1 - x) * x, 1e-12)).astype(x.dtype,
                                                                            copy=False)


# --- hinge_loss ------------------------------------------------------------------------------
class HingeLoss(OpDef):
    type = "hinge_loss"
    inputs = (In("Logits"), In("Labels", no_grad=True))
    outputs = (Out("Loss"),)
    share_lod = "Logits"
    doc = ("Loss = max(1 - Logits * (2 Labels - 1), 0): Labels are 0 or 1; Logits and Labels "
           "[N, 1].")

    @staticmethod
    def infer_shape(ctx):
        ps, ls = ctx.input_shape("Logits"), ctx.input_shape("Labels")
        if len(ps) != 2 or ps[1] != 1:
            ctx.fail(f"Logits must be [batch_size, 1], got {ps}")
        if len(ls) != 2 or any(p >= 0 and q >= 0 and p != q for p, q in zip(ps, ls)):
            ctx.fail(f"Labels{ls} must have Logits' shape {ps}")
        ctx.set_output("Loss", [ps[0], 1], ctx.input_dtype("Logits"),
                       ctx.input_lod_level("Logits"))

    @staticmethod
    def kernel(x, y):
        if x.shape != y.shape:
            raise ShapeError(f"hinge_loss: Logits{list(x.shape)} and Labels{list(y.shape)} "
                             f"differ")
        return np.maximum(1 - x * (2 * y - 1), 0).astype(x.dtype)

    grad = grad_maker("hinge_loss_grad", ("Logits", "Labels", "Loss@GRAD"), ("Logits",))


class HingeLossGrad(OpDef):
    type = "hinge_loss_grad"
    inputs = (In("Logits"), In("Labels"), In("Loss@GRAD"))
    outputs = (Out("Logits@GRAD"),)
    infer_shape = None

    @staticmethod
    def kernel(x, y, dloss):
        alt = 2 * y - 1
        return (dloss * (x * alt < 1) * -alt).astype(x.dtype)
