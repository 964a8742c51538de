"""Memory ops and the buffer-writing kernel forms other families declare.

* `delete_var` frees its inputs' values right after their last use (what
  `fluidity.transpiler.release_memory` inserts; Paddle's op of that name). The variables stay
  in the scope, empty, as after Paddle's eager deletion.
* `ufunc_out`, `binary_out`, `affine_out`, `mul_out`, `matmul_out` turn an op's plain
  kernel (`fallback`) into a `registry.Allocating` kernel, which `prepare` returns: its `into(
  *inputs, alloc)` writes the one output into `alloc(shape, dtype)` (a buffer the linear
  executor planned) with the same numpy calls, in the same order, as the plain kernel, so
  results are bit-identical. Inputs those calls don't cover exactly (mixed or integer dtypes,
  dispensable tensors) go to the plain kernel, whose result the executor then copies into
  the buffer.
"""
import numpy as np

from .common import broadcast_pair, flatten_to_2d
from .registry import Allocating, In, OpDef


class DeleteVar(OpDef):
    type = "delete_var"
    inputs = (In("X", duplicable=True),)
    kind = "ctx"
    share_lod = None
    infer_shape = None
    doc = "Drop the values of X (their buffers are freed; the variables stay, empty)."

    @staticmethod
    def make_step(p):
        slots = p.in_idx("X")

        def step(frame, env):
            for i in slots:
                frame[i].value = None
        return step


def _floats(*arrays):
    dt = arrays[0].dtype
    return dt.kind == "f" and all(a.dtype == dt for a in arrays)


def ufunc_out(f, fallback, *consts):
    """Out = f(x, *consts) for a numpy ufunc `f` (None when `f` is not one)."""
    if not isinstance(f, np.ufunc):
        return fallback

    def into(x, alloc):
        if x.dtype.kind != "f":
            return fallback(x)
        return f(x, *consts, out=alloc(x.shape, x.dtype))
    return Allocating(fallback, into)


def binary_out(f, axis, fallback):
    """Out = f(X, Y) with Paddle's `axis` broadcasting (elementwise_*)."""
    def into(x, y, alloc):
        if not _floats(x, y):
            return fallback(x, y)
        if x.shape == y.shape:
            return f(x, y, out=alloc(x.shape, x.dtype))
        a, b = broadcast_pair(x, y, axis)
        return f(a, b, out=alloc(np.broadcast_shapes(a.shape, b.shape), x.dtype))
    return Allocating(fallback, into)


def affine_out(scale, bias, bias_after_scale, fallback):
    """Out = X * scale + bias, or (X + bias) * scale (the `scale` op without ScaleTensor)."""
    def into(x, scale_t, alloc):
        if scale_t is not None or x.dtype.kind != "f":
            return fallback(x, scale_t)
        o = alloc(x.shape, x.dtype)
        if bias_after_scale:
            np.multiply(x, scale, out=o)
            if bias:
                np.add(o, bias, out=o)
        else:
            np.add(x, bias, out=o)
            np.multiply(o, scale, out=o)
        return o
    return Allocating(fallback, into)


def mul_out(x_num_col_dims, y_num_col_dims, fallback):
    """Out = flatten(X) @ flatten(Y) (the `mul` op)."""
    def into(x, y, alloc):
        if not _floats(x, y):
            return fallback(x, y)
        if x.ndim == 2 and y.ndim == 2:
            return np.matmul(x, y, out=alloc((x.shape[0], y.shape[1]), x.dtype))
        x2 = x.reshape(flatten_to_2d(x.shape, x_num_col_dims))
        y2 = y.reshape(flatten_to_2d(y.shape, y_num_col_dims))
        o = alloc(x.shape[:x_num_col_dims] + y.shape[y_num_col_dims:], x.dtype)
        np.matmul(x2, y2, out=o.reshape(x2.shape[0], y2.shape[1]))
        return o
    return Allocating(fallback, into)


def matmul_out(trans_x, trans_y, alpha, fallback):
    """Out = op(X) @ op(Y) for inputs of rank >= 2 and alpha 1 (matmul, matmul_v2)."""
    def into(x, y, alloc):
        if alpha != 1.0 or x.ndim < 2 or y.ndim < 2 or not _floats(x, y):
            return fallback(x, y)
        a = np.swapaxes(x, -1, -2) if trans_x else x
        b = np.swapaxes(y, -1, -2) if trans_y else y
        shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
        return np.matmul(a, b, out=alloc(shape, x.dtype))
    return Allocating(fallback, into)
