"""Fluid 1.8 framework behaviours its programs and tests rely on: name scopes numbered as
Fluid numbers them, `to_string(throw_on_error, with_details)`, `Operator.attr_type`,
`Variable._set_info`, `require_version`'s error types, `_prune_with_input` with target
ops, `fluid.default_scope_funcs`, `fluid.op.OpDescCreationMethod` and core.Operator's text,
and `CompiledProgram` of a `core.Graph`."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity import core, default_scope_funcs as dsf, op
from fluidity.proto import framework_pb2 as pb

L = fluid.layers


def test_name_scopes_number_a_reused_prefix():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        with fluid.name_scope("s1"):
            a = L.data("a", [1])
            b = a + a
            with fluid.name_scope("s2"):
                c = b * b
        with fluid.name_scope("s1"):
            d = c - c
    scopes = {o.type: o.attr("op_namescope") for o in main.global_block().ops}
    assert scopes == {"elementwise_add": "/s1/", "elementwise_mul": "/s1/s2/",
                      "elementwise_sub": "/s1_1/"}
    with pytest.raises(AssertionError):
        with fluid.name_scope(""):
            pass
    assert d is not None


def test_to_string_details_and_uninitialized_descs():
    p = fluid.Program()
    with fluid.program_guard(p, fluid.Program()):
        x = fluid.data("X", [2, 3])
        L.fc(x, 3)
    short = p.to_string(throw_on_error=True, with_details=False)
    long = p.to_string(throw_on_error=False, with_details=True)
    assert len(long) > len(short) and "op_namescope" in long and "stop_gradient=" in long
    with pytest.raises(AssertionError):
        p.to_string("yes")
    broken = fluid.Program()
    broken.desc.blocks[0].vars.add(name="t")        # a VarDesc without its required type
    with pytest.raises(ValueError, match="not initialized"):
        broken.to_string(True)


def test_create_var_without_dtype_leaves_it_unset_as_fluid():
    """Fluid's create_var without a dtype leaves the TensorDesc's required data_type unset:
    to_string(True) raises ValueError naming it, and the first op that writes the variable
    (or declaring it again with a dtype) gives it one. Meanwhile its dtype is unknown (None;
    Fluid reads the proto default, BOOL), so a load or a feed takes the value's."""
    p = fluid.Program()
    block = p.current_block()
    t = block.create_var(name="t", shape=[0, 1])
    assert t.dtype is None
    with pytest.raises(ValueError, match="data_type"):
        p.to_string(True)
    with pytest.raises(ValueError, match="data_type"):
        t.to_string(True)
    assert "t" in p.to_string(False)
    with fluid.program_guard(p, fluid.Program()):
        x = fluid.data("x", [2, 3], dtype="float64")
        out = block.create_var(name="out")
        L.assign(x, output=out)
    assert out.dtype == core.VarDesc.VarType.FP64
    block.create_var(name="t", dtype="int32")      # declared again, now with a dtype
    assert t.dtype == core.VarDesc.VarType.INT32
    p.to_string(True)
    # a desc still missing a dtype is written as Fluid writes it; reading it back names the
    # missing field
    q = fluid.Program()
    q.global_block().create_var(name="u", shape=[2])
    with pytest.raises(fluid.errors.FluidityError, match="data_type"):
        fluid.Program.parse_from_string(q.serialize_to_string())
    got, = fluid.Executor().run(p, feed={"x": np.ones((2, 3))}, fetch_list=[out])
    assert got.dtype == np.float64


def test_operator_attr_type_and_info_on_variables():
    p = fluid.Program()
    blk = p.global_block()
    x = blk.create_var(name="x", shape=[5, 10], dtype="float32")
    y = blk.create_var(name="y", shape=[10, 8], dtype="float32")
    out = blk.create_var(name="out", shape=[5, 8], dtype="float32")
    mul = blk.append_op(type="mul", inputs={"X": [x], "Y": y}, outputs={"Out": [out]},
                        attrs={"x_num_col_dims": 1})
    assert mul.attr_type("x_num_col_dims") == core.AttrType.INT
    x._set_info("owner", "me")
    assert x._get_info("owner") == "me" and x._get_info("other") is None


def test_require_version_argument_types():
    with pytest.raises(TypeError):
        fluid.require_version(100)
    with pytest.raises(TypeError):
        fluid.require_version("1.0", 200)
    with pytest.raises(ValueError):
        fluid.require_version("string")
    fluid.require_version("1.4", "9.9")


def test_prune_with_input_keeps_a_target_optimizer_op():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [2])
        loss = L.mean(L.fc(x, 1))
        ops, _ = fluid.optimizer.SGD(0.1).minimize(loss)
    kept = [o.type for o in main._prune_with_input(["x"], [loss]).global_block().ops]
    assert "sgd" not in kept                               # an optimizer op only as a target
    kept = [o.type for o in main._prune_with_input(["x"], [loss] + ops).global_block().ops]
    assert kept.count("sgd") == len(ops) and "mul_grad" in kept
    with pytest.raises(ValueError, match="can only be Variable or Operator"):
        main._prune_with_input([], [None])
    with pytest.raises(ValueError, match="not an op of this program"):
        fluid.Program()._prune_with_input([], ops)


def test_default_scope_funcs_stack():
    outer = dsf.var("outer_v")
    assert dsf.find_var("outer_v") is outer and dsf.find_var("nothing") is None

    def body():
        inner = dsf.var("inner_v")
        inner.set_int(3)
        assert dsf.find_var("outer_v") is outer and inner.is_int()
        return dsf.get_cur_scope()
    local = dsf.scoped_function(body)
    assert local is not dsf.get_cur_scope() and dsf.find_var("inner_v") is None
    with pytest.raises(RuntimeError):
        dsf.leave_local_scope()


def test_op_desc_creation_method_and_core_operator_text():
    proto = pb.OpProto(type="test", comment="")
    for name, dup in (("X", True), ("b", False)):
        proto.inputs.add(name=name, comment="", duplicable=dup)
    proto.outputs.add(name="Out", comment="")
    proto.attrs.add(name="scale", type=pb.FLOAT, comment="")
    make = op.OpDescCreationMethod(proto)
    od = make(X=["x1", "x2"], b="b", Out="o", scale=2)
    assert [(v.parameter, list(v.arguments)) for v in od.inputs] == [("X", ["x1", "x2"]),
                                                                      ("b", ["b"])]
    assert od.attrs[0].type == pb.FLOAT and od.attrs[0].f == 2.0
    with pytest.raises(ValueError, match="expects only one"):
        make(b=["b1", "b2"])
    with pytest.raises(ValueError):
        make("positional")
    assert str(op.Operator("sum", X=["a", "b"], Out="z")) == \
        "Op(sum), inputs:{X[a, b]}, outputs:{Out[z]}."


def test_compiled_program_of_a_graph_runs_and_io_refuses_it():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [2, 3])
        y = L.scale(x, 3.0)
    cp = fluid.CompiledProgram(core.Graph(main.desc))
    out, = fluid.Executor(fluid.CPUPlace()).run(cp, feed={"x": np.ones((2, 3), "f4")},
                                                fetch_list=[y.name])
    np.testing.assert_array_equal(out, np.full((2, 3), 3.0, "f4"))
    with pytest.raises(TypeError):
        fluid.io._get_valid_program(cp)
    with pytest.raises(TypeError):
        fluid.CompiledProgram("program")


def test_require_version_reads_the_version_when_called(monkeypatch):
    from fluidity import version
    monkeypatch.setattr(version, "minor", "4")
    monkeypatch.setattr(version, "patch", "1")
    fluid.require_version("1.4.1", "1.4.1")
    with pytest.raises(Exception, match="VersionError"):
        fluid.require_version("1.5")
    for name in ("major", "minor", "patch", "rc"):
        monkeypatch.setattr(version, name, "0")
    with pytest.warns(UserWarning, match="develop version"):
        fluid.require_version("9.0")


def test_dtype_less_variables_load_what_the_file_holds(tmp_path):
    """load_program_state of a save_persistables directory declares a variable per file
    without a dtype: each loads the file's own dtype and shape."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [2, 3], dtype="float64")
        L.fc(x, 4)
        L.create_global_var([2], 7, "int64", persistable=True, name="steps")
    scope = fluid.Scope()
    exe = fluid.Executor()
    exe.run(startup, scope=scope)
    with fluid.scope_guard(scope):
        fluid.io.save_persistables(exe, str(tmp_path), main)
    state = fluid.io.load_program_state(str(tmp_path))
    assert state["fc_0.w_0"].dtype == np.float64 and state["fc_0.w_0"].shape == (3, 4)
    np.testing.assert_array_equal(state["steps"], np.array([7, 7], np.int64))
