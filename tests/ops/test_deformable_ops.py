"""deformable_conv / deformable_conv_v1 (fluidity/ops/deformable.py): forward against a
per-tap scalar loop, gradients against finite differences, the layer, bad shapes."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.errors import ShapeError
from op_test import check_grad, check_output

rng = np.random.default_rng(5)


def bilinear(img, h, w):
    """img sampled at (h, w): 0 outside (-1, H) x (-1, W); each outside corner reads 0."""
    height, width = img.shape
    if not (-1 < h < height and -1 < w < width):
        return 0.0
    h0, w0 = int(np.floor(h)), int(np.floor(w))
    total = 0.0
    for hc, wc in ((h0, w0), (h0, w0 + 1), (h0 + 1, w0), (h0 + 1, w0 + 1)):
        if 0 <= hc < height and 0 <= wc < width:
            total += (1 - abs(h - hc)) * (1 - abs(w - wc)) * img[hc, wc]
    return total


def deformable_ref(x, offset, mask, w, stride, pad, dil, groups, dg):
    n, c, height, width = x.shape
    m, cg, kh, kw = w.shape
    oh = (height + 2 * pad[0] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (width + 2 * pad[1] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, m, oh, ow))
    for b in range(n):
        for f in range(m):
            g = f // (m // groups)
            for i in range(oh):
                for j in range(ow):
                    acc = 0.0
                    for ci in range(cg):
                        ch = g * cg + ci
                        d = ch // (c // dg)
                        for a in range(kh):
                            for e in range(kw):
                                k = a * kw + e
                                hh = i * stride[0] - pad[0] + a * dil[0] + \
                                    offset[b, d * 2 * kh * kw + 2 * k, i, j]
                                ww = j * stride[1] - pad[1] + e * dil[1] + \
                                    offset[b, d * 2 * kh * kw + 2 * k + 1, i, j]
                                v = bilinear(x[b, ch], hh, ww)
                                if mask is not None:
                                    v *= mask[b, d * kh * kw + k, i, j]
                                acc += v * w[f, ci, a, e]
                    out[b, f, i, j] = acc
    return out


def offsets(shape):
    """Offsets whose fractional parts stay away from the bilinear kinks at integers."""
    whole = rng.integers(-2, 2, size=shape)
    return (whole + rng.uniform(0.2, 0.8, size=shape)).astype(np.float32)


CASES = [  # (x shape, filter shape, stride, pad, dilation, groups, deformable_groups)
    ((1, 2, 4, 4), (2, 2, 2, 2), [1, 1], [1, 1], [1, 1], 1, 1),
    ((1, 4, 5, 4), (4, 2, 2, 3), [2, 1], [1, 1], [1, 2], 2, 2),
]


@pytest.mark.parametrize("xs,fs,stride,pad,dil,groups,dg", CASES)
def test_deformable_conv(xs, fs, stride, pad, dil, groups, dg):
    x = rng.uniform(-1, 1, xs).astype(np.float32)
    w = rng.uniform(-1, 1, fs).astype(np.float32)
    oh = (xs[2] + 2 * pad[0] - dil[0] * (fs[2] - 1) - 1) // stride[0] + 1
    ow = (xs[3] + 2 * pad[1] - dil[1] * (fs[3] - 1) - 1) // stride[1] + 1
    taps = fs[2] * fs[3]
    off = offsets((xs[0], 2 * dg * taps, oh, ow))
    mask = rng.uniform(0, 1, (xs[0], dg * taps, oh, ow)).astype(np.float32)
    attrs = {"strides": stride, "paddings": pad, "dilations": dil, "groups": groups,
             "deformable_groups": dg, "im2col_step": 1}
    ins = {"Input": x, "Offset": off, "Mask": mask, "Filter": w}
    check_output("deformable_conv", ins,
                 {"Output": deformable_ref(x, off, mask, w, stride, pad, dil, groups, dg)},
                 attrs, atol=1e-5)
    check_grad("deformable_conv", ins, ["Input", "Offset", "Mask", "Filter"], attrs)
    ins1 = {"Input": x, "Offset": off, "Filter": w}
    check_output("deformable_conv_v1", ins1,
                 {"Output": deformable_ref(x, off, None, w, stride, pad, dil, groups, dg)},
                 attrs, atol=1e-5)
    check_grad("deformable_conv_v1", ins1, ["Input", "Offset", "Filter"], attrs)


def test_zero_offsets_and_unit_mask_are_conv2d():
    x = rng.uniform(-1, 1, (2, 3, 5, 5)).astype(np.float32)
    w = rng.uniform(-1, 1, (4, 3, 3, 3)).astype(np.float32)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xv = fluid.data("x", [None, 3, 5, 5], "float32")
        off = fluid.data("off", [None, 18, 5, 5], "float32")
        mask = fluid.data("mask", [None, 9, 5, 5], "float32")
        wattr = fluid.ParamAttr(name="w", initializer=fluid.initializer.NumpyArrayInitializer(w))
        dc = fluid.layers.deformable_conv(xv, off, mask, 4, 3, padding=1, param_attr=wattr,
                                          bias_attr=False)
        v1 = fluid.layers.deformable_conv(xv, off, None, 4, 3, padding=1, param_attr="w",
                                          bias_attr=False, modulated=False)
        ref = fluid.layers.conv2d(xv, 4, 3, padding=1, param_attr="w", bias_attr=False)
    assert [op.type for op in main.global_block().ops] == \
        ["deformable_conv", "deformable_conv_v1", "conv2d"]
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    a, b, c = exe.run(main, feed={"x": x, "off": np.zeros((2, 18, 5, 5), np.float32),
                                  "mask": np.ones((2, 9, 5, 5), np.float32)},
                      fetch_list=[dc, v1, ref])
    np.testing.assert_allclose(a, c, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(b, c, rtol=1e-5, atol=1e-5)


def test_bad_offset_shape_and_arguments_are_refused():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [None, 3, 8, 8], "float32")
        off = fluid.data("off", [None, 9, 8, 8], "float32")     # needs 2 * 9 = 18 channels
        mask = fluid.data("mask", [None, 9, 8, 8], "float32")
        with pytest.raises(ShapeError, match=r"deformable_conv.*Offset \[-1, 9, 8, 8\]"):
            fluid.layers.deformable_conv(x, off, mask, 2, 3, padding=1)
        with pytest.raises(TypeError):
            fluid.layers.deformable_conv([1, 3, 8, 8], off, mask, 2, 3)
        with pytest.raises(TypeError):
            fluid.layers.deformable_conv(fluid.data("xi", [None, 3, 8, 8], "int32"), off, mask,
                                         2, 3)


def psroi_ref(x, rois, batch, trans, attrs):
    """Deformable PSRoI pooling, one output element at a time."""
    from fluidity.ops.roi import round_half_away
    n, c, height, width = x.shape
    ph_n, pw_n, s = attrs["pooled_height"], attrs["pooled_width"], attrs["sample_per_part"]
    d, (gh_n, gw_n), (parth, partw) = attrs["output_dim"], attrs["group_size"], \
        attrs["part_size"]
    n_cls = trans.shape[1] // 2
    out = np.zeros((len(rois), d, ph_n, pw_n))
    for r, roi in enumerate(rois):
        sw, sh = round_half_away(roi[0]) * attrs["spatial_scale"] - 0.5, \
            round_half_away(roi[1]) * attrs["spatial_scale"] - 0.5
        rw = max((round_half_away(roi[2]) + 1) * attrs["spatial_scale"] - 0.5 - sw, 0.1)
        rh = max((round_half_away(roi[3]) + 1) * attrs["spatial_scale"] - 0.5 - sh, 0.1)
        for ct in range(d):
            cls = ct // (d // n_cls)
            for i in range(ph_n):
                for j in range(pw_n):
                    pa, pb = int(np.floor(i / ph_n * parth)), int(np.floor(j / pw_n * parth))
                    tx = trans[r, 2 * cls, pa, pb] * attrs["trans_std"]
                    ty = trans[r, 2 * cls + 1, pa, pb] * attrs["trans_std"]
                    w0, h0 = j * rw / pw_n + sw + tx * rw, i * rh / ph_n + sh + ty * rh
                    gw = min(max(int(np.floor(j * gw_n / pw_n)), 0), gw_n - 1)
                    gh = min(max(int(np.floor(i * gh_n / ph_n)), 0), gh_n - 1)
                    ch = (ct * gh_n + gh) * gw_n + gw
                    vals = []
                    for a in range(s):
                        for b in range(s):
                            w, h = w0 + b * rw / pw_n / s, h0 + a * rh / ph_n / s
                            if w < -0.5 or w > width - 0.5 or h < -0.5 or h > height - 0.5:
                                continue
                            vals.append(bilinear(x[batch[r], ch], min(max(h, 0), height - 1),
                                                 min(max(w, 0), width - 1)))
                    out[r, ct, i, j] = np.mean(vals) if vals else 0.0
    return out


def test_deformable_psroi_pooling():
    from fluidity.core.tensor import LoDTensor
    x = rng.uniform(-1, 1, (2, 8, 6, 6)).astype(np.float32)       # output_dim 2 x groups 2x2
    rois = np.array([[0, 0, 9, 7], [2, 3, 11, 11], [4, 1, 8, 10]], np.float32)
    trans = rng.uniform(-1, 1, (3, 2, 2, 2)).astype(np.float32)
    attrs = {"no_trans": False, "spatial_scale": 0.5, "output_dim": 2, "group_size": [2, 2],
             "pooled_height": 2, "pooled_width": 2, "part_size": [2, 2],
             "sample_per_part": 2, "trans_std": 0.1}
    ins = {"Input": x, "ROIs": LoDTensor(rois, [[0, 1, 3]]), "Trans": trans}
    want = psroi_ref(x.astype(np.float64), rois, [0, 1, 1], trans, attrs)
    check_output("deformable_psroi_pooling", ins, {"Output": want}, attrs, atol=1e-5)
    check_grad("deformable_psroi_pooling", ins, ["Input", "Trans"], attrs,
               output_slots=["Output"])
