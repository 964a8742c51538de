"""C++ emitters of more Fluid 1.x tensor ops: fill_zeros_like2, unbind (its gradient is stack),
expand_v2 (+ grad), unfold and im2sequence without Y (+ grads: runtime/volume.h's vol2col /
col2vol over one depth), gather_nd_grad and scatter_nd_add (+ grad), whose Index is checked in C
before any entry is used (runtime/scatter_nd.h: out of range stops the run naming the op, the
index, the dim and its size, as the kernel's message)."""
import numpy as np

from ....ops.conv import out_size
from ....ops.volume import tlbr_pads
from ...dim import dim
from .. import register
from ..checks import check_dims, dense_only
from ..known_values import known_ints
from ..literals import c_ints, lit_int
from .tensor import MAX_TILE_DIMS, emit_tile, emit_unstack
from .volume import MAX_SAMPLE_FLOATS


@register("fill_zeros_like2", "cpu")
def fill_zeros_like2(e):
    """Zeros of X's dims in `dtype` (X's values are never read)."""
    x = e.input("X", maybe_unset=True)
    dense_only(e, x)
    out = e.output("Out", x.dims, e.ctype_of(e.attr("dtype")))
    e.code(f"std::memset({out}, 0, sizeof({out.ctype}) * {out.numel()});")


@register("unbind", "cpu")
def unbind(e):
    """Each Out = X's slice along `axis`, that dim removed (unstack's copies). X with LoD
    (which every Out would share) runs interpreted."""
    x = e.input("X")
    if x.has_lod:
        e.fail("X has LoD")
    emit_unstack(e, x, "Out")


# --- expand_v2 --------------------------------------------------------------------------------
def _expand_v2_plan(e, x):
    """(X's dims padded with leading 1s, times) of expand_v2 (ops/tensor.py
    _expand_v2_shape): the shape from the expand_shapes_tensor list, Shape, or the
    attribute (the kernel's ints_from order), known when compiling; a dim of X known only
    at run time must be kept (-1 or itself)."""
    shape = known_ints(e, "Shape", "expand_shapes_tensor")
    shape = [dim(s) for s in (shape if shape is not None else e.attr("shape"))]
    if not all(s.is_literal for s in shape):
        e.fail(f"shape {shape} known only at run time")
    shape = [int(s) for s in shape]
    lead = len(shape) - x.ndim
    if lead < 0 or not 1 <= len(shape) <= MAX_TILE_DIMS:
        e.fail(f"shape {shape} for X{x.dims} (at least X's rank, at most {MAX_TILE_DIMS})")
    if any(s < 1 for s in shape[:lead]):
        e.fail(f"shape {shape}: new leading dims must be positive")
    times = shape[:lead]
    for d, s in zip(x.dims, shape[lead:]):
        n = lit_int(d)
        if s == -1 or (n is not None and s == n):
            times.append(1)
        elif n == 1 and s > 0:
            times.append(s)
        else:
            e.fail(f"X{x.dims} to shape {shape}: dim {d} vs {s}")
    return ["1"] * lead + list(x.dims), [dim(t) for t in times]


@register("expand_v2", "cpu")
def expand_v2(e):
    """X broadcast to the shape: np.tile of X viewed with leading 1s (fl::tile)."""
    x = e.input("X")
    dense_only(e, x)
    xdims, times = _expand_v2_plan(e, x)
    emit_tile(e, x, xdims, times, False)


def _sum_axes(e, src, dst, dims, red):
    e.code(f"{{ const int64_t dims[] = {c_ints(dims)}; const bool red[] = "
           f"{{{', '.join('true' if r else 'false' for r in red)}}}; "
           f"fl::reduce<fl::R_SUM>({src}, {dst}, nullptr, {len(dims)}, dims, red); }}")


@register("expand_v2_grad", "cpu")
def expand_v2_grad(e):
    """ops/common.py's reduce_to_shape in its steps: Out@GRAD summed over the new leading
    dims, then over the dims X has as 1 (fl::reduce walks each sum as numpy's does)."""
    x, d = e.input("X"), e.input("Out@GRAD")
    dense_only(e, d)
    if d.ctype not in ("float", "double") or d.ctype != x.ctype:
        e.fail(f"Out@GRAD is {d.ctype}")
    xdims, times = _expand_v2_plan(e, x)
    lead = len(xdims) - x.ndim
    check_dims(e, d, [a * t for a, t in zip([dim(v) for v in xdims], times)], "Out")
    dx = e.output("X@GRAD", x.dims, d.ctype, lod_from=False)
    rest = list(d.dims[lead:])
    ones = [int(t) != 1 for t in times[lead:]]
    if not lead and not any(ones):
        e.code(f"std::memcpy({dx}, {d}, sizeof({d.ctype}) * {dx.numel()});")
        return
    src = d
    if lead:
        src = dx if not any(ones) else e.scratch(rest, d.ctype)
        _sum_axes(e, d, src, list(d.dims), [True] * lead + [False] * len(rest))
    if any(ones):
        _sum_axes(e, src, dx, rest, ones)


# --- unfold -----------------------------------------------------------------------------------
def window_geometry(e, x, k, s, dil, p):
    """(C++ declaring the fl::VolGeom `g` of kh x kw windows over one depth, C*K, L, the
    sample's C*H*W) for NCHW X of literal C, H, W; paddings [top, left, bottom, right]."""
    if x.ndim != 4 or not all(e.is_lit(v) for v in x.dims[1:]):
        e.fail(f"X{x.dims}: a 4-D X of channels and image known when compiling")
    c, h, w = (int(v) for v in x.dims[1:])
    k, s, dil, p = (list(v) for v in (k, s, dil, p))
    if not (len(k) == len(s) == len(dil) == 2 and len(p) == 4):
        e.fail(f"kernels {k}, strides {s}, dilations {dil}, paddings {p}")
    if min(k + s + dil) < 1:
        e.fail(f"kernels {k}, strides {s}, dilations {dil} must be positive")
    pads = tlbr_pads(p)
    outs = [out_size(n, kk, ss, *pp, dd) for n, kk, ss, pp, dd in zip((h, w), k, s, pads, dil)]
    if min(outs) < 1:
        e.fail(f"the {k} window does not fit the padded input")
    ck, ln = c * k[0] * k[1], outs[0] * outs[1]
    if ck * ln > MAX_SAMPLE_FLOATS:
        e.fail(f"{ck} x {ln} columns a sample")
    vals = [c, 1, h, w, 1, *k, 1, *outs, 1, *s, 0, pads[0][0], pads[1][0], 1, *dil]
    return f"const fl::VolGeom g{c_ints(vals)};", ck, ln, c * h * w


def _unfold_geometry(e, x):
    return window_geometry(e, x, e.attr("kernel_sizes"), e.attr("strides"),
                           e.attr("dilations"), e.attr("paddings"))


@register("unfold", "cpu")
def unfold(e):
    """Y[n] = the im2col columns [C*kh*kw, L] of sample n (vol2col over one depth)."""
    x = e.input("X")
    e.require_float(x)
    geom, ck, ln, chw = _unfold_geometry(e, x)
    y = e.output("Y", [x.dims[0], str(ck), str(ln)], lod_from=False)
    e.code(geom)
    e.code(f"for (int64_t n = 0; n < {x.dims[0]}; ++n) fl::vol2col({x} + n * {chw}, g, 1, "
           f"{y} + n * {ck * ln});")


@register("unfold_grad", "cpu")
def unfold_grad(e):
    """X@GRAD[n] = Y@GRAD[n]'s columns added back where they were read (col2vol)."""
    x, dy = e.input("X"), e.input("Y@GRAD")
    e.require_float(x, dy)
    geom, ck, ln, chw = _unfold_geometry(e, x)
    check_dims(e, dy, [x.dims[0], str(ck), str(ln)], "Y")
    dx = e.output("X@GRAD", x.dims, lod_from=False)
    e.code(geom)
    e.code(f"for (int64_t n = 0; n < {x.dims[0]}; ++n) fl::col2vol({dy} + n * {ck * ln}, g, "
           f"1, {dx} + n * {chw});")


# --- gather_nd_grad, scatter_nd_add -----------------------------------------------------------
def _nd_plan(e, x, index):
    """(C++ computing `off`, the checked offset of each Index row's slice of X; rows; slice)
    for Index [..., k] over X (k known when compiling, at most X's rank)."""
    dense_only(e, x, index)
    if index.ctype not in ("int64_t", "int32_t"):
        e.fail(f"Index is {index.ctype}")
    if index.ndim < 1 or not e.is_lit(index.dims[-1]):
        e.fail(f"Index{index.dims}: its last dim must be known when compiling")
    k = int(index.dims[-1])
    if k > x.ndim or x.ndim > 8:
        e.fail(f"Index's last dim {k} for X{x.dims}")
    rows, slice_ = e.prod(index.dims[:-1]), e.prod(x.dims[k:])
    off = e.scratch([rows], "int64_t")
    code = (f"const int64_t xdims[] = {c_ints(x.dims[:k] or [0])}; if (int rc = "
            f"fl::nd_offsets({index}, {rows}, {k}, xdims, {slice_}, {off}, "
            f"{e.c_string(e.op.type)}, err, {e.k})) return rc;")
    return code, off, rows, slice_, list(index.dims[:-1]) + list(x.dims[k:])


@register("gather_nd_grad", "cpu")
def gather_nd_grad(e):
    """X@GRAD = zeros, then each Out@GRAD slice added at the X slice its Index row names,
    rows in order (np.add.at)."""
    x, index, d = e.input("X"), e.input("Index"), e.input("Out@GRAD")
    code, off, rows, slice_, ddims = _nd_plan(e, x, index)
    if d.ctype != x.ctype:
        e.fail(f"Out@GRAD is {d.ctype}, X {x.ctype}")
    check_dims(e, d, ddims, "Out")
    dx = e.output("X@GRAD", x.dims, x.ctype, lod_from=False)
    e.code(code)
    e.code(f"std::memset({dx}, 0, sizeof({dx.ctype}) * {dx.numel()}); "
           f"fl::add_slices_at({dx}, {d}, {off}, {rows}, {slice_});")


@register("scatter_nd_add", "cpu")
def scatter_nd_add(e):
    """Out = X, then each Updates slice added at the slice its Index row names, rows in
    order (np.add.at: duplicates add up)."""
    x, index, u = e.input("X"), e.input("Index"), e.input("Updates")
    code, off, rows, slice_, udims = _nd_plan(e, x, index)
    if u.ctype != x.ctype:
        e.fail(f"Updates is {u.ctype}, X {x.ctype}")
    check_dims(e, u, udims, "Updates")
    out = e.output("Out", x.dims, x.ctype)
    e.code(code)
    e.code(f"std::memcpy({out}, {x}, sizeof({x.ctype}) * {out.numel()}); "
           f"fl::add_slices_at({out}, {u}, {off}, {rows}, {slice_});")


@register("scatter_nd_add_grad", "cpu")
def scatter_nd_add_grad(e):
    """X@GRAD = Out@GRAD; Updates@GRAD = the Out@GRAD slices Index's rows name."""
    index, u, d = e.input("Index"), e.input("Updates"), e.input("Out@GRAD")
    code, off, rows, slice_, udims = _nd_plan(e, d, index)
    check_dims(e, u, udims, "Updates")
    if u.ctype != d.ctype:
        e.fail(f"Updates is {u.ctype}, Out@GRAD {d.ctype}")
    if e.has_output("X@GRAD"):
        dx = e.output("X@GRAD", d.dims, d.ctype, lod_from=False)
        e.code(f"std::memcpy({dx}, {d}, sizeof({d.ctype}) * {dx.numel()});")
    e.code(code)
    if e.has_output("Updates@GRAD"):
        du = e.output("Updates@GRAD", u.dims, u.ctype, lod_from=False)
        e.code(f"fl::gather_slices({du}, {d}, {off}, {rows}, {slice_});")


# --- im2sequence ------------------------------------------------------------------------------
def _im2sequence_geometry(e, x):
    """window_geometry of im2sequence (dilation 1). With Y (the images' real sizes, read by
    the kernel for a batch of several) the rows an image gives are known only from Y's
    values: NotCompilable."""
    if e.op.input("Y"):
        e.fail("Y (real image sizes) makes the rows of each image data-dependent")
    dense_only(e, x)
    e.require_float(x)
    return window_geometry(e, x, e.attr("kernels"), e.attr("strides"), [1, 1],
                           e.attr("paddings"))


@register("im2sequence", "cpu")
def im2sequence(e):
    """Out [N*L, C*kh*kw]: the patches of image n as rows n*L .. (n+1)*L - 1 (vol2col's
    columns of the sample, transposed); LoD [0, L, 2L, ..., N*L], computed here."""
    x = e.input("X")
    geom, ck, ln, chw = _im2sequence_geometry(e, x)
    n = x.dims[0]
    lod = e.lod_output("rows", dim(n) + 1)
    out = e.output("Out", [e.mul(n, ln), str(ck)], lod_from=False)
    out.levels, out.lod_src = [(lod, dim(n) + 1)], None
    cols = e.scratch([str(ck * ln)])
    e.code(geom)
    e.code(f"for (int64_t i = 0; i <= {n}; ++i) {lod}[i] = i * {ln};")
    e.code(f"for (int64_t s = 0; s < {n}; ++s) {{ fl::vol2col({x} + s * {chw}, g, 1, {cols}); "
           f"fl::swap01({cols}, {out} + s * {ln * ck}, {ck}, {ln}, 1); }}")


@register("im2sequence_grad", "cpu")
def im2sequence_grad(e):
    """X@GRAD: each image's rows of Out@GRAD transposed back to columns and added where
    they were read (col2vol)."""
    x, d = e.input("X"), e.input("Out@GRAD")
    geom, ck, ln, chw = _im2sequence_geometry(e, x)
    e.require_float(d)
    n = x.dims[0]
    check_dims(e, d, [e.mul(n, ln), str(ck)], "Out")
    dx = e.output("X@GRAD", x.dims, lod_from=False)
    cols = e.scratch([str(ck * ln)])
    e.code(geom)
    e.code(f"for (int64_t s = 0; s < {n}; ++s) {{ fl::swap01({d} + s * {ln * ck}, {cols}, "
           f"{ln}, {ck}, 1); fl::col2vol({cols}, g, 1, {dx} + s * {chw}); }}")
