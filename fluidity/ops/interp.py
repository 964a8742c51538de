"""Fluid 1.x's resize ops: bilinear_interp, nearest_interp, bicubic_interp (4-D X) and
trilinear_interp (5-D X), the first versions Paddle 1.8's `image_resize` / `resize_*` layers
write (the `_v2` ops of nn.py are Paddle 2.x's, with another size and ratio rule).

Every method is separable: along each spatial axis the output is a fixed linear map of the
input, an [out, in] matrix whose rows hold the taps of one output position. So
Out = A_h X A_w^T (A_d too in 3-D) per sample and channel, and the gradient is the same maps
transposed. The matrices are built with Paddle 1.8's arithmetic: the ratio in float32
(`(in - 1) / (out - 1)` with align_corners, else `in / out`: the `scale` attribute only sets
the output size), the half-pixel source position in double, the fractions in float, so the
taps chosen are Paddle's; bicubic's coefficients (A = -0.75) are computed in X's type.
"""
import numpy as np

from ..errors import ShapeError
from .common import channel_last
from .registry import In, OpDef, Out

_F32 = np.float32


def _ratio(n_in, n_out, align_corners):
    if n_out <= 1:
        return _F32(0)
    if align_corners:
        return _F32(n_in - 1) / _F32(n_out - 1)
    return _F32(n_in) / _F32(n_out)


def _linear_matrix(n_in, n_out, align_corners, align_mode):
    ratio = _ratio(n_in, n_out, align_corners)
    k = np.arange(n_out)
    a = np.zeros((n_out, n_in))
    if align_mode == 0 and not align_corners:
        src = np.float64(ratio) * (k + 0.5) - 0.5                  # double, as the kernel
        lo = np.maximum(np.trunc(src).astype(np.int64), 0)
        frac = np.maximum(src, 0).astype(_F32) - lo.astype(_F32)
    else:
        src = ratio * k.astype(_F32)                                # float
        lo = np.maximum(np.trunc(src).astype(np.int64), 0)
        frac = src - lo.astype(_F32)
    hi = np.minimum(lo + 1, n_in - 1)
    np.add.at(a, (k, lo), (_F32(1) - frac).astype(np.float64))
    np.add.at(a, (k, hi), frac.astype(np.float64))
    return a


def _nearest_matrix(n_in, n_out, align_corners, align_mode):
    ratio = _ratio(n_in, n_out, align_corners)
    src = ratio * np.arange(n_out, dtype=_F32)
    idx = np.trunc(src.astype(np.float64) + 0.5) if align_corners else np.trunc(src)
    a = np.zeros((n_out, n_in))
    a[np.arange(n_out), np.minimum(idx.astype(np.int64), n_in - 1)] = 1
    return a


def _cubic_coeffs(t, dt):
    """Paddle's cubic convolution weights (A = -0.75) of the 4 taps around fraction t."""
    a = dt.type(-0.75)
    one = dt.type(1)

    def near(x):      # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + one

    def far(x):       # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return [far(t + one), near(t), near(one - t), far(one - t + one)]


def _cubic_matrix(n_in, n_out, align_corners, align_mode, dt=np.dtype(np.float32)):
    ratio = _ratio(n_in, n_out, align_corners)
    k = np.arange(n_out)
    if align_corners:
        src = (ratio * k.astype(_F32)).astype(dt)
    else:
        src = (np.float64(ratio) * (k + 0.5) - 0.5).astype(dt)
    base = np.floor(src)
    t = (src - base).astype(dt)
    base = base.astype(np.int64)
    a = np.zeros((n_out, n_in))
    for i, c in enumerate(_cubic_coeffs(t, dt)):
        np.add.at(a, (k, np.clip(base - 1 + i, 0, n_in - 1)), c.astype(np.float64))
    return a


_MATRIX = {"bilinear": _linear_matrix, "trilinear": _linear_matrix,
           "nearest": _nearest_matrix, "bicubic": _cubic_matrix}
_RANK = {"bilinear": 4, "nearest": 4, "bicubic": 4, "trilinear": 5}


def out_size(attrs, in_sizes, out_size_t, size_list, scale_t):
    """Paddle 1.8's output size: SizeTensor, else OutSize, else a positive scale (the Scale
    tensor's first value, else the `scale` attribute) times the input size, else the
    out_d/out_h/out_w attributes."""
    nd = len(in_sizes)
    names = ("out_d", "out_h", "out_w")[3 - nd:]
    if size_list:
        if len(size_list) != nd:
            raise ShapeError(f"interpolate: SizeTensor holds {len(size_list)} tensors, "
                             f"{nd} wanted")
        sizes = [int(np.asarray(t).reshape(-1)[0]) for t in size_list]
    else:
        scale = float(np.asarray(scale_t, _F32).reshape(-1)[0]) if scale_t is not None \
            else attrs["scale"]
        if scale > 0:
            sizes = [int(_F32(n) * _F32(scale)) for n in in_sizes]
        else:
            sizes = [int(attrs[n]) for n in names]
        if out_size_t is not None:
            o = np.asarray(out_size_t).reshape(-1)
            if o.size != nd:
                raise ShapeError(f"interpolate: OutSize holds {o.size} values, {nd} wanted")
            sizes = [int(v) for v in o]
    if any(s <= 0 for s in sizes):
        raise ShapeError(f"interpolate: the output size {sizes} must be positive "
                         f"(from {'SizeTensor' if size_list else 'OutSize, scale or ' + '/'.join(names)})")
    return sizes


def _spatial(x_shape, last):
    return list(x_shape[1:-1]) if last else list(x_shape[2:])


def maps(attrs, in_sizes, out_sizes, dt):
    """The per-axis [out, in] matrices of the op's method (public: the compiled form,
    codegen/emit/cpu/interp.py, tabulates the same taps)."""
    method = attrs["interp_method"]
    fn = _MATRIX[method]
    ac, am = attrs["align_corners"], attrs["align_mode"]
    if method == "bicubic":
        return [fn(i, o, ac, am, dt) for i, o in zip(in_sizes, out_sizes)]
    return [fn(i, o, ac, am) for i, o in zip(in_sizes, out_sizes)]


def _apply(x, mats, last, transpose=False):
    """x [N, C, *S] (or channels last) mapped by the per-axis matrices (their transposes for
    the gradient), in float64."""
    xc = np.moveaxis(x, -1, 1) if last else x
    letters = "dhw"[3 - len(mats):]
    outs = "DHW"[3 - len(mats):]
    subs = [f"{o}{i}" for i, o in zip(letters, outs)]
    src, dst = (outs, letters) if transpose else (letters, outs)
    spec = ",".join(subs) + f",nc{src}->nc{dst}"
    out = np.einsum(spec, *mats, xc.astype(np.float64), optimize=True)
    return np.moveaxis(out, 1, -1) if last else out


def check_method(method, rank, op_type):
    if method not in _MATRIX:
        raise ShapeError(f"{op_type}: interp_method {method!r} is none of {sorted(_MATRIX)}")
    if _RANK[method] != rank:
        raise ShapeError(f"{op_type}: interp_method {method!r} takes a {_RANK[method]}-D X, "
                         f"got {rank}-D")


class _Interp(OpDef):
    inputs = (In("X"), In("OutSize", dispensable=True, no_grad=True),
              In("SizeTensor", duplicable=True, dispensable=True, no_grad=True),
              In("Scale", dispensable=True, no_grad=True))
    outputs = (Out("Out"),)
    share_lod = None
    method = None

    @classmethod
    def infer_shape(cls, ctx):
        xs = ctx.input_shape("X")
        method = ctx.attr("interp_method")
        try:
            check_method(method, len(xs), cls.type)
        except ShapeError as e:
            ctx.fail(str(e))
        last = channel_last(ctx.attr("data_layout"))
        nd = len(xs) - 2
        names = ("out_d", "out_h", "out_w")[3 - nd:]
        attr = [ctx.attr(n) for n in names]
        scale = ctx.attr("scale")
        if ctx.has_input("SizeTensor") or ctx.has_input("OutSize"):
            sizes = attr
        elif ctx.has_input("Scale"):
            sizes = [-1] * nd
        elif scale > 0:
            sizes = [int(_F32(n) * _F32(scale)) if n >= 0 else -1 for n in _spatial(xs, last)]
        else:
            sizes = attr
        sizes = [s if s > 0 else -1 for s in sizes]
        out = [xs[0]] + sizes + [xs[-1]] if last else xs[:2] + sizes
        ctx.set_output("Out", out, ctx.input_dtype("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        last = channel_last(attrs["data_layout"])

        def kernel(x, out_size_t, size_list, scale_t):
            check_method(attrs["interp_method"], x.ndim, cls.type)
            ins = _spatial(x.shape, last)
            outs = out_size(attrs, ins, out_size_t, size_list, scale_t)
            if outs == ins:
                return x.copy()
            out = _apply(x, maps(attrs, ins, outs, x.dtype), last)
            return out.astype(x.dtype)   # integer X: the float result truncated, as Paddle
        return kernel

    @staticmethod
    def grad(g):
        ins = {"X": g.input("X"), "Out@GRAD": g.output_grad("Out")}
        for slot in ("OutSize", "SizeTensor", "Scale"):
            if g.input(slot):
                ins[slot] = g.input(slot)
        g.op(g.fwd.type + "_grad", ins, {"X@GRAD": g.input_grad("X")}, g.attrs())


class _InterpGrad(OpDef):
    inputs = (In("X"), In("OutSize", dispensable=True),
              In("SizeTensor", duplicable=True, dispensable=True),
              In("Scale", dispensable=True), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    infer_shape = None
    share_lod = None

    @classmethod
    def prepare(cls, attrs, outputs):
        last = channel_last(attrs["data_layout"])

        def kernel(x, out_size_t, size_list, scale_t, dout):
            ins, outs = _spatial(x.shape, last), _spatial(dout.shape, last)
            if outs == ins:
                return dout.astype(x.dtype, copy=True)
            mats = maps(attrs, ins, outs, x.dtype)
            return _apply(dout, mats, last, transpose=True).astype(x.dtype)
        return kernel


_ATTRS = {"data_layout": "NCHW", "out_d": 0, "out_h": 0, "out_w": 0, "scale": 0.0,
          "interp_method": "bilinear", "align_corners": True, "align_mode": 1}

for _m in ("bilinear", "nearest", "trilinear", "bicubic"):
    _t = _m + "_interp"
    _c = _m.title() + "Interp"
    _f = type(_c, (_Interp,), {
        "type": _t, "__module__": __name__, "attrs": {**_ATTRS, "interp_method": _m},
        "doc": f"Resize the spatial dims of X ({_RANK[_m]}-D, channels first or last) by "
               f"{_m} interpolation, Fluid 1.x's rule (image_resize / resize_{_m})."})
    type(_c + "Grad", (_InterpGrad,), {"type": _t + "_grad", "attrs": _f.attrs,
                                       "__module__": __name__})
