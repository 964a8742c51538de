"""CUDA emitters of the arithmetic ops: scale, mul, sum, mean, fc and their gradients
(cuBLAS gemms, runtime/cuda_ops.h kernels; reductions one thread each, in the C++ target's
order)."""
from .. import register
from ..math import emit_fc_gemm, emit_mul, fc_grad_operands, mul_grad_operands, sum_inputs

_FORMS = {(True, True): "fl::cu::SCALE_THEN_BIAS", (True, False): "fl::cu::SCALE_ONLY",
          (False, True): "fl::cu::BIAS_THEN_SCALE", (False, False): "fl::cu::BIAS_THEN_SCALE"}


@register("scale", "cuda")
def scale(e):
    """The C++ target's arithmetic (float32 in float32, others in double and back)."""
    if e.op.input("ScaleTensor"):
        e.fail("the scale comes from a tensor")
    x = e.input("X")
    if x.ctype == "bool":
        e.fail("X is bool")
    s, b = float(e.attr("scale")), float(e.attr("bias"))
    if x.ctype == "float":
        a, s, b = "float", e.literal(s), e.literal(b)
    else:
        a, s, b = "double", repr(s), repr(b)
    out = e.output("Out", x.dims, x.ctype)
    form = _FORMS[(bool(e.attr("bias_after_scale")), bool(float(e.attr("bias"))))]
    e.code(f"fl::cu::scale<{x.ctype}, {a}>({x}, {out}, {x.numel()}, {s}, {b}, {form});")


@register("mul", "cuda")
def mul(e):
    return emit_mul(e, "fl::cu::gemm")


@register("sum", "cuda")
def sum_(e):
    """Same-shaped float inputs added left to right."""
    xs = sum_inputs(e)
    if any(b.rows is not None for b in xs):
        e.fail("SelectedRows inputs")
    e.require_float(*xs)
    for b in xs[1:]:
        e.same_dims(xs[0], b)
    out = e.output("Out", xs[0].dims, lod_from=xs[0])
    ptrs = ", ".join(str(b) for b in xs)
    e.code(f"fl::cu::add_n<{len(xs)}>({out}, {xs[0].numel()}, "
           f"fl::cu::Ptrs<{len(xs)}>{{{{{ptrs}}}}});")


@register("mean", "cuda")
def mean(e):
    """One device thread sums pairwise, as numpy: the same bits as the CPU (a loss is
    one number; its batch is small next to the matmuls before it)."""
    x = e.input("X")
    e.require_float(x)
    out = e.output("Out", [])
    e.code(f"fl::cu::mean({x}, {out}, {x.numel()});")


@register("mul_grad", "cuda")
def mul_grad(e):
    """dX = dOut @ Y^T and dY = X^T @ dOut, two device gemms (no fused update)."""
    x, y, d, m, k, n = mul_grad_operands(e)
    if e.has_output("X@GRAD"):
        dx = e.output("X@GRAD", x.dims, lod_from=x)
        e.code(f"fl::cu::gemm(false, true, {m}, {k}, {n}, 1.0f, {d}, {n}, {y}, {n}, 0.0f, "
               f"{dx}, {k});")
    if e.has_output("Y@GRAD"):
        dy = e.output("Y@GRAD", y.dims, lod_from=y)
        e.code(f"fl::cu::gemm(true, false, {k}, {n}, {m}, 1.0f, {x}, {k}, {d}, {n}, 0.0f, "
               f"{dy}, {n});")


@register("fc", "cuda")
def fc(e):
    """A device gemm, then bias and relu in one kernel over Out."""
    out, m, width, b, relu = emit_fc_gemm(e, "fl::cu::gemm")
    if b is not None or relu:
        e.code(f"fl::cu::bias_relu({out}, {b if b is not None else 'nullptr'}, {m}, {width}, "
               f"{'true' if relu else 'false'});")


@register("fc_grad", "cuda")
def fc_grad(e):
    """relu's mask into scratch, two device gemms, the bias gradient one thread per
    column summing rows in order (the C++ target's order)."""
    x, w, b, out, dout, m, k, width = fc_grad_operands(e)
    d = dout
    if e.attr("activation_type") == "relu":
        d = e.scratch([m, width])
        e.code(f"fl::cu::relu_mask({dout}, {out}, {d}, {e.mul(m, width)});")
    if e.has_output("Input@GRAD"):
        dx = e.output("Input@GRAD", x.dims, lod_from=x)
        e.code(f"fl::cu::gemm(false, true, {m}, {k}, {width}, 1.0f, {d}, {width}, {w}, "
               f"{width}, 0.0f, {dx}, {k});")
    if e.has_output("W@GRAD"):
        dw = e.output("W@GRAD", w.dims)
        e.code(f"fl::cu::gemm(true, false, {k}, {width}, {m}, 1.0f, {x}, {k}, {d}, {width}, "
               f"0.0f, {dw}, {width});")
    if e.has_output("Bias@GRAD") and b is not None:
        db = e.output("Bias@GRAD", b.dims)
        e.code(f"fl::cu::column_sums({d}, {db}, {m}, {width});")


@register("mean_grad", "cuda")
def mean_grad(e):
    x, d = e.input("X"), e.input("Out@GRAD")
    e.require_float(x, d)
    dx = e.output("X@GRAD", x.dims, lod_from=x)
    e.code(f"fl::cu::mean_grad({d}, {dx}, {x.numel()});")
