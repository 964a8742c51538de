"""C++ emitters of increment, clip (and its gradient), arg_max, arg_min, is_empty and where
(and its gradient) (comparisons and logical ops are rows of the elementwise table)."""
from ....errors import ShapeError
from ....ops.logic import arg_out_shape
from .. import register
from ..checks import dense_only
from ..literals import double_literal


def _c_bounds(e, x):
    """clip's bounds as C expressions in the kernel's types: a Python float attribute as X's
    type (NEP 50), a Min/Max tensor's first element as its own (float) type, read at run
    time; a tensor bound that makes lo > hi stops the run as the kernel's ShapeError."""
    dense_only(e, x)
    if x.ctype not in ("float", "double"):
        e.fail(f"X is {x.ctype}: compiled for floats")
    out = []
    for slot, attr in (("Min", "min"), ("Max", "max")):
        b = e.input(slot)
        if b is None:
            v = float(e.attr(attr, nonfinite=True))        # both literals format inf, nan
            out.append(e.literal(v) if x.ctype == "float" else double_literal(v))
            continue
        if b.ctype not in ("float", "double"):
            e.fail(f"{slot} is {b.ctype}")
        e.check(f"{b.numel()} < 1", f"{e.op.type}: {slot} is empty")
        out.append(f"{b}[0]")
    if not (e.input("Min") or e.input("Max")):
        lo, hi = e.attr("min", nonfinite=True), e.attr("max", nonfinite=True)
        if lo > hi:
            e.fail(f"min {lo} is greater than max {hi}")
    else:
        e.code(f'if ({out[0]} > {out[1]}) return fl::fail(err, {e.k}, '
               f'{e.c_string(f"{e.op.type}: min is greater than max")});')
    return out


@register("increment", "cpu")
def increment(e):
    """In double and back, as numpy adds the float `step` (integers truncate)."""
    x = e.input("X")
    if x.ctype == "bool":
        e.fail("X is bool")
    n = x.numel()
    if e.is_lit(n):
        if int(n) != 1:
            e.fail(f"X has {n} elements, not one")
    else:
        e.check(f"{n} != 1", "increment: X must hold exactly one element")
    out = e.output("Out", x.dims, x.ctype)
    t = "float" if x.ctype == "float" else "double"
    step = e.literal(float(e.attr("step"))) if t == "float" else repr(float(e.attr("step")))
    e.code(f"{out}[0] = ({x.ctype})(({t}){x}[0] + {step});")


@register("clip", "cpu")
def clip(e):
    """min(max(X, lo), hi) with numpy's NaN rule (fl::maxnp/minnp) in X's float type."""
    x = e.input("X")
    lo, hi = _c_bounds(e, x)
    out = e.output("Out", x.dims, x.ctype)
    t = x.ctype
    e.code(f"for (int64_t i = 0; i < {x.numel()}; ++i) "
           f"{out}[i] = fl::minnp(fl::maxnp({x}[i], ({t})({lo})), ({t})({hi}));")


@register("clip_grad", "cpu")
def clip_grad(e):
    """Out@GRAD where lo < X < hi (compared in the bounds' own types), else 0."""
    x, d = e.input("X"), e.input("Out@GRAD")
    dense_only(e, d)
    if d.ctype != x.ctype:
        e.fail("X and Out@GRAD differ in type")
    lo, hi = _c_bounds(e, x)
    e.same_dims(x, d)
    dx = e.output("X@GRAD", x.dims, x.ctype)
    e.code(f"for (int64_t i = 0; i < {x.numel()}; ++i) {{ const {x.ctype} v = {x}[i]; "
           f"{dx}[i] = (v > {lo} && v < {hi}) ? {d}[i] : ({x.ctype})0; }}")


@register("arg_max", "cpu")
@register("arg_min", "cpu")
def arg_min_max(e):
    """Per lane along `axis` (or over all of X when flatten) the first index of the
    extreme, a NaN winning (numpy's argmax/argmin); an empty axis runs interpreted."""
    x = e.input("X")
    if x.ctype not in ("float", "double", "int64_t", "int32_t"):
        e.fail(f"X is {x.ctype}")
    axis, keep, flat = int(e.attr("axis")), e.attr("keepdims"), e.attr("flatten")
    try:
        dims = arg_out_shape(list(x.dims), axis, keep, flat)
    except ShapeError as exc:
        e.fail(str(exc))
    if flat or not x.ndim:
        pre, m, post = "1", x.numel(), "1"
    else:
        a = axis % x.ndim
        pre, m, post = e.prod(x.dims[:a]), x.dims[a], e.prod(x.dims[a + 1:])
    dt = e.attr("dtype")
    ct = "int64_t" if dt == -1 else e.ctype_of(dt)
    out = e.output("Out", dims, ct)
    e.check(f"{m} == 0", f"{e.opdef.type}: the axis is empty")
    better = {"arg_max": ">", "arg_min": "<"}[e.opdef.type]
    t = x.ctype
    e.code(f"for (int64_t p = 0; p < {pre}; ++p) for (int64_t q = 0; q < {post}; ++q) {{ "
           f"const {t}* xs = {x} + p * {m} * {post} + q; int64_t b = 0; {t} v = xs[0]; "
           f"bool nan = v != v; for (int64_t j = 1; j < {m} && !nan; ++j) {{ const {t} c = "
           f"xs[j * {post}]; if (c != c) {{ b = j; nan = true; }} else if (c {better} v) {{ "
           f"v = c; b = j; }} }} {out}[p * {post} + q] = ({ct})b; }}")


@register("is_empty", "cpu")
def is_empty(e):
    """Out = [X has no elements] (its size only: a beam search's "every source ended")."""
    x = e.input("X")
    dense_only(e, x)
    out = e.output("Out", [1], "bool", lod_from=False)
    e.code(f"{out}[0] = ({x.numel()}) == 0;")


# --- where (ops/logic.py Where) -------------------------------------------------------------------
def _where_operands(e):
    """Condition (bool), X and Y (one type) of one shape (checked)."""
    cond, x, y = e.input("Condition"), e.input("X"), e.input("Y")
    dense_only(e, cond, x, y)
    if cond.ctype != "bool":
        e.fail(f"Condition is {cond.ctype}")
    if x.ctype != y.ctype:
        e.fail(f"X is {x.ctype}, Y {y.ctype}")
    e.same_dims(cond, x)
    e.same_dims(x, y)
    return cond, x, y


@register("where", "cpu")
def where(e):
    """Out = X where Condition else Y."""
    cond, x, y = _where_operands(e)
    out = e.output("Out", x.dims, x.ctype)
    e.code(f"for (int64_t i = 0; i < {x.numel()}; ++i) {out}[i] = {cond}[i] ? {x}[i] : {y}[i];")


@register("where_grad", "cpu")
def where_grad(e):
    """X@GRAD = Out@GRAD where Condition, else 0; Y@GRAD the other way."""
    cond, x, _ = _where_operands(e)
    d = e.input("Out@GRAD")
    dense_only(e, d)
    e.same_dims(x, d)
    for slot, pick in (("X@GRAD", "{c} ? {d} : zero"), ("Y@GRAD", "{c} ? zero : {d}")):
        if e.has_output(slot):
            g = e.output(slot, x.dims, d.ctype)
            val = pick.format(c=f"{cond}[i]", d=f"{d}[i]")
            e.code(f"{{ const {d.ctype} zero = 0; for (int64_t i = 0; i < {x.numel()}; ++i) "
                   f"{g}[i] = {val}; }}")
