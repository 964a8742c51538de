"""Helpers the op emitters of reduce.py, creation.py, shape_ops.py, indexing.py, tensor.py,
activation.py, logic.py and norm.py share (ops import nothing from fluidity.codegen: these work
on the emitter's context `e`, cir.Emit).

*Known values.* Some small int tensors hold values generated code knows when it is generated:
a `shape` op's output holds its input's dims (C expressions), a `fill_constant`'s its
constant, a slice of either a part of them. An op that takes a shape, bounds or a range from
such a tensor (fill_constant's ShapeTensorList, slice's StartsTensor, range's Start/End/Step)
then compiles with dims that are C expressions, as an attribute would give them, where the
tensor's values known only at run time would leave the op to the interpreter. The values
are recorded per Buf object, so they hold for exactly the value that op made: a later write
of the variable is a new Buf, and a value read from outside the segment is unknown. A value
is a Python int or numpy scalar (a build-time constant) or a str (a C expression of dims);
they live on the Buf (`Buf.known`), so a lowering that rolls an op back drops them with it.
"""
import math

import numpy as np

from ..core import dtypes

# the numpy type of each C type generated code has (cir.CTYPES' values)
NUMPY_OF_CTYPE = {c: dtypes.numpy_of_ctype(c).type for c in dtypes.C_TYPES.values()}

def set_known_values(e, buf, values):
    """Record that `buf` (an output this op just made) holds `values` (flat, C order). Not
    for a persistable updated in place (its memory changes under the same Buf)."""
    if buf is None or buf.persistable or buf.kind in ("input", "inout"):
        return
    buf.known = list(values)


def known_values(e, buf):
    """The values `buf` holds as set_known_values recorded them, or None."""
    return None if buf is None or buf.known is None else list(buf.known)


def c_value(e, v):
    """A known value as a C integer expression, as the kernels' int() takes it
    (NotCompilable for a non-finite or huge constant)."""
    if isinstance(v, str):
        return v
    if not (np.isfinite(v) and abs(v) < 2 ** 62):
        e.fail(f"the constant {v} as an int")
    return str(int(v))


def known_ints(e, tensor_slot, list_slot, list_first=True):
    """The ints an op takes from a 1-D tensor or a list of [1] tensors (ops/common.py's
    ints_from takes the list first; fill_constant's _shape_from the tensor), as C
    expressions; None when neither input is given. NotCompilable when their values are
    known only at run time."""
    if not list_first and tensor_slot and e.op.input(tensor_slot):
        return known_ints(e, tensor_slot, None)
    if list_slot and e.op.input(list_slot):
        out = []
        for b in e.inputs(list_slot):
            vals = known_values(e, b)
            if vals is None or len(vals) < 1:
                e.fail(f"{list_slot} '{b.var}' holds values known only at run time")
            out.append(c_value(e, vals[0]))
        return out
    if tensor_slot and e.op.input(tensor_slot):
        b = e.input(tensor_slot)
        vals = known_values(e, b)
        if vals is None:
            e.fail(f"{tensor_slot} '{b.var}' holds values known only at run time")
        return [c_value(e, v) for v in vals]
    return None


def lit_int(x):
    """A C expression's value when it is an integer literal, else None."""
    s = str(x).strip()
    if s.startswith("(") and s.endswith(")") and s.count("(") == 1:
        s = s[1:-1].strip()
    return int(s) if s.lstrip("-").isdigit() else None


# --- literals and loops ----------------------------------------------------------------------
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
            return float(text)
        except ValueError:
            e.fail(f"str_value {text[:40]!r} is not a number")
    return e.attr("value", nonfinite=True)


def value_literal(e, value, ctype):
    """`value` (a Python number) as what numpy's np.full(..., value, dtype) stores, in C:
    NotCompilable where C's conversion is undefined (a non-finite or out-of-range value into
    an integer type)."""
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


def elementwise(e, expr, out_slot, ins, like):
    """Out = `expr` element by element over Bufs `ins` ({C name: Buf}, all of `like`'s dims,
    float32), each element loaded as `const float name = buf[i]`."""
    dense_only(e, *ins.values())
    e.require_float(*ins.values())
    for b in ins.values():
        if b is not like:
            e.same_dims(like, b)
    out = e.output(out_slot, like.dims)
    loads = " ".join(f"const float {k} = {b}[i];" for k, b in ins.items())
    e.code(f"for (int64_t i = 0; i < {like.numel()}; ++i) {{ {loads} {out}[i] = {expr}; }}")
    return out


def dense_only(e, *bufs):
    """NotCompilable for a SelectedRows input (its Buf holds the rows, the kernel a dense
    tensor)."""
    for b in bufs:
        if b is not None and b.rows is not None:
            e.fail(f"{b.var} is SelectedRows")


def c_ints(values):
    return "{" + ", ".join(str(v) for v in values) + "}"
