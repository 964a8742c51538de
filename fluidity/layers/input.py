"""Fluid 1.6+'s top-level input layers: `fluid.data`, `fluid.embedding`, `fluid.one_hot`.

They differ from their Fluid 1.x `fluid.layers` namesakes in shapes, so they live apart
(reached as `fluid.data` etc., never as `fluid.layers.*`):

- `fluid.data` takes the shape in full: no batch dimension is prepended; `None` or -1 marks
  a dimension known only when fed. The fed value is checked against that shape and dtype
  (Fluid's `check_feed_shape_type`; a mismatch is a ValueError).
- `fluid.embedding` / `fluid.one_hot` take ids of any shape and append a dimension
  (ops `lookup_table_v2` / `one_hot_v2`), where the `fluid.layers` ones need ids of shape
  [..., 1] and replace that last 1.
"""
from ..framework import check_dtype, check_variable_and_dtype
from ..layer_helper import LayerHelper
from .io import data as _layers_data
from .nn import table_lookup

__all__ = []   # reached as fluid.data / fluid.embedding / fluid.one_hot


def data(name, shape, dtype="float32", lod_level=0):
    if not isinstance(name, str):
        raise TypeError(f"fluid.data: name must be a str, got {type(name).__name__}")
    if not isinstance(shape, (list, tuple)):
        raise TypeError(f"fluid.data '{name}': shape must be a list or tuple, got "
                        f"{type(shape).__name__}")
    for d in shape:
        if d is not None and (not isinstance(d, int) or isinstance(d, bool) or d < -1):
            raise ValueError(f"fluid.data '{name}': shape {list(shape)} may hold ints >= 0, "
                             f"-1 or None only")
    var = _layers_data(name, [-1 if d is None else d for d in shape],
                       append_batch_size=False, dtype=dtype, lod_level=lod_level)
    var.desc.need_check_feed = True          # fed values are checked (check_feed_shape_type)
    return var


def embedding(input, size, is_sparse=False, is_distributed=False, padding_idx=None,
              param_attr=None, dtype="float32"):
    """Rows of a [vocab, dim] table for int64 ids of any shape: out = ids.shape + [dim]
    (op lookup_table_v2). `padding_idx` rows look up zeros (negative counts from the end);
    `is_sparse` makes the table's gradient a SelectedRows of the rows looked up."""
    check_variable_and_dtype(input, "input", ["int64"], "fluid.embedding")
    check_dtype(dtype, "dtype", ["float16", "float32", "float64"], "fluid.embedding")
    if not isinstance(size, (list, tuple)) or len(size) != 2:
        raise TypeError(f"fluid.embedding: size must be [vocab_size, dim], got {size!r}")
    return table_lookup("lookup_table_v2", input, size, is_sparse, is_distributed,
                        padding_idx, param_attr, dtype)


def one_hot(input, depth, allow_out_of_range=False):
    """One-hot float32 rows for int ids of any shape: out = ids.shape + [depth]
    (op one_hot_v2). An id outside [0, depth) is an error unless `allow_out_of_range`
    (then its row is all zeros)."""
    check_variable_and_dtype(input, "input", ["int32", "int64"], "one_hot_v2")
    helper = LayerHelper("one_hot_v2")
    out = helper.create_variable_for_type_inference("float32")
    helper.append_op("one_hot_v2", inputs={"X": input}, outputs={"Out": out},
                     attrs={"depth": int(depth), "allow_out_of_range": allow_out_of_range,
                            "dtype": out.dtype})
    out.stop_gradient = True
    return out
