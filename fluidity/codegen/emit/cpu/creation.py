"""C++ emitters of fill_constant, assign, fill_zeros_like, fill_any_like,
fill_constant_batch_size_like and assign_value (their values known to later ops:
known_values.py)."""
import numpy as np

from ....ops.creation import batch_shape
from .. import register
from ..checks import dense_only
from ..known_values import known_ints, set_known_values
from ..literals import (array_literal, double_literal, fill_value, lit_int, NUMPY_OF_CTYPE,
                        value_literal)


@register("fill_constant", "cpu")
def fill_constant(e):
    """The shape from ShapeTensorList / ShapeTensor where compiled code knows their
    values (known_values.py: a shape op's dims, constants), else the attribute; the
    value from ValueTensor at run time (converted as np.full does), else the attribute.
    A constant of a few elements is recorded as known values, for the ops that take
    shapes, bounds or ranges from it."""
    shape = known_ints(e, "ShapeTensor", "ShapeTensorList", list_first=False)
    if shape is None:
        shape = [str(d) for d in e.attr("shape")]
    for d in shape:
        n = lit_int(d)
        if n is not None and n < 0:
            e.fail(f"shape {shape} has unknown dims")
        if n is None:      # a known value that only run time sizes: np.full refuses < 0
            e.check(f"{d} < 0", "fill_constant: a negative dim")
    ctype = e.ctype_of(e.attr("dtype"))
    if e.op.input("ValueTensor"):
        v = e.input("ValueTensor")
        if v.ctype not in ("float", "double", "int64_t", "int32_t", "bool"):
            e.fail(f"ValueTensor is {v.ctype}")
        e.check(f"{v.numel()} < 1", "fill_constant: ValueTensor is empty")
        value = f"({ctype}){v}[0]"
        const = None
    else:
        const = fill_value(e)
        value = value_literal(e, const, ctype)
    out = e.output("Out", shape, ctype)
    e.code(f"for (int64_t i = 0; i < {out.numel()}; ++i) {out}[i] = {value};")
    n = lit_int(out.numel())
    if const is not None and n is not None and n <= 64:
        set_known_values(e, out, list(np.full([n], const, NUMPY_OF_CTYPE[ctype])))


@register("assign", "cpu")
def assign(e):
    x = e.input("X")
    out = e.output("Out", x.dims, x.ctype)
    e.code(f"std::memcpy({out}, {x}, {x.nbytes()});")


@register("fill_zeros_like", "cpu")
def fill_zeros_like(e):
    x = e.input("X")
    dense_only(e, x)
    out = e.output("Out", x.dims, x.ctype)
    e.code(f"std::memset({out}, 0, sizeof({out.ctype}) * {out.numel()});")


@register("fill_any_like", "cpu")
def fill_any_like(e):
    """X's dims filled with `value` as np.full converts it to the dtype."""
    x = e.input("X")
    dense_only(e, x)
    d = e.attr("dtype")
    ctype = x.ctype if d == -1 else e.ctype_of(d)
    value = value_literal(e, e.attr("value", nonfinite=True), ctype)
    out = e.output("Out", x.dims, ctype)
    e.code(f"for (int64_t i = 0; i < {out.numel()}; ++i) {out}[i] = {value};")


def _batch_size_like(e):
    """A *_batch_size_like op's Input Buf, input_dim_idx, output_dim_idx and `shape`
    (NotCompilable when the indices are out of range or another dim is unknown)."""
    x = e.input("Input")
    i, o = int(e.attr("input_dim_idx")), int(e.attr("output_dim_idx"))
    shape = [int(d) for d in e.attr("shape")]
    if not (0 <= i < x.ndim and 0 <= o < len(shape)) or \
            any(d < 0 for k, d in enumerate(shape) if k != o):
        e.fail(f"input_dim_idx {i}, output_dim_idx {o} or shape {shape} out of range")
    return x, i, o, shape


@register("fill_constant_batch_size_like", "cpu")
def fill_constant_batch_size_like(e):
    """The batch dim from Input's dims, or its number of sequences (a LoD Input's level
    0, for input_dim_idx 0); the other dims from `shape`."""
    x, i, o, shape = _batch_size_like(e)
    if x.lod is not None and i == 0:
        e.check(f"{x.lod_len} < 1", f"{e.op.type}: Input's LoD is empty")
        n = x.lod_len - 1
    else:
        n = x.dims[i]
    ctype = e.ctype_of(e.attr("dtype"))
    v = fill_value(e)
    out = e.output("Out", batch_shape([str(d) for d in shape], n, o), ctype,
                   lod_from=False)
    e.code(f"for (int64_t i = 0; i < {out.numel()}; ++i) {out}[i] = "
           f"{value_literal(e, v, ctype)};")


# --- random tensors: the op's Philox stream (runtime/philox.h, core/philox.py) -------------
def _random_fill(e, out, seed):
    """Fill float32 `out` as the op's kernel does, from its stream under `seed` (an int
    attribute; 0: the op's [key, run] state)."""
    state, stream = e.random_state()
    g = f"const fl::Philox g = fl::philox_for({int(seed)}LL, {state}, {stream}u);"
    if e.op.type.startswith("uniform_random"):
        if int(e.attr("diag_num")) > 0:
            e.fail("diag_num > 0")
        call = (f"fl::philox_uniform_f32(g, {out}, {out.numel()}, "
                f"{double_literal(e.attr('min'))}, {double_literal(e.attr('max'))});")
    else:
        call = (f"fl::philox_normal_f32(g, {out}, {out.numel()}, "
                f"{double_literal(e.attr('mean'))}, {double_literal(e.attr('std'))});")
    e.code(f"{{ {g} {call} }}")


@register("uniform_random", "cpu")
@register("gaussian_random", "cpu")
def random_tensor(e):
    """float32 of `shape` (ShapeTensor / ShapeTensorList where compiled code knows their
    values) drawn bit for bit as the kernel draws it."""
    if e.ctype_of(e.attr("dtype")) != "float":
        e.fail("compiled for float32 only")
    shape = known_ints(e, "ShapeTensor", "ShapeTensorList", list_first=False)
    if shape is None:
        shape = [int(d) for d in e.attr("shape")]
        if any(d < 0 for d in shape):
            e.fail(f"shape {shape} has unknown dims")
    out = e.output("Out", [str(d) for d in shape], "float")
    _random_fill(e, out, e.attr("seed"))


@register("uniform_random_batch_size_like", "cpu")
@register("gaussian_random_batch_size_like", "cpu")
def random_batch_size_like(e):
    """`shape` with its output_dim_idx dim Input's input_dim_idx dim, drawn as the plain
    random op draws."""
    if e.ctype_of(e.attr("dtype")) != "float":
        e.fail("compiled for float32 only")
    x, i, o, shape = _batch_size_like(e)
    out = e.output("Out", batch_shape([str(d) for d in shape], x.dims[i], o), "float",
                   lod_from=False)
    _random_fill(e, out, e.attr("seed"))


@register("assign_value", "cpu")
def assign_value(e):
    """Out = the values in the op's attributes, as the kernel makes them (run here, at
    generation time, on the checked attributes: its list choice, dtype conversion and
    reshape), written out as literal data: array_literal formats each number of the
    result in Out's C type, so no attribute text reaches the source; its dtype must be the
    declared one and its count at most MAX_LITERAL_ELEMENTS. Small integer values are
    known to later ops (known_values.py)."""
    ctype = e.ctype_of(e.attr("dtype"))
    attrs = {n: e.attr(n, nonfinite=True) for n in e.opdef.attrs}
    try:
        values = np.asarray(e.opdef.kernel(**attrs))
    except (ValueError, TypeError, OverflowError) as exc:
        e.fail(f"its values do not make a tensor: {exc}")
    data = array_literal(e, values, ctype)
    out = e.output("Out", [str(d) for d in values.shape], ctype, lod_from=False)
    if values.size:
        e.code(f"static const {ctype} vals[] = {data}; "
               f"std::memcpy({out}, vals, sizeof(vals));")
    if values.size <= 64 and ctype not in ("float", "double"):
        set_known_values(e, out, list(values.reshape(-1)))
