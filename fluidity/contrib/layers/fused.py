"""`fluid.contrib.layers` over Fluid 1.8's fused CPU ops: fused_elemwise_activation (an
elementwise add/mul and a unary op in one op, with a gradient) and fused_embedding_seq_pool
(a table lookup summed over each sequence). Paddle 1.8's signatures and programs."""
from ...core import dtypes
from ...layer_helper import LayerHelper
from ...layers.checks import check_variables

__all__ = ["fused_elemwise_activation", "fused_embedding_seq_pool"]


def fused_elemwise_activation(x, y, functor_list, axis=-1, scale=0.0,
                              save_intermediate_out=True):
    """out = Binary(x, Unary(y)) for functor_list [binary, unary], or Unary(Binary(x, y))
    for [unary, binary]; binary: elementwise_add, elementwise_mul; unary: scale (by
    `scale`), relu, tanh, sigmoid. `functor_list` may be a "a,b" string. x and y broadcast
    as in elementwise ops (`axis`); the intermediate result is kept for the gradient when
    `save_intermediate_out`."""
    if isinstance(functor_list, str):
        functor_list = functor_list.split(",")
    if not isinstance(functor_list, list) or len(functor_list) != 2:
        raise ValueError("functor_list should be a list of str, and the length should be 2.")
    check_variables("fluid.contrib.layers.fused_elemwise_activation", x=x, y=y)
    helper = LayerHelper("fused_elemwise_activation")
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    intermediate_out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op("fused_elemwise_activation", inputs={"X": x, "Y": y},
                     outputs={"Out": out, "IntermediateOut": intermediate_out},
                     attrs={"axis": axis, "scale": scale,
                            "save_intermediate_out": save_intermediate_out,
                            "functor_list": functor_list})
    return out


def fused_embedding_seq_pool(input, size, is_sparse=False, padding_idx=None, combiner="sum",
                             param_attr=None, dtype="float32"):
    """The sum over each sequence of `input` (int64 ids [T, ..., 1], LoD level 1) of the rows
    of a [vocab, dim] table parameter: lookup_table + sequence_pool(SUM) in one op. A row of
    k ids gives k pooled columns blocks: out is [batch, k * dim]. `padding_idx` ids add
    nothing (negative counts from the end of the vocabulary); only combiner 'sum' exists."""
    layer = "fluid.contrib.fused_embedding_seq_pool"
    check_variables(layer, input=input)
    if dtypes.name(input.dtype) != "int64":
        raise TypeError(f"{layer}: input ({input.name}) must be int64 ids, got "
                        f"{dtypes.name(input.dtype)}")
    helper = LayerHelper("fused_embedding_seq_pool", param_attr=param_attr)
    w = helper.create_parameter(param_attr, list(size), dtype)
    out = helper.create_variable_for_type_inference(dtype)
    pad = -1 if padding_idx is None else (padding_idx if padding_idx >= 0
                                          else size[0] + padding_idx)
    helper.append_op("fused_embedding_seq_pool", inputs={"Ids": input, "W": w},
                     outputs={"Out": out},
                     attrs={"is_sparse": is_sparse, "combiner": combiner, "padding_idx": pad})
    return out
