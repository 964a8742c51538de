"""`fluid.transpiler.distribute_transpiler.slice_variable`: the blocks a variable is cut into
for the parameter servers, as `name:block:size` strings."""
import math

import pytest

import fluidity as fluid
from fluidity.transpiler.distribute_transpiler import slice_variable


def _var(block, name, shape):
    return block.create_var(name=name, persistable=True, shape=shape, dtype="float32")


def _reference(shape, slices, min_size):
    """Independent count: at most numel // min_size blocks (at least one), each a whole
    number of rows, all full but the last."""
    numel = math.prod(shape)
    row = math.prod(shape[1:]) if len(shape) > 1 else 1
    count = max(1, min(slices, numel // min_size))
    rows = math.ceil(math.ceil(numel / count) / row)
    sizes, left = [], shape[0]
    while left > 0:
        sizes.append(min(rows, left) * row)
        left -= rows
    return sizes


@pytest.mark.parametrize("shape", [[7, 3], [5000], [40, 100], [9, 1000], [3, 7, 11, 13]])
@pytest.mark.parametrize("slices, min_size", [(4, 1000), (10, 8192), (1, 1)])
def test_blocks_cover_the_variable_in_whole_rows(shape, slices, min_size):
    block = fluid.Program().global_block()
    out = slice_variable([_var(block, "w", shape)], slices, min_size)
    names = [s.split(":") for s in out]
    assert all(n == "w" for n, _, _ in names)
    assert [int(b) for _, b, _ in names] == list(range(len(out)))
    sizes = [int(z) for _, _, z in names]
    assert sizes == _reference(shape, slices, min_size)
    assert sum(sizes) == math.prod(shape) and len(sizes) <= slices


def test_several_variables_in_order():
    block = fluid.Program().global_block()
    out = slice_variable([_var(block, "a", [2, 3]), _var(block, "b", [100, 100])], 3, 1000)
    assert out == ["a:0:6", "b:0:3400", "b:1:3400", "b:2:3200"]


def test_bad_counts_are_refused():
    block = fluid.Program().global_block()
    with pytest.raises(ValueError, match="slice_count"):
        slice_variable([_var(block, "a", [2, 3])], 0, 8192)
    with pytest.raises(ValueError, match="min_block_size"):
        slice_variable([_var(block, "a", [2, 3])], 2, 0)
