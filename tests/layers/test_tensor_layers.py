"""layers.create_parameter and layers.create_global_var as Fluid programs use them."""
import numpy as np
import pytest

import fluidity as fluid

L = fluid.layers


def test_create_parameter_is_trainable_and_initialized_by_the_startup_program():
    main, startup = fluid.Program(), fluid.Program()
    attr = fluid.ParamAttr(initializer=fluid.initializer.Constant(0.5))
    with fluid.program_guard(main, startup):
        w = L.create_parameter([2, 3], "float32", name="w", attr=attr)
        b = L.create_parameter([3], "float32", is_bias=True)
        x = L.data("x", [2], dtype="float32")
        loss = L.mean(L.elementwise_add(L.matmul(x, w), b))
        fluid.optimizer.SGD(1.0).minimize(loss)
    assert attr.name is None                    # the caller's attr is not changed
    assert w.name == "w" and w.trainable and list(w.shape) == [2, 3]
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    np.testing.assert_array_equal(np.array(scope.find_var("w").get_tensor()),
                                  np.full((2, 3), 0.5, "float32"))
    np.testing.assert_array_equal(np.array(scope.find_var(b.name).get_tensor()), np.zeros(3))
    exe.run(main, feed={"x": np.ones((4, 2), "float32")}, scope=scope)
    # d mean / d w = column sums of x / (4 * 3) per element: 4 / 12
    np.testing.assert_allclose(np.array(scope.find_var("w").get_tensor()), 0.5 - 1 / 3,
                               rtol=1e-6)


def test_create_global_var_holds_its_value_and_persists():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        step = L.create_global_var([1], 2.0, "float32", persistable=True, name="step")
        L.increment(step, 1.0, in_place=True)
    assert step.persistable and step.name == "step"
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    for want in (3.0, 4.0):
        got = exe.run(main, fetch_list=[step], scope=scope)[0]
        assert got.tolist() == [want]


def test_create_global_var_takes_a_one_element_array_and_carries_info():
    # Fluid 1.8 programs pass np.random.randn(1) (float() of it worked under numpy 1.x)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        v = L.create_global_var([1], np.array([[1.5]]), "float32", persistable=True)
        with pytest.raises(TypeError):
            L.create_global_var([2], np.array([1.0, 2.0]), "float32")
    v._set_info("role", "counter")
    assert v._get_info("role") == "counter" and v._get_info("missing") is None
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    assert np.array(scope.find_var(v.name).get_tensor()).tolist() == [1.5]


def test_create_parameter_rejects_a_bad_shape():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        with pytest.raises(TypeError, match="'shape' in fluid.layers.create_parameter"):
            L.create_parameter("3x4", "float32")


def test_fill_constant_takes_variables_as_fluid_18():
    """Fluid 1.8's fill_constant: a shape mixing ints and [1] int Variables (PaddleRec's
    SSR: `[layers.shape(pos)[0], 1]`), a whole shape Variable, a [1] Variable value; an
    int64 value beyond float64's integers kept exactly (str_value)."""
    import numpy as np
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [None, 3], "float32")
        a = fluid.layers.fill_constant([fluid.layers.shape(x)[0], 1], "float32", 0.8)
        v = fluid.layers.fill_constant([1], "float32", 2.5)
        b = fluid.layers.fill_constant([2, 2], "int64", v)
        c = fluid.layers.fill_constant(fluid.layers.fill_constant([2], "int32", 3), "float32", 1)
        d = fluid.layers.fill_constant([2], "int64", 2 ** 60 + 1)
    assert a.shape == (-1, 1) and c.dtype == fluid.core.VarDesc.VarType.FP32
    got = fluid.Executor().run(main, feed={"x": np.zeros((4, 3), "float32")},
                               fetch_list=[a, b, c, d], scope=fluid.Scope())
    np.testing.assert_array_equal(got[0], np.full((4, 1), 0.8, "float32"))
    np.testing.assert_array_equal(got[1], np.full((2, 2), 2, "int64"))
    np.testing.assert_array_equal(got[2], np.ones((3, 3), "float32"))
    assert got[3].tolist() == [2 ** 60 + 1] * 2
    maker = {op.output("Out")[0]: op for op in main.global_block().ops
             if op.type == "fill_constant"}
    assert maker[b.name].input("ValueTensor") == [v.name]
    assert maker[a.name].input("ShapeTensorList") and maker[c.name].input("ShapeTensor")
    assert maker[d.name].attr("str_value") == str(2 ** 60 + 1)
