"""Samples of the compiled 3-D sliding-window ops (emit/cpu/volume.py): conv3d (groups, bias,
dilations, SAME padding), conv3d_transpose (groups, output_padding, output_size),
depthwise_conv2d_transpose, pool3d (max and avg, exclusive or not, ceil_mode, global, adaptive),
max_pool3d_with_index, trilinear_interp. Compiled vs the numpy kernels by test_emitters.py,
forward and gradient."""
import numpy as np
from codegen_samples import f32, rng


def conv3d(groups=1, bias=False, shape=(2, 5, 4, 6), k=(3, 2, 3), **attrs):
    def sample():
        n, c, f = int(rng.integers(1, 3)), 2 * groups, 2 * groups
        ins = {"Input": f32(n, c, *shape[1:]), "Filter": f32(f, c // groups, *k)}
        if bias:
            ins["Bias"] = f32(f)
        a = {"strides": [2, 1, 1], "paddings": [1, 0, 1], "groups": groups,
             "dilations": [1, 2, 1]}
        a.update(attrs)
        return ins, a, ["Input", "Filter"]
    return sample


def conv3d_transpose(groups=1, bias=False, **attrs):
    def sample():
        n, c = int(rng.integers(1, 3)), 2 * groups
        ins = {"Input": f32(n, c, 3, 2, 4), "Filter": f32(c, 2, 2, 3, 2)}
        if bias:
            ins["Bias"] = f32(2 * groups)
        a = {"strides": [2, 1, 2], "paddings": [1, 0, 0], "groups": groups,
             "dilations": [1, 1, 2]}
        a.update(attrs)
        return ins, a, ["Input", "Filter"]
    return sample


def dw_transpose():
    c = 3
    return ({"Input": f32(2, c, 4, 3), "Filter": f32(c, 1, 3, 2)},
            {"strides": [2, 1], "paddings": [1, 0], "groups": c, "dilations": [1, 1]},
            ["Input", "Filter"])


def pool3d(ptype, shape=(2, 3, 5, 4, 6), **attrs):
    def sample():
        a = {"pooling_type": ptype, "ksize": [3, 2, 3], "strides": [2, 2, 1],
             "paddings": [1, 0, 1]}
        a.update(attrs)
        return {"X": f32(*shape)}, a, ["X"]
    return sample


def with_index(**attrs):
    def sample():
        a = {"ksize": [2, 3, 2], "strides": [2, 2, 1], "paddings": [1, 1, 0]}
        a.update(attrs)
        return {"X": f32(int(rng.integers(1, 3)), 2, 4, 5, 3)}, a, ["X"]
    return sample


def trilinear(shape=(2, 3, 3, 4, 5), **attrs):
    def sample():
        return {"X": f32(*shape)}, {"interp_method": "trilinear", **attrs}, ["X"]
    return sample


SAMPLES = {
    "trilinear_interp": trilinear(out_d=5, out_h=3, out_w=8, align_corners=False,
                                  align_mode=0),
    "conv3d": conv3d(),
    "conv3d_transpose": conv3d_transpose(),
    "depthwise_conv2d_transpose": dw_transpose,
    "pool3d": pool3d("max"),
    "max_pool3d_with_index": with_index(),
}
EXTRA = {
    "trilinear_interp align_corners (default)": ("trilinear_interp", trilinear(
        out_d=2, out_h=7, out_w=5)),
    "trilinear_interp align_mode 1, scale 1.5": ("trilinear_interp", trilinear(
        scale=1.5, align_corners=False, align_mode=1)),
    "trilinear_interp same size (a copy)": ("trilinear_interp", trilinear(
        out_d=3, out_h=4, out_w=5, align_corners=False)),
    "conv3d groups and bias": ("conv3d", conv3d(groups=2, bias=True)),
    "conv3d SAME padding": ("conv3d", conv3d(padding_algorithm="SAME", dilations=[1, 1, 1])),
    "conv3d 1x1x1": ("conv3d", conv3d(k=(1, 1, 1), strides=[1, 1, 1], paddings=[0, 0, 0],
                                      dilations=[1, 1, 1])),
    "conv3d_transpose groups, bias, output_padding": ("conv3d_transpose", conv3d_transpose(
        2, True, output_padding=[1, 0, 1])),
    "conv3d_transpose output_size": ("conv3d_transpose", conv3d_transpose(
        output_size=[5, 4, 10])),
    "pool3d avg": ("pool3d", pool3d("avg", exclusive=False)),
    "pool3d avg exclusive ceil": ("pool3d", pool3d("avg", ceil_mode=True)),
    "pool3d max ceil": ("pool3d", pool3d("max", ceil_mode=True)),
    "pool3d global avg": ("pool3d", pool3d("avg", global_pooling=True)),
    "pool3d global max": ("pool3d", pool3d("max", global_pooling=True)),
    "pool3d adaptive avg": ("pool3d", pool3d("avg", adaptive=True, ksize=[2, 3, 4])),
    "pool3d adaptive max": ("pool3d", pool3d("max", adaptive=True, ksize=[3, 2, 4])),
    "pool3d avg SAME": ("pool3d", pool3d("avg", padding_algorithm="SAME")),
    "max_pool3d_with_index adaptive": ("max_pool3d_with_index",
                                       with_index(adaptive=True, ksize=[3, 2, 2])),
    "max_pool3d_with_index global": ("max_pool3d_with_index", with_index(global_pooling=True)),
}
