"""proximal_gd and proximal_adagrad (fluidity/ops/proximal.py) against the closed form of
the proximal step, worked elementwise."""
import numpy as np
import pytest

from op_test import run_op

rng = np.random.default_rng(8)


def prox(v, lr, l1, l2):
    out = np.empty_like(v)
    for i, a in np.ndenumerate(v):
        shrunk = max(abs(a) - lr * l1, 0.0) if l1 > 0 else abs(a)
        out[i] = np.sign(a) * shrunk / (1 + lr * l2)
    return out


@pytest.mark.parametrize("l1,l2", [(0.3, 0.2), (0.0, 0.5)])
def test_proximal_gd(l1, l2):
    w, g = rng.uniform(-1, 1, (3, 4)), rng.uniform(-1, 1, (3, 4))
    lr = np.array([0.5])
    got = run_op("proximal_gd", {"Param": w.copy(), "Grad": g, "LearningRate": lr},
                 {"l1": l1, "l2": l2})
    np.testing.assert_allclose(got["ParamOut"], prox(w - 0.5 * g, 0.5, l1, l2), rtol=1e-6)


def test_proximal_adagrad():
    w, g, m = rng.uniform(-1, 1, (3, 4)), rng.uniform(-1, 1, (3, 4)), rng.uniform(0, 1, (3, 4))
    lr = np.array([0.5])
    got = run_op("proximal_adagrad", {"Param": w.copy(), "Moment": m.copy(), "Grad": g,
                                      "LearningRate": lr}, {"l1": 0.1, "l2": 0.2})
    m2 = m + g * g
    np.testing.assert_allclose(got["MomentOut"], m2, rtol=1e-6)
    np.testing.assert_allclose(got["ParamOut"], prox(w - 0.5 * g / np.sqrt(m2), 0.5, 0.1, 0.2),
                               rtol=1e-6)
