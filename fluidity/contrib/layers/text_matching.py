"""`fluid.contrib.layers` of Baidu's search text models: var_conv_2d (convolution over
per-sample images of varying size) and match_matrix_tensor (bilinear similarity maps of two
sequences) over fluidity/ops/text_matching.py, search_pyramid_hash (hashed n-gram
embeddings) over fluidity/ops/pyramid_hash.py. Paddle 1.8's signatures, parameters and
programs."""
from ...layer_helper import LayerHelper
from ...layers.checks import check_variables
from ...layers.utils import convert_to_list

__all__ = ["var_conv_2d", "match_matrix_tensor", "search_pyramid_hash"]


def var_conv_2d(input, row, col, input_channel, output_channel, filter_size, stride=1,
                param_attr=None, act=None, dtype="float32", name=None):
    """Convolve each sample of `input` ([total, 1], LoD level 1: sample b an image
    [input_channel, len(row_b), len(col_b)] stored flat) with a filter parameter
    [output_channel, input_channel * kh * kw], zero-padded by half the kernel before, at
    `stride`. Returns the flat [total', 1] result with one LoD piece a sample."""
    check_variables("var_conv_2d", input=input, row=row, col=col)
    assert len(input.shape) == 2, "var_conv_2d: input must be 2-D [total, 1]"
    helper = LayerHelper("var_conv_2d", input=input, param_attr=param_attr, act=act,
                         name=name)
    filter_size = convert_to_list(filter_size, 2, "filter_size")
    stride = convert_to_list(stride, 2, "stride")
    w = helper.create_parameter(
        param_attr, [int(output_channel), int(input_channel) * filter_size[0] * filter_size[1]],
        dtype)
    out = helper.create_variable_for_type_inference(dtype)
    col_tmp = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    helper.append_op("var_conv_2d", inputs={"X": input, "ROW": row, "COLUMN": col, "W": w},
                     outputs={"Out": out, "Col": col_tmp},
                     attrs={"InputChannel": input_channel, "OutputChannel": output_channel,
                            "StrideH": stride[0], "StrideW": stride[1],
                            "KernelH": filter_size[0], "KernelW": filter_size[1]})
    return helper.append_activation(out)


def match_matrix_tensor(x, y, channel_num, act=None, param_attr=None, dtype="float32",
                        name=None):
    """(out, tmp): for each pair of sequences x_b [n, h], y_b [m, h], the channel_num maps
    x_b W_t y_b^T ([channel_num, n, m], W a parameter [h, channel_num, h]) flattened into
    one LoD piece of `out`; `tmp` is the intermediate x_b W."""
    check_variables("match_matrix_tensor", x=x, y=y)
    xs, ys = list(x.shape), list(y.shape)
    assert len(xs) == 2 and len(ys) == 2 and xs[-1] == ys[-1], (
        "match_matrix_tensor: x and y must be 2-D of one width")
    helper = LayerHelper("match_matrix_tensor", x=x, param_attr=param_attr, act=act,
                         name=name)
    w = helper.create_parameter(param_attr, [xs[-1], channel_num, ys[-1]], dtype)
    out = helper.create_variable_for_type_inference(dtype)
    tmp = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    helper.append_op("match_matrix_tensor", inputs={"X": x, "Y": y, "W": w},
                     outputs={"Out": out, "Tmp": tmp}, attrs={"dim_t": channel_num})
    return helper.append_activation(out), tmp


def search_pyramid_hash(input, num_emb, space_len, pyramid_layer, rand_len, drop_out_percent,
                        is_training, use_filter, white_list_len, black_list_len, seed, lr,
                        param_attr=None, param_attr_wl=None, param_attr_bl=None, name=None,
                        distribute_update_vars=None, dtype="float32"):
    """Hashed embeddings [rows, num_emb] (LoD: one piece a sequence) of the n-grams (2 to
    pyramid_layer ids) of `input` (int32 ids, one a row, LoD level 1), from a flat table
    parameter [space_len + rand_len, 1]; n-grams filtered by bloom-filter parameters
    (white list [white_list_len, 1] when white_list_len > 0, black list
    [black_list_len, 1]) when `use_filter`, dropped with probability drop_out_percent when
    training. The backward pass moves the table itself by -lr * gradient.
    `distribute_update_vars`: names among the layer's parameters that the distribute
    transpiler updates (ValueError for another name)."""
    check_variables("search_pyramid_hash", input=input)
    helper = LayerHelper("search_pyramid_hash", input=input, param_attr=param_attr,
                         name=name)
    w = helper.create_parameter(param_attr, [space_len + rand_len, 1], dtype)
    w.stop_gradient = True
    inputs = {"X": input, "W": w}
    if white_list_len > 0:
        white = helper.create_parameter(param_attr_wl, [white_list_len, 1], dtype)
        white.stop_gradient = True
        inputs["WhiteList"] = white
    if black_list_len >= 0:       # as Fluid: a [0, 1] black list too, which the op ignores
        black = helper.create_parameter(param_attr_bl, [black_list_len, 1], dtype)
        black.stop_gradient = True
        inputs["BlackList"] = black
    update_vars = ""
    if distribute_update_vars:
        assert isinstance(distribute_update_vars, list)
        own = [a.name for a in (param_attr, param_attr_wl, param_attr_bl) if a]
        for p in distribute_update_vars:
            if p not in own:
                raise ValueError(f"Pyramid Hash layer didn't have parameter {p}")
        update_vars = ",".join(distribute_update_vars)
    out = helper.create_variable_for_type_inference(dtype)
    drop_pos = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    x_temp = helper.create_variable_for_type_inference("float32", stop_gradient=True)
    helper.append_op("pyramid_hash", inputs=inputs,
                     outputs={"Out": out, "X_Temp_Out": x_temp, "DropPos": drop_pos},
                     attrs={"num_emb": num_emb, "space_len": space_len,
                            "pyramid_layer": pyramid_layer, "rand_len": rand_len,
                            "drop_out_percent": float(drop_out_percent),
                            "is_training": int(is_training), "use_filter": bool(use_filter),
                            "white_list_len": white_list_len,
                            "black_list_len": black_list_len, "seed": seed, "lr": float(lr),
                            "distribute_update_vars": update_vars})
    return out
