"""C++ emitter of yolo_box (YOLOv3's decoder, ops/detection_loss.py) in the numpy kernel's
precisions: the box centres in double (the kernel adds an int64 grid to float32 sigmoids,
which numpy takes in float64), the sizes, the objectness and the class scores in float32,
each box rounded to float32 as it is stored; zero where the objectness is below
conf_thresh. X's channels, height and width must be known when compiling."""
from .. import register
from ..checks import check_dims, dense_only
from ..literals import f32


@register("yolo_box", "cpu")
def yolo_box(e):
    x, img = e.input("X"), e.input("ImgSize")
    dense_only(e, x, img)
    e.require_float(x)
    if img.ctype not in ("int32_t", "int64_t"):
        e.fail(f"ImgSize is {img.ctype}")
    anchors, classes = [int(a) for a in e.attr("anchors")], e.attr("class_num")
    if not anchors or len(anchors) % 2 or classes <= 0:
        e.fail(f"anchors {anchors}, class_num {classes}")
    an = len(anchors) // 2
    if x.ndim != 4 or not all(e.is_lit(d) for d in x.dims[1:]) or \
            int(x.dims[1]) != an * (5 + classes):
        e.fail(f"X{x.dims} is not [N, {an} * (5 + {classes}), H, W] of literal H, W")
    n, h, w = x.dims[0], int(x.dims[2]), int(x.dims[3])
    check_dims(e, img, [n, "2"], "[N, 2]")
    boxes = e.output("Boxes", [n, str(an * h * w), "4"], lod_from=False)
    scores = e.output("Scores", [n, str(an * h * w), str(classes)], lod_from=False)
    size = f32(int(e.attr("downsample_ratio")) * h)
    aw = ", ".join(f32(float(a)) for a in anchors[0::2])
    ah = ", ".join(f32(float(a)) for a in anchors[1::2])
    clip = e.attr("clip_bbox")
    x0, y0 = ("fl::fmaxnp_d(cx - hw, 0.0)", "fl::fmaxnp_d(cy - hh, 0.0)") if clip else \
        ("cx - hw", "cy - hh")
    x1, y1 = ("fl::fminnp_d(cx + hw, (double)(iw - 1.0f))",
              "fl::fminnp_d(cy + hh, (double)(ih - 1.0f))") if clip else ("cx + hw", "cy + hh")
    plane = h * w
    e.code(f"{{ const float aw[] = {{{aw}}}, ah[] = {{{ah}}}; "
           f"for (int64_t b = 0; b < {n}; ++b) {{ const float ih = (float){img}[b * 2], "
           f"iw = (float){img}[b * 2 + 1]; for (int64_t a = 0; a < {an}; ++a) "
           f"for (int64_t i = 0; i < {h}; ++i) for (int64_t j = 0; j < {w}; ++j) {{ "
           f"const float* v = {x} + ((b * {an} + a) * {5 + classes}) * {plane} + i * {w} + j; "
           f"const int64_t r = b * {an * plane} + a * {plane} + i * {w} + j; "
           f"float* bo = {boxes} + r * 4; float* so = {scores} + r * {classes}; "
           f"const float conf = fl::sigmoid(v[4 * {plane}]); "
           f"if (!(conf >= {f32(e.attr('conf_thresh'))})) {{ bo[0] = bo[1] = bo[2] = bo[3] = "
           f"0.0f; for (int64_t c = 0; c < {classes}; ++c) so[c] = 0.0f; continue; }} "
           f"const double cx = ((double)j + (double)fl::sigmoid(v[0])) * (double)iw / {h}.0; "
           f"const double cy = ((double)i + (double)fl::sigmoid(v[{plane}])) * (double)ih / "
           f"{h}.0; const float bw = std::exp(v[2 * {plane}]) * aw[a] * iw / {size}; "
           f"const float bh = std::exp(v[3 * {plane}]) * ah[a] * ih / {size}; "
           f"const double hw = (double)(bw / 2.0f), hh = (double)(bh / 2.0f); "
           f"bo[0] = (float)({x0}); bo[1] = (float)({y0}); bo[2] = (float)({x1}); "
           f"bo[3] = (float)({y1}); for (int64_t c = 0; c < {classes}; ++c) "
           f"so[c] = conf * fl::sigmoid(v[(5 + c) * {plane}]); }} }} }}")
