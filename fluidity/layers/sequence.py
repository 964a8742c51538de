"""Sequence layers over LoD tensors (Fluid 1.x signatures)."""
from ..core import dtypes
from ..layer_helper import LayerHelper
from .manip import one_op_layer

__all__ = ["sequence_pool", "sequence_first_step", "sequence_last_step", "sequence_conv",
           "sequence_softmax", "sequence_expand", "sequence_expand_as", "sequence_concat",
           "sequence_reshape", "sequence_slice", "sequence_pad", "sequence_unpad",
           "sequence_mask", "sequence_reverse", "sequence_enumerate", "lod_reset",
           "lod_append", "sequence_scatter"]


def sequence_pool(input, pool_type, is_test=False, pad_value=0.0):
    """One row per sequence of `input` (a LoD tensor): pool_type sum, average, sqrt, max,
    min, first or last. Empty sequences give `pad_value`."""
    helper = LayerHelper("sequence_pool")
    out = helper.create_variable_for_type_inference(input.dtype)
    idx = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    helper.append_op("sequence_pool", inputs={"X": input},
                     outputs={"Out": out, "MaxIndex": idx},
                     attrs={"pooltype": pool_type.upper(), "is_test": is_test,
                            "pad_value": float(pad_value)})
    return out


def sequence_first_step(input):
    return sequence_pool(input, "first")


def sequence_last_step(input):
    return sequence_pool(input, "last")


def sequence_conv(input, num_filters, filter_size=3, filter_stride=1, padding=True,
                  padding_start=None, bias_attr=None, param_attr=None, act=None, name=None):
    """A 1-D convolution over the rows of each sequence: window of `filter_size` rows starting
    at `padding_start` (default -filter_size // 2, centred), zeros outside the sequence."""
    helper = LayerHelper("sequence_conv", param_attr=param_attr, bias_attr=bias_attr, act=act,
                         name=name)
    w = helper.create_parameter(param_attr, [filter_size * input.shape[1], num_filters],
                                input.dtype)
    out = helper.create_variable_for_type_inference(input.dtype)
    start = -int(filter_size // 2) if padding_start is None else padding_start
    helper.append_op("sequence_conv", inputs={"X": input, "Filter": w}, outputs={"Out": out},
                     attrs={"contextStride": filter_stride, "contextStart": start,
                            "contextLength": filter_size})
    return helper.append_activation(helper.append_bias_op(out, bias_attr))


def sequence_softmax(input, use_cudnn=False, name=None):
    """Softmax over the rows of each sequence of a [T, 1] LoD tensor."""
    return one_op_layer("sequence_softmax", {"X": input}, {"use_cudnn": use_cudnn}, name=name)


def sequence_expand(x, y, ref_level=-1, name=None):
    """Repeat each sequence of x (each row, without LoD) by y's LoD at `ref_level`."""
    return one_op_layer("sequence_expand", {"X": x, "Y": y}, {"ref_level": ref_level}, name=name)


def sequence_expand_as(x, y, name=None):
    """Repeat row i of x as many times as sequence i of y is long."""
    return one_op_layer("sequence_expand_as", {"X": x, "Y": y}, name=name)


def sequence_concat(input, name=None):
    """Concatenate the i-th sequences of every input."""
    return one_op_layer("sequence_concat", {"X": list(input)}, name=name)


def sequence_reshape(input, new_dim):
    """Reshape each sequence's rows to width `new_dim`."""
    return one_op_layer("sequence_reshape", {"X": input}, {"new_dim": new_dim})


def sequence_slice(input, offset, length, name=None):
    """Sequence i -> its rows offset[i] : offset[i] + length[i] (int64 [N, 1] tensors)."""
    return one_op_layer("sequence_slice", {"X": input, "Offset": offset, "Length": length},
                        name=name)


def sequence_pad(x, pad_value, maxlen=None, name=None):
    """Pad the sequences of x to [N, maxlen (default: longest), ...] with `pad_value` (a
    tensor: scalar or one row). Returns (padded, lengths)."""
    helper = LayerHelper("sequence_pad", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    length = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    helper.append_op("sequence_pad", inputs={"X": x, "PadValue": pad_value},
                     outputs={"Out": out, "Length": length},
                     attrs={"padded_length": -1 if maxlen is None else int(maxlen)})
    return out, length


def sequence_unpad(x, length, name=None):
    """Padded [N, L, ...] and lengths [N] -> packed rows with LoD."""
    return one_op_layer("sequence_unpad", {"X": x, "Length": length}, name=name)


def sequence_mask(x, maxlen=None, dtype="int64", name=None):
    """mask[..., j] = j < x[...]; maxlen an int, a Variable, or None (max of x)."""
    inputs, attrs = {"X": x}, {"out_dtype": dtypes.to_code(dtype)}
    if hasattr(maxlen, "name") and hasattr(maxlen, "block"):
        inputs["MaxLenTensor"] = maxlen
        attrs["maxlen"] = -1
    else:
        attrs["maxlen"] = -1 if maxlen is None else int(maxlen)
    out = one_op_layer("sequence_mask", inputs, attrs, out_slot="Y", dtype=dtype, name=name)
    out.stop_gradient = True
    return out


def sequence_reverse(x, name=None):
    """Reverse the rows of every sequence."""
    return one_op_layer("sequence_reverse", {"X": x}, out_slot="Y", name=name)


def sequence_enumerate(input, win_size, pad_value=0, name=None):
    """Row t -> the win_size ids starting at t in its sequence, pad_value past the end."""
    out = one_op_layer("sequence_enumerate", {"X": input}, {"win_size": win_size,
                                                            "pad_value": pad_value}, name=name)
    out.stop_gradient = True
    return out


def lod_reset(x, y=None, target_lod=None):
    """x with a new LoD: y's LoD (or y's data as offsets), else `target_lod` offsets."""
    if y is not None:
        return one_op_layer("lod_reset", {"X": x, "Y": y})
    if target_lod is None:
        raise ValueError("lod_reset: y and target_lod should not both be None")
    return one_op_layer("lod_reset", {"X": x}, {"target_lod": [int(v) for v in target_lod]})


def lod_append(x, level):
    """x with one more LoD level below its own: `level` offsets (a list) or a Variable
    (its LoD, or its data as offsets)."""
    if hasattr(level, "name") and hasattr(level, "block"):
        return one_op_layer("lod_reset", {"X": x, "Y": level}, {"append": True})
    if not isinstance(level, (list, tuple)):
        raise ValueError(f"lod_append: level must be a list, tuple or Variable, got "
                         f"{type(level).__name__}")
    return one_op_layer("lod_reset", {"X": x}, {"target_lod": [int(v) for v in level],
                                                "append": True})


def sequence_scatter(input, index, updates, name=None):
    """out = input; out[i, index[j]] += updates[j] for the j of sequence i of index."""
    return one_op_layer("sequence_scatter", {"X": input, "Ids": index, "Updates": updates},
                        name=name)
