"""Fluid 1.x creation and check layers (zeros, ones, *_like, range, linspace, eye, diag,
reverse, has_inf/has_nan/isfinite, the random layers, sampling_id) and the activation
layers with Fluid's positional arguments, each built as a Fluid program calls it and run."""
import inspect

import numpy as np
import pytest

import fluidity as fluid
from layer_programs import run_built

L = fluid.layers


_run = run_built


def test_zeros_ones_and_likes():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)

    def build():
        xv = L.data("x", [3])
        return [L.zeros([2, 3], "float32"), L.ones(shape=[4], dtype="int64"),
                L.zeros_like(xv), L.ones_like(xv)]
    z, o, zl, ol = _run(build, {"x": x})
    np.testing.assert_array_equal(z, np.zeros((2, 3), np.float32))
    assert o.dtype == np.int64 and o.tolist() == [1, 1, 1, 1]
    np.testing.assert_array_equal(zl, np.zeros_like(x))
    np.testing.assert_array_equal(ol, np.ones_like(x))


def test_zeros_refuses_a_bad_shape():
    with pytest.raises(TypeError, match="'shape' in fluid.layers.zeros"):
        _run(lambda: L.zeros(3, "float32"))
    with pytest.raises(TypeError, match="'x' in fluid.layers.zeros_like must be Variable"):
        _run(lambda: L.zeros_like(np.zeros(3)))


def test_range_linspace_eye_diag_reverse():
    def build():
        return [L.range(0, 10, 3, "int32"), L.linspace(0, 1, 5, "float32"),
                L.eye(2, 3), L.eye(2, batch_shape=[3]),
                L.diag(np.array([1, 2, 3], np.float32)),
                L.reverse(L.assign(np.arange(6, dtype=np.float32).reshape(2, 3)), axis=1)]
    rg, ls, e, eb, dg, rv = _run(build)
    assert rg.tolist() == [0, 3, 6, 9]
    np.testing.assert_allclose(ls, np.linspace(0, 1, 5))
    np.testing.assert_array_equal(e, np.eye(2, 3))
    assert eb.shape == (3, 2, 2) and (eb == np.eye(2)).all()
    np.testing.assert_array_equal(dg, np.diag([1, 2, 3]))
    np.testing.assert_array_equal(rv, [[2, 1, 0], [5, 4, 3]])


def test_has_inf_has_nan_isfinite():
    x = np.array([[1, np.inf], [0, 2]], np.float32)

    def build():
        xv = L.data("x", [2])
        return [L.has_inf(xv), L.has_nan(xv), L.isfinite(xv)]
    hi, hn, fin = _run(build, {"x": x})
    assert hi.tolist() == [True] and hn.tolist() == [False] and fin.tolist() == [False]


def test_random_layers():
    x = np.zeros((5, 2), np.float32)

    def build():
        xv = L.data("x", [2])
        return [L.uniform_random([3, 4], min=0.0, max=2.0, seed=1),
                L.gaussian_random([2000], mean=1.0, std=0.5, seed=2),
                L.uniform_random_batch_size_like(xv, [-1, 3]),
                L.gaussian_random_batch_size_like(xv, [-1, 6], std=0.1),
                L.sampling_id(L.softmax(L.fc(xv, 4)))]
    u, g, ub, gb, ids = _run(build, {"x": x})
    assert u.shape == (3, 4) and u.min() >= 0 and u.max() < 2
    assert abs(g.mean() - 1.0) < 0.05 and abs(g.std() - 0.5) < 0.05
    assert ub.shape == (5, 3) and gb.shape == (5, 6)
    assert ids.shape == (5,) and ids.dtype == np.int64 and ((ids >= 0) & (ids < 4)).all()


def test_activation_layers_take_fluids_positional_arguments():
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)

    def build():
        xv = L.data("x", [4])
        return [L.leaky_relu(xv, 0.1), L.pow(xv, 2.0), L.softshrink(xv, 0.5),
                L.hard_shrink(xv, threshold=1.0), L.thresholded_relu(xv, 0.5),
                L.stanh(xv, 0.5, 2.0), L.soft_relu(xv, 1.0), L.atan(xv), L.tanh_shrink(xv),
                L.gelu(xv, True)]
    lr, pw, ss, hs, tr, st, sr, at, ts, ge = _run(build, {"x": x})
    v = x.astype(np.float64)
    np.testing.assert_allclose(lr, np.where(v > 0, v, 0.1 * v), rtol=1e-6)
    np.testing.assert_allclose(pw, v ** 2, rtol=1e-6)
    np.testing.assert_allclose(ss, np.where(v > .5, v - .5, np.where(v < -.5, v + .5, 0)),
                               atol=1e-6)
    np.testing.assert_allclose(hs, np.where(np.abs(v) > 1, v, 0))
    np.testing.assert_allclose(tr, np.where(v > .5, v, 0))
    np.testing.assert_allclose(st, 2 * np.tanh(.5 * v), rtol=1e-5)
    np.testing.assert_allclose(sr, np.log1p(np.exp(np.clip(v, -1, 1))), rtol=1e-5)
    np.testing.assert_allclose(at, np.arctan(v), rtol=1e-5)
    np.testing.assert_allclose(ts, v - np.tanh(v), atol=1e-6)
    np.testing.assert_allclose(
        ge, 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v ** 3))), atol=1e-5)
    assert list(inspect.signature(L.pow).parameters)[:2] == ["x", "factor"]
    assert list(inspect.signature(L.stanh).parameters)[:3] == ["x", "scale_a", "scale_b"]
