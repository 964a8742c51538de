"""BilinearInitializer, force_init_on_cpu / init_on_cpu, and the declined ErrorClipByValue."""
import numpy as np
import pytest

import fluidity as fluid


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
