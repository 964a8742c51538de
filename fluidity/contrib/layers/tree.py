"""`fluid.contrib.layers.tree_conv`: tree-based convolution (TBCNN) over the tree_conv op
(fluidity/ops/tree_conv.py), Paddle 1.8's signature, parameters and program."""
from ...framework import Variable, check_type
from ...layer_helper import LayerHelper

__all__ = ["tree_conv"]


def tree_conv(nodes_vector, edge_set, output_size, num_filters=1, max_depth=2, act="tanh",
              param_attr=None, bias_attr=None, name=None):
    """Convolve each tree's nodes (`nodes_vector` [N, n, F]; `edge_set` [N, E, 2] int32
    parent -> child edges between nodes numbered from 1, padded with 0) with a filter
    parameter [F, 3, output_size, num_filters] over every node's patch of descendants less
    than `max_depth` levels down. Returns [N, n, output_size, num_filters], plus a bias
    parameter shaped as its last three dims unless bias_attr is False, through `act`."""
    check_type(nodes_vector, "nodes_vector", Variable, "tree_conv")
    check_type(edge_set, "edge_set", Variable, "tree_conv")
    helper = LayerHelper("tree_conv", nodes_vector=nodes_vector, edge_set=edge_set,
                         param_attr=param_attr, bias_attr=bias_attr, act=act, name=name)
    dtype = nodes_vector.dtype
    w = helper.create_parameter(param_attr, [nodes_vector.shape[2], 3, output_size, num_filters],
                                dtype)
    out = helper.create_variable_for_type_inference(dtype)
    helper.append_op("tree_conv", inputs={"NodesVector": nodes_vector, "EdgeSet": edge_set,
                                          "Filter": w},
                     outputs={"Out": out}, attrs={"max_depth": max_depth})
    return helper.append_activation(helper.append_bias_op(out, bias_attr))
