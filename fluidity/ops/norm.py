"""Normalization: batch_norm, inplace_abn (batch_norm fused with an invertible activation,
whose gradient is computed from the output alone, so Paddle can run it in place), layer_norm,
group_norm, instance_norm (the last two are Paddle 2.x vision ops: formulas and attributes as
Paddle 2.6 writes and runs them).

Y = (X - mean) / sqrt(var + epsilon) * Scale + Bias, the statistics taken per channel over
the batch (batch_norm), per sample over the dims from begin_norm_axis on (layer_norm), per
sample and group of channels (group_norm) or per sample and channel (instance_norm).
"""
import numpy as np

from ..errors import ExecutionError
from . import registry
from .common import channel_last, numel, present
from .registry import In, OpDef, Out


# --- batch_norm ----------------------------------------------------------------------------
def _bn_axes(x, layout):
    """(reduction axes, broadcast shape of a per-channel vector) for NCHW / NHWC."""
    c_axis = x.ndim - 1 if channel_last(layout) else 1
    shape = [1] * x.ndim
    shape[c_axis] = x.shape[c_axis]
    return tuple(i for i in range(x.ndim) if i != c_axis), shape


def bn_global_stats(attrs):
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
        global_stats = bn_global_stats(attrs)

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
        layout, global_stats = attrs["data_layout"], bn_global_stats(attrs)

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


# --- inplace_abn ----------------------------------------------------------------------------
_ABN_ACTS = ("", "identity", "leaky_relu", "elu")


def _abn_act(name):
    if name not in _ABN_ACTS:
        raise ExecutionError(f"inplace_abn: unsupported activation {name!r} (identity, "
                             f"leaky_relu or elu)")
    return name or "identity"


def abn_forward(y, act, alpha):
    if act == "leaky_relu":
        return np.where(y >= 0, y, y * alpha).astype(y.dtype, copy=False)
    if act == "elu":
        return np.where(y >= 0, y, alpha * np.expm1(np.minimum(y, 0))).astype(y.dtype,
                                                                              copy=False)
    return y


def abn_invert(out, dout, act, alpha):
    """(the batch norm's output, its gradient) from the activation's output and gradient:
    the activation is invertible, which is what lets Paddle overwrite X."""
    if act == "leaky_relu":
        neg = out < 0
        return np.where(neg, out / alpha, out), np.where(neg, dout * alpha, dout)
    if act == "elu":
        neg = out < 0
        return (np.where(neg, np.log1p(np.where(neg, out, 0) / alpha), out),
                np.where(neg, dout * (out + alpha), dout))
    return out, dout


class InplaceABN(OpDef):
    type = "inplace_abn"
    nonempty_inputs = ("X",)
    inputs = BatchNorm.inputs
    outputs = BatchNorm.outputs
    attrs = {**BatchNorm.attrs, "activation": "", "alpha": 0.1, "use_sync_bn": False}
    doc = ("Y = activation(batch_norm(X)), activation identity, leaky_relu or elu (slope or "
           "scale `alpha`); batch_norm's statistics outputs. Paddle writes Y over X.")

    infer_shape = staticmethod(BatchNorm.infer_shape)

    @classmethod
    def prepare(cls, attrs, outputs):
        act, alpha = _abn_act(attrs["activation"]), attrs["alpha"]
        bn = BatchNorm.kernel_for(registry.attrs_of(BatchNorm, {
            k: v for k, v in attrs.items() if BatchNorm.declares(k)}), outputs)

        def kernel(*ins):
            y, *rest = bn(*ins)
            return (abn_forward(y, act, alpha), *rest)
        return kernel

    @staticmethod
    def grad(g):
        ins = {"Y": g.output("Y"), "Y@GRAD": g.output_grad("Y"), "Scale": g.input("Scale"),
               "Bias": g.input("Bias"), "SavedMean": g.output("SavedMean"),
               "SavedVariance": g.output("SavedVariance")}
        if g.attr("use_global_stats"):
            ins.update({"Mean": g.output("MeanOut"), "Variance": g.output("VarianceOut")})
        g.op("inplace_abn_grad", ins,
             {"X@GRAD": g.input_grad("X"), "Scale@GRAD": g.input_grad("Scale"),
              "Bias@GRAD": g.input_grad("Bias")}, g.attrs())


class InplaceABNGrad(OpDef):
    type = "inplace_abn_grad"
    inputs = (In("Y"), In("Y@GRAD"), In("Scale"), In("Bias"), In("SavedMean"),
              In("SavedVariance"), In("Mean", dispensable=True),
              In("Variance", dispensable=True))
    outputs = (Out("X@GRAD", dispensable=True), Out("Scale@GRAD", dispensable=True),
               Out("Bias@GRAD", dispensable=True))
    attrs = InplaceABN.attrs
    infer_shape = None

    @classmethod
    def prepare(cls, attrs, outputs):
        act, alpha = _abn_act(attrs["activation"]), attrs["alpha"]
        bn_attrs = registry.attrs_of(BatchNorm, {k: v for k, v in attrs.items()
                                                 if BatchNorm.declares(k)})
        bn_grad = registry.get("batch_norm_grad").kernel_for(bn_attrs, outputs)
        channel_last = attrs["data_layout"] in ("NHWC", "NDHWC")

        def kernel(out, dout, scale, bias, saved_mean, inv_std, mean, var):
            y, dy = abn_invert(out, dout, act, alpha)
            shape = [1] * y.ndim
            shape[-1 if channel_last else 1] = -1
            if np.any(scale == 0):
                raise ExecutionError("inplace_abn_grad: a Scale of 0 loses the input; it cannot "
                                     "be recovered from the output")
            # the batch norm's input, recovered: x = (y - bias) / scale / inv_std + mean
            x = ((y - bias.reshape(shape)) / (scale * inv_std).reshape(shape)
                 + saved_mean.reshape(shape)).astype(y.dtype, copy=False)
            return bn_grad(x, scale, bias, saved_mean, inv_std, mean, var, None,
                           dy.astype(y.dtype, copy=False))
        return kernel


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


    grad = staticmethod(_layer_norm_grad)


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


    grad = staticmethod(_norm_grad)


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


    grad = staticmethod(_norm_grad)


def _instance_norm_double_grad(g):
    """The grad of instance_norm_grad: Paddle's instance_norm_grad_grad, fed the gradients
    of the grad op's dX, dScale and dBias (DDX, DDScale, DDBias) and its Y@GRAD (DY)."""
    ins = {"X": g.input("X"), "Scale": g.input("Scale"), "SavedMean": g.input("SavedMean"),
           "SavedVariance": g.input("SavedVariance"), "DY": g.input("Y@GRAD")}
    for slot, name in (("X@GRAD", "DDX"), ("Scale@GRAD", "DDScale"), ("Bias@GRAD", "DDBias")):
        if g.has_output(slot):
            ins[name] = g.output_grad(slot)
    outs = {"DX": g.input_grad("X"), "DDY": g.input_grad("Y@GRAD")}
    if g.input("Scale"):
        outs["DScale"] = g.input_grad("Scale")
    g.op("instance_norm_grad_grad", present(ins), outs, g.attrs())


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

    grad = staticmethod(_instance_norm_double_grad)


class InstanceNormGradGrad(OpDef):
    type = "instance_norm_grad_grad"
    inputs = (In("X"), In("Scale", dispensable=True), In("SavedMean"), In("SavedVariance"),
              In("DY"), In("DDX", dispensable=True), In("DDScale", dispensable=True),
              In("DDBias", dispensable=True))
    outputs = (Out("DX", dispensable=True), Out("DScale", dispensable=True),
               Out("DDY", dispensable=True))
    attrs = InstanceNorm.attrs
    infer_shape = None
    share_lod = None
    doc = ("The gradient of instance_norm_grad. Per sample and channel, with s = "
           "SavedVariance (1 / sqrt(var + epsilon)), xhat = (X - SavedMean) s, "
           "P(v) = v - mean(v) - xhat mean(v xhat) over the spatial dims and g = Scale DY "
           "(instance_norm_grad's dX = s P(g)): DDY = Scale s P(DDX) + DDScale xhat + DDBias; "
           "DScale = sum over N and space of DDX s P(DY); DX = -s^2 (xhat (mean(DDX g) - "
           "mean(DDX) mean(g) - mean(DDX xhat) mean(g xhat)) + mean(g xhat) P(DDX) + "
           "mean(DDX xhat) P(g)) + s P(DDScale DY). X's dependence through the statistics "
           "is included; SavedMean and SavedVariance get no gradient.")

    @staticmethod
    def kernel(x, scale, mean, inv, dy, ddx, ddscale, ddbias):
        axes = tuple(range(2, x.ndim))
        shp = x.shape[:2] + (1,) * (x.ndim - 2)
        bshape = (1, -1) + (1,) * (x.ndim - 2)
        s = inv.reshape(shp)
        xhat = (x - mean.reshape(shp)) * s
        gamma = 1.0 if scale is None else scale.reshape(bshape)

        def avg(v):
            return v.mean(axis=axes, keepdims=True)

        def proj(v):
            return v - avg(v) - xhat * avg(v * xhat)

        g = gamma * dy
        ddy, dx = np.zeros_like(x), np.zeros_like(x)
        ds = None if scale is None else np.zeros_like(scale)
        if ddx is not None:
            pddx, ddx_xhat, g_xhat = proj(ddx), avg(ddx * xhat), avg(g * xhat)
            ddy = ddy + gamma * s * pddx
            dx = dx - s * s * (xhat * (avg(ddx * g) - avg(ddx) * avg(g) - ddx_xhat * g_xhat)
                               + g_xhat * pddx + ddx_xhat * proj(g))
            if scale is not None:
                ds = (ddx * s * proj(dy)).sum(axis=(0,) + axes).reshape(scale.shape)
        if ddscale is not None:
            dds = ddscale.reshape(bshape)
            ddy = ddy + dds * xhat
            dx = dx + s * proj(dds * dy)
        if ddbias is not None:
            ddy = ddy + ddbias.reshape(bshape)
        return (dx.astype(x.dtype, copy=False),
                None if ds is None else ds.astype(scale.dtype, copy=False),
                ddy.astype(x.dtype, copy=False))
