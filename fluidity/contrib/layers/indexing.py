"""`fluid.contrib.layers.index_sample` (Paddle 1.8's contrib layer over the op index_sample,
fluidity/ops/indexing.py): a per-row gather, as PaddleRec's TDM beam search picks each row's
top nodes by the indices topk gives."""
from ...layer_helper import LayerHelper
from ...layers.checks import check_variable_and_dtype

__all__ = ["index_sample"]


def index_sample(x, index):
    """Out[i, j] = x[i, index[i, j]]: x [N, M] (float32/float64/int32/int64), index [N, K]
    (int32/int64) -> Out [N, K] of x's dtype."""
    check_variable_and_dtype(x, "x", ["float32", "float64", "int32", "int64"],
                             "fluid.contrib.layers.index_sample")
    check_variable_and_dtype(index, "index", ["int32", "int64"],
                             "fluid.contrib.layers.index_sample")
    helper = LayerHelper("index_sample")
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op("index_sample", inputs={"X": x, "Index": index}, outputs={"Out": out})
    return out
