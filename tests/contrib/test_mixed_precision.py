"""fluid.contrib.mixed_precision: the program rewrite (casts around float16 ops), training
with loss scaling, and the dynamic scaling's response to overflowing gradients."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.contrib.mixed_precision import AutoMixedPrecisionLists, decorate
from fluidity.core.dtypes import VarType


def _net(opt_factory, seed=1):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[4], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        h = fluid.layers.fc(x, 8, act="relu", param_attr=fluid.ParamAttr(name="w0"))
        pred = fluid.layers.fc(h, 1, param_attr=fluid.ParamAttr(name="w1"))
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        opt = opt_factory()
        opt.minimize(loss)
    return main, startup, loss, opt


def _data():
    rng = np.random.RandomState(0)
    x = rng.uniform(-1, 1, (16, 4)).astype("float32")
    return x, x.sum(1, keepdims=True).astype("float32")


def test_lists():
    lists = AutoMixedPrecisionLists(custom_white_list={"tanh"}, custom_black_list={"mul"})
    assert "tanh" in lists.white_list and "tanh" not in lists.gray_list
    assert "mul" in lists.black_list and "mul" not in lists.white_list
    with pytest.raises(ValueError, match="overlap"):
        AutoMixedPrecisionLists(custom_white_list={"mul"}, custom_black_list={"mul"})


def test_rewrite_puts_products_in_float16_and_losses_in_float32():
    main, _s, _loss, opt = _net(lambda: decorate(fluid.optimizer.SGD(0.1)))
    block = main.global_block()
    muls = [op for op in block.ops if op.type == "mul"]
    for op in muls:
        assert all(block.var(n).dtype == VarType.FP16 for n in op.input_arg_names)
        assert block.var(op.output("Out")[0]).dtype == VarType.FP16
    square = [op for op in block.ops if op.type == "square"][0]
    assert block.var(square.input("X")[0]).dtype == VarType.FP32
    assert block.var("w0").dtype == VarType.FP32            # float32 master weights
    assert "w0.cast_fp16" in block.vars


def test_trains_like_float32_training():
    x, y = _data()
    runs = {}
    for name, factory in (("fp32", lambda: fluid.optimizer.SGD(0.1)),
                          ("amp", lambda: decorate(fluid.optimizer.SGD(0.1),
                                                   init_loss_scaling=8.0,
                                                   incr_every_n_steps=2))):
        main, startup, loss, opt = _net(factory)
        scope = fluid.Scope()
        exe = fluid.Executor()
        exe.run(startup, scope=scope)
        losses, scales = [], []
        for _ in range(6):
            fetch = [loss] + ([opt.get_loss_scaling()] if name == "amp" else [])
            out = exe.run(main, feed={"x": x, "y": y}, fetch_list=fetch, scope=scope)
            losses.append(float(out[0]))
            if name == "amp":
                scales.append(float(out[1]))
        runs[name] = (losses, scales)
    fp32, (amp, scales) = runs["fp32"][0], runs["amp"]
    assert amp[-1] < amp[0]
    # float16 has an 11-bit significand: the losses agree to a few parts in a thousand
    np.testing.assert_allclose(amp, fp32, rtol=1e-2)
    assert scales == [8.0, 8.0, 16.0, 16.0, 16.0, 32.0]   # x2 on the step after 2 finite


@pytest.mark.filterwarnings("ignore::RuntimeWarning")   # the overflow itself, in float16
def test_overflow_skips_the_step_and_shrinks_the_scaling():
    main, startup, loss, opt = _net(lambda: decorate(
        fluid.optimizer.SGD(0.1), init_loss_scaling=1024.0, decr_every_n_nan_or_inf=2,
        decr_ratio=0.5))
    scope = fluid.Scope()
    exe = fluid.Executor()
    exe.run(startup, scope=scope)
    before = np.array(scope.find_var("w0").get_tensor())
    x, y = _data()
    big = x * 3e4                     # overflows float16 (max 65504) in the products
    scales = [float(exe.run(main, feed={"x": big, "y": y}, scope=scope,
                            fetch_list=[opt.get_loss_scaling()])[0]) for _ in range(4)]
    np.testing.assert_array_equal(np.array(scope.find_var("w0").get_tensor()), before)
    # Fluid's rule: the scaling shrinks on the bad step after decr_every_n_nan_or_inf of them
    assert scales == [1024.0, 1024.0, 512.0, 512.0]


def test_bad_arguments():
    with pytest.raises(TypeError, match="Optimizer"):
        decorate("sgd")
    with pytest.raises(TypeError, match="AutoMixedPrecisionLists"):
        decorate(fluid.optimizer.SGD(0.1), amp_lists={"mul"})
    with pytest.raises(ValueError, match="init_loss_scaling"):
        decorate(fluid.optimizer.SGD(0.1), init_loss_scaling=0)
