"""fluid.op: ops made from their OpProtos and run alone on a scope (what Fluid's OpTest and
its C++-style op tests use), the protos themselves, and core's questions about ops."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity import core
from fluidity.framework import OpProtoHolder
from fluidity.op import Operator, get_all_op_protos
from fluidity.ops import registry
from fluidity.proto import framework_pb2 as pb


def _scope(**arrays):
    scope = core.Scope()
    for name, a in arrays.items():
        scope.var(name).get_tensor().set(a, fluid.CPUPlace())
    return scope


def test_proto_says_what_the_schema_says():
    proto = OpProtoHolder.instance().get_op_proto("sum")
    assert isinstance(proto, pb.OpProto) and proto.type == "sum"
    (x,) = proto.inputs
    assert x.name == "X" and x.duplicable and not x.dispensable
    opdef = registry.get("lookup_table")
    proto = OpProtoHolder.instance().get_op_proto("lookup_table")
    for slot, vp in zip(opdef.inputs, proto.inputs):
        assert (vp.name, vp.duplicable, vp.dispensable, vp.intermediate) == \
            (slot.name, slot.duplicable, slot.dispensable, slot.intermediate)
    types = {a.name: a.type for a in proto.attrs}
    assert types["padding_idx"] == pb.LONG or types["padding_idx"] == pb.INT
    assert types["is_sparse"] == pb.BOOLEAN and "op_role" in types
    # intermediate outputs are marked (OpTest leaves them out of its expectations)
    assert any(v.intermediate for v in OpProtoHolder.instance().get_op_proto(
        "reshape2").outputs)


def test_unknown_op_type_is_a_value_error():
    with pytest.raises(ValueError, match="has not been registered"):
        OpProtoHolder.instance().get_op_proto("no_such_op")
    with pytest.raises(ValueError, match="not registered"):
        Operator("no_such_op", X="x")


def test_every_registered_op_has_a_proto():
    protos = get_all_op_protos()
    assert {p.type for p in protos} == set(registry.all_ops())
    assert core.get_all_op_protos()[0] == protos[0].SerializeToString()


def test_operator_runs_on_the_scope_variables():
    x = np.random.RandomState(0).uniform(-1, 1, (3, 4)).astype("float32")
    scope = _scope(x=x)
    op = Operator("scale", X="x", Out="y", scale=np.float32(3.0), bias=1.0)
    assert op.type() == "scale" and op.inputs() == {"X": ["x"]}
    assert op.output("Out") == "y" and op.attr("scale") == 3.0
    op.run(scope, fluid.CPUPlace())
    np.testing.assert_allclose(np.array(scope.find_var("y").get_tensor()), 3 * x + 1,
                               rtol=1e-6)
    # runs again on changed inputs (OpTest's numeric gradient perturbs one element a run)
    scope.find_var("x").get_tensor()._set_float_element(0, 10.0)
    op.run(scope, fluid.CPUPlace())
    assert scope.find_var("y").get_tensor()._get_float_element(0) == pytest.approx(31.0)


def test_operator_duplicable_inputs_and_kid_scopes():
    a, b = np.ones((2, 2), "float64"), np.full((2, 2), 2.0)
    parent = _scope(a=a, b=b)
    kid = parent.new_scope()
    Operator("sum", X=["a", "b"], Out="s").run(kid, fluid.CPUPlace())
    np.testing.assert_array_equal(np.array(parent.find_var("s").get_tensor()), a + b)
    with pytest.raises(ValueError, match="expects only one"):
        Operator("scale", X=["a", "b"], Out="y")
    with pytest.raises(ValueError, match="keyword"):
        Operator("scale", "X")


def test_operator_picks_the_sparse_kernel_for_selected_rows():
    scope = core.Scope()
    param = np.arange(12, dtype="float32").reshape(6, 2)
    scope.var("Param").get_tensor().set(param, fluid.CPUPlace())
    g = scope.var("Grad").get_selected_rows()
    g.set_height(6)
    g.set_rows([1, 4])
    g.value = np.ones((2, 2), "float32")
    scope.var("LearningRate").get_tensor().set(np.array([0.5], "float32"), fluid.CPUPlace())
    Operator("sgd", Param="Param", Grad="Grad", LearningRate="LearningRate",
             ParamOut="Param").run(scope, fluid.CPUPlace())
    want = param.copy()
    want[[1, 4]] -= 0.5
    np.testing.assert_allclose(np.array(scope.find_var("Param").get_tensor()), want)


def test_grad_op_desc_is_what_backward_appends():
    main = fluid.Program()
    with fluid.program_guard(main):
        x = fluid.layers.data("x", [3], append_batch_size=False)
        y = fluid.layers.tanh(x)
    op = main.global_block().ops[-1]
    descs, grad_to_var = core.get_grad_op_desc(op.desc, set(), [])
    assert [d.type() for d in descs] == ["tanh_grad"]
    assert descs[0].input("Out") == [y.name]
    assert descs[0].output("X@GRAD") == [x.name + "@GRAD"]
    assert grad_to_var == {y.name + "@GRAD": y.name, x.name + "@GRAD": x.name}
    assert core.get_grad_op_desc(op.desc, {x.name + "@GRAD"}, [])[0] == []
    assert core.has_grad_op_maker("tanh") and not core.has_grad_op_maker("fill_constant")
    kernels = core._get_all_register_op_kernels()
    assert "tanh_grad" in kernels and kernels["tanh"][0].endswith("library_type[PLAIN]")
    # Fluidity's own fc_grad (for fused training) is not one Paddle 1.8 registers: Fluid's
    # tools read its absence as "fc has no gradient", as in Fluid
    assert "fc" in kernels and "fc_grad" not in kernels


def test_builders_op_desc_has_paddles_methods_on_the_same_message():
    main = fluid.Program()
    with fluid.program_guard(main):
        x = fluid.layers.data("x", [3])
        fluid.layers.scale(x, 2.0)
    block = main.global_block()
    op = block.ops[-1]
    d = op.desc
    assert d.type() == "scale" and d.type == "scale" and op.type == "scale"
    assert d.proto is block.desc.ops[len(block.desc.ops) - 1]
    d.set_attr("scale", 5)
    assert op.attr("scale") == 5.0 and d.attr_type("scale") == pb.FLOAT
    d.infer_var_type(block.desc)
    d.infer_shape(block.desc)
    assert {d: 1}[op.desc] == 1 and d == op.desc
    new = block.desc.append_op()
    new.copy_from(d)
    main._sync_with_cpp()
    assert [o.type for o in block.ops] == ["scale", "scale"] and block.ops[0] is op
    exe = fluid.Executor(fluid.CPUPlace())
    (out,) = exe.run(main, feed={"x": np.ones((2, 3), "float32")},
                     fetch_list=[block.ops[-1].output("Out")[0]])
    np.testing.assert_allclose(out, np.full((2, 3), 5.0))


def test_core_flags_and_names_optest_reads():
    flags = core.globals()
    old = flags["FLAGS_use_system_allocator"]
    flags["FLAGS_use_system_allocator"] = True
    try:
        assert fluid.get_flags("FLAGS_use_system_allocator") == \
            {"FLAGS_use_system_allocator": True}
    finally:
        flags["FLAGS_use_system_allocator"] = old
    with pytest.raises(KeyError):
        flags["FLAGS_no_such_flag"]
    maker = core.op_proto_and_checker_maker
    assert maker.kOpRoleAttrName() == "op_role" and int(maker.OpRole.Forward) == 0
    # Paddle answers from its kernel registry: a CPU-only build (here, no GPU) has no CUDA
    # kernel; with a GPU, an op the CUDA target compiles has one
    assert core.op_support_gpu("relu") == core.is_compiled_with_cuda()
    assert core.op_support_gpu("sum") == core.is_compiled_with_cuda()
    assert not core.op_support_gpu("no_such_op")
    assert not core.is_float16_supported(fluid.CPUPlace())


def test_tensor_methods_optest_uses():
    t = core.LoDTensor()
    t._set_dims([2, 3])
    assert t.shape() == [2, 3]
    t.set(np.arange(6, dtype="float64").reshape(2, 3), fluid.CPUPlace())
    t.set_recursive_sequence_lengths([[1, 1]])
    c = t._copy(core.Place())
    assert c.recursive_sequence_lengths() == [[1, 1]] and c._dtype() == core.VarDesc.VarType.FP64
    c._set_double_element(0, 7.0)
    assert t._get_double_element(0) == 0.0 and c._get_double_element(0) == 7.0
    v = core.Scope().var("f")
    v.set_float(2.5)
    assert v.get_float() == 2.5


def test_numpy_attribute_values_are_stored_as_python_values():
    main = fluid.Program()
    with fluid.program_guard(main):
        x = fluid.layers.data("x", [3])
        out = main.global_block().create_var(dtype="float32")
        op = main.global_block().append_op(
            type="scale", inputs={"X": x}, outputs={"Out": out},
            attrs={"scale": np.float32(2.0), "bias": np.array(1.0)})
    assert op.attr("scale") == 2.0 and op.attr("bias") == 1.0
    assert not core.has_infer_inplace("relu")   # no op asks to run in place here


def test_grad_op_desc_inferred_against_a_block_it_is_not_in():
    """Paddle's tests append a grad op desc by hand: block.desc.var(name) declares its
    outputs, infer_shape(block.desc) shapes them like the forward variables."""
    main = fluid.Program()
    with fluid.program_guard(main):
        x = fluid.layers.data("x", [4, 3], append_batch_size=False, dtype="float64")
        y = fluid.layers.tanh(x)
    block = main.global_block()
    block.create_var(name=y.name + "@GRAD", shape=[4, 3], dtype="float64")
    (g,), _ = core.get_grad_op_desc(block.ops[-1].desc, set(), [])
    new = block.desc.append_op()
    new.copy_from(g)
    for n in g.output_arg_names():
        block.desc.var(n.encode("ascii"))
    g.infer_var_type(block.desc)
    g.infer_shape(block.desc)
    assert block.desc.find_var(b"x@GRAD").shape() == [4, 3]
    block.desc.find_var(b"x@GRAD").set_dtype(core.VarDesc.VarType.FP64)
    main._sync_with_cpp()
    xv, dy = np.random.RandomState(1).rand(4, 3), np.ones((4, 3))
    (dx,) = fluid.Executor(fluid.CPUPlace()).run(
        main, feed={"x": xv, y.name + "@GRAD": dy}, fetch_list=["x@GRAD"])
    np.testing.assert_allclose(dx, 1 - np.tanh(xv) ** 2)


def test_the_typed_op_factories_fluid_keeps():
    from fluidity.op import CondOp, DynamicRecurrentOp, RecurrentOp
    assert RecurrentOp.type == "recurrent"
    for factory in (DynamicRecurrentOp, CondOp):       # their ops are gone in Fluid 1.8 too
        with pytest.raises(ValueError, match="not registered"):
            factory()


def test_infer_no_need_buffer_slots_answers_what_ops_declare():
    ins = {"X": ["a"], "Y": ["b"], "Out@GRAD": ["g"]}
    assert core.infer_no_need_buffer_slots("elementwise_add_grad", ins, {}, {}) == {"X", "Y"}
    assert core.infer_no_need_buffer_slots("elementwise_mul_grad", ins, {}, {}) == set()
    assert core.infer_no_need_buffer_slots("elementwise_add", {"X": ["a"], "Y": ["b"]},
                                           {}, {}) == set()
