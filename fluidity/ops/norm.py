"""Normalization: batch_norm, layer_norm, group_norm, instance_norm (the last two are
Paddle 2.x vision ops: formulas and attributes as Paddle 2.6 writes and runs them).

Y = (X - mean) / sqrt(var + epsilon) * Scale + Bias, the statistics taken per channel over
the batch (batch_norm), per sample over the dims from begin_norm_axis on (layer_norm), per
sample and group of channels (group_norm) or per sample and channel (instance_norm).
"""
import numpy as np

from .common import channel_last, numel
from .compiled import dense_only
from .registry import In, OpDef, Out


# --- batch_norm ----------------------------------------------------------------------------
def _bn_axes(x, layout):
    """(reduction axes, broadcast shape of a per-channel vector) for NCHW / NHWC."""
    c_axis = x.ndim - 1 if channel_last(layout) else 1
    shape = [1] * x.ndim
    shape[c_axis] = x.shape[c_axis]
    return tuple(i for i in range(x.ndim) if i != c_axis), shape


def _bn_global_stats(attrs):
    """Paddle's rule: running statistics are used in test mode (unless trainable_statistics)
    or when use_global_stats is set."""
    return (attrs["is_test"] and not attrs["trainable_statistics"]) or attrs["use_global_stats"]


def _batch_norm_grad(g):
    g.op("batch_norm_grad",
         {"X": g.input("X"), "Scale": g.input("Scale"), "Bias": g.input("Bias"),
          "SavedMean": g.output("SavedMean"), "SavedVariance": g.output("SavedVariance"),
          "Y@GRAD": g.output_grad("Y")},
         {"X@GRAD": g.input_grad("X"), "Scale@GRAD": g.input_grad("Scale"),
          "Bias@GRAD": g.input_grad("Bias")}, g.attrs())


def _bn_inputs(e):
    """batch_norm's compiled case for both targets (NCHW-style, no MomentumTensor, the
    channels known): X, Scale, Bias, Mean, Variance."""
    if channel_last(e.attr("data_layout")) or e.op.input("MomentumTensor"):
        e.fail("NHWC layout or a MomentumTensor")
    x, scale, bias, mean, var = (e.input(s) for s in ("X", "Scale", "Bias", "Mean",
                                                     "Variance"))
    e.require_float(x, scale, bias, mean, var)
    if x.ndim < 2 or not e.is_lit(x.dims[1]):
        e.fail("channels not known when compiling")
    return x, scale, bias, mean, var


def _bn_channel_stats(x, m, v, n, c, p):
    """C statements for both targets: channel `ch`'s batch mean into m[ch] and variance
    into v[ch], of X [n, c, p] (C expressions), summed in double in this order."""
    return (f"double s = 0, q = 0; for (int64_t b = 0; b < {n}; ++b) {{ const float* r = "
            f"{x} + (b * {c} + ch) * {p}; for (int64_t i = 0; i < {p}; ++i) s += r[i]; }} "
            f"const float mu = (float)(s / (double)({n} * {p})); for (int64_t b = 0; b < {n}; "
            f"++b) {{ const float* r = {x} + (b * {c} + ch) * {p}; for (int64_t i = 0; "
            f"i < {p}; ++i) {{ const float t = r[i] - mu; q += t * t; }} }} {m}[ch] = mu; "
            f"{v}[ch] = (float)(q / (double)({n} * {p}));")


def _bn_grad_inputs(e):
    """batch_norm_grad's compiled case for both targets (NCHW-style, the channels known):
    X, Scale, SavedMean, SavedVariance (1 / std), Y@GRAD."""
    if channel_last(e.attr("data_layout")):
        e.fail("NHWC layout")
    x, scale, sm, inv, dy = (e.input(s) for s in ("X", "Scale", "SavedMean",
                                                  "SavedVariance", "Y@GRAD"))
    e.require_float(x, scale, sm, inv, dy)
    if x.ndim < 2 or not e.is_lit(x.dims[1]):
        e.fail("channels not known when compiling")
    return x, scale, sm, inv, dy


def _bn_grad_channel_sums(x, dy, sm, inv, db, ds, n, c, p):
    """C statements for both targets: channel `ch`'s sum of dY into db[ch] and of dY * x_hat
    into ds[ch], of X [n, c, p] (C expressions), in double in this order."""
    return (f"double sb = 0, ss = 0; for (int64_t b = 0; b < {n}; ++b) {{ const float* r = "
            f"{x} + (b * {c} + ch) * {p}; const float* g = {dy} + (b * {c} + ch) * {p}; "
            f"for (int64_t i = 0; i < {p}; ++i) {{ sb += g[i]; ss += g[i] * ((r[i] - "
            f"{sm}[ch]) * {inv}[ch]); }} }} {db}[ch] = (float)sb; {ds}[ch] = (float)ss;")


class BatchNorm(OpDef):
    type = "batch_norm"
    nonempty_inputs = ("X",)
    inputs = (In("X"), In("Scale"), In("Bias"), In("Mean", no_grad=True),
              In("Variance", no_grad=True), In("MomentumTensor", dispensable=True, no_grad=True))
    outputs = (Out("Y"), Out("MeanOut"), Out("VarianceOut"),
               Out("SavedMean", intermediate=True), Out("SavedVariance", intermediate=True),
               Out("ReserveSpace", dispensable=True))
    attrs = {"is_test": False, "momentum": 0.9, "epsilon": 1e-5, "data_layout": "NCHW",
             "use_mkldnn": False, "fuse_with_relu": False, "use_global_stats": False,
             "trainable_statistics": False}
    doc = ("Y = (X - mean) / sqrt(var + epsilon) * Scale + Bias per channel. Training: batch "
           "statistics, and MeanOut/VarianceOut (the same variables as Mean/Variance) become "
           "momentum * running + (1 - momentum) * batch. Test: running statistics. "
           "SavedVariance holds 1/sqrt(var + epsilon).")

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        if not 2 <= len(xs) <= 5:
            ctx.fail(f"X must have 2 to 5 dims, got {xs}")
        c = xs[-1] if channel_last(ctx.attr("data_layout")) else xs[1]
        for slot in ("Scale", "Bias", "Mean", "Variance"):
            s = ctx.input_shape(slot)
            if c >= 0 and s and s[0] >= 0 and s != [c]:
                ctx.fail(f"{slot} must have shape [{c}] (the channels of X), got {s}")
        ctx.set_output("Y", xs, ctx.input_dtype("X"), ctx.input_lod_level("X"))
        for slot in ("MeanOut", "VarianceOut", "SavedMean", "SavedVariance"):
            if ctx.has_output(slot):
                ctx.set_output(slot, [c], ctx.input_dtype("Mean"))

    @classmethod
    def prepare(cls, attrs, outputs):
        eps, layout = attrs["epsilon"], attrs["data_layout"]
        global_stats = _bn_global_stats(attrs)

        def kernel(x, scale, bias, mean, var, momentum_t):
            axes, shape = _bn_axes(x, layout)
            if global_stats:
                m, v = mean, var
                new_mean, new_var = mean, var
            else:
                m = x.mean(axis=axes)
                v = np.square(x - m.reshape(shape)).mean(axis=axes)
                mom = attrs["momentum"] if momentum_t is None else float(
                    np.asarray(momentum_t).reshape(-1)[0])
                new_mean = (mean * mom + m * (1 - mom)).astype(mean.dtype, copy=False)
                new_var = (var * mom + v * (1 - mom)).astype(var.dtype, copy=False)
            inv_std = 1.0 / np.sqrt(v + eps)
            k = (scale * inv_std).reshape(shape)
            y = x * k + (bias - m * scale * inv_std).reshape(shape)
            return (y.astype(x.dtype, copy=False), new_mean, new_var,
                    m.astype(mean.dtype, copy=False), inv_std.astype(var.dtype, copy=False),
                    None)
        return kernel

    @staticmethod
    def emit(e):
        """NCHW-style [N, C, ...]: per channel, the statistics (the batch's, summed in
        double, or the running ones), inv_std = 1 / sqrt(var + eps) and
        y = x * (scale * inv_std) + (bias - mean * scale * inv_std) in float as the kernel."""
        x, scale, bias, mean, var = _bn_inputs(e)
        c, n, inner = x.dims[1], x.dims[0], e.prod(x.dims[2:])
        y = e.output("Y", x.dims)
        eps = e.literal(float(e.attr("epsilon")))
        e.code(f"const int64_t C = {c}, N = {n}, P = {inner};")
        if _bn_global_stats(e.attrs):
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
                   f"{_bn_channel_stats(x, m, v, 'N', 'C', 'P')} }}")
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
               f"o[i] = r[i] * k + off; }}")

    @staticmethod
    def cuda_emit(e):
        """The C++ target's arithmetic on the device: one thread per channel for the
        statistics (summed in double, in its order) and the running ones, one per element
        for Y."""
        x, scale, bias, mean, var = _bn_inputs(e)
        c, n, p = x.dims[1], x.dims[0], e.prod(x.dims[2:])
        y = e.output("Y", x.dims)
        eps = e.literal(float(e.attr("epsilon")))
        if _bn_global_stats(e.attrs):
            m, v = mean, var
            for slot, run in (("MeanOut", mean), ("VarianceOut", var)):
                if e.has_output(slot):
                    out = e.output(slot, run.dims)
                    if out is not run:
                        e.code(f"fl::cu::each({c}, [=] __device__ (int64_t ch) {{ "
                               f"{out}[ch] = {run}[ch]; }});")
        else:
            m, v = e.scratch([c]), e.scratch([c])
            mom = float(e.attr("momentum"))
            e.code(f"fl::cu::each({c}, [=] __device__ (int64_t ch) {{ "
                   f"{_bn_channel_stats(x, m, v, n, c, p)} }});")
            for slot, run, batch in (("MeanOut", mean, m), ("VarianceOut", var, v)):
                if e.has_output(slot):
                    out = e.output(slot, run.dims)
                    e.code(f"fl::cu::each({c}, [=] __device__ (int64_t ch) {{ {out}[ch] = "
                           f"{run}[ch] * {e.literal(mom)} + {batch}[ch] * "
                           f"{e.literal(1.0 - mom)}; }});")
        inv = e.output("SavedVariance", [c]) if e.has_output("SavedVariance") else e.scratch([c])
        sm = e.output("SavedMean", [c]) if e.has_output("SavedMean") else None
        keep = f" {sm}[ch] = {m}[ch];" if sm is not None else ""
        e.code(f"fl::cu::each({c}, [=] __device__ (int64_t ch) {{ {inv}[ch] = 1.0f / "
               f"sqrtf({v}[ch] + {eps});{keep} }});")
        e.code(f"fl::cu::each({x.numel()}, [=] __device__ (int64_t t) {{ const int64_t ch = "
               f"(t / {p}) % {c}; const float k = {scale}[ch] * {inv}[ch]; const float off = "
               f"{bias}[ch] - {m}[ch] * {scale}[ch] * {inv}[ch]; {y}[t] = {x}[t] * k + off; }});")

    grad = staticmethod(_batch_norm_grad)


class BatchNormGrad(OpDef):
    type = "batch_norm_grad"
    inputs = (In("X"), In("Scale"), In("Bias"), In("SavedMean"), In("SavedVariance"),
              In("Mean", dispensable=True), In("Variance", dispensable=True),
              In("ReserveSpace", dispensable=True), In("Y@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True), Out("Scale@GRAD", dispensable=True),
               Out("Bias@GRAD", dispensable=True))
    attrs = BatchNorm.attrs
    infer_shape = None

    @classmethod
    def prepare(cls, attrs, outputs):
        layout, global_stats = attrs["data_layout"], _bn_global_stats(attrs)

        def kernel(x, scale, bias, saved_mean, inv_std, mean, var, reserve, dy):
            axes, shape = _bn_axes(x, layout)
            xhat = (x - saved_mean.reshape(shape)) * inv_std.reshape(shape)
            dbias = dy.sum(axis=axes)
            dscale = (dy * xhat).sum(axis=axes)
            k = (scale * inv_std).reshape(shape)
            if global_stats:   # statistics are constants
                dx = dy * k
            else:
                cnt = x.size // scale.size
                dx = k * (dy - (dbias.reshape(shape) + xhat * dscale.reshape(shape)) / cnt)
            return (dx.astype(x.dtype, copy=False), dscale.astype(scale.dtype, copy=False),
                    dbias.astype(scale.dtype, copy=False))
        return kernel

    @staticmethod
    def emit(e):
        x, scale, sm, inv, dy = _bn_grad_inputs(e)
        c = x.dims[1]
        e.code(f"const int64_t C = {c}, N = {x.dims[0]}, P = {e.prod(x.dims[2:])};")
        db, ds = e.scratch([c]), e.scratch([c])
        e.code(f"for (int64_t ch = 0; ch < C; ++ch) {{ "
               f"{_bn_grad_channel_sums(x, dy, sm, inv, db, ds, 'N', 'C', 'P')} }}")
        if e.has_output("X@GRAD"):
            dx = e.output("X@GRAD", x.dims)
            if _bn_global_stats(e.attrs):
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

    @staticmethod
    def cuda_emit(e):
        """Per channel sums (one thread each, in double), then X@GRAD one thread per
        element, the C++ target's arithmetic."""
        x, scale, sm, inv, dy = _bn_grad_inputs(e)
        c, n, p = x.dims[1], x.dims[0], e.prod(x.dims[2:])
        db = e.output("Bias@GRAD", [c]) if e.has_output("Bias@GRAD") else e.scratch([c])
        ds = e.output("Scale@GRAD", [c]) if e.has_output("Scale@GRAD") else e.scratch([c])
        e.code(f"fl::cu::each({c}, [=] __device__ (int64_t ch) {{ "
               f"{_bn_grad_channel_sums(x, dy, sm, inv, db, ds, n, c, p)} }});")
        if e.has_output("X@GRAD"):
            dx = e.output("X@GRAD", x.dims)
            if _bn_global_stats(e.attrs):
                body = f"{dx}[t] = {dy}[t] * k;"
            else:
                body = (f"const float xh = ({x}[t] - {sm}[ch]) * {inv}[ch]; {dx}[t] = k * "
                        f"({dy}[t] - ({db}[ch] + xh * {ds}[ch]) / (float)({n} * {p}));")
            e.code(f"fl::cu::each({x.numel()}, [=] __device__ (int64_t t) {{ const int64_t ch = "
                   f"(t / {p}) % {c}; const float k = {scale}[ch] * {inv}[ch]; {body} }});")


# --- layer_norm ----------------------------------------------------------------------------
def _layer_norm_grad(g):
    ins = {"X": g.input("X"), "Mean": g.output("Mean"), "Variance": g.output("Variance"),
           "Y@GRAD": g.output_grad("Y")}
    outs = {"X@GRAD": g.input_grad("X")}
    for slot in ("Scale", "Bias"):
        if g.input(slot):
            ins[slot] = g.input(slot)
            outs[slot + "@GRAD"] = g.input_grad(slot)
    g.op("layer_norm_grad", ins, outs, g.attrs())


class LayerNorm(OpDef):
    type = "layer_norm"
    inputs = (In("X"), In("Scale", dispensable=True), In("Bias", dispensable=True))
    outputs = (Out("Y"), Out("Mean", intermediate=True), Out("Variance", intermediate=True))
    attrs = {"epsilon": 1e-5, "begin_norm_axis": 1, "use_mkldnn": False}
    doc = ("Y = (X - mean) / sqrt(var + epsilon) * Scale + Bias, statistics over the dims from "
           "begin_norm_axis on (X seen as [left, right]); Mean/Variance are [left].")

    @staticmethod
    def infer_shape(ctx):
        xs, axis = ctx.input_shape("X"), ctx.attr("begin_norm_axis")
        if not 0 < axis < len(xs) + (len(xs) == 0):
            ctx.fail(f"begin_norm_axis={axis} must be in [1, {len(xs)})")
        right = numel(xs[axis:])
        for slot in ("Scale", "Bias"):
            if ctx.has_input(slot):
                s = numel(ctx.input_shape(slot))
                if right >= 0 and s >= 0 and s != right:
                    ctx.fail(f"{slot} has {s} elements; it needs {right} "
                             f"(the product of X's dims from begin_norm_axis)")
        ctx.set_output("Y", xs, ctx.input_dtype("X"), ctx.input_lod_level("X"))
        for slot in ("Mean", "Variance"):
            if ctx.has_output(slot):
                ctx.set_output(slot, [numel(xs[:axis])], ctx.input_dtype("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        eps, axis = attrs["epsilon"], attrs["begin_norm_axis"]

        def kernel(x, scale, bias):
            x2 = x.reshape(numel(x.shape[:axis]), -1)
            m = x2.mean(axis=1)
            v = np.square(x2 - m[:, None]).mean(axis=1)
            y = (x2 - m[:, None]) / np.sqrt(v + eps)[:, None]
            if scale is not None:
                y = y * scale.reshape(1, -1)
            if bias is not None:
                y = y + bias.reshape(1, -1)
            return y.reshape(x.shape).astype(x.dtype, copy=False), m, v
        return kernel

    @staticmethod
    def emit(e):
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

    grad = staticmethod(_layer_norm_grad)


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


# the slots of layer_norm_grad and group_norm_grad (Paddle's; instance_norm_grad shares the
# outputs)
_NORM_GRAD_INPUTS = (In("X"), In("Scale", dispensable=True), In("Bias", dispensable=True),
                     In("Mean"), In("Variance"), In("Y@GRAD"))
_NORM_GRAD_OUTPUTS = (Out("X@GRAD", dispensable=True), Out("Scale@GRAD", dispensable=True),
                      Out("Bias@GRAD", dispensable=True))


class LayerNormGrad(OpDef):
    type = "layer_norm_grad"
    inputs, outputs = _NORM_GRAD_INPUTS, _NORM_GRAD_OUTPUTS
    attrs = LayerNorm.attrs
    infer_shape = None

    @classmethod
    def prepare(cls, attrs, outputs):
        eps = attrs["epsilon"]

        def kernel(x, scale, bias, mean, var, dy):
            x2 = x.reshape(mean.size, -1)
            d2 = dy.reshape(x2.shape)
            inv = 1.0 / np.sqrt(var + eps)[:, None]
            xhat = (x2 - mean[:, None]) * inv
            dxhat = d2 * scale.reshape(1, -1) if scale is not None else d2
            dx = inv * (dxhat - dxhat.mean(axis=1, keepdims=True)
                        - xhat * (dxhat * xhat).mean(axis=1, keepdims=True))
            ds = None if scale is None else (d2 * xhat).sum(axis=0).reshape(scale.shape)
            db = None if bias is None else d2.sum(axis=0).reshape(bias.shape)
            return (dx.reshape(x.shape).astype(x.dtype, copy=False),
                    None if ds is None else ds.astype(scale.dtype, copy=False),
                    None if db is None else db.astype(bias.dtype, copy=False))
        return kernel

    @staticmethod
    def emit(e):
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
        tmp = e.scratch([str(int(a) + int(b)) if e.is_lit(a) and e.is_lit(b) else f"{a} + {b}"])
        args = ", ".join(str(b) if b is not None else "nullptr"
                         for b in (x, scale, mean, var, d, *outs, tmp))
        e.code(f"fl::layer_norm_grad({args}, {rows}, {cols}, "
               f"{e.literal(float(e.attr('epsilon')))});")


# --- group_norm, instance_norm -------------------------------------------------------------
def _norm_backward(x, dy, mean, inv, axes, scale_b):
    """dX of Y = (X - mean) * inv * scale over `axes` (mean/inv broadcast)."""
    xhat = (x - mean) * inv
    dxhat = dy * scale_b if scale_b is not None else dy
    return inv * (dxhat - dxhat.mean(axis=axes, keepdims=True)
                  - xhat * (dxhat * xhat).mean(axis=axes, keepdims=True)), xhat


def _norm_grad(g):
    stat = ("Mean", "Variance") if g.fwd.type == "group_norm" else ("SavedMean", "SavedVariance")
    ins = {"X": g.input("X"), stat[0]: g.output(stat[0]), stat[1]: g.output(stat[1]),
           "Y@GRAD": g.output_grad("Y")}
    outs = {"X@GRAD": g.input_grad("X")}
    for slot in ("Scale", "Bias"):
        if g.input(slot):
            ins[slot] = g.input(slot)
            outs[slot + "@GRAD"] = g.input_grad(slot)
    g.op(g.fwd.type + "_grad", ins, outs, g.attrs())



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
    cg = f"(({c}) / ({g}))"
    per = f"({cg} * {rest})"
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
    ch = f"((i % G) * CG + j / R)"
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


class GroupNorm(OpDef):
    type = "group_norm"
    inputs = (In("X"), In("Scale", dispensable=True), In("Bias", dispensable=True))
    outputs = (Out("Y"), Out("Mean", intermediate=True), Out("Variance", intermediate=True))
    attrs = {"epsilon": 1e-5, "groups": -1, "data_layout": "NCHW"}
    doc = ("Y = (X - mean) / sqrt(var + epsilon) * Scale + Bias, statistics per sample over "
           "each group of channels (and all spatial positions); Mean/Variance [N, groups].")

    @staticmethod
    def infer_shape(ctx):
        xs, g = ctx.input_shape("X"), ctx.attr("groups")
        c = xs[-1] if channel_last(ctx.attr("data_layout")) else xs[1]
        if g < 1 or (c >= 0 and c % g):
            ctx.fail(f"groups={g} must divide the {c} channels")
        ctx.share("X", "Y")
        for slot in ("Mean", "Variance"):
            if ctx.has_output(slot):
                ctx.set_output(slot, [xs[0], g], ctx.input_dtype("X"))

    @staticmethod
    def _grouped(x, layout, g):
        """X as [N, G, C/G, rest...] (channel-first)."""
        if channel_last(layout):
            x = np.moveaxis(x, -1, 1)
        return x.reshape((x.shape[0], g, x.shape[1] // g) + x.shape[2:]), x.shape

    @classmethod
    def prepare(cls, attrs, outputs):
        eps, g, layout = attrs["epsilon"], attrs["groups"], attrs["data_layout"]

        def kernel(x, scale, bias):
            xg, cshape = GroupNorm._grouped(x, layout, g)
            axes = tuple(range(2, xg.ndim))
            m = xg.mean(axis=axes, keepdims=True)
            v = np.square(xg - m).mean(axis=axes, keepdims=True)
            y = ((xg - m) / np.sqrt(v + eps)).reshape(cshape)
            bshape = (1, -1) + (1,) * (len(cshape) - 2)
            if scale is not None:
                y = y * scale.reshape(bshape)
            if bias is not None:
                y = y + bias.reshape(bshape)
            if channel_last(layout):
                y = np.moveaxis(y, 1, -1)
            n = x.shape[0]
            return (np.ascontiguousarray(y, dtype=x.dtype), m.reshape(n, g).astype(x.dtype),
                    v.reshape(n, g).astype(x.dtype))
        return kernel

    @staticmethod
    def emit(e):
        if channel_last(e.attr("data_layout")):
            e.fail("NHWC layout")
        _emit_channel_norm(e, int(e.attr("groups")), instance=False)

    grad = staticmethod(_norm_grad)


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
    cg = f"(({c}) / ({g}))"
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
    per = f"({cg} * {rest})"
    xh, dxh, t = (e.scratch([per]) for _ in range(3))
    acc = e.scratch([e.mul(2, c)], "double")
    dx, ds, db = (outs.get(k) for k in ("X@GRAD", "Scale@GRAD", "Bias@GRAD"))
    e.code(f"fl::channel_norm_grad({x}, {dy}, {mean}, {var}, {e.literal(instance)}, "
           f"(float){float(e.attr('epsilon'))!r}, {scale or 'nullptr'}, {n}, {g}, {cg}, {rest}, "
           f"{dx or 'nullptr'}, {ds or 'nullptr'}, {db or 'nullptr'}, {xh}, {dxh}, {t}, {acc});")


class GroupNormGrad(OpDef):
    type = "group_norm_grad"
    inputs, outputs = _NORM_GRAD_INPUTS, _NORM_GRAD_OUTPUTS
    attrs = GroupNorm.attrs
    infer_shape = None

    @classmethod
    def prepare(cls, attrs, outputs):
        eps, g, layout = attrs["epsilon"], attrs["groups"], attrs["data_layout"]

        def kernel(x, scale, bias, mean, var, dy):
            xg, cshape = GroupNorm._grouped(x, layout, g)
            dyg, _ = GroupNorm._grouped(dy, layout, g)
            axes = tuple(range(2, xg.ndim))
            bshape = (1, g, -1) + (1,) * (xg.ndim - 3)
            shp = (x.shape[0], g) + (1,) * (xg.ndim - 2)
            inv = 1.0 / np.sqrt(var.reshape(shp) + eps)
            dx, xhat = _norm_backward(xg, dyg, mean.reshape(shp), inv, axes,
                                      None if scale is None else scale.reshape(bshape))
            red = (0,) + tuple(range(3, xg.ndim))
            ds = None if scale is None else (dyg * xhat).sum(axis=red).reshape(scale.shape)
            db = None if bias is None else dyg.sum(axis=red).reshape(bias.shape)
            dx = dx.reshape(cshape)
            if channel_last(layout):
                dx = np.moveaxis(dx, 1, -1)
            return (np.ascontiguousarray(dx, dtype=x.dtype),
                    None if ds is None else ds.astype(scale.dtype),
                    None if db is None else db.astype(bias.dtype))
        return kernel

    @staticmethod
    def emit(e):
        if channel_last(e.attr("data_layout")):
            e.fail("NHWC layout")
        _emit_channel_norm_grad(e, int(e.attr("groups")), instance=False)


class InstanceNorm(OpDef):
    type = "instance_norm"
    inputs = (In("X"), In("Scale", dispensable=True), In("Bias", dispensable=True))
    outputs = (Out("Y"), Out("SavedMean", intermediate=True),
               Out("SavedVariance", intermediate=True))
    attrs = {"epsilon": 1e-5}
    version = 1   # Scale and Bias dispensable
    doc = ("Y = (X - mean) / sqrt(var + epsilon) * Scale + Bias, statistics per sample and "
           "channel over the spatial dims (NCHW...); SavedMean [N*C], SavedVariance [N*C] "
           "holds 1 / sqrt(var + epsilon), as Paddle's.")

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        ctx.share("X", "Y")
        nc = xs[0] * xs[1] if xs[0] >= 0 and xs[1] >= 0 else -1
        for slot in ("SavedMean", "SavedVariance"):
            if ctx.has_output(slot):
                ctx.set_output(slot, [nc], ctx.input_dtype("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        eps = attrs["epsilon"]

        def kernel(x, scale, bias):
            axes = tuple(range(2, x.ndim))
            m = x.mean(axis=axes, keepdims=True)
            inv = 1.0 / np.sqrt(np.square(x - m).mean(axis=axes, keepdims=True) + eps)
            y = (x - m) * inv
            bshape = (1, -1) + (1,) * (x.ndim - 2)
            if scale is not None:
                y = y * scale.reshape(bshape)
            if bias is not None:
                y = y + bias.reshape(bshape)
            return (y.astype(x.dtype, copy=False), m.reshape(-1).astype(x.dtype),
                    inv.reshape(-1).astype(x.dtype))
        return kernel

    @staticmethod
    def emit(e):
        _emit_channel_norm(e, 0, instance=True)

    grad = staticmethod(_norm_grad)


class InstanceNormGrad(OpDef):
    type = "instance_norm_grad"
    inputs = (In("X"), In("Scale", dispensable=True), In("Bias", dispensable=True),
              In("SavedMean"), In("SavedVariance"), In("Y@GRAD"))
    outputs = _NORM_GRAD_OUTPUTS
    attrs = InstanceNorm.attrs
    infer_shape = None

    @staticmethod
    def kernel(x, scale, bias, mean, inv, dy):
        axes = tuple(range(2, x.ndim))
        shp = x.shape[:2] + (1,) * (x.ndim - 2)
        bshape = (1, -1) + (1,) * (x.ndim - 2)
        dx, xhat = _norm_backward(x, dy, mean.reshape(shp), inv.reshape(shp), axes,
                                  None if scale is None else scale.reshape(bshape))
        red = (0,) + axes
        ds = None if scale is None else (dy * xhat).sum(axis=red).astype(scale.dtype)
        db = None if bias is None else dy.sum(axis=red).astype(bias.dtype)
        return dx.astype(x.dtype, copy=False), ds, db

    @staticmethod
    def emit(e):
        _emit_channel_norm_grad(e, None, instance=True)
