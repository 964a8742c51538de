"""Fluid 1.8's checks and error types, not stricter or other ones: what Fluid accepts runs
(a `layers.data` feed of another shape, `prelu(mode='channel')` on 5-D, float hard labels
at build time), what Fluid refuses is refused with the builtin type Fluid raises
(`TypeError` for a string where a Program belongs, `RuntimeError` for
`train_from_dataset(None)`, `EnforceNotMet` for op checks), and what Fluid accepts but
computes wrongly (hsigmoid on 3-D input) is refused saying why. Variables compare as Fluid
1.8's math_op_patch builds them: `==` and `!=` are ops."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.framework import OpProtoHolder

L = fluid.layers


def _run(main, feed, fetch):
    exe = fluid.Executor()
    scope = fluid.Scope()
    return exe.run(main, feed=feed, fetch_list=fetch, scope=scope)


def test_variable_comparisons_are_ops_as_in_fluid_1_8():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        a = L.data("a", [3])
        b = L.data("b", [3])
        eq, ne, lt, ge, eq2 = a == b, a != b, a < b, a >= 1.0, a == 2
        n = L.cast(a, "int64") / 2                       # integer division is not a scale
    types = [op.type for op in main.global_block().ops]
    assert ["equal", "not_equal", "less_than", "greater_equal"] == \
        [t for t in types if t in ("equal", "not_equal", "less_than", "greater_equal")][:4]
    assert types[-1] == "elementwise_div"
    assert all(v.dtype == fluid.core.VarDesc.VarType.BOOL for v in (eq, ne, lt, ge, eq2))
    av = np.array([[1, 2, 3], [4, 2, 0]], "f4")
    bv = np.array([[1, 0, 3], [0, 2, 1]], "f4")
    got = _run(main, {"a": av, "b": bv}, [eq, ne, lt, ge, eq2, n])
    for g, w in zip(got, [av == bv, av != bv, av < bv, av >= 1, av == 2,
                          av.astype("int64") // 2]):
        np.testing.assert_array_equal(g, w)
    # hashing and identity are untouched: Variables stay usable as keys
    assert {a: 1}[a] == 1 and (a == None) is False    # noqa: E711


def test_a_number_operand_takes_the_variables_dtype_and_batch_axis():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        a = L.data("a", [2, 3])                        # [-1, 2, 3]
        col = L.data("col", [1], dtype="float64")      # [-1, 1], another dtype
        out = a * 2.0 - col                            # col cast to float32, axis 0
    ops = main.global_block().ops
    assert "cast" in [op.type for op in ops] and ops[-1].attr("axis") == 0
    av = np.ones((4, 2, 3), "f4")
    cv = np.arange(4, dtype="f8").reshape(4, 1)
    got, = _run(main, {"a": av, "col": cv}, [out])
    np.testing.assert_allclose(got, 2 * av - cv.reshape(4, 1, 1).astype("f4"))


def test_what_fluid_accepts_builds_and_runs():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        v = L.data("v", [2, 3, 4, 5])
        p = L.prelu(v, mode="channel")                 # 5-D, channels at dim 1
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    vv = np.random.default_rng(0).normal(size=(2, 2, 3, 4, 5)).astype("f4")
    got, = exe.run(main, feed={"v": vv}, fetch_list=[p], scope=scope)
    np.testing.assert_allclose(got, np.where(vv > 0, vv, 0.25 * vv), rtol=1e-6)
    other = fluid.Program()
    with fluid.program_guard(other, fluid.Program()):
        prob = L.softmax(L.data("x", [4]))
        flabel = L.data("flabel", [1])                 # float hard labels build (Fluid)
        loss = L.cross_entropy(prob, flabel)
    with pytest.raises(fluid.core.EnforceNotMet, match="integer class ids"):
        _run(other, {"x": np.ones((2, 4), "f4"), "flabel": np.ones((2, 1), "f4")}, [loss])


def test_what_fluid_computes_wrongly_is_refused_saying_why():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x3 = L.data("x3", [1, 8])
        lab = L.data("lab", [1], dtype="int64")
        with pytest.raises(ValueError, match="mixing samples"):
            L.hsigmoid(x3, lab, num_classes=4)


def test_op_checks_raise_enforce_not_met_where_fluid_does():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        flat = L.data("flat", [1], dtype="int64", append_batch_size=False)
        with pytest.raises(fluid.core.EnforceNotMet):          # one_hot needs [..., 1]
            L.one_hot(flat, depth=4)
        ids = L.data("ids", [1], dtype="int64")
        out = L.one_hot(ids, depth=4)
    with pytest.raises(fluid.core.EnforceNotMet, match="one_hot"):
        _run(main, {"ids": np.arange(3, dtype="int64")}, [out])   # fed [3]: not [..., 1]


def test_wrong_arguments_raise_fluids_builtin_types():
    exe = fluid.Executor()
    with pytest.raises(TypeError, match="Executor requires Program"):
        exe.run("main_program")
    with pytest.raises(RuntimeError, match="dataset is need and should be initialized"):
        exe.train_from_dataset(fluid.default_main_program(), None)
    with pytest.raises(ValueError, match='"nope" has not been registered'):
        OpProtoHolder.instance().get_op_proto("nope")


def test_op_proto_holder_describes_an_op_as_fluids():
    proto = OpProtoHolder.instance().get_op_proto("sum")
    assert proto.type == "sum"
    (x,) = proto.inputs
    assert x.name == "X" and x.duplicable
    attrs = {a.name: a for a in OpProtoHolder.instance().get_op_proto("mul").attrs}
    assert attrs["x_num_col_dims"].type == fluid.core.AttrType.INT
    assert attrs["op_role"].generated and not attrs["x_num_col_dims"].generated


def test_flags_and_dtype_arguments_raise_fluids_types():
    with pytest.raises(TypeError):
        fluid.set_flags(["FLAGS_check_nan_inf"])
    with pytest.raises(TypeError):
        fluid.get_flags(1)
    with pytest.raises(ValueError):
        fluid.get_flags("FLAGS_use_mkldnn")
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        with pytest.raises(ValueError):               # a dtype Fluid does not know at all
            L.create_global_var([1, 2], 2.0, np.complex128)
        with pytest.raises(TypeError):                # one it knows, not allowed here
            L.fill_constant([1], "uint8", 5)
        with pytest.raises(TypeError):
            L.create_parameter([1.0, 2.0], "float32")


def test_paddles_tuning_flags_are_kept_as_set_and_unknown_ones_refused():
    before = fluid.get_flags(["FLAGS_eager_delete_tensor_gb", "FLAGS_enable_parallel_graph"])
    assert before == {"FLAGS_eager_delete_tensor_gb": 0.0, "FLAGS_enable_parallel_graph": False}
    try:
        fluid.set_flags({"FLAGS_eager_delete_tensor_gb": 1.0})
        fluid.core.globals()["FLAGS_enable_parallel_graph"] = True
        assert fluid.get_flags("FLAGS_eager_delete_tensor_gb") == {
            "FLAGS_eager_delete_tensor_gb": 1.0}
        assert fluid.core.globals()["FLAGS_enable_parallel_graph"] is True
    finally:
        fluid.set_flags(before)
    with pytest.raises(ValueError, match="FLAGS_no_such_flag"):
        fluid.set_flags({"FLAGS_no_such_flag": 1})
