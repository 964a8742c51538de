"""fluid.nets: the composite networks build the layers Fluid's do, and run."""
import numpy as np
import pytest

import fluidity as fluid


def _run(build, feed):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        out = build()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    res, = exe.run(main, feed=feed, fetch_list=[out])
    return main, np.asarray(res)


def test_simple_img_conv_pool_and_img_conv_group():
    x = np.random.default_rng(0).normal(size=(2, 1, 8, 8)).astype(np.float32)

    def build():
        img = fluid.layers.data("img", [1, 8, 8])
        c = fluid.nets.simple_img_conv_pool(img, num_filters=4, filter_size=3, pool_size=2,
                                            pool_stride=2, act="relu")
        return fluid.nets.img_conv_group(c, conv_num_filter=[3, 3], pool_size=2, pool_stride=2,
                                         conv_act="relu", conv_with_batchnorm=True,
                                         conv_batchnorm_drop_rate=[0.0, 0.5])
    main, out = _run(build, {"img": x})
    assert out.shape == (2, 3, 1, 1)
    types = [op.type for op in main.global_block().ops]
    assert types.count("conv2d") == 3 and types.count("batch_norm") == 2
    assert types.count("dropout") == 1 and types.count("pool2d") == 2
    with pytest.raises(ValueError, match="conv_padding"):
        with fluid.program_guard(fluid.Program(), fluid.Program()):
            fluid.nets.img_conv_group(fluid.layers.data("i", [1, 4, 4]), [2, 2], 2,
                                      conv_padding=[1])


def test_sequence_conv_pool():
    t = fluid.create_lod_tensor(np.random.rand(5, 3).astype(np.float32), [[2, 3]],
                                fluid.CPUPlace())

    def build():
        x = fluid.layers.data("x", [3], lod_level=1)
        return fluid.nets.sequence_conv_pool(x, num_filters=4, filter_size=3)
    _, out = _run(build, {"x": t})
    assert out.shape == (2, 4) and ((out > 0) & (out < 1)).all()   # sigmoid, max pooled


def test_glu():
    x = np.random.default_rng(1).normal(size=(3, 6)).astype(np.float32)
    _, out = _run(lambda: fluid.nets.glu(fluid.layers.data("x", [6]), dim=1), {"x": x})
    np.testing.assert_allclose(out, x[:, :3] / (1 + np.exp(-x[:, 3:])), rtol=1e-5)


def test_scaled_dot_product_attention():
    rng = np.random.default_rng(2)
    q, k, v = (rng.normal(size=(2, n, 4)).astype(np.float32) for n in (3, 5, 5))

    def build():
        qs = fluid.layers.data("q", [3, 4])
        ks = fluid.layers.data("k", [5, 4])
        vs = fluid.layers.data("v", [5, 4])
        return fluid.nets.scaled_dot_product_attention(qs, ks, vs)
    _, out = _run(build, {"q": q, "k": k, "v": v})
    s = q @ k.transpose(0, 2, 1) / 2.0
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    np.testing.assert_allclose(out, w @ v, rtol=1e-4, atol=1e-5)

    def build_heads():
        qs = fluid.layers.data("q", [3, 4])
        ks = fluid.layers.data("k", [5, 4])
        vs = fluid.layers.data("v", [5, 4])
        return fluid.nets.scaled_dot_product_attention(qs, ks, vs, num_heads=2)
    _, out = _run(build_heads, {"q": q, "k": k, "v": v})
    assert out.shape == (2, 3, 4)
    with pytest.raises(ValueError, match="divisible by num_heads"):
        with fluid.program_guard(fluid.Program(), fluid.Program()):
            a = fluid.layers.data("a", [3, 4])
            fluid.nets.scaled_dot_product_attention(a, a, a, num_heads=3)
