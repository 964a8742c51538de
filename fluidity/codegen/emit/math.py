"""What both targets' emitters of the arithmetic ops share: mul's and fc's gemm, sum's,
mul_grad's and fc_grad's operands, matmul's geometry."""



def emit_mul(e, gemm):
    """Out = flatten(X) @ flatten(Y) by `gemm` ("fl::gemm" on the CPU, "fl::cu::gemm" on the
    device: one signature, runtime/fluidity.h and runtime/cuda_rt.h)."""
    x, y = e.input("X"), e.input("Y")
    e.require_float(x, y)
    xn, yn = e.attr("x_num_col_dims"), e.attr("y_num_col_dims")
    m, k, k2, n = (e.prod(x.dims[:xn]), e.prod(x.dims[xn:]), e.prod(y.dims[:yn]),
                   e.prod(y.dims[yn:]))
    if k != k2:
        if e.is_lit(k) and e.is_lit(k2):
            e.fail(f"X has {k} columns, Y {k2} rows")
        e.check(f"{k} != {k2}", "mul: X's columns differ from Y's rows")
    out = e.output("Out", x.dims[:xn] + y.dims[yn:])
    e.code(f"{gemm}(false, false, {m}, {n}, {k}, 1.0f, {x}, {k}, {y}, {n}, 0.0f, "
           f"{out}, {n});")


def sum_inputs(e):
    """sum's X buffers, every one present."""
    xs = e.inputs("X")
    if not xs or any(b is None for b in xs):
        e.fail("an input is absent")
    return xs


def mul_grad_operands(e):
    """mul_grad's X, Y, Out@GRAD and its gemm sizes m, k, n (X is [m, k], Y [k, n])."""
    x, y, d = e.input("X"), e.input("Y"), e.input("Out@GRAD")
    e.require_float(x, y, d)
    xn, yn = e.attr("x_num_col_dims"), e.attr("y_num_col_dims")
    return x, y, d, e.prod(x.dims[:xn]), e.prod(x.dims[xn:]), e.prod(y.dims[yn:])


def emit_fc_gemm(e, gemm):
    """fc's checks and its Out = flatten(Input) @ W by `gemm` ("fl::gemm" or the device's
    "fl::cu::gemm", one signature) for both targets. Returns Out, its rows m and columns,
    Bias (or None) and whether relu follows."""
    if e.attr("padding_weights"):
        e.fail("padded weights")
    x, w, b = e.input("Input"), e.input("W"), e.input("Bias")
    e.require_float(x, w, b)
    n = e.attr("in_num_col_dims")
    m, k, k2, width = e.prod(x.dims[:n]), e.prod(x.dims[n:]), w.dims[0], w.dims[1]
    if k != k2:
        if e.is_lit(k) and e.is_lit(k2):
            e.fail(f"Input has {k} columns, W {k2} rows")
        e.check(f"{k} != {k2}", "fc: Input's columns differ from W's rows")
    out = e.output("Out", x.dims[:n] + [width])
    e.code(f"{gemm}(false, false, {m}, {width}, {k}, 1.0f, {x}, {k}, {w}, {width}, 0.0f, "
           f"{out}, {width});")
    return out, m, width, b, e.attr("activation_type") == "relu"


def fc_grad_operands(e):
    """fc_grad's Input, W, Bias, Out, Out@GRAD and its gemm sizes m, k and width (Input is
    [m, k], W [k, width])."""
    if e.attr("padding_weights"):
        e.fail("padded weights")
    x, w, b, out, dout = (e.input("Input"), e.input("W"), e.input("Bias"), e.input("Out"),
                          e.input("Out@GRAD"))
    e.require_float(x, w, b, out, dout)
    n = e.attr("in_num_col_dims")
    return x, w, b, out, dout, e.prod(x.dims[:n]), e.prod(x.dims[n:]), w.dims[1]


