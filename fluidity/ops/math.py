"""Arithmetic ops: scale, elementwise_* (Paddle's `axis` broadcasting), mul, matmul,
matmul_v2, sum, mean."""

import numpy as np

from ..core.dtypes import VarType
from ..core.names import EMPTY_VAR_NAME
from ..core.tensor import LoDTensor, LoDTensorArray, SelectedRows
from ..errors import ExecutionError, ProgramError, ShapeError
from .common import (add_grads, align_for_broadcast, bilinear_double_grad, broadcast_pair,
                     broadcast_shape, default_grad, flatten_to_2d, linear_double_grad, present,
                     prod, reduce_to_shape)
from .memory_ops import affine_out, binary_out, matmul_out, mul_out
from .registry import In, OpDef, Out, floats


class Scale(OpDef):
    type = "scale"
    inputs = (In("X"), In("ScaleTensor", dispensable=True, no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"scale": 1.0, "bias": 0.0, "bias_after_scale": True}
    doc = "Out = scale * X + bias (bias_after_scale) or scale * (X + bias)."
    inplace = {"Out": "X"}

    @classmethod
    def prepare(cls, attrs, outputs):
        s, b, after = attrs["scale"], attrs["bias"], attrs["bias_after_scale"]

        def kernel(x, scale_t):
            k = s if scale_t is None else np.asarray(scale_t).reshape(-1)[0]
            dt = x.dtype
            if after:
                return (x * k + b).astype(dt, copy=False) if b else (x * k).astype(dt, copy=False)
            return ((x + b) * k).astype(dt, copy=False)
        return affine_out(s, b, after, kernel)


    @staticmethod
    def selected_rows_kernel(attrs):
        """Paddle's scale of a SelectedRows X: the same rows, their values scaled (a
        parameter server averages the trainers' sparse gradients with it)."""
        s, b, after = attrs["scale"], attrs["bias"], attrs["bias_after_scale"]

        def kernel(x, scale_t):
            k = s if scale_t is None else np.asarray(scale_t._array).reshape(-1)[0]
            v = x.value
            out = v * k + b if after else (v + b) * k
            return SelectedRows(x.rows.copy(), x.height, out.astype(v.dtype, copy=False))
        return kernel


    # dX = scale * dOut, the scale a ScaleTensor gives at run time included (as Fluid 1.8)
    grad = staticmethod(lambda g: g.op(
        "scale", {"X": g.output_grad("Out"), "ScaleTensor": g.input("ScaleTensor")},
        {"Out": g.input_grad("X")},
        {"scale": g.attr("scale"), "bias": 0.0, "bias_after_scale": True}))


# --- elementwise family: one table, one class each -------------------------------------
# type: numpy function
ELEMENTWISE = {
    "elementwise_add": np.add,
    "elementwise_sub": np.subtract,
    "elementwise_mul": np.multiply,
    "elementwise_div": np.divide,
    "elementwise_max": np.maximum,
    "elementwise_min": np.minimum,
    "elementwise_pow": np.power,
    "elementwise_mod": np.mod,
    "elementwise_floordiv": np.floor_divide,
}

# d(out)/dx, d(out)/dy of each elementwise op with a gradient (not mod, floordiv), given x, y
# (broadcast), out, dout
ELEMENTWISE_GRADS = {
    "elementwise_add": (lambda x, y, o, d: d, lambda x, y, o, d: d),
    "elementwise_sub": (lambda x, y, o, d: d, lambda x, y, o, d: -d),
    "elementwise_mul": (lambda x, y, o, d: d * y, lambda x, y, o, d: d * x),
    "elementwise_div": (lambda x, y, o, d: d / y, lambda x, y, o, d: -d * o / y),
    "elementwise_max": (lambda x, y, o, d: d * (x > y), lambda x, y, o, d: d * (x <= y)),
    "elementwise_min": (lambda x, y, o, d: d * (x < y), lambda x, y, o, d: d * (x >= y)),
    "elementwise_pow": (lambda x, y, o, d: d * y * np.power(x, y - 1),
                        lambda x, y, o, d: d * o * np.log(np.where(x > 0, x, 1))),
}


class Elementwise(OpDef):
    inputs = (In("X"), In("Y"))
    outputs = (Out("Out"),)
    attrs = {"axis": -1}
    version = 1   # Paddle's checkpoint: attribute Scale_y (not declared here)
    func = None
    inplace = {"Out": "X"}

    @staticmethod
    def infer_shape(ctx):
        xs, ys = ctx.input_shape("X"), ctx.input_shape("Y")
        axis = ctx.attr("axis")
        big, small = (xs, ys) if len(xs) >= len(ys) else (ys, xs)
        try:
            aligned = align_for_broadcast(big, small, axis)
        except Exception:
            aligned = None
        out = broadcast_shape(big, aligned) if aligned is not None and len(aligned) == len(big) \
            else None
        if out is None:
            ctx.fail(f"X{xs} and Y{ys} do not broadcast with axis={axis}")
        lod_src = "X" if len(xs) >= len(ys) else "Y"
        ctx.set_output("Out", out, ctx.input_dtype("X"), ctx.input_lod_level(lod_src))

    @classmethod
    def prepare(cls, attrs, outputs):
        f, axis = cls.func, attrs["axis"]

        def kernel(x, y):
            if x.shape == y.shape:
                out = f(x, y)
            else:
                out = f(*broadcast_pair(x, y, axis))
            return out if out.dtype == x.dtype else out.astype(x.dtype)
        return binary_out(f, axis, kernel)


for _name, _f in ELEMENTWISE.items():
    type("".join(p.title() for p in _name.split("_")), (Elementwise,),
         {"type": _name, "func": staticmethod(_f), 
          "__module__": __name__,
          "doc": f"Out = {_f.__name__}(X, Y) with Paddle's axis broadcasting.",
          "grad": staticmethod(default_grad) if _name in ELEMENTWISE_GRADS else None})


def _mul_grad(g):
    g.op("mul_grad", {"X": g.input("X"), "Y": g.input("Y"), "Out@GRAD": g.output_grad("Out")},
         {"X@GRAD": g.input_grad("X"), "Y@GRAD": g.input_grad("Y")}, g.attrs())


class Mul(OpDef):
    type = "mul"
    nonempty_inputs = ("X",)
    inputs = (In("X"), In("Y"))
    outputs = (Out("Out"),)
    # Fluid 1.8's full set: the scales and force_fp32_output are read by oneDNN's int8
    # kernel only; Paddle's float kernel (this one) ignores them, as use_mkldnn
    attrs = {"x_num_col_dims": 1, "y_num_col_dims": 1, "use_mkldnn": False, "scale_x": 1.0,
             "scale_y": floats([1.0]), "scale_out": 1.0, "force_fp32_output": False}
    doc = "Out = flatten(X, x_num_col_dims) @ flatten(Y, y_num_col_dims) (fc's matmul)."

    @staticmethod
    def infer_shape(ctx):
        xs, ys = ctx.input_shape("X"), ctx.input_shape("Y")
        xn, yn = ctx.attr("x_num_col_dims"), ctx.attr("y_num_col_dims")
        xk = prod(xs[xn:])
        yk = prod(ys[:yn])
        if xk > 0 and yk > 0 and xk != yk:
            ctx.fail(f"X flattened at {xn} has {xk} columns but Y flattened at {yn} has "
                     f"{yk} rows")
        ctx.set_output("Out", xs[:xn] + ys[yn:], ctx.input_dtype("X"),
                       ctx.input_lod_level("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        xn, yn = attrs["x_num_col_dims"], attrs["y_num_col_dims"]

        def kernel(x, y):
            if x.ndim == 2 and y.ndim == 2:
                return x @ y
            x2 = x.reshape(flatten_to_2d(x.shape, xn))
            y2 = y.reshape(flatten_to_2d(y.shape, yn))
            return (x2 @ y2).reshape(x.shape[:xn] + y.shape[yn:])
        return mul_out(xn, yn, kernel)


    grad = staticmethod(_mul_grad)


def _matmul_shape(xs, ys, tx, ty):
    xs, ys = list(xs), list(ys)
    squeeze_x = squeeze_y = False
    if len(xs) == 1:
        xs, squeeze_x = [1] + xs, True
    if len(ys) == 1:
        ys, squeeze_y = ys + [1], True
    if tx and not squeeze_x:      # a 1-D operand is a vector either way (Paddle's kernel)
        xs[-1], xs[-2] = xs[-2], xs[-1]
    if ty and not squeeze_y:
        ys[-1], ys[-2] = ys[-2], ys[-1]
    if xs[-1] >= 0 and ys[-2] >= 0 and xs[-1] != ys[-2]:
        return None
    n = max(len(xs), len(ys))
    bx = [1] * (n - len(xs)) + xs[:-2]
    by = [1] * (n - len(ys)) + ys[:-2]
    batch = broadcast_shape(bx[:n - 2], by[:n - 2]) if n > 2 else []
    if batch is None:
        return None
    out = batch + [xs[-2], ys[-1]]
    if squeeze_x:
        out.pop(-2)
    if squeeze_y:
        out.pop(-1)
    return out


def _head_split(a_shape, b_shape, heads):
    """Paddle 1.8's matmul with head_number H over op(X) [.., M, Ka] and op(Y) [.., Kb, N]:
    X's columns cut into H heads; Y's rows cut alike when Kb == Ka (Out [.., M, H*N]), else
    (Kb == Ka/H, N divisible by H) Y's columns (Out [.., M, N]). Returns (split Y's columns,
    head width of X, head width of Y's cut dim, Out's last dim)."""
    ka, kb, n = a_shape[-1], b_shape[-2], b_shape[-1]
    if heads < 1 or ka % heads:
        raise ShapeError(f"matmul: head_number {heads} must divide X's width {ka}")
    if kb == ka:
        return False, ka // heads, ka // heads, heads * n
    if kb != ka // heads or n % heads:
        raise ShapeError(f"matmul: with head_number {heads}, Y's height {kb} must be X's "
                         f"width {ka} or its head width {ka // heads} (then Y's width {n} "
                         f"divisible by the heads)")
    return True, ka // heads, n // heads, n


def _matmul_heads(a, b, heads):
    vertical, wa, wb, _ = _head_split(a.shape, b.shape, heads)
    parts = []
    for i in range(heads):
        ai = a[..., i * wa:(i + 1) * wa]
        bi = b[..., :, i * wb:(i + 1) * wb] if vertical else b[..., i * wb:(i + 1) * wb, :]
        parts.append(np.matmul(ai, bi))
    return np.concatenate(parts, axis=-1)


def _matmul_heads_grad(a, b, d, heads):
    """Gradients (of op(X), of op(Y)) of _matmul_heads, batch dims as broadcast."""
    vertical, wa, wb, _ = _head_split(a.shape, b.shape, heads)
    n = d.shape[-1] // heads
    da, db = [], []
    for i in range(heads):
        ai = a[..., i * wa:(i + 1) * wa]
        bi = b[..., :, i * wb:(i + 1) * wb] if vertical else b[..., i * wb:(i + 1) * wb, :]
        di = d[..., i * n:(i + 1) * n]
        da.append(np.matmul(di, np.swapaxes(bi, -1, -2)))
        db.append(np.matmul(np.swapaxes(ai, -1, -2), di))
    ga = np.concatenate(da, axis=-1)
    gb = np.concatenate(db, axis=-1 if vertical else -2)
    return reduce_to_shape(ga, a.shape), reduce_to_shape(gb, b.shape)


def _fluid18_operands(x, y, tx, ty):
    """matmul's (v1) operands as Paddle 1.8 reads them: a 1-D X is the row [1, K] and a 1-D
    Y the column [K, 1] *before* their transposes (so a transposed 1-D X is a column: X [3]
    with transpose_X times Y [4] with transpose_Y is their outer product [3, 4]); batch dims
    broadcast as numpy does, and batches of the same size but different dims (Paddle
    flattens them) are laid out as X's."""
    a = x[None, :] if x.ndim == 1 else x
    b = y[:, None] if y.ndim == 1 else y
    a = np.swapaxes(a, -1, -2) if tx else a
    b = np.swapaxes(b, -1, -2) if ty else b
    if a.ndim > 2 and b.ndim > 2 and a.shape[:-2] != b.shape[:-2] and \
            prod(a.shape[:-2]) == prod(b.shape[:-2]):
        try:
            np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        except ValueError:
            b = b.reshape(a.shape[:-2] + b.shape[-2:])
    return a, b


def _fluid18_out_shape(out_shape, x_ndim, y_ndim):
    """Paddle 1.8's Out dims from the [.., M, N] product: a 1-D X drops M when it is 1, a
    1-D Y drops N when it is 1, and nothing left is [1]."""
    out = list(out_shape)
    if x_ndim == 1 and len(out) >= 2 and out[-2] == 1:
        out.pop(-2)
    if y_ndim == 1 and out and out[-1] == 1:
        out.pop(-1)
    return out or [1]


class _MatmulBase(OpDef):
    inputs = (In("X"), In("Y"))
    outputs = (Out("Out"),)
    share_lod = None
    tx_attr, ty_attr = "trans_x", "trans_y"
    fluid18_vectors = False   # matmul (v1): Paddle 1.8's 1-D operands (_fluid18_operands)

    @classmethod
    def infer_shape(cls, ctx):
        xs, ys = ctx.input_shape("X"), ctx.input_shape("Y")
        tx, ty = ctx.attr(cls.tx_attr), ctx.attr(cls.ty_attr)
        heads = ctx.attr("head_number") if ctx.opdef.declares("head_number") else 1
        if heads != 1 and len(xs) >= 2 and len(ys) >= 2:
            a = xs[:-2] + (xs[-2:][::-1] if tx else xs[-2:])
            b = ys[:-2] + (ys[-2:][::-1] if ty else ys[-2:])
            if a[-1] >= 0 and b[-2] >= 0 and b[-1] >= 0:
                try:
                    last = _head_split(a, b, heads)[3]
                except ShapeError as e:
                    ctx.fail(str(e))
                b = b[:-2] + [a[-1], last]
            else:
                b = b[:-2] + [a[-1], -1]
            out = _matmul_shape(a, b, False, False)
        elif cls.fluid18_vectors and (len(xs) == 1 or len(ys) == 1):
            a = [1] + xs if len(xs) == 1 else list(xs)
            b = ys + [1] if len(ys) == 1 else list(ys)
            out = _matmul_shape(a, b, tx, ty)
            out = None if out is None else _fluid18_out_shape(out, len(xs), len(ys))
        else:
            out = _matmul_shape(xs, ys, tx, ty)
        if out is None:
            ctx.fail(f"X{xs} (transpose={tx}) and Y{ys} (transpose={ty}) cannot be multiplied")
        ctx.set_output("Out", out, ctx.input_dtype("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        tx, ty = attrs[cls.tx_attr], attrs[cls.ty_attr]
        alpha = attrs.get("alpha", 1.0)
        heads = attrs.get("head_number", 1)
        if heads != 1:
            return cls._heads_kernel(tx, ty, alpha, heads)

        if cls.fluid18_vectors:
            def kernel18(x, y):
                a, b = _fluid18_operands(x, y, tx, ty)
                out = np.matmul(a, b)
                if alpha != 1.0:
                    out = out * np.asarray(alpha, dtype=out.dtype)
                return np.asarray(out).reshape(_fluid18_out_shape(out.shape, x.ndim, y.ndim))
            return matmul_out(tx, ty, alpha, kernel18)

        def kernel(x, y):
            if tx and x.ndim > 1:
                x = np.swapaxes(x, -1, -2)
            if ty and y.ndim > 1:
                y = np.swapaxes(y, -1, -2)
            out = np.matmul(x, y)
            if alpha != 1.0:
                out = out * np.asarray(alpha, dtype=out.dtype)
            return np.asarray(out)
        return matmul_out(tx, ty, alpha, kernel)

    @staticmethod
    def _heads_kernel(tx, ty, alpha, heads):
        def kernel(x, y):
            if x.ndim < 2 or y.ndim < 2:
                raise ShapeError(f"matmul: head_number {heads} needs X and Y of 2 or more "
                                 f"dims, got {list(x.shape)} and {list(y.shape)}")
            a = np.swapaxes(x, -1, -2) if tx else x
            b = np.swapaxes(y, -1, -2) if ty else y
            out = _matmul_heads(a, b, heads)
            return (out * np.asarray(alpha, out.dtype)).astype(x.dtype)
        return kernel


def _matmul_grad(g):
    g.op(g.fwd.type + "_grad",
         {"X": g.input("X"), "Y": g.input("Y"), "Out@GRAD": g.output_grad("Out")},
         {"X@GRAD": g.input_grad("X"), "Y@GRAD": g.input_grad("Y")}, g.attrs())


class Matmul(_MatmulBase):
    type = "matmul"
    share_lod = "X"
    lod_outputs = ("Out",)
    # Paddle's checkpoint 1: attribute fused_reshape_Y of oneDNN fusion passes, which Paddle
    # clips from saved programs (a program still carrying it fails the attribute check)
    version = 1
    attrs = {"transpose_X": False, "transpose_Y": False, "alpha": 1.0, "head_number": 1}
    tx_attr, ty_attr = "transpose_X", "transpose_Y"
    fluid18_vectors = True
    doc = ("Out = alpha * op(X) @ op(Y), batched, with numpy's broadcasting of batch dims; a "
           "1-D X is a row and a 1-D Y a column before their transposes (Paddle 1.8); "
           "head_number H cuts X's columns (and Y's rows, or Y's columns when Y's height is "
           "X's head width) into H heads multiplied pairwise and joined along the last dim.")
    grad = staticmethod(_matmul_grad)


class MatmulV2(_MatmulBase):
    type = "matmul_v2"
    attrs = {"trans_x": False, "trans_y": False}
    doc = "Out = op(X) @ op(Y) (paddle.matmul)."
    grad = staticmethod(_matmul_grad)


def _sum_grad(g):
    for x, gx in zip(g.input("X"), g.input_grad("X")):
        g.op("assign", {"X": g.output_grad("Out")}, {"Out": [gx]})


def _add_rows(out, sr):
    """out[rows] += the rows of SelectedRows `sr`, touching only them, when its rows are
    distinct and in range of `out` (an array the caller owns); False (nothing done)
    otherwise. The same bits as adding sr densified (each element gets one addition), for
    a cost of the rows only: a GEO pserver's `sum(X=[block, block.delta]) -> block` of a
    1e6-row block and 1e3 touched rows costs a copy of the block, not a dense delta too."""
    rows = np.asarray(sr.rows, dtype=np.int64)
    value = None if sr.value is None else np.asarray(sr.value)
    if value is None or out.ndim == 0 or int(sr.height) != out.shape[0] or \
            value.shape[0] != rows.size or value.shape[1:] != out.shape[1:]:
        return False
    if rows.size and (rows.min() < 0 or rows.max() >= out.shape[0] or
                      np.unique(rows).size != rows.size):
        return False
    out[rows] += value.astype(out.dtype, copy=False)
    return True


def _sum_selected_rows(vals):
    """Fluid 1.8's sum of SelectedRows (its MergeAdd): the inputs' rows concatenated in
    order when no row id repeats; otherwise each id once, in ascending order, its values
    summed. Inputs without rows are skipped (they may also lack a value's width)."""
    kept = [v for v in vals if len(v.rows)] or vals[:1]
    rows = np.concatenate([np.asarray(v.rows, np.int64).reshape(-1) for v in kept])
    value = np.concatenate([v.value for v in kept])
    uniq, where = np.unique(rows, return_inverse=True)
    if uniq.size == rows.size:
        return SelectedRows(rows, kept[0].height, value)
    merged = np.zeros((uniq.size,) + value.shape[1:], value.dtype)
    np.add.at(merged, where.reshape(-1), value)
    return SelectedRows(uniq, kept[0].height, merged)


class Sum(OpDef):
    type = "sum"
    inputs = (In("X", duplicable=True),)
    outputs = (Out("Out"),)
    kind = "value"
    doc = ("Out = sum of the inputs (dense; or, when all are SelectedRows, their rows "
           "concatenated, merged into ascending unique rows if an id repeats; when all are "
           "LoDTensorArrays, entry by entry).")
    inplace = {"Out": "X"}

    @staticmethod
    def infer_shape(ctx):
        vs = ctx.input_vars("X")
        t = VarType.LOD_TENSOR
        for each in (VarType.SELECTED_ROWS, VarType.LOD_TENSOR_ARRAY):
            if all(v.type == each for v in vs):
                t = each
        ctx.set_output("Out", vs[0].shape, vs[0].dtype, vs[0].lod_level, type=t)

    @staticmethod
    def kernel(xs):
        vals = [x for x in xs if x is not None and not (isinstance(x, LoDTensor) and x._array is None)]
        if vals and all(isinstance(v, SelectedRows) for v in vals):
            return _sum_selected_rows(vals)
        if vals and all(isinstance(v, LoDTensorArray) for v in vals):
            # Fluid's sum of tensor arrays (partial gradients of one array): entry by entry,
            # an entry no input holds stays empty
            out = LoDTensorArray()
            for v in vals:
                out = add_grads(out, v)
            return LoDTensorArray(out)
        out = None
        lod = []
        for v in vals:
            if isinstance(v, SelectedRows):
                if out is None:
                    out = v.to_dense()
                elif not _add_rows(out, v):
                    out = out + v.to_dense().reshape(out.shape)
                continue
            if out is None:
                out, lod = v._array.copy(), v._lod
            else:
                out = out + v._array
        return LoDTensor(out, lod)


    grad = staticmethod(_sum_grad)


class Mean(OpDef):
    type = "mean"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    share_lod = None
    doc = "Out = mean of all elements of X, shape [1] (Fluid 1.x; 0-D where the desc says [])."

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", [1], ctx.input_dtype("X"))

    @staticmethod
    def kernel(x):
        return np.asarray([x.mean()], dtype=x.dtype)


    grad = staticmethod(lambda g: g.op(
        "mean_grad", {"X": g.input("X"), "Out@GRAD": g.output_grad("Out")},
        {"X@GRAD": g.input_grad("X")}))


# --- gradients -----------------------------------------------------------------------------
class ElementwiseGrad(OpDef):
    inputs = (In("X"), In("Y"), In("Out", dispensable=True), In("Out@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True), Out("Y@GRAD", dispensable=True))
    attrs = {"axis": -1}
    infer_shape = None
    fx = fy = None
    inplace = {"X@GRAD": "Out@GRAD"}

    @classmethod
    def prepare(cls, attrs, outputs):
        axis, fx, fy = attrs["axis"], cls.fx, cls.fy
        want_x, want_y = "X@GRAD" in outputs, "Y@GRAD" in outputs

        def kernel(x, y, out, dout):
            bx, by = broadcast_pair(x, y, axis)
            gx = gy = None
            if want_x:
                gx = reduce_to_shape(fx(bx, by, out, dout), bx.shape).reshape(x.shape)
                gx = gx.astype(x.dtype, copy=False)
            if want_y:
                gy = reduce_to_shape(fy(bx, by, out, dout), by.shape).reshape(y.shape)
                gy = gy.astype(y.dtype, copy=False)
            return gx, gy
        return kernel


def _div_double_grad(g):
    """The grad of elementwise_div_grad: Paddle's elementwise_div_grad_grad op (below), fed
    the grad op's dX (made here when that grad op did not compute it) and Out."""
    ddx = g.output_grad("X@GRAD") if g.has_output("X@GRAD") else None
    ddy = g.output_grad("Y@GRAD") if g.has_output("Y@GRAD") else None
    y, attrs = g.input("Y"), g.attrs()
    dx = g.output("X@GRAD")
    if not dx or all(n == EMPTY_VAR_NAME for n in dx):
        dx = g.temp(g.input("Out@GRAD"))
        g.op("elementwise_div", {"X": g.input("Out@GRAD"), "Y": y}, {"Out": dx}, attrs)
    out = g.input("Out")
    if not out:
        out = g.temp(g.input("Out@GRAD"))
        g.op("elementwise_div", {"X": g.input("X"), "Y": y}, {"Out": out}, attrs)
    g.op("elementwise_div_grad_grad",
         present({"Y": y, "Out": out, "DX": dx, "DDX": ddx, "DDY": ddy}),
         {"Y@GRAD": g.input_grad("Y"), "DOut": g.input_grad("Out"),
          "DDOut": g.input_grad("Out@GRAD")}, attrs)


# the grads of those grad ops (second-order gradients; ops/common.py)
ELEMENTWISE_DOUBLE_GRADS = {
    "elementwise_add": linear_double_grad("elementwise_add", ("X", "Y")),
    "elementwise_sub": linear_double_grad("elementwise_sub", ("X", "Y")),
    "elementwise_mul": bilinear_double_grad("elementwise_mul"),
    "elementwise_div": staticmethod(_div_double_grad),
}

for _name, (_fx, _fy) in ELEMENTWISE_GRADS.items():
    type("".join(p.title() for p in _name.split("_")) + "Grad", (ElementwiseGrad,),
         {"type": _name + "_grad", "fx": staticmethod(_fx), "fy": staticmethod(_fy),
          "grad": ELEMENTWISE_DOUBLE_GRADS.get(_name), "__module__": __name__,
          # add/sub's gradients read X and Y only for their shapes (broadcasting)
          "no_need_buffer": ("X", "Y") if _name in ("elementwise_add", "elementwise_sub")
          else ()})


class ElementwiseDivGradGrad(OpDef):
    type = "elementwise_div_grad_grad"
    inputs = (In("Y"), In("Out"), In("DX"), In("DDX", dispensable=True),
              In("DDY", dispensable=True))
    outputs = (Out("Y@GRAD", dispensable=True), Out("DOut", dispensable=True),
               Out("DDOut", dispensable=True))
    attrs = {"axis": -1}
    infer_shape = None
    share_lod = None
    doc = ("The gradient of elementwise_div_grad (dX = dOut / Y, dY = -dOut Out / Y): "
           "DDOut = (DDX - DDY Out) / Y, DOut = -DX DDY, Y@GRAD = (Out DX DDY - DX DDX) / Y "
           "(summed to Y's shape).")

    @classmethod
    def prepare(cls, attrs, outputs):
        axis = attrs["axis"]

        def kernel(y, out, dx, ddx, ddy):
            if dx.shape != out.shape:
                raise ExecutionError(f"elementwise_div_grad_grad: X{list(dx.shape)} was "
                                     f"broadcast to Out{list(out.shape)}; the second-order "
                                     f"gradient of a broadcast X is not built")
            _, by = broadcast_pair(out, y, axis)
            bddy = broadcast_pair(out, ddy, axis)[1] if ddy is not None else None
            ddout = (ddx if ddx is not None else np.zeros_like(out)) / by
            if bddy is not None:
                ddout = ddout - bddy * out / by
            dout = -dx * bddy if bddy is not None else np.zeros_like(out)
            gy = np.zeros_like(out)
            if bddy is not None:
                gy = gy + out * dx * bddy / by
            if ddx is not None:
                gy = gy - dx * ddx / by
            gy = reduce_to_shape(gy, by.shape).reshape(y.shape)
            dt = out.dtype
            return (gy.astype(dt, copy=False), dout.astype(dt, copy=False),
                    ddout.astype(dt, copy=False))
        return kernel


def _at_b(a, b):
    """a.T @ b; for a single row, an outer product (BLAS's k=1 gemm is ~5x slower)."""
    if a.shape[0] == 1:
        return np.multiply(a.reshape(-1, 1), b)
    return a.T @ b


class MulGrad(OpDef):
    type = "mul_grad"
    inputs = (In("X"), In("Y"), In("Out@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True), Out("Y@GRAD", dispensable=True))
    attrs = Mul.attrs
    infer_shape = None
    grad = bilinear_double_grad("mul")

    @classmethod
    def prepare(cls, attrs, outputs):
        xn, yn = attrs["x_num_col_dims"], attrs["y_num_col_dims"]
        want_x, want_y = "X@GRAD" in outputs, "Y@GRAD" in outputs

        def kernel(x, y, dout):
            x2 = x.reshape(flatten_to_2d(x.shape, xn))
            y2 = y.reshape(flatten_to_2d(y.shape, yn))
            d2 = dout.reshape(x2.shape[0], y2.shape[1])
            return ((d2 @ y2.T).reshape(x.shape) if want_x else None,
                    _at_b(x2, d2).reshape(y.shape) if want_y else None)
        return kernel


# --- fc: mul + bias + relu in one op (Paddle's inference op; fuse_fc makes it) ---------------
_FC_PAD = 4  # Paddle's padding_weights: W is stored [K + 4, N + 4] (for its MKL kernel)


def _fc_weight(w, padded):
    return w[:-_FC_PAD, :-_FC_PAD] if padded else w


class Fc(OpDef):
    type = "fc"
    nonempty_inputs = ("Input",)
    inputs = (In("Input"), In("W"), In("Bias", dispensable=True))
    outputs = (Out("Out"),)
    attrs = {"in_num_col_dims": 1, "activation_type": "", "padding_weights": False}
    share_lod = "Input"
    doc = ("Out = act(flatten(Input, in_num_col_dims) @ W + Bias), act '' or 'relu': "
           "mul + elementwise_add + relu in one op, the bias and relu applied in place.")

    @staticmethod
    def infer_shape(ctx):
        xs, ws = ctx.input_shape("Input"), ctx.input_shape("W")
        n = ctx.attr("in_num_col_dims")
        if ctx.attr("activation_type") not in ("", "relu"):
            ctx.fail(f"activation_type must be '' or 'relu', got "
                     f"{ctx.attr('activation_type')!r}")
        if len(ws) != 2:
            ctx.fail(f"W must be 2-D, got shape {ws}")
        pad = _FC_PAD if ctx.attr("padding_weights") else 0
        k, width = ws[0] - pad if ws[0] >= 0 else -1, ws[1] - pad if ws[1] >= 0 else -1
        xk = prod(xs[n:])
        if xk > 0 and k > 0 and xk != k:
            ctx.fail(f"Input flattened at {n} has {xk} columns but W has {k} rows")
        if ctx.has_input("Bias"):
            bs = ctx.input_shape("Bias")
            if prod(bs) > 0 and width > 0 and prod(bs) != width:
                ctx.fail(f"Bias has shape {bs} but W has {width} columns")
        ctx.set_output("Out", xs[:n] + [width], ctx.input_dtype("Input"),
                       ctx.input_lod_level("Input"))

    @classmethod
    def prepare(cls, attrs, outputs):
        n, relu, padded = attrs["in_num_col_dims"], attrs["activation_type"] == "relu", \
            attrs["padding_weights"]

        def kernel(x, w, b):
            w = _fc_weight(w, padded)
            out = x.reshape(flatten_to_2d(x.shape, n)) @ w
            if b is not None:
                out += b.reshape(-1)
            if relu:
                np.maximum(out, 0, out=out)
            return out.reshape(x.shape[:n] + w.shape[1:])
        return kernel


    # fc_grad reads Input, W, Bias, Out, Out@GRAD
    grad = staticmethod(lambda g: g.default())


class FcGrad(OpDef):
    """Fluidity's op (Paddle's fc is inference-only): the gradients of fc, from its Out."""
    type = "fc_grad"
    in_paddle = False
    inputs = (In("Input"), In("W"), In("Bias", dispensable=True), In("Out"), In("Out@GRAD"))
    outputs = (Out("Input@GRAD", dispensable=True), Out("W@GRAD", dispensable=True),
               Out("Bias@GRAD", dispensable=True))
    attrs = Fc.attrs
    infer_shape = None

    @classmethod
    def prepare(cls, attrs, outputs):
        n, relu, padded = attrs["in_num_col_dims"], attrs["activation_type"] == "relu", \
            attrs["padding_weights"]
        want_x, want_w, want_b = ("Input@GRAD" in outputs, "W@GRAD" in outputs,
                                  "Bias@GRAD" in outputs)

        def kernel(x, w, b, out, dout):
            wk = _fc_weight(w, padded)
            x2 = x.reshape(flatten_to_2d(x.shape, n))
            d = dout.reshape(x2.shape[0], wk.shape[1])
            if relu:
                d = d * (out.reshape(d.shape) > 0)  # (np.where is ~8x slower here)
            dx = (d @ wk.T).reshape(x.shape) if want_x else None
            dw = None
            if want_w:
                dw = _at_b(x2, d)
                if padded:
                    full = np.zeros_like(w)
                    full[:-_FC_PAD, :-_FC_PAD] = dw
                    dw = full
            db = d.sum(axis=0).reshape(b.shape) if want_b and b is not None else None
            return dx, dw, db
        return kernel


class _MatmulGradBase(OpDef):
    inputs = (In("X"), In("Y"), In("Out@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True), Out("Y@GRAD", dispensable=True))
    infer_shape = None
    fwd = None

    @classmethod
    def prepare(cls, attrs, outputs):
        tx, ty = attrs[cls.fwd.tx_attr], attrs[cls.fwd.ty_attr]
        alpha = attrs.get("alpha", 1.0)
        heads = attrs.get("head_number", 1)
        if heads != 1:
            def heads_kernel(x, y, dout):
                a = np.swapaxes(x, -1, -2) if tx else x
                b = np.swapaxes(y, -1, -2) if ty else y
                ga, gb = _matmul_heads_grad(a, b, dout * np.asarray(alpha, dout.dtype), heads)
                ga = np.swapaxes(ga, -1, -2) if tx else ga
                gb = np.swapaxes(gb, -1, -2) if ty else gb
                return (np.ascontiguousarray(ga, x.dtype) if "X@GRAD" in outputs else None,
                        np.ascontiguousarray(gb, y.dtype) if "Y@GRAD" in outputs else None)
            return heads_kernel

        if cls.fwd.fluid18_vectors:
            def kernel18(x, y, dout):
                a, b = _fluid18_operands(x, y, tx, ty)
                full = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + \
                    (a.shape[-2], b.shape[-1])
                d = dout.reshape(full)
                d = d * alpha if alpha != 1.0 else d
                da = reduce_to_shape(d @ np.swapaxes(b, -1, -2), a.shape)
                db = reduce_to_shape(np.swapaxes(a, -1, -2) @ d, b.shape)
                dx = np.swapaxes(da, -1, -2) if tx else da
                dy = np.swapaxes(db, -1, -2) if ty else db
                return (np.ascontiguousarray(dx.reshape(x.shape), x.dtype),
                        np.ascontiguousarray(dy.reshape(y.shape), y.dtype))
            return kernel18

        def kernel(x, y, dout):
            x2 = x[None, :] if x.ndim == 1 else x
            y2 = y[:, None] if y.ndim == 1 else y
            d = dout
            if x.ndim == 1:
                d = np.expand_dims(d, -2)
            if y.ndim == 1:
                d = np.expand_dims(d, -1)
            d = d * alpha if alpha != 1.0 else d
            a = np.swapaxes(x2, -1, -2) if tx else x2
            b = np.swapaxes(y2, -1, -2) if ty else y2
            da = d @ np.swapaxes(b, -1, -2)
            db = np.swapaxes(a, -1, -2) @ d
            dx = np.swapaxes(da, -1, -2) if tx else da
            dy = np.swapaxes(db, -1, -2) if ty else db
            dx = reduce_to_shape(dx, x2.shape).reshape(x.shape)
            dy = reduce_to_shape(dy, y2.shape).reshape(y.shape)
            return dx.astype(x.dtype, copy=False), dy.astype(y.dtype, copy=False)
        return kernel


class MatmulGrad(_MatmulGradBase):
    type = "matmul_grad"
    attrs = Matmul.attrs
    fwd = Matmul
    grad = bilinear_double_grad("matmul")


class MatmulV2Grad(_MatmulGradBase):
    type = "matmul_v2_grad"
    attrs = MatmulV2.attrs
    fwd = MatmulV2
    grad = bilinear_double_grad("matmul_v2")


class MeanGrad(OpDef):
    type = "mean_grad"
    inputs = (In("X"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    infer_shape = None
    grad = linear_double_grad("mean")

    @staticmethod
    def kernel(x, dout):
        return np.full(x.shape, dout.reshape(-1)[0] / max(x.size, 1), dtype=x.dtype)


# --- Paddle 2.x: bmm, cumsum -----------------------------------------------------------------
class Bmm(OpDef):
    type = "bmm"
    inputs = (In("X"), In("Y"))
    outputs = (Out("Out"),)
    share_lod = "X"
    lod_outputs = ("Out",)
    doc = "Out[b] = X[b] @ Y[b] for X [B, M, K] and Y [B, K, N]."

    @staticmethod
    def infer_shape(ctx):
        xs, ys = ctx.input_shape("X"), ctx.input_shape("Y")
        if len(xs) != 3 or len(ys) != 3:
            ctx.fail(f"X {xs} and Y {ys} must both be 3-D")
        if xs[2] >= 0 and ys[1] >= 0 and xs[2] != ys[1]:
            ctx.fail(f"X {xs} and Y {ys} cannot be multiplied")
        ctx.set_output("Out", [xs[0], xs[1], ys[2]], ctx.input_dtype("X"))

    @staticmethod
    def kernel(x, y):
        return np.matmul(x, y)

    grad = staticmethod(_matmul_grad)


class BmmGrad(OpDef):
    type = "bmm_grad"
    inputs = (In("X"), In("Y"), In("Out@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True), Out("Y@GRAD", dispensable=True))
    infer_shape = None

    @staticmethod
    def kernel(x, y, dout):
        return (np.matmul(dout, y.transpose(0, 2, 1)).astype(x.dtype, copy=False),
                np.matmul(x.transpose(0, 2, 1), dout).astype(y.dtype, copy=False))


def _cumsum(x, axis, flatten, exclusive, reverse):
    if flatten:
        x, axis = x.reshape(-1), 0
    else:
        axis = axis % x.ndim if x.ndim else 0
    if reverse:
        x = np.flip(x, axis)
    out = np.cumsum(x, axis=axis, dtype=x.dtype)
    if exclusive:
        out = np.concatenate([np.zeros_like(np.take(out, [0], axis=axis)),
                              np.take(out, np.arange(out.shape[axis] - 1), axis=axis)], axis)
    if reverse:
        out = np.flip(out, axis)
    return np.ascontiguousarray(out)


class Cumsum(OpDef):
    type = "cumsum"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    attrs = {"axis": -1, "flatten": False, "exclusive": False, "reverse": False}
    share_lod = "X"
    lod_outputs = ("Out",)
    version = 1   # `flatten`
    doc = ("Out = running sums of X along `axis` (of the flattened X if flatten); exclusive "
           "leaves out each element itself, reverse sums from the end.")

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        n = prod(xs) if all(d >= 0 for d in xs) else -1
        ctx.set_output("Out", [n] if ctx.attr("flatten") else xs, ctx.input_dtype("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        a, f, e, r = attrs["axis"], attrs["flatten"], attrs["exclusive"], attrs["reverse"]
        return lambda x: _cumsum(x, a, f, e, r)

    grad = staticmethod(lambda g: g.op(
        "cumsum_grad", {"X": g.input("X"), "Out@GRAD": g.output_grad("Out")},
        {"X@GRAD": g.input_grad("X")}, g.attrs()))


class CumsumGrad(OpDef):
    type = "cumsum_grad"
    inputs = (In("X"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = Cumsum.attrs
    infer_shape = None
    share_lod = None

    @classmethod
    def prepare(cls, attrs, outputs):
        a, f, e, r = attrs["axis"], attrs["flatten"], attrs["exclusive"], attrs["reverse"]
        return lambda x, d: _cumsum(d, a, f, e, not r).reshape(x.shape)
