"""Paddle 3.x's functional APIs in legacy (ProgramDesc) static mode, for the fixture scripts.

PaddlePaddle 3.x still writes the ProgramDesc format (`FLAGS_enable_pir_api=0`,
`paddle.enable_static()`, then `paddle.static.save_inference_model` writes a `.pdmodel`
ProgramDesc, not PIR JSON), but some 50 of its Python APIs (`paddle.sum`, `paddle.matmul`,
`paddle.tanh`, ...; `paddle/base/dygraph/generated_tensor_methods_patch.py`) were replaced
by direct `_C_ops` calls that accept only dygraph tensors and PIR Values, so a legacy
`Variable` makes them raise "argument must be Value, but got Variable". `install()` wraps
each of them: a legacy Variable argument appends the op that API appended in Paddle 2.x
(one row of LEGACY: op type, its input slots, its attributes), anything else calls the
original. The op desc is then Paddle's own (its OpProto fills the default attributes), so
the fixtures hold what Paddle 3.x writes for those ops.

Used only under `.venv-paddle`; never imported by Fluidity or its tests.
"""
import sys

import paddle
from paddle.base.framework import Variable
from paddle.base.layer_helper import LayerHelper


def _axes(axis):
    if axis is None:
        return [], True
    return ([axis] if isinstance(axis, int) else list(axis)), False


def _reduce(op_type, bool_out=False):
    def build(x, axis=None, dtype=None, keepdim=False, name=None):
        dim, everything = _axes(axis)
        return op_type, {"X": x}, {"dim": dim or [0], "keep_dim": keepdim,
                                   "reduce_all": everything}, ("bool" if bool_out else None)
    return build


def _unary(op_type):
    return lambda x, name=None: (op_type, {"X": x}, {}, None)


def _binary(op_type):
    return lambda x, y, name=None: (op_type, {"X": x, "Y": y}, {"axis": -1}, None)


def _arg(op_type):
    def build(x, axis=None, keepdim=False, dtype="int64", name=None):
        return op_type, {"X": x}, {"axis": 0 if axis is None else axis, "keepdims": keepdim,
                                   "flatten": axis is None,
                                   "dtype": paddle.base.framework.convert_np_dtype_to_dtype_(
                                       dtype)}, dtype
    return build


def _tri(lower):
    return lambda x, diagonal=0, name=None: ("tril_triu", {"X": x},
                                             {"diagonal": diagonal, "lower": lower}, None)


# API name -> build(args...) -> (op type, {slot: var}, attrs, output dtype or None: X's)
LEGACY = {
    "matmul": lambda x, y, transpose_x=False, transpose_y=False, name=None: (
        "matmul_v2", {"X": x, "Y": y}, {"trans_x": transpose_x, "trans_y": transpose_y}, None),
    "bmm": lambda x, y, name=None: ("bmm", {"X": x, "Y": y}, {}, None),
    "dot": lambda x, y, name=None: ("dot", {"X": x, "Y": y}, {}, None),
    "multiply": _binary("elementwise_mul"),
    "maximum": _binary("elementwise_max"),
    "minimum": _binary("elementwise_min"),
    "sum": _reduce("reduce_sum"),
    "all": _reduce("reduce_all", True),
    "any": _reduce("reduce_any", True),
    "argmax": _arg("arg_max"),
    "argmin": _arg("arg_min"),
    "roll": lambda x, shifts, axis=None, name=None: (
        "roll", {"X": x}, {"shifts": [shifts] if isinstance(shifts, int) else list(shifts),
                           "axis": [] if axis is None else
                           ([axis] if isinstance(axis, int) else list(axis))}, None),
    "tril": _tri(True),
    "triu": _tri(False),
    "gelu": lambda x, approximate=False, name=None: ("gelu", {"X": x},
                                                     {"approximate": approximate}, None),
    "isfinite": lambda x, name=None: ("isfinite_v2", {"X": x}, {}, "bool"),
    "isinf": lambda x, name=None: ("isinf_v2", {"X": x}, {}, "bool"),
    "isnan": lambda x, name=None: ("isnan_v2", {"X": x}, {}, "bool"),
    "logical_not": lambda x, out=None, name=None: ("logical_not", {"X": x}, {}, "bool"),
    **{f"logical_{k}": (lambda t: lambda x, y, out=None, name=None: (
        t, {"X": x, "Y": y}, {}, "bool"))(f"logical_{k}") for k in ("and", "or", "xor")},
    "greater_than": lambda x, y, name=None: ("greater_than", {"X": x, "Y": y}, {"axis": -1},
                                             "bool"),
    **{k: _unary(k) for k in ("tanh", "sigmoid", "exp", "abs", "sqrt", "rsqrt", "log",
                              "log1p", "log2", "log10", "sign", "floor", "ceil", "cos", "sin",
                              "round", "expm1", "cosh", "sinh", "acos", "asin")},
}


def _wrap(api, original, build):
    def f(*args, **kw):
        if not any(isinstance(a, Variable) for a in list(args) + list(kw.values())):
            return original(*args, **kw)
        op_type, ins, attrs, dtype = build(*args, **kw)
        x = next(iter(ins.values()))
        helper = LayerHelper(op_type)
        out = helper.create_variable_for_type_inference(dtype or x.dtype)
        helper.append_op(type=op_type, inputs={k: [v] for k, v in ins.items()},
                         outputs={"Out": [out]}, attrs=attrs)
        return out
    f.__name__ = api
    return f


def _pir_only(fn):
    """Whether `fn` is one of the `_C_ops`-only functions (a builtin, or a wrapper of the
    generated patch module)."""
    return fn is not None and (type(fn).__name__ == "builtin_function_or_method" or getattr(
        fn, "__module__", "") == "paddle.base.dygraph.generated_tensor_methods_patch")


def install():
    """Wrap the APIs of LEGACY wherever paddle's modules hold them, and as Variable
    methods; F.normalize's legacy branch is mended."""
    # every loaded paddle module that holds one of the originals (`from ...tensor import
    # sum` bound it at import; `paddle.tensor` the attribute is not the module layers use)
    modules = [m for n, m in list(sys.modules.items())
               if m is not None and (n == "paddle" or n.startswith("paddle."))]
    for api, build in LEGACY.items():
        original = getattr(paddle, api, None) or getattr(paddle.nn.functional, api)
        f = _wrap(api, original, build)
        for mod in modules:
            if _pir_only(getattr(mod, api, None)):
                setattr(mod, api, f)
        setattr(Variable, api, f)
    original = paddle.nn.functional.normalize
    paddle.nn.functional.normalize = lambda x, *a, **kw: (
        _normalize(x, *a, **kw) if isinstance(x, Variable) else original(x, *a, **kw))


def _normalize(x, p=2, axis=1, epsilon=1e-12, name=None):
    """Paddle 3.3.1's legacy branch of F.normalize computes this, then fails on an unbound
    name: p_norm (keepdim), max with epsilon, divide; the ops Paddle 2.x appended."""
    helper = LayerHelper("p_norm")
    norm = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(type="p_norm", inputs={"X": [x]}, outputs={"Out": [norm]},
                     attrs={"axis": axis, "porder": float(p), "keepdim": True,
                            "epsilon": epsilon})
    eps = paddle.full(shape=[1], fill_value=epsilon, dtype=norm.dtype)
    return paddle.divide(x, paddle.maximum(norm, eps))
