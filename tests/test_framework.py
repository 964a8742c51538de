"""Program / Block / Variable / Operator: the Fluid API over the ProgramDesc."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity import unique_name
from fluidity.errors import ProgramError, ShapeError, UnknownOpError, VariableNotFoundError


def test_program_structure_and_views_share_the_desc():
    prog = fluid.Program()
    b0 = prog.global_block()
    assert prog.block(0) is b0 and prog.current_block() is b0 and prog.num_blocks == 1
    v = b0.create_var(name="v", shape=[-1, 3], dtype="float32", lod_level=1)
    assert (v.name, v.shape, v.dtype, v.lod_level, v.persistable) == (
        "v", (-1, 3), fluid.VarType.FP32, 1, False)
    v.persistable = True
    v.stop_gradient = True
    assert prog.desc.blocks[0].vars[0].persistable and prog.desc.blocks[0].vars[0].stop_gradient
    b1 = prog._create_block()
    assert b1.idx == 1 and b1.parent_idx == 0 and b1.parent is b0
    assert b1._find_var_recursive("v") is v and not b1.has_var("v")
    prog._rollback()
    assert prog.current_block() is b0


def test_parameter_and_ops():
    prog = fluid.Program()
    b = prog.global_block()
    p = b.create_parameter(name="w", shape=[3, 4], dtype="float32")
    assert isinstance(p, fluid.Parameter) and p.persistable and p.trainable
    x = b.create_var(name="x", shape=[-1, 3], dtype="float32")
    out = b.create_var(name="out")
    op = b.append_op("mul", {"X": x, "Y": p}, {"Out": out})
    assert out.shape == (-1, 4) and out.dtype == fluid.core.VarDesc.VarType.FP32  # inferred
    assert op.input("X") == ["x"] and op.output("Out") == ["out"] and op.attr("x_num_col_dims") == 1
    first = b.prepend_op("scale", {"X": x}, {"Out": x}, {"scale": 2.0})
    assert [o.type for o in b.ops] == ["scale", "mul"] and b.ops[0] is first
    assert [o.type for o in prog.desc.blocks[0].ops] == ["scale", "mul"]
    # the parsed copy knows w is a parameter (is_parameter in the VarDesc)
    p2 = fluid.Program.parse_from_string(prog.serialize_to_string())
    assert isinstance(p2.global_block().var("w"), fluid.Parameter)


def test_shape_inference_through_layers():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [2, 3, 4])
        h = fluid.layers.fc(x, 5, num_flatten_dims=2)
        assert h.shape == (-1, 2, 5)
        y = fluid.layers.elementwise_add(h, fluid.layers.fill_constant([5], "float32", 1.0))
        assert y.shape == (-1, 2, 5)
        m = fluid.layers.mean(y)
        assert m.shape == (1,)       # [1], as Fluid 1.x
    # parameters went to main (as vars) and their initializers to startup
    assert {p.name for p in main.all_parameters()} == {"fc_0.w_0", "fc_0.b_0"} or \
        len(main.all_parameters()) == 2
    assert {op.type for op in startup.global_block().ops} <= {"uniform_random", "fill_constant"}


def test_build_time_errors_name_what_is_wrong():
    main = fluid.Program()
    b = main.global_block()
    x = b.create_var(name="x", shape=[-1, 3])
    w = b.create_var(name="w", shape=[4, 5])
    with pytest.raises(ShapeError, match=r"mul.*3 columns.*4 rows"):
        b.append_op("mul", {"X": x, "Y": w}, {"Out": b.create_var(name="o")})
    assert not b.ops  # a failed append leaves nothing behind
    with pytest.raises(UnknownOpError, match="no_such_op"):
        b.append_op("no_such_op", {}, {})
    with pytest.raises(UnknownOpError, match="did you mean elementwise_add"):
        b.append_op("elementwise_addd", {}, {})
    with pytest.raises(VariableNotFoundError, match="'nope'"):
        b.append_op("scale", {"X": "nope"}, {"Out": x})
    with pytest.raises(ProgramError, match="no input slot 'Z'"):
        b.append_op("scale", {"X": x, "Z": x}, {"Out": x})
    with pytest.raises(ProgramError, match="needs input 'Y'"):
        b.append_op("mul", {"X": x}, {"Out": x})
    with pytest.raises(VariableNotFoundError):
        b.var("missing")


def test_unique_name_and_guard():
    with unique_name.guard():
        a = unique_name.generate("fc")
        b_ = unique_name.generate("fc")
    with unique_name.guard():
        c = unique_name.generate("fc")
    assert (a, b_, c) == ("fc_0", "fc_1", "fc_0")


def test_name_scope_recorded():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", [3])
        with fluid.name_scope("encoder"):
            y = fluid.layers.scale(x, 2.0)
    op = main.global_block().ops[-1]
    assert op.attr("op_namescope") == "/encoder/"


def test_clone_is_deep_and_keeps_parameters():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [3])
        fluid.layers.fc(x, 2, param_attr=fluid.ParamAttr(name="w", learning_rate=0.5))
    c = main.clone()
    assert c.serialize_to_string() == main.serialize_to_string()
    c.global_block().create_var(name="extra")
    assert not main.global_block().has_var("extra")
    assert c.global_block().var("w").optimize_attr == {"learning_rate": 0.5}


def test_to_string_readable():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), unique_name.guard():
        x = fluid.layers.data("x", [3])
        fluid.layers.scale(x, 2.0, bias=1.0)
    s = main.to_string()
    assert "x : float32[-1, 3]" in s
    assert "Out=scale_0.tmp_0 = scale(X=x) {bias=1, bias_after_scale=True, scale=2}" in s


def test_variable_operators():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        a = fluid.layers.data("a", [2], append_batch_size=False)
        b = fluid.layers.data("b", [2], append_batch_size=False)
        c = (a + b) * 2.0 - a / b + 1.0
        d = 3.0 - a
    exe = fluid.Executor(fluid.CPUPlace())
    av, bv = np.array([1.0, 2.0], "float32"), np.array([4.0, 8.0], "float32")
    got_c, got_d = exe.run(main, feed={"a": av, "b": bv}, fetch_list=[c, d])
    np.testing.assert_allclose(got_c, (av + bv) * 2 - av / bv + 1, rtol=1e-6)
    np.testing.assert_allclose(got_d, 3.0 - av)
