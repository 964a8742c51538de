"""Fluid 1.8's fused dense CPU ops (inference ops: no gradients, as in Fluid).

* fusion_repeated_fc_relu: X -> relu(fc) -> relu(fc) -> ... with one W and Bias per layer
  (at least two layers), each layer the `fc` op's kernel with activation_type "relu".
* fusion_squared_mat_sub: Out = scalar * ((X @ Y)^2 - X^2 @ Y^2), the squares elementwise
  (the pairwise-interaction term of a factorization machine).
"""
import numpy as np

from ..core.tensor import LoDTensor
from ..errors import ExecutionError
from . import fused_parts
from .registry import In, OpDef, Out


class FusionRepeatedFCRelu(OpDef):
    type = "fusion_repeated_fc_relu"
    grad_undefined = True    # Fluid registers no gradient maker for it
    inputs = (In("X"), In("W", duplicable=True), In("Bias", duplicable=True))
    outputs = (Out("ReluOut", duplicable=True, dispensable=True, intermediate=True),
               Out("Out"))
    kind = "value"
    share_lod = None
    doc = ("Out = relu(... relu(relu(X @ W[0] + Bias[0]) @ W[1] + Bias[1]) ...); ReluOut[i] "
           "holds layer i's output for every layer but the last. X is [N, K], W[i] [K_i, "
           "K_{i+1}], Bias[i] K_{i+1} values.")

    @staticmethod
    def infer_shape(ctx):
        xs, ws, bs = ctx.input_shape("X"), ctx.input_shapes("W"), ctx.input_shapes("Bias")
        if len(ws) < 2:
            ctx.fail(f"W needs at least 2 layers, got {len(ws)}")
        if len(bs) != len(ws):
            ctx.fail(f"Bias needs one entry per W ({len(ws)}), got {len(bs)}")
        if len(xs) != 2:
            ctx.fail(f"X must be 2-D [N, K], got {xs}")
        width = xs[1]
        for i, (w, b) in enumerate(zip(ws, bs)):
            if len(w) != 2:
                ctx.fail(f"W[{i}] must be 2-D, got {w}")
            if width >= 0 and w[0] >= 0 and w[0] != width:
                ctx.fail(f"W[{i}] must have {width} rows (the previous layer's width), got "
                         f"{w[0]}")
            if all(v >= 0 for v in b) and w[1] >= 0 and int(np.prod(b)) != w[1]:
                ctx.fail(f"Bias[{i}] must hold {w[1]} values, got shape {b}")
            width = w[1]
        dt = ctx.input_dtype("X")
        n_relu = len(ctx.output_vars("ReluOut")) if ctx.has_output("ReluOut") else 0
        if n_relu and n_relu != len(ws) - 1:
            ctx.fail(f"ReluOut needs {len(ws) - 1} outputs (one per layer but the last), got "
                     f"{n_relu}")
        for i in range(n_relu):
            ctx.set_output("ReluOut", [xs[0], ws[i][1]], dt, 0, i=i)
        ctx.set_output("Out", [xs[0], ws[-1][1]], dt, ctx.input_lod_level("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        fc = fused_parts.kernel("fc", activation_type="relu")

        def kernel(x, ws, bs):
            if len(ws) < 2 or len(bs) != len(ws):
                raise ExecutionError(f"{cls.type}: needs at least 2 W and as many Bias, got "
                                     f"{len(ws)} and {len(bs)}")
            h = x._array
            if h.ndim != 2:
                raise ExecutionError(f"{cls.type}: X must be 2-D [N, K], got {list(h.shape)}")
            layers = []
            for i, (w, b) in enumerate(zip(ws, bs)):
                if w._array.shape[0] != h.shape[1] or b._array.size != w._array.shape[1]:
                    raise ExecutionError(
                        f"{cls.type}: layer {i} has W {list(w._array.shape)} and Bias "
                        f"{list(b._array.shape)} for an input of width {h.shape[1]}")
                h = fc(h, w._array, b._array)
                layers.append(h)
            return [LoDTensor(v) for v in layers[:-1]], LoDTensor(layers[-1], x._lod)
        return kernel


class FusionSquaredMatSub(OpDef):
    type = "fusion_squared_mat_sub"
    grad_undefined = True    # Fluid registers no gradient maker for it
    inputs = (In("X"), In("Y"))
    outputs = (Out("SquaredX", dispensable=True, intermediate=True),
               Out("SquaredY", dispensable=True, intermediate=True),
               Out("SquaredXY", dispensable=True, intermediate=True), Out("Out"))
    attrs = {"scalar": 1.0}
    share_lod = None
    doc = ("Out = scalar * ((X @ Y)^2 - X^2 @ Y^2) for X [M, K], Y [K, N]; SquaredX = X^2, "
           "SquaredY = Y^2, SquaredXY = (X @ Y)^2.")

    @staticmethod
    def infer_shape(ctx):
        xs, ys = ctx.input_shape("X"), ctx.input_shape("Y")
        if len(xs) != 2 or len(ys) != 2:
            ctx.fail(f"X and Y must be 2-D, got {xs} and {ys}")
        if xs[1] >= 0 and ys[0] >= 0 and xs[1] != ys[0]:
            ctx.fail(f"X's columns ({xs[1]}) must equal Y's rows ({ys[0]})")
        dt = ctx.input_dtype("X")
        ctx.set_output("SquaredX", xs, dt, 0)
        ctx.set_output("SquaredY", ys, dt, 0)
        for slot in ("SquaredXY", "Out"):
            ctx.set_output(slot, [xs[0], ys[1]], dt, 0)

    @classmethod
    def prepare(cls, attrs, outputs):
        square, scalar = fused_parts.activation("square"), attrs["scalar"]

        def kernel(x, y):
            if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[0]:
                raise ExecutionError(f"{cls.type}: X {list(x.shape)} and Y {list(y.shape)} "
                                     f"are not [M, K] and [K, N]")
            sx, sy = square(x), square(y)
            sxy = square(x @ y)
            out = ((sxy - sx @ sy) * scalar).astype(x.dtype, copy=False)
            return sx, sy, sxy, out
        return kernel
