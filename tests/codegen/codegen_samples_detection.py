"""Samples of the compiled detection ops: spp (emit/cpu/pyramid.py; levels with windows
wholly in the padding too), sigmoid_focal_loss (emit/cpu/focal.py; gamma 2 takes numpy's
square, others float32 pow), the box ops (emit/cpu/boxes.py) and yolo_box (emit/cpu/yolo.py).
Compiled vs the numpy kernels by test_emitters.py, forward and gradient."""
import numpy as np
from codegen_samples import f32, rng


def focal(n=5, c=4, **attrs):
    def sample():
        label = rng.integers(-1, c + 1, (n, 1)).astype(np.int32)
        return ({"X": f32(n, c, lo=-4.0, hi=4.0), "Label": label,
                 "FgNum": np.array([3], np.int32)}, attrs, ["X"])
    return sample


SAMPLES = {
    "sigmoid_focal_loss": focal(),
}
EXTRA = {
    "sigmoid_focal_loss gamma 1.5, alpha 0.4": ("sigmoid_focal_loss", focal(gamma=1.5,
                                                                             alpha=0.4)),
    "sigmoid_focal_loss FgNum 0": ("sigmoid_focal_loss", lambda: (
        {"X": f32(3, 2), "Label": np.array([[1], [0], [2]], np.int64),
         "FgNum": np.array([0], np.int32)}, {}, ["X"])),
}


def spp(shape, **attrs):
    def sample():
        return {"X": f32(*shape)}, attrs, ["X"]
    return sample


SAMPLES["spp"] = spp((2, 3, 5, 7), pyramid_height=3, pooling_type="max")
EXTRA.update({
    "spp avg": ("spp", spp((2, 2, 6, 5), pyramid_height=3, pooling_type="avg")),
    "spp map smaller than its bins": ("spp", spp((1, 2, 3, 2), pyramid_height=3,
                                                 pooling_type="avg")),
    "spp max, one level": ("spp", spp((3, 2, 4, 4), pyramid_height=1, pooling_type="max")),
})


def boxes(n, lo=0.0, hi=1.0):
    """n boxes (xmin, ymin, xmax, ymax), min below max."""
    a, b = f32(n, 2, lo=lo, hi=hi), f32(n, 2, lo=lo, hi=hi)
    return np.concatenate([np.minimum(a, b), np.maximum(a, b) + 0.01], 1).astype(np.float32)


def prior_box(**attrs):
    def sample():
        a = {"min_sizes": [4.0, 8.0], "max_sizes": [6.0, 12.0], "aspect_ratios": [2.0],
             "variances": [0.1, 0.1, 0.2, 0.2], "flip": True, "clip": True}
        a.update(attrs)
        return {"Input": f32(2, 3, 4, 5), "Image": f32(2, 3, 32, 40)}, a, None
    return sample


def box_coder(code, axis=0, var=None, **attrs):
    def sample():
        prior = boxes(5, 0.1, 0.6)
        ins = {"PriorBox": prior}
        if var == "tensor":
            ins["PriorBoxVar"] = f32(5, 4, lo=0.1, hi=0.3)
        if code == "encode_center_size":
            ins["TargetBox"] = boxes(3, 0.2, 0.9)
        else:
            ins["TargetBox"] = f32(3, 5, 4, lo=-1, hi=1) if axis == 0 else f32(5, 3, 4, lo=-1,
                                                                                 hi=1)
        a = {"code_type": code, "axis": axis, **attrs}
        if var == "attr":
            a["variance"] = [0.1, 0.1, 0.2, 0.2]
        return ins, a, None
    return sample


SAMPLES.update({
    "prior_box": prior_box(),
    "density_prior_box": lambda: ({"Input": f32(1, 2, 3, 4), "Image": f32(1, 3, 24, 32)},
                                  {"variances": [0.1, 0.1, 0.2, 0.2], "fixed_sizes": [8.0, 16.0],
                                   "fixed_ratios": [1.0, 2.0], "densities": [2, 1]}, None),
    "anchor_generator": lambda: ({"Input": f32(1, 2, 3, 4)}, {
        "anchor_sizes": [32.0, 64.0], "aspect_ratios": [0.5, 1.0, 2.0],
        "variances": [0.1, 0.1, 0.2, 0.2], "stride": [8.0, 8.0]}, None),
    "iou_similarity": lambda: ({"X": boxes(4), "Y": boxes(3)}, {}, None),
    "box_coder": box_coder("encode_center_size", var="tensor"),
    "box_clip": lambda: ({"Input": f32(5, 4, lo=-10, hi=60),
                          "ImInfo": np.array([[40, 50, 1.5]], np.float32)}, {}, None),
})
EXTRA.update({
    "prior_box min_max order, no clip, steps": ("prior_box", prior_box(
        min_max_aspect_ratios_order=True, clip=False, step_w=6.0, step_h=7.0, offset=0.3)),
    "density_prior_box flattened": ("density_prior_box", lambda: (
        {"Input": f32(1, 2, 2, 3), "Image": f32(1, 3, 16, 24)},
        {"variances": [0.1, 0.1, 0.2, 0.2], "fixed_sizes": [4.0], "fixed_ratios": [1.0],
         "densities": [3], "flatten_to_2d": True, "clip": False}, None)),
    "iou_similarity unnormalized": ("iou_similarity", lambda: (
        {"X": boxes(3, 0, 20), "Y": boxes(5, 0, 20)}, {"box_normalized": False}, None)),
    "box_coder encode, variance attribute, unnormalized": ("box_coder", box_coder(
        "encode_center_size", var="attr", box_normalized=False)),
    "box_coder encode, no variance": ("box_coder", box_coder("encode_center_size")),
    "box_coder decode axis 0": ("box_coder", box_coder("decode_center_size", 0, "tensor")),
    "box_coder decode axis 1, variance attribute": ("box_coder", box_coder(
        "decode_center_size", 1, "attr")),
    "box_coder decode, no variance, unnormalized": ("box_coder", box_coder(
        "decode_center_size", 0, box_normalized=False)),
})


def clip_two_images():
    from fluidity.core.tensor import LoDTensor
    x = LoDTensor(f32(5, 4, lo=-10, hi=60))
    x.set_recursive_sequence_lengths([[2, 3]])
    return ({"Input": x, "ImInfo": np.array([[40, 50, 1.5], [30, 20, 0.5]], np.float32)}, {},
            None)


EXTRA["box_clip two images (LoD)"] = ("box_clip", clip_two_images)


def yolo(classes=3, anchors=(10, 13, 16, 30), h=4, w=5, **attrs):
    def sample():
        an = len(anchors) // 2
        a = {"class_num": classes, "anchors": list(anchors), "downsample_ratio": 8,
             "conf_thresh": 0.3}
        a.update(attrs)
        return ({"X": f32(2, an * (5 + classes), h, w, lo=-3, hi=3),
                 "ImgSize": np.array([[32, 40], [30, 50]], np.int32)}, a, None)
    return sample


SAMPLES["yolo_box"] = yolo()
EXTRA["yolo_box no clip, 3 anchors"] = ("yolo_box", yolo(2, (10, 13, 16, 30, 33, 23),
                                                         clip_bbox=False))
