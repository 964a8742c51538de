"""conv2d, depthwise_conv2d, pool2d, batch_norm, layer_norm, dropout: forward against loop-based
numpy references, gradients against finite differences, and Paddle's train/test behaviours."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.errors import FluidityError, ShapeError
from op_test import check_grad, check_output, run_op

rng = np.random.default_rng(0)


def r(*shape):
    return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)


# --- references (plain loops, Paddle's definitions) -------------------------------------------
def pads4(p):
    return [p[0], p[0], p[1], p[1]] if len(p) == 2 else list(p)


def conv_ref(x, w, strides=(1, 1), paddings=(0, 0), dilations=(1, 1), groups=1, bias=None):
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    t, b, left, right = pads4(paddings)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (t, b), (left, right)))
    oh = (h + t + b - (dilations[0] * (kh - 1) + 1)) // strides[0] + 1
    ow = (wd + left + right - (dilations[1] * (kw - 1) + 1)) // strides[1] + 1
    out = np.zeros((n, m, oh, ow))
    mg = m // groups
    for ni in range(n):
        for mi in range(m):
            g = mi // mg
            for i in range(oh):
                for j in range(ow):
                    hs, ws = i * strides[0], j * strides[1]
                    patch = xp[ni, g * cg:(g + 1) * cg,
                               hs:hs + dilations[0] * (kh - 1) + 1:dilations[0],
                               ws:ws + dilations[1] * (kw - 1) + 1:dilations[1]]
                    out[ni, mi, i, j] = (patch * w[mi]).sum()
    if bias is not None:
        out += bias.reshape(1, -1, 1, 1)
    return out.astype(x.dtype)


def pool_ref(x, ksize=None, strides=(1, 1), paddings=(0, 0), pooling_type="max", ceil_mode=False,
             exclusive=True, global_pooling=False, adaptive=False):
    n, c, h, w = x.shape
    if global_pooling:
        ksize, paddings = (h, w), (0, 0)
    t, b, left, right = pads4(paddings)

    def size(L, k, s, p0, p1):
        return (L + p0 + p1 - k + (s - 1 if ceil_mode else 0)) // s + 1
    oh, ow = (ksize if adaptive else
              (size(h, ksize[0], strides[0], t, b), size(w, ksize[1], strides[1], left, right)))
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            if adaptive:
                hs, he = (i * h) // oh, -(-((i + 1) * h) // oh)
                ws, we = (j * w) // ow, -(-((j + 1) * w) // ow)
            else:
                hs, ws = i * strides[0] - t, j * strides[1] - left
                he, we = min(hs + ksize[0], h), min(ws + ksize[1], w)
                hs, ws = max(hs, 0), max(ws, 0)
            win = x[:, :, hs:he, ws:we].astype(np.float64)
            if pooling_type == "max":
                out[:, :, i, j] = win.max(axis=(2, 3))
            else:
                div = (he - hs) * (we - ws) if exclusive or adaptive else ksize[0] * ksize[1]
                out[:, :, i, j] = win.sum(axis=(2, 3)) / div
    return out.astype(x.dtype)


def bn_ref(x, scale, bias, mean, var, eps, axis=1):
    shape = [1] * x.ndim
    shape[axis] = -1
    return ((x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * scale.reshape(shape)
            + bias.reshape(shape))


# --- conv2d --------------------------------------------------------------------------------
CONV_CASES = [  # x shape, filter shape, attrs
    ((2, 3, 6, 6), (4, 3, 3, 3), {}),
    ((2, 3, 7, 6), (4, 3, 3, 2), {"strides": [2, 1], "paddings": [1, 0]}),
    ((1, 2, 7, 7), (3, 2, 3, 3), {"paddings": [1, 2, 0, 1], "dilations": [2, 1]}),
    ((2, 4, 5, 5), (6, 2, 3, 3), {"groups": 2, "paddings": [1, 1], "strides": [2, 2]}),
    ((1, 3, 5, 5), (3, 1, 3, 3), {"groups": 3, "paddings": [1, 1]}),
]


@pytest.mark.parametrize("xs,fs,attrs", CONV_CASES)
def test_conv2d_forward(xs, fs, attrs):
    x, w = r(*xs), r(*fs)
    want = conv_ref(x, w, attrs.get("strides", (1, 1)), attrs.get("paddings", (0, 0)),
                    attrs.get("dilations", (1, 1)), attrs.get("groups", 1))
    check_output("conv2d", {"Input": x, "Filter": w}, {"Output": want}, attrs, atol=1e-5)


def test_conv2d_bias_nhwc_and_depthwise():
    x, w, b = r(2, 3, 5, 5), r(4, 3, 3, 3), r(4)
    want = conv_ref(x, w, paddings=(1, 1), bias=b)
    check_output("conv2d", {"Input": x, "Filter": w, "Bias": b}, {"Output": want},
                 {"paddings": [1, 1]}, atol=1e-5)
    check_output("conv2d", {"Input": x.transpose(0, 2, 3, 1).copy(), "Filter": w},
                 {"Output": conv_ref(x, w, paddings=(1, 1)).transpose(0, 2, 3, 1)},
                 {"paddings": [1, 1], "data_format": "NHWC"}, atol=1e-5)
    wd = r(6, 1, 3, 3)   # depthwise with channel multiplier 2
    check_output("depthwise_conv2d", {"Input": x, "Filter": wd},
                 {"Output": conv_ref(x, wd, groups=3)}, {"groups": 3}, atol=1e-5)


@pytest.mark.parametrize("algo,stride,want_hw", [("SAME", 1, (5, 5)), ("SAME", 2, (3, 3)),
                                                 ("VALID", 1, (3, 3)), ("VALID", 2, (2, 2))])
def test_conv2d_padding_algorithm(algo, stride, want_hw):
    x, w = r(1, 2, 5, 5), r(3, 2, 3, 3)
    if algo == "SAME":  # total padding (out-1)*s + k - in, split top/left first
        total = max((want_hw[0] - 1) * stride + 3 - 5, 0)
        pads = [total // 2, total - total // 2] * 2
        pads = [pads[0], pads[1], pads[0], pads[1]]
    else:
        pads = [0, 0]
    want = conv_ref(x, w, (stride, stride), pads)
    assert want.shape[2:] == want_hw
    check_output("conv2d", {"Input": x, "Filter": w}, {"Output": want},
                 {"padding_algorithm": algo, "strides": [stride, stride],
                  "paddings": [7, 7]}, atol=1e-5)


@pytest.mark.parametrize("xs,fs,attrs", [
    ((1, 2, 5, 4), (3, 2, 3, 2), {"strides": [2, 1], "paddings": [1, 0]}),
    ((1, 4, 4, 4), (4, 2, 2, 3), {"groups": 2, "dilations": [2, 1], "paddings": [1, 1, 0, 1]}),
])
def test_conv2d_grad(xs, fs, attrs):
    check_grad("conv2d", {"Input": r(*xs), "Filter": r(*fs)}, ["Input", "Filter"], attrs)


def test_conv2d_grad_bias_nhwc_depthwise():
    check_grad("conv2d", {"Input": r(1, 4, 4, 2), "Filter": r(2, 2, 2, 2), "Bias": r(2)},
               ["Input", "Filter", "Bias"], {"data_format": "NHWC", "paddings": [1, 0]})
    check_grad("depthwise_conv2d", {"Input": r(1, 2, 4, 4), "Filter": r(2, 1, 3, 3)},
               ["Input", "Filter"], {"groups": 2, "paddings": [1, 1], "strides": [2, 2]})


def test_conv2d_channel_mismatch_is_a_shape_error():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        b = main.global_block()
        x = b.create_var(name="x", shape=[2, 3, 8, 8], dtype="float32")
        w = b.create_var(name="w", shape=[4, 5, 3, 3], dtype="float32")
        out = b.create_var(name="out", dtype="float32")
        with pytest.raises(ShapeError) as e:
            b.append_op("conv2d", {"Input": x, "Filter": w}, {"Output": out})
    msg = str(e.value)
    assert "conv2d" in msg and "[2, 3, 8, 8]" in msg and "[4, 5, 3, 3]" in msg
    assert not main.global_block().ops   # the failed op is not left in the program


def test_conv2d_channel_mismatch_at_run_time():
    # shapes unknown at build time: the kernel catches it and the executor names the op
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        b = main.global_block()
        x = b.create_var(name="x", shape=[-1, -1, -1, -1], dtype="float32")
        w = b.create_var(name="w", shape=[-1, -1, 3, 3], dtype="float32")
        out = b.create_var(name="out", dtype="float32")
        b.append_op("conv2d", {"Input": x, "Filter": w}, {"Output": out})
    with pytest.raises(FluidityError) as e:
        fluid.Executor().run(main, feed={"x": r(1, 3, 5, 5), "w": r(2, 4, 3, 3)},
                             fetch_list=[out], scope=fluid.Scope())
    msg = str(e.value)
    assert "conv2d" in msg and "[1, 3, 5, 5]" in msg and "[2, 4, 3, 3]" in msg


# --- pool2d ---------------------------------------------------------------------------------
POOL_CASES = [
    dict(ksize=[2, 2], strides=[2, 2]),
    dict(ksize=[3, 3], strides=[2, 2], paddings=[1, 1]),
    dict(ksize=[3, 2], strides=[2, 1], paddings=[1, 0, 0, 1]),
    dict(ksize=[3, 3], strides=[2, 2], ceil_mode=True),
    dict(ksize=[3, 3], strides=[2, 2], paddings=[1, 1], ceil_mode=True),
    dict(global_pooling=True),
    dict(ksize=[3, 2], adaptive=True),
]


@pytest.mark.parametrize("case", POOL_CASES)
@pytest.mark.parametrize("ptype,exclusive", [("max", True), ("avg", True), ("avg", False)])
def test_pool2d_forward(case, ptype, exclusive):
    x = r(2, 3, 7, 6)
    attrs = dict(case, pooling_type=ptype, exclusive=exclusive)
    want = pool_ref(x, pooling_type=ptype, exclusive=exclusive,
                    **{k: v for k, v in case.items()})
    check_output("pool2d", {"X": x}, {"Out": want}, attrs)


def test_pool2d_nhwc_and_padding_algorithm():
    x = r(2, 3, 6, 6)
    want = pool_ref(x, [3, 3], [2, 2], pooling_type="avg")
    check_output("pool2d", {"X": x.transpose(0, 2, 3, 1).copy()},
                 {"Out": want.transpose(0, 2, 3, 1)},
                 {"pooling_type": "avg", "ksize": [3, 3], "strides": [2, 2],
                  "data_format": "NHWC"})
    # SAME: out = ceil(6 / 2) = 3, total padding 1 -> [0, 1]
    want = pool_ref(x, [2, 2], [2, 2], [0, 1, 0, 1], "max")
    check_output("pool2d", {"X": x}, {"Out": want},
                 {"ksize": [2, 2], "strides": [2, 2], "padding_algorithm": "SAME",
                  "paddings": [5, 5]})
    check_output("pool2d", {"X": x}, {"Out": pool_ref(x, [4, 4], [1, 1])},
                 {"ksize": [4, 4], "padding_algorithm": "VALID", "paddings": [1, 1]})


@pytest.mark.parametrize("case", [POOL_CASES[1], POOL_CASES[3], POOL_CASES[5], POOL_CASES[6]])
@pytest.mark.parametrize("ptype,exclusive", [("max", True), ("avg", True), ("avg", False)])
def test_pool2d_grad(case, ptype, exclusive):
    # distinct values so that max has a unique winner under finite differences
    x = rng.permutation(2 * 5 * 5).reshape(1, 2, 5, 5).astype(np.float32) / 10
    check_grad("pool2d", {"X": x}, ["X"], dict(case, pooling_type=ptype, exclusive=exclusive))


def test_pool2d_max_grad_goes_to_first_maximum():
    x = np.ones((1, 1, 2, 2), np.float32)
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        xv = fluid.layers.data("x", [1, 2, 2], stop_gradient=False)
        out = fluid.layers.pool2d(xv, pool_size=2, pool_stride=2)
        g, = fluid.backward.gradients([out], [xv])
    gx, = fluid.Executor().run(main, feed={"x": x}, fetch_list=[g], scope=fluid.Scope())
    np.testing.assert_array_equal(gx, [[[[1, 0], [0, 0]]]])


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


def test_conv2d_layer_params_bias_act_and_depthwise():
    main, startup, y = _layer_program(
        lambda x: fluid.layers.conv2d(x, 6, 3, stride=2, padding=1, act="relu"), [3, 8, 8])
    assert list(y.shape) == [-1, 6, 4, 4]
    types = [op.type for op in main.global_block().ops]
    assert types == ["conv2d", "elementwise_add", "relu"]
    w, b = main.all_parameters()
    assert list(w.shape) == [6, 3, 3, 3] and list(b.shape) == [6]
    init = [op for op in startup.global_block().ops if op.output("Out") == [w.name]][0]
    assert init.type == "gaussian_random"
    assert abs(init.attr("std") - (2.0 / 27) ** 0.5) < 1e-6
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    x = r(2, 3, 8, 8)
    got, = exe.run(main, feed={"x": x}, fetch_list=[y], scope=scope)
    wv = np.asarray(scope.find_var(w.name).get_tensor())
    np.testing.assert_allclose(got, np.maximum(conv_ref(x, wv, (2, 2), (1, 1)), 0), atol=1e-5)
    main, _, y = _layer_program(
        lambda x: fluid.layers.conv2d(x, 8, 3, groups=4, use_cudnn=False, bias_attr=False,
                                      padding="SAME"), [4, 5, 5])
    assert [op.type for op in main.global_block().ops] == ["depthwise_conv2d"]
    assert list(y.shape) == [-1, 8, 5, 5]


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
