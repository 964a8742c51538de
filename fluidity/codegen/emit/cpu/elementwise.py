"""The elementwise table (emit/elementwise.py) rendered as C++ loops: one loop over the
elements, (pre, n, post) loops where Y covers one contiguous run of X's dims, or one walk
with each operand's strides (fl::broadcast_each) under any other broadcast."""
from .. import register
from ..broadcast import broadcast_code, broadcast_plan, spans_contiguously
from ..checks import check_dims
from ..elementwise import (BINARY_GRADS, operands, PADDLE_ACTIVATIONS, paddle_expression, reads,
                           Row, ROWS)
from ..loops import elementwise as elementwise_loop


def elementwise(e, row):
    """Out = the row's expression over the op's operands."""
    ins, x, y, out_type, body = operands(e, row)
    out_slot = e.opdef.outputs[0].name
    if y is not None and (y.ndim != x.ndim or any(a != b for a, b in zip(x.dims, y.dims))):
        if spans_contiguously(x.dims, y.dims, e.attrs.get("axis", -1)):
            return _broadcast(e, x, y, out_slot, out_type, body)
        return _broadcast_general(e, x, y, out_slot, out_type, body)
    for b in ins.values():
        if b is not x:
            e.same_dims(x, b)
    out = e.output(out_slot, x.dims, out_type)
    loads = " ".join(f"const {b.ctype} {k} = {b}[i];" for k, b in ins.items())
    e.code(f"for (int64_t i = 0; i < {x.numel()}; ++i) {{ {loads} {out}[i] = {body}; }}")


def _broadcast(e, x, y, out_slot, out_type, body):
    """Out = f(X, Y) with Y spanning X's dims [a, b): loops over (pre, n, post)."""
    pre, n, post = e.span(x, y)
    out = e.output(out_slot, x.dims, out_type)
    t = x.ctype
    if post == "1":
        e.code(f"for (int64_t p = 0; p < {pre}; ++p) {{ const {t}* xr = {x} + p * {n}; "
               f"{out_type}* orow = {out} + p * {n}; for (int64_t j = 0; j < {n}; ++j) "
               f"{{ const {t} x = xr[j]; const {t} y = {y}[j]; orow[j] = {body}; }} }}")
    else:
        e.code(f"for (int64_t p = 0; p < {pre}; ++p) for (int64_t j = 0; j < {n}; ++j) {{ "
               f"const {t} y = {y}[j]; const int64_t base = (p * {n} + j) * {post}; "
               f"for (int64_t q = 0; q < {post}; ++q) {{ const {t} x = {x}[base + q]; "
               f"{out}[base + q] = {body}; }} }}")


def _broadcast_general(e, x, y, out_slot, out_type, body):
    """Out = f(X, Y) under any broadcast (either operand, any set of dims): one walk over
    Out with each operand's strides (0 where it broadcasts)."""
    dims, loops = broadcast_plan(e, x.dims, y.dims, e.attrs.get("axis", -1))
    out = e.output(out_slot, dims, out_type, lod_from=y if y.ndim > x.ndim else None)
    e.code(broadcast_code(loops, f"const {x.ctype} x = {x}[ia]; const {y.ctype} y = {y}[ib]; "
                                 f"{out}[i] = {body};"))


def binary_grad(e, c_dx, c_dy):
    """dX, dY by the table's C forms; with Y broadcast over a contiguous run of X's dims,
    dY sums over the others (in double over lanes where each element of Y covers a run of
    X's, in float rows first where Y spans X's rows); any other broadcast walks Out@GRAD
    once, each gradient an operand broadcasts summed in that order (float)."""
    x, y, d = e.input("X"), e.input("Y"), e.input("Out@GRAD")
    o = e.input("Out") if e.op.input("Out") else None
    e.require_float(x, y, d, o)
    if o is None and reads(c_dx + " " + c_dy, "o"):
        e.fail("needs Out")
    same = y.ndim == x.ndim and y.dims == x.dims
    if not same and not spans_contiguously(x.dims, y.dims, e.attrs.get("axis", -1)):
        return _binary_grad_general(e, x, y, o, d, c_dx, c_dy)
    pre, n, post = ("1", x.numel(), "1") if same else e.span(x, y)
    yi = "i" if same else "j"

    def load_at(q):
        return (f"const int64_t i = (p * {n} + j) * {post} + {q}; const float x = {x}[i]; "
                f"const float y = {y}[{yi}]; const float d = {d}[i];"
                + (f" const float o = {o}[i];" if o is not None else ""))
    load = load_at("q")
    loops = (f"for (int64_t p = 0; p < {pre}; ++p) for (int64_t j = 0; j < {n}; ++j) "
             f"for (int64_t q = 0; q < {post}; ++q)")
    if e.has_output("X@GRAD"):
        dx = e.output("X@GRAD", x.dims, lod_from=x)
        _each(e, dx, d, c_dx, f"{loops} {{ {load} {dx}[i] = {c_dx}; }}")
    if e.has_output("Y@GRAD"):
        dy = e.output("Y@GRAD", y.dims, lod_from=y)
        if same:
            _each(e, dy, d, c_dy, f"{loops} {{ {load} {dy}[i] = {c_dy}; }}")
        elif str(post) == "1":      # rows of Y's width: the adds across j vectorize
            e.code(f"for (int64_t j = 0; j < {n}; ++j) {dy}[j] = 0.0f;")
            e.code(f"{loops} {{ {load} {dy}[j] += {c_dy}; }}")
        else:                       # a run of `post` elements a Y element: lanes
            e.code(_lane_sums(dy, c_dy, load_at, pre, n, post))


def _each(e, g, d, expr, line):
    """A gradient `g` of Out's size written element by element by `line`: where its C form
    is Out@GRAD itself (elementwise_add's and _sub's dX), a copy the buffer plan may leave
    out (Emit.copy_code)."""
    if expr.strip() == "d" and g.ctype == d.ctype:
        e.copy_code(g, d, line)
    else:
        e.code(line)


def _lane_sums(dy, c_dy, load_at, pre, n, post):
    """dY[j] = the sum of `c_dy` over p < pre, q < post, in double over runtime/nn.h's
    lanes (q in strides of kSumLanes, so that the compiler vectorizes the run: one float
    accumulator is a chain of dependent adds, ~4 cycles an element), then rounded to float
    once (`load_at(q)`: the C loads of element q of a run). A conv's bias gradient sums H*W
    elements a channel for each sample."""
    lanes = "fl::kSumLanes"
    return (f"for (int64_t j = 0; j < {n}; ++j) {{ double a[{lanes}] = {{0}}; "
            f"for (int64_t p = 0; p < {pre}; ++p) {{ int64_t q = 0; "
            f"for (; q + {lanes} <= {post}; q += {lanes}) for (int l = 0; l < {lanes}; ++l) "
            f"{{ {load_at('(q + l)')} a[l] += {c_dy}; }} "
            f"for (; q < {post}; ++q) {{ {load_at('q')} a[0] += {c_dy}; }} }} "
            f"{dy}[j] = (float)fl::lanes_total(a); }}")


def _binary_grad_general(e, x, y, o, d, c_dx, c_dy):
    """Any broadcast: one walk over Out (its flat index i; X's ia, Y's ib); a gradient
    whose operand broadcasts is zeroed, then accumulated."""
    dims, loops = broadcast_plan(e, x.dims, y.dims, e.attrs.get("axis", -1))
    check_dims(e, d, dims, "Out")
    load = (f"const float x = {x}[ia]; const float y = {y}[ib]; const float d = {d}[i];"
            + (f" const float o = {o}[i];" if o is not None else ""))
    grads = (("X@GRAD", x, "ia", c_dx, 1), ("Y@GRAD", y, "ib", c_dy, 2))
    for slot, buf, at, expr, stride in grads:
        if not e.has_output(slot):
            continue
        g = e.output(slot, buf.dims, lod_from=buf)
        if any(lp[stride] == "0" and lp[0] != "1" for lp in loops):
            e.code(f"for (int64_t i = 0; i < {buf.numel()}; ++i) {g}[i] = 0.0f;")
            e.code(broadcast_code(loops, f"{load} {g}[{at}] += {expr};"))
        else:
            e.code(broadcast_code(loops, f"{load} {g}[{at}] = {expr};"))


def paddle_activation(e, grad):
    """A Paddle 2.x activation (or its gradient): one loop of its expression."""
    body = paddle_expression(e, grad)
    if not grad:
        x = e.input("X")
        elementwise_loop(e, body, "Out", {"x": x}, x)
        return
    d = e.input("Out@GRAD")
    ins = {"d": d}
    for name, slot in (("x", "X"), ("o", "Out")):
        if reads(body, name):
            b = e.input(slot)
            if b is None:
                e.fail(f"{slot} is absent")
            ins[name] = b
    elementwise_loop(e, body, "X@GRAD", ins, d)


for _type, _row in ROWS.items():
    register(_type, "cpu")(lambda e, row=_row: elementwise(e, row))
for _type, (_dx, _dy) in BINARY_GRADS.items():
    register(_type + "_grad", "cpu")(lambda e, dx=_dx, dy=_dy: binary_grad(e, dx, dy))
for _type in PADDLE_ACTIVATIONS:
    register(_type, "cpu")(lambda e: paddle_activation(e, False))
    register(_type + "_grad", "cpu")(lambda e: paddle_activation(e, True))


# numpy's integer floor_divide and mod (runtime/numerics.h), for int32 and int64 operands of
# one type (beam search's token and beam of a flat top_k index); the float forms round as
# numpy's divmod does, not as one C expression: interpreted
INTEGER_BINARY = {"elementwise_floordiv": "fl::floordiv_np(x, y)",
                  "elementwise_mod": "fl::mod_np(x, y)"}


def integer_elementwise(e, row):
    for slot in ("X", "Y"):
        b = e.input(slot)
        if b is not None and b.ctype not in ("int64_t", "int32_t"):
            e.fail(f"{slot} is {b.ctype}: compiled for integers only")
    return elementwise(e, row)


for _type, _expr in INTEGER_BINARY.items():
    register(_type, "cpu")(lambda e, row=Row(_expr, True): integer_elementwise(e, row))
