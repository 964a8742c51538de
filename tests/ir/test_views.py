"""ir.views: windows on a ProgramDesc that the builder, executors and passes share."""
import pytest

import fluidity as fluid
from fluidity.core.dtypes import VarType
from fluidity.core.names import OpRole
from fluidity.errors import ProgramError, VariableNotFoundError
from fluidity.ir.views import BlockView, ProgramView, as_program_view, op_role, sub_block_ids
from programs import doubling_while


def test_a_view_of_the_builders_desc_reads_the_same_program():
    main, _, _ = doubling_while()
    view = ProgramView(main.desc)
    assert view.num_blocks == main.num_blocks == 2
    for vb, mb in zip(view.blocks, main.blocks):
        assert isinstance(vb, BlockView)
        assert [op.type for op in vb.ops] == [op.type for op in mb.ops]
        assert sorted(vb.vars) == sorted(mb.vars)
        for op, mop in zip(vb.ops, mb.ops):
            assert op.inputs_map() == mop.inputs_map() and op.all_attrs() == mop.all_attrs()
            assert op.desc is mop.desc.proto    # in place: no copy (the builder wraps it)
    sub = view.block(1)
    assert sub.parent.idx == 0
    assert sub.find_var_recursive("x").name == "x" and "x" not in sub.vars
    assert sub.find_var_recursive("nope") is None
    with pytest.raises(VariableNotFoundError):
        sub.var_recursive("nope")
    (w,) = [op for op in view.global_block().ops if op.type == "while"]
    assert w.sub_block_ids() == sub_block_ids(w.desc) == [1]
    assert w.idx == view.global_block().ops.index(w)


def test_attributes_read_with_schema_defaults_and_roles():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", [3])
        fluid.layers.scale(x, 2.0)
    view = ProgramView(main.desc)
    op = view.global_block().ops[-1]
    assert op.attr("scale") == 2.0
    del op.desc.attrs[:]                      # a desc that left its attributes out
    assert op.attr("bias") == 0.0 and op.attr("bias_after_scale") is True
    assert op.role == op_role(op.desc) == OpRole.Forward
    with pytest.raises(ProgramError, match="no attribute 'nope'"):
        op.attr("nope")


def test_var_views_and_their_setters():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        fluid.data("x", [-1, 3], lod_level=1)     # fluid.data: need_check_feed
    v = ProgramView(main.desc).global_block().var("x")
    assert v.shape == (-1, 3) and v.lod_level == 1 and v.type == VarType.LOD_TENSOR
    assert v.need_check_feed and not v.persistable
    v._set_shape([-1, 4])
    assert list(main.global_block().var("x").shape) == [-1, 4]   # the one desc underneath
    with pytest.raises(TypeError):
        ProgramView(main.global_block().desc)
    assert as_program_view(main) is main
    assert isinstance(as_program_view(main.desc), ProgramView)
