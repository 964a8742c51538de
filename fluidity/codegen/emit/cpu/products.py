"""C++ emitters of bilinear_tensor_product (ops/bilinear_products.py) and its gradient:
Out[b, k] = X[b] Weight[k] Y[b]^T (+ Bias[0, k]), float32, each sum of products in double
(numpy's einsum sums in float32 in an order of its own: within float rounding of this)."""
from .. import register
from ..checks import dense_only, same_dim


def _operands(e):
    """X [B, M], Y [B, N], Weight [K, M, N] (dims checked) and Bias (K values) or None."""
    x, y, w = e.input("X"), e.input("Y"), e.input("Weight")
    bias = e.input("Bias")
    e.require_float(x, y, w, bias)
    dense_only(e, x, y, w, bias)
    if x.ndim != 2 or y.ndim != 2 or w.ndim != 3:
        e.fail(f"X{x.dims}, Y{y.dims}, Weight{w.dims} are not [B, M], [B, N], [K, M, N]")
    same_dim(e, y.dims[0], x.dims[0], "Y has X's rows")
    same_dim(e, w.dims[1], x.dims[1], "Weight's dim 1 is X's width")
    same_dim(e, w.dims[2], y.dims[1], "Weight's dim 2 is Y's width")
    if bias is not None:
        same_dim(e, bias.numel(), w.dims[0], "Bias holds a value per output")
    return x, y, w, bias


_LOOPS = ("const int64_t B = {b}, K = {k}, M = {m}, N = {n}; ")


def _sizes(x, y, w):
    return _LOOPS.format(b=x.dims[0], k=w.dims[0], m=x.dims[1], n=y.dims[1])


@register("bilinear_tensor_product", "cpu")
def bilinear_tensor_product(e):
    x, y, w, bias = _operands(e)
    out = e.output("Out", [x.dims[0], w.dims[0]])
    add = f" + {bias}[k]" if bias is not None else ""
    e.code(f"{{ {_sizes(x, y, w)}for (int64_t b = 0; b < B; ++b) for (int64_t k = 0; k < K; "
           f"++k) {{ double v = 0.0; for (int64_t i = 0; i < M; ++i) {{ double t = 0.0; "
           f"for (int64_t j = 0; j < N; ++j) t += (double){w}[(k * M + i) * N + j] * "
           f"{y}[b * N + j]; v += (double){x}[b * M + i] * t; }} {out}[b * K + k] = "
           f"(float)v{add}; }} }}")


@register("bilinear_tensor_product_grad", "cpu")
def bilinear_tensor_product_grad(e):
    """dX[b, m] = sum_k,n d[b, k] W[k, m, n] Y[b, n]; dY likewise with X; dW[k, m, n] =
    sum_b d[b, k] X[b, m] Y[b, n]; dBias = the column sums of d (row by row, numpy's)."""
    x, y, w, bias = _operands(e)
    d = e.input("Out@GRAD")
    e.require_float(d)
    dense_only(e, d)
    if d.ndim != 2:
        e.fail(f"Out@GRAD{d.dims} is not [B, K]")
    same_dim(e, d.dims[0], x.dims[0], "Out@GRAD has X's rows")
    same_dim(e, d.dims[1], w.dims[0], "Out@GRAD has Weight's outputs")
    sizes = _sizes(x, y, w)
    at = "(k * M + i) * N + j"
    if e.has_output("X@GRAD"):
        g = e.output("X@GRAD", x.dims)
        e.code(f"{{ {sizes}for (int64_t b = 0; b < B; ++b) for (int64_t i = 0; i < M; ++i) "
               f"{{ double v = 0.0; for (int64_t k = 0; k < K; ++k) for (int64_t j = 0; "
               f"j < N; ++j) v += (double){d}[b * K + k] * {w}[{at}] * {y}[b * N + j]; "
               f"{g}[b * M + i] = (float)v; }} }}")
    if e.has_output("Y@GRAD"):
        g = e.output("Y@GRAD", y.dims)
        e.code(f"{{ {sizes}for (int64_t b = 0; b < B; ++b) for (int64_t j = 0; j < N; ++j) "
               f"{{ double v = 0.0; for (int64_t k = 0; k < K; ++k) for (int64_t i = 0; "
               f"i < M; ++i) v += (double){d}[b * K + k] * {w}[{at}] * {x}[b * M + i]; "
               f"{g}[b * N + j] = (float)v; }} }}")
    if e.has_output("Weight@GRAD"):
        g = e.output("Weight@GRAD", w.dims, lod_from=False)
        e.code(f"{{ {sizes}for (int64_t k = 0; k < K; ++k) for (int64_t i = 0; i < M; ++i) "
               f"for (int64_t j = 0; j < N; ++j) {{ double v = 0.0; for (int64_t b = 0; "
               f"b < B; ++b) v += (double){d}[b * K + k] * {x}[b * M + i] * "
               f"{y}[b * N + j]; {g}[{at}] = (float)v; }} }}")
    if e.has_output("Bias@GRAD") and bias is not None:
        g = e.output("Bias@GRAD", ["1", w.dims[0]], lod_from=False)
        e.code(f"{{ {sizes}for (int64_t k = 0; k < K; ++k) {g}[k] = 0.0f; for (int64_t b = 0; "
               f"b < B; ++b) for (int64_t k = 0; k < K; ++k) {g}[k] += {d}[b * K + k]; }}")
