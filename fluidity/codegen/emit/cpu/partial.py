"""C++ emitters of partial_concat and partial_sum (ops/partial.py) and their gradients: the
same column window of several 2-D inputs of one shape, worked out when compiling by the
kernel's own rule (ops/partial.py's window), so the inputs' width must be known then."""
from ....core.names import EMPTY_VAR_NAME
from ....errors import ShapeError
from ....ops.partial import window
from .. import register
from ..checks import dense_only


def _operands(e):
    """(inputs, rows, width, start, length): inputs 2-D of one C type and shape."""
    xs = e.inputs("X")
    if not xs or any(b is None for b in xs):
        e.fail("absent inputs")
    dense_only(e, *xs)
    for b in xs:
        if b.ndim != 2:
            e.fail(f"{b.var}{b.dims} is not 2-D")
        if b.ctype != xs[0].ctype:
            e.fail("the inputs differ in type")
        e.same_dims(xs[0], b)
    rows, width = xs[0].dims
    if not e.is_lit(width):
        e.fail("the inputs' width is known only at run time")
    try:
        start, length = window(e.op.type, [[1, int(width)]] * len(xs),
                               int(e.attr("start_index")), int(e.attr("length")),
                               e.opdef.negative_start)
    except ShapeError as err:
        e.fail(str(err))
    return xs, rows, int(width), start, length


@register("partial_concat", "cpu")
def partial_concat(e):
    xs, rows, w, s, n = _operands(e)
    ct, k = xs[0].ctype, len(xs)
    out = e.output("Out", [rows, str(n * k)], ct, lod_from=False)
    for j, b in enumerate(xs):
        e.code(f"for (int64_t r = 0; r < {rows}; ++r) std::memcpy({out} + r * {n * k} + "
               f"{j * n}, {b} + r * {w} + {s}, sizeof({ct}) * {n});")


@register("partial_sum", "cpu")
def partial_sum(e):
    """The first input's window, then each other's added in order (the kernel's)."""
    xs, rows, w, s, n = _operands(e)
    ct = xs[0].ctype
    if ct == "bool":
        e.fail("bool inputs")
    out = e.output("Out", [rows, str(n)], ct, lod_from=False)
    terms = "".join(f" v += {b}[r * {w} + {s} + c];" for b in xs[1:])
    e.code(f"for (int64_t r = 0; r < {rows}; ++r) for (int64_t c = 0; c < {n}; ++c) {{ "
           f"{ct} v = {xs[0]}[r * {w} + {s} + c];{terms} {out}[r * {n} + c] = v; }}")


def _emit_partial_grad(e, piece):
    """Each X@GRAD the op has: zeros, its window Out@GRAD's columns at `piece(k, n)`."""
    xs, rows, w, s, n = _operands(e)
    d = e.input("Out@GRAD")
    dense_only(e, d)
    if d.ndim != 2:
        e.fail(f"Out@GRAD{d.dims} is not 2-D")
    dw = d.dims[1]
    if not e.is_lit(dw) or int(dw) != (n * len(xs) if piece else n):
        e.fail(f"Out@GRAD{d.dims} is not the window's shape")
    if d.ctype != xs[0].ctype:
        e.fail("Out@GRAD and X differ in type")
    if str(d.dims[0]) != str(rows):
        e.check(f"{d.dims[0]} != {rows}", f"{e.op.type}: Out@GRAD has other rows than X")
    for k, b in enumerate(xs):
        if e.output_var("X@GRAD", k) in (None, EMPTY_VAR_NAME):
            continue
        g = e.output("X@GRAD", b.dims, d.ctype, i=k, lod_from=False)
        at = k * n if piece else 0
        e.code(f"std::memset({g}, 0, {g.nbytes()}); for (int64_t r = 0; r < {rows}; ++r) "
               f"std::memcpy({g} + r * {w} + {s}, {d} + r * {dw} + {at}, "
               f"sizeof({d.ctype}) * {n});")


@register("partial_concat_grad", "cpu")
def partial_concat_grad(e):
    _emit_partial_grad(e, True)


@register("partial_sum_grad", "cpu")
def partial_sum_grad(e):
    _emit_partial_grad(e, False)
