"""Fluid's `name` argument of the activation layers, fc and dice_loss: given positionally
(Fluid's order) or by keyword, it names the output variable."""
import numpy as np
import pytest

import fluidity as fluid

ACTS = {"elu": (1.0,), "relu6": (6.0,), "pow": (1.0,), "stanh": (0.67, 1.7159),
        "hard_sigmoid": (0.2, 0.5), "swish": (1.0,), "brelu": (0.0, 24.0),
        "leaky_relu": (0.02,), "soft_relu": (40.0,), "hard_swish": (6.0, 6.0, 3.0),
        "selu": (1.0507009873554805, 1.6732632423543772)}


@pytest.mark.parametrize("act", sorted(ACTS))
def test_activation_name_positional_and_keyword(act):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [2, 3], "float32")
        by_pos = getattr(fluid.layers, act)(x, *ACTS[act], f"{act}_pos")
        by_kw = getattr(fluid.layers, act)(x, name=f"{act}_kw")
    assert by_pos.name.startswith(f"{act}_pos")
    assert by_kw.name.startswith(f"{act}_kw")
    exe = fluid.Executor(fluid.CPUPlace())
    xv = np.random.RandomState(0).rand(2, 3).astype("float32")
    a, b = exe.run(main, feed={"x": xv}, fetch_list=[by_pos, by_kw])
    np.testing.assert_allclose(a, b, rtol=1e-6)


def test_activation_name_twice_is_a_type_error():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [2, 3], "float32")
        with pytest.raises(TypeError):
            fluid.layers.elu(x, 1.0, "a", name="b")
        with pytest.raises(TypeError):
            fluid.layers.elu(x, 1.0, "a", "extra")


def test_fc_name_is_seventh_and_dice_loss_name():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [4, 3], "float32")
        y = fluid.layers.fc(x, 2, 1, None, None, "softmax", "my_fc")
        label = fluid.data("label", [4, 1], "int64")
        loss = fluid.layers.dice_loss(y, label, 1e-5, "my_dice")
    assert y.name.startswith("my_fc")
    assert loss.name.startswith("my_dice")
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    out, = exe.run(main, feed={"x": np.ones((4, 3), "float32"),
                               "label": np.array([[0], [1], [0], [1]], "int64")},
                   fetch_list=[loss])
    assert np.isfinite(out).all()


def test_tree_conv_lives_in_contrib_layers_as_in_fluid():
    assert callable(fluid.contrib.layers.tree_conv)
    assert not hasattr(fluid.layers, "tree_conv")      # Fluid 1.8 has none there either
