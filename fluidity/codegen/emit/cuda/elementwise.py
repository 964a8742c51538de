"""The elementwise table (emit/elementwise.py) rendered as device kernels: one thread per
element (fl::cu::each over the row's expression), Y broadcast over one contiguous run of X's
dims (pre, n, post)."""
from .. import register
from ..elementwise import BINARY_GRADS, operands, ROWS


def elementwise(e, row):
    """Out = the row's expression, one thread per element."""
    ins, x, y, out_type, body = operands(e, row)
    out = e.output(e.opdef.outputs[0].name, x.dims, out_type)
    if y is not None and y.dims != x.dims:
        pre, n, post = e.span(x, y)
        loads = f"const {x.ctype} x = {x}[i]; const {y.ctype} y = {y}[(i / {post}) % {n}];"
    else:
        for b in ins.values():
            if b is not x:
                e.same_dims(x, b)
        loads = " ".join(f"const {b.ctype} {k} = {b}[i];" for k, b in ins.items())
    e.code(f"fl::cu::each({x.numel()}, [=] __device__ (int64_t i) {{ {loads} "
           f"{out}[i] = {body}; }});")


def binary_grad(e, c_dx, c_dy):
    """dX, dY of an elementwise binary op from the table's forms: dX one thread per
    element; a broadcast Y's dY one thread per element of Y summing over the rest in the
    order the C++ target's loops add (rows first), so both round alike."""
    x, y, d = e.input("X"), e.input("Y"), e.input("Out@GRAD")
    o = e.input("Out") if e.op.input("Out") else None
    e.require_float(x, y, d, o)
    same = y.dims == x.dims
    pre, n, post = ("1", x.numel(), "1") if same else e.span(x, y)
    e.same_dims(x, d)
    load_o = f" const float o = {o}[i];" if o is not None else ""
    if e.has_output("X@GRAD"):
        dx = e.output("X@GRAD", x.dims, lod_from=x)
        e.code(f"fl::cu::each({x.numel()}, [=] __device__ (int64_t i) {{ const int64_t j = "
               f"(i / {post}) % {n}; const float x = {x}[i]; const float y = {y}[j]; "
               f"const float d = {d}[i];{load_o} {dx}[i] = {c_dx}; }});")
    if e.has_output("Y@GRAD"):
        dy = e.output("Y@GRAD", y.dims, lod_from=y)
        if same:
            e.code(f"fl::cu::each({x.numel()}, [=] __device__ (int64_t i) {{ const float x = "
                   f"{x}[i]; const float y = {y}[i]; const float d = {d}[i];{load_o} "
                   f"{dy}[i] = {c_dy}; }});")
        else:
            e.code(f"fl::cu::each({n}, [=] __device__ (int64_t j) {{ const float y = {y}[j]; "
                   f"float acc = 0.0f; for (int64_t p = 0; p < {pre}; ++p) for (int64_t q = 0; "
                   f"q < {post}; ++q) {{ const int64_t i = (p * {n} + j) * {post} + q; "
                   f"const float x = {x}[i]; const float d = {d}[i];{load_o} acc += {c_dy}; }} "
                   f"{dy}[j] = acc; }});")


for _type, _row in ROWS.items():
    register(_type, "cuda")(lambda e, row=_row: elementwise(e, row))
for _type, (_dx, _dy) in BINARY_GRADS.items():
    register(_type + "_grad", "cuda")(lambda e, dx=_dx, dy=_dy: binary_grad(e, dx, dy))
