"""C++ emitters of detection's box ops (ops/boxes.py): prior_box, density_prior_box and
anchor_generator, whose outputs depend only on attributes and on the literal grid and image
sizes (their kernels run here, at generation time, on the checked attributes; the result is
literal data, as assign_value's), and iou_similarity, box_coder and box_clip, element by
element in float32 as the numpy kernels compute them (a Python int or float meeting a
float32 array acts as a float32; np.minimum / np.maximum propagate NaN: fl::fminnp /
fl::fmaxnp)."""
import numpy as np

from ....errors import ExecutionError, ShapeError
from .. import register
from ..checks import check_dims, dense_only, sequences
from ..literals import array_literal, f32

# the most values a generated prior or anchor table holds (SSD's 38 x 38 grid of 4 priors
# is 23,104): its inputs' dims and attributes bound it, checked before it is made
MAX_TABLE = 1 << 16


def _density_priors(attrs):
    dens = [int(d) for d in attrs["densities"]]
    if any(not 0 <= d <= 1 << 8 for d in dens):      # d * d boxes a size and ratio
        return MAX_TABLE
    return sum(len(attrs["fixed_ratios"]) * d * d for d in dens)


# op type -> the most boxes its attributes make at one grid position (checked against
# MAX_TABLE before the kernel runs: a hostile density would make it allocate without bound)
PRIORS = {
    "prior_box": lambda a: (2 * len(a["aspect_ratios"]) + 1) * len(a["min_sizes"])
    + len(a["max_sizes"]),
    "density_prior_box": _density_priors,
    "anchor_generator": lambda a: len(a["aspect_ratios"]) * len(a["anchor_sizes"]),
}


@register("prior_box", "cpu")
@register("density_prior_box", "cpu")
@register("anchor_generator", "cpu")
def grid_constants(e):
    """Each output = the kernel's result for inputs of these shapes (it reads no input
    value), run now and written as a static table copied into the output."""
    ins = [e.input(s.name) for s in e.opdef.inputs]
    for b in ins:
        dense_only(e, b)
        e.require_float(b)
        if b.ndim != 4 or not all(e.is_lit(d) for d in b.dims[2:]):
            e.fail(f"{b.var}{b.dims}: a 4-D input of literal height and width")
    attrs = {n: e.attr(n, nonfinite=True) for n in e.opdef.attrs}
    outs = [s.name for s in e.opdef.outputs]
    per_position = PRIORS[e.op.type](attrs)
    if int(ins[0].dims[2]) * int(ins[0].dims[3]) * per_position * 4 > MAX_TABLE:
        e.fail(f"{per_position} boxes at each of {ins[0].dims[2:]} positions")
    try:
        values = e.opdef.kernel_for(attrs, outs)(
            *[np.zeros([1, 1, int(b.dims[2]), int(b.dims[3])], np.float32) for b in ins])
    except (ExecutionError, ShapeError, ValueError, ZeroDivisionError, OverflowError) as exc:
        e.fail(f"its kernel refuses these attributes: {exc}")
    for slot, v in zip(outs, values):
        v = np.asarray(v)
        data = array_literal(e, v, "float", MAX_TABLE)
        if not e.has_output(slot):
            continue
        out = e.output(slot, [str(d) for d in v.shape], "float", lod_from=False)
        if v.size:
            e.code(f"{{ static const float vals[] = {data}; "
                   f"std::memcpy({out}, vals, sizeof(vals)); }}")


def _extra(e):
    return "0.0f" if e.attr("box_normalized") else "1.0f"


@register("iou_similarity", "cpu")
def iou_similarity(e):
    """Out[i, j] = inter / (area_i + area_j - inter), the kernel's float32 steps."""
    x, y = e.input("X"), e.input("Y")
    dense_only(e, x, y)
    e.require_float(x, y)
    for b in (x, y):
        if b.ndim != 2 or b.dims[1] != "4":
            e.fail(f"{b.var}{b.dims} is not [N, 4]")
    out = e.output("Out", [x.dims[0], y.dims[0]])
    ex = _extra(e)
    e.code(f"for (int64_t i = 0; i < {x.dims[0]}; ++i) for (int64_t j = 0; j < {y.dims[0]}; "
           f"++j) {{ const float* a = {x} + i * 4; const float* b = {y} + j * 4; "
           f"const float aa = (a[2] - a[0] + {ex}) * (a[3] - a[1] + {ex}); "
           f"const float ab = (b[2] - b[0] + {ex}) * (b[3] - b[1] + {ex}); "
           f"const float iw = fl::fminnp(a[2], b[2]) - fl::fmaxnp(a[0], b[0]) + {ex}; "
           f"const float ih = fl::fminnp(a[3], b[3]) - fl::fmaxnp(a[1], b[1]) + {ex}; "
           f"const float in = fl::fmaxnp(iw, 0.0f) * fl::fmaxnp(ih, 0.0f); "
           f"{out}[i * {y.dims[0]} + j] = in / (aa + ab - in); }}")


def _variance(e, prior):
    """(C expression of the variance of coordinate k for prior j, or None) from
    PriorBoxVar [M, 4] or the `variance` attribute (4 numbers, as float32 values)."""
    var, attr = e.input("PriorBoxVar"), list(e.attr("variance"))
    if var is not None and attr:
        e.fail("PriorBoxVar and the attribute variance together")
    if attr and len(attr) != 4:
        e.fail(f"variance {attr} is not 4 numbers")
    if var is not None:
        dense_only(e, var)
        e.require_float(var)
        e.same_dims(prior, var)
        return lambda j, k: f"{var}[({j}) * 4 + {k}]"
    if attr:
        vals = np.asarray(attr, np.float32)
        return lambda j, k: f32(float(vals[k]))
    return None


@register("box_coder", "cpu")
def box_coder(e):
    """encode_center_size: each target's offsets from each prior, / the variance;
    decode_center_size: boxes from offsets against the prior of their column (axis 0) or
    row (axis 1)."""
    prior, target = e.input("PriorBox"), e.input("TargetBox")
    dense_only(e, prior, target)
    e.require_float(prior, target)
    if prior.ndim != 2 or prior.dims[1] != "4":
        e.fail(f"PriorBox{prior.dims} is not [M, 4]")
    var = _variance(e, prior)
    ex, m = _extra(e), prior.dims[0]
    center = ("const float pw = p[2] - p[0] + {ex}, ph = p[3] - p[1] + {ex}; "
              "const float px = p[0] + pw / 2.0f, py = p[1] + ph / 2.0f; ").format(ex=ex)
    code = e.attr("code_type")
    if code == "encode_center_size":
        if target.ndim != 2 or target.dims[1] != "4":
            e.fail(f"TargetBox{target.dims} is not [N, 4]")
        out = e.output("OutputBox", [target.dims[0], m, "4"], lod_from=target)
        div = (lambda k: f" / {var('j', k)}") if var else (lambda k: "")
        e.code(f"for (int64_t i = 0; i < {target.dims[0]}; ++i) for (int64_t j = 0; j < {m}; "
               f"++j) {{ const float* p = {prior} + j * 4; const float* t = {target} + i * 4; "
               f"float* o = {out} + (i * {m} + j) * 4; {center}"
               f"const float tx = (t[2] + t[0]) / 2.0f, ty = (t[3] + t[1]) / 2.0f; "
               f"const float tw = t[2] - t[0] + {ex}, th = t[3] - t[1] + {ex}; "
               f"o[0] = (tx - px) / pw{div(0)}; o[1] = (ty - py) / ph{div(1)}; "
               f"o[2] = std::log(std::fabs(tw / pw)){div(2)}; "
               f"o[3] = std::log(std::fabs(th / ph)){div(3)}; }}")
        return
    if code != "decode_center_size":
        e.fail(f"code_type {code!r}")
    axis = e.attr("axis")
    if axis not in (0, 1) or target.ndim != 3 or target.dims[2] != "4":
        e.fail(f"TargetBox{target.dims} along axis {axis}")
    check_dims(e, prior, [target.dims[1 - axis], "4"], "PriorBox")
    out = e.output("OutputBox", target.dims, lod_from=prior if axis == 1 else target)
    pj = "j" if axis == 0 else "i"
    v = (lambda k: f"{var(pj, k)} * ") if var else (lambda k: "")
    e.code(f"for (int64_t i = 0; i < {target.dims[0]}; ++i) for (int64_t j = 0; j < "
           f"{target.dims[1]}; ++j) {{ const float* p = {prior} + {pj} * 4; const float* t = "
           f"{target} + (i * {target.dims[1]} + j) * 4; float* o = {out} + (i * "
           f"{target.dims[1]} + j) * 4; {center}"
           f"const float cx = {v(0)}t[0] * pw + px, cy = {v(1)}t[1] * ph + py; "
           f"const float w = std::exp({v(2)}t[2]) * pw, h = std::exp({v(3)}t[3]) * ph; "
           f"o[0] = cx - w / 2.0f; o[1] = cy - h / 2.0f; o[2] = cx + w / 2.0f - {ex}; "
           f"o[3] = cy + h / 2.0f - {ex}; }}")


@register("box_clip", "cpu")
def box_clip(e):
    """The boxes of image i (sequence i of Input's LoD; without LoD one image) clipped to
    [0, W - 1] x [0, H - 1], H and W = round(ImInfo[i][0:2] / ImInfo[i][2]) in float32
    (half to even, as np.round)."""
    x, im = e.input("Input"), e.input("ImInfo")
    dense_only(e, x, im)
    e.require_float(x, im)
    if x.ndim < 2 or x.dims[-1] != "4":
        e.fail(f"Input{x.dims}: boxes [..., 4]")
    if im.ndim != 2 or im.dims[1] != "3":
        e.fail(f"ImInfo{im.dims} is not [N, 3]")
    if x.has_lod:
        n = sequences(e, x, "Input")
        start, end = f"{x.lod}[i]", f"{x.lod}[i + 1]"
    else:
        n, start, end = "1", "0", str(x.dims[0])
    e.check(f"{n} != {im.dims[0]}", "box_clip: Input's images (its LoD) are not ImInfo's rows")
    row = e.prod(x.dims[1:])
    out = e.output("Output", x.dims, lod_from=x)
    e.code(f"for (int64_t i = 0; i < {n}; ++i) {{ const float* r = {im} + i * 3; "
           f"const float h = std::nearbyint(r[0] / r[2]) - 1.0f, "
           f"w = std::nearbyint(r[1] / r[2]) - 1.0f; const float lim[4] = {{w, h, w, h}}; "
           f"for (int64_t k = ({start}) * {row}; k < ({end}) * {row}; ++k) "
           f"{out}[k] = fl::fmaxnp(fl::fminnp({x}[k], lim[k % 4]), 0.0f); }}")
