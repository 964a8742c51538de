"""dropout (fluidity/ops/nn.py): statistics, scaling, seeds and gradient; and the layer
functions of conv.py's, norm.py's and shape_ops.py's ops (pool2d, layer_norm, flatten)."""
import numpy as np
import pytest

import fluidity as fluid
from op_test import check_grad, run_op

rng = np.random.default_rng(0)


def r(*shape):
    return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)


# --- dropout --------------------------------------------------------------------------------
@pytest.mark.parametrize("impl", ["downgrade_in_infer", "upscale_in_train"])
def test_dropout_statistics_and_scaling(impl):
    x = rng.uniform(1.0, 2.0, size=(200, 100)).astype(np.float32)
    got = run_op("dropout", {"X": x}, {"dropout_prob": 0.3, "dropout_implementation": impl})
    mask, out = got["Mask"], got["Out"]
    assert mask.dtype == np.uint8 and set(np.unique(mask)) <= {0, 1}
    assert abs(mask.mean() - 0.7) < 0.02
    k = 1 / 0.7 if impl == "upscale_in_train" else 1.0
    np.testing.assert_allclose(out, x * mask * k, rtol=1e-6)
    test_out = run_op("dropout", {"X": x}, {"dropout_prob": 0.3, "is_test": True,
                                           "dropout_implementation": impl},
                      outputs=["Out"])["Out"]
    np.testing.assert_allclose(test_out, x if impl == "upscale_in_train" else x * 0.7,
                               rtol=1e-6)


def test_dropout_extremes():
    x = r(4, 5)
    out = run_op("dropout", {"X": x}, {"dropout_prob": 0.0})
    np.testing.assert_array_equal(out["Out"], x)
    out = run_op("dropout", {"X": x}, {"dropout_prob": 1.0,
                                       "dropout_implementation": "upscale_in_train"})
    np.testing.assert_array_equal(out["Out"], np.zeros_like(x))


def _dropout_program(seed):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", [50])
        y = fluid.layers.dropout(x, 0.5, seed=seed)
    return main, y


def test_dropout_fix_seed_is_deterministic():
    x = r(8, 50)
    exe, scope = fluid.Executor(), fluid.Scope()
    p1, y1 = _dropout_program(seed=7)
    p2, y2 = _dropout_program(seed=7)
    a = exe.run(p1, feed={"x": x}, fetch_list=[y1], scope=scope)[0]
    b = exe.run(p1, feed={"x": x}, fetch_list=[y1], scope=scope)[0]
    c = exe.run(p2, feed={"x": x}, fetch_list=[y2], scope=scope)[0]
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)
    p3, y3 = _dropout_program(seed=None)   # unseeded: masks differ from run to run
    d = exe.run(p3, feed={"x": x}, fetch_list=[y3], scope=scope)[0]
    e = exe.run(p3, feed={"x": x}, fetch_list=[y3], scope=scope)[0]
    assert not np.array_equal(d, e)


@pytest.mark.parametrize("impl", ["downgrade_in_infer", "upscale_in_train"])
def test_dropout_grad_uses_mask(impl):
    attrs = {"dropout_prob": 0.4, "fix_seed": True, "seed": 3, "dropout_implementation": impl}
    check_grad("dropout", {"X": r(4, 6)}, ["X"], attrs)


# --- layers ---------------------------------------------------------------------------------
def _layer_program(fn, shape):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape)
        y = fn(x)
    return main, startup, y


def test_pool2d_and_layer_norm_layers():
    _, _, y = _layer_program(lambda x: fluid.layers.pool2d(x, global_pooling=True,
                                                           pool_type="avg"), [3, 5, 5])
    assert list(y.shape) == [-1, 3, 1, 1]
    with pytest.raises(ValueError):
        _layer_program(lambda x: fluid.layers.pool2d(x), [3, 5, 5])
    main, startup, y = _layer_program(
        lambda x: fluid.layers.layer_norm(x, begin_norm_axis=2), [3, 4])
    scale, bias = main.all_parameters()
    assert list(scale.shape) == [4] and list(bias.shape) == [4]
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    x = r(2, 3, 4)
    got, = exe.run(main, feed={"x": x}, fetch_list=[y], scope=scope)
    m, v = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    np.testing.assert_allclose(got, (x - m) / np.sqrt(v + 1e-5), atol=1e-5)


def test_flatten_layer():
    from fluidity.ops import registry
    if not registry.has("flatten2"):
        pytest.skip("flatten2 op not available yet")
    main, _, y = _layer_program(lambda x: fluid.layers.flatten(x, axis=2), [3, 4, 5])
    assert list(y.shape) == [-1, 20]
    x = r(2, 3, 4, 5)
    got, = fluid.Executor().run(main, feed={"x": x}, fetch_list=[y], scope=fluid.Scope())
    np.testing.assert_array_equal(got, x.reshape(6, 20))


def test_seeded_dropout_mask_is_philox_under_key_seed():
    """fix_seed 5: the mask from key (5, 0), run 0, every run (an independent scalar
    Philox computes it)."""
    from philox_reference import keep_mask
    x = np.ones((3, 7), np.float32)
    got = run_op("dropout", {"X": x}, {"dropout_prob": 0.3, "fix_seed": True, "seed": 5})
    np.testing.assert_array_equal(got["Mask"].reshape(-1), keep_mask(21, 0.3, 5))
