"""C++ emitters of more update ops Fluid 1.8 users pick, in their numpy rules' arithmetic
(float32 where numpy computes in float32, a Python float attribute meeting a float32 array
rounded once to float32; double where numpy computes in double): proximal_gd and
proximal_adagrad (ops/proximal.py), adamw (ops/optimizer_ops.py: a weight decay, then
Adam's step with Paddle 2.1+'s epsilon), and dpsgd without noise (sigma <= 0).

dpsgd with noise stays interpreted: its kernel draws N(0, sigma^2) from numpy's
default_rng (PCG64 and numpy's ziggurat), seeded from the OS when `seed` is 0 and kept in
the kernel's closure between runs; nothing in the program or the scope holds that state, so
no compiled draw could repeat the interpreter's (runtime/philox.h serves only the ops whose
kernels draw from core/philox.py's streams).
"""
from .. import register
from ..literals import double_literal, f32
from ..optimizer import adam_operands, update_operands
from .optimizer import each_element, l2_norm, learning_rate


def _prox(e):
    """C statements setting p[i]'s new value `o` from the step's result `v` (float), as
    proximal.py's _prox computes it in float32: soft-thresholding by lr * l1 (when l1 > 0),
    then shrinking by 1 + lr * l2 (each product in double, as Python floats, rounded to
    float32 as numpy meets the float32 array with it); np.sign's 0 for a zero."""
    l1, l2 = float(e.attr("l1")), float(e.attr("l2"))
    shrink = f"(float)(1.0 + (double)r * {double_literal(l2)})"
    if l1 > 0:
        thr = f"(float)((double)r * {double_literal(l1)})"
        return (f"const float sg = v > 0.0f ? 1.0f : v < 0.0f ? -1.0f : v == 0.0f ? 0.0f : v; "
                f"const float t = std::fabs(v) - {thr}; "
                f"const float o = sg * (t > 0.0f || t != t ? t : 0.0f) / {shrink};")
    return f"const float o = v / {shrink};"


@register("proximal_gd", "cpu")
def proximal_gd(e):
    """v = Param - lr * Grad, then the proximal step (_prox); a SelectedRows Grad steps its
    merged rows only."""
    p, _, g, lr = update_operands(e)
    learning_rate(e, lr)
    each_element(e, p, g, True, f"const float v = {p}[i] - r * g; {_prox(e)} {p}[i] = o;")


@register("proximal_adagrad", "cpu")
def proximal_adagrad(e):
    """Moment += Grad^2; v = Param - lr * Grad / sqrt(Moment), then the proximal step."""
    p, (m,), g, lr = update_operands(e, ("Moment",))
    learning_rate(e, lr)
    each_element(e, p, g, True,
                 f"const float mi = {m}[i] + g * g; {m}[i] = mi; "
                 f"const float v = {p}[i] - r * g / std::sqrt(mi); {_prox(e)} {p}[i] = o;")


@register("adamw", "cpu")
def adamw(e):
    """lr' = lr * lr_ratio (double); Param *= 1 - lr' * coeff (float32, when with_decay);
    then Adam's step as fl::adam computes it (the moments in float32, the step in double)
    with eps * sqrt(1 - beta2^t) (the adamw op exists only in Paddle >= 2.2, whose kernels
    scale epsilon), then the beta powers. A SelectedRows Grad runs interpreted."""
    p, m1, m2, g, b1p, b2p, lr, (b1, b2, eps) = adam_operands(e)
    if g.rows is not None:
        e.fail("a SelectedRows Grad")
    ratio = double_literal(e.attr("lr_ratio"))
    coeff = float(e.attr("coeff")) if e.attr("with_decay") else 0.0
    e.code(f"const double lr = (double){lr}[0] * {ratio}; const double p1 = (double){b1p}[0], "
           f"p2 = (double){b2p}[0]; const double lr_t = lr * sqrt(1.0 - p2) / (1.0 - p1); "
           f"const double eps_t = {eps} * sqrt(1.0 - p2);")
    if coeff:
        e.code(f"const float decay = (float)(1.0 - lr * {double_literal(coeff)}); "
               f"for (int64_t i = 0; i < {p.numel()}; ++i) {p}[i] = {p}[i] * decay;")
    e.code(f"fl::adam({p}, {m1}, {m2}, {g}, {p.numel()}, lr_t, (float){b1}, "
           f"(float)(1.0 - {b1}), (float){b2}, (float)(1.0 - {b2}), eps_t);")
    if not e.attr("use_global_beta_pow"):
        e.code(f"{b1p}[0] = {b1p}[0] * (float){b1}; {b2p}[0] = {b2p}[0] * (float){b2};")


@register("dpsgd", "cpu")
def dpsgd(e):
    """Without noise (sigma <= 0): g scaled down to L2 norm `clip` (the norm in double as
    numpy's), Param -= lr * (g / scale + 0); with noise NotCompilable (see the module's
    docstring)."""
    if float(e.attr("sigma")) > 0:
        e.fail("its noise comes from numpy's default_rng, which no compiled draw repeats")
    p, _, g, lr = update_operands(e)
    if g.rows is not None:
        e.fail("a SelectedRows Grad")
    clip = float(e.attr("clip"))
    n = p.numel()
    if clip > 0:
        l2_norm(e, g, n, "gn")
        e.code(f"const double sc = gn / {double_literal(clip)}; "
               f"const float s = (float)(sc > 1.0 ? sc : 1.0);")
    else:
        e.code("const float s = 1.0f;")
    bs = float(e.attr("batch_size"))
    if bs == 0:
        e.fail("batch_size 0 (the kernel's noise / batch_size divides by zero)")
    learning_rate(e, lr)
    e.code(f"const float z = {f32(0.0 / bs)}; "
           f"for (int64_t i = 0; i < {n}; ++i) {p}[i] = {p}[i] - r * ({g}[i] / s + z);")
