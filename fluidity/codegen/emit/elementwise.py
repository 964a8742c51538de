"""Elementwise ops as rows of one table: one C expression of an element, shared by every
C-family target (emit/cpu/elementwise.py and emit/cuda/elementwise.py render the rows as
loops or device kernels; the C target renders the rows whose functions its runtime has).

An expression names its operands x (input X), y (Y), o (Out) and d (Out@GRAD) and an
attribute as `{name}` (its C literal). It is computed in float as the numpy kernel computes
it (transcendental functions may round differently from numpy's by an ulp). A row's inputs
are float32 unless it takes `any_type` (then every input has one type, each element loaded
as that C type); its output has X's type unless it says `out_type` ("bool" for
comparisons). Binary ops broadcast as the numpy kernels do (Paddle's `axis` rule).
"""
import numpy as np
import re
from collections import namedtuple

from ..cir import literal, NotCompilable
from .literals import double_literal, f32

Row = namedtuple("Row", "expr any_type out_type", defaults=(False, None))

# the activations of ops/activation.py's table: (forward over x, gradient over x, o and d)
ACTIVATIONS = {
    "relu": ("fl::fmaxnp(x, 0.0f)", "d * (o > 0 ? 1.0f : 0.0f)"),
    "sigmoid": ("fl::sigmoid(x)", "d * o * (1.0f - o)"),
    "tanh": ("std::tanh(x)", "d * (1.0f - o * o)"),
    "exp": ("std::exp(x)", "d * o"),
    "log": ("std::log(x)", "d / x"),
    "sqrt": ("std::sqrt(x)", "d * 0.5f / o"),
    "rsqrt": ("1.0f / std::sqrt(x)", "d * -0.5f * (o * o * o)"),
    "square": ("x * x", "d * 2.0f * x"),
    "abs": ("std::fabs(x)", "d * fl::sign(x)"),
    "reciprocal": ("1.0f / x", "-d * o * o"),
    "floor": ("std::floor(x)", "0.0f"),
    "ceil": ("std::ceil(x)", "0.0f"),
    "round": (None, "0.0f"),          # round has `decimals`: emitters of its own
    "sin": ("std::sin(x)", "d * std::cos(x)"),
    "cos": ("std::cos(x)", "-d * std::sin(x)"),
    "softsign": ("x / (1.0f + std::fabs(x))",
                 "d / ((1.0f + std::fabs(x)) * (1.0f + std::fabs(x)))"),
    "logsigmoid": ("-fl::logaddexp0(-x)", "d * fl::sigmoid(-x)"),
    "silu": ("x * fl::sigmoid(x)", "d * (fl::sigmoid(x) * (1.0f + x * (1.0f - fl::sigmoid(x))))"),
    "sign": ("fl::sign(x)", "0.0f"),
    # with attributes
    "leaky_relu": ("x > 0 ? x : x * {alpha}", "x > 0 ? d : d * {alpha}"),
    "gelu": ("fl::gelu(x, {approximate})",                # runtime/numerics.h: numpy's
             "fl::gelu_grad(x, d, {approximate})"),       # precisions
    "pow": ("std::pow(x, {factor})", "d * {factor} * std::pow(x, {factor} - 1.0f)"),
    "softplus": ("x * {beta} > {threshold} ? x : fl::logaddexp0(x * {beta}) / {beta}",
                 "x * {beta} > {threshold} ? d : d * fl::sigmoid(x * {beta})"),
}

# Paddle 2.x activations (ops/activation.py's PADDLE_ACTIVATIONS), as the numpy forms compute
# under NEP 50: a Python float attribute acts as a float32 next to float32 arrays, but a
# float64 numpy scalar, or a Python float times a bool array, makes float64 (hard_sigmoid's and
# erf's derivatives). `{attr}` is the attribute as a float literal, `{attr_d}` as a double one
# (paddle_literals); the grad expressions are d * the derivative, as the kernel multiplies.
# np.clip is fl::fminnp(fl::fmaxnp(x, lo), hi), NaN and signed zeros alike.
PADDLE_ACTIVATIONS = {
    "relu6": ("fl::fminnp(fl::fmaxnp(x, 0.0f), {threshold})",
              "d * (x > 0.0f && x < {threshold} ? 1.0f : 0.0f)"),
    "brelu": ("fl::fminnp(fl::fmaxnp(x, {t_min}), {t_max})",
              "d * (x > {t_min} && x < {t_max} ? 1.0f : 0.0f)"),
    "hard_sigmoid": ("fl::fminnp(fl::fmaxnp({slope} * x + {offset}, 0.0f), 1.0f)",
                     "(float)((double)d * (o > 0.0f && o < 1.0f ? {slope_d} : 0.0))"),
    "hard_swish": ("x * fl::fminnp(fl::fmaxnp(x + {offset}, 0.0f), {threshold}) / {scale}",
                   "d * (x + {offset} <= 0.0f ? 0.0f : (x + {offset} >= {threshold} ? "
                   "{threshold_over_scale} : (2.0f * x + {offset}) / {scale}))"),
    "swish": ("x * fl::sigmoid({beta} * x)",
              "d * (fl::sigmoid({beta} * x) * (1.0f + {beta} * x * "
              "(1.0f - fl::sigmoid({beta} * x))))"),
    "mish": ("fl::mish(x, {threshold})", "fl::mish_grad(x, d, {threshold})"),
    "elu": ("x > 0.0f ? x : {alpha} * std::expm1(fl::fminnp(x, 0.0f))",
            "d * (x > 0.0f ? 1.0f : {alpha} * std::exp(fl::fminnp(x, 0.0f)))"),
    "selu": ("{scale} * (x > 0.0f ? x : {alpha} * std::expm1(fl::fminnp(x, 0.0f)))",
             "d * ({scale} * (x > 0.0f ? 1.0f : {alpha} * std::exp(fl::fminnp(x, 0.0f))))"),
    "log1p": ("std::log1p(x)", "d * (1.0f / (1.0f + x))"),
    "erf": ("(float)std::erf((double)x)",         # scipy's erf: double, rounded to float
            "(float)((double)d * ({two_over_sqrt_pi_d} * (double)std::exp(-x * x)))"),
    # Fluid 1.x's (float32 throughout; `** 2` is numpy's square)
    "atan": ("std::atan(x)", "d * (1.0f / (1.0f + x * x))"),
    "asin": ("std::asin(x)", "d * (1.0f / std::sqrt(1.0f - x * x))"),
    "acos": ("std::acos(x)", "d * (-1.0f / std::sqrt(1.0f - x * x))"),
    "tanh_shrink": ("x - std::tanh(x)", "d * (std::tanh(x) * std::tanh(x))"),
    "hard_shrink": ("std::fabs(x) > {threshold} ? x : 0.0f",
                    "d * (std::fabs(x) > {threshold} ? 1.0f : 0.0f)"),
    "thresholded_relu": ("x > {threshold} ? x : 0.0f", "d * (x > {threshold} ? 1.0f : 0.0f)"),
    "stanh": ("{scale_b} * std::tanh({scale_a} * x)",
              "d * ({scale_a_times_b} * (1.0f - std::tanh({scale_a} * x) * "
              "std::tanh({scale_a} * x)))"),
    "soft_relu": ("fl::logaddexp0(fl::fminnp(fl::fmaxnp(x, -{threshold}), {threshold}))",
                  "d * (std::fabs(x) < {threshold} ? fl::sigmoid(x) : 0.0f)"),
}

# elementwise_* (ops/math.py): Out over x and y
BINARY = {
    "elementwise_add": "x + y",
    "elementwise_sub": "x - y",
    "elementwise_mul": "x * y",
    "elementwise_div": "x / y",
    "elementwise_max": "fl::fmaxnp(x, y)",
    "elementwise_min": "fl::fminnp(x, y)",
    "elementwise_pow": "std::pow(x, y)",
}
# compiled for every dtype (the others for float32: C's integer division and float pow are
# not numpy's)
ANY_TYPE = {"elementwise_add", "elementwise_sub", "elementwise_mul"}

# their gradients: (dX, dY) over x, y (broadcast), o and d
BINARY_GRADS = {
    "elementwise_add": ("d", "d"),
    "elementwise_sub": ("d", "-d"),
    "elementwise_mul": ("d * y", "d * x"),
    "elementwise_div": ("d / y", "-d * o / y"),
    "elementwise_max": ("d * (x > y ? 1.0f : 0.0f)", "d * (x <= y ? 1.0f : 0.0f)"),
    "elementwise_min": ("d * (x < y ? 1.0f : 0.0f)", "d * (x >= y ? 1.0f : 0.0f)"),
    "elementwise_pow": ("d * y * std::pow(x, y - 1.0f)", "d * o * std::log(x > 0 ? x : 1.0f)"),
}

# comparisons and logical ops (ops/logic.py): any type in, bool out
COMPARISONS = {
    "less_than": "x < y",
    "less_equal": "x <= y",
    "greater_than": "x > y",
    "greater_equal": "x >= y",
    "equal": "x == y",
    "not_equal": "x != y",
    "logical_and": "(bool)x && (bool)y",
    "logical_or": "(bool)x || (bool)y",
    "logical_xor": "(bool)x != (bool)y",
    "logical_not": "!(bool)x",
}


def _rows():
    rows = {}
    for name, (fwd, grad) in ACTIVATIONS.items():
        if fwd is not None:
            rows[name] = Row(fwd)
        rows[name + "_grad"] = Row(grad)
    for name, expr in BINARY.items():
        rows[name] = Row(expr, name in ANY_TYPE)
    for name, expr in COMPARISONS.items():
        rows[name] = Row(expr, True, "bool")
    return rows


# op type -> Row: every op one expression computes (the binary ops' gradients are
# BINARY_GRADS, Paddle's activations PADDLE_ACTIVATIONS: their emitters differ)
ROWS = _rows()

# slot -> the name its element has in an expression
ELEMENT_NAMES = {"X": "x", "Y": "y", "Out": "o", "Out@GRAD": "d"}


def expand(expr, attrs):
    """`expr` with {attr} replaced by the attributes' C literals."""
    try:
        return expr.format(**{k: literal(v) for k, v in attrs.items()
                              if isinstance(v, (bool, int, float))})
    except KeyError as e:
        raise NotCompilable(f"its expression names attribute {e}") from None


def operands(e, row):
    """A row's operands: ({element name: Buf} of the inputs the op has, X (or Out@GRAD, or
    the one input), Y or None, Out's C type, the expression expanded)."""
    ins = {}
    for slot, name in ELEMENT_NAMES.items():
        if e.opdef.slot(slot) is not None and e.op.input(slot):
            ins[name] = e.input(slot)
    if not ins:
        e.fail("no input")
    if row.any_type:
        types = {b.ctype for b in ins.values()}
        if len(types) > 1:
            e.fail(f"inputs of types {sorted(types)}: compiled for one type")
    else:
        e.require_float(*ins.values())
    x = ins.get("x") or ins.get("d") or next(iter(ins.values()))
    return ins, x, ins.get("y"), row.out_type or x.ctype, expand(row.expr, e.attrs)


def paddle_literals(e):
    """{attr}, {attr_d} and the derived constants of PADDLE_ACTIVATIONS' expressions."""
    lits = {}
    for k, v in e.attrs.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            lits[k], lits[k + "_d"] = e.literal(float(v)), double_literal(v)
    if "threshold" in lits and "scale" in lits and e.attr("scale") != 0:
        lits["threshold_over_scale"] = e.literal(e.attr("threshold") / e.attr("scale"))
    lits["two_over_sqrt_pi_d"] = double_literal(2 / np.sqrt(np.pi))
    if "scale_a" in lits and "scale_b" in lits:     # stanh's: a Python product, then float32
        lits["scale_a_times_b"] = f32(float(e.attr("scale_a")) * float(e.attr("scale_b")))
    return lits


def paddle_expression(e, grad):
    """A Paddle activation's (or its gradient's) expression with its constants."""
    expr = PADDLE_ACTIVATIONS[e.op.type[:-len("_grad")] if grad else e.op.type][grad]
    try:
        return expr.format(**paddle_literals(e))
    except KeyError as exc:         # e.g. hard_swish's threshold / scale with scale 0
        e.fail(f"no constant {exc}")


def reads(expr, name):
    """Whether expression `expr` reads operand `name` (x, y, o, d)."""
    return re.search(rf"\b{name}\b", expr) is not None
