"""The update ops adamax, decayed_adagrad, adadelta, lamb, lars_momentum, dpsgd
(fluidity/ops/optimizer_variants.py) against numpy forms of their rules over several steps."""
import numpy as np

from test_optimizers import OneOp

rng = np.random.default_rng(4)
SHAPE = (4, 3)


def _steps(n=3):
    return [rng.normal(size=SHAPE) for _ in range(n)]


def _norm(a):
    return np.sqrt((a * a).sum())


def test_adamax_decayed_adagrad_adadelta():
    p0 = rng.normal(size=SHAPE)
    grads = _steps()
    lr = np.array([0.1])
    # adamax (Beta1Pow advanced by the test, as the optimizer's scale op does)
    op = OneOp("adamax", {"Param": p0, "Grad": grads[0], "LearningRate": lr,
                          "Moment": np.zeros(SHAPE), "InfNorm": np.zeros(SHAPE),
                          "Beta1Pow": np.array([0.9])}, {"beta1": 0.9, "beta2": 0.99})
    p, m, u, b1p = p0.copy(), np.zeros(SHAPE), np.zeros(SHAPE), 0.9
    for g in grads:
        op.run(Grad=g, Beta1Pow=np.array([b1p]))
        m = 0.9 * m + 0.1 * g
        u = np.maximum(0.99 * u + 1e-8, np.abs(g))
        p = p - 0.1 / (1 - b1p) * m / u
        b1p *= 0.9
    np.testing.assert_allclose(op["Param"], p, rtol=1e-5)
    # Beta1Pow = 1 (before any step): IEEE division as Fluid's kernel, an infinite step
    g = np.where(grads[0] == 0, 1.0, grads[0])
    op = OneOp("adamax", {"Param": p0, "Grad": g, "LearningRate": lr,
                          "Moment": np.zeros(SHAPE), "InfNorm": np.ones(SHAPE),
                          "Beta1Pow": np.array([1.0])}, {"beta1": 0.9, "beta2": 0.99})
    op.run()
    np.testing.assert_array_equal(op["Param"], -np.sign(g) * np.inf)
    # decayed_adagrad
    op = OneOp("decayed_adagrad", {"Param": p0, "Grad": grads[0], "Moment": np.zeros(SHAPE),
                                   "LearningRate": lr}, {"decay": 0.8, "epsilon": 1e-6})
    p, m = p0.copy(), np.zeros(SHAPE)
    for g in grads:
        op.run(Grad=g)
        m = 0.8 * m + 0.2 * g * g
        p = p - 0.1 * g / (np.sqrt(m) + 1e-6)
    np.testing.assert_allclose(op["Param"], p, rtol=1e-5)
    # adadelta
    op = OneOp("adadelta", {"Param": p0, "Grad": grads[0], "AvgSquaredGrad": np.zeros(SHAPE),
                            "AvgSquaredUpdate": np.zeros(SHAPE), "LearningRate": np.array([1.0])},
               {"rho": 0.9, "epsilon": 1e-6})
    p, g2, u2 = p0.copy(), np.zeros(SHAPE), np.zeros(SHAPE)
    for g in grads:
        op.run(Grad=g)
        g2 = 0.9 * g2 + 0.1 * g * g
        d = -np.sqrt((u2 + 1e-6) / (g2 + 1e-6)) * g
        u2 = 0.9 * u2 + 0.1 * d * d
        p = p + d
    np.testing.assert_allclose(op["Param"], p, rtol=1e-5)


def test_lamb_lars_dpsgd():
    p0 = rng.normal(size=SHAPE)
    grads = _steps()
    lr = np.array([0.05])
    op = OneOp("lamb", {"Param": p0, "Grad": grads[0], "LearningRate": lr,
                        "Moment1": np.zeros(SHAPE), "Moment2": np.zeros(SHAPE),
                        "Beta1Pow": np.array([0.9]), "Beta2Pow": np.array([0.999])},
               {"weight_decay": 0.01})
    p, m1, m2, b1p, b2p = p0.copy(), np.zeros(SHAPE), np.zeros(SHAPE), 0.9, 0.999
    for g in grads:
        op.run(Grad=g, Beta1Pow=np.array([b1p]), Beta2Pow=np.array([b2p]))
        m1 = 0.9 * m1 + 0.1 * g
        m2 = 0.999 * m2 + 0.001 * g * g
        r = m1 / (np.sqrt(m2) + 1e-6) + 0.01 * p    # Paddle 1.8: moments not bias-corrected
        p = p - 0.05 * _norm(p) / _norm(r) * r
        b1p, b2p = b1p * 0.9, b2p * 0.999
    np.testing.assert_allclose(op["Param"], p, rtol=1e-5)
    op = OneOp("lars_momentum", {"Param": p0, "Grad": grads[0], "Velocity": np.zeros(SHAPE),
                                 "LearningRate": lr},
               {"mu": 0.9, "lars_coeff": 0.01, "lars_weight_decay": 0.001})
    p, v = p0.copy(), np.zeros(SHAPE)
    for g in grads:
        op.run(Grad=g)
        local = 0.05 * 0.01 * _norm(p) / (_norm(g) + 0.001 * _norm(p))
        v = 0.9 * v + local * (g + 0.001 * p)
        p = p - v
    np.testing.assert_allclose(op["Param"], p, rtol=1e-5)
    g = grads[0] * 10
    op = OneOp("dpsgd", {"Param": p0, "Grad": g, "LearningRate": lr},
               {"clip": 1.0, "batch_size": 4.0, "sigma": 0.0})
    op.run()
    np.testing.assert_allclose(op["Param"], p0 - 0.05 * g / _norm(g), rtol=1e-5)
