"""Reductions: reduce_sum, reduce_mean, reduce_max, reduce_min, reduce_prod.

One base class and one table. Attributes are Paddle's: `dim` (default [0]), `keep_dim`,
`reduce_all`, `in_dtype`/`out_dtype` (-1: X's dtype; otherwise X is cast to out_dtype first).
An empty `dim` or reduce_all=True reduces every dim.

Output shape: the reduced dims are dropped (kept as 1 with keep_dim). A reduction that drops
every dim (reduce_all, or `dim` naming every axis, keep_dim False) gives shape [1], as Fluid
1.x's InferShape does (and so do `mean`, `accuracy`, `auc`, `size`, `kldiv_loss` with a
reduction, `slice` dropping every dim, the `loss@GRAD` backward seeds and the optimizers'
learning rate): Fluid programs index `loss[0]` and check `.shape == (1,)`.

A program saved by Paddle 2.5 or later declares 0-D ([]) there instead; it keeps its 0-D
values, because the executor shapes a one-element result as the op's output variable is
declared ([] or [1]; `executor/plan.py`, and `codegen/cir.py` for compiled code). Every op
that reads such a value accepts [] and [1] alike.
"""
import numpy as np

from ..core import dtypes
from ..errors import ShapeError
from .common import default_grad, linear_double_grad
from .registry import In, OpDef, Out, ints, longs


def reduced_axes(rank, dim, reduce_all):
    """Sorted normalized axes to reduce."""
    if reduce_all or not dim:
        return tuple(range(rank))
    axes = set()
    for d in dim:
        if not -rank <= d < max(rank, 1):
            raise ShapeError(f"dim {list(dim)} holds {d}, out of range for rank {rank}")
        axes.add(d % rank if rank else 0)
    return tuple(sorted(axes))


def _out_shape(shape, axes, keep_dim):
    if keep_dim:
        return [1 if i in axes else d for i, d in enumerate(shape)]
    return [d for i, d in enumerate(shape) if i not in axes] or [1]


REDUCERS = {
    "reduce_sum": np.sum,
    "reduce_mean": np.mean,
    "reduce_max": np.max,
    "reduce_min": np.min,
    "reduce_prod": np.prod,
}


class Reduce(OpDef):
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    attrs = {"dim": ints([0]), "keep_dim": False, "reduce_all": False,
             "in_dtype": -1, "out_dtype": -1}
    share_lod = "X"
    func = None

    @classmethod
    def lod_source(cls, attrs):
        """Fluid 1.8's ReduceOp shares X's LoD unless dim 0 is reduced (reduce_all, or a
        `dim` of 0; a negative dim counts as not 0: its rank is not known here)."""
        if attrs.get("reduce_all") or 0 in list(attrs.get("dim", [0])):
            return None
        return "X"

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        try:
            axes = reduced_axes(len(xs), ctx.attr("dim"), ctx.attr("reduce_all"))
        except ShapeError as e:
            ctx.fail(str(e))
        out_dtype = ctx.attr("out_dtype")
        shares = not ctx.attr("reduce_all") and 0 not in list(ctx.attr("dim"))
        ctx.set_output("Out", _out_shape(xs, axes, ctx.attr("keep_dim")),
                       out_dtype if out_dtype >= 0 else ctx.input_dtype("X"),
                       ctx.input_lod_level("X") if shares else 0)

    @classmethod
    def prepare(cls, attrs, outputs):
        f, keep = cls.func, attrs["keep_dim"]
        dim, everything = attrs["dim"], attrs["reduce_all"]
        to = dtypes.to_numpy(attrs["out_dtype"]) if attrs["out_dtype"] >= 0 else None

        def kernel(x):
            axes = reduced_axes(x.ndim, dim, everything)
            dt = to or x.dtype
            out = np.asarray(f(x.astype(dt, copy=False), axis=axes, keepdims=keep))
            return out.astype(dt, copy=False).reshape(_out_shape(x.shape, axes, keep))
        return kernel


def _reduce_grad_without_out(g):
    """reduce_sum / reduce_mean: Paddle's grad op reads X (for its shape) and Out@GRAD only."""
    g.op(g.fwd.type + "_grad", {"X": g.input("X"), "Out@GRAD": g.output_grad("Out")},
         {"X@GRAD": g.input_grad("X")}, g.attrs())


for _name, _f in REDUCERS.items():
    type("".join(p.title() for p in _name.split("_")), (Reduce,),
         {"type": _name, "func": staticmethod(_f), "__module__": __name__,
          "doc": f"Out = {_f.__name__} of X over `dim` (every dim if reduce_all or dim=[]).",

          "grad": staticmethod(_reduce_grad_without_out if _name in ("reduce_sum", "reduce_mean")
                               else default_grad)})


# --- gradients -----------------------------------------------------------------------------
def _prod_of_others(x, axes):
    """For each element, the product of the other elements of its reduced group (exact when
    the group holds zeros, unlike out / x): prefix and suffix cumulative products."""
    k = len(axes)
    moved = np.moveaxis(x, axes, range(-k, 0))
    flat = moved.reshape(moved.shape[:x.ndim - k] + (-1,))
    ones = np.ones(flat.shape[:-1] + (1,), x.dtype)
    before = np.cumprod(np.concatenate([ones, flat[..., :-1]], -1), -1)
    after = np.cumprod(np.concatenate([ones, flat[..., :0:-1]], -1), -1)[..., ::-1]
    return np.moveaxis((before * after).reshape(moved.shape), range(-k, 0), axes)


# dX from (x, out, dout) with out/dout shaped keep_dim-style (broadcastable to x), reduced axes
REDUCE_GRADS = {
    "reduce_sum": lambda x, o, d, axes: np.broadcast_to(d, x.shape),
    "reduce_mean": lambda x, o, d, axes: np.broadcast_to(
        d / max(int(np.prod([x.shape[a] for a in axes])), 1), x.shape),
    # every element equal to the extreme gets the whole gradient (Paddle's rule)
    "reduce_max": lambda x, o, d, axes: d * (x == o),
    "reduce_min": lambda x, o, d, axes: d * (x == o),
    "reduce_prod": lambda x, o, d, axes: d * _prod_of_others(x, axes),
}


class ReduceGrad(OpDef):
    inputs = (In("X"), In("Out", dispensable=True), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = Reduce.attrs
    infer_shape = None
    share_lod = "X"          # X@GRAD keeps X's LoD (Fluid's ReduceGradOp shares it)
    dfunc = None

    @classmethod
    def prepare(cls, attrs, outputs):
        df, dim, everything = cls.dfunc, attrs["dim"], attrs["reduce_all"]

        def kernel(x, out, dout):
            axes = reduced_axes(x.ndim, dim, everything)
            kept = _out_shape(x.shape, axes, True)
            o = None if out is None else out.reshape(kept)
            return np.asarray(df(x, o, dout.reshape(kept), axes)).astype(x.dtype)
        return kernel


for _name, _df in REDUCE_GRADS.items():
    type("".join(p.title() for p in _name.split("_")) + "Grad", (ReduceGrad,),
         {"type": _name + "_grad", "dfunc": staticmethod(_df), "__module__": __name__,
          **({"grad": linear_double_grad(_name)} if _name in ("reduce_sum", "reduce_mean")
             else {})})


# --- Paddle 2.x: reduce_all / reduce_any, p_norm, frobenius_norm ----------------------------
class _BoolReduce(Reduce):
    attrs = {**Reduce.attrs, "dim": longs([0])}

    @staticmethod
    def infer_shape(ctx):
        Reduce.infer_shape(ctx)
        ctx.set_output("Out", dtype=dtypes.VarType.BOOL)


class ReduceAll(_BoolReduce):
    type = "reduce_all"
    func = staticmethod(np.all)
    doc = "Out = whether every element of X over `dim` is true."


class ReduceAny(_BoolReduce):
    type = "reduce_any"
    func = staticmethod(np.any)
    doc = "Out = whether any element of X over `dim` is true."


class FrobeniusNorm(Reduce):
    type = "frobenius_norm"
    func = staticmethod(lambda x, axis, keepdims: np.sqrt(
        np.sum(np.square(x), axis=axis, keepdims=keepdims)))
    doc = "Out = sqrt(sum of X^2) over `dim` (every dim if reduce_all)."
    grad = staticmethod(default_grad)


class FrobeniusNormGrad(ReduceGrad):
    type = "frobenius_norm_grad"
    dfunc = staticmethod(lambda x, o, d, axes: d * x / np.where(o == 0, 1, o))


def _p_norm_axes(x, axis, asvector):
    return tuple(range(x.ndim)) if asvector else (axis % x.ndim if x.ndim else 0,)


def _p_norm(x, p, axes, keep):
    a = np.abs(x)
    if p == 0:
        return np.sum(a != 0, axis=axes, keepdims=keep).astype(x.dtype)
    if np.isinf(p):
        return (np.max if p > 0 else np.min)(a, axis=axes, keepdims=keep)
    return np.power(np.sum(np.power(a, p), axis=axes, keepdims=keep), 1.0 / p)


def _p_norm_shape(xs, axis, keep, asvector):
    if asvector:
        return [1] * len(xs) if keep else []
    a = axis % len(xs) if xs else 0
    return [1 if i == a else d for i, d in enumerate(xs)] if keep else \
        [d for i, d in enumerate(xs) if i != a]


class PNorm(OpDef):
    type = "p_norm"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    attrs = {"porder": 2.0, "axis": -1, "epsilon": 1e-12, "keepdim": False, "asvector": False}
    share_lod = None
    version = 1   # `asvector`
    doc = ("Out = (sum |X|^porder)^(1/porder) along `axis` (all of X if asvector); porder 0 "
           "counts nonzeros, +-inf takes the max/min of |X|.")

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", _p_norm_shape(ctx.input_shape("X"), ctx.attr("axis"),
                                            ctx.attr("keepdim"), ctx.attr("asvector")),
                       ctx.input_dtype("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        p, axis, keep, vec = attrs["porder"], attrs["axis"], attrs["keepdim"], attrs["asvector"]

        def kernel(x):
            out = _p_norm(x, p, _p_norm_axes(x, axis, vec), keep)
            return np.asarray(out, dtype=x.dtype).reshape(
                _p_norm_shape(list(x.shape), axis, keep, vec))
        return kernel

    grad = staticmethod(lambda g: g.default())


class PNormGrad(OpDef):
    type = "p_norm_grad"
    inputs = (In("X"), In("Out"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = PNorm.attrs
    infer_shape = None
    share_lod = None

    @classmethod
    def prepare(cls, attrs, outputs):
        p, axis, vec, eps = attrs["porder"], attrs["axis"], attrs["asvector"], attrs["epsilon"]

        def kernel(x, out, dout):
            axes = _p_norm_axes(x, axis, vec)
            kept = [1 if i in axes else d for i, d in enumerate(x.shape)]
            o, d = out.reshape(kept), dout.reshape(kept)
            if p == 0:
                return np.zeros_like(x)
            if np.isinf(p):   # the gradient goes to the elements at the extreme
                return (d * np.sign(x) * (np.abs(x) == o)).astype(x.dtype)
            g = np.sign(x) * np.power(np.abs(x), p - 1) / np.power(np.maximum(o, eps), p - 1)
            return (d * g).astype(x.dtype)
        return kernel
