"""batch_norm, layer_norm, inplace_abn (fluidity/ops/norm.py): forward against numpy
references, gradients against finite differences, Paddle's train/test behaviours, and the
inplace_abn layer."""
import numpy as np
import pytest

import fluidity as fluid
from op_test import check_grad, check_output
from references import bn_ref
from test_nn_ops import r


# --- reference ---------------------------------------------------------------------------
# --- batch_norm -----------------------------------------------------------------------------
def _bn_inputs(c=3):
    return {"Scale": r(c) + 1.5, "Bias": r(c), "Mean": r(c), "Variance": r(c) + 1.5}


@pytest.mark.parametrize("shape,layout", [((4, 3, 2, 5), "NCHW"), ((4, 5, 3), "NHWC"),
                                          ((6, 3), "NCHW")])
def test_batch_norm_train_forward(shape, layout):
    x = r(*shape) * 3 + 1
    ins = dict(_bn_inputs(), X=x)
    axis = len(shape) - 1 if layout == "NHWC" else 1
    red = tuple(i for i in range(len(shape)) if i != axis)
    bm, bv = x.mean(axis=red), x.var(axis=red)
    eps, mom = 1e-5, 0.9
    check_output("batch_norm", ins,
                 {"Y": bn_ref(x, ins["Scale"], ins["Bias"], bm, bv, eps, axis),
                  "MeanOut": mom * ins["Mean"] + (1 - mom) * bm,
                  "VarianceOut": mom * ins["Variance"] + (1 - mom) * bv,
                  "SavedMean": bm, "SavedVariance": 1 / np.sqrt(bv + eps)},
                 {"data_layout": layout}, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("attrs", [{"is_test": True}, {"use_global_stats": True}])
def test_batch_norm_uses_running_stats(attrs):
    x = r(4, 3, 2, 2)
    ins = dict(_bn_inputs(), X=x)
    got = check_output("batch_norm", ins,
                       {"Y": bn_ref(x, ins["Scale"], ins["Bias"], ins["Mean"],
                                    ins["Variance"], 1e-3)},
                       dict(attrs, epsilon=1e-3), outputs=["Y", "MeanOut", "VarianceOut"])
    np.testing.assert_array_equal(got["MeanOut"], ins["Mean"])       # not updated
    np.testing.assert_array_equal(got["VarianceOut"], ins["Variance"])


def test_batch_norm_trainable_statistics_in_test_mode():
    x = r(4, 3, 2, 2)
    ins = dict(_bn_inputs(), X=x)
    bm, bv = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    check_output("batch_norm", ins, {"Y": bn_ref(x, ins["Scale"], ins["Bias"], bm, bv, 1e-5)},
                 {"is_test": True, "trainable_statistics": True}, atol=1e-5)


@pytest.mark.parametrize("shape,attrs", [((3, 2, 2, 2), {}), ((4, 3), {}),
                                         ((2, 3, 2), {"data_layout": "NHWC"}),
                                         ((3, 2, 2, 2), {"use_global_stats": True}),
                                         ((3, 2, 2, 2), {"is_test": True})])
def test_batch_norm_grad(shape, attrs):
    c = shape[-1] if attrs.get("data_layout") == "NHWC" else shape[1]
    ins = dict(_bn_inputs(c), X=r(*shape))
    check_grad("batch_norm", ins, ["X", "Scale", "Bias"], attrs, output_slots=["Y"])


def test_batch_norm_layer_updates_running_stats_and_test_clone_uses_them():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [3, 2, 2])
        y = fluid.layers.batch_norm(x, momentum=0.5, moving_mean_name="mm",
                                    moving_variance_name="mv")
    bn = [op for op in main.global_block().ops if op.type == "batch_norm"][0]
    assert bn.output("MeanOut") == bn.input("Mean") == ["mm"]
    assert bn.output("VarianceOut") == bn.input("Variance") == ["mv"]
    test_prog = main.clone(for_test=True)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    mean, var = np.zeros(3), np.ones(3)
    for _ in range(3):
        xb = r(4, 3, 2, 2) + 2
        exe.run(main, feed={"x": xb}, fetch_list=[y], scope=scope)
        mean = 0.5 * mean + 0.5 * xb.mean(axis=(0, 2, 3))
        var = 0.5 * var + 0.5 * xb.var(axis=(0, 2, 3))
    got_m = np.asarray(scope.find_var("mm").get_tensor())
    got_v = np.asarray(scope.find_var("mv").get_tensor())
    np.testing.assert_allclose(got_m, mean, rtol=1e-5)
    np.testing.assert_allclose(got_v, var, rtol=1e-5)
    xt = r(2, 3, 2, 2)
    yt, = exe.run(test_prog, feed={"x": xt}, fetch_list=[y.name], scope=scope)
    np.testing.assert_allclose(yt, bn_ref(xt, np.ones(3), np.zeros(3), mean, var, 1e-5),
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(scope.find_var("mm").get_tensor()), mean, rtol=1e-5)


# --- layer_norm -----------------------------------------------------------------------------
@pytest.mark.parametrize("shape,axis", [((3, 4), 1), ((2, 3, 4), 1), ((2, 3, 4), 2)])
def test_layer_norm(shape, axis):
    x = r(*shape) * 2 + 1
    right = int(np.prod(shape[axis:]))
    scale, bias = r(right) + 1.5, r(right)
    x2 = x.reshape(-1, right).astype(np.float64)
    m, v = x2.mean(1), x2.var(1)
    y = ((x2 - m[:, None]) / np.sqrt(v[:, None] + 1e-5) * scale + bias).reshape(shape)
    check_output("layer_norm", {"X": x, "Scale": scale, "Bias": bias},
                 {"Y": y, "Mean": m, "Variance": v}, {"begin_norm_axis": axis},
                 atol=1e-5, rtol=1e-4)
    check_grad("layer_norm", {"X": x, "Scale": scale, "Bias": bias}, ["X", "Scale", "Bias"],
               {"begin_norm_axis": axis})


def test_layer_norm_without_scale_bias():
    x = r(3, 5)
    m, v = x.mean(1, keepdims=True), x.var(1, keepdims=True)
    check_output("layer_norm", {"X": x}, {"Y": (x - m) / np.sqrt(v + 1e-5)}, atol=1e-5)
    check_grad("layer_norm", {"X": x}, ["X"])


# --- inplace_abn -----------------------------------------------------------------------------
def bn_act_ref(x, scale, bias, eps, act, alpha):
    m = x.mean(axis=(0, 2, 3), keepdims=True)
    v = x.var(axis=(0, 2, 3), keepdims=True)
    y = (x - m) / np.sqrt(v + eps) * scale.reshape(1, -1, 1, 1) + bias.reshape(1, -1, 1, 1)
    if act == "leaky_relu":
        return np.where(y >= 0, y, alpha * y)
    if act == "elu":
        return np.where(y >= 0, y, alpha * (np.exp(y) - 1))
    return y


@pytest.mark.parametrize("act,alpha", [("identity", 0.1), ("leaky_relu", 0.2), ("elu", 0.7)])
def test_inplace_abn_forward_and_gradient(act, alpha):
    # the gradient op recovers the batch norm's input from its output
    rng = np.random.default_rng(18)
    x = rng.normal(size=(3, 2, 2, 3))
    ins = {"X": x, "Scale": rng.uniform(0.5, 1.5, 2), "Bias": rng.normal(size=2),
           "Mean": np.zeros(2), "Variance": np.ones(2)}
    attrs = {"activation": act, "alpha": alpha, "epsilon": 1e-5}
    outs = ["Y", "MeanOut", "VarianceOut", "SavedMean", "SavedVariance"]
    check_output("inplace_abn", ins, {"Y": bn_act_ref(x, ins["Scale"], ins["Bias"], 1e-5, act,
                                                      alpha)}, attrs, outputs=outs, atol=1e-9)
    check_grad("inplace_abn", ins, ["X", "Scale", "Bias"], attrs, outputs=outs,
               output_slots=["Y"])


def test_inplace_abn_layer_builds_and_trains():
    x = np.random.default_rng(18).normal(size=(4, 3, 2, 2)).astype(np.float32)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        v = fluid.layers.data("x", [3, 2, 2])
        y = fluid.layers.inplace_abn(v, act="leaky_relu", act_alpha=0.1)
        loss = fluid.layers.mean(y)
        fluid.optimizer.SGD(0.1).minimize(loss)
        with pytest.raises(ValueError, match="inplace_abn only support"):
            fluid.layers.inplace_abn(v, act="relu")
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    (got,) = exe.run(main, feed={"x": x}, fetch_list=[y])
    np.testing.assert_allclose(got, bn_act_ref(x.astype(np.float64), np.ones(3), np.zeros(3),
                                               1e-5, "leaky_relu", 0.1), rtol=1e-4, atol=1e-5)
