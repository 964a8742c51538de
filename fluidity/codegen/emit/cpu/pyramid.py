"""C++ emitters of spp (spatial pyramid pooling, ops/pooling_pyramid.py) and its gradient:
per level the map padded as the kernel pads it (runtime/pyramid.h spp_pad), its windows
reduced by fl::reduce over [planes, bins, kh, bins, kw] as numpy reduces the kernel's
window view (max, or the sum divided by the cells inside), written into the level's
columns of Out; the gradient adds each level's share in double (spp_grad_level)."""
from ....ops.pooling_pyramid import level_geometry
from .. import register
from ..checks import check_dims, dense_only
from ..literals import c_ints

# the most pyramid levels compiled: level l has 4^l bins a channel (attributes are data)
MAX_HEIGHT = 10


def _plan(e, x):
    """([(bins, kh, ph, kw, pw, hh, ww), ...] per level, N, C, H, W, Out's width)."""
    dense_only(e, x)
    e.require_float(x)
    if x.ndim != 4 or not all(e.is_lit(d) for d in x.dims[1:]):
        e.fail(f"X{x.dims}: 4-D NCHW of channels and map known when compiling")
    if e.attr("pooling_type") not in ("max", "avg"):
        e.fail(f"pooling_type {e.attr('pooling_type')!r}")
    height = e.attr("pyramid_height")
    if not 1 <= height <= MAX_HEIGHT:
        e.fail(f"pyramid_height {height} outside [1, {MAX_HEIGHT}]")
    c, h, w = (int(d) for d in x.dims[1:])
    if min(c, h, w) < 1:
        e.fail(f"X{x.dims} is empty")
    levels = []
    for lv in range(height):
        bins = 2 ** lv
        (kh, ph), (kw, pw) = level_geometry(h, bins), level_geometry(w, bins)
        levels.append((bins, kh, ph, kw, pw, min(h, bins * kh - ph), min(w, bins * kw - pw)))
    return levels, x.dims[0], c, h, w, (4 ** height - 1) // 3 * c


def _inside(n, k, p, bins):
    """Cells of each of `bins` windows of size k (padding p before, n real cells) inside."""
    return [sum(1 for i in range(k) if 0 <= b * k + i - p < n) for b in range(bins)]


@register("spp", "cpu")
def spp(e):
    x = e.input("X")
    levels, n, c, h, w, width = _plan(e, x)
    out = e.output("Out", [n, str(width)], lod_from=False)
    maxpool = e.attr("pooling_type") == "max"
    planes = e.mul(n, c)
    biggest = max(b * kh * b * kw for b, kh, _, kw, _, _, _ in levels)
    full = e.scratch([planes, str(biggest)])
    res = e.scratch([planes, str(4 ** (len(levels) - 1))])
    at = 0
    for bins, kh, ph, kw, pw, hh, ww in levels:
        bb = bins * bins
        e.code(f"{{ const fl::SppLevel L{c_ints([bins, kh, ph, kw, pw, hh, ww])}; "
               f"fl::spp_pad({x}, {full}, {planes}, {h}, {w}, L, "
               f"{'-FLT_MAX' if maxpool else '0.0f'}); "
               f"const int64_t dims[] = {c_ints([planes, bins, kh, bins, kw])}; "
               f"const bool red[] = {{false, false, true, false, true}}; "
               f"fl::reduce<{'fl::R_MAX' if maxpool else 'fl::R_SUM'}>({full}, {res}, "
               f"nullptr, 5, dims, red); }}")
        if maxpool:
            value = f"{res}[m * {c * bb} + j]"
        else:
            rows, cols = _inside(h, kh, ph, bins), _inside(w, kw, pw, bins)
            e.code(f"{{ static const float cnt{at}[] = "
                   f"{{{', '.join(f'{float(max(r * q, 1))!r}f' for r in rows for q in cols)}}};")
            value = f"{res}[m * {c * bb} + j] / cnt{at}[j % {bb}]"
        e.code(f"for (int64_t m = 0; m < {n}; ++m) for (int64_t j = 0; j < {c * bb}; ++j) "
               f"{out}[m * {width} + {at} + j] = {value};" + ("" if maxpool else " }"))
        at += c * bb


@register("spp_grad", "cpu")
def spp_grad(e):
    x, d = e.input("X"), e.input("Out@GRAD")
    levels, n, c, h, w, width = _plan(e, x)
    e.require_float(d)
    check_dims(e, d, [n, str(width)], "Out")
    dx = e.output("X@GRAD", x.dims, lod_from=False)
    acc = e.scratch(x.dims, "double")
    e.code(f"std::memset({acc}, 0, sizeof(double) * {acc.numel()});")
    at = 0
    maxpool = "true" if e.attr("pooling_type") == "max" else "false"
    for lv in levels:
        e.code(f"{{ const fl::SppLevel L{c_ints(list(lv))}; fl::spp_grad_level({x}, {d}, {acc}, "
               f"{n}, {c}, {h}, {w}, L, {width}, {at}, {maxpool}); }}")
        at += c * lv[0] * lv[0]
    e.code(f"for (int64_t i = 0; i < {dx.numel()}; ++i) {dx}[i] = (float){acc}[i];")
