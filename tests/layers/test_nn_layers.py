"""Layers of fluidity/layers/nn.py: multiplex, bilinear_tensor_product, add_position_encoding,
fsp_matrix, continuous_value_model, mean_iou, affine_grid, random_crop, tensor_array_to_tensor,
grid_sampler, spectral_norm, row_conv, im2sequence built as Fluid programs call them and run."""
import numpy as np
import pytest

import fluidity as fluid
from layer_programs import run_built

L = fluid.layers
rng = np.random.default_rng(13)


_run = run_built


def test_layers_run():
    a = rng.normal(size=(3, 2)).astype(np.float32)
    b = rng.normal(size=(3, 4)).astype(np.float32)

    def build():
        av, bv = L.data("a", [2]), L.data("b", [4])
        ids = L.assign(np.array([[1], [0], [1]], np.int32))
        arr = L.create_array("float32")
        L.array_write(av, L.fill_constant([1], "int64", 0), arr)
        L.array_write(av, L.fill_constant([1], "int64", 1), arr)
        img = L.reshape(L.concat([bv, bv], 1), [-1, 2, 2, 2])
        return [L.multiplex([av, L.scale(av, 2.0)], ids),
                L.bilinear_tensor_product(av, bv, 5, act="tanh"),
                L.add_position_encoding(L.reshape(bv, [-1, 2, 2]), 1.0, 0.0),
                L.fsp_matrix(img, img),
                L.continuous_value_model(L.abs(bv), L.abs(av)),
                *L.mean_iou(L.assign(np.array([0, 1, 1], np.int32)),
                            L.assign(np.array([0, 1, 0], np.int32)), 2),
                L.affine_grid(L.reshape(L.concat([av, av, av], 1), [-1, 2, 3]), [3, 1, 2, 2]),
                L.random_crop(L.reshape(bv, [-1, 2, 2]), [1, 2], seed=3),
                *L.tensor_array_to_tensor(arr, axis=1)]
    (mx, btp, ape, fsp, cvm, iou, wrong, correct, grid, crop, cat, idx) = _run(
        build, {"a": a, "b": b})
    np.testing.assert_allclose(mx, [2 * a[0], a[1], 2 * a[2]], rtol=1e-6)
    assert btp.shape == (3, 5) and np.abs(btp).max() <= 1
    np.testing.assert_allclose(ape, b.reshape(3, 2, 2), rtol=1e-6)
    assert fsp.shape == (3, 2, 2) and cvm.shape == (3, 4)
    np.testing.assert_allclose(iou, [(1 / 2 + 1 / 2) / 2], rtol=1e-6)
    assert grid.shape == (3, 2, 2, 2) and crop.shape == (3, 1, 2)
    np.testing.assert_allclose(cat, np.concatenate([a, a], 1))
    assert idx.tolist() == [2, 2]


def test_layers_refuse_bad_arguments():
    with pytest.raises(ValueError, match="multiplex: inputs"):
        _run(lambda: [L.multiplex([L.zeros([2], "float32")], L.zeros([2], "int32"))])
    with pytest.raises(TypeError, match="affine_grid: out_shape"):
        _run(lambda: [L.affine_grid(L.zeros([1, 2, 3], "float32"), [1, 2])])


def test_grid_sampler_and_spectral_norm_layers():
    x = rng.normal(size=(1, 2, 3, 3)).astype(np.float32)

    def build():
        xv = L.data("x", [2, 3, 3])
        theta = L.assign(np.array([[[1, 0, 0], [0, 1, 0]]], np.float32))
        grid = L.affine_grid(theta, [1, 2, 3, 3])
        w = L.create_parameter([4, 3], "float32")
        # power iteration's error shrinks as (s2 / s1) ** (2 * iters) for W's two largest
        # singular values: 100 iterations reach 1e-3 for any draw with s2 / s1 < 0.96
        return [L.grid_sampler(xv, grid), L.spectral_norm(w, dim=0, power_iters=100), w]
    same, sn, w = _run(build, {"x": x})
    np.testing.assert_allclose(same, x, rtol=1e-5, atol=1e-6)    # identity transform
    np.testing.assert_allclose(np.linalg.svd(sn, compute_uv=False)[0], 1.0, rtol=1e-3)


def test_row_conv_and_im2sequence_layers():
    img = rng.normal(size=(2, 1, 4, 4)).astype(np.float32)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xv = L.data("img", [1, 4, 4])
        seq = L.im2sequence(xv, filter_size=2, stride=2)
        out = L.row_conv(seq, 1)
        loss = L.mean(L.square(out))
        fluid.optimizer.SGD(0.1).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    s, o = exe.run(main, feed={"img": img}, fetch_list=[seq, out], return_numpy=False)
    assert np.array(s).shape == (8, 4) and s.lod() == [[0, 4, 8]]
    assert np.array(o).shape == (8, 4)
