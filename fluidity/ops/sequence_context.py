"""Ops that give each step of a sequence its context in time, over LoD sequences (or a padded
batch [B, T, D]): add_position_encoding (where the step is: sinusoids of its position, as in
the Transformer) and row_conv (what the next steps hold: DeepSpeech 2's lookahead
convolution), with their gradients. Positions count within each sequence.
"""
import numpy as np

from ..core.tensor import LoDTensor
from ..errors import ExecutionError, ShapeError
from .registry import In, OpDef, Out


def _position_table(t, d):
    """[t, d] sinusoids of Paddle 1.8's kernel: for k < d/2, angle j / 10000^(k / (d/2 - 1))
    (j / 10000 when d/2 is 1); sin in the first half, cos in the second."""
    half = d // 2
    pos = np.arange(t, dtype=np.float64)[:, None]
    denom = np.power(10000.0, np.arange(half) / (half - 1)) if half > 1 else np.full(1, 1e4)
    val = pos / denom[None, :]
    table = np.zeros((t, d))
    table[:, :half] = np.sin(val)
    table[:, half:2 * half] = np.cos(val)
    return table


class AddPositionEncoding(OpDef):
    type = "add_position_encoding"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    attrs = {"alpha": 1.0, "beta": 1.0}
    kind = "value"
    share_lod = None
    doc = ("Out = alpha * X + beta * PE for X [B, T, D], or a sequence batch [N, D] with one "
           "LoD level (positions counted within each sequence): PE[t, j] = sin(t / "
           "10000^(j / (D/2 - 1))) for j < D/2, the cos of the same for the second half.")

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        lod = ctx.input_lod_level("X")
        if len(xs) != (2 if lod else 3):
            ctx.fail("X must be 3-D [batch, length, size], or 2-D [rows, size] with a LoD")
        if xs[-1] >= 0 and xs[-1] % 2:
            ctx.fail(f"X's size {xs[-1]} must be even")
        ctx.share("X", "Out")

    @staticmethod
    def kernel(x, *, alpha, beta):
        a = x._array
        if a.shape[-1] % 2:
            raise ShapeError(f"add_position_encoding: X's size {a.shape[-1]} must be even")
        if not x._lod:
            if a.ndim != 3:
                raise ShapeError(f"add_position_encoding: X without a LoD must be 3-D, got "
                                 f"{list(a.shape)}")
            pe = _position_table(a.shape[1], a.shape[2])[None]
        else:
            if a.ndim != 2 or len(x._lod) != 1:
                raise ShapeError(f"add_position_encoding: X with a LoD must be 2-D with one "
                                 f"level, got {list(a.shape)} with {len(x._lod)} levels")
            off = np.asarray(x._lod[0], np.int64)
            pos = np.arange(a.shape[0]) - np.repeat(off[:-1], np.diff(off))
            pe = _position_table(int(pos.max()) + 1 if pos.size else 0, a.shape[1])[pos]
        return LoDTensor((alpha * a + beta * pe).astype(a.dtype), x._lod)

    grad = staticmethod(lambda g: g.op(
        "add_position_encoding_grad", {"Out@GRAD": g.output_grad("Out")},
        {"X@GRAD": g.input_grad("X")}, g.attrs()))


class AddPositionEncodingGrad(OpDef):
    type = "add_position_encoding_grad"
    inputs = (In("Out@GRAD"),)
    outputs = (Out("X@GRAD"),)
    attrs = AddPositionEncoding.attrs
    infer_shape = None

    @staticmethod
    def kernel(d, *, alpha):
        return (alpha * d).astype(d.dtype)


def _sequences(x):
    """[(start, end)] of the sequences of LoDTensor x: its last LoD level, or each row of a
    padded [B, T, D] tensor (as one sequence of T steps)."""
    if x._lod:
        offs = x._lod[-1]
        return [(offs[i], offs[i + 1]) for i in range(len(offs) - 1)], x._array
    a = x._array
    if a.ndim != 3:
        raise ExecutionError("row_conv: X needs LoD, or the padded shape [batch, time, dim]")
    t = a.shape[1]
    return [(b * t, (b + 1) * t) for b in range(a.shape[0])], a.reshape(-1, a.shape[2])


class RowConv(OpDef):
    type = "row_conv"
    kind = "value"
    inputs = (In("X"), In("Filter"))
    outputs = (Out("Out"),)
    doc = ("Lookahead convolution (DeepSpeech 2): Out[t] = sum_i X[t + i] * Filter[i] over "
           "i < future_context_size + 1, within each sequence.")

    @staticmethod
    def infer_shape(ctx):
        ctx.share("X", "Out")

    @staticmethod
    def kernel(x, f):
        seqs, a = _sequences(x)
        w = f._array
        out = np.zeros_like(a)
        for s, e in seqs:
            for i in range(min(len(w), e - s)):
                out[s:e - i] += a[s + i:e] * w[i]
        return LoDTensor(out.reshape(x._array.shape), x._lod)


    grad = staticmethod(lambda g: g.op(
        "row_conv_grad", {"X": g.input("X"), "Filter": g.input("Filter"),
                          "Out@GRAD": g.output_grad("Out")},
        {"X@GRAD": g.input_grad("X"), "Filter@GRAD": g.input_grad("Filter")}))


class RowConvGrad(OpDef):
    type = "row_conv_grad"
    kind = "value"
    inputs = (In("X"), In("Filter"), In("Out@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True), Out("Filter@GRAD", dispensable=True))
    infer_shape = None

    @staticmethod
    def kernel(x, f, dout):
        seqs, a = _sequences(x)
        w = f._array
        d = dout._array.reshape(a.shape)
        dx, dw = np.zeros_like(a), np.zeros_like(w)
        for s, e in seqs:
            for i in range(min(len(w), e - s)):
                dx[s + i:e] += d[s:e - i] * w[i]
                dw[i] += (d[s:e - i] * a[s + i:e]).sum(axis=0)
        return LoDTensor(dx.reshape(x._array.shape), x._lod), LoDTensor(dw)
