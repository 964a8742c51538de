"""fluid.layers.similarity_focus over the op of fluidity/ops/similarity_focus.py (Paddle
1.8's signature, argument errors and program)."""
from ..layer_helper import LayerHelper
from .checks import check_variables

__all__ = ["similarity_focus"]


def similarity_focus(input, axis, indexes, name=None):
    """A 0/1 mask of `input` [B, A, R, C] (axis 1; or axes 2, 3): for each index in
    `indexes`, the largest cells of input[:, index] (the slice across `axis`) picked greedily
    so that no two share a row or a column, each marked along the whole of `axis`."""
    check_variables("similarity_focus", input=input)
    if not isinstance(axis, int):
        raise TypeError("axis must be int type.")
    if not isinstance(indexes, list):
        raise TypeError("indexes must be list type.")
    if axis not in (1, 2, 3):
        raise ValueError("axis must be 1, 2 or 3.")
    if not indexes:
        raise ValueError("indexes can not be empty.")
    helper = LayerHelper("similarity_focus", input=input, name=name)
    out = helper.create_variable_for_type_inference(dtype=input.dtype)
    helper.append_op("similarity_focus", inputs={"X": input}, outputs={"Out": out},
                     attrs={"axis": axis, "indexes": indexes})
    return out
