"""Scope, LoDTensor, SelectedRows, LoDTensorArray, dtypes."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.core import dtypes
from fluidity.errors import FluidityError, ShapeError


def test_scope_tree():
    root = fluid.Scope()
    a = root.var("a")
    kid = root.new_scope()
    grandkid = kid.new_scope()
    assert grandkid.find_var("a") is a and kid.find_local_var("a") is None
    b = kid.var("b")
    assert root.find_var("b") is None and grandkid.find_var("b") is b
    assert kid.var("a") is not a  # var() creates locally, never looks up
    assert grandkid.find_var("a") is kid.find_local_var("a")  # nearest wins
    assert set(kid.local_var_names()) == {"a", "b"}
    kid.erase_vars(["a"])
    assert grandkid.find_var("a") is a
    assert root.kids() == [kid]
    root.drop_kids()
    assert root.kids() == [] and kid.local_var_names() == []
    k2 = root.new_scope()
    root.delete_scope(k2)
    with pytest.raises(FluidityError):
        root.delete_scope(k2)


def test_variable_holder_types():
    s = fluid.Scope()
    t = s.var("t").get_tensor()
    t.set(np.arange(6, dtype="float32").reshape(2, 3), fluid.CPUPlace())
    assert s.find_var("t").get_tensor() is t and t.shape() == [2, 3]
    assert t._dtype() == fluid.VarType.FP32
    np.testing.assert_array_equal(np.array(t), np.arange(6).reshape(2, 3))
    with pytest.raises(FluidityError, match="holds a LoDTensor"):
        s.find_var("t").get_selected_rows()
    arr = s.var("arr").get_lod_tensor_array()
    arr.append(np.ones(2))
    assert isinstance(arr[0], fluid.LoDTensor)


def test_lod_tensor_lod_and_lengths():
    t = fluid.LoDTensor()
    t.set(np.zeros((5, 2), "float32"))
    t.set_recursive_sequence_lengths([[2, 3]])
    assert t.lod() == [[0, 2, 5]] and t.recursive_sequence_lengths() == [[2, 3]]
    assert t.has_valid_recursive_sequence_lengths()
    # two levels: 2 paragraphs of [1, 2] sentences holding [2, 1, 2] words
    t.set_lod([[0, 1, 3], [0, 2, 3, 5]])
    assert t.recursive_sequence_lengths() == [[1, 2], [2, 1, 2]]
    with pytest.raises(ShapeError, match="5 rows"):
        t.set_lod([[0, 2, 4]])
    with pytest.raises(ShapeError, match="start at 0"):
        t.set_lod([[1, 5]])
    with pytest.raises(ShapeError, match="non-decreasing"):
        t.set_lod([[0, 3, 2, 5]])
    with pytest.raises(ShapeError, match="level 0 ends at 2 but level 1 holds 3"):
        t.set_lod([[0, 2], [0, 2, 3, 5]])
    bad = fluid.LoDTensor(np.zeros((4, 1)), [[0, 2, 5]])
    assert not bad.has_valid_recursive_sequence_lengths()


def test_create_lod_tensor_from_lists():
    t = fluid.create_lod_tensor([[1, 2], [3, 4, 5]], [[2, 3]], fluid.CPUPlace())
    assert t.shape() == [5, 1] and t.lod() == [[0, 2, 5]] and np.asarray(t).dtype == np.int64


def test_selected_rows_merge_and_dense():
    sr = fluid.SelectedRows([3, 1, 3], height=5, value=np.array([[1.0], [2.0], [4.0]]))
    m = sr.merged()
    assert list(m.rows) == [1, 3] and m.value.ravel().tolist() == [2.0, 5.0]
    np.testing.assert_array_equal(sr.to_dense().ravel(), [0, 2, 0, 5, 0])


@pytest.mark.parametrize("name,code,npdt", [("float32", 5, np.float32), ("float64", 6, np.float64),
                                            ("int64", 3, np.int64), ("int32", 2, np.int32),
                                            ("bool", 0, np.bool_), ("float16", 4, np.float16),
                                            ("uint8", 20, np.uint8), ("int8", 21, np.int8)])
def test_dtypes_map_to_paddle_codes(name, code, npdt):
    assert dtypes.to_code(name) == code == dtypes.to_code(np.dtype(npdt)) == dtypes.to_code(code)
    assert dtypes.to_numpy(code) == np.dtype(npdt) and dtypes.name(code) == name
    with pytest.raises(FluidityError):
        dtypes.to_code("float7")
