"""Fluid 1.x layers over existing ops: the activations with attributes (elu, relu6,
hard_sigmoid, hard_swish, swish, brelu, mish, selu), erf, argsort, cumsum, flip, unstack,
clip_by_norm — each built as a Fluid program would call it, run, and checked against numpy."""
import math

import numpy as np
import pytest

import fluidity as fluid
from fluidity.errors import FluidityError

L = fluid.layers
rng = np.random.default_rng(0)
X = rng.normal(size=(3, 4)).astype(np.float32) * 3


def _run(build, x=X):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xv = L.data("x", list(x.shape[1:]))
        outs = build(xv)
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    return fluid.Executor().run(main, feed={"x": x}, fetch_list=outs)


def _sig(v):
    return 1 / (1 + np.exp(-v))


CASES = {
    "elu": (lambda x: L.elu(x, 0.5), lambda v: np.where(v > 0, v, 0.5 * (np.exp(v) - 1))),
    "relu6": (lambda x: L.relu6(x, threshold=4.0), lambda v: np.clip(v, 0, 4.0)),
    "hard_sigmoid": (lambda x: L.hard_sigmoid(x, 0.3, 0.4), lambda v: np.clip(0.3 * v + 0.4, 0, 1)),
    "hard_swish": (lambda x: L.hard_swish(x), lambda v: v * np.clip(v + 3, 0, 6) / 6),
    "swish": (lambda x: L.swish(x, beta=2.0), lambda v: v * _sig(2 * v)),
    "brelu": (lambda x: L.brelu(x, 1.0, 3.0), lambda v: np.clip(v, 1.0, 3.0)),
    "mish": (lambda x: L.mish(x), lambda v: v * np.tanh(np.log1p(np.exp(v)))),
    "selu": (lambda x: L.selu(x), lambda v: 1.0507009873554805 * np.where(
        v > 0, v, 1.6732632423543772 * (np.exp(v) - 1))),
    "erf": (lambda x: L.erf(x), np.vectorize(math.erf)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_activation_layer_takes_fluids_arguments(name):
    build, ref = CASES[name]
    (got,) = _run(build)
    np.testing.assert_allclose(got, ref(X.astype(np.float64)), rtol=1e-5, atol=1e-6)


def test_activation_layers_refuse_unknown_arguments():
    with pytest.raises(TypeError, match="unexpected keyword argument 'beta'"):
        _run(lambda x: L.elu(x, beta=1.0))


def test_argsort_cumsum_flip_unstack_clip_by_norm():
    outs = _run(lambda x: [*L.argsort(x, axis=1, descending=True), L.cumsum(x, axis=1),
                           L.cumsum(x), L.cumsum(x, axis=0, exclusive=True, reverse=True),
                           L.flip(x, [0, 1]), *L.unstack(x, axis=1), L.clip_by_norm(x, 1.0)])
    srt, ids, cs1, csflat, csx, fl, *cols = outs[:-1]
    np.testing.assert_array_equal(ids, np.argsort(-X, axis=1, kind="stable"))
    np.testing.assert_allclose(srt, -np.sort(-X, axis=1))
    np.testing.assert_allclose(cs1, np.cumsum(X, axis=1), rtol=1e-5)
    np.testing.assert_allclose(csflat, np.cumsum(X.reshape(-1)), rtol=1e-5, atol=1e-5)
    want = np.flip(np.cumsum(np.flip(X, 0), axis=0), 0) - X
    np.testing.assert_allclose(csx, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(fl, X[::-1, ::-1])
    assert len(cols) == 4
    for j, c in enumerate(cols):
        np.testing.assert_array_equal(c, X[:, j])
    np.testing.assert_allclose(outs[-1], X / max(np.linalg.norm(X), 1.0), rtol=1e-5)


def test_unstack_of_an_unknown_axis_needs_num():
    with pytest.raises(FluidityError, match="unstack: the size of axis 0 .* is unknown"):
        _run(lambda x: L.unstack(x, axis=0))
