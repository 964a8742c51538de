"""C++ emitters of multiplex (row i of candidate Ids[i]) and pad_constant_like (Y padded at
the end of each dim to X's shape) and their gradients. Ids come from feeds: every one is
checked in C before any row is read (out of range: the run stops naming the op, the
position, the id and the bound)."""
from ....core.names import EMPTY_VAR_NAME
from .. import register
from ..checks import dense_only, same_dim
from ..literals import c_ints, double_literal, f32


def _multiplex_operands(e, d_slot=None):
    """(Ids, the candidates, n rows, row size) of multiplex(_grad): candidates of one C type
    and shape [n, ...], Ids int32/int64 holding n values (else interpreted, where the kernel
    names it), and the C that checks every id is in [0, candidates)."""
    ids, xs = e.input("Ids"), e.inputs("X")
    if not xs or any(b is None for b in xs):
        e.fail("absent candidates")
    dense_only(e, ids, *xs)
    if ids.ctype not in ("int32_t", "int64_t"):
        e.fail(f"Ids is {ids.ctype}")
    x0 = xs[0]
    if x0.ndim < 1:
        e.fail("the candidates are 0-D")
    for b in xs[1:]:
        if b.ctype != x0.ctype:
            e.fail("the candidates differ in type")
        e.same_dims(x0, b)
    n, row = x0.dims[0], e.prod(x0.dims[1:])
    same_dim(e, ids.numel(), n, "Ids holds a value per row")
    k = len(xs)
    msg = e.c_string(f"{e.op.type}: Ids[%lld] = %lld is outside [0, {k})")
    check = (f"for (int64_t i = 0; i < {n}; ++i) if ({ids}[i] < 0 || {ids}[i] >= {k}) {{ "
             f"std::snprintf(err, 512, {msg}, (long long)i, (long long){ids}[i]); "
             f"return {2 + e.k}; }}")
    return ids, xs, n, row, check


@register("multiplex", "cpu")
def multiplex(e):
    ids, xs, n, row, check = _multiplex_operands(e)
    ct = xs[0].ctype
    out = e.output("Out", xs[0].dims, ct, lod_from=False)
    e.code(check)
    e.code(f"{{ const {ct}* xs[] = {{{', '.join(str(b) for b in xs)}}}; for (int64_t i = 0; "
           f"i < {n}; ++i) std::memcpy({out} + i * {row}, xs[{ids}[i]] + i * {row}, "
           f"sizeof({ct}) * {row}); }}")


@register("multiplex_grad", "cpu")
def multiplex_grad(e):
    """X@GRAD[k]: Out@GRAD's rows whose id is k, zeros elsewhere."""
    ids, xs, n, row, check = _multiplex_operands(e)
    d = e.input("Out@GRAD")
    dense_only(e, d)
    e.same_dims(xs[0], d)
    e.code(check)
    for k, b in enumerate(xs):
        if e.output_var("X@GRAD", k) in (None, EMPTY_VAR_NAME):
            continue
        g = e.output("X@GRAD", b.dims, d.ctype, i=k, lod_from=False)
        e.code(f"for (int64_t i = 0; i < {n}; ++i) if ({ids}[i] == {k}) std::memcpy({g} + i "
               f"* {row}, {d} + i * {row}, sizeof({d.ctype}) * {row}); else std::memset({g} "
               f"+ i * {row}, 0, sizeof({d.ctype}) * {row});")


# ---- pad_constant_like


def _box_walk(e, big, small, body):
    """C running `body` for every element of the row-major `big` dims, `o` its flat index,
    `s` the flat index of the same position in `small` dims or -1 past them."""
    nd = len(big)
    return (f"{{ const int64_t bd[] = {c_ints(big)}, sd[] = {c_ints(small)}; "
            f"for (int64_t o = 0; o < {e.prod(big)}; ++o) {{ int64_t r = o, s = 0, "
            f"stride = 1; for (int a = {nd - 1}; a >= 0; --a) {{ const int64_t c = r % bd[a]; "
            f"r /= bd[a]; if (s >= 0 && c < sd[a]) s += c * stride; else s = -1; "
            f"stride *= sd[a]; }} {body} }} }}")


def _fits(e, big, small, what):
    """Each dim of `small` at most that of `big` (run-time checks where symbolic: a Y too
    big runs interpreted, where the kernel names it)."""
    if len(big) != len(small):
        e.fail(f"{what}: ranks {len(big)} and {len(small)} differ")
    if len(big) == 0:
        e.fail(f"{what}: 0-D")
    for a, b in zip(big, small):
        if e.is_lit(a) and e.is_lit(b):
            if int(b) > int(a):
                e.fail(f"{what}: {list(small)} does not fit in {list(big)}")
        elif str(a) != str(b):
            e.check(f"{b} > {a}", f"{e.op.type}: {what}")


@register("pad_constant_like", "cpu")
def pad_constant_like(e):
    """Out (X's shape): Y where it reaches, pad_value (converted to Y's type) elsewhere."""
    x, y = e.input("X"), e.input("Y")
    dense_only(e, x, y)
    _fits(e, x.dims, y.dims, "Y fits in X")
    v = float(e.attr("pad_value", nonfinite=True))
    if y.ctype not in ("float", "double"):
        e.fail(f"Y is {y.ctype}")      # an integer pad of a float value: left to numpy
    pad = f32(v) if y.ctype == "float" else double_literal(v)   # numpy's weak scalar
    out = e.output("Out", x.dims, y.ctype)
    e.code(_box_walk(e, x.dims, y.dims, f"{out}[o] = s >= 0 ? {y}[s] : {pad};"))


@register("pad_constant_like_grad", "cpu")
def pad_constant_like_grad(e):
    """Y@GRAD: the part of Out@GRAD over Y."""
    y, d = e.input("Y"), e.input("Out@GRAD")
    dense_only(e, y, d)
    _fits(e, d.dims, y.dims, "Y fits in Out@GRAD")
    g = e.output("Y@GRAD", y.dims, d.ctype, lod_from=False)
    e.code(_box_walk(e, d.dims, y.dims, f"if (s >= 0) {g}[s] = {d}[o];"))
