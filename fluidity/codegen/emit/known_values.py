"""Values generated code knows when it is generated.

Some small int tensors hold values known at build time: a `shape` op's output holds its
input's dims (C expressions), a `fill_constant`'s its constant, a slice of either a part of
them. An op that takes a shape, bounds or a range from such a tensor (fill_constant's
ShapeTensorList, slice's StartsTensor, range's Start/End/Step) then compiles with dims that
are C expressions, as an attribute would give them, where the tensor's values known only at
run time would leave the op to the interpreter. The values are recorded per Buf object, so
they hold for exactly the value that op made: a later write of the variable is a new Buf,
and a value read from outside the segment is unknown. A value is a Python int or numpy
scalar (a build-time constant) or a Dim (a size known only at run time); they live on the Buf
(`Buf.known`), so a lowering that rolls an op back drops them with it.
"""
import numpy as np

from ..dim import Dim, dim


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
    """A known value as a Dim, as the kernels' int() takes it (NotCompilable for a
    non-finite or huge constant)."""
    if isinstance(v, (Dim, str)):
        return dim(v)
    if not (np.isfinite(v) and abs(v) < 2 ** 62):
        e.fail(f"the constant {v} as an int")
    return Dim.lit(int(v))


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
