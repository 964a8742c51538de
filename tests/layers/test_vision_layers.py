"""Fluid 1.x image layers (fluidity/layers/vision.py), each built as a Fluid program calls
it and run: conv2d_transpose, adaptive_pool2d, image_resize family, prelu, instance_norm,
group_norm, pads, crops, channel movers, maxout, affine_channel, lrn; and a small conv net
with them trains."""
import numpy as np
import pytest

import fluidity as fluid

L = fluid.layers
rng = np.random.default_rng(6)
X = rng.normal(size=(2, 4, 4, 6)).astype(np.float32)


def _run(build, x=X):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xv = L.data("x", list(x.shape[1:]))
        outs = build(xv)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    return exe.run(main, feed={"x": x}, fetch_list=list(outs))


def test_shapes_and_values():
    outs = _run(lambda x: [
        L.conv2d_transpose(x, 3, filter_size=3, stride=2),
        L.conv2d_transpose(x, 2, output_size=[9, 13], stride=2),
        L.adaptive_pool2d(x, [2, 3], "avg"), *L.adaptive_pool2d(x, 2, require_index=True),
        L.resize_bilinear(x, out_shape=[8, 12]), L.resize_nearest(x, scale=2.0),
        L.image_resize_short(x, 2),
        L.prelu(x, "channel"), L.instance_norm(x), L.group_norm(x, 2),
        L.pad(x, [0, 0, 1, 0, 0, 1, 2, 0], 1.0), L.pad2d(x, [1, 1, 0, 2], "reflect"),
        L.crop(x, [2, 2, 2, 3], [0, 1, 1, 2]), L.crop_tensor(x, [-1, 2, -1, 3], [0, 0, 1, 1]),
        L.space_to_depth(x, 2), L.pixel_shuffle(x, 2), L.shuffle_channel(x, 2),
        L.maxout(x, 2), L.lrn(x, 3),
        L.affine_channel(x, L.assign(np.arange(4, dtype=np.float32)),
                         L.assign(np.ones(4, np.float32))),
        L.pad_constant_like(L.fill_constant([2, 4, 5, 7], "float32", 0.0), x, 2.0)])
    (ct1, ct2, ap, am, mask, rb, rn, rs, pr, inn, gn, pd, p2, cr, ct, s2d, ps, sc, mo, lr, ac,
     pcl) = outs
    assert ct1.shape == (2, 3, 9, 13) and ct2.shape == (2, 2, 9, 13)
    np.testing.assert_allclose(ap[:, :, 0, 0], X[:, :, :2, :2].mean(axis=(2, 3)), rtol=1e-5)
    np.testing.assert_allclose(am[:, :, 1, 1], X[:, :, 2:, 3:].max(axis=(2, 3)))
    assert mask.shape == am.shape
    assert rb.shape == (2, 4, 8, 12) and rn.shape == (2, 4, 8, 12) and rs.shape == (2, 4, 2, 3)
    np.testing.assert_allclose(pr, np.where(X > 0, X, 0.25 * X), rtol=1e-6)
    m, v = X.mean(axis=(2, 3), keepdims=True), X.var(axis=(2, 3), keepdims=True)
    np.testing.assert_allclose(inn, (X - m) / np.sqrt(v + 1e-5), rtol=1e-4, atol=1e-5)
    g = X.reshape(2, 2, -1)
    want = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5))
    np.testing.assert_allclose(gn, want.reshape(X.shape), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(pd, np.pad(X, [(0, 0), (1, 0), (0, 1), (2, 0)],
                                             constant_values=1))
    np.testing.assert_array_equal(p2, np.pad(X, [(0, 0), (0, 0), (1, 1), (0, 2)], "reflect"))
    np.testing.assert_array_equal(cr, X[:, 1:3, 1:3, 2:5])
    np.testing.assert_array_equal(ct, X[:, :2, 1:, 1:4])
    assert s2d.shape == (2, 16, 2, 3) and ps.shape == (2, 1, 8, 12)
    np.testing.assert_array_equal(sc[:, 1], X[:, 2])
    np.testing.assert_array_equal(mo, X.reshape(2, 2, 2, 4, 6).max(axis=2))
    assert lr.shape == X.shape
    np.testing.assert_allclose(ac, X * np.arange(4).reshape(1, 4, 1, 1) + 1, rtol=1e-6)
    assert pcl.shape == (2, 4, 5, 7) and (pcl[:, :, 4:] == 2).all()


def test_a_conv_net_of_these_layers_trains():
    y = np.random.default_rng(5).normal(size=(2, 1)).astype(np.float32)
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 5   # initial weights fixed: no test-order effect
    with fluid.program_guard(main, startup):
        xv, yv = L.data("x", [4, 4, 6]), L.data("y", [1])
        h = L.prelu(L.group_norm(L.conv2d_transpose(xv, 4, filter_size=2, stride=2), 2),
                    "all")
        h = L.adaptive_pool2d(L.pixel_shuffle(h, 2), 2, "avg")
        loss = L.mean(L.square_error_cost(L.fc(h, 1), yv))
        fluid.optimizer.Adam(0.05).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    losses = [float(np.asarray(exe.run(main, feed={"x": X, "y": y}, fetch_list=[loss])[0])
                    .reshape(-1)[0]) for _ in range(15)]
    assert losses[-1] < 0.3 * losses[0]


def test_vision_layers_refuse_bad_arguments():
    with pytest.raises(ValueError, match="pad2d: mode"):
        _run(lambda x: [L.pad2d(x, mode="wrap")])
    with pytest.raises(ValueError, match="prelu: mode"):
        _run(lambda x: [L.prelu(x, "row")])
    with pytest.raises(ValueError, match="pixel_shuffle: 'upscale_factor'"):
        _run(lambda x: [L.pixel_shuffle(x, 0)])
    with pytest.raises(TypeError, match="resize_trilinear: 'input' must be a Variable"):
        L.resize_trilinear(None)


def test_3d_layers_and_unfold():
    v = rng.normal(size=(2, 2, 4, 4, 4)).astype(np.float32)
    outs = _run(lambda x: [L.conv3d(x, 3, 3, padding=1), L.conv3d_transpose(x, 2, filter_size=2,
                                                                             stride=2),
                           L.pool3d(x, 2, "avg", 2), L.pool3d(x, global_pooling=True),
                           L.conv3d_transpose(x, 1, output_size=[9, 9, 9], stride=2)], v)
    assert outs[0].shape == (2, 3, 4, 4, 4) and outs[1].shape == (2, 2, 8, 8, 8)
    np.testing.assert_allclose(outs[2][:, :, 0, 0, 0], v[:, :, :2, :2, :2].mean(axis=(2, 3, 4)),
                               rtol=1e-5)
    np.testing.assert_allclose(outs[3][:, :, 0, 0, 0], v.max(axis=(2, 3, 4)))
    assert outs[4].shape == (2, 1, 9, 9, 9)
    (u,) = _run(lambda x: [L.unfold(x, [2, 3], strides=[1, 2], paddings=1)])
    assert u.shape == (2, 4 * 6, 5 * 3)
