"""Activations: one table of (type, forward) and one class each; softmax."""
import math

import numpy as np

from .common import piecewise_linear_double_grad, sigmoid, square_double_grad
from .memory_ops import ufunc_out
from .registry import Allocating, In, OpDef, Out, get as get_op


# type: (forward(x), derivative dX(x, out, dout), what the grad op reads besides Out@GRAD).
# The reads are Paddle's kDepOut / kDepX: a derivative written in terms of Out lets X die
# after the forward op.
_TABLE = {
    "relu": (lambda x: np.maximum(x, 0).astype(x.dtype, copy=False),
             lambda x, o, d: d * (o > 0), ("Out",)),
    "sigmoid": (sigmoid, lambda x, o, d: d * o * (1 - o), ("Out",)),
    "tanh": (np.tanh, lambda x, o, d: d * (1 - o * o), ("Out",)),
    "exp": (np.exp, lambda x, o, d: d * o, ("Out",)),
    "log": (np.log, lambda x, o, d: d / x, ("X",)),
    "sqrt": (np.sqrt, lambda x, o, d: d * 0.5 / o, ("Out",)),
    "rsqrt": (lambda x: 1.0 / np.sqrt(x), lambda x, o, d: d * -0.5 * o ** 3, ("Out",)),
    "square": (np.square, lambda x, o, d: d * 2 * x, ("X",)),
    "abs": (np.abs, lambda x, o, d: d * np.sign(x), ("X",)),
    "reciprocal": (lambda x: 1.0 / x, lambda x, o, d: -d * o * o, ("Out",)),
    "floor": (np.floor, lambda x, o, d: np.zeros_like(d), ()),
    "ceil": (np.ceil, lambda x, o, d: np.zeros_like(d), ()),
    "round": (np.round, lambda x, o, d: np.zeros_like(d), ()),
    "sin": (np.sin, lambda x, o, d: d * np.cos(x), ("X",)),
    "cos": (np.cos, lambda x, o, d: -d * np.sin(x), ("X",)),
    "softsign": (lambda x: x / (1.0 + np.abs(x)), lambda x, o, d: d / (1 + np.abs(x)) ** 2,
                 ("X",)),
    "logsigmoid": (lambda x: -np.logaddexp(0, -x).astype(x.dtype, copy=False),
                   lambda x, o, d: d * sigmoid(-x), ("X",)),
    "silu": (lambda x: x * sigmoid(x),
             lambda x, o, d: d * (sigmoid(x) * (1 + x * (1 - sigmoid(x)))), ("X",)),
    "sign": (np.sign, lambda x, o, d: np.zeros_like(d), ()),
}
# The same values as the forward/derivative, written into planned memory (linear executor).
_INTO = {"relu": lambda x, alloc: np.maximum(x, 0, out=alloc(x.shape, x.dtype))}
_GRAD_INTO = {"relu": lambda x, o, d, alloc: np.multiply(d, o > 0, out=alloc(d.shape, d.dtype))}

# forward of every table activation (layers/ops.py makes a layer of each)
ACTIVATIONS = {t: f for t, (f, _df, _reads) in _TABLE.items()}
ACTIVATIONS["softplus"] = lambda x: np.logaddexp(0, x).astype(x.dtype, copy=False)


def _activation_grad(g):
    """`<type>_grad` reading Out@GRAD and what the grad class says it needs (X, Out)."""
    reads = get_op(g.fwd.type + "_grad").reads
    ins = {"Out@GRAD": g.output_grad("Out")}
    if "X" in reads:
        ins["X"] = g.input("X")
    if "Out" in reads:
        ins["Out"] = g.output("Out")
    g.op(g.fwd.type + "_grad", ins, {"X@GRAD": g.input_grad("X")}, g.attrs())


class Activation(OpDef):
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    func = None
    into = None              # into(x, alloc): func's values in planned memory (None: can't)
    inplace = {"Out": "X"}
    grad = staticmethod(_activation_grad)

    @classmethod
    def prepare(cls, attrs, outputs):
        if cls.into is not None:
            into, plain = cls.into, cls.func
            return Allocating(plain, lambda x, alloc: into(x, alloc) if x.dtype.kind == "f"
                              else plain(x))
        return ufunc_out(cls.func, cls.func)


class ActivationGrad(OpDef):
    inputs = (In("X", dispensable=True), In("Out", dispensable=True), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    infer_shape = None
    share_lod = "Out@GRAD"
    dfunc = None
    into = None
    reads = ("X", "Out")     # the forward's X and Out the grad op takes (besides Out@GRAD)
    inplace = {"X@GRAD": "Out@GRAD"}

    @classmethod
    def prepare(cls, attrs, outputs):
        f = cls.dfunc

        def kernel(x, o, d):
            return f(x, o, d).astype(d.dtype, copy=False)
        return Allocating(kernel, cls.into) if cls.into is not None else kernel


# the grads of those grad ops (second-order gradients; ops/common.py)
def _sqrt_double_grad(g):
    """The grad of sqrt_grad (dX = dOut / (2 Out)): Paddle's sqrt_grad_grad op, which gives
    dOut ddX / (2 Out) and Out -dX ddX / Out."""
    g.op("sqrt_grad_grad", {"Out": g.input("Out"), "DX": g.output("X@GRAD"),
                            "DDX": g.output_grad("X@GRAD")},
         {"DOut": g.input_grad("Out"), "DDOut": g.input_grad("Out@GRAD")})


_DOUBLE_GRADS = {"relu": piecewise_linear_double_grad("relu_grad"),
                 "square": staticmethod(square_double_grad),
                 "sqrt": staticmethod(_sqrt_double_grad)}


def _title(name):
    return "".join(p.title() for p in name.split("_"))


for _name, (_f, _df, _reads) in _TABLE.items():
    if _name != "round":      # round has an attribute: its class follows
        type(_title(_name), (Activation,),
             {"type": _name, "func": staticmethod(_f), "__module__": __name__,
              "into": staticmethod(_INTO[_name]) if _name in _INTO else None,
              "doc": f"Out = {_name}(X), elementwise."})
    type(_title(_name) + "Grad", (ActivationGrad,),
         {"type": _name + "_grad", "dfunc": staticmethod(_df), "reads": _reads,

          "into": staticmethod(_GRAD_INTO[_name]) if _name in _GRAD_INTO else None,
          "grad": _DOUBLE_GRADS.get(_name), "__module__": __name__})


class Round(Activation):
    type = "round"
    attrs = {"decimals": 0}
    version = 1   # Paddle's checkpoint: attribute decimals (Paddle 3.x writes it)
    doc = ("Out = X rounded half to even, to `decimals` decimal places (negative: to tens, "
           "hundreds, ...), as numpy's and Paddle's round.")

    @classmethod
    def prepare(cls, attrs, outputs):
        n = attrs["decimals"]
        if n == 0:
            return ufunc_out(np.round, np.round)
        return lambda x: np.round(x, n).astype(x.dtype, copy=False)


class LeakyRelu(Activation):
    type = "leaky_relu"
    attrs = {"alpha": 0.02}
    version = 1  # Paddle's checkpoint: out = x if x > 0 else alpha * x, for any alpha

    @classmethod
    def prepare(cls, attrs, outputs):
        a = attrs["alpha"]
        return lambda x: np.where(x > 0, x, x * a).astype(x.dtype, copy=False)


class LeakyReluGrad(ActivationGrad):
    type = "leaky_relu_grad"
    attrs = LeakyRelu.attrs
    reads = ("X",)
    grad = piecewise_linear_double_grad("leaky_relu_grad")

    @classmethod
    def prepare(cls, attrs, outputs):
        a = attrs["alpha"]
        return lambda x, o, d: np.where(x > 0, d, d * a).astype(x.dtype, copy=False)


class Gelu(Activation):
    type = "gelu"
    attrs = {"approximate": False}

    @classmethod
    def prepare(cls, attrs, outputs):
        if attrs["approximate"]:
            return lambda x: (0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))).astype(x.dtype)
        verf = np.vectorize(math.erf)
        return lambda x: (0.5 * x * (1 + verf(x / math.sqrt(2)))).astype(x.dtype)


class GeluGrad(ActivationGrad):
    type = "gelu_grad"
    attrs = Gelu.attrs
    reads = ("X",)

    @classmethod
    def prepare(cls, attrs, outputs):
        verf = np.vectorize(math.erf)
        if attrs["approximate"]:
            def k(x, o, d):
                c = np.sqrt(2 / np.pi)
                t = np.tanh(c * (x + 0.044715 * x ** 3))
                return (d * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x))).astype(x.dtype)
            return k
        return lambda x, o, d: (d * (0.5 * (1 + verf(x / math.sqrt(2))) + x * np.exp(-x * x / 2)
                                     / math.sqrt(2 * math.pi))).astype(x.dtype)


class Pow(Activation):
    type = "pow"
    attrs = {"factor": 1.0}

    @classmethod
    def prepare(cls, attrs, outputs):
        f = attrs["factor"]
        return lambda x: np.power(x, f).astype(x.dtype, copy=False)


class PowGrad(ActivationGrad):
    type = "pow_grad"
    attrs = Pow.attrs
    reads = ("X",)

    @classmethod
    def prepare(cls, attrs, outputs):
        f = attrs["factor"]
        return lambda x, o, d: (d * f * np.power(x, f - 1)).astype(x.dtype, copy=False)


class Softplus(Activation):
    type = "softplus"
    attrs = {"beta": 1.0, "threshold": 20.0}
    version = 1  # Paddle's checkpoint: attributes beta and threshold
    doc = ("Out = X where beta * X > threshold, else log(1 + exp(beta * X)) / beta (with the "
           "defaults, log(1 + exp(X)) to within float rounding).")

    @classmethod
    def prepare(cls, attrs, outputs):
        beta, th = attrs["beta"], attrs["threshold"]

        def kernel(x):
            xb = x * beta
            return np.where(xb > th, x, np.logaddexp(0, xb) / beta).astype(x.dtype, copy=False)
        return kernel


class SoftplusGrad(ActivationGrad):
    type = "softplus_grad"
    attrs = Softplus.attrs
    reads = ("X",)

    @classmethod
    def prepare(cls, attrs, outputs):
        beta, th = attrs["beta"], attrs["threshold"]

        def kernel(x, o, d):
            xb = x * beta
            return np.where(xb > th, d, d * sigmoid(xb)).astype(x.dtype, copy=False)
        return kernel


# Fluid's softmax clips the shifted logits at -64 (`ValueClip` in its softmax functor), so
# no probability underflows to 0: a cross entropy after it stays finite, and its gradient
# (-dy / p) never meets 0 * inf in softmax's own gradient. The compiled kernels clip alike.
SOFTMAX_CLIP = -64.0


def softmax(x, axis=-1):
    shifted = x - x.max(axis=axis, keepdims=True)
    e = np.exp(np.maximum(shifted, SOFTMAX_CLIP, out=shifted))
    return e / e.sum(axis=axis, keepdims=True)


class Softmax(OpDef):
    type = "softmax"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    attrs = {"axis": -1, "use_cudnn": False, "data_format": "AnyLayout"}
    doc = ("Out = exp(X) / sum(exp(X)) along `axis`, each X - max(X) clipped at -64 first "
           "(as Fluid), so no output is exactly 0.")
    inplace = {"Out": "X"}

    @classmethod
    def prepare(cls, attrs, outputs):
        axis = attrs["axis"]
        return lambda x: softmax(x, axis)


    grad = staticmethod(lambda g: g.op(
        "softmax_grad", {"Out": g.output("Out"), "Out@GRAD": g.output_grad("Out")},
        {"X@GRAD": g.input_grad("X")}, g.attrs()))


class SoftmaxGrad(OpDef):
    type = "softmax_grad"
    inputs = (In("Out"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = Softmax.attrs
    share_lod = "Out"
    infer_shape = None
    inplace = {"X@GRAD": "Out@GRAD"}

    @classmethod
    def prepare(cls, attrs, outputs):
        axis = attrs["axis"]
        return lambda o, d: (o * (d - (d * o).sum(axis=axis, keepdims=True))).astype(o.dtype)


class LogSoftmax(OpDef):
    type = "log_softmax"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    attrs = {"axis": -1}
    doc = "Out = X - log(sum(exp(X))) along `axis`."

    @classmethod
    def prepare(cls, attrs, outputs):
        axis = attrs["axis"]

        def kernel(x):
            m = x.max(axis=axis, keepdims=True)
            return (x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))).astype(
                x.dtype, copy=False)
        return kernel


    grad = staticmethod(lambda g: g.op(
        "log_softmax_grad", {"Out": g.output("Out"), "Out@GRAD": g.output_grad("Out")},
        {"X@GRAD": g.input_grad("X")}, g.attrs()))


class LogSoftmaxGrad(OpDef):
    type = "log_softmax_grad"
    inputs = (In("Out"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = LogSoftmax.attrs
    share_lod = "Out"
    infer_shape = None

    @classmethod
    def prepare(cls, attrs, outputs):
        axis = attrs["axis"]
        return lambda o, d: (d - np.exp(o) * d.sum(axis=axis, keepdims=True)).astype(o.dtype)


# --- Paddle 2.x activations (paddle.nn.functional) ---------------------------------------
# Each is an OpDef of its own (not an `Activation`, whose table-driven kernel they do not
# share); the gradient op `<type>_grad` takes X, Out and Out@GRAD and the forward's
# attributes. Formulas are Paddle's (phi/kernels/funcs/activation_functor.h).
def _erf(x):
    """erf elementwise: scipy's where it is installed (it is no dependency of Fluidity),
    else math.erf per element (slower, the same values to float32 rounding)."""
    try:
        from scipy.special import erf
    except ImportError:
        return _ERF(x)
    return erf(x)


_ERF = np.vectorize(math.erf, otypes=[np.float64])


def _softplus_thr(x, threshold):
    return np.where(x > threshold, x, np.logaddexp(0, np.minimum(x, threshold)))


# type: (attrs, forward(x, **attrs), d(out)/d(x)(x, out, **attrs), doc, Paddle op version)
PADDLE_ACTIVATIONS = {
    "relu6": ({"threshold": 6.0},
              lambda x, threshold: np.clip(x, 0, threshold),
              lambda x, o, threshold: ((x > 0) & (x < threshold)).astype(x.dtype),
              "Out = min(max(X, 0), threshold)."),
    "brelu": ({"t_min": 0.0, "t_max": 24.0},
              lambda x, t_min, t_max: np.clip(x, t_min, t_max),
              lambda x, o, t_min, t_max: ((x > t_min) & (x < t_max)).astype(x.dtype),
              "Out = min(max(X, t_min), t_max) (paddle.nn.functional.hardtanh)."),
    "hard_sigmoid": ({"slope": 0.2, "offset": 0.5},
                     lambda x, slope, offset: np.clip(slope * x + offset, 0, 1),
                     lambda x, o, slope, offset: slope * ((o > 0) & (o < 1)),
                     "Out = min(max(slope * X + offset, 0), 1)."),
    "hard_swish": ({"threshold": 6.0, "scale": 6.0, "offset": 3.0},
                   lambda x, threshold, scale, offset:
                       x * np.clip(x + offset, 0, threshold) / scale,
                   lambda x, o, threshold, scale, offset: np.where(
                       x + offset <= 0, 0, np.where(x + offset >= threshold, threshold / scale,
                                                    (2 * x + offset) / scale)),
                   "Out = X * min(max(X + offset, 0), threshold) / scale."),
    "swish": ({"beta": 1.0},
              lambda x, beta: x * sigmoid(beta * x),
              lambda x, o, beta: sigmoid(beta * x) * (1 + beta * x * (1 - sigmoid(beta * x))),
              "Out = X * sigmoid(beta * X) (silu for beta = 1)."),
    "mish": ({"threshold": 20.0},
             lambda x, threshold: x * np.tanh(_softplus_thr(x, threshold)),
             lambda x, o, threshold: (lambda t: t + x * (1 - t * t) * np.where(
                 x > threshold, 1, sigmoid(x)))(np.tanh(_softplus_thr(x, threshold))),
             "Out = X * tanh(softplus(X)), softplus(X) = X where X > threshold.",
             1),  # its checkpoint: softplus inside with `threshold`, as here
    "elu": ({"alpha": 1.0},
            lambda x, alpha: np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0))),
            lambda x, o, alpha: np.where(x > 0, 1, alpha * np.exp(np.minimum(x, 0))),
            "Out = X if X > 0 else alpha * (exp(X) - 1)."),
    "selu": ({"scale": 1.0507009873554805, "alpha": 1.6732632423543772},
             lambda x, scale, alpha: scale * np.where(x > 0, x,
                                                      alpha * np.expm1(np.minimum(x, 0))),
             lambda x, o, scale, alpha: scale * np.where(x > 0, 1,
                                                         alpha * np.exp(np.minimum(x, 0))),
             "Out = scale * (X if X > 0 else alpha * (exp(X) - 1))."),
    "log1p": ({}, lambda x: np.log1p(x), lambda x, o: 1 / (1 + x), "Out = log(1 + X)."),
    "erf": ({}, _erf, lambda x, o: 2 / np.sqrt(np.pi) * np.exp(-x * x), "Out = erf(X)."),
    # Fluid 1.x activations
    "atan": ({}, np.arctan, lambda x, o: 1 / (1 + x * x), "Out = atan(X)."),
    "asin": ({}, np.arcsin, lambda x, o: 1 / np.sqrt(1 - x * x), "Out = asin(X)."),
    "acos": ({}, np.arccos, lambda x, o: -1 / np.sqrt(1 - x * x), "Out = acos(X)."),
    "tanh_shrink": ({}, lambda x: x - np.tanh(x), lambda x, o: np.tanh(x) ** 2,
                    "Out = X - tanh(X)."),
    "softshrink": ({"lambda": 0.5},
                   lambda x, **a: np.where(x > a["lambda"], x - a["lambda"],
                                           np.where(x < -a["lambda"], x + a["lambda"], 0)),
                   lambda x, o, **a: (np.abs(x) > a["lambda"]).astype(x.dtype),
                   "Out = X - lambda where X > lambda, X + lambda where X < -lambda, else 0."),
    "hard_shrink": ({"threshold": 0.5},
                    lambda x, threshold: np.where(np.abs(x) > threshold, x, 0),
                    lambda x, o, threshold: (np.abs(x) > threshold).astype(x.dtype),
                    "Out = X where |X| > threshold, else 0."),
    "thresholded_relu": ({"threshold": 1.0},
                         lambda x, threshold: np.where(x > threshold, x, 0),
                         lambda x, o, threshold: (x > threshold).astype(x.dtype),
                         "Out = X where X > threshold, else 0."),
    "stanh": ({"scale_a": 0.67, "scale_b": 1.7159},
              lambda x, scale_a, scale_b: scale_b * np.tanh(scale_a * x),
              lambda x, o, scale_a, scale_b: scale_a * scale_b * (1 - np.tanh(scale_a * x) ** 2),
              "Out = scale_b * tanh(scale_a * X)."),
    "soft_relu": ({"threshold": 40.0},
                  lambda x, threshold: np.logaddexp(0, np.clip(x, -threshold, threshold)),
                  lambda x, o, threshold: np.where(np.abs(x) < threshold, sigmoid(x), 0),
                  "Out = log(1 + exp(clip(X, -threshold, threshold)))."),
}


class _PaddleActivation(OpDef):
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    fwd = None
    grad = staticmethod(_activation_grad)

    @classmethod
    def prepare(cls, attrs, outputs):
        f, kw = cls.fwd, {k: attrs[k] for k in cls.attrs}
        return lambda x: np.asarray(f(x, **kw)).astype(x.dtype, copy=False)


class _PaddleActivationGrad(OpDef):
    inputs = (In("X", dispensable=True), In("Out", dispensable=True), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    infer_shape = None
    dfunc = None
    reads = ("X", "Out")

    @classmethod
    def prepare(cls, attrs, outputs):
        f, kw = cls.dfunc, {k: attrs[k] for k in cls.attrs}
        return lambda x, o, d: (d * f(x, o, **kw)).astype(x.dtype, copy=False)


def _elu_double_grad(g):
    """The grad of elu_grad: Paddle's elu_grad_grad op (below)."""
    g.op("elu_grad_grad", {"X": g.input("X"), "DOut": g.input("Out@GRAD"),
                           "DDX": g.output_grad("X@GRAD")},
         {"DX": g.input_grad("X"), "DDOut": g.input_grad("Out@GRAD")}, g.attrs())


_PADDLE_DOUBLE_GRADS = {"elu": staticmethod(_elu_double_grad)}

for _name, (_attrs, _f, _df, _doc, *_version) in PADDLE_ACTIVATIONS.items():
    type(_title(_name), (_PaddleActivation,),
         {"type": _name, "attrs": _attrs, "fwd": staticmethod(_f), "doc": _doc,
          "version": _version[0] if _version else 0, "__module__": __name__})
    type(_title(_name) + "Grad", (_PaddleActivationGrad,),
         {"type": _name + "_grad", "attrs": _attrs, "dfunc": staticmethod(_df),
          "grad": _PADDLE_DOUBLE_GRADS.get(_name), "__module__": __name__})


# --- Paddle's double-grad ops of sqrt and elu (their *_grad_grad, slots as Paddle's) -----------
class SqrtGradGrad(OpDef):
    type = "sqrt_grad_grad"
    inputs = (In("Out"), In("DX"), In("DDX"))
    outputs = (Out("DOut", dispensable=True), Out("DDOut", dispensable=True))
    infer_shape = None
    doc = "DDOut = DDX / (2 Out); DOut = -DX DDX / Out (the gradient of sqrt_grad)."

    @staticmethod
    def kernel(out, dx, ddx):
        return (-dx * ddx / out).astype(out.dtype, copy=False), \
            (0.5 * ddx / out).astype(out.dtype, copy=False)


class EluGradGrad(OpDef):
    type = "elu_grad_grad"
    inputs = (In("X"), In("DOut"), In("DDX"))
    outputs = (Out("DX", dispensable=True), Out("DDOut", dispensable=True))
    attrs = {"alpha": 1.0}
    infer_shape = None
    doc = ("DDOut = DDX * elu'(X); DX = DDX * DOut * elu''(X), elu'(X) = 1 for X > 0 else "
           "alpha exp(X), elu''(X) = 0 for X > 0 else alpha exp(X) (the gradient of elu_grad).")

    @classmethod
    def prepare(cls, attrs, outputs):
        alpha = attrs["alpha"]

        def kernel(x, dout, ddx):
            neg = alpha * np.exp(np.minimum(x, 0)) * (x <= 0)
            return (ddx * dout * neg).astype(x.dtype, copy=False), \
                (ddx * np.where(x > 0, 1, neg)).astype(x.dtype, copy=False)
        return kernel


