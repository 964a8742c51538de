"""C++ emitters of sigmoid_focal_loss (RetinaNet's loss, ops/detection_loss.py) and its
gradient, each element in float32 as the numpy kernel computes it: p = fl::sigmoid (its
branches), the scales alpha / fg and (1 - alpha) / fg in double rounded to float32 (Python
floats meeting float32 arrays), `** gamma` as numpy's power operator takes it (square for
2, sqrt for 0.5, ...), log and log1p in float32. Label is only compared, never used as an
index; FgNum is read at run time (at least 1)."""
from .. import register
from ..checks import check_dims, dense_only
from ..literals import double_literal, f32

FLT_MIN = "1.17549435e-38f"      # np.finfo(np.float32).tiny


def power(base, gamma):
    """C for `base ** gamma` as numpy's array power operator computes it for a Python float
    exponent (fast_scalar_power's special exponents, else float32 pow)."""
    special = {2.0: f"({base} * {base})", 1.0: f"({base})", 0.5: f"std::sqrt({base})",
               0.0: "1.0f", -1.0: f"(1.0f / {base})"}
    return special.get(float(gamma), f"std::pow({base}, {f32(gamma)})")


def _operands(e):
    x, label, fg = e.input("X"), e.input("Label"), e.input("FgNum")
    dense_only(e, x, label, fg)
    e.require_float(x)
    if x.ndim != 2:
        e.fail(f"X{x.dims} is not [N, C]")
    if label.ctype not in ("int32_t", "int64_t") or fg.ctype not in ("int32_t", "int64_t"):
        e.fail(f"Label {label.ctype}, FgNum {fg.ctype}")
    check_dims(e, label, [x.dims[0], "1"], "[N, 1]")
    n = fg.numel()
    if e.is_lit(n) and int(n) < 1:
        e.fail("FgNum is empty")
    if not e.is_lit(n):
        e.check(f"{n} < 1", f"{e.op.type}: FgNum is empty")
    alpha = float(e.attr("alpha"))
    return x, label, fg, alpha, float(e.attr("gamma"))


def _element_prelude(e, x, label, fg, alpha):
    """C defining, for element (i, c) of X: v = X, p = sigmoid(v), pos / neg (the scaled
    masks) and l1m = log(1 - p) as the kernel's stable form."""
    classes = x.dims[1]
    e.code(f"const int64_t fg0 = (int64_t){fg}[0]; const double fgd = (double)(fg0 > 1 ? fg0 : 1); "
           f"const float spos = (float)({double_literal(alpha)} / fgd), "
           f"sneg = (float)({double_literal(1.0 - alpha)} / fgd);")
    return (f"for (int64_t i = 0; i < {x.dims[0]}; ++i) for (int64_t c = 0; c < {classes}; "
            f"++c) {{ const int64_t at = i * {classes} + c; const int64_t g = "
            f"(int64_t){label}[i]; const float v = {x}[at]; const float p = fl::sigmoid(v); "
            f"const float pos = (g == c + 1 ? 1.0f : 0.0f) * spos; "
            f"const float neg = (g != -1 && g != c + 1 ? 1.0f : 0.0f) * sneg; "
            f"const float b = v >= 0.0f ? 1.0f : 0.0f; "
            f"const float l1m = -v * b - std::log1p(std::exp(v - 2.0f * v * b)); "
            f"const float lp = std::log(fl::fmaxnp(p, {FLT_MIN})); const float q = 1.0f - p; ")


@register("sigmoid_focal_loss", "cpu")
def sigmoid_focal_loss(e):
    """Out = -pos (1 - p)^gamma log(max(p, FLT_MIN)) - neg p^gamma log(1 - p)."""
    x, label, fg, alpha, gamma = _operands(e)
    out = e.output("Out", x.dims)
    loop = _element_prelude(e, x, label, fg, alpha)
    e.code(loop + f"{out}[at] = -pos * ({power('q', gamma)} * lp) - neg * "
                  f"({power('p', gamma)} * l1m); }}")


@register("sigmoid_focal_loss_grad", "cpu")
def sigmoid_focal_loss_grad(e):
    """X@GRAD = (-pos (1-p)^gamma (1 - p - p gamma log p) - neg p^gamma (log(1-p) (1-p)
    gamma - p)) * Out@GRAD."""
    x, label, fg, alpha, gamma = _operands(e)
    d = e.input("Out@GRAD")
    dense_only(e, d)
    e.require_float(d)
    e.same_dims(x, d)
    if not e.has_output("X@GRAD"):
        return
    dx = e.output("X@GRAD", x.dims, lod_from=False)
    g = f32(gamma)
    loop = _element_prelude(e, x, label, fg, alpha)
    e.code(loop + f"const float tp = {power('q', gamma)} * (q - p * {g} * lp); "
                  f"const float tn = {power('p', gamma)} * (l1m * q * {g} - p); "
                  f"{dx}[at] = (-pos * tp - neg * tn) * {d}[at]; }}")
