"""Names Fluid 1.8 marks private that real programs and tools use, working as in Fluid:
`fluid.core.EnforceNotMet` (what op checks raise), `LoDTensor._place`,
`fluid.executor._as_lodtensor` / `as_numpy`, Paddle's desc API on a bare
`core.ProgramDesc()` (`block.var`, `append_op`, `set_*`, `op.check_attrs`,
`op.infer_shape(block)`), `Program._sync_with_cpp`, `Program._copy_param_info_from`,
`core.Graph`, `framework._in_dygraph_mode`, `Operator._set_attr`, `Variable.grad_name`."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity import core, framework

L = fluid.layers
VT = core.VarDesc.VarType


def test_enforce_not_met_catches_op_errors_at_build_and_run_time():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [3])
        w = main.global_block().create_var(name="w", shape=[4, 2], dtype="float32")
        with pytest.raises(core.EnforceNotMet):          # mul's shape check, at build time
            main.global_block().append_op("mul", {"X": x, "Y": w},
                                          {"Out": main.global_block().create_var(name="o")})
        ids = L.data("ids", [1], dtype="int64")
        out = L.one_hot(ids, depth=3)
    exe = fluid.Executor()
    with pytest.raises(core.EnforceNotMet) as e:          # a kernel's check, at run time
        exe.run(main, feed={"x": np.ones((2, 3), "f4"), "ids": np.array([[1], [7]])},
                fetch_list=[out])
    assert isinstance(e.value, RuntimeError) and "one_hot" in str(e.value)


def test_lodtensor_place_and_the_executors_tensor_helpers():
    t = fluid.executor._as_lodtensor(np.arange(6, dtype="f4").reshape(2, 3), fluid.CPUPlace())
    assert isinstance(t._place(), fluid.CPUPlace) and t.shape() == [2, 3]
    s = fluid.executor._as_lodtensor(2.5, fluid.CPUPlace(), "float32")
    assert np.array(s).tolist() == [2.5]
    with pytest.raises(RuntimeError):
        fluid.executor._as_lodtensor([[1.0]], fluid.CPUPlace())
    with pytest.raises(TypeError):
        fluid.executor._as_lodtensor(3, fluid.CPUPlace())          # a scalar needs a dtype
    with pytest.raises(AssertionError):                            # as Fluid asserts it
        fluid.executor._as_lodtensor(3, fluid.CPUPlace())
    got = fluid.executor.as_numpy([t, t])
    assert [a.shape for a in got] == [(2, 3), (2, 3)]
    lod = fluid.create_lod_tensor(np.ones((3, 1), "f4"), [[1, 2]], fluid.CPUPlace())
    with pytest.raises(RuntimeError, match="LoD"):
        fluid.executor.as_numpy(lod)


def _sum_program():
    """Fluid's test pattern: a program written through the desc API alone."""
    prog = core.ProgramDesc()
    block = prog.block(0)
    for name in (b"x1", b"x2"):
        v = block.var(name)
        v.set_type(VT.LOD_TENSOR)
        v.set_shape([10, 20])
    block.var(b"out").set_type(VT.LOD_TENSOR)
    op = block.append_op()
    op.set_type("sum")
    op.set_input("X", ["x1", "x2"])
    op.set_output("Out", ["out"])
    return prog, block, op


def test_a_bare_program_desc_written_through_pauls_desc_api():
    prog, block, op = _sum_program()
    op.check_attrs()
    op.infer_shape(block)
    assert block.var("out").shape() == [10, 20]
    assert block.find_var("nope") is None and block.has_var("x1")
    mul = block.append_op()
    mul.set_type("mul")
    mul.check_attrs()                       # the schema's defaults written
    assert mul.attr("x_num_col_dims") == 1 and mul.attr_type("x_num_col_dims") == \
        core.AttrType.INT
    mul._set_attr("x_num_col_dims", 2)
    assert mul.attr("x_num_col_dims") == 2
    first = block._prepend_op()
    first.set_type("assign")
    assert [block.op(i).type for i in range(block.op_size())] == ["assign", "sum", "mul"]
    b1 = prog.append_block(block)
    assert b1.parent == 0 and prog.num_blocks() == 2
    r = block.var("reader")
    r.set_type(VT.READER)
    r.set_shapes([[2, 3], [4]])
    r.set_dtypes([VT.INT32, VT.FP64])
    r.set_lod_levels([1, 0])
    assert (r.shapes(), r.dtypes(), r.lod_levels()) == ([[2, 3], [4]],
                                                        [VT.INT32, VT.FP64], [1, 0])
    # the program runs as a Program built from it
    p = fluid.Program._construct_from_desc(prog)
    p.global_block()._remove_op(0)
    p.global_block()._remove_op(1)
    scope = fluid.Scope()
    got, = fluid.Executor().run(p, feed={"x1": np.ones((10, 20), "f4"),
                                         "x2": np.ones((10, 20), "f4")},
                                fetch_list=["out"], scope=scope)
    assert (got == 2).all()


def test_program_sync_with_cpp_after_desc_edits():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = L.data("x", [3])
        L.relu(L.scale(x, 2.0))
    main.desc.block(0)._remove_op(0, 1)        # the scale op, removed in the desc alone
    main.desc.append_block(main.desc.block(0))
    main._sync_with_cpp()
    assert [op.type for op in main.global_block().ops] == ["relu"]
    assert main.num_blocks == 2 and main.block(1).parent_idx == 0


def test_copy_param_info_from():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = L.data("x", [3])
        L.fc(x, 2, param_attr=fluid.ParamAttr(name="w", learning_rate=0.5, trainable=False))
    copy = fluid.Program.parse_from_string(main.desc.serialize_to_string())
    assert copy.global_block().var("w").trainable          # the desc does not carry it
    copy._copy_param_info_from(main)
    w = copy.global_block().var("w")
    assert w.trainable is False and w.optimize_attr["learning_rate"] == 0.5
    with pytest.raises(TypeError):
        copy._copy_param_info_from("program")
    with pytest.raises(TypeError):
        copy._copy_dist_param_info_from("program")


def test_core_graph_of_a_program():
    prog, block, op = _sum_program()
    graph = core.Graph(prog)
    assert {n.name() for n in graph.nodes()} == {"x1", "x2", "out", "sum"}
    ops = [n for n in graph.nodes() if n.node_type() == core.Node.Type.Operation]
    assert [n.name() for n in ops] == ["sum"] and {v.name() for v in ops[0].inputs} == \
        {"x1", "x2"}
    graph.set("k", 3)
    assert graph.has("k") and graph.get_int("k") == 3
    graph.erase("k")
    assert not graph.has("k")
    n = len(graph.nodes())
    assert graph.create_control_dep_var().name() == f"__control_var@{n}"
    assert graph.retrieve_node(0) in graph.nodes()
    assert len(graph.release_nodes()) == n + 1 and not graph.nodes()


def test_framework_and_operator_private_names():
    assert framework._in_dygraph_mode() is False
    assert framework.convert_np_dtype_to_dtype_(np.float64) == VT.FP64
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = L.data("x", [3])
        y = L.scale(x, 2.0)
    op = main.global_block().ops[-1]
    op._set_attr("scale", 3.0)
    assert op.attr("scale") == 3.0
    assert x.grad_name == "x@GRAD"
    assert main.global_block()._find_var_recursive("x") is x
    assert y.op is op
    # Fluid 1.8 writes these on every op it builds
    assert {"op_role", "op_role_var", "op_namescope", "op_callstack", "op_device"} <= \
        set(op.attr_names)
    with pytest.raises(ValueError, match="can not be None"):
        main.global_block().append_op()
    with pytest.raises(ValueError, match='"no_such_op" has not been registered'):
        main.global_block().append_op(type="no_such_op")
    with pytest.raises(ValueError):
        main.random_seed = "seed"
    with pytest.raises(ValueError):
        main._prune_with_input([2, 3], [y])
    with pytest.raises(ValueError, match="has been created before"):
        main.global_block().create_var(name="x", shape=[5, 5])


def test_framework_constants_and_backward_helpers_under_fluids_names():
    import fluidity.framework as framework
    from fluidity.backward import _append_grad_suffix_, _as_list
    assert (framework.GRAD_VAR_SUFFIX, framework.TEMP_VAR_NAME, framework.ZERO_VAR_SUFFIX,
            framework.EMPTY_VAR_NAME) == ("@GRAD", "@TEMP@", "@ZERO", "@EMPTY@")
    assert fluid.core.kGradVarSuffix() == "@GRAD" and fluid.core.kZeroVarSuffix() == "@ZERO"
    assert _append_grad_suffix_("x") == "x@GRAD"
    assert _as_list(None) == [] and _as_list(("a", "b")) == ["a", "b"] and _as_list(3) == [3]


def test_is_data_marks_the_declared_inputs_and_survives_clone_and_prune():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [3])
        img = fluid.data("img", [None, 3])
        y = L.fc(x + img, 2)
    data = sorted(v.name for v in main.global_block().vars.values() if v.is_data)
    assert data == ["img", "x"] and not y.is_data
    for p in (main.clone(), main.clone(for_test=True), main._prune([y])):
        assert sorted(v.name for v in p.global_block().vars.values() if v.is_data) == data
    other = fluid.Program.parse_from_string(main.desc.SerializeToString())
    assert not any(v.is_data for v in other.global_block().vars.values())
    other._copy_data_info_from(main)
    assert sorted(v.name for v in other.global_block().vars.values() if v.is_data) == data
    with pytest.raises(TypeError):
        other._copy_data_info_from("main")
    with pytest.raises(ValueError, match="not in this block"):    # Fluid's block.var
        main._copy_data_info_from(fluid.Program())


def test_core_raises_enforce_not_met_with_its_message():
    with pytest.raises(core.EnforceNotMet, match="test exception"):
        getattr(core, "__unittest_throw_exception__")()
