"""conv2d / conv3d / pool2d / pool3d layers read Fluid 1.8's padding forms and layouts;
group_norm builds Scale / Bias only when asked (as Fluid 1.8)."""
import numpy as np
import pytest

import fluidity as fluid


def _op_of(program, type_):
    return next(op for op in program.global_block().ops if op.type == type_)


@pytest.mark.parametrize("padding,fmt,want_pads,want_algo", [
    ([[0, 0], [0, 0], [1, 2], [3, 4]], "NCHW", [1, 2, 3, 4], "EXPLICIT"),
    ([[0, 0], [1, 2], [3, 4], [0, 0]], "NHWC", [1, 2, 3, 4], "EXPLICIT"),
    ([1, 1, 2, 2], "NCHW", [1, 2], "EXPLICIT"),        # symmetric pairs fold
    ("same", "NCHW", [0, 0], "SAME"),
    ("VALID", "NHWC", [0, 0], "VALID"),
])
def test_conv2d_padding_forms(padding, fmt, want_pads, want_algo):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        shape = [None, 3, 8, 8] if fmt == "NCHW" else [None, 8, 8, 3]
        x = fluid.data("x", shape, "float32")
        fluid.layers.conv2d(x, 2, 3, padding=padding, data_format=fmt)
    op = _op_of(main, "conv2d")
    assert list(op.attr("paddings")) == want_pads
    assert op.attr("padding_algorithm") == want_algo


def test_padding_in_batch_or_channel_dims_is_refused():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [None, 3, 8, 8], "float32")
        with pytest.raises(ValueError, match="batch or channel"):
            fluid.layers.conv2d(x, 2, 3, padding=[[0, 0], [1, 1], [1, 1], [1, 1]])
        with pytest.raises(ValueError, match="Unknown padding"):
            fluid.layers.conv2d(x, 2, 3, padding="FULL")
        v = fluid.data("v", [None, 2, 4, 4, 4], "float32")
        with pytest.raises(ValueError, match="ceil_mode"):
            fluid.layers.pool3d(v, 2, pool_padding="VALID", ceil_mode=True)
        with pytest.raises(TypeError, match="use_cudnn"):
            fluid.layers.pool3d(v, 2, use_cudnn=[0])


def test_conv3d_and_pool3d_channel_last_run_as_channel_first():
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (2, 3, 4, 5, 2)).astype(np.float32)      # NCDHW
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        first = fluid.data("first", [None, 3, 4, 5, 2], "float32")
        last = fluid.data("last", [None, 4, 5, 2, 3], "float32")
        kw = dict(num_filters=2, filter_size=[2, 3, 1], padding="SAME", stride=[2, 1, 1],
                  bias_attr=False)
        a = fluid.layers.conv3d(first, param_attr="w", **kw)
        b = fluid.layers.conv3d(last, param_attr="w", data_format="NDHWC", **kw)
        pa = fluid.layers.pool3d(first, 2, "avg", 2, pool_padding=[[0, 0], [0, 0], [1, 0],
                                                                    [0, 1], [0, 0]],
                                 ceil_mode=True)
        pb = fluid.layers.pool3d(last, 2, "avg", 2, pool_padding=[1, 0, 0, 1, 0, 0],
                                 ceil_mode=True, data_format="NDHWC")
    assert a.shape == (-1, 2, 2, 5, 2) and b.shape == (-1, 2, 5, 2, 2)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    ra, rb, qa, qb = exe.run(main, feed={"first": x, "last": x.transpose(0, 2, 3, 4, 1)},
                             fetch_list=[a, b, pa, pb])
    np.testing.assert_allclose(rb, ra.transpose(0, 2, 3, 4, 1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(qb, qa.transpose(0, 2, 3, 4, 1), rtol=1e-5, atol=1e-6)
    assert qa.shape == (2, 3, 3, 3, 1)


def test_group_norm_parameters_only_when_given():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 4, 3, 3], "float32")
        fluid.layers.group_norm(x, 2)
        fluid.layers.group_norm(x, 2, param_attr=fluid.ParamAttr(name="s"), bias_attr="b")
    ops = [op for op in main.global_block().ops if op.type == "group_norm"]
    assert not ops[0].input("Scale") and not ops[0].input("Bias")
    assert ops[1].input("Scale") == ["s"] and ops[1].input("Bias") == ["b"]
    assert sorted(p.name for p in main.global_block().all_parameters()) == ["b", "s"]
    # without Scale / Bias the op normalizes only
    xv = np.random.default_rng(0).uniform(size=(2, 4, 3, 3)).astype(np.float32)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    (y,) = exe.run(main, feed={"x": xv}, fetch_list=[ops[0].output("Y")[0]])
    g = xv.reshape(2, 2, -1)
    want = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5))
    np.testing.assert_allclose(y, want.reshape(xv.shape), rtol=1e-4, atol=1e-5)


def test_pool2d_refuses_an_unknown_data_format_as_fluid():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [2, 3, 8, 8], "float32")
        with pytest.raises(ValueError, match="data_format"):
            fluid.layers.pool2d(x, 2, data_format="NHWCC")
