"""C++ emitters of the losses and their gradients: cross_entropy(2),
softmax_with_cross_entropy, sigmoid_cross_entropy_with_logits, huber, smooth_l1, log, bce,
rank, margin_rank, bpr, kldiv, teacher_student_sigmoid, label_smooth, cos_sim, norm, hinge
and modified_huber."""
from .. import register
from ..checks import same_dim
from ..literals import f32
from ..loops import elementwise_slots
from ..loss import (cross_entropy2_operands, cross_entropy_grad2_operands,
                    refuse_squeezed_label, softmax_xent_grad_operands, softmax_xent_operands)


# sigmoid_cross_entropy_with_logits: C over element i of x, l (Label): `v` the op's value
# (or its gradient); the emitter weighs it by whether Label is counted, / max(counted, 1)
SIGMOID_XENT_VALUE = ("float v = std::max(xv, 0.0f) - xv * lv + "
                      "std::log1p(std::exp(-std::fabs(xv)));")
SIGMOID_XENT_GRAD = "float v = (fl::sigmoid(xv) - lv) * d[i];"


def _emit_sigmoid_xent(e, value, out_slot):
    """sigmoid_cross_entropy_with_logits and its gradient: `value` (C) per element, times
    the kernels' weight (0 where Label is ignore_index; 1 / counted with normalize)."""
    x, label = e.input("X"), e.input("Label")
    e.require_float(x, label)
    e.same_dims(x, label)
    d = e.input("Out@GRAD") if out_slot == "X@GRAD" else None
    if d is not None:
        e.same_dims(x, d)
    out = e.output(out_slot, x.dims, lod_from=x)
    ignore = float(int(e.attr("ignore_index")))
    keep = f"(std::trunc(l[i]) != {e.literal(ignore)})"
    count = (f"int64_t c = 0; for (int64_t i = 0; i < n; ++i) c += {keep}; "
             f"const double inv = 1.0 / (double)std::max<int64_t>(c, 1);"
             if e.attr("normalize") else "")
    weigh = "(float)((double)v * ({k} ? inv : 0.0))" if e.attr("normalize") else \
        "v * (float){k}"
    e.code(f"const float* x = {x}; const float* l = {label}; "
           + (f"const float* d = {d}; " if d is not None else "")
           + f"const int64_t n = {x.numel()}; {count} "
           f"for (int64_t i = 0; i < n; ++i) {{ const float xv = x[i], lv = l[i]; {value} "
           f"{out}[i] = {weigh.format(k=keep)}; }}")


@register("cross_entropy", "cpu")
def cross_entropy(e):
    """Hard int64 labels: Y = -clip(log(X[label]), -1e20, 1e20), 0 where ignored."""
    x, label = e.input("X"), e.input("Label")
    e.require_float(x)
    if e.attr("soft_label") or label.ctype != "int64_t":
        e.fail("soft labels, or labels not int64")
    refuse_squeezed_label(e, x, label)
    rows, cols = e.prod(x.dims[:-1]), x.dims[-1]
    e.check(f"{label.numel()} != {rows}", "cross_entropy: Label needs one id per row of X")
    y = e.output("Y", x.dims[:-1] + ["1"])
    ig = e.attr("ignore_index")
    e.code(f"for (int64_t r = 0; r < {rows}; ++r) {{ const int64_t l = {label}[r]; "
           f"if (l == {ig}LL) {{ {y}[r] = 0.0f; continue; }} "
           f"if (l < 0 || l >= {cols}) {{ std::snprintf(err, 512, \"cross_entropy: label "
           f"%lld is out of range [0, %lld) (ignore_index={ig})\", (long long)l, "
           f"(long long){cols}); return {2 + e.k}; }} "
           f"{y}[r] = -fl::tolerable_log({x}[r * {cols} + l]); }}")


@register("cross_entropy_grad", "cpu")
def cross_entropy_grad(e):
    x, label, dy = e.input("X"), e.input("Label"), e.input("Y@GRAD")
    e.require_float(x, dy)
    if e.attr("soft_label") or label.ctype != "int64_t":
        e.fail("soft labels, or labels not int64")
    rows, cols = e.prod(x.dims[:-1]), x.dims[-1]
    g = e.output("X@GRAD", x.dims, lod_from=x)
    ig = e.attr("ignore_index")
    e.code(f"std::memset({g}, 0, sizeof(float) * {g.numel()}); "
           f"for (int64_t r = 0; r < {rows}; ++r) {{ const int64_t l = {label}[r]; "
           f"if (l == {ig}LL || l < 0 || l >= {cols}) continue; "
           f"{g}[r * {cols} + l] = -{dy}[r] / {x}[r * {cols} + l]; }}")


@register("cross_entropy2", "cpu")
def cross_entropy2(e):
    x, label, rows, cols, y, match, ig = cross_entropy2_operands(e)
    e.code(f"for (int64_t r = 0; r < {rows}; ++r) {{ const int64_t l = {label}[r]; "
           f"if (l == {ig}LL) {{ {y}[r] = 0.0f; {match}[r] = 0.0f; continue; }} "
           f"if (l < 0 || l >= {cols}) {{ std::snprintf(err, 512, \"cross_entropy2: label "
           f"%lld is out of range [0, %lld) (ignore_index={ig})\", (long long)l, "
           f"(long long){cols}); return {2 + e.k}; }} "
           f"const float v = {x}[r * {cols} + l]; {match}[r] = v; "
           f"{y}[r] = -fl::tolerable_log(v); }}")


@register("cross_entropy_grad2", "cpu")
def cross_entropy_grad2(e):
    label, match, dy, rows, cols, g, ig = cross_entropy_grad2_operands(e)
    e.code(f"std::memset({g}, 0, sizeof(float) * {g.numel()}); "
           f"for (int64_t r = 0; r < {rows}; ++r) {{ const int64_t l = {label}[r]; "
           f"if (l == {ig}LL || l < 0 || l >= {cols}) continue; "
           f"{g}[r * {cols} + l] = -{dy}[r] / {match}[r]; }}")


@register("softmax_with_cross_entropy", "cpu")
def softmax_with_cross_entropy(e):
    """Hard int64 labels over the last axis (fluidity.h: softmax_xent_hard computes the
    kernel's fast path when every label is in range and none ignored, else its
    log-softmax path)."""
    x, label, rows, cols, prob, loss = softmax_xent_operands(e)
    e.code(f"if (fl::softmax_xent_hard({x}, {label}, {prob}, {loss}, {rows}, {cols}, "
           f"{e.attr('ignore_index')}LL, err)) return {2 + e.k};")


@register("softmax_with_cross_entropy_grad", "cpu")
def softmax_with_cross_entropy_grad(e):
    label, prob, dloss, rows, cols, d = softmax_xent_grad_operands(e)
    e.code(f"fl::softmax_xent_hard_grad({prob}, {label}, {dloss}, {d}, {rows}, {cols}, "
           f"{e.attr('ignore_index')}LL);")


@register("sigmoid_cross_entropy_with_logits", "cpu")
def sigmoid_cross_entropy_with_logits(e):
    _emit_sigmoid_xent(e, SIGMOID_XENT_VALUE, "Out")


@register("sigmoid_cross_entropy_with_logits_grad", "cpu")
def sigmoid_cross_entropy_with_logits_grad(e):
    _emit_sigmoid_xent(e, SIGMOID_XENT_GRAD, "X@GRAD")


@register("huber_loss", "cpu")
def huber_loss(e):
    d = float(e.attr("delta"))
    elementwise_slots(
        e, [("x", e.input("X")), ("y", e.input("Y"))],
        [("Residual", "r"), ("Out", f"a <= {f32(d)} ? 0.5f * r * r : "
                                    f"{f32(d)} * (a - {f32(0.5 * d)})")],
        "const float r = y - x; const float a = std::fabs(r);")


@register("huber_loss_grad", "cpu")
def huber_loss_grad(e):
    d = f32(float(e.attr("delta")))
    elementwise_slots(
        e, [("r", e.input("Residual")), ("d", e.input("Out@GRAD"))],
        [("X@GRAD", "-g"), ("Y@GRAD", "g")],
        f"const float g = (r < -{d} ? -{d} : (r > {d} ? {d} : r)) * d;")


@register("smooth_l1_loss", "cpu")
def smooth_l1_loss(e):
    """Diff and each element's value in the kernel's float32 steps, then each row's sum
    pairwise as numpy's."""
    x, y = e.input("X"), e.input("Y")
    ws = [e.input(s) for s in ("InsideWeight", "OutsideWeight")]
    e.require_float(x, y, *ws)
    for b in [y] + ws:
        if b is not None:
            e.same_dims(x, b)
    if x.ndim < 2:
        e.fail("X is not [N, ...]")
    s2 = float(e.attr("sigma")) ** 2
    n, w = x.dims[0], e.prod(x.dims[1:])
    diff = e.output("Diff", x.dims) if e.has_output("Diff") else e.scratch(x.dims)
    out = e.output("Out", [n, "1"])
    val = e.scratch([w])
    inside = f" * {ws[0]}[k]" if ws[0] is not None else ""
    outside = f" * {ws[1]}[k]" if ws[1] is not None else ""
    e.code(f"for (int64_t r = 0; r < {n}; ++r) {{ for (int64_t j = 0; j < {w}; ++j) {{ "
           f"const int64_t k = r * {w} + j; const float d = ({x}[k] - {y}[k]){inside}; "
           f"{diff}[k] = d; const float a = std::fabs(d); {val}[j] = (a < {f32(1 / s2)} ? "
           f"{f32(0.5 * s2)} * d * d : a - {f32(0.5 / s2)}){outside}; }} "
           f"{out}[r] = fl::pairwise_sum({val}, {w}, 1); }}")


@register("smooth_l1_loss_grad", "cpu")
def smooth_l1_loss_grad(e):
    d, dout = e.input("Diff"), e.input("Out@GRAD")
    ws = [e.input(s) for s in ("InsideWeight", "OutsideWeight")]
    e.require_float(d, dout, *ws)
    for b in ws:
        if b is not None:
            e.same_dims(d, b)
    if d.ndim < 2:
        e.fail("Diff is not [N, ...]")
    n, w = d.dims[0], e.prod(d.dims[1:])
    from_rows = dout.numel()
    same_dim(e, from_rows, n, "Out@GRAD has one value per row")
    s2 = float(e.attr("sigma")) ** 2
    weights = "".join(f" * {b}[k]" for b in ws if b is not None)
    outs = [(slot, sign) for slot, sign in (("X@GRAD", ""), ("Y@GRAD", "-"))
            if e.has_output(slot)]
    stores = " ".join(f"{e.output(slot, d.dims, lod_from=False)}[k] = {sign}g;"
                      for slot, sign in outs)
    e.code(f"for (int64_t k = 0; k < {d.numel()}; ++k) {{ const float v = {d}[k]; "
           f"const float g = (std::fabs(v) < {f32(1 / s2)} ? {f32(s2)} * v : "
           f"fl::sign(v)){weights} * {dout}[k / {w}]; {stores} }}")


@register("log_loss", "cpu")
def log_loss(e):
    eps = f32(float(e.attr("epsilon")))
    elementwise_slots(
        e, [("p", e.input("Predicted")), ("l", e.input("Labels"))],
        [("Loss", f"-l * std::log(p + {eps}) - (1.0f - l) * std::log(1.0f - p + {eps})")])


@register("log_loss_grad", "cpu")
def log_loss_grad(e):
    eps = f32(float(e.attr("epsilon")))
    elementwise_slots(
        e, [("p", e.input("Predicted")), ("l", e.input("Labels")),
            ("d", e.input("Loss@GRAD"))],
        [("Predicted@GRAD", f"(-l / (p + {eps}) + (1.0f - l) / (1.0f - p + {eps})) * d")])


@register("bce_loss", "cpu")
def bce_loss(e):
    """X outside [0, 1] stops the run naming it, as the kernel; logs floored at -100."""
    x = e.input("X")
    e.require_float(x)
    e.code(f"for (int64_t i = 0; i < {x.numel()}; ++i) if ({x}[i] < 0.0f || {x}[i] > 1.0f) "
           f"{{ std::snprintf(err, 512, \"bce_loss: X must lie in [0, 1], got %g\", "
           f"(double){x}[i]); return {2 + e.k}; }}")
    elementwise_slots(
        e, [("x", x), ("l", e.input("Label"))],
        [("Out", "-(l * lx + (1.0f - l) * l1x)")],
        "const float lx = fl::fmaxnp(std::log(x), -100.0f), "
        "l1x = fl::fmaxnp(std::log(1.0f - x), -100.0f);")


@register("bce_loss_grad", "cpu")
def bce_loss_grad(e):
    elementwise_slots(
        e, [("x", e.input("X")), ("l", e.input("Label")), ("d", e.input("Out@GRAD"))],
        [("X@GRAD", f"d * (x - l) / fl::fmaxnp((1.0f - x) * x, {f32(1e-12)})")])


# ---- ranking losses (ops/ranking_loss.py), soft labels and their losses (ops/soft_label.py),
# cos_sim and norm (ops/vector_norm.py)


def _emit_bpr_inputs(e):
    """bpr_loss(_grad)'s X [..., C] (float), Label (int64, one per row; every one checked
    in [0, C) first, the run stopping at a bad one), rows and C."""
    x, lab = e.input("X"), e.input("Label")
    e.require_float(x)
    if lab.ctype != "int64_t":
        e.fail(f"Label is {lab.ctype}")
    c, n = x.dims[-1], e.prod(x.dims[:-1])
    same_dim(e, lab.numel(), n, "Label has one class per row")
    e.code(f"for (int64_t i = 0; i < {n}; ++i) if ({lab}[i] < 0 || {lab}[i] >= {c}) {{ "
           f"std::snprintf(err, 512, "
           f"{e.c_string(f'{e.op.type}: label %lld is out of range [0, %lld)')}, "
           f"(long long){lab}[i], (long long)({c})); return {2 + e.k}; }}")
    return x, lab, n, c


def _emit_cos_inputs(e):
    """cos_sim(_grad)'s X [N, ...] and Y ([N, ...] or [1, ...]) Bufs, N, Y's rows and the
    row width, as C expressions; Y's rows other than N or 1 run the op interpreted."""
    x, y = e.input("X"), e.input("Y")
    e.require_float(x, y)
    if x.ndim < 2 or y.ndim != x.ndim:
        e.fail("X and Y are not rows of one shape")
    w = e.prod(x.dims[1:])
    same_dim(e, e.prod(y.dims[1:]), w, "Y's rows have X's shape")
    n, ny = x.dims[0], y.dims[0]
    if ny != n:
        if e.is_lit(ny) and e.is_lit(n) and ny != "1":
            e.fail(f"Y has {ny} rows for {n} of X")
        e.check(f"{ny} != 1 && {ny} != {n}", f"{e.op.type}: Y has neither X's rows nor one")
    return x, y, n, ny, w


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


@register("rank_loss", "cpu")
def rank_loss(e):
    elementwise_slots(e, [("a", e.input("Left")), ("b", e.input("Right")),
                           ("l", e.input("Label"))],
                       [("Out", "fl::logaddexp0(o) - l * o")], "const float o = a - b;")


@register("rank_loss_grad", "cpu")
def rank_loss_grad(e):
    elementwise_slots(e, [("a", e.input("Left")), ("b", e.input("Right")),
                           ("l", e.input("Label")), ("d", e.input("Out@GRAD"))],
                       [("Left@GRAD", "g"), ("Right@GRAD", "-g")],
                       "const float g = d * (fl::sigmoid(a - b) - l);")


@register("margin_rank_loss", "cpu")
def margin_rank_loss(e):
    m = f32(float(e.attr("margin")))
    elementwise_slots(e, [("a", e.input("X1")), ("b", e.input("X2")),
                           ("l", e.input("Label"))],
                       [("Out", "o"), ("Activated", "o > 0.0f ? 1.0f : 0.0f")],
                       f"const float o = fl::fmaxnp(0.0f, -l * (a - b) + {m});")


@register("margin_rank_loss_grad", "cpu")
def margin_rank_loss_grad(e):
    elementwise_slots(e, [("d", e.input("Out@GRAD")), ("a", e.input("Activated")),
                           ("l", e.input("Label"))],
                       [("X1@GRAD", "-g"), ("X2@GRAD", "g")], "const float g = d * a * l;")


@register("bpr_loss", "cpu")
def bpr_loss(e):
    """Per row: the terms (0 at the label), summed pairwise, over C - 1."""
    x, lab, n, c = _emit_bpr_inputs(e)
    y = e.output("Y", x.dims[:-1] + ["1"])
    t = e.scratch([c])
    e.code(f"for (int64_t i = 0; i < {n}; ++i) {{ const float* xr = {x} + i * {c}; "
           f"const float pos = xr[{lab}[i]]; for (int64_t j = 0; j < {c}; ++j) {t}[j] = "
           f"j == {lab}[i] ? 0.0f : fl::logaddexp0(-(pos - xr[j])); {y}[i] = "
           f"fl::pairwise_sum({t}, {c}, 1) / (float)({c} - 1); }}")


@register("bpr_loss_grad", "cpu")
def bpr_loss_grad(e):
    x, lab, n, c = _emit_bpr_inputs(e)
    dy = e.input("Y@GRAD")
    e.require_float(dy)
    same_dim(e, dy.numel(), n, "Y@GRAD has one value per row")
    dx = e.output("X@GRAD", x.dims)
    e.code(f"for (int64_t i = 0; i < {n}; ++i) {{ const float* xr = {x} + i * {c}; "
           f"float* g = {dx} + i * {c}; const int64_t l = {lab}[i]; const float pos = xr[l]; "
           f"for (int64_t j = 0; j < {c}; ++j) g[j] = j == l ? 0.0f : fl::sigmoid(-(pos - "
           f"xr[j])) / (float)({c} - 1) * {dy}[i]; g[l] = -fl::pairwise_sum(g, {c}, 1); }}")


# the reductions kldiv_loss computes (ops/soft_label.py)
KL_REDUCTIONS = ("none", "sum", "mean", "batchmean")


@register("kldiv_loss", "cpu")
def kldiv_loss(e):
    """The terms as the kernel's; a reduction sums them pairwise (numpy's full sum),
    then divides in float32."""
    x, t = e.input("X"), e.input("Target")
    red = e.attr("reduction")
    if red not in KL_REDUCTIONS:
        e.fail(f"reduction {red!r}")
    term = "t > 0.0f ? t * (std::log(t) - x) : 0.0f"
    if red == "none":
        elementwise_slots(e, [("x", x), ("t", t)], [("Loss", term)])
        return
    e.require_float(x, t)
    e.same_dims(x, t)
    v, out = e.scratch(x.dims), e.output("Loss", [])
    n = x.numel()
    div = {"sum": "", "mean": f" / (float)({n})",
           "batchmean": f" / (float)({x.dims[0] if x.ndim else '1'})"}[red]
    e.code(f"for (int64_t i = 0; i < {n}; ++i) {{ const float x = {x}[i], t = {t}[i]; "
           f"{v}[i] = {term}; }} {out}[0] = fl::pairwise_sum({v}, {n}, 1){div};")


@register("kldiv_loss_grad", "cpu")
def kldiv_loss_grad(e):
    x, t, d = e.input("X"), e.input("Target"), e.input("Loss@GRAD")
    red = e.attr("reduction")
    if red not in KL_REDUCTIONS:
        e.fail(f"reduction {red!r}")
    if red == "none":
        elementwise_slots(e, [("x", x), ("t", t), ("d", d)],
                           [("X@GRAD", "(t > 0.0f ? -t : 0.0f) * d")])
        return
    e.require_float(x, t, d)
    e.same_dims(x, t)
    same_dim(e, d.numel(), "1", "Loss@GRAD is one value")
    scale = {"sum": "1.0f", "mean": f"(float)(1.0 / (double)({x.numel()}))",
             "batchmean": f"(float)(1.0 / (double)({x.dims[0] if x.ndim else '1'}))"}[red]
    dx = e.output("X@GRAD", x.dims)
    e.code(f"for (int64_t i = 0; i < {x.numel()}; ++i) {dx}[i] = ({t}[i] > 0.0f ? "
           f"-{t}[i] : 0.0f) * {scale} * {d}[0];")


@register("teacher_student_sigmoid_loss", "cpu")
def teacher_student_sigmoid_loss(e):
    x = e.input("X")
    if not x.ndim or x.dims[-1] != "1":
        e.fail("X is not [..., 1]")
    elementwise_slots(
        e, [("x", x), ("l", e.input("Label"))],
        [("Y", "l < -1.0f ? sp : (l < 0.0f ? sp - x : (l < 1.0f ? 2.0f * sp - x * l : "
               "2.0f * sp - x - x * (l - 1.0f)))")],
        "const float sp = fl::fmaxnp(x, 0.0f) + std::log1p(std::exp(-std::fabs(x)));")


@register("teacher_student_sigmoid_loss_grad", "cpu")
def teacher_student_sigmoid_loss_grad(e):
    lo = f32(float(e.attr("soft_max_lower_bound")))
    hi = f32(float(e.attr("soft_max_up_bound")))
    elementwise_slots(
        e, [("x", e.input("X")), ("l", e.input("Label")), ("d", e.input("Y@GRAD"))],
        [("X@GRAD", "(l < -1.0f ? p : (l < 0.0f ? p - 1.0f : 2.0f * p - l)) * d")],
        f"const float p = fl::sigmoid(x < {lo} ? {lo} : (x > {hi} ? {hi} : x));")


@register("label_smooth", "cpu")
def label_smooth(e):
    """(1 - eps) x + eps p: p a PriorDist value per last-dim index (eps times it in
    float32), or 1/K (eps / K in double, then rounded, as the kernel's Python floats)."""
    x, prior = e.input("X"), e.input("PriorDist")
    e.require_float(x, prior)
    eps = float(e.attr("epsilon"))
    k = x.dims[-1]
    if prior is not None:
        same_dim(e, prior.numel(), k, "PriorDist has one value per class")
        add = f"{f32(eps)} * {prior}[i % {k}]"
    else:
        add = f"(float)({eps!r} * (1.0 / (double)({k})))"
    out = e.output("Out", x.dims)
    e.code(f"for (int64_t i = 0; i < {x.numel()}; ++i) {out}[i] = "
           f"{f32(1 - eps)} * {x}[i] + {add};")


@register("label_smooth_grad", "cpu")
def label_smooth_grad(e):
    elementwise_slots(e, [("d", e.input("Out@GRAD"))],
                       [("X@GRAD", f"{f32(1 - float(e.attr('epsilon')))} * d")])


@register("cos_sim", "cpu")
def cos_sim(e):
    """fl::cos_sim: per row the three sums pairwise as numpy's; Y's rows are X's or one
    (used for every X row), told apart at run time."""
    x, y, n, ny, w = _emit_cos_inputs(e)
    out = e.output("Out", [n, "1"])
    xn = e.output("XNorm", [n, "1"]) if e.has_output("XNorm") else e.scratch([n])
    yn = e.output("YNorm", [ny, "1"]) if e.has_output("YNorm") else e.scratch([ny])
    tmp = e.scratch([w])
    e.code(f"fl::cos_sim({x}, {y}, {n}, {ny}, {w}, {out}, {xn}, {yn}, {tmp});")


@register("cos_sim_grad", "cpu")
def cos_sim_grad(e):
    """fl::cos_sim_grad: the kernel's expressions element by element; one Y row's
    gradient summed over X's rows in order (numpy's axis-0 sum)."""
    x, y, n, ny, w = _emit_cos_inputs(e)
    out, xn, yn, d = (e.input(s) for s in ("Out", "XNorm", "YNorm", "Out@GRAD"))
    e.require_float(out, xn, yn, d)
    for b, rows in ((out, n), (xn, n), (yn, ny), (d, n)):
        same_dim(e, b.numel(), rows, f"{b.var} has one value per row")
    dx = e.output("X@GRAD", x.dims) if e.has_output("X@GRAD") else None
    dy = e.output("Y@GRAD", y.dims) if e.has_output("Y@GRAD") else None
    if dx is None and dy is None:
        return
    e.code(f"fl::cos_sim_grad({x}, {y}, {n}, {ny}, {w}, {out}, {xn}, {yn}, {d}, "
           f"{dx or 'nullptr'}, {dy or 'nullptr'});")


@register("norm", "cpu")
def norm(e):
    """Each lane's sum of squares along `axis` (pairwise when the axis is the last,
    numpy's contiguous reduction; else in order, row by row), + epsilon, its root."""
    x, pre, m, post = _emit_norm_dims(e)
    out = e.output("Out", x.dims)
    dims = list(x.dims)
    dims[int(e.attr("axis")) % x.ndim] = "1"
    norm = e.output("Norm", dims) if e.has_output("Norm") else e.scratch(dims)
    sq = e.scratch([m])
    eps = f32(float(e.attr("epsilon")))
    e.code(f"for (int64_t p = 0; p < {pre}; ++p) for (int64_t q = 0; q < {post}; ++q) {{ "
           f"const float* xs = {x} + p * {m} * {post} + q; for (int64_t j = 0; j < {m}; ++j) "
           f"{sq}[j] = xs[j * {post}] * xs[j * {post}]; float s; if ({post} == 1) s = "
           f"fl::pairwise_sum({sq}, {m}, 1); else {{ s = {sq}[0]; for (int64_t j = 1; j < "
           f"{m}; ++j) s += {sq}[j]; }} const float r = std::sqrt(s + {eps}); "
           f"{norm}[p * {post} + q] = r; for (int64_t j = 0; j < {m}; ++j) "
           f"{out}[p * {m} * {post} + j * {post} + q] = xs[j * {post}] / r; }}")


@register("norm_grad", "cpu")
def norm_grad(e):
    x, pre, m, post = _emit_norm_dims(e)
    norm, d = e.input("Norm"), e.input("Out@GRAD")
    e.require_float(norm, d)
    e.same_dims(x, d)
    same_dim(e, norm.numel(), e.mul(pre, post), "Norm has one value per lane")
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


# --- hinge_loss, modified_huber_loss: a score and a 0/1 label, [N, 1] each -------------------
def _score_and_label(e, score_slot, label_slot, label_any=False):
    """The score (float32, [N, 1]) and the label of its shape: float32, or (label_any)
    any number type, taken as float (modified_huber's astype)."""
    x, y = e.input(score_slot), e.input(label_slot)
    e.require_float(x)
    if not label_any or y.ctype not in ("int32_t", "int64_t"):
        e.require_float(y)
    if x.ndim != 2:
        e.fail(f"{score_slot}{x.dims} is not [N, 1]")
    same_dim(e, x.dims[1], 1, f"{score_slot} is [N, 1]")
    e.same_dims(x, y)
    return x, y


@register("hinge_loss", "cpu")
def hinge_loss(e):
    """Loss = max(1 - Logits (2 Labels - 1), 0), float32 as the kernel computes it."""
    x, y = _score_and_label(e, "Logits", "Labels")
    out = e.output("Loss", x.dims)
    e.code(f"for (int64_t i = 0; i < {x.numel()}; ++i) {out}[i] = "
           f"fl::fmaxnp(1.0f - {x}[i] * (2.0f * {y}[i] - 1.0f), 0.0f);")


@register("hinge_loss_grad", "cpu")
def hinge_loss_grad(e):
    x, y = _score_and_label(e, "Logits", "Labels")
    d = e.input("Loss@GRAD")
    e.require_float(d)
    e.same_dims(x, d)
    g = e.output("Logits@GRAD", x.dims, lod_from=False)
    e.code(f"for (int64_t i = 0; i < {x.numel()}; ++i) {{ const float alt = 2.0f * {y}[i] - 1.0f; "
           f"{g}[i] = {d}[i] * ({x}[i] * alt < 1.0f ? 1.0f : 0.0f) * -alt; }}")


# modified_huber_loss's pieces over z = X (2Y - 1): the loss and its slope (ops/modified_huber.py)
HUBER_LOSS = "z < -1.0f ? -4.0f * z : (z < 1.0f ? (1.0f - z) * (1.0f - z) : 0.0f)"
HUBER_SLOPE = "z < -1.0f ? -4.0f : (z < 1.0f ? -2.0f * (1.0f - z) : 0.0f)"


@register("modified_huber_loss", "cpu")
def modified_huber_loss(e):
    x, y = _score_and_label(e, "X", "Y", label_any=True)
    out = e.output("Out", x.dims, lod_from=False)
    z = e.output("IntermediateVal", x.dims, lod_from=False) \
        if e.has_output("IntermediateVal") else e.scratch(x.dims)
    e.code(f"for (int64_t i = 0; i < {x.numel()}; ++i) {{ const float z = {x}[i] * "
           f"(2.0f * (float){y}[i] - 1.0f); {z}[i] = z; {out}[i] = {HUBER_LOSS}; }}")


@register("modified_huber_loss_grad", "cpu")
def modified_huber_loss_grad(e):
    z, y, d = e.input("IntermediateVal"), e.input("Y"), e.input("Out@GRAD")
    e.require_float(z, d)
    if y.ctype not in ("int32_t", "int64_t"):
        e.require_float(y)
    e.same_dims(z, y)
    same_dim(e, d.numel(), z.numel(), "Out@GRAD has one value per score")
    g = e.output("X@GRAD", z.dims, lod_from=False)
    e.code(f"for (int64_t i = 0; i < {z.numel()}; ++i) {{ const float z = {z}[i]; "
           f"{g}[i] = {d}[i] * (2.0f * (float){y}[i] - 1.0f) * ({HUBER_SLOPE}); }}")
