"""Python values as C literals the way the numpy kernels see them: a float attribute in
float32 arithmetic, a double, a value np.full stores in a dtype, a list of ints."""
import math
import numpy as np

from ...core import dtypes
from ...ops.creation import fill_constant_value
from ..dim import Dim

# the numpy type of each C type generated code has (cir.CTYPES' values)
NUMPY_OF_CTYPE = {c: dtypes.numpy_of_ctype(c).type for c in dtypes.C_TYPES.values()}


def f32(v):
    """Python number `v` as the float32 numpy makes of it in float32 arithmetic (a weak
    scalar: the double, rounded once)."""
    return f"((float){float(v)!r})" if v == v and abs(v) != float("inf") else \
        ("NAN" if v != v else ("INFINITY" if v > 0 else "-INFINITY"))


def double_literal(v):
    """A Python number as a C double literal (numpy's float64 scalars in a kernel)."""
    v = float(v)
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "-INFINITY"
    return repr(v)


def fill_value(e):
    """The constant of a fill op's attributes, as its kernel takes it: `str_value` parsed as
    float() parses it when set (so "inf" and "-inf" too), else `value` (inf and nan kept:
    value_literal formats them); NotCompilable for text that is no number (the kernel then
    names it)."""
    text = e.attr("str_value")
    if text:
        try:
            return fill_constant_value(text, None, dtypes.to_numpy(e.attr("dtype")).kind in "iu")
        except ValueError:
            e.fail(f"str_value {text[:40]!r} is not a number")
    return e.attr("value", nonfinite=True)


def value_literal(e, value, ctype):
    """`value` (a Python number) as what numpy's np.full(..., value, dtype) stores, in C:
    NotCompilable where C's conversion is undefined (a non-finite or out-of-range value into
    an integer type)."""
    if isinstance(value, int) and ctype in ("int64_t", "int32_t", "uint8_t", "int8_t"):
        info = np.iinfo({"int64_t": np.int64, "int32_t": np.int32, "uint8_t": np.uint8,
                         "int8_t": np.int8}[ctype])
        if not info.min <= value <= info.max:
            e.fail(f"value {value} is out of range of {ctype}")
        return f"({ctype})({value}LL)"
    v = float(value)
    if ctype in ("float", "double"):
        return f"({ctype})({double_literal(v)})"
    if ctype == "bool":
        return "true" if v != 0 else "false"
    if not math.isfinite(v):
        e.fail(f"value {v} has no {ctype} value")
    info = np.iinfo({"int64_t": np.int64, "int32_t": np.int32, "uint8_t": np.uint8,
                     "int8_t": np.int8}[ctype])
    if not info.min <= math.trunc(v) <= info.max:
        e.fail(f"value {v} is out of range of {ctype}")
    return f"({ctype})({int(math.trunc(v))}LL)"


def c_ints(values):
    """A C initializer list of `values`."""
    return "{" + ", ".join(str(v) for v in values) + "}"


def lit_int(x):
    """A size's value when it is an integer literal (a literal Dim, an int, or its text),
    else None."""
    if isinstance(x, Dim):
        return x.value
    s = str(x).strip()
    if s.startswith("(") and s.endswith(")") and s.count("(") == 1:
        s = s[1:-1].strip()
    return int(s) if s.lstrip("-").isdigit() else None


# the most elements an op's attributes may put into generated code as literal data
# (assign_value's values): more runs interpreted
MAX_LITERAL_ELEMENTS = 1 << 14

_INT_CTYPES = {"int64_t": np.int64, "int32_t": np.int32, "uint8_t": np.uint8,
               "int8_t": np.int8}


def _element_literal(v, ctype):
    """One numpy value of `ctype`'s dtype as C text: formatted from the number itself, so
    no text of a model reaches the source."""
    if ctype == "bool":
        return "true" if bool(v) else "false"
    if ctype in ("float", "double"):
        return double_literal(float(v))     # a float32's double is exact: (float) keeps it
    n = int(v)
    if n == np.iinfo(np.int64).min:         # -9223372036854775808LL is no C literal
        return "(-9223372036854775807LL - 1)"
    return f"{n}LL" if ctype == "int64_t" else str(n)


def array_literal(e, values, ctype, limit=MAX_LITERAL_ELEMENTS):
    """C initializer list of numpy array `values` as C type `ctype` holds them: refused
    (NotCompilable) unless `values` already has ctype's dtype (the caller converts as the
    kernel does) and at most `limit` elements (MAX_LITERAL_ELEMENTS unless the caller
    bounds its data otherwise)."""
    want = NUMPY_OF_CTYPE.get(ctype)
    values = np.asarray(values)
    if want is None or values.dtype != np.dtype(want):
        e.fail(f"literal data of dtype {values.dtype} for {ctype}")
    if values.size > limit:
        e.fail(f"{values.size} literal values (at most {limit} compile)")
    return "{" + ", ".join(_element_literal(v, ctype) for v in values.reshape(-1)) + "}"
