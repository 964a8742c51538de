"""C++ emitters of the update ops, dense and SelectedRows, in place: sgd, momentum, adam and
adagrad in the C kernels' arithmetic (ops/sparse_kernels.c); rmsprop, ftrl and Fluid 1.x's
other optimizers (ops/optimizer_variants.py) in their numpy rules' arithmetic, float32 where
numpy computes in float32 (a Python float attribute rounded to float32: literals.f32),
double where it computes in double."""
from .. import register
from ..literals import double_literal, f32
from ..optimizer import adam_eps_scaled, adam_operands, update_operands


def _emit_merge(e, p, g):
    """C that merges a SelectedRows Grad's duplicate rows (first-seen order, values summed
    in order, as sparse_kernels.merge_rows) into scratch and checks them against Param's
    rows; defines `m`, the number of unique rows. Returns (rows, values, row width)."""
    n, d = g.dims[0], e.prod(p.dims[1:])
    rows = e.scratch([n], "int64_t")
    merged = e.scratch([n, d])
    table = e.scratch([e.mul(4, n) + 16],
                      "int64_t")
    e.code(f"const int64_t m = {n} > 1 ? fl::merge_rows({g.rows}, {g}, {n}, {d}, {rows}, "
           f"{merged}, {table}, fl::merge_cap({n})) : {n};")
    e.code(f"if ({n} == 1) {{ {rows}[0] = {g.rows}[0]; std::memcpy({merged}, {g}, "
           f"sizeof(float) * {d}); }}")
    e.code(f"for (int64_t k = 0; k < m; ++k) if ({rows}[k] < 0 || {rows}[k] >= {p.dims[0]}) "
           f"{{ std::snprintf(err, 512, "
           f"{e.c_string(f'{e.op.type}: Grad has row %lld but Param has %lld rows')}, "
           f"(long long){rows}[k], (long long){p.dims[0]}); return {2 + e.k}; }}")
    return rows, merged, d


@register("sgd", "cpu")
def sgd(e):
    p, _, g, lr = update_operands(e)
    if g.rows is not None:    # each row added in place, duplicates accumulating
        n, d = g.dims[0], e.prod(p.dims[1:])
        e.code(f'if (fl::check_ids({g.rows}, {n}, {p.dims[0]}, "sgd", err)) '
               f"return {2 + e.k};")
        e.code(f"fl::rows_axpy({p}, {d}, {g.rows}, {n}, {g}, -{lr}[0]);")
        return
    e.code(f"const float r = {lr}[0]; for (int64_t i = 0; i < {p.numel()}; ++i) "
           f"{p}[i] = {p}[i] - r * {g}[i];")


@register("momentum", "cpu")
def momentum(e):
    p, (v,), g, lr = update_operands(e, ("Velocity",))
    if g.rows is not None:
        e.fail("a SelectedRows Grad (momentum updates every row)")
    mu, rescale = e.literal(float(e.attr("mu"))), float(e.attr("rescale_grad"))
    l2 = float(e.attr("regularization_coeff")) \
        if e.attr("regularization_method") == "l2_decay" else 0.0
    grad = "g0"
    if rescale != 1.0:
        grad = f"({grad} * {e.literal(rescale)})"
    if l2:
        grad = f"({grad} + {e.literal(l2)} * {p}[i])"
    step = f"r * (g + {mu} * nv)" if e.attr("use_nesterov") else "r * nv"
    e.code(f"const float r = {lr}[0]; for (int64_t i = 0; i < {p.numel()}; ++i) {{ "
           f"const float g0 = {g}[i]; const float g = {grad}; "
           f"const float nv = {mu} * {v}[i] + g; {v}[i] = nv; {p}[i] = {p}[i] - {step}; }}")


def adam_step(e):
    """Adam's operands and the C statements defining the step's lr_t and eps_t (in double,
    from the beta powers; eps_t is Fluid 1.8's eps, or Paddle 2.1+'s eps sqrt(1 - beta2^t)
    for an op Paddle >= 2.1 wrote) and those advancing the beta powers ("" under
    use_global_beta_pow)."""
    p, m1, m2, g, b1p, b2p, lr, (b1, b2, eps) = adam_operands(e)
    eps_t = f"{eps} * sqrt(1.0 - p2)" if adam_eps_scaled(e) else eps
    step_sizes = (f"const double p1 = (double){b1p}[0], p2 = (double){b2p}[0]; "
                  f"const double lr_t = (double){lr}[0] * sqrt(1.0 - p2) / (1.0 - p1); "
                  f"const double eps_t = {eps_t};")
    pows = "" if e.attr("use_global_beta_pow") else \
        f"{b1p}[0] = {b1p}[0] * (float){b1}; {b2p}[0] = {b2p}[0] * (float){b2};"
    return p, m1, m2, g, b1, b2, step_sizes, pows


@register("adam", "cpu")
def adam(e):
    """The dense step as the C kernel computes it (moments in float32, the step in
    double from lr_t and eps_t), then the beta powers, all in place."""
    p, m1, m2, g, b1, b2, step_sizes, pows = adam_step(e)
    e.code(step_sizes)
    betas = f"(float){b1}, (float)(1.0 - {b1}), (float){b2}, (float)(1.0 - {b2}), eps_t"
    if g.rows is None:
        e.code(f"fl::adam({p}, {m1}, {m2}, {g}, {p.numel()}, lr_t, {betas});")
        e.code(pows)
        return
    if e.attr("lazy_mode"):
        rows, merged, d = _emit_merge(e, p, g)   # the unique rows, their summed values
        e.code(f"if (m > 0) {{ fl::adam_rows({p}, {m1}, {m2}, {merged}, {rows}, m, {d}, "
               f"lr_t, {betas}); {pows} }}")
        return
    dense = dense_grad(e, p, g)
    e.code(f"fl::adam({p}, {m1}, {m2}, {dense}, {p.numel()}, lr_t, {betas}); {pows}")


def dense_grad(e, p, g):
    """A scratch dense gradient of Param's shape from SelectedRows Grad `g`: its merged rows,
    0 where it has none (the kernels' dense grad of an update that steps every row). An
    empty Grad takes the interpreted path, as adam's kernel does."""
    rows, merged, d = _emit_merge(e, p, g)
    e.check(f"{g.dims[0]} == 0", f"{e.op.type}: an empty SelectedRows Grad")
    dense = e.scratch(p.dims)
    e.code(f"std::memset({dense}, 0, sizeof(float) * {p.numel()}); "
           f"for (int64_t k = 0; k < m; ++k) std::memcpy({dense} + {rows}[k] * {d}, "
           f"{merged} + k * {d}, sizeof(float) * {d});")
    return dense


@register("adagrad", "cpu")
def adagrad(e):
    p, (m,), g, lr = update_operands(e, ("Moment",))
    eps = e.literal(float(e.attr("epsilon")))
    if g.rows is not None:
        rows, merged, d = _emit_merge(e, p, g)
        e.code(f"fl::adagrad_rows({p}, {m}, {merged}, {rows}, m, {d}, {lr}[0], {eps});")
        return
    e.code(f"const float r = {lr}[0]; for (int64_t i = 0; i < {p.numel()}; ++i) {{ "
           f"const float v = {m}[i] + {g}[i] * {g}[i]; {m}[i] = v; "
           f"{p}[i] = {p}[i] - (r * {g}[i]) / (std::sqrt(v) + {eps}); }}")


# --- rmsprop, ftrl and optimizer_variants.py's ops: their numpy rules, element by element -----
def each_element(e, p, g, lazy, body):
    """Emit C statements `body` for every element `i` of Param and its states, with
    `const float g` its gradient (and `r`, where `learning_rate` defined it). With a
    SelectedRows Grad a `lazy` rule steps the elements of its merged rows only, any other
    every element, g = 0 where the Grad has no row (optimizer_ops.UpdateOp's rule)."""
    if g.rows is not None and lazy:
        rows, merged, d = _emit_merge(e, p, g)
        e.code(f"for (int64_t k = 0; k < m; ++k) for (int64_t j = 0; j < {d}; ++j) {{ "
               f"const int64_t i = {rows}[k] * {d} + j; const float g = {merged}[k * {d} + j]; "
               f"{body} }}")
        return
    src = g if g.rows is None else dense_grad(e, p, g)
    e.code(f"for (int64_t i = 0; i < {p.numel()}; ++i) {{ const float g = {src}[i]; {body} }}")


def learning_rate(e, lr):
    """`const float r`: the LearningRate's value, 1 without one (adadelta's rule)."""
    e.code(f"const float r = {lr}[0];" if lr is not None else "const float r = 1.0f;")


def l2_norm(e, x, n, name):
    """C defining `const double name`: the L2 norm of float buffer `x` (`n` elements) as
    optimizer_variants._norm and clip_by_norm compute it: squares in double, numpy's
    pairwise sum."""
    sq = e.scratch([n], "double")
    e.code(f"for (int64_t i = 0; i < {n}; ++i) {sq}[i] = (double){x}[i] * (double){x}[i]; "
           f"const double {name} = std::sqrt(fl::pairwise_sum({sq}, {n}, 1));")


@register("rmsprop", "cpu")
def rmsprop(e):
    centered = bool(e.attr("centered"))
    p, states, g, lr = update_operands(
        e, ("MeanSquare", "Moment") + (("MeanGrad",) if centered else ()))
    ms, mom = states[:2]
    rho = float(e.attr("decay"))
    decay, rest = f32(rho), f32(1.0 - rho)
    if centered:
        mg = states[2]
        denom = (f"const float mg = {decay} * {mg}[i] + {rest} * g; {mg}[i] = mg; "
                 f"const float den = s - mg * mg;")
    else:
        denom = "const float den = s;"
    learning_rate(e, lr)
    each_element(e, p, g, False,
          f"const float s = {decay} * {ms}[i] + {rest} * g * g; {ms}[i] = s; {denom} "
          f"const float v = {f32(e.attr('momentum'))} * {mom}[i] + r * g / "
          f"std::sqrt(den + {f32(e.attr('epsilon'))}); {mom}[i] = v; {p}[i] = {p}[i] - v;")


@register("ftrl", "cpu")
def ftrl(e):
    p, (sq, lin), g, lr = update_operands(e, ("SquaredAccumulator", "LinearAccumulator"))
    l1, l2 = float(e.attr("l1")) + 1e-10, float(e.attr("l2")) + 1e-10
    power = float(e.attr("lr_power"))

    def acc_pow(a):
        return f"std::sqrt({a})" if power == -0.5 else f"std::pow({a}, {f32(-power)})"
    learning_rate(e, lr)
    each_element(e, p, g, True,
          f"const float s0 = {sq}[i], s1 = s0 + g * g; "
          f"const float l = ({lin}[i] + g) - (({acc_pow('s1')} - {acc_pow('s0')}) / r) * {p}[i]; "
          f"const float sg = l > 0.0f ? 1.0f : l < 0.0f ? -1.0f : l == 0.0f ? 0.0f : l; "
          f"const float x = {f32(l1)} * sg - l, y = {acc_pow('s1')} / r + {f32(2.0 * l2)}; "
          f"{p}[i] = std::fabs(l) > {f32(l1)} ? x / y : 0.0f; {sq}[i] = s1; {lin}[i] = l;")


@register("adamax", "cpu")
def adamax(e):
    """Moments in float32; the step in double (numpy's float64 lr_t meeting float32
    arrays), rounded to float32 as it is stored."""
    p, (m, u), g, lr = update_operands(e, ("Moment", "InfNorm"))
    b1p = e.input("Beta1Pow")
    e.require_float(b1p)
    b1, b2 = float(e.attr("beta1")), float(e.attr("beta2"))
    e.code(f"const double lr_t = (double){lr}[0] / (1.0 - (double){b1p}[0]);")
    each_element(e, p, g, True,
          f"const float mi = {f32(b1)} * {m}[i] + {f32(1.0 - b1)} * g; "
          f"const float ui = fl::maxnp({f32(b2)} * {u}[i] + {f32(e.attr('epsilon'))}, "
          f"std::fabs(g)); {m}[i] = mi; {u}[i] = ui; "
          f"{p}[i] = (float)((double){p}[i] - lr_t * (double)mi / (double)ui);")


@register("decayed_adagrad", "cpu")
def decayed_adagrad(e):
    p, (m,), g, lr = update_operands(e, ("Moment",))
    d = float(e.attr("decay"))
    learning_rate(e, lr)
    each_element(e, p, g, True,
          f"const float v = {f32(d)} * {m}[i] + {f32(1.0 - d)} * g * g; {m}[i] = v; "
          f"{p}[i] = {p}[i] - r * g / (std::sqrt(v) + {f32(e.attr('epsilon'))});")


@register("adadelta", "cpu")
def adadelta(e):
    p, (asg, asu), g, lr = update_operands(e, ("AvgSquaredGrad", "AvgSquaredUpdate"))
    rho, eps = float(e.attr("rho")), f32(e.attr("epsilon"))
    learning_rate(e, lr)
    each_element(e, p, g, True,
          f"const float a = {f32(rho)} * {asg}[i] + {f32(1.0 - rho)} * g * g; "
          f"const float dl = -std::sqrt(({asu}[i] + {eps}) / (a + {eps})) * g; "
          f"{asg}[i] = a; {asu}[i] = {f32(rho)} * {asu}[i] + {f32(1.0 - rho)} * dl * dl; "
          f"{p}[i] = {p}[i] + r * dl;")


@register("lamb", "cpu")
def lamb(e):
    """Paddle 1.8's rule: the moments and r in float32, the trust ratio in double from
    numpy's norms, lr * ratio rounded to float32 for the step."""
    p, (m1, m2), g, lr = update_operands(e, ("Moment1", "Moment2"))
    b1, b2 = float(e.attr("beta1")), float(e.attr("beta2"))
    n = p.numel()
    r = e.scratch(p.dims)
    each_element(e, p, g, False,
          f"const float a = {f32(b1)} * {m1}[i] + {f32(1.0 - b1)} * g; "
          f"const float b = {f32(b2)} * {m2}[i] + {f32(1.0 - b2)} * g * g; "
          f"{m1}[i] = a; {m2}[i] = b; {r}[i] = a / (std::sqrt(b) + "
          f"{f32(e.attr('epsilon'))}) + {f32(e.attr('weight_decay'))} * {p}[i];")
    l2_norm(e, p, n, "pn")
    l2_norm(e, r, n, "rn")
    e.code(f"const float step = (float)((double){lr}[0] * "
           f"(pn > 0.0 && rn > 0.0 ? pn / rn : 1.0)); "
           f"for (int64_t i = 0; i < {n}; ++i) {p}[i] = {p}[i] - step * {r}[i];")


@register("lars_momentum", "cpu")
def lars_momentum(e):
    """The layer's learning rate in double from numpy's norms of Param and the (dense)
    gradient, rounded to float32 for the float32 velocity step."""
    p, (v,), g, lr = update_operands(e, ("Velocity",))
    coeff, wd = double_literal(e.attr("lars_coeff")), float(e.attr("lars_weight_decay"))
    n = p.numel()
    src = g if g.rows is None else dense_grad(e, p, g)
    l2_norm(e, p, n, "pn")
    l2_norm(e, src, n, "gn")
    e.code(f"const double lr0 = (double){lr}[0]; const float local = (float)("
           f"pn > 0.0 && gn > 0.0 ? lr0 * {coeff} * pn / (gn + {double_literal(wd)} * pn + "
           f"{double_literal(e.attr('epsilon'))}) : lr0);")
    e.code(f"for (int64_t i = 0; i < {n}; ++i) {{ const float vi = {f32(e.attr('mu'))} * "
           f"{v}[i] + local * ({src}[i] + {f32(wd)} * {p}[i]); {v}[i] = vi; "
           f"{p}[i] = {p}[i] - vi; }}")
