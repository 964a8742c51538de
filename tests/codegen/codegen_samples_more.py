"""Samples of the compiled forms of Fluid 1.x ops that cut segments before (issue 29, the
second list): the 1.x resize ops (bilinear_interp, nearest_interp, bicubic_interp), ...
Each compiled vs its numpy kernel by test_emitters.py, forward and gradient."""
from codegen_samples import f32


def resize(method, shape=(2, 3, 5, 6), **attrs):
    """A Fluid 1.x resize of X `shape` with `attrs`."""
    def sample():
        return {"X": f32(*shape)}, {"interp_method": method, **attrs}, ["X"]
    return sample


SAMPLES = {
    "bilinear_interp": resize("bilinear", out_h=9, out_w=4, align_corners=False,
                              align_mode=0),
    "nearest_interp": resize("nearest", scale=1.5, align_corners=False),
    "bicubic_interp": resize("bicubic", out_h=7, out_w=11, align_corners=False),
}
EXTRA = {
    "bilinear_interp align_corners (default)": ("bilinear_interp", resize(
        "bilinear", out_h=10, out_w=3)),
    "bilinear_interp align_mode 1, scale 2, NHWC": ("bilinear_interp", resize(
        "bilinear", (2, 4, 3, 3), scale=2.0, align_corners=False, align_mode=1,
        data_layout="NHWC")),
    "bilinear_interp same size (a copy)": ("bilinear_interp", resize(
        "bilinear", out_h=5, out_w=6, align_corners=False, align_mode=0)),
    "bilinear_interp to 1x1": ("bilinear_interp", resize("bilinear", out_h=1, out_w=1)),
    "nearest_interp align_corners, NHWC": ("nearest_interp", resize(
        "nearest", (1, 4, 4, 2), out_h=7, out_w=3, data_layout="NHWC")),
    "nearest_interp downsample": ("nearest_interp", resize(
        "nearest", out_h=2, out_w=3, align_corners=False)),
    "bicubic_interp align_corners, NHWC": ("bicubic_interp", resize(
        "bicubic", (1, 4, 5, 2), out_h=9, out_w=3, data_layout="NHWC")),
}
