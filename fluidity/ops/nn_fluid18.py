"""Two ops Fluid 1.8 added to fluid.layers.nn: unbind (a tensor into its slices along an
axis) and inplace_abn (batch norm fused with an invertible activation, whose gradient is
computed from the output alone, so Paddle can run it in place).
"""
import numpy as np

from ..errors import ExecutionError
from . import registry
from .norm import BatchNorm
from .registry import In, OpDef, Out


class Unbind(OpDef):
    type = "unbind"
    inputs = (In("X"),)
    outputs = (Out("Out", duplicable=True),)
    attrs = {"axis": 0}
    share_lod = None
    doc = "Out[i] = X[..., i, ...] along `axis` (that dim removed), one output per slice."

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        axis = ctx.attr("axis")
        if not -len(xs) <= axis < len(xs):
            ctx.fail(f"axis {axis} is out of range for X of rank {len(xs)}")
        axis %= len(xs)
        n = len(ctx.op.output("Out"))
        if xs[axis] >= 0 and xs[axis] != n:
            ctx.fail(f"X has {xs[axis]} slices along axis {axis} but the op has {n} outputs")
        ctx.set_output("Out", xs[:axis] + xs[axis + 1:], ctx.input_dtype("X"))

    @staticmethod
    def kernel(x, *, axis):
        return [np.ascontiguousarray(s) for s in np.moveaxis(x, axis, 0)]

    # Paddle's gradient: the output gradients stacked back along `axis`
    grad = staticmethod(lambda g: g.op("stack", {"X": g.output_grad("Out")},
                                       {"Y": g.input_grad("X")}, {"axis": g.attr("axis")}))


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
