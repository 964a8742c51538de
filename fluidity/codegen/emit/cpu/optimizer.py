"""C++ emitters of the update ops sgd, momentum, adam and adagrad, dense and SelectedRows,
in place, in the C kernels' arithmetic (ops/sparse_kernels.c)."""
from .. import register
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
    rows, merged, d = _emit_merge(e, p, g)   # the unique rows, their summed values
    if e.attr("lazy_mode"):
        e.code(f"if (m > 0) {{ fl::adam_rows({p}, {m1}, {m2}, {merged}, {rows}, m, {d}, "
               f"lr_t, {betas}); {pows} }}")
        return
    # not lazy: every row steps, g = 0 where the Grad has none (the kernel's dense grad);
    # an empty Grad takes the interpreted path, as the kernel's numpy rule does
    e.check(f"{g.dims[0]} == 0", "adam: an empty SelectedRows Grad")
    dense = e.scratch(p.dims)
    e.code(f"std::memset({dense}, 0, sizeof(float) * {p.numel()}); "
           f"for (int64_t k = 0; k < m; ++k) std::memcpy({dense} + {rows}[k] * {d}, "
           f"{merged} + k * {d}, sizeof(float) * {d}); "
           f"fl::adam({p}, {m1}, {m2}, {dense}, {p.numel()}, lr_t, {betas}); {pows}")





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
