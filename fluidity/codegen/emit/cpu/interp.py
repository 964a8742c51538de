"""C++ emitters of Fluid 1.x's resize ops (ops/interp.py): bilinear_interp, nearest_interp,
bicubic_interp and their gradients, 4-D float X, NCHW or NHWC.

They share nn.py's InterpPlan (per output row the taps of the kernel's interpolation matrix,
tabulated when compiling) and differ from the _v2 ops only in how the output size and the
matrices are made: Fluid 1.x's rule (ops/interp.py's out_size and maps). An output size from
OutSize, SizeTensor or Scale compiles only where the segment knows the tensor's values when
it is generated (a fill_constant before it: known_values.py); else the op runs interpreted.
"""
import numpy as np

from ....errors import ShapeError
from ....ops import interp as interp_ops
from ...dim import Dim
from .. import register
from ..known_values import known_values
from .nn import InterpPlan, emit_resize, emit_resize_grad

# the most output positions per axis the tables are written for: a model's out_h past it
# would make the generated source (and the compiler's memory) grow without bound
MAX_OUT = 1 << 16


def _literal_values(e, buf, slot):
    """The values of input `buf` as Python numbers, or NotCompilable when the segment does
    not know them all as constants when it is generated."""
    vals = known_values(e, buf)
    if vals is None or any(isinstance(v, (Dim, str)) for v in vals):
        e.fail(f"{slot} '{buf.var}' holds values known only at run time")
    return np.asarray(vals)


def size_inputs(e):
    """(OutSize, SizeTensor list, Scale) as ops/interp.py's out_size takes them: None (or
    []) where the op has none, else their compile-time values."""
    out_size = e.input("OutSize")
    out_size = None if out_size is None else _literal_values(e, out_size, "OutSize")
    sizes = [_literal_values(e, b, "SizeTensor") for b in e.inputs("SizeTensor")]
    scale = e.input("Scale")
    scale = None if scale is None else _literal_values(e, scale, "Scale")
    for name, v in (("OutSize", out_size), ("Scale", scale), *(("SizeTensor", s)
                                                               for s in sizes)):
        if v is not None and v.size == 0:
            e.fail(f"{name} is empty")
    return out_size, sizes, scale


class FluidInterpPlan(InterpPlan):
    """InterpPlan with Fluid 1.x's size rule and matrices (align_corners, align_mode as
    ops/interp.py reads them)."""

    def matrices(self, e, fwd):
        ins = [self.h, self.w]
        outs = interp_ops.out_size(e.attrs, ins, *size_inputs(e))
        if max(outs) > MAX_OUT:
            e.fail(f"an output size {outs} past {MAX_OUT}")
        return interp_ops.maps(e.attrs, ins, outs, np.dtype(np.float32))


def _plan(e, x):
    try:
        interp_ops.check_method(e.attr("interp_method"), x.ndim, e.op.type)
    except ShapeError as err:
        e.fail(str(err))
    return FluidInterpPlan(e, None, x)


@register("bilinear_interp", "cpu")
@register("nearest_interp", "cpu")
@register("bicubic_interp", "cpu")
def interp(e):
    x = e.input("X")
    emit_resize(e, x, _plan(e, x))


@register("bilinear_interp_grad", "cpu")
@register("nearest_interp_grad", "cpu")
@register("bicubic_interp_grad", "cpu")
def interp_grad(e):
    x = e.input("X")
    emit_resize_grad(e, x, _plan(e, x))
