"""batch_norm, layer_norm, inplace_abn (fluidity/ops/norm.py): forward against numpy
references, gradients against finite differences, Paddle's train/test behaviours, the
inplace_abn layer, and instance_norm's second-order gradient (instance_norm_grad_grad)."""
import numpy as np
import pytest

import fluidity as fluid
from op_test import check_grad, check_output, run_op
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


# --- instance_norm's second-order gradient (instance_norm_grad_grad) -------------------------
def _fd(f, x, eps=1e-6):
    """Central differences of scalar f at x (float64: error O(eps^2) + O(1e-16 / eps))."""
    g = np.zeros_like(x)
    for i in np.ndindex(*x.shape):
        hi, lo = x.copy(), x.copy()
        hi[i] += eps
        lo[i] -= eps
        g[i] = (f(hi) - f(lo)) / (2 * eps)
    return g


def test_instance_norm_second_order_gradient_matches_finite_differences():
    """s = sum(k * dF/dx) + |dF/dscale|^2 + |dF/dbias|^2 for F = sum(c * instance_norm(x)^2):
    its gradients in x, scale and bias pass through every output of instance_norm_grad_grad
    (DX, DScale, and DDY, since dF/dy depends on x) and every input (DDX, DDScale, DDBias)."""
    L, init = fluid.layers, fluid.initializer
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = L.data("x", [2, 3, 2, 3], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        y = L.instance_norm(
            x, param_attr=fluid.ParamAttr(initializer=init.Uniform(0.5, 1.5, seed=2)),
            bias_attr=fluid.ParamAttr(initializer=init.Uniform(-1, 1, seed=3)))
        c = L.create_parameter([2, 3, 2, 3], "float64", name="c",
                               default_initializer=init.Uniform(-1, 1, seed=4))
        f = L.reduce_sum(L.elementwise_mul(L.square(y), c))
        params = [main.global_block().var(n) for n in ("instance_norm_0.w_0",
                                                        "instance_norm_0.b_0")]
        gx, gs, gb = fluid.gradients(f, [x] + params)
        k = L.create_parameter([2, 3, 2, 3], "float64", name="k",
                               default_initializer=init.Uniform(-1, 1, seed=5))
        s = (L.reduce_sum(L.elementwise_mul(gx, k)) + L.reduce_sum(L.square(gs))
             + L.reduce_sum(L.square(gb)))
        hs = fluid.gradients(s, [x] + params)
    assert "instance_norm_grad_grad" in [op.type for op in main.global_block().ops]
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    x0 = np.random.default_rng(0).uniform(-1, 1, (2, 3, 2, 3))
    got = exe.run(main, feed={"x": x0}, fetch_list=hs, scope=scope)

    def s_at(xv):
        return float(exe.run(main, feed={"x": xv}, fetch_list=[s], scope=scope)[0])

    np.testing.assert_allclose(got[0], _fd(s_at, x0), rtol=1e-6, atol=1e-6)
    for p, g in zip(params, got[1:]):
        t = scope.find_var(p.name).get_tensor()
        p0 = np.array(t)

        def s_of_param(pv, t=t):
            t.set(pv, fluid.CPUPlace())
            return s_at(x0)

        want = _fd(s_of_param, p0.copy())
        t.set(p0, fluid.CPUPlace())
        np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-6, err_msg=p.name)


def _in_dx(x, dy, eps):
    """instance_norm's dX without Scale, written from the chain rule through mean and var."""
    axes = tuple(range(2, x.ndim))
    m = np.prod(x.shape[2:])
    mu = x.mean(axis=axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axes, keepdims=True)
    dvar = (dy * (x - mu)).sum(axis=axes, keepdims=True) * -0.5 * (var + eps) ** -1.5
    dmu = -dy.sum(axis=axes, keepdims=True) / np.sqrt(var + eps)
    return dy / np.sqrt(var + eps) + dvar * 2 * (x - mu) / m + dmu / m


def test_instance_norm_grad_grad_op_without_scale():
    """The op alone, no Scale (3-D input): DX is the derivative of <DDX, dX(x, DY)> in x and
    DDY that of <DDX, dX> in DY (dX linear in DY), against finite differences of _in_dx."""
    rng = np.random.default_rng(1)
    x, dy, ddx = (rng.uniform(-1, 1, (2, 3, 5)) for _ in range(3))
    eps = 1e-5
    mu = x.mean(axis=2, keepdims=True)
    inv = 1 / np.sqrt(((x - mu) ** 2).mean(axis=2, keepdims=True) + eps)
    out = run_op("instance_norm_grad_grad",
                 {"X": x, "SavedMean": mu.reshape(-1), "SavedVariance": inv.reshape(-1),
                  "DY": dy, "DDX": ddx}, {"epsilon": eps}, outputs=["DX", "DDY"])
    np.testing.assert_allclose(out["DX"], _fd(lambda v: (ddx * _in_dx(v, dy, eps)).sum(), x),
                               rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(out["DDY"], _fd(lambda v: (ddx * _in_dx(x, v, eps)).sum(), dy),
                               rtol=1e-6, atol=1e-7)
