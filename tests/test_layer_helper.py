"""LayerHelper as layer functions written outside Fluidity use it (Fluid's param_attr /
bias_attr properties)."""
import numpy as np

import fluidity as fluid
from fluidity.layer_helper import LayerHelper


def test_param_attr_and_bias_attr_read_the_layers_keywords():
    def my_scale(x, param_attr=None, bias_attr=None):
        helper = LayerHelper("my_scale", **locals())
        alpha = helper.create_parameter(attr=helper.param_attr, shape=[1], dtype="float32",
                                        default_initializer=fluid.initializer.Constant(3.0))
        assert helper.bias_attr is False
        out = helper.create_variable_for_type_inference("float32")
        helper.append_op("elementwise_mul", inputs={"X": x, "Y": alpha},
                         outputs={"Out": out})
        return out

    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 2], "float32")
        y = my_scale(x, param_attr="alpha", bias_attr=False)
    assert [p.name for p in main.global_block().all_parameters()] == ["alpha"]
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    (got,) = exe.run(main, feed={"x": np.ones((1, 2), np.float32)}, fetch_list=[y])
    np.testing.assert_array_equal(got, [[3.0, 3.0]])
    assert LayerHelper("t").param_attr.name is None       # no keyword: a default ParamAttr


def test_layer_helper_base_is_where_parameters_are_created():
    # Fluid 1.8 code patches fluid.layer_helper_base.LayerHelperBase.create_parameter (the
    # mixed-precision helper of PaddleDetection): layers must reach it through that class
    import fluidity.layer_helper_base as lhb
    from fluidity.layer_helper import LayerHelper
    assert issubclass(LayerHelper, lhb.LayerHelperBase)
    seen = []
    orig = lhb.LayerHelperBase.create_parameter

    def spy(self, *args, **kwargs):
        seen.append(self.layer_type)
        return orig(self, *args, **kwargs)

    lhb.LayerHelperBase.create_parameter = spy
    try:
        with fluid.program_guard(fluid.Program(), fluid.Program()):
            x = fluid.layers.data("x", [3])
            fluid.layers.fc(x, 2)
    finally:
        lhb.LayerHelperBase.create_parameter = orig
    assert seen == ["fc", "fc"]          # the weight and the bias
    h = lhb.LayerHelperBase("h", layer_type="h")
    assert (h.name, h.layer_type) == ("h", "h")
