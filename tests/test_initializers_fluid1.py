"""BilinearInitializer, force_init_on_cpu / init_on_cpu, and the declined ErrorClipByValue."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.core.dtypes import VarType


def test_bilinear_initializer_fills_upsampling_kernels():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        w = fluid.layers.create_parameter(
            [2, 2, 4, 4], "float32", attr=fluid.ParamAttr(
                initializer=fluid.initializer.Bilinear()))
    scope = fluid.Scope()
    fluid.Executor().run(startup, scope=scope)
    got = np.asarray(scope.find_var(w.name).value._array)
    ramp = np.array([0.25, 0.75, 0.75, 0.25])            # f = 2, c = 0.75
    np.testing.assert_allclose(got[1, 0], np.outer(ramp, ramp))
    assert (got == got[0, 0]).all()
    with pytest.raises(fluid.FluidityError, match="square kernels"):
        with fluid.program_guard(fluid.Program(), fluid.Program()):
            fluid.layers.create_parameter([2, 3], "float32", attr=fluid.ParamAttr(
                initializer=fluid.initializer.BilinearInitializer()))


def test_init_on_cpu_guard():
    assert fluid.initializer.force_init_on_cpu() is False
    with fluid.initializer.init_on_cpu():
        assert fluid.initializer.force_init_on_cpu() is True
    assert fluid.initializer.force_init_on_cpu() is False


def test_error_clip_is_declined():
    with pytest.raises(NotImplementedError, match="ErrorClipByValue"):
        fluid.clip.ErrorClipByValue(1.0)


@pytest.mark.parametrize("init,fill_op", [
    (fluid.initializer.ConstantInitializer(0.5), "fill_constant"),
    (fluid.initializer.UniformInitializer(-0.1, 0.1, seed=3), "uniform_random"),
    (fluid.initializer.NormalInitializer(0.0, 0.1, seed=3), "gaussian_random"),
    (fluid.initializer.Xavier(seed=3), "uniform_random"),
    (fluid.initializer.NumpyArrayInitializer(np.full((4, 3), 0.25)), "assign_value")])
def test_a_float16_parameter_is_filled_in_float32_and_cast(init, fill_op):
    """Fluid 1.8: the init op (at the front) fills a float32 temporary; a cast appended after
    it writes the float16 parameter."""
    startup = fluid.Program()
    block = startup.global_block()
    p = block.create_parameter(name="w16", shape=[4, 3], dtype="float16", initializer=init)
    ops = block.ops
    assert [op.type for op in ops] == [fill_op, "cast"]
    tmp = ops[0].output("Out")[0]
    assert block.var(tmp).dtype == VarType.FP32 and not block.var(tmp).persistable
    assert ops[1].input("X") == [tmp] and ops[1].output("Out") == [p.name]
    assert (ops[1].attr("in_dtype"), ops[1].attr("out_dtype")) == (VarType.FP32, VarType.FP16)
    scope = fluid.Scope()
    fluid.Executor().run(startup, scope=scope)
    w = np.array(scope.find_var("w16").get_tensor())
    assert w.dtype == np.float16 and w.shape == (4, 3)
    if fill_op in ("fill_constant", "assign_value"):
        np.testing.assert_array_equal(w, np.full((4, 3), 0.5 if fill_op == "fill_constant"
                                                 else 0.25, np.float16))
