"""C++ emitters of the matrix-shaped tensor ops (ops/tensor.py, ops/creation.py): tril_triu,
roll and roll_grad, eye, linspace (its Start, Stop and Num constants known when compiling)
and diag. Any C type the segment holds; the kernels' semantics."""
import numpy as np

from ....core import dtypes
from ....core.limits import check_elements
from ....errors import FluidityError, ShapeError
from ....ops.common import norm_axis
from ....ops.creation import Linspace
from ...dim import Dim
from .. import register
from ..checks import dense_only
from ..known_values import known_values
from ..literals import array_literal, c_ints, double_literal


@register("tril_triu", "cpu")
def tril_triu(e):
    """Out = X where j - i <= diagonal (lower) or >= diagonal (upper) in the last two
    dims, zeros elsewhere (its gradient op is tril_triu too)."""
    x = e.input("X")
    dense_only(e, x)
    if x.ndim < 2:
        e.fail(f"X{x.dims} has fewer than 2 dims")
    d, lower = int(e.attr("diagonal")), bool(e.attr("lower"))
    if abs(d) > 1 << 62:
        e.fail(f"diagonal {d}")
    r, c = x.dims[-2:]
    keep = f"j - i <= {d}LL" if lower else f"j - i >= {d}LL"
    out = e.output("Out", x.dims, x.ctype)
    e.code(f"for (int64_t p = 0; p < {e.prod(x.dims[:-2])}; ++p) for (int64_t i = 0; "
           f"i < {r}; ++i) for (int64_t j = 0; j < {c}; ++j) {{ const int64_t o = (p * {r} "
           f"+ i) * {c} + j; {out}[o] = ({keep}) ? {x}[o] : ({x.ctype})0; }}")


# ---- roll


def _literal_ints(e, slot):
    """The values of input `slot` as Python ints, known when compiling, else NotCompilable."""
    buf = e.input(slot)
    vals = known_values(e, buf)
    if vals is None or any(isinstance(v, (Dim, str)) for v in vals):
        e.fail(f"{slot} '{buf.var}' holds values known only at run time")
    return [int(v) for v in vals]


def _roll_shifts(e, x, sign):
    """(dims, shifts) of the roll as C arrays' contents: per rolled axis its dim and its
    total shift (np.roll adds the shifts of an axis named twice; no axis: X flattened,
    rolled by the sum of the shifts), times `sign` (-1: the gradient's roll back)."""
    shifts = _literal_ints(e, "ShiftsTensor") if e.op.input("ShiftsTensor") else \
        [int(s) for s in e.attr("shifts")]
    axis = [int(a) for a in e.attr("axis")]
    if not shifts:
        e.fail("no shifts")
    if not axis:
        dims, total = [e.prod(x.dims)], [sum(shifts)]
    else:
        if len(shifts) != len(axis):
            e.fail(f"shifts {shifts} and axis {axis} differ in length")
        try:
            axes = [norm_axis(a, x.ndim) for a in axis]
        except ShapeError as err:
            e.fail(str(err))
        dims, total = list(x.dims), [0] * x.ndim
        for a, s in zip(axes, shifts):
            total[a] += s
    if any(abs(s) > 1 << 62 for s in total):
        e.fail(f"a shift past 2^62 ({total})")
    return dims, [sign * s for s in total]


def _emit_roll(e, x, src, out, sign):
    """out[idx] = src[idx - shift] per axis, cyclically (each shift taken modulo its dim at
    run time; an empty axis means an empty tensor, where nothing is read)."""
    dims, shifts = _roll_shifts(e, x, sign)
    nd = len(dims)
    e.code(f"{{ const int64_t dims[] = {c_ints(dims)}; int64_t sh[] = {c_ints(shifts)}; "
           f"for (int a = 0; a < {nd}; ++a) sh[a] = dims[a] > 0 ? ((sh[a] % dims[a]) + "
           f"dims[a]) % dims[a] : 0; for (int64_t i = 0; i < {x.numel()}; ++i) {{ "
           f"int64_t r = i, at = 0, stride = 1; for (int a = {nd - 1}; a >= 0; --a) {{ "
           f"const int64_t c = r % dims[a]; r /= dims[a]; const int64_t s = c - sh[a]; "
           f"at += (s < 0 ? s + dims[a] : s) * stride; stride *= dims[a]; }} "
           f"{out}[i] = {src}[at]; }} }}")


@register("roll", "cpu")
def roll(e):
    x = e.input("X")
    dense_only(e, x)
    out = e.output("Out", x.dims, x.ctype)
    _emit_roll(e, x, x, out, 1)


@register("roll_grad", "cpu")
def roll_grad(e):
    """X@GRAD = Out@GRAD rolled back."""
    x, d = e.input("X"), e.input("Out@GRAD")
    dense_only(e, x, d)
    e.same_dims(x, d)
    dx = e.output("X@GRAD", x.dims, d.ctype)
    _emit_roll(e, x, d, dx, -1)


# ---- eye, linspace, diag


def _sized(e, shape, ctype):
    """NotCompilable where the kernel would refuse the allocation (core.limits)."""
    try:
        check_elements(shape, np.dtype(dtypes.numpy_of_ctype(ctype)).itemsize, e.op.type)
    except FluidityError as err:
        e.fail(str(err))


@register("eye", "cpu")
def eye(e):
    r, c = int(e.attr("num_rows")), int(e.attr("num_columns"))
    c = r if c == -1 else c
    if r < 0 or c < 0:
        e.fail(f"a [{r}, {c}] identity")
    ctype = e.ctype_of(e.attr("dtype"))
    _sized(e, [r, c], ctype)
    out = e.output("Out", [str(r), str(c)], ctype, lod_from=False)
    e.code(f"std::memset({out}, 0, {out.nbytes()}); for (int64_t i = 0; i < {min(r, c)}; "
           f"++i) {out}[i * {c} + i] = ({ctype})1;")


@register("linspace", "cpu")
def linspace(e):
    """Num values of the kernel's arithmetic from Start, Stop and Num known when compiling:
    float types computed in double (the first half Start + step * i, the rest
    Stop - step * (Num - 1 - i)) and rounded, as the kernel; integer types the kernel's own
    values, as a table (C's conversion of a double out of range is undefined)."""
    ctype = e.ctype_of(e.attr("dtype"))
    if ctype not in ("float", "double", "int32_t", "int64_t"):
        e.fail(f"dtype {ctype}")
    vals = []
    for slot in ("Start", "Stop", "Num"):
        buf = e.input(slot)
        v = known_values(e, buf)
        if v is None or not v or isinstance(v[0], (Dim, str)):
            e.fail(f"{slot} '{buf.var}' holds values known only at run time")
        vals.append(np.asarray(v[0]))
    nt = dtypes.numpy_of_ctype(ctype)
    n = int(vals[2])
    _sized(e, [max(n, 0)], ctype)
    out = e.output("Out", [str(max(n, 0))], ctype, lod_from=False)
    if n <= 0:
        return
    if ctype not in ("float", "double"):
        with np.errstate(all="ignore"):
            table = Linspace.kernel(*vals, dtype=dtypes.CODE_OF_C_TYPE[ctype])
        e.code(f"{{ static const {ctype} v[] = {array_literal(e, table, ctype)}; "
               f"std::memcpy({out}, v, {out.nbytes()}); }}")
        return
    s, t = (float(v.astype(nt)) for v in vals[:2])
    if n <= 1:
        e.code(f"if ({max(n, 0)}) {out}[0] = ({ctype}){double_literal(s)};")
        return
    a, b, step = (double_literal(v) for v in (s, t, (t - s) / (n - 1)))
    e.code(f"for (int64_t i = 0; i < {n}; ++i) {out}[i] = ({ctype})(i < {n // 2} ? "
           f"{a} + {step} * (double)i : {b} - {step} * (double)({n} - i - 1));")


@register("diag", "cpu")
def diag(e):
    """Out = the square matrix with the 1-D Diagonal on its diagonal."""
    d = e.input("Diagonal")
    dense_only(e, d)
    if d.ndim != 1:
        e.fail(f"Diagonal{d.dims} is not 1-D")
    n = d.dims[0]
    out = e.output("Out", [n, n], d.ctype, lod_from=False)
    e.code(f"std::memset({out}, 0, {out.nbytes()}); for (int64_t i = 0; i < {n}; ++i) "
           f"{out}[i * {n} + i] = {d}[i];")
