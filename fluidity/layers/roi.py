"""Region-of-interest pooling layers (Fluid 1.8 defines them in fluid.layers.nn): roi_pool,
roi_align, psroi_pool, prroi_pool. Ops in fluidity/ops/roi.py.

`rois` is a LoDTensor [num_rois, 4] of boxes (x1, y1, x2, y2) in input-image coordinates,
one sequence of boxes per image of `input`; `rois_lod` (roi_pool, roi_align: offsets
[N + 1]) or `batch_roi_nums` (prroi_pool: boxes per image [N]) say the same thing as a
tensor, for boxes without a LoD."""
from ..layer_helper import LayerHelper
from .checks import check_dtype_of

__all__ = ["roi_pool", "roi_align", "psroi_pool", "prroi_pool"]


def _int(layer, arg, v):
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{layer}: {arg} must be int type, got {type(v).__name__}")
    return v


def _float(layer, arg, v):
    if not isinstance(v, float):
        raise TypeError(f"{layer}: {arg} must be float type, got {type(v).__name__}")
    return v


def _pool(op_type, name, input, rois, attrs, extra_inputs=None, argmax=False):
    helper = LayerHelper(op_type, name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    outputs = {"Out": out}
    if argmax:
        outputs["Argmax"] = helper.create_variable_for_type_inference("int64",
                                                                      stop_gradient=True)
    inputs = {"X": input, "ROIs": rois}
    inputs.update({k: v for k, v in (extra_inputs or {}).items() if v is not None})
    helper.append_op(op_type, inputs=inputs, outputs=outputs, attrs=attrs)
    return out


def roi_pool(input, rois, pooled_height=1, pooled_width=1, spatial_scale=1.0, rois_lod=None):
    """Max pooling of `input` [N, C, H, W] over each box's pooled_height x pooled_width bins:
    [num_rois, C, pooled_height, pooled_width] (Fast R-CNN)."""
    check_dtype_of("roi_pool", "input", input, ("float32",))
    check_dtype_of("roi_pool", "rois", rois, ("float32",))
    return _pool("roi_pool", None, input, rois,
                 {"pooled_height": pooled_height, "pooled_width": pooled_width,
                  "spatial_scale": spatial_scale}, {"RoisLod": rois_lod}, argmax=True)


def roi_align(input, rois, pooled_height=1, pooled_width=1, spatial_scale=1.0,
              sampling_ratio=-1, name=None, rois_lod=None):
    """Average of bilinearly interpolated samples of `input` over each box's bins (Mask
    R-CNN): [num_rois, C, pooled_height, pooled_width]."""
    check_dtype_of("roi_align", "input", input, ("float32", "float64"))
    check_dtype_of("roi_align", "rois", rois, ("float32", "float64"))
    return _pool("roi_align", name, input, rois,
                 {"pooled_height": pooled_height, "pooled_width": pooled_width,
                  "spatial_scale": spatial_scale, "sampling_ratio": sampling_ratio},
                 {"RoisLod": rois_lod})


def psroi_pool(input, rois, output_channels, spatial_scale, pooled_height, pooled_width,
               name=None):
    """Position-sensitive average pooling (R-FCN): bin (i, j) of output channel c reads input
    channel (c * pooled_height + i) * pooled_width + j; [num_rois, output_channels,
    pooled_height, pooled_width]."""
    check_dtype_of("psroi_pool", "input", input, ("float32", "float64"))
    check_dtype_of("psroi_pool", "rois", rois, ("float32", "float64"))
    return _pool("psroi_pool", name, input, rois,
                 {"output_channels": _int("psroi_pool", "output_channels", output_channels),
                  "spatial_scale": _float("psroi_pool", "spatial_scale", spatial_scale),
                  "pooled_height": _int("psroi_pool", "pooled_height", pooled_height),
                  "pooled_width": _int("psroi_pool", "pooled_width", pooled_width)})


def prroi_pool(input, rois, spatial_scale=1.0, pooled_height=1, pooled_width=1,
               batch_roi_nums=None, name=None):
    """Precise RoI pooling: the integral of the bilinearly interpolated `input` over each bin
    divided by the bin's area, differentiable in `input` and in `rois`."""
    check_dtype_of("prroi_pool", "input", input, ("float32",))
    check_dtype_of("prroi_pool", "rois", rois, ("float32",))
    return _pool("prroi_pool", name, input, rois,
                 {"spatial_scale": _float("prroi_pool", "spatial_scale", spatial_scale),
                  "pooled_height": _int("prroi_pool", "pooled_height", pooled_height),
                  "pooled_width": _int("prroi_pool", "pooled_width", pooled_width)},
                 {"BatchRoINums": batch_roi_nums})
