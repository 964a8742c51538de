"""Comparison and logical ops (bool outputs, no gradients), increment, where (+ grad),
where_index, clip (+ grad), arg_max / arg_min, isinf / isnan / isfinite, allclose.

Binary comparison and logical ops broadcast like elementwise_* (Paddle's `axis` rule).
"""
import numpy as np

from ..core import dtypes
from ..errors import ShapeError
from .common import align_for_broadcast, broadcast_pair, broadcast_shape
from .registry import In, OpDef, Out, long

BOOL = dtypes.VarType.BOOL


def _broadcast_out(ctx, axis):
    """Output shape of X and Y broadcast with Paddle's axis rule (fails naming both)."""
    xs, ys = ctx.input_shape("X"), ctx.input_shape("Y")
    big, small = (xs, ys) if len(xs) >= len(ys) else (ys, xs)
    try:
        out = broadcast_shape(big, align_for_broadcast(big, small, axis))
    except Exception:
        out = None
    if out is None or len(out) != len(big):
        ctx.fail(f"X{xs} and Y{ys} do not broadcast with axis={axis}")
    return out


class _Binary(OpDef):
    """Out (bool) = func(X, Y), broadcast."""
    inputs = (In("X"), In("Y"))
    outputs = (Out("Out"),)
    func = None

    @staticmethod
    def infer_shape(ctx):
        axis = ctx.attr("axis") if ctx.opdef.declares("axis") else -1
        ctx.set_output("Out", _broadcast_out(ctx, axis), BOOL, ctx.input_lod_level("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        f, axis = cls.func, attrs.get("axis", -1)

        def kernel(x, y):
            return f(x, y) if x.shape == y.shape else f(*broadcast_pair(x, y, axis))
        return kernel


# type: numpy function
COMPARISONS = {
    "less_than": np.less,
    "less_equal": np.less_equal,
    "greater_than": np.greater,
    "greater_equal": np.greater_equal,
    "equal": np.equal,
    "not_equal": np.not_equal,
}
LOGICAL = {
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
}


def _class_name(op_type):
    return "".join(p.title() for p in op_type.split("_"))


for _name, _f in COMPARISONS.items():
    type(_class_name(_name), (_Binary,),
         {"type": _name, "func": staticmethod(_f), "attrs": {"axis": -1, "force_cpu": False},
          "version": 1,  # Paddle's checkpoint: attribute force_cpu
          "__module__": __name__, "doc": f"Out = {_f.__name__}(X, Y) (bool), broadcast."})
for _name, _f in LOGICAL.items():
    type(_class_name(_name), (_Binary,),
         {"type": _name, "func": staticmethod(_f), "__module__": __name__,
          "doc": f"Out = {_f.__name__}(X, Y) (bool), broadcast."})


class LogicalNot(OpDef):
    type = "logical_not"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    doc = "Out = not X (bool)."
    c_expr, c_any_type, c_out_type = "!(bool)x", True, "bool"

    @staticmethod
    def infer_shape(ctx):
        ctx.share("X", "Out", dtype=BOOL)

    @staticmethod
    def kernel(x):
        return np.logical_not(x)


class Increment(OpDef):
    type = "increment"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    attrs = {"step": 1.0}
    doc = "Out = X + step; X holds one element (a loop counter)."

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        if any(d > 1 for d in xs):
            ctx.fail(f"X must hold exactly one element, got shape {xs}")
        ctx.share("X", "Out")

    @classmethod
    def prepare(cls, attrs, outputs):
        step = attrs["step"]

        def kernel(x):
            if x.size != 1:
                raise ShapeError(f"increment: X must hold exactly one element, got shape "
                                 f"{list(x.shape)}")
            return (x + step).astype(x.dtype, copy=False)
        return kernel


# --- where / where_index -------------------------------------------------------------------
class Where(OpDef):
    type = "where"
    inputs = (In("Condition", no_grad=True), In("X"), In("Y"))
    outputs = (Out("Out"),)
    share_lod = "X"
    doc = "Out = X where Condition else Y (all three of one shape)."

    @staticmethod
    def infer_shape(ctx):
        cs, xs, ys = (ctx.input_shape(s) for s in ("Condition", "X", "Y"))
        if not (len(cs) == len(xs) == len(ys) and all(
                len({d for d in dims if d >= 0}) <= 1 for dims in zip(cs, xs, ys))):
            ctx.fail(f"Condition{cs}, X{xs} and Y{ys} must have one shape")
        ctx.share("X", "Out")

    @staticmethod
    def kernel(cond, x, y):
        return np.where(cond, x, y)

    grad = staticmethod(lambda g: g.op(
        "where_grad", {"Condition": g.input("Condition"), "X": g.input("X"), "Y": g.input("Y"),
                       "Out@GRAD": g.output_grad("Out")},
        {"X@GRAD": g.input_grad("X"), "Y@GRAD": g.input_grad("Y")}))


class WhereGrad(OpDef):
    type = "where_grad"
    inputs = (In("Condition"), In("X"), In("Y"), In("Out@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True), Out("Y@GRAD", dispensable=True))
    infer_shape = None

    @staticmethod
    def kernel(cond, x, y, dout):
        zero = np.zeros((), dout.dtype)
        return np.where(cond, dout, zero), np.where(cond, zero, dout)


class WhereIndex(OpDef):
    type = "where_index"
    inputs = (In("Condition"),)
    outputs = (Out("Out"),)
    share_lod = None
    doc = "Out = [N, rank] int64 coordinates of Condition's true elements (fluid.layers.where)."

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", [-1, len(ctx.input_shape("Condition"))], dtypes.VarType.INT64)

    @staticmethod
    def kernel(cond):
        return np.argwhere(cond).astype(np.int64)


# --- clip ----------------------------------------------------------------------------------
def _bounds(attrs, min_t, max_t):
    lo = attrs["min"] if min_t is None else np.asarray(min_t).reshape(-1)[0]
    hi = attrs["max"] if max_t is None else np.asarray(max_t).reshape(-1)[0]
    if lo > hi:
        raise ShapeError(f"clip: min {lo} is greater than max {hi}")
    return lo, hi


class Clip(OpDef):
    type = "clip"
    version = 1  # Paddle's checkpoint: inputs Min and Max (dispensable, overriding the attributes)
    inputs = (In("X"), In("Min", dispensable=True, no_grad=True),
              In("Max", dispensable=True, no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"min": 0.0, "max": 0.0}
    doc = "Out = min(max(X, min), max); Min/Max tensors override the attributes."

    @staticmethod
    def infer_shape(ctx):
        if not (ctx.has_input("Min") or ctx.has_input("Max")) and ctx.attr("min") > ctx.attr("max"):
            ctx.fail(f"min {ctx.attr('min')} is greater than max {ctx.attr('max')}")
        ctx.share("X", "Out")

    @classmethod
    def prepare(cls, attrs, outputs):
        def kernel(x, min_t, max_t):
            lo, hi = _bounds(attrs, min_t, max_t)
            return np.clip(x, lo, hi).astype(x.dtype, copy=False)
        return kernel


    grad = staticmethod(lambda g: g.op(
        "clip_grad", {k: v for k, v in {"X": g.input("X"), "Min": g.input("Min"),
                                        "Max": g.input("Max"),
                                        "Out@GRAD": g.output_grad("Out")}.items() if v},
        {"X@GRAD": g.input_grad("X")}, g.attrs()))


class ClipGrad(OpDef):
    type = "clip_grad"
    inputs = (In("X"), In("Min", dispensable=True), In("Max", dispensable=True),
              In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = Clip.attrs
    infer_shape = None

    @classmethod
    def prepare(cls, attrs, outputs):
        def kernel(x, min_t, max_t, dout):
            lo, hi = _bounds(attrs, min_t, max_t)
            return np.where((x > lo) & (x < hi), dout, np.zeros((), dout.dtype))
        return kernel


# --- arg_max / arg_min -----------------------------------------------------------------------
def arg_out_shape(shape, axis, keepdims, flatten):
    if flatten:
        return [1] * len(shape) if keepdims else []
    rank = len(shape)
    if not -rank <= axis < max(rank, 1):
        raise ShapeError(f"axis {axis} is out of range for rank {rank}")
    axis = axis % rank if rank else 0
    if keepdims:
        return [1 if i == axis else d for i, d in enumerate(shape)]
    return [d for i, d in enumerate(shape) if i != axis]


class _ArgMinMax(OpDef):
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    attrs = {"axis": long(-1), "keepdims": False, "flatten": False, "dtype": -1}
    share_lod = None
    func = None

    @staticmethod
    def infer_shape(ctx):
        try:
            out = arg_out_shape(ctx.input_shape("X"), ctx.attr("axis"), ctx.attr("keepdims"),
                                 ctx.attr("flatten"))
        except ShapeError as e:
            ctx.fail(str(e))
        dt = ctx.attr("dtype")
        ctx.set_output("Out", out, dtypes.VarType.INT64 if dt == -1 else dt)

    @classmethod
    def prepare(cls, attrs, outputs):
        f, axis, keep, flat = cls.func, attrs["axis"], attrs["keepdims"], attrs["flatten"]
        dt = np.int64 if attrs["dtype"] == -1 else dtypes.to_numpy(attrs["dtype"])

        def kernel(x):
            out = f(x.reshape(-1)) if flat else f(x, axis=axis)
            return np.asarray(out, dtype=dt).reshape(arg_out_shape(list(x.shape), axis, keep,
                                                                    flat))
        return kernel


class ArgMax(_ArgMinMax):
    type = "arg_max"
    func = staticmethod(np.argmax)
    doc = "Out = index of the largest element along `axis` (of the flattened X if flatten)."


class ArgMin(_ArgMinMax):
    type = "arg_min"
    func = staticmethod(np.argmin)
    doc = "Out = index of the smallest element along `axis` (of the flattened X if flatten)."


# --- Paddle 2.x: isfinite_v2 ------------------------------------------------------------------
class IsFiniteV2(OpDef):
    type = "isfinite_v2"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    doc = "Out = whether each element of X is finite (neither inf nor nan), elementwise bool."

    @staticmethod
    def infer_shape(ctx):
        ctx.share("X", "Out", dtype=dtypes.VarType.BOOL)

    @staticmethod
    def kernel(x):
        return np.isfinite(x) if x.dtype.kind in "fc" else np.ones(x.shape, bool)


# --- Fluid 1.x: isinf / isnan / isfinite over the whole tensor --------------------------------
class _WholeCheck(OpDef):
    """Out = one bool ([1]) saying something of all of X (has_inf, has_nan, isfinite)."""
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    share_lod = None
    test = None              # test(float array) -> bool

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", [1], dtypes.VarType.BOOL)

    @classmethod
    def prepare(cls, attrs, outputs):
        test = cls.test
        return lambda x: np.array([test(x) if x.dtype.kind in "fc" else
                                   test(np.zeros(1))], dtype=bool)


class IsInf(_WholeCheck):
    type = "isinf"
    test = staticmethod(lambda x: bool(np.isinf(x).any()))
    doc = "Out = [whether any element of X is +-inf]."


class IsNan(_WholeCheck):
    type = "isnan"
    test = staticmethod(lambda x: bool(np.isnan(x).any()))
    doc = "Out = [whether any element of X is nan]."


class IsFinite(_WholeCheck):
    type = "isfinite"
    test = staticmethod(lambda x: bool(np.isfinite(x).all()))
    doc = "Out = [whether every element of X is finite]."


class IsEmpty(OpDef):
    type = "is_empty"
    inputs = (In("X", no_grad=True),)
    outputs = (Out("Out"),)
    share_lod = None
    doc = "Out = [whether X has no elements]."

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", [1], dtypes.VarType.BOOL)

    @staticmethod
    def kernel(x):
        return np.array([x.size == 0])


# --- allclose --------------------------------------------------------------------------------
class Allclose(OpDef):
    type = "allclose"
    inputs = (In("Input"), In("Other"))
    outputs = (Out("Out"),)
    attrs = {"rtol": 1e-5, "atol": 1e-8, "equal_nan": False}
    share_lod = None
    doc = ("Out = [all(|Input - Other| <= atol + rtol * |Other|)] (bool [1]); with equal_nan "
           "a NaN equals a NaN at the same place.")

    @staticmethod
    def infer_shape(ctx):
        a, b = ctx.input_shape("Input"), ctx.input_shape("Other")
        if len(a) != len(b) or any(p >= 0 and q >= 0 and p != q for p, q in zip(a, b)):
            ctx.fail("Input and Other must have the same shape")
        ctx.set_output("Out", [1], dtypes.VarType.BOOL)

    @staticmethod
    def kernel(a, b, *, rtol, atol, equal_nan):
        if a.shape != b.shape:
            raise ShapeError(f"allclose: Input{list(a.shape)} and Other{list(b.shape)} differ")
        t = a.dtype.type   # the tolerances in X's type, as Paddle's kernel casts them
        with np.errstate(invalid="ignore"):
            close = np.abs(a - b) <= t(atol) + t(rtol) * np.abs(b)
        if equal_nan:
            na, nb = np.isnan(a), np.isnan(b)
            ok = bool((na == nb).all() and (close != na).all())
        else:
            ok = bool(close.all())
        return np.array([ok])
