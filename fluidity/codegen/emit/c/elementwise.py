"""The elementwise table (emit/elementwise.py) rendered as C loops. A row's C++ names are
spelled in C (`std::tanh` on a float is C's `tanhf`, `fl::fmaxnp` is c_rt.h's
`fl_fmaxnp`); a row that names a function C's runtime lacks has no C form (its op cuts
the segment, as any op without an emitter). Y may broadcast over one contiguous run of X's
dims."""
import re

from .. import register
from ..elementwise import ROWS, operands

# the C++ functions of the table's rows -> their C spelling for float operands
C_NAMES = {"std::tanh": "tanhf", "std::exp": "expf", "std::log": "logf", "std::sqrt": "sqrtf",
           "std::fabs": "fabsf", "std::floor": "floorf", "std::ceil": "ceilf",
           "std::sin": "sinf", "std::cos": "cosf", "std::pow": "powf",
           "fl::fmaxnp": "fl_fmaxnp", "fl::fminnp": "fl_fminnp", "fl::sigmoid": "fl_sigmoid",
           "fl::sign": "fl_sign"}
_QUALIFIED = re.compile(r"\b(?:std|fl)::\w+")


def c_expression(expr):
    """The row's expression in C, or None when it names a function C's runtime lacks."""
    names = set(_QUALIFIED.findall(expr))
    if not names <= set(C_NAMES):
        return None
    return _QUALIFIED.sub(lambda m: C_NAMES[m.group(0)], expr)


def elementwise(e, row, expr):
    """Out = the row's expression: one loop over same-shaped operands, or (pre, n, post)
    loops with Y's element j."""
    ins, x, y, out_type, body = operands(e, row._replace(expr=expr))
    if y is not None and y.dims != x.dims:
        pre, n, post = e.span(x, y)
        out = e.output(e.opdef.outputs[0].name, x.dims, out_type)
        e.code(f"for (int64_t p = 0; p < {pre}; ++p) for (int64_t j = 0; j < {n}; ++j) "
               f"for (int64_t q = 0; q < {post}; ++q) {{ const int64_t i = (p * {n} + j) * "
               f"{post} + q; const {x.ctype} x = {x}[i]; const {y.ctype} y = {y}[j]; "
               f"{out}[i] = {body}; }}")
        return
    for b in ins.values():
        if b is not x:
            e.same_dims(x, b)
    out = e.output(e.opdef.outputs[0].name, x.dims, out_type)
    loads = " ".join(f"const {b.ctype} {k} = {b}[i];" for k, b in ins.items())
    e.code(f"for (int64_t i = 0; i < {x.numel()}; ++i) {{ {loads} {out}[i] = {body}; }}")


for _type, _row in ROWS.items():
    _expr = c_expression(_row.expr)
    if _expr is not None:
        register(_type, "c")(lambda e, row=_row, expr=_expr: elementwise(e, row, expr))
