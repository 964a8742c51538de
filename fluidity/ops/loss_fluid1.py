"""Losses and normalizations Fluid 1.x programs use beyond loss.py's: rank_loss,
margin_rank_loss, bpr_loss, kldiv_loss, teacher_student_sigmoid_loss, label_smooth, cos_sim,
norm (l2_normalize) — each with its gradient op (formulas as Paddle's kernels compute them).
"""
import numpy as np

from . import c_emit
from .common import grad_maker, sigmoid
from .registry import In, OpDef, Out


def _rows(ctx, slot):
    return ctx.input_shape(slot)[:-1] + [1]


# --- rank_loss, margin_rank_loss, bpr_loss ---------------------------------------------------
class RankLoss(OpDef):
    type = "rank_loss"
    inputs = (In("Label", no_grad=True), In("Left"), In("Right"))
    outputs = (Out("Out"),)
    share_lod = "Left"
    doc = "Out = log(1 + exp(Left - Right)) - Label * (Left - Right) (RankNet)."

    @staticmethod
    def infer_shape(ctx):
        ctx.share("Left", "Out")

    @staticmethod
    def kernel(label, left, right):
        o = left - right
        return (np.logaddexp(0, o) - label * o).astype(left.dtype)

    @staticmethod
    def emit(e):
        c_emit.elementwise(e, [("a", e.input("Left")), ("b", e.input("Right")),
                               ("l", e.input("Label"))],
                           [("Out", "fl::logaddexp0(o) - l * o")], "const float o = a - b;")

    grad = grad_maker("rank_loss_grad", ("Label", "Left", "Right", "Out@GRAD"),
                       ("Left", "Right"))


class RankLossGrad(OpDef):
    type = "rank_loss_grad"
    inputs = (In("Label"), In("Left"), In("Right"), In("Out@GRAD"))
    outputs = (Out("Left@GRAD", dispensable=True), Out("Right@GRAD", dispensable=True))
    infer_shape = None

    @staticmethod
    def kernel(label, left, right, dout):
        d = (dout * (sigmoid(left - right) - label)).astype(left.dtype)
        return d, -d

    @staticmethod
    def emit(e):
        c_emit.elementwise(e, [("a", e.input("Left")), ("b", e.input("Right")),
                               ("l", e.input("Label")), ("d", e.input("Out@GRAD"))],
                           [("Left@GRAD", "g"), ("Right@GRAD", "-g")],
                           "const float g = d * (fl::sigmoid(a - b) - l);")


class MarginRankLoss(OpDef):
    type = "margin_rank_loss"
    inputs = (In("X1"), In("X2"), In("Label", no_grad=True))
    outputs = (Out("Out"), Out("Activated", intermediate=True))
    attrs = {"margin": 0.0}
    share_lod = "X1"
    doc = "Out = max(0, -Label * (X1 - X2) + margin); Activated = (Out > 0)."

    @staticmethod
    def infer_shape(ctx):
        ctx.share("X1", "Out")
        ctx.share("X1", "Activated")

    @staticmethod
    def kernel(x1, x2, label, *, margin):
        out = np.maximum(0, -label * (x1 - x2) + margin).astype(x1.dtype)
        return out, (out > 0).astype(x1.dtype)

    @staticmethod
    def emit(e):
        m = c_emit.f32(float(e.attr("margin")))
        c_emit.elementwise(e, [("a", e.input("X1")), ("b", e.input("X2")),
                               ("l", e.input("Label"))],
                           [("Out", "o"), ("Activated", "o > 0.0f ? 1.0f : 0.0f")],
                           f"const float o = fl::fmaxnp(0.0f, -l * (a - b) + {m});")

    grad = grad_maker("margin_rank_loss_grad", ("Label", "Activated", "Out@GRAD"),
                       ("X1", "X2"))


class MarginRankLossGrad(OpDef):
    type = "margin_rank_loss_grad"
    inputs = (In("Label"), In("Activated"), In("Out@GRAD"))
    outputs = (Out("X1@GRAD", dispensable=True), Out("X2@GRAD", dispensable=True))
    attrs = MarginRankLoss.attrs
    infer_shape = None

    @staticmethod
    def kernel(label, act, dout):
        d = (dout * act * label).astype(dout.dtype)
        return -d, d

    @staticmethod
    def emit(e):
        c_emit.elementwise(e, [("d", e.input("Out@GRAD")), ("a", e.input("Activated")),
                               ("l", e.input("Label"))],
                           [("X1@GRAD", "-g"), ("X2@GRAD", "g")], "const float g = d * a * l;")


def _emit_bpr_inputs(e):
    """bpr_loss(_grad)'s X [..., C] (float), Label (int64, one per row; every one checked
    in [0, C) first, the run stopping at a bad one), rows and C."""
    x, lab = e.input("X"), e.input("Label")
    e.require_float(x)
    if lab.ctype != "int64_t":
        e.fail(f"Label is {lab.ctype}")
    c, n = x.dims[-1], e.prod(x.dims[:-1])
    c_emit.same_dim(e, lab.numel(), n, "Label has one class per row")
    e.code(f"for (int64_t i = 0; i < {n}; ++i) if ({lab}[i] < 0 || {lab}[i] >= {c}) {{ "
           f"std::snprintf(err, 512, "
           f"{e.c_string(f'{e.op.type}: label %lld is out of range [0, %lld)')}, "
           f"(long long){lab}[i], (long long)({c})); return {2 + e.k}; }}")
    return x, lab, n, c


class BprLoss(OpDef):
    type = "bpr_loss"
    inputs = (In("X"), In("Label", no_grad=True))
    outputs = (Out("Y"),)
    doc = ("Y[i] = -mean over j != Label[i] of log(sigmoid(X[i, Label[i]] - X[i, j])) "
           "(Bayesian personalized ranking).")

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Y", _rows(ctx, "X"), ctx.input_dtype("X"))

    @staticmethod
    def _parts(x, label):
        n, c = x.reshape(-1, x.shape[-1]).shape
        x2 = x.reshape(n, c)
        lab = label.reshape(-1).astype(np.int64)
        pos = x2[np.arange(n), lab][:, None]
        other = np.ones((n, c), bool)
        other[np.arange(n), lab] = False
        return x2, lab, pos, other, c

    @staticmethod
    def kernel(x, label):
        x2, lab, pos, other, c = BprLoss._parts(x, label)
        terms = np.logaddexp(0, -(pos - x2)) * other
        return (terms.sum(axis=1) / (c - 1)).reshape(x.shape[:-1] + (1,)).astype(x.dtype)

    @staticmethod
    def emit(e):
        """Per row: the terms (0 at the label), summed pairwise, over C - 1."""
        x, lab, n, c = _emit_bpr_inputs(e)
        y = e.output("Y", x.dims[:-1] + ["1"])
        t = e.scratch([c])
        e.code(f"for (int64_t i = 0; i < {n}; ++i) {{ const float* xr = {x} + i * {c}; "
               f"const float pos = xr[{lab}[i]]; for (int64_t j = 0; j < {c}; ++j) {t}[j] = "
               f"j == {lab}[i] ? 0.0f : fl::logaddexp0(-(pos - xr[j])); {y}[i] = "
               f"fl::pairwise_sum({t}, {c}, 1) / (float)({c} - 1); }}")

    grad = grad_maker("bpr_loss_grad", ("X", "Label", "Y@GRAD"), ("X",))


class BprLossGrad(OpDef):
    type = "bpr_loss_grad"
    inputs = (In("X"), In("Label"), In("Y@GRAD"))
    outputs = (Out("X@GRAD"),)
    infer_shape = None

    @staticmethod
    def kernel(x, label, dy):
        x2, lab, pos, other, c = BprLoss._parts(x, label)
        dyr = dy.reshape(-1, 1)
        s = sigmoid(-(pos - x2)) * other / (c - 1) * dyr      # d/dx_j of the j terms
        dx = s.copy()
        dx[np.arange(len(lab)), lab] = -s.sum(axis=1)
        return dx.reshape(x.shape).astype(x.dtype)

    @staticmethod
    def emit(e):
        x, lab, n, c = _emit_bpr_inputs(e)
        dy = e.input("Y@GRAD")
        e.require_float(dy)
        c_emit.same_dim(e, dy.numel(), n, "Y@GRAD has one value per row")
        dx = e.output("X@GRAD", x.dims)
        e.code(f"for (int64_t i = 0; i < {n}; ++i) {{ const float* xr = {x} + i * {c}; "
               f"float* g = {dx} + i * {c}; const int64_t l = {lab}[i]; const float pos = xr[l]; "
               f"for (int64_t j = 0; j < {c}; ++j) g[j] = j == l ? 0.0f : fl::sigmoid(-(pos - "
               f"xr[j])) / (float)({c} - 1) * {dy}[i]; g[l] = -fl::pairwise_sum(g, {c}, 1); }}")


# --- kldiv_loss, teacher_student_sigmoid_loss ------------------------------------------------
_KL_REDUCE = {
    "none": lambda v, x: v,
    "sum": lambda v, x: v.sum(),
    "mean": lambda v, x: v.mean(),
    "batchmean": lambda v, x: v.sum() / x.shape[0],
}
_KL_SCALE = {"none": lambda x: 1.0, "sum": lambda x: 1.0, "mean": lambda x: 1.0 / x.size,
             "batchmean": lambda x: 1.0 / x.shape[0]}


class KldivLoss(OpDef):
    type = "kldiv_loss"
    inputs = (In("X"), In("Target", no_grad=True))
    outputs = (Out("Loss"),)
    attrs = {"reduction": "mean"}
    share_lod = None
    doc = ("Loss = Target * (log(Target) - X) where Target > 0 (else 0), X being "
           "log-probabilities; reduced by `reduction` (none, sum, mean, batchmean).")

    @staticmethod
    def infer_shape(ctx):
        red = ctx.attr("reduction")
        if red not in _KL_REDUCE:
            ctx.fail(f"reduction must be one of {sorted(_KL_REDUCE)}, got '{red}'")
        shape = ctx.input_shape("X") if red == "none" else [1]      # Fluid 1.x's [1]
        ctx.set_output("Loss", shape, ctx.input_dtype("X"))

    @staticmethod
    def kernel(x, target, *, reduction):
        safe = np.where(target > 0, target, 1)
        v = np.where(target > 0, target * (np.log(safe) - x), 0)
        loss = np.asarray(_KL_REDUCE[reduction](v, x)).astype(x.dtype)
        return loss if reduction == "none" else loss.reshape(1)

    @staticmethod
    def emit(e):
        """The terms as the kernel's; a reduction sums them pairwise (numpy's full sum),
        then divides in float32."""
        x, t = e.input("X"), e.input("Target")
        red = e.attr("reduction")
        if red not in _KL_REDUCE:
            e.fail(f"reduction {red!r}")
        term = "t > 0.0f ? t * (std::log(t) - x) : 0.0f"
        if red == "none":
            c_emit.elementwise(e, [("x", x), ("t", t)], [("Loss", term)])
            return
        e.require_float(x, t)
        e.same_dims(x, t)
        v, out = e.scratch(x.dims), e.output("Loss", [])
        n = x.numel()
        div = {"sum": "", "mean": f" / (float)({n})",
               "batchmean": f" / (float)({x.dims[0] if x.ndim else '1'})"}[red]
        e.code(f"for (int64_t i = 0; i < {n}; ++i) {{ const float x = {x}[i], t = {t}[i]; "
               f"{v}[i] = {term}; }} {out}[0] = fl::pairwise_sum({v}, {n}, 1){div};")

    grad = grad_maker("kldiv_loss_grad", ("X", "Target", "Loss@GRAD"), ("X",))


class KldivLossGrad(OpDef):
    type = "kldiv_loss_grad"
    inputs = (In("X"), In("Target"), In("Loss@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = KldivLoss.attrs
    infer_shape = None
    share_lod = None

    @staticmethod
    def kernel(x, target, dloss, *, reduction):
        g = np.where(target > 0, -target, 0) * _KL_SCALE[reduction](x)
        return (g * dloss).astype(x.dtype)

    @staticmethod
    def emit(e):
        x, t, d = e.input("X"), e.input("Target"), e.input("Loss@GRAD")
        red = e.attr("reduction")
        if red not in _KL_SCALE:
            e.fail(f"reduction {red!r}")
        if red == "none":
            c_emit.elementwise(e, [("x", x), ("t", t), ("d", d)],
                               [("X@GRAD", "(t > 0.0f ? -t : 0.0f) * d")])
            return
        e.require_float(x, t, d)
        e.same_dims(x, t)
        c_emit.same_dim(e, d.numel(), "1", "Loss@GRAD is one value")
        scale = {"sum": "1.0f", "mean": f"(float)(1.0 / (double)({x.numel()}))",
                 "batchmean": f"(float)(1.0 / (double)({x.dims[0] if x.ndim else '1'}))"}[red]
        dx = e.output("X@GRAD", x.dims)
        e.code(f"for (int64_t i = 0; i < {x.numel()}; ++i) {dx}[i] = ({t}[i] > 0.0f ? "
               f"-{t}[i] : 0.0f) * {scale} * {d}[0];")


def _softplus_abs(x):
    """max(x, 0) + log(1 + exp(-|x|)) = log(1 + exp(x)), stably."""
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


class TeacherStudentSigmoidLoss(OpDef):
    type = "teacher_student_sigmoid_loss"
    inputs = (In("X"), In("Label", no_grad=True))
    outputs = (Out("Y"),)
    attrs = {"soft_max_up_bound": 15.0, "soft_max_lower_bound": -15.0}
    doc = ("Y = sigmoid cross entropy against the click z (Label < -1: z=0; < 0: z=1; "
           "< 1: z=0 plus the teacher's score Label; else z=1 plus score Label - 1).")

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Y", _rows(ctx, "X"), ctx.input_dtype("X"))

    @staticmethod
    def kernel(x, label, *, soft_max_up_bound, soft_max_lower_bound):
        sp = _softplus_abs(x)
        y = np.where(label < -1, sp, np.where(
            label < 0, sp - x, np.where(label < 1, 2 * sp - x * label,
                                        2 * sp - x - x * (label - 1))))
        return y.astype(x.dtype)

    @staticmethod
    def emit(e):
        x = e.input("X")
        if not x.ndim or x.dims[-1] != "1":
            e.fail("X is not [..., 1]")
        c_emit.elementwise(
            e, [("x", x), ("l", e.input("Label"))],
            [("Y", "l < -1.0f ? sp : (l < 0.0f ? sp - x : (l < 1.0f ? 2.0f * sp - x * l : "
                   "2.0f * sp - x - x * (l - 1.0f)))")],
            "const float sp = fl::fmaxnp(x, 0.0f) + std::log1p(std::exp(-std::fabs(x)));")

    grad = grad_maker("teacher_student_sigmoid_loss_grad", ("X", "Label", "Y@GRAD"),
                       ("X",))


class TeacherStudentSigmoidLossGrad(OpDef):
    type = "teacher_student_sigmoid_loss_grad"
    inputs = (In("X"), In("Label"), In("Y@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = TeacherStudentSigmoidLoss.attrs
    infer_shape = None

    @staticmethod
    def kernel(x, label, dy, *, soft_max_up_bound, soft_max_lower_bound):
        p = sigmoid(np.clip(x, soft_max_lower_bound, soft_max_up_bound))
        d = np.where(label < -1, p, np.where(label < 0, p - 1, np.where(
            label < 1, 2 * p - label, 2 * p - label)))
        return (d * dy).astype(x.dtype)

    @staticmethod
    def emit(e):
        lo = c_emit.f32(float(e.attr("soft_max_lower_bound")))
        hi = c_emit.f32(float(e.attr("soft_max_up_bound")))
        c_emit.elementwise(
            e, [("x", e.input("X")), ("l", e.input("Label")), ("d", e.input("Y@GRAD"))],
            [("X@GRAD", "(l < -1.0f ? p : (l < 0.0f ? p - 1.0f : 2.0f * p - l)) * d")],
            f"const float p = fl::sigmoid(x < {lo} ? {lo} : (x > {hi} ? {hi} : x));")


# --- label_smooth, cos_sim, norm -------------------------------------------------------------
class LabelSmooth(OpDef):
    type = "label_smooth"
    inputs = (In("X"), In("PriorDist", dispensable=True, no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"epsilon": 0.0}
    doc = "Out = (1 - epsilon) * X + epsilon * PriorDist (uniform 1/K without one)."

    @staticmethod
    def infer_shape(ctx):
        ctx.share("X", "Out")

    @staticmethod
    def kernel(x, prior, *, epsilon):
        p = prior.reshape(1, -1) if prior is not None else 1.0 / x.shape[-1]
        return ((1 - epsilon) * x + epsilon * p).astype(x.dtype)

    @staticmethod
    def emit(e):
        """(1 - eps) x + eps p: p a PriorDist value per last-dim index (eps times it in
        float32), or 1/K (eps / K in double, then rounded, as the kernel's Python floats)."""
        x, prior = e.input("X"), e.input("PriorDist")
        e.require_float(x, prior)
        eps = float(e.attr("epsilon"))
        k = x.dims[-1]
        if prior is not None:
            c_emit.same_dim(e, prior.numel(), k, "PriorDist has one value per class")
            add = f"{c_emit.f32(eps)} * {prior}[i % {k}]"
        else:
            add = f"(float)({eps!r} * (1.0 / (double)({k})))"
        out = e.output("Out", x.dims)
        e.code(f"for (int64_t i = 0; i < {x.numel()}; ++i) {out}[i] = "
               f"{c_emit.f32(1 - eps)} * {x}[i] + {add};")

    grad = grad_maker("label_smooth_grad", ("Out@GRAD",), ("X",))


class LabelSmoothGrad(OpDef):
    type = "label_smooth_grad"
    inputs = (In("Out@GRAD"),)
    outputs = (Out("X@GRAD"),)
    attrs = LabelSmooth.attrs
    infer_shape = None

    @staticmethod
    def kernel(dout, *, epsilon):
        return ((1 - epsilon) * dout).astype(dout.dtype)

    @staticmethod
    def emit(e):
        c_emit.elementwise(e, [("d", e.input("Out@GRAD"))],
                           [("X@GRAD", f"{c_emit.f32(1 - float(e.attr('epsilon')))} * d")])


def _emit_cos_inputs(e):
    """cos_sim(_grad)'s X [N, ...] and Y ([N, ...] or [1, ...]) Bufs, N, Y's rows and the
    row width, as C expressions; Y's rows other than N or 1 run the op interpreted."""
    x, y = e.input("X"), e.input("Y")
    e.require_float(x, y)
    if x.ndim < 2 or y.ndim != x.ndim:
        e.fail("X and Y are not rows of one shape")
    w = e.prod(x.dims[1:])
    c_emit.same_dim(e, e.prod(y.dims[1:]), w, "Y's rows have X's shape")
    n, ny = x.dims[0], y.dims[0]
    if ny != n:
        if e.is_lit(ny) and e.is_lit(n) and ny != "1":
            e.fail(f"Y has {ny} rows for {n} of X")
        e.check(f"{ny} != 1 && {ny} != {n}", f"{e.op.type}: Y has neither X's rows nor one")
    return x, y, n, ny, w


class CosSim(OpDef):
    type = "cos_sim"
    inputs = (In("X"), In("Y"))
    outputs = (Out("Out"), Out("XNorm", intermediate=True), Out("YNorm", intermediate=True))
    doc = ("Out[i] = cos(X[i], Y[i]) over the flattened rows (Y may be one row, used for "
           "every X row); XNorm, YNorm are the rows' L2 norms.")

    @staticmethod
    def infer_shape(ctx):
        xs, ys = ctx.input_shape("X"), ctx.input_shape("Y")
        if len(xs) != len(ys) or xs[1:] != ys[1:]:
            ctx.fail(f"X{xs} and Y{ys} must have the same row shape")
        if ys[0] not in (1, -1) and xs[0] not in (-1, ys[0]):
            ctx.fail(f"Y{ys} must have X's rows or one row")
        dt = ctx.input_dtype("X")
        ctx.set_output("Out", [xs[0], 1], dt)
        ctx.set_output("XNorm", [xs[0], 1], dt)
        ctx.set_output("YNorm", [ys[0], 1], dt)

    @staticmethod
    def kernel(x, y):
        x2, y2 = x.reshape(x.shape[0], -1), y.reshape(y.shape[0], -1)
        xn = np.sqrt((x2 * x2).sum(axis=1, keepdims=True))
        yn = np.sqrt((y2 * y2).sum(axis=1, keepdims=True))
        out = (x2 * y2).sum(axis=1, keepdims=True) / (xn * yn)
        return out.astype(x.dtype), xn.astype(x.dtype), yn.astype(x.dtype)

    @staticmethod
    def emit(e):
        """fl::cos_sim: per row the three sums pairwise as numpy's; Y's rows are X's or one
        (used for every X row), told apart at run time."""
        x, y, n, ny, w = _emit_cos_inputs(e)
        out = e.output("Out", [n, "1"])
        xn = e.output("XNorm", [n, "1"]) if e.has_output("XNorm") else e.scratch([n])
        yn = e.output("YNorm", [ny, "1"]) if e.has_output("YNorm") else e.scratch([ny])
        tmp = e.scratch([w])
        e.code(f"fl::cos_sim({x}, {y}, {n}, {ny}, {w}, {out}, {xn}, {yn}, {tmp});")

    grad = grad_maker("cos_sim_grad", ("X", "Y", "Out", "XNorm", "YNorm", "Out@GRAD"),
                       ("X", "Y"))


class CosSimGrad(OpDef):
    type = "cos_sim_grad"
    inputs = (In("X"), In("Y"), In("Out"), In("XNorm"), In("YNorm"), In("Out@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True), Out("Y@GRAD", dispensable=True))
    infer_shape = None

    @staticmethod
    def kernel(x, y, out, xn, yn, dout):
        x2, y2 = x.reshape(x.shape[0], -1), y.reshape(y.shape[0], -1)
        dx = dout * (y2 / (xn * yn) - out * x2 / (xn * xn))
        dy = dout * (x2 / (xn * yn) - out * y2 / (yn * yn))
        if y.shape[0] == 1 and x.shape[0] != 1:
            dy = dy.sum(axis=0, keepdims=True)
        return dx.reshape(x.shape).astype(x.dtype), dy.reshape(y.shape).astype(y.dtype)

    @staticmethod
    def emit(e):
        """fl::cos_sim_grad: the kernel's expressions element by element; one Y row's
        gradient summed over X's rows in order (numpy's axis-0 sum)."""
        x, y, n, ny, w = _emit_cos_inputs(e)
        out, xn, yn, d = (e.input(s) for s in ("Out", "XNorm", "YNorm", "Out@GRAD"))
        e.require_float(out, xn, yn, d)
        for b, rows in ((out, n), (xn, n), (yn, ny), (d, n)):
            c_emit.same_dim(e, b.numel(), rows, f"{b.var} has one value per row")
        dx = e.output("X@GRAD", x.dims) if e.has_output("X@GRAD") else None
        dy = e.output("Y@GRAD", y.dims) if e.has_output("Y@GRAD") else None
        if dx is None and dy is None:
            return
        e.code(f"fl::cos_sim_grad({x}, {y}, {n}, {ny}, {w}, {out}, {xn}, {yn}, {d}, "
               f"{dx or 'nullptr'}, {dy or 'nullptr'});")


def _emit_norm_dims(e):
    """norm(_grad)'s X Buf and (dims before `axis`, along it, after it)."""
    x = e.input("X")
    e.require_float(x)
    if not x.ndim:
        e.fail("X is 0-D")
    a = int(e.attr("axis"))
    if not -x.ndim <= a < x.ndim:
        e.fail(f"axis {a}")
    a %= x.ndim
    return x, e.prod(x.dims[:a]), x.dims[a], e.prod(x.dims[a + 1:])


class Norm(OpDef):
    type = "norm"
    inputs = (In("X"),)
    outputs = (Out("Out"), Out("Norm", intermediate=True))
    attrs = {"axis": 1, "epsilon": 1e-10, "is_test": False}
    doc = "Out = X / sqrt(sum(X^2 along axis) + epsilon); Norm = that root (dim kept as 1)."

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        a = ctx.attr("axis")
        if not -len(xs) <= a < len(xs):
            ctx.fail(f"axis {a} is out of range for rank {len(xs)}")
        ctx.share("X", "Out")
        ns = list(xs)
        ns[a % len(xs)] = 1
        ctx.set_output("Norm", ns, ctx.input_dtype("X"))

    @staticmethod
    def kernel(x, *, axis, epsilon):
        n = np.sqrt((x * x).sum(axis=axis, keepdims=True) + epsilon)
        return (x / n).astype(x.dtype), n.astype(x.dtype)

    @staticmethod
    def emit(e):
        """Each lane's sum of squares along `axis` (pairwise when the axis is the last,
        numpy's contiguous reduction; else in order, row by row), + epsilon, its root."""
        x, pre, m, post = _emit_norm_dims(e)
        out = e.output("Out", x.dims)
        dims = list(x.dims)
        dims[int(e.attr("axis")) % x.ndim] = "1"
        norm = e.output("Norm", dims) if e.has_output("Norm") else e.scratch(dims)
        sq = e.scratch([m])
        eps = c_emit.f32(float(e.attr("epsilon")))
        e.code(f"for (int64_t p = 0; p < {pre}; ++p) for (int64_t q = 0; q < {post}; ++q) {{ "
               f"const float* xs = {x} + p * {m} * {post} + q; for (int64_t j = 0; j < {m}; ++j) "
               f"{sq}[j] = xs[j * {post}] * xs[j * {post}]; float s; if ({post} == 1) s = "
               f"fl::pairwise_sum({sq}, {m}, 1); else {{ s = {sq}[0]; for (int64_t j = 1; j < "
               f"{m}; ++j) s += {sq}[j]; }} const float r = std::sqrt(s + {eps}); "
               f"{norm}[p * {post} + q] = r; for (int64_t j = 0; j < {m}; ++j) "
               f"{out}[p * {m} * {post} + j * {post} + q] = xs[j * {post}] / r; }}")

    grad = grad_maker("norm_grad", ("X", "Norm", "Out@GRAD"), ("X",))


class NormGrad(OpDef):
    type = "norm_grad"
    inputs = (In("X"), In("Norm"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = Norm.attrs
    infer_shape = None

    @staticmethod
    def kernel(x, norm, dout, *, axis):
        dot = (x * dout).sum(axis=axis, keepdims=True)
        return (dout / norm - x * dot / norm ** 3).astype(x.dtype)

    @staticmethod
    def emit(e):
        x, pre, m, post = _emit_norm_dims(e)
        norm, d = e.input("Norm"), e.input("Out@GRAD")
        e.require_float(norm, d)
        e.same_dims(x, d)
        c_emit.same_dim(e, norm.numel(), e.mul(pre, post), "Norm has one value per lane")
        dx = e.output("X@GRAD", x.dims)
        sq = e.scratch([m])
        e.code(f"for (int64_t p = 0; p < {pre}; ++p) for (int64_t q = 0; q < {post}; ++q) {{ "
               f"const int64_t base = p * {m} * {post} + q; for (int64_t j = 0; j < {m}; ++j) "
               f"{sq}[j] = {x}[base + j * {post}] * {d}[base + j * {post}]; float dot; if "
               f"({post} == 1) dot = fl::pairwise_sum({sq}, {m}, 1); else {{ dot = {sq}[0]; "
               f"for (int64_t j = 1; j < {m}; ++j) dot += {sq}[j]; }} const float r = "
               f"{norm}[p * {post} + q]; const float r3 = std::pow(r, 3.0f); "
               f"for (int64_t j = 0; j < "
               f"{m}; ++j) {{ const int64_t i = base + j * {post}; {dx}[i] = {d}[i] / r - "
               f"{x}[i] * dot / r3; }} }}")


# --- center_loss -------------------------------------------------------------------------------
class CenterLoss(OpDef):
    type = "center_loss"
    kind = "value"
    inputs = (In("X"), In("Label", no_grad=True), In("Centers", no_grad=True),
              In("CenterUpdateRate", no_grad=True))
    outputs = (Out("SampleCenterDiff", intermediate=True), Out("Loss"), Out("CentersOut"))
    attrs = {"cluster_num": 0, "need_update": True}
    share_lod = None
    doc = ("Loss[i] = ||X[i] - Centers[Label[i]]||^2 / 2; CentersOut (the Centers variable "
           "itself, as the layer builds it) = Centers, moved when need_update: Centers[j] += "
           "rate * sum of the diffs of class j / (1 + their count).")

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        ctx.set_output("SampleCenterDiff", xs, ctx.input_dtype("X"))
        ctx.set_output("Loss", [xs[0], 1], ctx.input_dtype("X"))
        ctx.share("Centers", "CentersOut")

    @staticmethod
    def kernel(x, label, centers, rate, *, cluster_num, need_update):
        from ..core.tensor import LoDTensor
        from ..errors import ExecutionError
        a, c = x._array, centers._array
        ids = label._array.reshape(-1).astype(np.int64)
        if ((ids < 0) | (ids >= c.shape[0])).any():
            raise ExecutionError(f"center_loss: labels must be in [0, {c.shape[0]})")
        diff = a - c[ids]
        loss = 0.5 * (diff * diff).sum(axis=1, keepdims=True)
        new = c.copy()
        if need_update:
            alpha = float(np.asarray(rate._array).reshape(-1)[0])
            sums = np.zeros_like(c)
            np.add.at(sums, ids, diff)
            counts = np.bincount(ids, minlength=c.shape[0]).reshape(-1, 1)
            new += (alpha * sums / (1 + counts)).astype(c.dtype)
        return LoDTensor(diff), LoDTensor(loss.astype(a.dtype)), LoDTensor(new)

    grad = grad_maker("center_loss_grad", ("SampleCenterDiff", "Loss@GRAD"), ("X",))


class CenterLossGrad(OpDef):
    type = "center_loss_grad"
    inputs = (In("SampleCenterDiff"), In("Loss@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = CenterLoss.attrs
    infer_shape = None
    share_lod = None

    @staticmethod
    def kernel(diff, dloss):
        return (diff * dloss.reshape(-1, 1)).astype(diff.dtype)
