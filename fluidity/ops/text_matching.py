"""Text-matching ops of Baidu's search models in Fluid 1.8 (contrib): match_matrix_tensor
(per pair of sequences x_b [lx, h], y_b [ly, h], the dim_t bilinear similarity maps
x_b W_t y_b^T) and var_conv_2d (a 2-D convolution over per-sample images of varying size,
each stored flat in a LoD segment, sized by the ROW and COLUMN sequences' lengths), with
their gradients, as Fluid 1.8 lays out and computes them.

Both write their results flat, as Paddle does: one [total, 1] column whose LoD marks each
sample's piece (match_matrix_tensor: [dim_t, lx, ly]; var_conv_2d: [OutputChannel,
out_h, out_w]), and keep an intermediate (Tmp = x_b W, Col = the im2col matrix) that the
gradient reads."""
import warnings

import numpy as np

from ..core.tensor import LoDTensor
from ..errors import ExecutionError, ShapeError
from .registry import In, OpDef, Out


def _segments(t, op, slot, rows=None):
    """Offsets of `t`'s last LoD level; ExecutionError naming op and slot without one."""
    if not t._lod:
        raise ExecutionError(f"{op}: Input({slot}) must hold LoD (sequences)")
    off = [int(o) for o in t._lod[-1]]
    n = t._array.shape[0] if rows is None else rows
    if len(off) < 2 or off[-1] != n:
        raise ExecutionError(f"{op}: Input({slot})'s LoD {off} does not cover its {n} rows")
    return off


def _offsets(lengths):
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64).tolist()


# --- match_matrix_tensor -------------------------------------------------------------------
def _pairs(x, y):
    ox, oy = _segments(x, "match_matrix_tensor", "X"), _segments(y, "match_matrix_tensor", "Y")
    if len(ox) != len(oy):
        raise ExecutionError(f"match_matrix_tensor: X has {len(ox) - 1} sequences and Y "
                             f"{len(oy) - 1}; they must pair up")
    return list(zip(ox[:-1], ox[1:], oy[:-1], oy[1:]))


class MatchMatrixTensor(OpDef):
    type = "match_matrix_tensor"
    kind = "value"
    inputs = (In("X"), In("Y"), In("W"))
    outputs = (Out("Out"), Out("Tmp"))
    attrs = {"dim_t": 1}
    doc = ("For each pair b of sequences: Out_b[t, i, j] = x_b[i] . W[:, t, :] . y_b[j] "
           "(W [h, dim_t, h]), flattened to [sum_b dim_t * lx_b * ly_b, 1] with that LoD; "
           "Tmp = x_b W flattened.")

    @staticmethod
    def infer_shape(ctx):
        xs, ys, ws = (list(ctx.input_shape(s)) for s in ("X", "Y", "W"))
        if len(xs) != 2 or len(ys) != 2 or len(ws) != 3:
            ctx.fail(f"X and Y must be 2-D and W 3-D, got X{xs}, Y{ys}, W{ws}")
        t = ctx.attr("dim_t")
        if all(d >= 0 for d in (xs[1], ys[1], ws[0], ws[1], ws[2])) and (
                ws[0] != xs[1] or ws[2] != ys[1] or ws[1] != t):
            ctx.fail(f"W must be [X's width {xs[1]}, dim_t {t}, Y's width {ys[1]}], got W{ws}")
        ctx.set_output("Out", [-1, 1], ctx.input_dtype("X"), lod_level=1)
        ctx.set_output("Tmp", [-1, 1], ctx.input_dtype("X"))

    @staticmethod
    def kernel(x, y, w, *, dim_t):
        xa, ya, wa = x._array, y._array, w._array
        if wa.ndim != 3 or wa.shape != (xa.shape[1], dim_t, ya.shape[1]):
            raise ShapeError(f"match_matrix_tensor: W{list(wa.shape)} must be "
                             f"[{xa.shape[1]}, {dim_t}, {ya.shape[1]}]")
        outs, tmps, lens = [], [], []
        for x0, x1, y0, y1 in _pairs(x, y):
            tmp = np.einsum("ia,atc->itc", xa[x0:x1], wa)            # [lx, t, h]
            out = np.einsum("itc,jc->tij", tmp, ya[y0:y1])           # [t, lx, ly]
            tmps.append(tmp.reshape(-1))
            outs.append(out.reshape(-1))
            lens.append(out.size)
        dt = xa.dtype
        out = np.concatenate(outs).astype(dt).reshape(-1, 1) if outs else np.zeros((0, 1), dt)
        tmp = np.concatenate(tmps).astype(dt).reshape(-1, 1) if tmps else np.zeros((0, 1), dt)
        return LoDTensor(out, [_offsets(lens)]), LoDTensor(tmp)

    @staticmethod
    def grad(g):
        g.op("match_matrix_tensor_grad",
             {"X": g.input("X"), "Y": g.input("Y"), "W": g.input("W"), "Tmp": g.output("Tmp"),
              "Out@GRAD": g.output_grad("Out")},
             {"X@GRAD": g.input_grad("X"), "Y@GRAD": g.input_grad("Y"),
              "W@GRAD": g.input_grad("W")}, g.attrs())


class MatchMatrixTensorGrad(OpDef):
    type = "match_matrix_tensor_grad"
    kind = "value"
    inputs = (In("X"), In("Y"), In("W"), In("Tmp"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"), Out("Y@GRAD"), Out("W@GRAD"))
    attrs = MatchMatrixTensor.attrs
    infer_shape = None

    @staticmethod
    def kernel(x, y, w, tmp, dout, *, dim_t):
        xa, ya, wa = x._array, y._array, w._array
        d = dout._array.reshape(-1)
        dx, dy, dw = np.zeros_like(xa), np.zeros_like(ya), np.zeros(wa.shape, np.float64)
        at = 0
        for x0, x1, y0, y1 in _pairs(x, y):
            lx, ly = x1 - x0, y1 - y0
            db = d[at:at + dim_t * lx * ly].reshape(dim_t, lx, ly)
            at += dim_t * lx * ly
            xb, yb = xa[x0:x1], ya[y0:y1]
            dx[x0:x1] = np.einsum("tij,atc,jc->ia", db, wa, yb)
            dy[y0:y1] = np.einsum("tij,ia,atc->jc", db, xb, wa)
            dw += np.einsum("tij,ia,jc->atc", db, xb, yb)
        return (LoDTensor(dx, x._lod), LoDTensor(dy, y._lod),
                LoDTensor(dw.astype(wa.dtype)))


# --- var_conv_2d ---------------------------------------------------------------------------
def _out_size(n, stride):
    return (n - 1) // stride + 1 if n > 0 else 0


def _taps(h, w, kh, kw, sh, sw):
    """Index grids into the image padded by (kh // 2, kw // 2) before: rows [oh, kh] and
    columns [ow, kw] of every kernel tap at every output position."""
    rows = np.arange(0, h, sh)[:, None] + np.arange(kh)[None, :]
    cols = np.arange(0, w, sw)[:, None] + np.arange(kw)[None, :]
    return rows[:, :, None, None], cols[None, None, :, :]


def _padded(img, kh, kw):
    c, h, w = img.shape
    p = np.zeros((c, h + kh - 1, w + kw - 1), img.dtype)
    p[:, kh // 2:kh // 2 + h, kw // 2:kw // 2 + w] = img
    return p


class _VarConvGeometry:
    """Per-sample (offset in X, height, width) of var_conv_2d's inputs, checked."""

    @staticmethod
    def of(x, row, col, in_ch):
        op = "var_conv_2d"
        ox = _segments(x, op, "X")
        orow, ocol = _segments(row, op, "ROW"), _segments(col, op, "COLUMN")
        if not len(ox) == len(orow) == len(ocol):
            raise ExecutionError(f"{op}: X, ROW and COLUMN must hold as many sequences, got "
                                 f"{len(ox) - 1}, {len(orow) - 1} and {len(ocol) - 1}")
        geo, odd = [], []
        for b in range(len(ox) - 1):
            h, w = orow[b + 1] - orow[b], ocol[b + 1] - ocol[b]
            if ox[b + 1] - ox[b] != in_ch * h * w:
                odd.append(f"sample {b} holds {ox[b + 1] - ox[b]} values for an image of "
                           f"{in_ch} * {h} * {w}")
            geo.append((ox[b], h, w))
        if odd:
            # Fluid reads each image from its sample's start on, whatever the sample's size
            # (past X's end into memory it does not own); so does this kernel, with zeros
            # past X's end, and says so
            warnings.warn(f"{op}: X's LoD does not match InputChannel * ROW * COLUMN ("
                          f"{'; '.join(odd)}): each image is read from its sample's start "
                          f"on, zeros past X's end", RuntimeWarning, stacklevel=2)
        return geo


def _image(flat, start, cin, h, w):
    """The image [cin, h, w] read from `flat` at `start` (zeros past its end)."""
    n = cin * h * w
    got = flat[start:start + n]
    if got.size < n:
        got = np.concatenate([got, np.zeros(n - got.size, flat.dtype)])
    return got.reshape(cin, h, w)


_VAR_CONV_ATTRS = {"InputChannel": 1, "OutputChannel": 1, "StrideH": 1, "StrideW": 1,
                   "KernelH": 1, "KernelW": 1}


def _check_w(w, a):
    want = (a["OutputChannel"], a["InputChannel"] * a["KernelH"] * a["KernelW"])
    if w.shape != want:
        raise ShapeError(f"var_conv_2d: W{list(w.shape)} must be [OutputChannel, InputChannel "
                         f"* KernelH * KernelW] = {list(want)}")


class VarConv2d(OpDef):
    type = "var_conv_2d"
    kind = "value"
    inputs = (In("X"), In("ROW", no_grad=True), In("COLUMN", no_grad=True), In("W"))
    outputs = (Out("Out"), Out("Col"))
    attrs = dict(_VAR_CONV_ATTRS)
    doc = ("Sample b of X is an image [InputChannel, rows_b, columns_b] (rows_b, columns_b: "
           "the lengths of ROW's and COLUMN's b-th sequences); it is convolved with W "
           "[OutputChannel, InputChannel * KernelH * KernelW] at strides (StrideH, StrideW), "
           "zero-padded by (KernelH // 2, KernelW // 2) before, giving [OutputChannel, "
           "(rows_b - 1) // StrideH + 1, (columns_b - 1) // StrideW + 1]; Out and Col (the "
           "im2col matrices) are flat [total, 1] with one LoD piece a sample.")

    @staticmethod
    def infer_shape(ctx):
        xs, ws = list(ctx.input_shape("X")), list(ctx.input_shape("W"))
        if len(xs) != 2 or (xs[1] >= 0 and xs[1] != 1):
            ctx.fail(f"X must be [total, 1], got X{xs}")
        want = [ctx.attr("OutputChannel"),
                ctx.attr("InputChannel") * ctx.attr("KernelH") * ctx.attr("KernelW")]
        if len(ws) != 2 or (all(d >= 0 for d in ws) and ws != want):
            ctx.fail(f"W must be [OutputChannel, InputChannel * KernelH * KernelW] = {want}, "
                     f"got W{ws}")
        ctx.set_output("Out", [-1, 1], ctx.input_dtype("X"), lod_level=1)
        ctx.set_output("Col", [-1, 1], ctx.input_dtype("X"), lod_level=1)

    @classmethod
    def prepare(cls, attrs, outputs):
        a = {k: attrs[k] for k in _VAR_CONV_ATTRS}
        cin, kh, kw, sh, sw = (a["InputChannel"], a["KernelH"], a["KernelW"], a["StrideH"],
                               a["StrideW"])

        def kernel(x, row, col, w):
            xa, wa = x._array.reshape(-1), w._array
            _check_w(wa, a)
            outs, cols, out_lens, col_lens = [], [], [], []
            for start, h, wd in _VarConvGeometry.of(x, row, col, cin):
                oh, ow = _out_size(h, sh), _out_size(wd, sw)
                if oh * ow == 0:
                    out_lens.append(0)
                    col_lens.append(0)
                    continue
                img = _padded(_image(xa, start, cin, h, wd), kh, kw)
                r, c = _taps(h, wd, kh, kw, sh, sw)
                m = img[:, r, c]                                   # [C, oh, kh, ow, kw]
                m = m.transpose(0, 2, 4, 1, 3).reshape(cin * kh * kw, oh * ow)
                cols.append(m.reshape(-1))
                outs.append((wa @ m).reshape(-1))
                out_lens.append(a["OutputChannel"] * oh * ow)
                col_lens.append(m.size)
            dt = xa.dtype
            flat = (lambda parts: np.concatenate(parts).astype(dt).reshape(-1, 1) if parts
                    else np.zeros((0, 1), dt))
            return (LoDTensor(flat(outs), [_offsets(out_lens)]),
                    LoDTensor(flat(cols), [_offsets(col_lens)]))
        return kernel

    @staticmethod
    def grad(g):
        g.op("var_conv_2d_grad",
             {"X": g.input("X"), "W": g.input("W"), "ROW": g.input("ROW"),
              "COLUMN": g.input("COLUMN"), "Col": g.output("Col"), "Out": g.output("Out"),
              "Out@GRAD": g.output_grad("Out")},
             {"X@GRAD": g.input_grad("X"), "W@GRAD": g.input_grad("W")}, g.attrs())


class VarConv2dGrad(OpDef):
    type = "var_conv_2d_grad"
    kind = "value"
    inputs = (In("X"), In("W"), In("ROW"), In("COLUMN"), In("Col"), In("Out"),
              In("Out@GRAD"))
    outputs = (Out("X@GRAD"), Out("W@GRAD"))
    attrs = dict(_VAR_CONV_ATTRS)
    infer_shape = None

    @classmethod
    def prepare(cls, attrs, outputs):
        a = {k: attrs[k] for k in _VAR_CONV_ATTRS}
        cin, kh, kw, sh, sw = (a["InputChannel"], a["KernelH"], a["KernelW"], a["StrideH"],
                               a["StrideW"])
        cout = a["OutputChannel"]

        def kernel(x, w, row, col, cols, out, dout):
            xa, wa = x._array, w._array
            _check_w(wa, a)
            d, cm = dout._array.reshape(-1), cols._array.reshape(-1)
            dx = np.zeros(xa.size, xa.dtype)
            dw = np.zeros(wa.shape, np.float64)
            at_out = at_col = 0
            for start, h, wd in _VarConvGeometry.of(x, row, col, cin):
                oh, ow = _out_size(h, sh), _out_size(wd, sw)
                if oh * ow == 0:
                    continue
                db = d[at_out:at_out + cout * oh * ow].reshape(cout, oh * ow)
                m = cm[at_col:at_col + cin * kh * kw * oh * ow].reshape(cin * kh * kw, oh * ow)
                at_out += db.size
                at_col += m.size
                dw += db @ m.T
                dm = (wa.T @ db).reshape(cin, kh, kw, oh, ow).transpose(0, 3, 1, 4, 2)
                dimg = np.zeros((cin, h + kh - 1, wd + kw - 1), np.float64)
                r, c = _taps(h, wd, kh, kw, sh, sw)
                np.add.at(dimg, (slice(None), r, c), dm)
                part = dimg[:, kh // 2:kh // 2 + h, kw // 2:kw // 2 + wd].reshape(-1)
                end = min(start + part.size, dx.size)
                dx[start:end] += part[:end - start]
            return LoDTensor(dx.reshape(xa.shape), x._lod), LoDTensor(dw.astype(wa.dtype))
        return kernel
