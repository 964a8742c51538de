"""`fluid.contrib.layers.tdm_child` and `tdm_sampler`: the tree-based deep model's tree
lookups (fluidity/ops/tdm.py), the tree held in parameters as Paddle 1.8 lays it out."""
from ...core import dtypes
from ...framework import check_dtype
from ...initializer import ConstantInitializer
from ...layer_helper import LayerHelper
from ...layers.manip import reshape, slice

__all__ = ["tdm_child", "tdm_sampler"]


def _code(dtype, layer, arg):
    check_dtype(dtype, arg, ["int32", "int64"], f"fluid.contrib.layers.{layer}")
    return int(dtypes.to_code(dtype))


def tdm_child(x, node_nums, child_nums, param_attr=None, dtype="int32"):
    """(child, leaf_mask) of the nodes `x` in the tree held by a parameter TreeInfo
    [node_nums, 3 + child_nums] (param_attr's initializer gives it; zeros by default)."""
    code = _code(dtype, "tdm_child", "dtype")
    helper = LayerHelper("tdm_child", x=x, param_attr=param_attr)
    tree_info = helper.create_parameter(param_attr, [node_nums, 3 + child_nums], dtype,
                                        default_initializer=ConstantInitializer(0))
    tree_info.stop_gradient = True
    child = helper.create_variable_for_type_inference(dtype=dtype, stop_gradient=True)
    leaf_mask = helper.create_variable_for_type_inference(dtype=dtype, stop_gradient=True)
    helper.append_op("tdm_child", inputs={"X": x, "TreeInfo": tree_info},
                     outputs={"Child": child, "LeafMask": leaf_mask},
                     attrs={"child_nums": child_nums, "dtype": code})
    return child, leaf_mask


def tdm_sampler(x, neg_samples_num_list, layer_node_num_list, leaf_node_num,
                tree_travel_attr=None, tree_layer_attr=None, output_positive=True,
                output_list=True, seed=0, tree_dtype="int32", dtype="int32"):
    """(out, labels, mask) of layer-wise negative sampling for the leaves `x`: the tree's
    paths in a parameter Travel [leaf_node_num, layers], its layers in a parameter Layer
    [nodes, 1]. With output_list, each is a list of one [-1, neg + positive, 1] tensor a
    layer; else one [-1, total] tensor."""
    _code(tree_dtype, "tdm_sampler", "tree_dtype")
    code = _code(dtype, "tdm_sampler", "dtype")
    if len(neg_samples_num_list) != len(layer_node_num_list):
        raise ValueError(
            f"The shape of negative samples list must match the shape of layers. But "
            f"received len of neg_samples_num_list: {len(neg_samples_num_list)},and len of "
            f"layer_node_num_list: {len(layer_node_num_list)}, please check your input.")
    assert leaf_node_num is not None, "leaf_node_num should not be None here."
    lod = [0]
    for l, n in enumerate(layer_node_num_list):
        lod.append(lod[-1] + n)
        if neg_samples_num_list[l] >= n:
            raise ValueError(
                f"The number of negative samples must be less than the number of nodes in "
                f"the layer {l}, But received negative nums {neg_samples_num_list[l]}, and "
                f"num of node at layer {l} is {n}, please check your input.")
    assert leaf_node_num < lod[-1], "leaf_node_num must be less than total node nums."
    helper = LayerHelper("tdm_sampler", x=x)
    zero = ConstantInitializer(0)
    travel = helper.create_parameter(tree_travel_attr, [leaf_node_num, len(lod) - 1],
                                     tree_dtype, default_initializer=zero)
    layer = helper.create_parameter(tree_layer_attr, [lod[-1], 1], tree_dtype,
                                    default_initializer=zero)
    outs = [helper.create_variable_for_type_inference(dtype=dtype, stop_gradient=True)
            for _ in range(3)]
    helper.append_op("tdm_sampler", inputs={"X": x, "Travel": travel, "Layer": layer},
                     outputs={"Out": outs[0], "Labels": outs[1], "Mask": outs[2]},
                     attrs={"neg_samples_num_list": list(neg_samples_num_list),
                            "output_positive": output_positive, "layer_offset_lod": lod,
                            "seed": seed, "dtype": code})
    if not output_list:
        return tuple(outs)
    pos = 1 if output_positive else 0
    lists = ([], [], [])
    start = 0
    for n in neg_samples_num_list:
        end = start + n + pos
        for var, acc in zip(outs, lists):
            part = reshape(slice(var, axes=[1], starts=[start], ends=[end]), [-1, n + pos, 1])
            part.stop_gradient = True
            acc.append(part)
        start = end
    return lists
