"""conv2d, depthwise_conv2d, pool2d (fluidity/ops/conv.py): forward against loop-based numpy
references, gradients against finite differences, shape errors, the conv2d layer."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.errors import FluidityError, ShapeError
from op_test import check_grad, check_output
from references import conv_ref, pads4, pool_ref  # noqa: F401
from test_nn_ops import _layer_program, r, rng


# --- references (plain loops, Paddle's definitions) -------------------------------------------
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
    # a window wider than the input by less than the stride: one output over the input, as
    # Paddle's C++ division (truncating) gives it (GoogLeNet's last 7x7 pool over 6x6)
    dict(ksize=[8, 7], strides=[8, 7]),
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


@pytest.mark.parametrize("case", [POOL_CASES[1], POOL_CASES[3], POOL_CASES[5], POOL_CASES[6],
                                  dict(ksize=[6, 6], strides=[6, 6])])
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


# --- layers ---------------------------------------------------------------------------------
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
