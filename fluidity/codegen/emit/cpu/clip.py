"""C++ emitters of the ops gradient clipping builds on (ops/optimizer_ops.py):
squared_l2_norm (+ _grad), which GradientClipByGlobalNorm sums over the gradients, and
clip_by_norm (GradientClipByNorm), dense X only (a SelectedRows gradient runs interpreted),
in the kernels' arithmetic."""
from .. import register
from ..literals import double_literal
from .optimizer import l2_norm


def _dense_float(e, slot):
    x = e.input(slot)
    if x.rows is not None:
        e.fail(f"a SelectedRows {slot}")
    e.require_float(x)
    return x


@register("squared_l2_norm", "cpu")
def squared_l2_norm(e):
    """The squares in float32, summed pairwise in float32 (numpy's np.sum(np.square(x)))."""
    x = _dense_float(e, "X")
    n = x.numel()
    sq, out = e.scratch([n]), e.output("Out", ["1"])
    e.code(f"for (int64_t i = 0; i < {n}; ++i) {sq}[i] = {x}[i] * {x}[i]; "
           f"{out}[0] = fl::pairwise_sum({sq}, {n}, 1);")


@register("squared_l2_norm_grad", "cpu")
def squared_l2_norm_grad(e):
    x, dout = _dense_float(e, "X"), _dense_float(e, "Out@GRAD")
    e.check(f"{dout.numel()} < 1", "squared_l2_norm_grad: Out@GRAD holds no value")
    dx = e.output("X@GRAD", x.dims, lod_from=False)
    e.code(f"const float k = 2.0f * {dout}[0]; "
           f"for (int64_t i = 0; i < {x.numel()}; ++i) {dx}[i] = k * {x}[i];")


@register("clip_by_norm", "cpu")
def clip_by_norm(e):
    """The norm in double (squares in double, numpy's pairwise sum); X scaled by
    max_norm / norm rounded to float32 when the norm exceeds max_norm, else copied."""
    x = _dense_float(e, "X")
    n, max_norm = x.numel(), double_literal(e.attr("max_norm"))
    out = e.output("Out", x.dims)
    l2_norm(e, x, n, "norm")
    e.code(f"if (norm > {max_norm}) {{ const float k = (float)({max_norm} / norm); "
           f"for (int64_t i = 0; i < {n}; ++i) {out}[i] = {x}[i] * k; }} "
           f"else std::memcpy({out}, {x}, sizeof(float) * {n});")
