"""Uniform, Normal, Categorical and MultivariateNormalDiag (Fluid 1.x layers): samples,
entropies, log-probabilities and KL divergences against closed forms."""
import math

import numpy as np

import fluidity as fluid
from layer_programs import run_built

L = fluid.layers


def _run(build, feed=None):
    return [np.asarray(o) for o in run_built(build, feed)]


def test_uniform_and_normal():
    lo, hi = np.array([0.0, 1.0], np.float32), np.array([2.0, 5.0], np.float32)
    mu, sd = np.array([0.5, -1.0], np.float32), np.array([1.0, 2.0], np.float32)
    val = np.array([1.0, 4.0], np.float32)

    def build():
        u, n = L.Uniform(lo, hi), L.Normal(mu, sd)
        n2 = L.Normal(0.0, 1.0)
        v = L.assign(val)
        return [u.sample([3000], seed=1), u.entropy(), u.log_prob(v), n.sample([3000], seed=2),
                n.entropy(), n.log_prob(v), n.kl_divergence(L.Normal([1.0, 0.0], [2.0, 1.0])),
                n2.sample([4]), L.Uniform(0.0, 2.0).sample([2, 3], seed=3),
                L.Normal(0.0, mu).sample([5], seed=4)]
    us, ue, ulp, ns, ne, nlp, kl, one, u23, nb = _run(build)
    assert us.shape == (3000, 2) and (us >= lo).all() and (us < hi).all()
    np.testing.assert_allclose(us.mean(0), (lo + hi) / 2, atol=0.1)
    np.testing.assert_allclose(ue, np.log(hi - lo), rtol=1e-6)
    np.testing.assert_allclose(ulp, -np.log(hi - lo), rtol=1e-6)
    np.testing.assert_allclose(ns.mean(0), mu, atol=0.15)
    np.testing.assert_allclose(ns.std(0), sd, rtol=0.1)
    np.testing.assert_allclose(ne, 0.5 + 0.5 * math.log(2 * math.pi) + np.log(sd), rtol=1e-5)
    want = -((val - mu) ** 2) / (2 * sd ** 2) - np.log(sd) - 0.5 * math.log(2 * math.pi)
    np.testing.assert_allclose(nlp, want, rtol=1e-5)
    s2, m2 = np.array([2.0, 1.0]), np.array([1.0, 0.0])
    want = np.log(s2 / sd) + (sd ** 2 + (mu - m2) ** 2) / (2 * s2 ** 2) - 0.5
    np.testing.assert_allclose(kl, want, rtol=1e-5)
    # Fluid 1.8: two Python floats give a sample of `shape` (their [1] batch shape is
    # reshaped away); any array argument keeps the batch shape
    assert one.shape == (4,) and u23.shape == (2, 3) and nb.shape == (5, 2)
    assert ((u23 >= 0) & (u23 < 2)).all()


def test_categorical_and_multivariate_normal_diag():
    a = np.array([[1.0, 2.0, 0.5]], np.float32)
    b = np.array([[0.0, 0.0, 1.0]], np.float32)
    pa, pb = np.exp(a) / np.exp(a).sum(), np.exp(b) / np.exp(b).sum()
    s1 = np.diag([1.0, 2.0]).astype(np.float32)
    s2 = np.diag([2.0, 0.5]).astype(np.float32)
    m1, m2 = np.array([0.0, 1.0], np.float32), np.array([1.0, -1.0], np.float32)

    def build():
        ca, cb = L.Categorical(a), L.Categorical(b)
        g1, g2 = L.MultivariateNormalDiag(m1, s1), L.MultivariateNormalDiag(m2, s2)
        return [ca.entropy(), ca.kl_divergence(cb), g1.entropy(), g1.kl_divergence(g2)]
    ent, kl, gent, gkl = _run(build)
    np.testing.assert_allclose(ent.reshape(-1), [-(pa * np.log(pa)).sum()], rtol=1e-5)
    np.testing.assert_allclose(kl.reshape(-1), [(pa * np.log(pa / pb)).sum()], rtol=1e-5)
    np.testing.assert_allclose(gent.reshape(-1)[0],
                               0.5 * (2 * (1 + math.log(2 * math.pi)) + math.log(2.0)), rtol=1e-5)
    inv2 = np.linalg.inv(s2)
    d = m2 - m1
    want = 0.5 * (np.trace(inv2 @ s1) + d @ inv2 @ d - 2 +
                  math.log(np.linalg.det(s2) / np.linalg.det(s1)))
    np.testing.assert_allclose(gkl.reshape(-1)[0], want, rtol=1e-5)


def test_methods_fluid_does_not_define_raise_as_in_fluid():
    import pytest
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        u = L.Uniform([0.0], [1.0])
        c = L.Categorical(np.array([0.1, 0.2], np.float32))
        m = L.MultivariateNormalDiag(np.array([0.3, 0.5], np.float32),
                                     np.array([[0.4, 0], [0, 0.5]], np.float32))
        v = L.assign(np.array([0.5], np.float32))
        for call, what in ((lambda: u.kl_divergence(u), "Uniform.kl_divergence"),
                           (lambda: c.sample(), "Categorical.sample"),
                           (lambda: c.log_prob(v), "Categorical.log_prob"),
                           (lambda: m.sample(), "MultivariateNormalDiag.sample"),
                           (lambda: m.log_prob(v), "MultivariateNormalDiag.log_prob")):
            with pytest.raises(NotImplementedError, match=what):
                call()


def test_argument_types_fluid_refuses_raise_type_error():
    import pytest
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        n, u = L.Normal(0.0, 1.0), L.Uniform(0.0, 1.0)
        for call, what in ((lambda: L.Normal(1, 1.0), "'loc' must be a float"),
                           (lambda: L.Uniform(1.0, 2), "'high' must be a float"),
                           (lambda: L.Categorical(1.0), "'logits' must be a list"),
                           (lambda: L.MultivariateNormalDiag(1.0, [1.0]), "'loc' must be a list"),
                           (lambda: n.log_prob([1.0]), "'value' must be a Variable"),
                           (lambda: u.sample(1.0), "'shape' must be a list"),
                           (lambda: n.sample([2], 1.0), "'seed' must be an int"),
                           (lambda: n.kl_divergence(u), "other must be a Normal")):
            with pytest.raises(TypeError, match=what):
                call()
