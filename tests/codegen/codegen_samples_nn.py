"""Samples of the compiled forms of broadcasting elementwise ops (any set of dims, either
operand), matmul / matmul_v2 / bmm with broadcast batch dims and 1-D operands, pool2d
(adaptive, NHWC), max_pool2d_with_index, conv2d_transpose, prelu and pad3d. Compiled vs the
numpy kernels by test_emitters.py, forward and gradient."""
import numpy as np
from codegen_samples import f32, rng


def bcast(op, x_shape, y_shape, axis=-1, lo=-2.0, hi=2.0):
    """elementwise `op` over X, Y of these shapes (Paddle's axis rule, then numpy's)."""
    def sample():
        return ({"X": f32(*x_shape, lo=lo, hi=hi), "Y": f32(*y_shape, lo=lo, hi=hi)},
                {"axis": axis}, ["X", "Y"])
    return sample


def mm(x_shape, y_shape, tx=False, ty=False, names=("trans_x", "trans_y"), **attrs):
    """matmul-like op over X, Y of these shapes (attrs: the transpose flags by `names`)."""
    def sample():
        flags = {names[0]: tx, names[1]: ty} if names else {}
        return {"X": f32(*x_shape), "Y": f32(*y_shape)}, {**flags, **attrs}, ["X", "Y"]
    return sample


SAMPLES = {
    "bmm": mm((3, 2, 4), (3, 4, 5), names=None),
}

EXTRA = {
    "elementwise_add attention mask [n,1,1,s] over [n,h,s,s]": (
        "elementwise_add", bcast("elementwise_add", (2, 2, 3, 4), (2, 1, 1, 4))),
    "elementwise_mul Y over dims 0 and 2": ("elementwise_mul",
                                            bcast("elementwise_mul", (3, 2, 4), (3, 1, 4))),
    "elementwise_sub X broadcast to Y": ("elementwise_sub",
                                         bcast("elementwise_sub", (3, 1), (2, 3, 4))),
    "elementwise_div both broadcast": ("elementwise_div",
                                       bcast("elementwise_div", (3, 1, 4), (1, 5, 1), lo=0.5)),
    "elementwise_max Y at axis 0 of rank 2, trailing 1": (
        "elementwise_max", bcast("elementwise_max", (3, 2, 4), (3, 1), axis=0)),
    "elementwise_min lower-rank X at axis 1": (
        "elementwise_min", bcast("elementwise_min", (2,), (3, 2, 4), axis=1)),
}

MATMULS = {   # description: (X, Y, trans_x, trans_y)
    "attention scores [b,h,s,d] x [b,h,s,d]^T": ((2, 2, 3, 4), (2, 2, 3, 4), False, True),
    "linear [b,s,d] x [d,k]": ((2, 3, 4), (4, 5), False, False),
    "linear [b,s,d] x [k,d]^T": ((2, 3, 4), (5, 4), False, True),
    "[b,1,s,d] x [d,k]": ((2, 1, 3, 4), (4, 5), False, False),
    "batch broadcast [2,1,s,d] x [3,d,k]": ((2, 1, 3, 4), (3, 4, 5), False, False),
    "X transposed, Y one matrix [b,d,s]^T x [d,k]": ((2, 4, 3), (4, 5), True, False),
    "[s,d] x [b,d,k] both transposed": ((4, 3), (2, 5, 4), True, True),
    "1-D X": ((4,), (2, 4, 5), False, False),
    "1-D Y": ((2, 3, 4), (4,), False, False),
    "1-D Y, X transposed": ((2, 4, 3), (4,), True, False),
}
EXTRA.update({f"matmul_v2 {k}": ("matmul_v2", mm(*v)) for k, v in MATMULS.items()})
EXTRA.update({
    "matmul alpha, batch broadcast": ("matmul", mm(
        (3, 1, 2, 4), (2, 5, 4), False, True, ("transpose_X", "transpose_Y"), alpha=0.5)),
    "matmul alpha, folded": ("matmul", mm(
        (3, 2, 4), (4, 5), False, False, ("transpose_X", "transpose_Y"), alpha=-1.5)),
})


def pool(ptype, shape=(2, 3, 5, 6), **attrs):
    """pool2d of `ptype` over X of `shape` (NCHW unless data_format says)."""
    def sample():
        return ({"X": f32(*shape)}, {"pooling_type": ptype, "ksize": [3, 2], "strides": [2, 2],
                                     "paddings": [1, 0], **attrs}, ["X"])
    return sample


def max_pool_with_index(**attrs):
    def sample():
        return ({"X": f32(int(rng.integers(1, 3)), 3, 5, 7)},
                {"ksize": [3, 2], "strides": [2, 2], "paddings": [1, 0], **attrs}, ["X"])
    return sample


SAMPLES["max_pool2d_with_index"] = max_pool_with_index()
EXTRA.update({
    "pool2d adaptive avg": ("pool2d", pool("avg", adaptive=True, ksize=[2, 4])),
    "pool2d adaptive max": ("pool2d", pool("max", (1, 2, 7, 5), adaptive=True, ksize=[3, 3])),
    "pool2d adaptive avg 1x1 (global)": ("pool2d", pool("avg", adaptive=True, ksize=[1, 1])),
    "pool2d NHWC max": ("pool2d", pool("max", (2, 5, 6, 3), data_format="NHWC")),
    "pool2d NHWC avg ceil": ("pool2d", pool("avg", (2, 5, 6, 3), data_format="NHWC",
                                            ceil_mode=True, exclusive=False)),
    "pool2d NHWC adaptive avg": ("pool2d", pool("avg", (1, 7, 5, 4), data_format="NHWC",
                                                adaptive=True, ksize=[3, 2])),
    # windows wider than the input by less than the stride (GoogLeNet's last pool): one
    # output over the input's taps
    "pool2d avg window past the input": ("pool2d", pool("avg", ksize=[6, 7], strides=[6, 7],
                                                         paddings=[0, 0])),
    "pool2d max window past the input": ("pool2d", pool("max", ksize=[6, 7], strides=[6, 7],
                                                         paddings=[0, 0])),
    "max_pool2d_with_index adaptive": ("max_pool2d_with_index",
                                       max_pool_with_index(adaptive=True, ksize=[3, 4])),
    "max_pool2d_with_index global": ("max_pool2d_with_index",
                                     max_pool_with_index(global_pooling=True)),
})


def prelu(mode, x_shape, alpha_shape, fmt="NCHW"):
    def sample():
        return ({"X": f32(*x_shape), "Alpha": f32(*alpha_shape, lo=0.05, hi=0.5)},
                {"mode": mode, "data_format": fmt}, ["X", "Alpha"])
    return sample


SAMPLES["prelu"] = prelu("channel", (2, 3, 4, 5), (3,))
EXTRA.update({
    "prelu all": ("prelu", prelu("all", (2, 3, 4), (1,))),
    "prelu channel NHWC": ("prelu", prelu("channel", (2, 4, 5, 3), (3,), "NHWC")),
    "prelu element": ("prelu", prelu("element", (3, 2, 4), (1, 2, 4))),
})


def conv_transpose(groups=1, bias=False, **attrs):
    def sample():
        n, c, mg = int(rng.integers(1, 3)), 2 * groups, 2
        ins = {"Input": f32(n, c, 4, 3), "Filter": f32(c, mg, 3, 2)}
        if bias:
            ins["Bias"] = f32(groups * mg)
        return (ins, {"strides": [2, 1], "paddings": [1, 0], "groups": groups,
                      "dilations": [1, 2], **attrs}, list(ins))
    return sample


SAMPLES["conv2d_transpose"] = conv_transpose()
EXTRA.update({
    "conv2d_transpose groups, bias, output_padding": ("conv2d_transpose", conv_transpose(
        2, True, output_padding=[1, 0])),
    "conv2d_transpose output_size, 4 paddings": ("conv2d_transpose", conv_transpose(
        1, False, output_size=[8, 3], paddings=[1, 0, 0, 1], dilations=[1, 1])),
})


def pad3d(mode, fmt="NCDHW", paddings=(1, 0, 0, 2, 1, 1), **attrs):
    def sample():
        shape = (2, 3, 2, 3, 4) if fmt == "NCDHW" else (2, 2, 3, 4, 3)
        return ({"X": f32(*shape)}, {"mode": mode, "data_format": fmt,
                                     "paddings": list(paddings), **attrs}, ["X"])
    return sample


SAMPLES["pad3d"] = pad3d("constant", value=0.5)
EXTRA.update({
    "pad3d reflect": ("pad3d", pad3d("reflect")),
    "pad3d replicate NDHWC": ("pad3d", pad3d("replicate", "NDHWC", (2, 1, 0, 2, 3, 0))),
    "pad3d circular": ("pad3d", pad3d("circular", paddings=(3, 1, 2, 0, 0, 1))),
})


def interp(method, shape=(2, 3, 5, 6), **attrs):
    def sample():
        return {"X": f32(*shape)}, {"interp_method": method, **attrs}, ["X"]
    return sample


SAMPLES.update({
    "bilinear_interp_v2": interp("bilinear", out_h=9, out_w=4, align_corners=False,
                                 align_mode=0),
    "nearest_interp_v2": interp("nearest", scale=[2.0, 1.5], align_corners=False),
})
EXTRA.update({
    "bilinear_interp_v2 align_corners": ("bilinear_interp_v2", interp(
        "bilinear", out_h=7, out_w=11, align_corners=True)),
    "bilinear_interp_v2 align_mode 1, NHWC": ("bilinear_interp_v2", interp(
        "bilinear", (2, 5, 6, 3), out_h=3, out_w=8, align_corners=False, align_mode=1,
        data_layout="NHWC")),
    "nearest_interp_v2 align_corners, NHWC": ("nearest_interp_v2", interp(
        "nearest", (1, 4, 5, 2), out_h=7, out_w=3, align_corners=True, data_layout="NHWC")),
})
