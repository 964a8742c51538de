"""Image layers of Fluid 1.x beyond conv2d/pool2d: conv2d_transpose, adaptive_pool2d, the
image_resize family, prelu, instance_norm, group_norm, the pads and crops, the channel
movers (space_to_depth, pixel_shuffle, shuffle_channel, temporal_shift), maxout,
affine_channel, lrn; and merge_selected_rows / get_tensor_from_selected_rows."""
import numbers

from ..core import dtypes
from ..core.dtypes import VarType
from ..errors import ShapeError
from ..framework import Variable
from ..layer_helper import LayerHelper
from .checks import check_variables
from .manip import one_op_layer
from .nn import padding_attrs, pair, triple

__all__ = ["conv2d_transpose", "adaptive_pool2d", "image_resize", "resize_bilinear",
           "resize_nearest", "image_resize_short", "prelu",
           "instance_norm", "group_norm", "pad", "pad2d", "pad_constant_like", "crop",
           "crop_tensor", "space_to_depth", "pixel_shuffle", "shuffle_channel",
           "temporal_shift", "maxout", "affine_channel", "lrn", "merge_selected_rows",
           "get_tensor_from_selected_rows", "conv3d", "conv3d_transpose", "pool3d",
           "unfold", "deformable_conv", "deformable_roi_pooling"]


def _rank(layer, x, n):
    if len(x.shape) != n:
        raise ShapeError(f"{layer}: input '{x.name}' must be {n}-D, got {list(x.shape)}")


def _positive_int(layer, arg, v):
    if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < 1:
        raise ValueError(f"{layer}: '{arg}' must be a positive int, got {v!r}")
    return int(v)


# --- conv2d_transpose, adaptive_pool2d ---------------------------------------------------------
def conv2d_transpose(input, num_filters, output_size=None, filter_size=None, padding=0,
                     stride=1, dilation=1, groups=None, param_attr=None, bias_attr=None,
                     use_cudnn=True, act=None, name=None, data_format="NCHW"):
    """The transpose (gradient) of conv2d: upsamples NCHW `input` to `num_filters` channels.
    Give filter_size, or output_size and the filter size is derived from it."""
    check_variables("conv2d_transpose", input=input)
    _rank("conv2d_transpose", input, 4)
    if data_format not in ("NCHW", "NHWC"):
        raise ValueError(f"conv2d_transpose: data_format must be 'NCHW' or 'NHWC', got "
                         f"{data_format!r}")
    c_axis = 1 if data_format == "NCHW" else 3
    hw = [2, 3] if data_format == "NCHW" else [1, 2]
    c = input.shape[c_axis]
    groups = 1 if groups is None else int(groups)
    if c < 0 or c % groups:
        raise ShapeError(f"conv2d_transpose: input channels {c} must be known and divisible "
                         f"by groups={groups}")
    stride, dilation = pair(stride, "stride"), pair(dilation, "dilation")
    paddings, algo = padding_attrs(padding, "conv2d_transpose", 2, data_format)
    if filter_size is None:
        if output_size is None:
            raise ValueError("conv2d_transpose: give filter_size or output_size")
        out = pair(output_size, "output_size")
        pads = paddings if len(paddings) == 4 else [paddings[0]] * 2 + [paddings[1]] * 2
        filter_size = [(out[i] - (input.shape[hw[i]] - 1) * stride[i] + pads[2 * i] +
                        pads[2 * i + 1] - 1) // dilation[i] + 1 for i in range(2)]
    filter_size = pair(filter_size, "filter_size")
    helper = LayerHelper("conv2d_transpose", input=input, param_attr=param_attr,
                         bias_attr=bias_attr, act=act, name=name)
    w = helper.create_parameter(param_attr, [c, num_filters // groups] + filter_size,
                                input.dtype)
    pre_bias = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("conv2d_transpose", inputs={"Input": input, "Filter": w},
                     outputs={"Output": pre_bias},
                     attrs={"output_size": [] if output_size is None else
                            pair(output_size, "output_size"),
                            "strides": stride, "paddings": paddings, "padding_algorithm": algo,
                            "dilations": dilation, "groups": groups, "use_cudnn": use_cudnn,
                            "data_format": data_format})
    pre_act = helper.append_bias_op(pre_bias, bias_attr, dim_start=c_axis, dim_end=c_axis + 1)
    return helper.append_activation(pre_act, act)


def deformable_conv(input, offset, mask, num_filters, filter_size, stride=1, padding=0,
                    dilation=1, groups=None, deformable_groups=None, im2col_step=None,
                    param_attr=None, bias_attr=None, modulated=True, name=None):
    """Deformable convolution of NCHW `input`: every filter tap reads the input at its
    position moved by `offset` (bilinear sampling), scaled by `mask` when `modulated`
    (op deformable_conv, v2) or not (mask ignored: op deformable_conv_v1). Filter weights
    default to N(0, sqrt(2 / (kh * kw * C))), a per-filter bias follows, as in Fluid."""
    from ..initializer import NormalInitializer
    if not isinstance(input, Variable):
        raise TypeError("Input of deformable_conv must be Variable")
    if not isinstance(offset, Variable):
        raise TypeError("Input Offset of deformable_conv must be Variable")
    if modulated and not isinstance(mask, Variable):
        raise TypeError("deformable_conv: a modulated (v2) deformable_conv needs mask, a "
                        "Variable")
    if param_attr is False:
        raise ValueError("param_attr should not be False here.")
    _rank("deformable_conv", input, 4)
    c = input.shape[1]
    if c < 0:
        raise ShapeError(f"deformable_conv: the channel dim of input {list(input.shape)} must "
                         f"be known")
    if groups is not None and c % groups:
        raise ValueError("num_channels must be divisible by groups.")
    k = pair(filter_size, "filter_size")
    helper = LayerHelper("deformable_conv", input=input, param_attr=param_attr,
                         bias_attr=bias_attr, name=name)
    std = (2.0 / (k[0] * k[1] * c)) ** 0.5
    w = helper.create_parameter(param_attr, [num_filters, c // (groups or 1)] + k,
                                input.dtype, default_initializer=NormalInitializer(0.0, std))
    pre = helper.create_variable_for_type_inference(input.dtype)
    inputs = {"Input": input, "Filter": w, "Offset": offset}
    if modulated:
        inputs["Mask"] = mask
    attrs = {"strides": pair(stride, "stride"), "paddings": pair(padding, "padding"),
             "dilations": pair(dilation, "dilation")}
    for key, v in (("groups", groups), ("deformable_groups", deformable_groups),
                   ("im2col_step", im2col_step)):
        if v is not None:               # Fluid leaves an unset one at the op's default
            attrs[key] = int(v)
    helper.append_op("deformable_conv" if modulated else "deformable_conv_v1", inputs=inputs,
                     outputs={"Output": pre}, attrs=attrs)
    return helper.append_bias_op(pre, bias_attr, dim_start=1, dim_end=2)


def deformable_roi_pooling(input, rois, trans, no_trans=False, spatial_scale=1.0,
                           group_size=[1, 1], pooled_height=1, pooled_width=1, part_size=None,
                           sample_per_part=1, trans_std=0.1, position_sensitive=False,
                           name=None):
    """Deformable RoI pooling of NCHW `input` over boxes `rois` ([R, 4], LoD per image),
    each bin moved by `trans` (op deformable_psroi_pooling); position_sensitive divides the
    channels among the pooled_height x pooled_width bins (deformable PSRoI pooling)."""
    from .checks import check_dtype_of
    for arg, v in (("input", input), ("rois", rois), ("trans", trans)):
        check_dtype_of("deformable_roi_pooling", arg, v, ("float32", "float64"))
    if not isinstance(group_size, (list, tuple)):
        raise TypeError(f"deformable_roi_pooling: group_size must be a list or tuple, got "
                        f"{type(group_size).__name__}")
    if part_size is not None and not isinstance(part_size, (list, tuple)):
        raise TypeError(f"deformable_roi_pooling: part_size must be a list or tuple, got "
                        f"{type(part_size).__name__}")
    _rank("deformable_roi_pooling", input, 4)
    c = input.shape[1]
    if position_sensitive:
        if c < 0 or c % (pooled_height * pooled_width):
            raise ShapeError(f"deformable_roi_pooling: position_sensitive needs the {c} input "
                             f"channels divisible by pooled_height * pooled_width")
        out_dim = c // (pooled_height * pooled_width)
    else:
        out_dim = c
    part = pair(part_size if part_size is not None else [pooled_height, pooled_width],
                "part_size")
    helper = LayerHelper("deformable_psroi_pooling", name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    count = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    helper.append_op("deformable_psroi_pooling",
                     inputs={"Input": input, "ROIs": rois, "Trans": trans},
                     outputs={"Output": out, "TopCount": count},
                     attrs={"no_trans": bool(no_trans), "spatial_scale": float(spatial_scale),
                            "output_dim": int(out_dim),
                            "group_size": pair(list(group_size), "group_size"),
                            "pooled_height": int(pooled_height),
                            "pooled_width": int(pooled_width), "part_size": part,
                            "sample_per_part": int(sample_per_part),
                            "trans_std": float(trans_std)})
    return out


def adaptive_pool2d(input, pool_size, pool_type="max", require_index=False, name=None):
    """Pool NCHW `input` to pool_size (h, w) outputs, each over its share of the input;
    require_index (max only) also returns the argmax mask."""
    check_variables("adaptive_pool2d", input=input)
    _rank("adaptive_pool2d", input, 4)
    if pool_type not in ("max", "avg"):
        raise ValueError(f"adaptive_pool2d: pool_type must be 'max' or 'avg', got "
                         f"{pool_type!r}")
    if require_index and pool_type != "max":
        raise ValueError("adaptive_pool2d: require_index needs pool_type 'max'")
    ksize = pair(pool_size, "pool_size")
    helper = LayerHelper("adaptive_pool2d", name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    if require_index:
        mask = helper.create_variable_for_type_inference("int32", stop_gradient=True)
        helper.append_op("max_pool2d_with_index", inputs={"X": input},
                         outputs={"Out": out, "Mask": mask},
                         attrs={"ksize": ksize, "adaptive": True})
        return out, mask
    helper.append_op("pool2d", inputs={"X": input}, outputs={"Out": out},
                     attrs={"pooling_type": pool_type, "ksize": ksize, "adaptive": True})
    return out


# --- resizing ---------------------------------------------------------------------------------
_RESAMPLE = {"BILINEAR": "bilinear_interp_v2", "NEAREST": "nearest_interp_v2"}


def image_resize(input, out_shape=None, scale=None, name=None, resample="BILINEAR",
                 actual_shape=None, align_corners=True, align_mode=1, data_format="NCHW"):
    """Resize the H, W of a 4-D `input` to out_shape (ints or [1] Variables, or a Variable
    [2]) or by `scale`; actual_shape (a Variable) overrides out_shape at run time."""
    check_variables("image_resize", input=input)
    if resample not in _RESAMPLE:
        raise ValueError(f"image_resize: resample must be one of {sorted(_RESAMPLE)} (3-D "
                         f"TRILINEAR is not built), got {resample!r}")
    _rank("image_resize", input, 4)
    if data_format not in ("NCHW", "NHWC"):
        raise ValueError(f"image_resize: data_format must be 'NCHW' or 'NHWC', got "
                         f"{data_format!r}")
    if out_shape is None and scale is None and actual_shape is None:
        raise ValueError("image_resize: give out_shape or scale")
    attrs = {"data_layout": data_format, "align_corners": bool(align_corners),
             "align_mode": int(align_mode), "interp_method": resample.lower(),
             "out_h": -1, "out_w": -1, "scale": []}
    ins = {"X": input}
    if actual_shape is not None:
        ins["OutSize"] = actual_shape
    if out_shape is not None:
        if isinstance(out_shape, Variable):
            ins["OutSize"] = out_shape
        else:
            out_shape = list(out_shape)
            if len(out_shape) != 2:
                raise ValueError(f"image_resize: out_shape needs 2 values (h, w), got "
                                 f"{out_shape}")
            if any(isinstance(d, Variable) for d in out_shape):
                from .tensor import fill_constant
                ins["SizeTensor"] = [d if isinstance(d, Variable) else
                                     fill_constant([1], "int32", d) for d in out_shape]
            else:
                attrs["out_h"], attrs["out_w"] = (int(d) for d in out_shape)
    elif isinstance(scale, Variable):
        ins["Scale"] = scale
    elif scale is not None:
        if not scale > 0:
            raise ValueError(f"image_resize: scale must be > 0, got {scale}")
        attrs["scale"] = [float(scale), float(scale)]
    return one_op_layer(_RESAMPLE[resample], ins, attrs,
                        helper=LayerHelper("image_resize", name=name))


def resize_bilinear(input, out_shape=None, scale=None, name=None, actual_shape=None,
                    align_corners=True, align_mode=1, data_format="NCHW"):
    """image_resize with bilinear interpolation."""
    return image_resize(input, out_shape, scale, name, "BILINEAR", actual_shape,
                        align_corners, align_mode, data_format)


def resize_nearest(input, out_shape=None, scale=None, name=None, actual_shape=None,
                   align_corners=True, data_format="NCHW"):
    """image_resize with nearest-neighbour interpolation."""
    return image_resize(input, out_shape, scale, name, "NEAREST", actual_shape,
                        align_corners, 1, data_format)


def image_resize_short(input, out_short_len, resample="BILINEAR"):
    """Resize so the shorter of H, W becomes out_short_len, keeping the aspect ratio."""
    check_variables("image_resize_short", input=input)
    _rank("image_resize_short", input, 4)
    h, w = input.shape[2], input.shape[3]
    if h < 0 or w < 0:
        raise ShapeError("image_resize_short: H and W of the input must be known")
    short, long_ = (0, 1) if h <= w else (1, 0)
    out = [0, 0]
    out[short] = out_short_len
    out[long_] = int(float(input.shape[2 + long_]) * out_short_len /
                     float(input.shape[2 + short]) + 0.5)
    return image_resize(input, out, resample=resample)


# --- prelu, instance_norm, group_norm ----------------------------------------------------------
def prelu(x, mode, param_attr=None, name=None):
    """max(0, x) + alpha * min(0, x) with a learned alpha: one ('all'), one per channel
    ('channel') or one per element ('element'); alpha starts at 0.25."""
    from ..initializer import ConstantInitializer
    check_variables("prelu", x=x)
    shapes = {"all": [1], "channel": [1, x.shape[1], 1, 1] if len(x.shape) > 1 else None,
              "element": [1] + list(x.shape[1:])}
    if mode not in shapes:
        raise ValueError(f"prelu: mode must be 'all', 'channel' or 'element', got {mode!r}")
    if mode == "channel" and len(x.shape) < 2:    # any rank with channels at dim 1 (Fluid)
        raise ShapeError(f"prelu: mode 'channel' needs channels at dim 1, got shape "
                         f"{list(x.shape)}")
    helper = LayerHelper("prelu", param_attr=param_attr, name=name)
    alpha = helper.create_parameter(param_attr, shapes[mode], x.dtype,
                                    default_initializer=ConstantInitializer(0.25))
    return one_op_layer("prelu", {"X": x, "Alpha": alpha}, {"mode": mode}, name=name)


def _normalize(helper, op_type, input, param_attr, bias_attr, c, stat_slots, attrs):
    """Append a normalization op with Scale (1) and Bias (0) parameters of [c]; returns Y."""
    from ..initializer import ConstantInitializer
    scale = helper.create_parameter(param_attr, [c], input.dtype,
                                    default_initializer=ConstantInitializer(1.0))
    bias = helper.create_parameter(bias_attr, [c], input.dtype, is_bias=True)
    y = helper.create_variable_for_type_inference(input.dtype)
    stats = {s: helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
             for s in stat_slots}
    helper.append_op(op_type, inputs={"X": input, "Scale": scale, "Bias": bias},
                     outputs={"Y": y, **stats}, attrs=attrs)
    return y


def instance_norm(input, epsilon=1e-05, param_attr=None, bias_attr=None, name=None):
    """Normalize each channel of each sample over its H, W; then scale and shift."""
    check_variables("instance_norm", input=input)
    c = input.shape[1] if len(input.shape) > 1 else -1
    if c < 0:
        raise ShapeError(f"instance_norm: the channel dim of {list(input.shape)} must be known")
    helper = LayerHelper("instance_norm", name=name)
    return _normalize(helper, "instance_norm", input, param_attr, bias_attr, c,
                      ("SavedMean", "SavedVariance"), {"epsilon": float(epsilon)})


def group_norm(input, groups, epsilon=1e-05, param_attr=None, bias_attr=None, act=None,
               data_layout="NCHW", name=None):
    """Normalize over groups of channels (and H, W) per sample; then scale, shift, act."""
    check_variables("group_norm", input=input)
    if data_layout not in ("NCHW", "NHWC"):
        raise ValueError(f"group_norm: data_layout must be 'NCHW' or 'NHWC', got "
                         f"{data_layout!r}")
    c = input.shape[1 if data_layout == "NCHW" else -1]
    groups = _positive_int("group_norm", "groups", groups)
    if c < 0 or c % groups:
        raise ShapeError(f"group_norm: {c} channels must be known and divisible by "
                         f"groups={groups}")
    helper = LayerHelper("group_norm", act=act, name=name)
    # as Fluid 1.8 builds it: a Scale (1) only when param_attr is given, a Bias (0) only
    # when bias_attr is, so a default group_norm has no parameters (and its saved models
    # none either)
    from ..initializer import ConstantInitializer
    inputs = {"X": input}
    if param_attr:
        inputs["Scale"] = helper.create_parameter(param_attr, [c], input.dtype,
                                                  default_initializer=ConstantInitializer(1.0))
    if bias_attr:
        inputs["Bias"] = helper.create_parameter(bias_attr, [c], input.dtype, is_bias=True)
    y = helper.create_variable_for_type_inference(input.dtype)
    stats = {s: helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
             for s in ("Mean", "Variance")}
    helper.append_op("group_norm", inputs=inputs, outputs={"Y": y, **stats},
                     attrs={"epsilon": float(epsilon), "groups": groups,
                            "data_layout": data_layout})
    return helper.append_activation(y, act)


# --- pads and crops ---------------------------------------------------------------------------
def pad(x, paddings, pad_value=0.0, name=None):
    """`x` padded with pad_value; paddings = [before_0, after_0, before_1, after_1, ...]."""
    check_variables("pad", x=x)
    paddings = [int(p) for p in paddings]
    if len(paddings) != 2 * len(x.shape):
        raise ValueError(f"pad: paddings needs 2 values per dim of x {list(x.shape)}, got "
                         f"{paddings}")
    return one_op_layer("pad", {"X": x}, {"paddings": paddings, "pad_value": float(pad_value)},
                        name=name)


def pad2d(input, paddings=[0, 0, 0, 0], mode="constant", pad_value=0.0, data_format="NCHW",
          name=None):
    """Pad H and W of 4-D `input` by [top, bottom, left, right] (ints or a Variable):
    'constant' (pad_value), 'reflect' or 'edge'."""
    check_variables("pad2d", input=input)
    if mode not in ("constant", "reflect", "edge"):
        raise ValueError(f"pad2d: mode must be 'constant', 'reflect' or 'edge', got {mode!r}")
    ins = {"X": input}
    attrs = {"mode": mode, "pad_value": float(pad_value), "data_format": data_format,
             "paddings": [0, 0, 0, 0]}
    if isinstance(paddings, Variable):
        ins["Paddings"] = paddings
    else:
        attrs["paddings"] = [int(p) for p in paddings]
        if len(attrs["paddings"]) != 4:
            raise ValueError(f"pad2d: paddings needs 4 values, got {paddings}")
    return one_op_layer("pad2d", ins, attrs, name=name)


def pad_constant_like(x, y, pad_value=0.0, name=None):
    """`y` padded at the end of each dim with pad_value to the shape of `x`."""
    check_variables("pad_constant_like", x=x, y=y)
    return one_op_layer("pad_constant_like", {"X": x, "Y": y}, {"pad_value": float(pad_value)},
                        name=name, dtype=y.dtype)


def crop(x, shape=None, offsets=None, name=None):
    """The block of `x` at `offsets` of `shape` (a list, or a Variable whose shape is
    used); offsets may be a Variable."""
    check_variables("crop", x=x)
    ins, attrs = {"X": x}, {}
    if isinstance(shape, Variable):
        ins["Y"] = shape
    elif shape is None:
        raise ValueError("crop: give shape")
    else:
        attrs["shape"] = [int(d) for d in shape]
    if isinstance(offsets, Variable):
        ins["Offsets"] = offsets
    else:
        attrs["offsets"] = [0] * len(x.shape) if offsets is None else [int(o) for o in offsets]
    return one_op_layer("crop", ins, attrs, name=name)


def _crop_item_check(arg, v):
    """Fluid 1.8's checks of one int of crop_tensor's `shape` / `offsets`: an int (TypeError),
    a size neither 0 nor below -1, an offset not negative (ValueError)."""
    if isinstance(v, Variable):
        return
    if not isinstance(v, int) or isinstance(v, bool):
        raise TypeError(f"crop_tensor: each int of '{arg}' must be an int (int32), got "
                        f"{type(v).__name__} {v!r}")
    if arg == "shape" and (v == 0 or v < -1):
        raise ValueError(f"crop_tensor: a size in 'shape' must be positive or -1 (to the "
                         f"end), got {v}")
    if arg == "offsets" and v < 0:
        raise ValueError(f"crop_tensor: an offset in 'offsets' must be >= 0, got {v}")


def crop_tensor(x, shape=None, offsets=None, name=None):
    """The block of `x` at `offsets` of `shape` (-1: to the end); each a list of ints and
    [1] Variables, or one int Variable."""
    from .tensor import ints_or_tensors
    check_variables("crop_tensor", x=x)
    helper = LayerHelper("crop_tensor", name=name)
    ins, attrs = {"X": x}, {}
    for arg, vals, slot in (("shape", shape, "Shape"), ("offsets", offsets, "Offsets")):
        if vals is None:
            vals = list(x.shape) if arg == "shape" else [0] * len(x.shape)
        elif not isinstance(vals, Variable):
            for v in vals:
                _crop_item_check(arg, v)
        attr, t, tl = ints_or_tensors(helper, vals)
        attrs[arg] = attr if t is None else []
        if t is not None:
            ins[slot] = t
        if tl is not None:
            ins[slot + "Tensor"] = tl
    return one_op_layer("crop_tensor", ins, attrs, name=name)


# --- channel movers, maxout, affine_channel, lrn -----------------------------------------------
def space_to_depth(x, blocksize, name=None):
    """Move blocksize x blocksize spatial blocks of NCHW `x` into channels."""
    check_variables("space_to_depth", x=x)
    return one_op_layer("space_to_depth", {"X": x},
                        {"blocksize": _positive_int("space_to_depth", "blocksize", blocksize)},
                        name=name)


def pixel_shuffle(x, upscale_factor):
    """Rearrange [N, C*r*r, H, W] into [N, C, H*r, W*r] (r = upscale_factor)."""
    check_variables("pixel_shuffle", x=x)
    return one_op_layer("pixel_shuffle", {"X": x}, {"upscale_factor": _positive_int(
        "pixel_shuffle", "upscale_factor", upscale_factor)})


def shuffle_channel(x, group, name=None):
    """ShuffleNet's channel shuffle over `group` groups."""
    check_variables("shuffle_channel", x=x)
    return one_op_layer("shuffle_channel", {"X": x},
                        {"group": _positive_int("shuffle_channel", "group", group)}, name=name)


def temporal_shift(x, seg_num, shift_ratio=0.25, name=None):
    """TSM's shift of a fraction of channels to the neighbouring frames (x: [N*T, C, H, W])."""
    check_variables("temporal_shift", x=x)
    if not 0 < shift_ratio <= 0.5:
        raise ValueError(f"temporal_shift: shift_ratio must be in (0, 0.5], got {shift_ratio}")
    return one_op_layer("temporal_shift", {"X": x},
                        {"seg_num": _positive_int("temporal_shift", "seg_num", seg_num),
                         "shift_ratio": float(shift_ratio)}, name=name)


def maxout(x, groups, name=None, axis=1):
    """The max of each `groups` consecutive channels."""
    check_variables("maxout", x=x)
    if dtypes.name(x.dtype) not in ("float16", "float32", "float64"):
        raise TypeError(f"maxout: x ({x.name}) must be float16, float32 or float64, got "
                        f"{dtypes.name(x.dtype)}")
    if axis not in (1, -1, 3):
        raise ValueError(f"maxout: axis must be 1 (NCHW) or -1 or 3 (NHWC), got {axis}")
    return one_op_layer("maxout", {"X": x}, {"groups": _positive_int("maxout", "groups", groups),
                                             "axis": 3 if axis == -1 else axis}, name=name)


def affine_channel(x, scale=None, bias=None, data_layout="NCHW", name=None, act=None):
    """x * scale[c] + bias[c] per channel (scale, bias: [C] Variables), then act."""
    check_variables("affine_channel", x=x, scale=scale, bias=bias)
    helper = LayerHelper("affine_channel", act=act, name=name)
    out = one_op_layer("affine_channel", {"X": x, "Scale": scale, "Bias": bias},
                       {"data_layout": data_layout}, name=name)
    return helper.append_activation(out, act)


def lrn(input, n=5, k=1.0, alpha=1e-4, beta=0.75, name=None, data_format="NCHW"):
    """Local response normalization across channels of 4-D NCHW (or NHWC) `input`."""
    check_variables("lrn", input=input)
    _rank("lrn", input, 4)
    if data_format not in ("NCHW", "NHWC"):
        raise ValueError(f"Attr(data_format) of Op(fluid.layers.lrn) got wrong value: "
                         f"received {data_format} but only NCHW or NHWC supported.")
    helper = LayerHelper("lrn", name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    mid = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    helper.append_op("lrn", inputs={"X": input}, outputs={"Out": out, "MidOut": mid},
                     attrs={"n": _positive_int("lrn", "n", n), "k": float(k),
                            "alpha": float(alpha), "beta": float(beta),
                            "data_format": data_format})
    return out


def merge_selected_rows(x, name=None):
    """A SelectedRows with duplicate rows summed."""
    check_variables("merge_selected_rows", x=x)
    helper = LayerHelper("merge_selected_rows", name=name)
    out = helper.create_variable_for_type_inference(x.dtype, type=x.type)
    helper.append_op("merge_selected_rows", inputs={"X": x}, outputs={"Out": out})
    return out


def get_tensor_from_selected_rows(x, name=None):
    """The value tensor of a SelectedRows."""
    check_variables("get_tensor_from_selected_rows", x=x)
    if x.type != VarType.SELECTED_ROWS:
        raise TypeError(f"get_tensor_from_selected_rows: 'x' ({x.name}) must be a "
                        f"SELECTED_ROWS variable, got {VarType.Type.Name(x.type)}")
    return one_op_layer("get_tensor_from_selected_rows", {"X": x}, name=name)


# --- 3-D convolution and pooling, unfold (ops in fluidity/ops/volume.py) ----------------------
def _check_volume(layer, input, data_format):
    """Checks `input` of a 3-D layer; returns the channel axis for data_format."""
    check_variables(layer, input=input)
    _rank(layer, input, 5)
    if data_format not in ("NCDHW", "NDHWC"):
        raise ValueError(f"{layer}: data_format must be 'NCDHW' or 'NDHWC', got "
                         f"{data_format!r}")
    c_axis = 1 if data_format == "NCDHW" else 4
    if input.shape[c_axis] < 0:
        raise ShapeError(f"{layer}: the channel dim of {list(input.shape)} must be known")
    return c_axis


def conv3d(input, num_filters, filter_size, stride=1, padding=0, dilation=1, groups=None,
           param_attr=None, bias_attr=None, use_cudnn=True, act=None, name=None,
           data_format="NCDHW"):
    """3-D convolution of NCDHW `input`; weights default to N(0, sqrt(2 / (k^3 C)))."""
    from ..initializer import NormalInitializer
    if not isinstance(use_cudnn, bool):
        raise ValueError(f"Attr(use_cudnn) should be True or False. Received Attr(use_cudnn): "
                         f"{use_cudnn}.")
    c_axis = _check_volume("conv3d", input, data_format)
    c = input.shape[c_axis]
    groups = 1 if groups is None else int(groups)
    if c % groups:
        raise ShapeError(f"conv3d: {c} channels are not divisible by groups={groups}")
    k = triple(filter_size, "conv3d: filter_size")
    paddings, algo = padding_attrs(padding, "conv3d", 3, data_format)
    helper = LayerHelper("conv3d", input=input, param_attr=param_attr, bias_attr=bias_attr,
                         act=act, name=name)
    std = (2.0 / (k[0] * k[1] * k[2] * c)) ** 0.5
    w = helper.create_parameter(param_attr, [num_filters, c // groups] + k, input.dtype,
                                default_initializer=NormalInitializer(0.0, std))
    pre = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("conv3d", inputs={"Input": input, "Filter": w}, outputs={"Output": pre},
                     attrs={"strides": triple(stride, "conv3d: stride"),
                            "paddings": paddings, "padding_algorithm": algo,
                            "dilations": triple(dilation, "conv3d: dilation"),
                            "groups": groups, "use_cudnn": use_cudnn,
                            "use_mkldnn": False, "data_format": data_format})
    return helper.append_activation(
        helper.append_bias_op(pre, bias_attr, c_axis, c_axis + 1), act)


def conv3d_transpose(input, num_filters, output_size=None, filter_size=None, padding=0,
                     stride=1, dilation=1, groups=None, param_attr=None, bias_attr=None,
                     use_cudnn=True, act=None, name=None, data_format="NCDHW"):
    """The transpose of conv3d (3-D upsampling); give filter_size, or output_size."""
    c_axis = _check_volume("conv3d_transpose", input, data_format)
    c = input.shape[c_axis]
    spatial = [2, 3, 4] if c_axis == 1 else [1, 2, 3]
    groups = 1 if groups is None else int(groups)
    if c % groups:
        raise ShapeError(f"conv3d_transpose: {c} channels are not divisible by "
                         f"groups={groups}")
    stride, dilation = triple(stride, "stride"), triple(dilation, "dilation")
    pads, algo = padding_attrs(padding, "conv3d_transpose", 3, data_format)
    p2 = [(pads[i], pads[i]) for i in range(3)] if len(pads) == 3 else \
        [(pads[2 * i], pads[2 * i + 1]) for i in range(3)]
    if filter_size is None:
        if output_size is None:
            raise ValueError("conv3d_transpose: give filter_size or output_size")
        out = triple(output_size, "output_size")
        filter_size = [(out[i] - (input.shape[spatial[i]] - 1) * stride[i] + p2[i][0]
                        + p2[i][1] - 1) // dilation[i] + 1 for i in range(3)]
    k = triple(filter_size, "filter_size")
    helper = LayerHelper("conv3d_transpose", input=input, param_attr=param_attr,
                         bias_attr=bias_attr, act=act, name=name)
    w = helper.create_parameter(param_attr, [c, num_filters // groups] + k, input.dtype)
    pre = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("conv3d_transpose", inputs={"Input": input, "Filter": w},
                     outputs={"Output": pre},
                     attrs={"strides": stride, "paddings": pads, "padding_algorithm": algo,
                            "dilations": dilation, "groups": groups, "use_cudnn": use_cudnn,
                            "data_format": data_format,
                            "output_size": [] if output_size is None else
                            triple(output_size, "output_size")})
    return helper.append_activation(
        helper.append_bias_op(pre, bias_attr, c_axis, c_axis + 1), act)


def pool3d(input, pool_size=-1, pool_type="max", pool_stride=1, pool_padding=0,
           global_pooling=False, use_cudnn=True, ceil_mode=False, name=None, exclusive=True,
           data_format="NCDHW"):
    """Max or average pooling of NCDHW (or NDHWC) `input`."""
    if not isinstance(use_cudnn, bool):
        raise TypeError(f"Attr(use_cudnn) should be True or False. Received Attr(use_cudnn): "
                        f"{use_cudnn}.")
    _check_volume("pool3d", input, data_format)
    if pool_type not in ("max", "avg"):
        raise ValueError(f"pool3d: pool_type must be 'max' or 'avg', got {pool_type!r}")
    if not global_pooling and pool_size == -1:
        raise ValueError("pool3d: give pool_size, or global_pooling=True")
    paddings, algo = padding_attrs(pool_padding, "pool3d", 3, data_format)
    if algo == "VALID" and ceil_mode:
        raise ValueError('When Attr(pool_padding) is "VALID", Attr(ceil_mode) must be False. '
                         'Received ceil_mode: True.')
    return one_op_layer("pool3d", {"X": input},
                        {"pooling_type": pool_type, "global_pooling": bool(global_pooling),
                         "ksize": [1, 1, 1] if pool_size == -1 else triple(pool_size, "pool_size"),
                         "strides": triple(pool_stride, "pool_stride"),
                         "paddings": paddings, "padding_algorithm": algo,
                         "ceil_mode": bool(ceil_mode), "exclusive": bool(exclusive),
                         "use_cudnn": use_cudnn, "use_mkldnn": False,
                         "data_format": data_format}, name=name)


def unfold(x, kernel_sizes, strides=1, paddings=0, dilations=1, name=None):
    """im2col: the sliding blocks of NCHW `x` as columns [N, C * kh * kw, L]; paddings an
    int, [h, w] or [top, left, bottom, right]."""
    check_variables("unfold", x=x)
    _rank("unfold", x, 4)
    if isinstance(paddings, int):
        paddings = [paddings] * 4
    paddings = [int(p) for p in paddings]
    if len(paddings) == 2:
        paddings = paddings * 2
    if len(paddings) != 4:
        raise ValueError(f"unfold: paddings needs 1, 2 or 4 values, got {paddings}")
    helper = LayerHelper("unfold", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("unfold", inputs={"X": x}, outputs={"Y": out},
                     attrs={"kernel_sizes": pair(kernel_sizes, "kernel_sizes"),
                            "strides": pair(strides, "strides"), "paddings": paddings,
                            "dilations": pair(dilations, "dilations")})
    return out


# --- adaptive_pool3d (ops pool3d and max_pool3d_with_index in fluidity/ops/volume.py) -----------
__all__ += ["adaptive_pool3d"]


def adaptive_pool3d(input, pool_size, pool_type="max", require_index=False, name=None):
    """Pool NCDHW `input` to pool_size (d, h, w) outputs, cell i of a dim of size n covering
    [floor(i * n / o), ceil((i + 1) * n / o)). Max pooling writes max_pool3d_with_index, as
    Fluid does; require_index also returns its Mask (each maximum's index in its volume)."""
    check_variables("adaptive_pool3d", input=input)
    _rank("adaptive_pool3d", input, 5)
    if not isinstance(pool_type, str) or pool_type not in ("max", "avg"):
        raise ValueError(f"adaptive_pool3d: Unknown pool_type: {pool_type!r}. It can only be "
                         f"'max' or 'avg'.")
    if not isinstance(require_index, bool):
        raise TypeError(f"adaptive_pool3d: require_index must be bool, got "
                        f"{type(require_index).__name__}")
    if pool_type == "avg" and require_index:
        raise ValueError("adaptive_pool3d: invalid setting 'require_index' true when "
                         "'pool_type' is 'avg'.")
    ksize = triple(pool_size, "pool_size")
    helper = LayerHelper("adaptive_pool3d", name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    if pool_type == "avg":
        helper.append_op("pool3d", inputs={"X": input}, outputs={"Out": out},
                         attrs={"pooling_type": "avg", "ksize": ksize, "adaptive": True})
        return out
    mask = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    helper.append_op("max_pool3d_with_index", inputs={"X": input},
                     outputs={"Out": out, "Mask": mask}, attrs={"ksize": ksize, "adaptive": True})
    return (out, mask) if require_index else out


# --- resize_trilinear (op trilinear_interp in fluidity/ops/interp.py) --------------------------
__all__ += ["resize_trilinear"]


def resize_trilinear(input, out_shape=None, scale=None, name=None, actual_shape=None,
                     align_corners=True, align_mode=1, data_format="NCDHW"):
    """Resize the D, H, W of 5-D `input` by trilinear interpolation (op trilinear_interp, as
    Fluid 1.8 writes it) to `out_shape` [d, h, w] (ints, Variables, or a Variable), or by
    `scale`; `actual_shape` (a Variable) overrides the size at run time."""
    from .tensor import fill_constant
    check_variables("resize_trilinear", input=input)
    _rank("resize_trilinear", input, 5)
    if not isinstance(align_corners, bool):
        raise TypeError("Attr align_corners should be a bool value")
    if align_mode not in (0, 1):
        raise ValueError("align_mode can only be 0 or 1")
    if out_shape is None and scale is None:
        raise ValueError("One of out_shape and scale must not be None.")
    if data_format not in ("NCDHW", "NDHWC"):
        raise ValueError(f"Got wrong value for param `data_format`: {data_format} received but "
                         f"only `NCDHW` or `NDHWC` supported for 5-D input.")
    helper = LayerHelper("trilinear_interp", name=name)
    inputs = {"X": input}
    attrs = {"out_d": -1, "out_h": -1, "out_w": -1, "interp_method": "trilinear",
             "align_corners": align_corners, "align_mode": int(align_mode),
             "data_layout": "NCHW" if data_format == "NCDHW" else "NHWC"}
    if out_shape is not None:
        if isinstance(out_shape, Variable):
            out_shape.stop_gradient = True
            inputs["OutSize"] = out_shape
        else:
            if not isinstance(out_shape, (list, tuple)):
                raise TypeError("out_shape should be a list or tuple or Variable.")
            if len(out_shape) != 3:
                raise ValueError("out_shape length should be 3 for input 5-D tensor.")
            sizes = []
            if any(isinstance(d, Variable) for d in out_shape):
                tensors = []
                for d in out_shape:
                    if isinstance(d, Variable):
                        d.stop_gradient = True
                        tensors.append(d)
                        sizes.append(-1)
                    else:
                        t = helper.create_variable_for_type_inference("int32")
                        fill_constant([1], "int32", int(d), force_cpu=True, out=t)
                        tensors.append(t)
                        sizes.append(int(d))
                inputs["SizeTensor"] = tensors
            else:
                if any(int(d) <= 0 for d in out_shape):
                    raise ValueError("Each dimension size given in out_shape must be greater "
                                     "than 0.")
                sizes = [int(d) for d in out_shape]
            attrs["out_d"], attrs["out_h"], attrs["out_w"] = sizes
    elif isinstance(scale, Variable):
        scale.stop_gradient = True
        inputs["Scale"] = scale
    elif isinstance(scale, (int, float)) and not isinstance(scale, bool):
        if scale <= 0:
            raise ValueError("Attr(scale) should be greater than zero.")
        attrs["scale"] = float(scale)
    else:
        raise TypeError("Attr(scale)'s type should be float, int or Variable.")
    if isinstance(actual_shape, Variable):
        actual_shape.stop_gradient = True
        inputs["OutSize"] = actual_shape
    elif actual_shape is not None:
        raise TypeError("actual_shape should either be Variable or None.")
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("trilinear_interp", inputs=inputs, outputs={"Out": out}, attrs=attrs)
    return out
