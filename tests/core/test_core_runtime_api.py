"""Fluid 1.8's `fluid.core` runtime objects as its programs and tests use them: the feed and
fetch holders (`core.set_feed_variable` / `get_fetch_variable`), scalar variables
(`set_int` / `is_int`), the root-scope pool (`Scope._remove_from_pool`), LoDTensor's
allocation and slicing methods, and the desc classes as types."""
import numbers

import numpy as np
import pytest

import fluidity as fluid
from fluidity import core

VT = core.VarDesc.VarType


def test_feed_and_fetch_holders_by_column():
    scope = core.Scope()
    t = core.LoDTensor([[2, 2]])                # Paddle's LoDTensor(recursive_seq_lens)
    assert t.recursive_sequence_lengths() == [[2, 2]] and not t.is_initialized()
    t.set(np.arange(24, dtype="float32").reshape(4, 6), core.CPUPlace())
    core.set_feed_variable(scope, t, "feed", 1)
    assert scope.find_var("feed").get_feed_list()[1] is t
    fetched = scope.var("fetch").get_fetch_list()
    fetched.append(t)
    out = core.get_fetch_variable(scope, "fetch", 0)
    assert out.recursive_sequence_lengths() == [[2, 2]]
    assert np.array(out)[3, 5] == 23
    with pytest.raises(core.EnforceNotMet, match="column 3"):
        core.get_fetch_variable(scope, "fetch", 3)
    with pytest.raises(TypeError, match="'feed'"):
        core.set_feed_variable(scope, np.ones(2), "feed", 0)


def test_scalar_variables_say_what_they_hold():
    v = core.Scope().var("i")
    assert not v.is_int() and not v.is_float()
    v.set_int(10)
    assert v.is_int() and v.get_int() == 10 and not v.is_float()
    v.set_float(2.5)
    assert v.is_float() and not v.is_int() and v.get_float() == 2.5
    v.set_value(core.LoDTensor(np.array([1], "int32")))   # replaced: no longer set_int's
    assert not v.is_int()


def test_remove_from_pool_once():
    scope = core.Scope()
    scope.var("a")
    kid = scope.new_scope()
    with pytest.raises(core.EnforceNotMet, match="nonexistent scope"):
        kid._remove_from_pool()                 # a kid is not in the pool
    scope._remove_from_pool()
    assert scope.find_var("a") is None
    with pytest.raises(core.EnforceNotMet, match="Deleting a nonexistent scope"):
        scope._remove_from_pool()


def test_tensor_allocation_by_dims_and_dtype():
    t = core.Scope().var("t").get_tensor()
    t._set_dims([3, 2])
    t._alloc_int(core.CPUPlace())
    assert np.array(t).dtype == np.int32 and t._get_dims() == [3, 2]
    t.set(np.full((3, 2), 7, "int32"), core.CPUPlace())
    t._alloc_int(core.CPUPlace())               # same dtype: the data is kept
    assert (np.array(t) == 7).all()
    t._alloc_float(core.CPUPlace())             # another dtype: new zeroed memory
    assert np.array(t).dtype == np.float32 and not np.array(t).any()
    empty = core.LoDTensor()
    empty._set_dims([0, 1])
    empty._alloc_float(core.CPUPlace())
    assert np.array(empty).shape == (0, 1)
    fresh = core.LoDTensor()
    address = fresh._mutable_data(core.CPUPlace(), VT.FP64)
    assert isinstance(address, numbers.Integral) and np.array(fresh).dtype == np.float64


def test_tensor_slices_are_copies_as_numpy_indexes():
    a = np.arange(27, dtype="int64").reshape(3, 3, 3)
    t = fluid.Tensor()
    t.set(a, core.CPUPlace())
    for index in (1, slice(1, None), (slice(None, None, -2), 0),
                  (slice(0, None), slice(0, None, -1), slice(2, None))):
        part = t[index]
        assert isinstance(part, core.LoDTensor)
        np.testing.assert_array_equal(np.array(part), a[index])
    t[0]._array[...] = -1                       # a copy: the tensor is unchanged
    np.testing.assert_array_equal(np.array(t), a)


def test_selected_rows_sync_index_keeps_rows():
    sr = core.Scope().var("w").get_selected_rows()
    sr.set_height(8)
    sr.set_rows([0, 3, 5])
    sr.sync_index()
    assert sr.rows() == [0, 3, 5] and sr.height() == 8


def test_desc_classes_are_types_of_the_descs():
    prog = fluid.Program()
    v = prog.global_block().create_var(name="v", shape=[2], dtype="float32")
    assert isinstance(prog.desc, core.ProgramDesc)
    assert isinstance(prog.desc.block(0), core.BlockDesc)
    assert isinstance(v.desc, core.VarDesc) and not isinstance(prog.desc, core.VarDesc)
    assert isinstance(core.ProgramDesc(), core.ProgramDesc)
    with pytest.raises(TypeError):
        core.BlockDesc()
    block = core.ProgramDesc().block(0)
    a, b = block.var(b"a"), block.var(b"b")
    assert set(block.all_vars()) == {a, b} and block.find_var(b"b") == b


def test_op_attr_defaults():
    d = core.get_op_attrs_default_value(b"fill_constant")
    assert d["shape"] == [] and d["force_cpu"] is False and "op_role" in d
    d["shape"].append(3)                        # a copy: the schema is untouched
    assert core.get_op_attrs_default_value("fill_constant")["shape"] == []
    with pytest.raises(Exception, match="no_such_op"):
        core.get_op_attrs_default_value("no_such_op")


def test_var_desc_type_reads_as_field_and_as_paddle_accessor():
    block = core.ProgramDesc().block(0)
    v = block.var(b"rows")
    v.set_type(VT.SELECTED_ROWS)
    v.set_shape([3, 2])
    assert v.type() == VT.SELECTED_ROWS == v.type.type and v.shape() == [3, 2]


@pytest.mark.parametrize("sparse", [True, False])
def test_fake_init_sizes_the_held_value(sparse):
    from fluidity.op import Operator
    scope = core.Scope()
    held = (scope.var("Out").get_selected_rows().get_tensor() if sparse
            else scope.var("Out").get_tensor())
    Operator("fake_init", Out="Out", shape=[4, 7]).run(scope, core.CPUPlace())
    assert held._get_dims() == [4, 7]          # the tensor taken before the run holds it
    if sparse:
        assert scope.find_var("Out").value.rows() == []
