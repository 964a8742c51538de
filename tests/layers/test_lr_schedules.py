"""Learning-rate schedules: the value over runs against numpy formulas, the shared step
counter, and use with an optimizer."""
import math

import numpy as np
import pytest

import fluidity as fluid
from fluidity import layers, optimizer
from fluidity.errors import FluidityError
from fluidity.framework import OpRole
from fluidity.layers import learning_rate_scheduler as lrs

STEPS = 12


def run_schedule(build, steps=STEPS):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        lr = build()
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    vals = [float(exe.run(main, fetch_list=[lr], scope=scope)[0][0]) for _ in range(steps)]
    return np.array(vals), main


t = np.arange(STEPS, dtype=np.float64)
CASES = {
    "exponential": (lambda: layers.exponential_decay(0.5, 3, 0.7),
                    0.5 * 0.7 ** (t / 3)),
    "exponential_staircase": (lambda: layers.exponential_decay(0.5, 3, 0.7, staircase=True),
                              0.5 * 0.7 ** np.floor(t / 3)),
    "natural_exp": (lambda: layers.natural_exp_decay(0.5, 4, 0.3),
                    0.5 * np.exp(-0.3 * t / 4)),
    "natural_exp_staircase": (lambda: layers.natural_exp_decay(0.5, 4, 0.3, True),
                              0.5 * np.exp(-0.3 * np.floor(t / 4))),
    "inverse_time": (lambda: layers.inverse_time_decay(0.5, 2, 0.5),
                     0.5 / (1 + 0.5 * t / 2)),
    "inverse_time_staircase": (lambda: layers.inverse_time_decay(0.5, 2, 0.5, True),
                               0.5 / (1 + 0.5 * np.floor(t / 2))),
    "polynomial": (lambda: layers.polynomial_decay(0.5, 8, 0.01, power=2.0),
                   (0.5 - 0.01) * (1 - np.minimum(t, 8) / 8) ** 2 + 0.01),
    "polynomial_cycle": (lambda: layers.polynomial_decay(0.5, 5, 0.01, power=1.5, cycle=True),
                         (0.5 - 0.01) * (1 - t / (5 * np.maximum(1, np.ceil(t / 5)))) ** 1.5
                         + 0.01),
    "piecewise": (lambda: layers.piecewise_decay([3, 7], [1.0, 0.5, 0.1]),
                  np.where(t < 3, 1.0, np.where(t < 7, 0.5, 0.1))),
    "cosine": (lambda: layers.cosine_decay(0.5, 3, 4),
               0.5 * 0.5 * (np.cos(np.floor(t / 3) * math.pi / 4) + 1)),
    "warmup": (lambda: layers.linear_lr_warmup(0.5, 5, 0.1, 0.4),
               np.where(t < 5, 0.1 + (0.4 - 0.1) * t / 5, 0.5)),
    "warmup_of_schedule": (lambda: layers.linear_lr_warmup(
        layers.exponential_decay(0.5, 2, 0.5), 4, 0.0, 0.5),
        np.where(t < 4, 0.5 * t / 4, 0.5 * 0.5 ** (t / 2))),
    "noam": (lambda: layers.noam_decay(64, 4, learning_rate=2.0),
             2.0 * 64 ** -0.5 * np.minimum((t + 1) ** -0.5, (t + 1) * 4 ** -1.5)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_schedule_values(name):
    build, want = CASES[name]
    got, main = run_schedule(build)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    block = main.global_block()
    counter = block.var(lrs.LR_DECAY_COUNTER)
    assert counter.persistable
    assert block.ops[0].type == "increment" and [op.type for op in block.ops].count(
        "increment") == 1
    assert all(op.attr("op_role") == OpRole.LRSched for op in block.ops)


def test_schedules_share_one_counter():
    def build():
        a = layers.exponential_decay(1.0, 1, 0.5)
        b = layers.piecewise_decay([2], [1.0, 0.0])
        return layers.elementwise_add(a, b)
    got, main = run_schedule(build, 5)
    s = np.arange(5)
    np.testing.assert_allclose(got, 0.5 ** s + (s < 2), rtol=1e-6)


def test_counter_persists_in_scope_and_restarts_with_startup():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        lr = layers.piecewise_decay([2], [1.0, 0.1])
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    vals = [float(exe.run(main, fetch_list=[lr], scope=scope)[0][0]) for _ in range(3)]
    assert vals == pytest.approx([1.0, 1.0, 0.1])
    assert int(np.array(scope.find_var(lrs.LR_DECAY_COUNTER).value)[0]) == 2
    exe.run(startup, scope=scope)
    assert float(exe.run(main, fetch_list=[lr], scope=scope)[0][0]) == pytest.approx(1.0)


def test_schedule_drives_sgd():
    """SGD with piecewise lr on loss = mean(w): w drops by the scheduled lr each step."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = layers.data("x", [1])
        pred = layers.fc(x, 1, bias_attr=False, param_attr=fluid.ParamAttr(
            name="w", initializer=fluid.initializer.Constant(1.0)))
        lr = layers.piecewise_decay([2], [0.5, 0.1])
        optimizer.SGD(lr).minimize(layers.mean(pred))
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    ws = []
    for _ in range(4):
        exe.run(main, feed={"x": np.ones((2, 1), np.float32)}, scope=scope)
        ws.append(float(np.array(scope.find_var("w").value)[0, 0]))
    np.testing.assert_allclose(ws, [0.5, 0.0, -0.1, -0.2], atol=1e-6)


def test_bad_arguments():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        with pytest.raises(FluidityError, match="len\\(values\\) == len\\(boundaries\\) \\+ 1"):
            layers.piecewise_decay([1, 2], [1.0, 0.5])
        with pytest.raises(FluidityError, match="decay_steps must be a number"):
            layers.exponential_decay(0.1, "10", 0.5)
        with pytest.raises(FluidityError, match="learning_rate must be a number"):
            layers.noam_decay(64, 10, learning_rate=None)
