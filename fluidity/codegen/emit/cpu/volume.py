"""C++ emitters of the 3-D sliding-window ops (ops/volume.py): conv3d, conv3d_transpose, pool3d,
max_pool3d_with_index, trilinear_interp (ops/interp.py) and their gradients, NCDHW float32 with
C, D, H, W and the filter known when compiling (NDHWC, which the kernels also take, is refused:
untested here). depthwise_conv2d_transpose (+ _grad) is conv2d_transpose by another name: its
emitters are registered here under that name.

A conv is runtime/volume.h's vol2col and one gemm per group over a chunk of the batch whose
columns fit in cache (conv2d's chunk_samples), conv3d_transpose the adjoint (gemms, then
col2vol). Pooling reads per-axis tables of each window's input positions made here from the
kernel's own patch maps (ops/volume.py patch_map / adaptive_map over one axis; the kernel's 3-D
map is their product), so global, adaptive, ceil_mode and SAME / VALID padding compile as the
kernel reads them. trilinear_interp tabulates the taps of the kernel's per-axis interpolation
matrices (ops/interp.py's maps), as bilinear_interp's emitter does in 2-D."""
import numpy as np

from ....errors import ShapeError
from ....ops.common import channel_last
from ....ops.conv import out_size, pool_out_size
from ....ops import interp as interp_ops
from ....ops.volume import adaptive_map, conv_plan, patch_map, pool_pads, transpose_out_spatial
from .. import register
from ..checks import check_dims
from ..conv import grouped_gemm
from ..literals import c_ints
from .conv import chunk_samples, conv2d_transpose, conv2d_transpose_grad
from .interp import MAX_OUT, size_inputs

# the most entries of one axis's window table (outputs x taps): a hostile ksize or output
# size past it would make the generated source (and the compiler's memory) grow unbounded
MAX_AXIS_TABLE = 1 << 16
# the most taps a pooling window has (its average gathers them into scratch)
MAX_WINDOW = 1 << 20
# the most floats a conv's output volume, columns or scratch may take per sample: sizes
# from hostile attributes (paddings, strides) stop here, before any allocation
MAX_SAMPLE_FLOATS = 1 << 32


def _positive(e, name, values):
    if any(int(v) < 1 for v in values):
        e.fail(f"{name} {list(values)} must be positive")


def _volume(e, x, slot):
    """[C, D, H, W] of 5-D NCDHW `x` as ints; NotCompilable when NDHWC or not literal."""
    if channel_last(e.attr("data_format")):
        e.fail("NDHWC layout")
    if x.ndim != 5 or not all(e.is_lit(d) for d in x.dims[1:]):
        e.fail(f"{slot}{x.dims}: channels and volume not known when compiling")
    return [int(d) for d in x.dims[1:]]


def _filter(e, w):
    if w.ndim != 5 or not all(e.is_lit(d) for d in w.dims):
        e.fail(f"Filter{w.dims} not known when compiling")
    return [int(d) for d in w.dims]


def _geom(c, spatial, k, outs, strides, pads, dil):
    """C++ declaring the fl::VolGeom `g` of a window over a c x spatial volume."""
    vals = [c, *spatial, *k, *outs, *strides, *(p[0] for p in pads), *dil]
    return f"const fl::VolGeom g{c_ints(vals)};"


def _conv_geometry(e, x, w):
    """(geometry code, groups, F, C, K, O) of a compiled conv3d; NotCompilable when the
    shapes do not fit (the kernel then names what is wrong)."""
    c, *spatial = _volume(e, x, "Input")
    f, cg, *k = _filter(e, w)
    groups = e.attr("groups")
    if groups < 1 or c % groups or f % groups or cg * groups != c:
        e.fail(f"Input{x.dims} and Filter{w.dims} with groups={groups} do not fit")
    _positive(e, "strides", e.attr("strides"))
    try:
        strides, pads, dil = conv_plan(e.attrs, spatial, k)
    except ShapeError as err:
        e.fail(str(err))
    _positive(e, "strides", strides)
    _positive(e, "dilations", dil)
    outs = [out_size(n, kk, s, *p, d) for n, kk, s, p, d in zip(spatial, k, strides, pads, dil)]
    if any(o <= 0 for o in outs):
        e.fail(f"output size {outs} is not positive")
    if int(np.prod(outs)) * (c * int(np.prod(k)) + f) > MAX_SAMPLE_FLOATS:
        e.fail(f"output size {outs} with {c} x {k} taps is past the compiled bound")
    code = _geom(c, spatial, k, outs, strides, pads, dil)
    return code, groups, f, c, int(np.prod(k)), outs


def _chunks(n, nb, body):
    """C++ running `body` per chunk of at most nb samples: n0 its first, nn its size, nc
    its columns (nn * O is left to the body)."""
    return (f"for (int64_t n0 = 0; n0 < {n}; n0 += {nb}) {{ const int64_t nn = {n} - n0 < "
            f"{nb} ? {n} - n0 : {nb}; {body} }}")


@register("conv3d", "cpu")
def conv3d(e):
    """Per chunk of the batch: vol2col, one gemm per group ([F/g, C/g*K] @ [C/g*K, n*O],
    the kernel's einsum over those samples), the result written NCDHW with the bias."""
    x, w, bias = e.input("Input"), e.input("Filter"), e.input("Bias")
    e.require_float(x, w, bias)
    geom, groups, f, c, k, outs = _conv_geometry(e, x, w)
    if bias is not None:
        check_dims(e, bias, [str(f)], "Bias")
    n, o = x.dims[0], int(np.prod(outs))
    out = e.output("Output", [n, str(f)] + [str(v) for v in outs])
    cgk, fg = c // groups * k, f // groups
    nb = chunk_samples(c * k * o)
    cols = e.scratch([str(c * k * nb * o)])
    tmp = e.scratch([str(f * nb * o)])
    e.code(geom)
    gemm = grouped_gemm("fl::gemm", groups, False, False, fg, "nc", cgk, w, cgk, cols, "nc",
                        tmp, "nc")
    e.code(_chunks(n, nb, f"const int64_t nc = nn * {o}; fl::vol2col({x} + n0 * "
                          f"{c * int(np.prod(x.dims[2:]))}, g, nn, {cols}); {gemm} "
                          f"fl::vol_out({tmp}, {out} + n0 * {f * o}, {f}, nn, {o}, "
                          f"{bias if bias is not None else 'nullptr'});"))


@register("conv3d_grad", "cpu")
def conv3d_grad(e):
    """Per chunk: Output@GRAD as [F, n*O]; Filter@GRAD += dY_g @ cols_g^T (vol2col of the
    chunk); Input@GRAD = col2vol(W_g^T @ dY_g)."""
    x, w, dout = e.input("Input"), e.input("Filter"), e.input("Output@GRAD")
    e.require_float(x, w, dout)
    geom, groups, f, c, k, outs = _conv_geometry(e, x, w)
    n, o, s = x.dims[0], int(np.prod(outs)), int(np.prod([int(v) for v in x.dims[2:]]))
    check_dims(e, dout, [n, str(f)] + [str(v) for v in outs], "Output@GRAD")
    dx = e.output("Input@GRAD", x.dims) if e.has_output("Input@GRAD") else None
    dw = e.output("Filter@GRAD", w.dims) if e.has_output("Filter@GRAD") else None
    if dx is None and dw is None:
        return
    cgk, fg = c // groups * k, f // groups
    nb = chunk_samples(c * k * o)
    cols = e.scratch([str(c * k * nb * o)])
    d = e.scratch([str(f * nb * o)])
    steps = [f"const int64_t nc = nn * {o}; fl::swap01({dout} + n0 * {f * o}, {d}, nn, {f}, "
             f"{o});"]
    if dw is not None:
        steps.append(f"fl::vol2col({x} + n0 * {c * s}, g, nn, {cols}); for (int64_t gi = 0; "
                     f"gi < {groups}; ++gi) fl::gemm(false, true, {fg}, {cgk}, nc, 1.0f, {d} + "
                     f"gi * {fg} * nc, nc, {cols} + gi * {cgk} * nc, nc, n0 ? 1.0f : 0.0f, "
                     f"{dw} + gi * {fg * cgk}, {cgk});")
    if dx is not None:
        steps.append(f"for (int64_t gi = 0; gi < {groups}; ++gi) fl::gemm(true, false, {cgk}, "
                     f"nc, {fg}, 1.0f, {w} + gi * {fg * cgk}, {cgk}, {d} + gi * {fg} * nc, nc, "
                     f"0.0f, {cols} + gi * {cgk} * nc, nc); fl::col2vol({cols}, g, nn, {dx} + "
                     f"n0 * {c * s});")
    e.code(geom)
    e.code(_chunks(n, nb, " ".join(steps)))
    if dw is not None:               # an empty batch: no chunk set dW
        e.code(f"if ({n} == 0) std::memset({dw}, 0, sizeof(float) * {dw.numel()});")


def _convt_geometry(e, x, w):
    """(geometry code of the conv3d it transposes: the image is Output [N, F, *spatial],
    its output positions Input's; groups, C, F, K, spatial) of a compiled
    conv3d_transpose."""
    c, *ins = _volume(e, x, "Input")
    c2, fg, *k = _filter(e, w)
    groups = e.attr("groups")
    if c != c2 or groups < 1 or c % groups:
        e.fail(f"Input{x.dims} and Filter{w.dims} with groups={groups} do not fit")
    _positive(e, "strides", e.attr("strides"))
    try:
        spatial, strides, pads, dil = transpose_out_spatial(ins, k, e.attrs)
        _positive(e, "strides", strides)
        _positive(e, "dilations", dil)
        _positive(e, "output size", spatial)
        if int(np.prod(spatial)) * groups * fg > MAX_SAMPLE_FLOATS:
            e.fail(f"output size {spatial} is past the compiled bound")
        outs = [out_size(n, kk, s, *p, d)
                for n, kk, s, p, d in zip(spatial, k, strides, pads, dil)]
    except ShapeError as err:
        e.fail(str(err))
    if outs != ins:
        e.fail(f"output size {spatial} does not give back the input's {ins}")
    code = _geom(groups * fg, spatial, k, ins, strides, pads, dil)
    return code, groups, c, groups * fg, int(np.prod(k)), spatial


@register("conv3d_transpose", "cpu")
def conv3d_transpose(e):
    """Per chunk: Input as [C, n*O], one gemm per group making the columns W_g^T @ X_g,
    col2vol into Output, then the bias."""
    x, w, bias = e.input("Input"), e.input("Filter"), e.input("Bias")
    e.require_float(x, w, bias)
    geom, groups, c, f, k, spatial = _convt_geometry(e, x, w)
    if bias is not None:
        check_dims(e, bias, [str(f)], "Bias")
    n, o, s = x.dims[0], int(np.prod([int(v) for v in x.dims[2:]])), int(np.prod(spatial))
    out = e.output("Output", [n, str(f)] + [str(v) for v in spatial])
    cg, fgk = c // groups, f // groups * k
    nb = chunk_samples(f * k * o)
    xg = e.scratch([str(c * nb * o)])
    cols = e.scratch([str(f * k * nb * o)])
    e.code(geom)
    body = (f"const int64_t nc = nn * {o}; fl::swap01({x} + n0 * {c * o}, {xg}, nn, {c}, {o}); "
            f"for (int64_t gi = 0; gi < {groups}; ++gi) fl::gemm(true, false, {fgk}, nc, {cg}, "
            f"1.0f, {w} + gi * {cg * fgk}, {fgk}, {xg} + gi * {cg} * nc, nc, 0.0f, {cols} + gi "
            f"* {fgk} * nc, nc); fl::col2vol({cols}, g, nn, {out} + n0 * {f * s});")
    e.code(_chunks(n, nb, body))
    if bias is not None:
        e.code(f"for (int64_t i = 0; i < {out.numel()}; ++i) "
               f"{out}[i] = {out}[i] + {bias}[(i / {s}) % {f}];")


@register("conv3d_transpose_grad", "cpu")
def conv3d_transpose_grad(e):
    """Per chunk: vol2col of Output@GRAD at Input's positions; Input@GRAD_g = W_g @ cols_g,
    Filter@GRAD_g += X_g @ cols_g^T."""
    x, w, dout = e.input("Input"), e.input("Filter"), e.input("Output@GRAD")
    e.require_float(x, w, dout)
    geom, groups, c, f, k, spatial = _convt_geometry(e, x, w)
    n, o = x.dims[0], int(np.prod([int(v) for v in x.dims[2:]]))
    s = int(np.prod(spatial))
    check_dims(e, dout, [n, str(f)] + [str(v) for v in spatial], "Output@GRAD")
    dx = e.output("Input@GRAD", x.dims) if e.has_output("Input@GRAD") else None
    dw = e.output("Filter@GRAD", w.dims) if e.has_output("Filter@GRAD") else None
    if dx is None and dw is None:
        return
    cg, fgk = c // groups, f // groups * k
    nb = chunk_samples(f * k * o)
    cols = e.scratch([str(f * k * nb * o)])
    xg = e.scratch([str(c * nb * o)])
    steps = [f"const int64_t nc = nn * {o}; fl::vol2col({dout} + n0 * {f * s}, g, nn, {cols});"]
    if dx is not None:
        steps.append(f"for (int64_t gi = 0; gi < {groups}; ++gi) fl::gemm(false, false, {cg}, "
                     f"nc, {fgk}, 1.0f, {w} + gi * {cg * fgk}, {fgk}, {cols} + gi * {fgk} * nc, "
                     f"nc, 0.0f, {xg} + gi * {cg} * nc, nc); fl::swap01({xg}, {dx} + n0 * "
                     f"{c * o}, {c}, nn, {o});")
    if dw is not None:
        steps.append(f"fl::swap01({x} + n0 * {c * o}, {xg}, nn, {c}, {o}); for (int64_t gi = "
                     f"0; gi < {groups}; ++gi) fl::gemm(false, true, {cg}, {fgk}, nc, 1.0f, "
                     f"{xg} + gi * {cg} * nc, nc, {cols} + gi * {fgk} * nc, nc, n0 ? 1.0f : "
                     f"0.0f, {dw} + gi * {cg * fgk}, {fgk});")
    e.code(geom)
    e.code(_chunks(n, nb, " ".join(steps)))
    if dw is not None:
        e.code(f"if ({n} == 0) std::memset({dw}, 0, sizeof(float) * {dw.numel()});")


# depthwise_conv2d_transpose is conv2d_transpose (ops/conv.py: a subclass that only renames
# it); groups = channels runs one small gemm per group there
register("depthwise_conv2d_transpose", "cpu")(conv2d_transpose)
register("depthwise_conv2d_transpose_grad", "cpu")(conv2d_transpose_grad)


# --- pooling ----------------------------------------------------------------------------------
def _axis_windows(e, attrs, spatial):
    """Per axis, the [outputs, taps] table of the input position each tap of each output
    reads (-1 outside): ops/volume.py's pool_map, one axis at a time (its 3-D map is the
    product of these)."""
    ksize = [int(v) for v in attrs["ksize"]]
    glob, adaptive = attrs["global_pooling"], attrs["adaptive"]
    if not glob and len(ksize) != 3:
        e.fail(f"ksize {ksize} is not 3 values")
    sizes = spatial if glob else ksize
    if any(v < 1 or v > MAX_AXIS_TABLE for v in sizes):
        e.fail(f"window or output size {sizes} outside [1, {MAX_AXIS_TABLE}]")
    try:
        if adaptive:      # global + adaptive: cells of one element (Fluid sets ksize = the volume)
            maps = [adaptive_map([n], [n if glob else kk])[0] for n, kk in zip(spatial, sizes)]
        elif glob:
            maps = [patch_map([n], [n], [1], [(0, 0)], [1])[0] for n in spatial]
        else:
            strides = [int(v) for v in attrs["strides"]]
            if len(strides) != 3 or min(strides) < 1:
                e.fail(f"strides {strides}")
            pads = pool_pads(spatial, attrs)
            ceil = bool(attrs.get("ceil_mode"))
            outs = [pool_out_size(n, kk, st, *p, ceil)
                    for n, kk, st, p in zip(spatial, ksize, strides, pads)]
            if any(o < 1 or o * kk > MAX_AXIS_TABLE for o, kk in zip(outs, ksize)):
                e.fail(f"output size {outs} of windows {ksize}")
            maps = [patch_map([n], [kk], [st], [p], [1], ceil, pool=True)[0]
                    for n, kk, st, p in zip(spatial, ksize, strides, pads)]
    except ShapeError as err:
        e.fail(str(err))
    if any(m.size > MAX_AXIS_TABLE for m in maps):
        e.fail(f"window tables of {[m.shape for m in maps]} entries")
    if int(np.prod([m.shape[1] for m in maps])) > MAX_WINDOW:
        e.fail(f"windows of {[m.shape[1] for m in maps]} taps")
    return maps


def _pool_tables(e, attrs, spatial):
    """C++ declaring the fl::PoolTabs3 `pt` of a pooling over `spatial`, and the output's
    spatial size."""
    maps = _axis_windows(e, attrs, spatial)
    code = " ".join(f"static const int64_t {name}[] = {c_ints(m.ravel().tolist())};"
                    for name, m in zip(("pzd", "pzh", "pzw"), maps))
    outs = [m.shape[0] for m in maps]
    vals = [*spatial, *outs, *(m.shape[1] for m in maps)]
    code += f" const fl::PoolTabs3 pt{{{{pzd, pzh, pzw}}, {', '.join(map(str, vals))}}};"
    return code, outs, maps


def _pool_input(e, attrs):
    x = e.input("X")
    e.require_float(x)
    if channel_last(attrs.get("data_format", "NCDHW")):
        e.fail("NDHWC layout")
    if x.ndim != 5 or not all(e.is_lit(d) for d in x.dims[2:]):
        e.fail(f"X{x.dims}: volume not known when compiling")
    return x, [int(d) for d in x.dims[2:]]


def _exclusive(e):
    """Whether the average divides by the taps inside the input (the kernel's rule)."""
    return bool(e.attr("exclusive") or e.attr("adaptive"))


@register("pool3d", "cpu")
def pool3d(e):
    """Each window's maximum (a NaN wins, padding is -inf) or the pairwise sum of its taps
    (padding as 0) divided as the kernel divides."""
    kind = e.attr("pooling_type")
    if kind not in ("max", "avg"):
        e.fail(f"pooling_type {kind!r}")
    x, spatial = _pool_input(e, e.attrs)
    tables, outs, maps = _pool_tables(e, e.attrs, spatial)
    out = e.output("Out", list(x.dims[:2]) + [str(v) for v in outs])
    planes = e.mul(x.dims[0], x.dims[1])
    e.code(tables)
    if kind == "max":
        e.code(f"fl::pool3d_max({x}, {out}, nullptr, pt, {planes});")
    else:
        win = e.scratch([str(int(np.prod([m.shape[1] for m in maps])))])
        e.code(f"fl::pool3d_avg({x}, {out}, pt, {planes}, {str(_exclusive(e)).lower()}, "
               f"{win});")


@register("pool3d_grad", "cpu")
def pool3d_grad(e):
    """max: each output's gradient to its window's first maximum, added in float; avg:
    spread over the window's inside taps, in double when exclusive (the kernel divides by
    an int64 count array there), else in float."""
    kind = e.attr("pooling_type")
    if kind not in ("max", "avg"):
        e.fail(f"pooling_type {kind!r}")
    x, spatial = _pool_input(e, e.attrs)
    dout = e.input("Out@GRAD")
    e.require_float(dout)
    tables, outs, _ = _pool_tables(e, e.attrs, spatial)
    check_dims(e, dout, list(x.dims[:2]) + [str(v) for v in outs], "Out@GRAD")
    dx = e.output("X@GRAD", x.dims)
    planes = e.mul(x.dims[0], x.dims[1])
    e.code(tables)
    if kind == "max":
        e.code(f"fl::pool3d_max_grad({x}, {dout}, {dx}, pt, {planes});")
    else:
        acc = e.scratch(x.dims, "double")
        e.code(f"fl::pool3d_avg_grad({dout}, {dx}, pt, {planes}, "
               f"{str(_exclusive(e)).lower()}, {acc});")


def _with_index_attrs(e):
    """max_pool3d_with_index's attributes as pool_map reads them (it has no
    padding_algorithm, ceil_mode or data_format: explicit paddings, NCDHW)."""
    return {"ksize": e.attr("ksize"), "strides": e.attr("strides"),
            "paddings": e.attr("paddings"), "global_pooling": e.attr("global_pooling"),
            "adaptive": e.attr("adaptive")}


@register("max_pool3d_with_index", "cpu")
def max_pool3d_with_index(e):
    """Each window's maximum and, as Mask, the volume position of its first maximum (the
    kernel's argmax over the patch; -1 when that is a padding tap)."""
    attrs = _with_index_attrs(e)
    x, spatial = _pool_input(e, attrs)
    tables, outs, _ = _pool_tables(e, attrs, spatial)
    dims = list(x.dims[:2]) + [str(v) for v in outs]
    out = e.output("Out", dims)
    mask = e.output("Mask", dims, "int32_t") if e.has_output("Mask") else None
    e.code(tables)
    e.code(f"fl::pool3d_max({x}, {out}, {mask if mask is not None else 'nullptr'}, pt, "
           f"{e.mul(x.dims[0], x.dims[1])});")


@register("max_pool3d_with_index_grad", "cpu")
def max_pool3d_with_index_grad(e):
    """Each Out@GRAD element added (in double, the kernel's bincount) to the X element its
    Mask names; a Mask entry outside the volume stops the run naming it. Not compiled when
    the forward's windows can be all padding (its Mask then holds -1, which the kernel
    adds to the previous plane)."""
    x, mask, dout = e.input("X"), e.input("Mask"), e.input("Out@GRAD")
    e.require_float(x, dout)
    if mask is None or mask.ctype != "int32_t":
        e.fail("Mask is not int32")
    attrs = _with_index_attrs(e)
    x, spatial = _pool_input(e, attrs)
    _, outs, maps = _pool_tables(e, attrs, spatial)
    if any(not (m >= 0).any(axis=1).all() for m in maps):
        e.fail("a window lies wholly in the padding")
    dims = list(x.dims[:2]) + [str(v) for v in outs]
    check_dims(e, dout, dims, "Out@GRAD")
    check_dims(e, mask, dims, "Mask")
    dx = e.output("X@GRAD", x.dims)
    acc = e.scratch(x.dims, "double")
    e.code(f"if (int rc = fl::max_pool3d_index_grad({mask}, {dout}, {dx}, {acc}, "
           f"{e.mul(x.dims[0], x.dims[1])}, {int(np.prod(outs))}, {int(np.prod(spatial))}, "
           f"err, {e.k})) return rc;")


# --- trilinear_interp -------------------------------------------------------------------------
def _tap_table(name, a):
    """C tables of matrix a's rows as taps: (code, taps per row) with the column index
    (i<name>) and float64 weight (w<name>) of each, unused taps index 0 weight 0."""
    taps = max(int((a != 0).sum(1).max()), 1)
    idx, wt = [], []
    for row in a:
        cols = np.nonzero(row)[0].tolist()
        wt += [repr(float(row[c])) for c in cols] + ["0.0"] * (taps - len(cols))
        idx += cols + [0] * (taps - len(cols))
    return (f"static const int64_t i{name}[] = {c_ints(idx)}; "
            f"static const double w{name}[] = {{{', '.join(wt)}}};"), taps


def _trilinear_plan(e, x):
    """(C++ declaring the fl::Taps3 `tt`, the output's volume, or None when the kernel
    copies X) of a compiled trilinear_interp: NCDHW float X of literal volume, the output
    size from the attributes or tensors whose values the segment knows."""
    e.require_float(x)
    if channel_last(e.attr("data_layout")):
        e.fail("NDHWC layout")
    if x.ndim != 5 or not all(e.is_lit(d) for d in x.dims[2:]):
        e.fail(f"X{x.dims}: a 5-D X of volume known when compiling")
    ins = [int(d) for d in x.dims[2:]]
    try:
        interp_ops.check_method(e.attr("interp_method"), 5, e.op.type)
        outs = interp_ops.out_size(e.attrs, ins, *size_inputs(e))
    except ShapeError as err:
        e.fail(str(err))
    if max(outs) > MAX_OUT:
        e.fail(f"an output size {outs} past {MAX_OUT}")
    if outs == ins:
        return None, outs
    mats = interp_ops.maps(e.attrs, ins, outs, np.dtype(np.float32))
    tables, taps = zip(*(_tap_table(n, a) for n, a in zip("dhw", mats)))
    vals = [*taps, *ins, *outs]
    return (" ".join(tables) + f" const fl::Taps3 tt{{{{id, ih, iw}}, {{wd, wh, ww}}, "
            f"{', '.join(map(str, vals))}}};"), outs


@register("trilinear_interp", "cpu")
def trilinear_interp(e):
    """Each output the float64 sum of its taps' weighted inputs, rounded to float (the
    kernel's float64 einsum over the same matrices); a copy when the size is unchanged."""
    x = e.input("X")
    plan, outs = _trilinear_plan(e, x)
    out = e.output("Out", list(x.dims[:2]) + [str(v) for v in outs])
    if plan is None:
        e.code(f"std::memcpy({out}, {x}, sizeof(float) * {out.numel()});")
        return
    e.code(plan)
    e.code(f"fl::resize3({x}, {out}, tt, {e.mul(x.dims[0], x.dims[1])});")


@register("trilinear_interp_grad", "cpu")
def trilinear_interp_grad(e):
    """The adjoint: each Out@GRAD element spread over its taps in float64, rounded to
    float at the end."""
    x, d = e.input("X"), e.input("Out@GRAD")
    e.require_float(d)
    plan, outs = _trilinear_plan(e, x)
    check_dims(e, d, list(x.dims[:2]) + [str(v) for v in outs], "Out")
    dx = e.output("X@GRAD", x.dims)
    if plan is None:
        e.code(f"std::memcpy({dx}, {d}, sizeof(float) * {dx.numel()});")
        return
    acc = e.scratch(x.dims, "double")
    e.code(plan)
    e.code(f"fl::resize3_grad({d}, {dx}, {acc}, tt, {e.mul(x.dims[0], x.dims[1])});")
