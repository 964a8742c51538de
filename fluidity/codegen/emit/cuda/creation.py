"""CUDA emitters of fill_constant and assign (runtime/cuda_ops.h fills and copies)."""
from .. import register
from ..literals import fill_value, value_literal


@register("fill_constant", "cuda")
def fill_constant(e):
    """A device fill of the attributes' shape and value (shape or value from tensors:
    no CUDA form)."""
    for slot in ("ValueTensor", "ShapeTensor", "ShapeTensorList"):
        if e.op.input(slot):
            e.fail(f"{slot} input")
    shape = [str(d) for d in e.attr("shape")]
    if any(int(d) < 0 for d in shape):
        e.fail(f"shape {shape} has unknown dims")
    ctype = e.ctype_of(e.attr("dtype"))
    const = fill_value(e)
    out = e.output("Out", shape, ctype)
    e.code(f"fl::cu::fill_value<{ctype}>({out}, {out.numel()}, "
           f"{value_literal(e, const, ctype)});")


@register("assign", "cuda")
def assign(e):
    x = e.input("X")
    if x.rows is not None:
        e.fail("a SelectedRows X")
    out = e.output("Out", x.dims, x.ctype)
    e.code(f"fl::cu::copy({x}, {out}, {x.numel()});")
