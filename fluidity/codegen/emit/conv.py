"""What both targets' emitters of conv2d and pooling share: the literal NCHW geometry,
the grouped gemms, and the runs of pooling windows."""
import numpy as np

from ...ops.common import channel_last
from ...ops.conv import pool_windows


def emit_literal_nchw(e, x, w):
    """(N, [C, H, W], Filter dims) of a compiled NCHW conv or conv_transpose, all literal
    but N; NotCompilable when the layout is NHWC or a dim is known only at run time."""
    if channel_last(e.attr("data_format")):
        e.fail("NHWC layout")
    if x.ndim != 4 or w.ndim != 4 or not all(e.is_lit(d) for d in x.dims[1:] + w.dims):
        e.fail("channels, image or filter size not known when compiling")
    return x.dims[0], [int(d) for d in x.dims[1:]], [int(d) for d in w.dims]


def grouped_gemm(gemm, groups, ta, tb, m, n, k, a, lda, b, ldb, c, ldc):
    """C code for both targets: one `gemm` ("fl::gemm", or the device's "fl::cu::gemm" of
    the same signature) per group gi, C_gi = op(A_gi) @ op(B_gi) with A_gi, B_gi and C_gi
    the gi-th blocks of m*k, k*n and m*n floats of a, b and c."""
    return (f"for (int64_t gi = 0; gi < {groups}; ++gi) {gemm}({str(ta).lower()}, "
            f"{str(tb).lower()}, {m}, {n}, {k}, 1.0f, {a} + gi * {m} * {k}, {lda}, "
            f"{b} + gi * {k} * {n}, {ldb}, 0.0f, {c} + gi * {m} * {n}, {ldc});")


def contiguous(idx, valid):
    """Whether every window's valid taps are consecutive positions."""
    for row, ok in zip(idx, valid):
        pos = row[ok]
        if len(pos) and not np.array_equal(pos, np.arange(pos[0], pos[0] + len(pos))):
            return False
    return True


def runs(idx, valid):
    starts = [int(row[ok][0]) if ok.any() else 0 for row, ok in zip(idx, valid)]
    ends = [int(row[ok][-1]) + 1 if ok.any() else 0 for row, ok in zip(idx, valid)]
    return starts, ends


def regular_windows(idx, valid):
    """(first position, stride, size) when every window of an axis is whole (no padding
    reached, no adaptive cell) and window o covers first + o * stride + [0, size); else
    None."""
    if not valid.all() or idx.shape[0] == 0:
        return None
    size = idx.shape[1]
    first = int(idx[0, 0])
    stride = int(idx[1, 0] - idx[0, 0]) if idx.shape[0] > 1 else 1
    want = first + np.arange(idx.shape[0])[:, None] * stride + np.arange(size)
    return (first, stride, size) if stride > 0 and np.array_equal(idx, want) else None


def regular_pool(attrs, h, w):
    """C++ declaring the fl::PoolGeom `pg` of a pooling over an h x w plane whose windows
    are all whole and evenly spaced (runtime/conv.h's direct loops), the windows' area and
    whether they are disjoint; None when some window is clipped by padding or the pooling
    is adaptive."""
    ((ih, vh), (iw, vw)), _, adaptive = pool_windows(attrs, h, w)
    rows, cols = regular_windows(ih, vh), regular_windows(iw, vw)
    if adaptive or rows is None or cols is None:
        return None
    (r0, sh, kh), (c0, sw, kw) = rows, cols
    code = (f"const fl::PoolGeom pg{{{h}, {w}, {ih.shape[0]}, {iw.shape[0]}, {kh}, {kw}, "
            f"{sh}, {sw}, {r0}, {c0}, {iw.shape[0]}}};")
    return code, kh * kw, (sh >= kh and sw >= kw)


def _whole_run(valid):
    """[first, end) of the outputs whose windows are whole along an axis (one run in a
    padded, non-adaptive pooling), or None."""
    whole = np.flatnonzero(valid.all(axis=1))
    if not len(whole) or whole[-1] - whole[0] + 1 != len(whole):
        return None
    return int(whole[0]), int(whole[-1]) + 1


def pool_interior(attrs, h, w):
    """(C++ declaring the fl::PoolGeom `pg` of the rectangle of outputs whose windows are
    whole, the offset of its first output in the plane, (a0, a1, b0, b1), the windows'
    area) for a padded, non-adaptive pooling; None when that rectangle is empty or its
    windows are not evenly spaced."""
    ((ih, vh), (iw, vw)), _, adaptive = pool_windows(attrs, h, w)
    rows, cols = _whole_run(vh), _whole_run(vw)
    if adaptive or attrs["global_pooling"] or rows is None or cols is None:
        return None
    (a0, a1), (b0, b1) = rows, cols
    r, c = regular_windows(ih[a0:a1], vh[a0:a1]), regular_windows(iw[b0:b1], vw[b0:b1])
    if r is None or c is None:
        return None
    (r0, sh, kh), (c0, sw, kw) = r, c
    code = (f"const fl::PoolGeom pg{{{h}, {w}, {a1 - a0}, {b1 - b0}, {kh}, {kw}, {sh}, {sw}, "
            f"{r0}, {c0}, {iw.shape[0]}}};")
    return code, a0 * iw.shape[0] + b0, (a0, a1, b0, b1), kh * kw
