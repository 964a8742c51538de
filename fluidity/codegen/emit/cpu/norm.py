"""C++ emitters of batch_norm, layer_norm, group_norm, instance_norm and their gradients
(statistics summed in double in the numpy kernels' order)."""
from ....ops.common import channel_last
from ....ops.norm import bn_global_stats
from ...dim import dim
from .. import register
from ..checks import dense_only
from ..norm import bn_grad_inputs, bn_inputs


def _layer_norm_split(e, x):
    """(rows, cols) of X at begin_norm_axis (C expressions)."""
    axis = e.attr("begin_norm_axis")
    if not 0 < axis < x.ndim:
        e.fail(f"begin_norm_axis={axis} must be in [1, {x.ndim})")
    return e.prod(x.dims[:axis]), e.prod(x.dims[axis:])


def _has_size(e, b, n):
    """Check that Buf b (if given) holds n elements (at run time where symbolic)."""
    if b is None or b.numel() == n:
        return
    if e.is_lit(b.numel()) and e.is_lit(n):
        e.fail(f"{b.var} has {b.numel()} elements, not {n}")
    e.check(f"{b.numel()} != {n}", f"{e.op.type}: {b.var} has the wrong size")


def _emit_channel_norm(e, groups, instance):
    """group_norm (NCHW) and instance_norm (groups = channels) forward, as the kernels:
    numpy-order means (fl::reduce) of each sample's group, then of the squared deviations;
    group_norm divides by sqrt(var + eps), instance_norm multiplies by 1 / sqrt(var + eps)
    (its SavedVariance). Scale and Bias per channel."""
    x = e.input("X")
    dense_only(e, x)
    e.require_float(x)
    if x.ndim < 2:
        e.fail(f"X{x.dims} has no channel dim")
    n, c = x.dims[0], x.dims[1]
    g = c if instance else str(groups)
    if e.is_lit(c) and not instance and (groups < 1 or int(c) % groups):
        e.fail(f"groups={groups} does not divide {c} channels")
    if not instance:
        e.check(f"{c} % {g} != 0", "group_norm: groups do not divide the channels")
    rest = e.prod(x.dims[2:]) if x.ndim > 2 else "1"
    cg = dim(c) // g
    per = e.mul(cg, rest)
    ng = e.mul(n, g)
    sb = []
    for slot in ("Scale", "Bias"):
        t = e.input(slot)
        if t is not None:
            e.require_float(t)
            if e.is_lit(t.numel()) and e.is_lit(c) and int(t.numel()) != int(c):
                e.fail(f"{slot} has {t.numel()} values for {c} channels")
            e.check(f"{t.numel()} != {c}", f"{e.op.type}: {slot} is not one value per channel")
        sb.append(t)
    y = e.output("Y", x.dims)
    mean_slot, var_slot = ("SavedMean", "SavedVariance") if instance else ("Mean", "Variance")
    stat_dims = [ng] if instance else [n, g]
    m = e.output(mean_slot, stat_dims, lod_from=False) if e.has_output(mean_slot) else \
        e.scratch([ng])
    v = e.output(var_slot, stat_dims, lod_from=False) if e.has_output(var_slot) else \
        e.scratch([ng])
    sq = e.scratch(x.dims)
    eps = f"(float){float(e.attr('epsilon'))!r}"
    if instance:
        norm = f"const float inv = 1.0f / std::sqrt({v}[i] + {eps}); {v}[i] = inv; " \
               f"for (int64_t j = 0; j < per; ++j) {{ float yv = (xi[j] - mi) * inv; "
    else:
        norm = f"const float den = std::sqrt({v}[i] + {eps}); " \
               f"for (int64_t j = 0; j < per; ++j) {{ float yv = (xi[j] - mi) / den; "
    scale, bias = sb
    ch = "((i % G) * CG + j / R)"
    affine = (f"yv = yv * {scale}[{ch}]; " if scale is not None else "") + \
        (f"yv = yv + {bias}[{ch}]; " if bias is not None else "")
    e.code(f"const int64_t G = {g}, CG = {cg}, R = {rest}, per = {per}, NG = {ng}; "
           f"const int64_t dims[3] = {{{n}, G, per}}; const bool red[3] = {{false, false, true}}; "
           f"fl::reduce<fl::R_MEAN, float, float>({x}, {m}, nullptr, 3, dims, red); "
           f"for (int64_t i = 0; i < NG; ++i) for (int64_t j = 0; j < per; ++j) {{ "
           f"const float d = {x}[i * per + j] - {m}[i]; {sq}[i * per + j] = d * d; }} "
           f"fl::reduce<fl::R_MEAN, float, float>({sq}, {v}, nullptr, 3, dims, red); "
           f"for (int64_t i = 0; i < NG; ++i) {{ const float* xi = {x} + i * per; "
           f"float* yi = {y} + i * per; const float mi = {m}[i]; {norm}{affine}"
           f"yi[j] = yv; }} }}")


def _emit_channel_norm_grad(e, groups, instance):
    """group_norm_grad (NCHW) and instance_norm_grad (a group per channel, its
    SavedVariance the inverse deviation already): fl::channel_norm_grad."""
    x, dy = e.input("X"), e.input("Y@GRAD")
    dense_only(e, x)
    e.require_float(x, dy)
    e.same_dims(x, dy)
    if x.ndim < 2:
        e.fail(f"X{x.dims} has no channel dim")
    n, c = x.dims[0], x.dims[1]
    g = c if instance else str(groups)
    if not instance:
        if e.is_lit(c) and (groups < 1 or int(c) % groups):
            e.fail(f"groups={groups} does not divide {c} channels")
        e.check(f"{c} % {g} != 0", "group_norm_grad: groups do not divide the channels")
    rest = e.prod(x.dims[2:]) if x.ndim > 2 else "1"
    cg = dim(c) // g
    stats = ("SavedMean", "SavedVariance") if instance else ("Mean", "Variance")
    mean, var = (e.input(s) for s in stats)
    e.require_float(mean, var)
    for t in (mean, var):
        e.check(f"{t.numel()} != {e.mul(n, g)}", f"{e.op.type}: {t.var} is not one value "
                f"per sample and group")
    scale = e.input("Scale")
    e.require_float(scale)
    if scale is not None:
        e.check(f"{scale.numel()} != {c}", f"{e.op.type}: Scale is not one value per channel")
    outs = {}
    for slot, dims in (("X@GRAD", x.dims), ("Scale@GRAD", [c]), ("Bias@GRAD", [c])):
        src = e.input(slot[:-5]) if slot != "X@GRAD" else x
        if src is not None and e.has_output(slot):
            outs[slot] = e.output(slot, src.dims if slot != "X@GRAD" else dims, lod_from=False)
    per = e.mul(cg, rest)
    xh, dxh, t = (e.scratch([per]) for _ in range(3))
    acc = e.scratch([e.mul(2, c)], "double")
    dx, ds, db = (outs.get(k) for k in ("X@GRAD", "Scale@GRAD", "Bias@GRAD"))
    e.code(f"fl::channel_norm_grad({x}, {dy}, {mean}, {var}, {e.literal(instance)}, "
           f"(float){float(e.attr('epsilon'))!r}, {scale or 'nullptr'}, {n}, {g}, {cg}, {rest}, "
           f"{dx or 'nullptr'}, {ds or 'nullptr'}, {db or 'nullptr'}, {xh}, {dxh}, {t}, {acc});")


@register("batch_norm", "cpu")
def batch_norm(e):
    """NCHW-style [N, C, ...]: per channel, the statistics (the batch's, summed in
    double, or the running ones), inv_std = 1 / sqrt(var + eps) and
    y = x * (scale * inv_std) + (bias - mean * scale * inv_std) in float as the kernel; a
    relu that alone reads Y applied as Y is written (fusion.relu_into_batch_norm)."""
    x, scale, bias, mean, var = bn_inputs(e)
    c, n, inner = x.dims[1], x.dims[0], e.prod(x.dims[2:])
    relu = e.fused_relu("Y", x.dims, lod_from=x)  # relu(Y) written, Y never stored
    y = relu if relu is not None else e.output("Y", x.dims)
    value = "fl::fmaxnp(r[i] * k + off, 0.0f)" if relu is not None else "r[i] * k + off"
    eps = e.literal(float(e.attr("epsilon")))
    e.code(f"const int64_t C = {c}, N = {n}, P = {inner};")
    if bn_global_stats(e.attrs):
        m, v = mean, var
        for slot, run in (("MeanOut", mean), ("VarianceOut", var)):
            if e.has_output(slot):          # the running statistics, unchanged
                out = e.output(slot, run.dims)
                if out is not run:
                    e.code(f"std::memcpy({out}, {run}, sizeof(float) * C);")
    else:
        m, v = e.scratch([c]), e.scratch([c])
        mom = float(e.attr("momentum"))
        e.code(f"for (int64_t ch = 0; ch < C; ++ch) {{ "
               f"{bn_channel_stats(x, m, v, 'N', 'C', 'P')} }}")
        for slot, run, batch in (("MeanOut", mean, m), ("VarianceOut", var, v)):
            if e.has_output(slot):      # in place when it is the running variable
                out = e.output(slot, run.dims)
                e.code(f"for (int64_t ch = 0; ch < C; ++ch) {out}[ch] = {run}[ch] * "
                       f"{e.literal(mom)} + {batch}[ch] * {e.literal(1.0 - mom)};")
    inv = e.output("SavedVariance", [c]) if e.has_output("SavedVariance") else e.scratch([c])
    if e.has_output("SavedMean"):
        sm = e.output("SavedMean", [c])
        e.code(f"std::memcpy({sm}, {m}, sizeof(float) * C);")
    e.code(f"for (int64_t ch = 0; ch < C; ++ch) {inv}[ch] = 1.0f / std::sqrt({v}[ch] + {eps});")
    e.code(f"for (int64_t b = 0; b < N; ++b) for (int64_t ch = 0; ch < C; ++ch) {{ "
           f"const float k = {scale}[ch] * {inv}[ch]; const float off = {bias}[ch] - "
           f"{m}[ch] * {scale}[ch] * {inv}[ch]; const float* r = {x} + (b * C + ch) * P; "
           f"float* o = {y} + (b * C + ch) * P; for (int64_t i = 0; i < P; ++i) "
           f"o[i] = {value}; }}")


@register("batch_norm_grad", "cpu")
def batch_norm_grad(e):
    x, scale, sm, inv, dy = bn_grad_inputs(e)
    c = x.dims[1]
    e.code(f"const int64_t C = {c}, N = {x.dims[0]}, P = {e.prod(x.dims[2:])};")
    db, ds = e.scratch([c]), e.scratch([c])
    e.code(f"for (int64_t ch = 0; ch < C; ++ch) {{ "
           f"{bn_grad_channel_sums(x, dy, sm, inv, db, ds, 'N', 'C', 'P')} }}")
    if e.has_output("X@GRAD"):
        dx = e.output("X@GRAD", x.dims)
        if bn_global_stats(e.attrs):
            body = "o[i] = g[i] * k;"
        else:
            body = ("const float xh = (r[i] - sm) * iv; "
                    "o[i] = k * (g[i] - (dbc + xh * dsc) / (float)(N * P));")
        e.code(f"for (int64_t b = 0; b < N; ++b) for (int64_t ch = 0; ch < C; ++ch) {{ "
               f"const float k = {scale}[ch] * {inv}[ch], sm = {sm}[ch], iv = {inv}[ch], "
               f"dbc = {db}[ch], dsc = {ds}[ch]; const float* r = {x} + (b * C + ch) * P; "
               f"const float* g = {dy} + (b * C + ch) * P; float* o = {dx} + (b * C + ch) * P; "
               f"for (int64_t i = 0; i < P; ++i) {{ {body} }} }}")
    if e.has_output("Scale@GRAD"):
        e.code(f"std::memcpy({e.output('Scale@GRAD', [c])}, {ds}, sizeof(float) * C);")
    if e.has_output("Bias@GRAD"):
        e.code(f"std::memcpy({e.output('Bias@GRAD', [c])}, {db}, sizeof(float) * C);")


@register("layer_norm", "cpu")
def layer_norm(e):
    """fl::layer_norm over X as [rows, cols] split at begin_norm_axis (row means and
    variances pairwise, as numpy's mean)."""
    x, scale, bias = e.input("X"), e.input("Scale"), e.input("Bias")
    dense_only(e, x, scale, bias)
    e.require_float(x, scale, bias)
    rows, cols = _layer_norm_split(e, x)
    for b in (scale, bias):
        _has_size(e, b, cols)
    y = e.output("Y", x.dims)
    stats = [e.output(s, [rows]) if e.has_output(s) else None for s in ("Mean", "Variance")]
    tmp = e.scratch([cols])
    args = ", ".join(str(b) if b is not None else "nullptr"
                     for b in (x, scale, bias, y, *stats, tmp))
    e.code(f"fl::layer_norm({args}, {rows}, {cols}, {e.literal(float(e.attr('epsilon')))});")


@register("layer_norm_grad", "cpu")
def layer_norm_grad(e):
    """fl::layer_norm_grad: the outputs asked for (Scale@GRAD / Bias@GRAD need Scale /
    Bias, as the kernel's do)."""
    x, scale, bias = e.input("X"), e.input("Scale"), e.input("Bias")
    mean, var, d = e.input("Mean"), e.input("Variance"), e.input("Y@GRAD")
    dense_only(e, x, scale, bias, mean, var, d)
    e.require_float(x, scale, bias, mean, var, d)
    rows, cols = _layer_norm_split(e, x)
    e.same_dims(x, d)
    for b, n in ((scale, cols), (bias, cols), (mean, rows), (var, rows)):
        _has_size(e, b, n)
    outs = []
    for slot, like in (("X@GRAD", x), ("Scale@GRAD", scale), ("Bias@GRAD", bias)):
        if not e.has_output(slot):
            outs.append(None)
        elif like is None:
            e.fail(f"{slot} without {slot[:-5]}")
        else:
            outs.append(e.output(slot, like.dims))
    a, b = e.mul(2, cols), e.mul(2, rows)
    tmp = e.scratch([a + b])
    args = ", ".join(str(b) if b is not None else "nullptr"
                     for b in (x, scale, mean, var, d, *outs, tmp))
    e.code(f"fl::layer_norm_grad({args}, {rows}, {cols}, "
           f"{e.literal(float(e.attr('epsilon')))});")


@register("group_norm", "cpu")
def group_norm(e):
    if channel_last(e.attr("data_layout")):
        e.fail("NHWC layout")
    _emit_channel_norm(e, int(e.attr("groups")), instance=False)


@register("group_norm_grad", "cpu")
def group_norm_grad(e):
    if channel_last(e.attr("data_layout")):
        e.fail("NHWC layout")
    _emit_channel_norm_grad(e, int(e.attr("groups")), instance=False)


@register("instance_norm", "cpu")
def instance_norm(e):
    _emit_channel_norm(e, 0, instance=True)


@register("instance_norm_grad", "cpu")
def instance_norm_grad(e):
    _emit_channel_norm_grad(e, None, instance=True)


def bn_channel_stats(x, m, v, n, c, p):
    """C statements: channel `ch`'s batch mean into m[ch] and variance into v[ch], of X
    [n, c, p] (C expressions), summed in double (runtime/nn.h's lanes)."""
    return (f"double s = 0, q = 0; for (int64_t b = 0; b < {n}; ++b) "
            f"s += fl::sum_d({x} + (b * {c} + ch) * {p}, {p}); "
            f"const float mu = (float)(s / (double)({n} * {p})); for (int64_t b = 0; b < {n}; "
            f"++b) q += fl::sum_sq_dev_d({x} + (b * {c} + ch) * {p}, {p}, mu); {m}[ch] = mu; "
            f"{v}[ch] = (float)(q / (double)({n} * {p}));")


def bn_grad_channel_sums(x, dy, sm, inv, db, ds, n, c, p):
    """C statements: channel `ch`'s sum of dY into db[ch] and of dY * x_hat into ds[ch], of
    X [n, c, p] (C expressions), in double (runtime/nn.h's lanes)."""
    return (f"double sb = 0, ss = 0; for (int64_t b = 0; b < {n}; ++b) "
            f"fl::bn_grad_sums_d({x} + (b * {c} + ch) * {p}, {dy} + (b * {c} + ch) * {p}, "
            f"{p}, {sm}[ch], {inv}[ch], sb, ss); {db}[ch] = (float)sb; {ds}[ch] = (float)ss;")
