"""ir.rewrite: the one way programs change, views kept in step with the desc."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.core.dtypes import VarType
from fluidity.errors import ProgramError, ShapeError, VariableNotFoundError
from fluidity.ir import rewrite
from fluidity.ir.views import ProgramView
from fluidity.proto import framework_pb2 as pb
from fluidity.transpiler.fuse import fuse_fc


def _view():
    desc = pb.ProgramDesc()
    b = desc.blocks.add()
    b.idx, b.parent_idx = 0, -1
    p = ProgramView(desc)
    blk = p.global_block()
    for n in ("x", "y", "z"):
        rewrite.add_var(blk, n, shape=[-1, 3], dtype="float32")
    return p, blk


def test_insert_remove_keep_views_and_desc_in_step():
    p, b = _view()
    r0 = p.revision
    a = rewrite.append_op(b, "scale", {"X": ["x"]}, {"Out": ["y"]}, {"scale": 2})
    c = rewrite.append_op(b, "relu", {"X": ["y"]}, {"Out": ["z"]})
    m = rewrite.insert_op(b, 1, "scale", {"X": "y"}, {"Out": "y"})
    assert [op.type for op in b.ops] == ["scale", "scale", "relu"]
    assert [od.type for od in b.desc.ops] == ["scale", "scale", "relu"]
    assert b.ops.index(m) == 1 and m.idx == 1
    assert p.revision > r0
    assert a.attr("scale") == 2.0 and b.desc.ops[0].attrs   # typed FLOAT by the schema
    rewrite.remove_op(b, m)
    assert [op.type for op in b.ops] == ["scale", "relu"]
    assert all(op.desc is od for op, od in zip(b.ops, b.desc.ops))
    assert c.input("X") == ["y"]
    rewrite.remove_ops(b, 0, 2)
    assert b.ops == [] and len(b.desc.ops) == 0


def test_op_descs_are_checked_against_the_schema():
    with pytest.raises(ProgramError, match="has no input slot 'Q'"):
        rewrite.make_op_desc("scale", {"Q": ["x"]}, {"Out": ["y"]})
    with pytest.raises(ProgramError, match="needs input 'X'"):
        rewrite.make_op_desc("scale", {}, {"Out": ["y"]})
    with pytest.raises(ProgramError, match="takes one variable"):
        rewrite.make_op_desc("scale", {"X": ["a", "b"]}, {"Out": ["y"]})
    od = rewrite.make_op_desc("sum", {"X": ["a", "b"]}, {"Out": ["y"]}, {"op_role": 1})
    names = [a.name for a in od.attrs]
    assert names == sorted(names) and "op_role" in names


def test_infer_shape_on_insert_and_a_failed_insert_leaves_nothing():
    p, b = _view()
    rewrite.add_var(b, "w", shape=[4, 5], dtype="float32")
    rewrite.add_var(b, "o", dtype="float32")
    with pytest.raises(ShapeError, match="mul"):
        rewrite.append_op(b, "mul", {"X": ["x"], "Y": ["w"]}, {"Out": ["o"]}, infer_shape=True)
    assert b.ops == [] and len(b.desc.ops) == 0
    with pytest.raises(VariableNotFoundError, match="'ghost'"):
        rewrite.append_op(b, "relu", {"X": ["ghost"]}, {"Out": ["o"]}, infer_shape=True)
    assert b.ops == []
    rewrite.append_op(b, "relu", {"X": ["x"]}, {"Out": ["o"]}, infer_shape=True)
    assert b.var("o").shape == (-1, 3)


def test_variables_rename_and_remove():
    p, b = _view()
    op = rewrite.append_op(b, "relu", {"X": ["x"]}, {"Out": ["y"]})
    rewrite.rename_var(b, "x", "x2")
    assert op.input("X") == ["x2"] and "x" not in b.vars and b.var("x2").name == "x2"
    with pytest.raises(ProgramError, match="exists"):
        rewrite.rename_var(b, "x2", "y")
    with pytest.raises(ProgramError, match="already declares"):
        rewrite.add_var(b, "y")
    rewrite.remove_vars(b, ["z", "not_there"])
    assert sorted(b.vars) == ["x2", "y"] and sorted(v.name for v in b.desc.vars) == ["x2", "y"]
    assert all(v.desc.name == n for n, v in b.vars.items())
    rewrite.set_inputs(op, "X", ["y"])
    rewrite.set_attr(op, "op_role", 2)
    assert op.input("X") == ["y"] and op.role == 2
    rewrite.remove_attrs(op, ["op_role"])
    assert op.role == 0


def test_blocks():
    p, b = _view()
    sub = rewrite.add_block(p, 0)
    assert sub.idx == 1 and sub.parent is b and p.blocks[1] is sub and len(p.desc.blocks) == 2
    rewrite.add_var(sub, "inner", VarType.LOD_TENSOR, [3], "float32")
    assert sub.find_var_recursive("x") is b.var("x")


def test_a_pass_on_a_copy_is_a_pure_function_of_descs():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [4])
        y = fluid.layers.fc(fluid.layers.fc(x, 8, act="relu"), 2)
    before = main.desc.SerializeToString()
    new, fused = rewrite.on_copy(main.desc, fuse_fc)
    assert fused == 2 and main.desc.SerializeToString() == before
    assert [od.type for od in new.blocks[0].ops] == ["fc", "fc"]
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    xv = np.random.default_rng(0).normal(size=(3, 4)).astype("float32")
    (a,) = exe.run(main, feed={"x": xv}, fetch_list=[y.name], scope=scope)
    (b,) = exe.run(new, feed={"x": xv}, fetch_list=[y.name], scope=scope)  # a bare desc runs
    np.testing.assert_allclose(a, b, rtol=1e-6)
