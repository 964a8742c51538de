"""Fluid 1.x optimizers: the Adamax/DecayedAdagrad/Adadelta/Lamb/LarsMomentum/Dpsgd classes,
ModelAverage, ExponentialMovingAverage, RecomputeOptimizer and LookaheadOptimizer training
a small regression; minimize's Fluid arguments; the declined optimizers. (Their update ops
against numpy: tests/ops/test_optimizer_variants_ops.py, test_model_average_ops.py.)"""
import numpy as np
import pytest

import fluidity as fluid
from fluidity import layers, optimizer
from fluidity.errors import FluidityError


def _regression(make_opt, steps=30, extra=None, seed=0):
    """A seeded linear regression (data and initial weights alike, so a test's outcome does
    not depend on which tests ran before it) trained `steps` steps with `make_opt()`."""
    x = np.random.default_rng(seed).normal(size=(16, 3)).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5]]) + 0.3).astype(np.float32)
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed + 1
    with fluid.program_guard(main, startup):
        xv, yv = layers.data("x", [3]), layers.data("y", [1])
        pred = layers.fc(xv, 1)
        loss = layers.mean(layers.square_error_cost(pred, yv))
        opt = make_opt()
        opt.minimize(loss)
        helper = extra(main, startup) if extra else None
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    losses = [float(np.asarray(exe.run(main, feed={"x": x, "y": y}, fetch_list=[loss])[0])
                    .reshape(-1)[0]) for _ in range(steps)]
    return losses, exe, main, helper, (x, y, loss)


@pytest.mark.parametrize("make", [
    lambda: optimizer.Adamax(0.1),
    lambda: optimizer.DecayedAdagrad(0.1),
    lambda: optimizer.Adadelta(learning_rate=20.0, rho=0.9),
    lambda: optimizer.Lamb(0.05),
    lambda: optimizer.LarsMomentum(1.0, 0.9, lars_coeff=0.05),
    lambda: optimizer.Dpsgd(0.05, clip=10.0, batch_size=16.0, sigma=0.0),
    lambda: optimizer.RecomputeOptimizer(optimizer.SGD(0.1)),
    lambda: optimizer.LookaheadOptimizer(optimizer.SGD(0.1), alpha=0.5, k=3),
], ids=["adamax", "decayed_adagrad", "adadelta", "lamb", "lars", "dpsgd", "recompute",
        "lookahead"])
def test_fluid1_optimizers_train(make):
    def made():
        opt = make()
        if isinstance(opt, optimizer.RecomputeOptimizer):
            opt._set_checkpoints([])
        return opt
    losses, *_ = _regression(made)
    assert losses[-1] < 0.5 * losses[0], losses


def test_lookahead_syncs_fast_and_slow_every_k_steps():
    losses, exe, main, _, (x, y, loss) = _regression(
        lambda: optimizer.LookaheadOptimizer(optimizer.SGD(0.1), alpha=0.5, k=2), steps=2)
    scope = fluid.global_scope()
    params = [p.name for p in main.global_block().all_parameters()]
    # the fast weights restart at the slow ones as p + (slow - p) in float32, which equals
    # slow only up to rounding (the data, from the module's generator, varies with test order)
    for name in params:
        np.testing.assert_allclose(np.asarray(scope.find_var(name).value._array),
                                   np.asarray(scope.find_var(name + "@SLOW").value._array),
                                   rtol=1e-5, atol=1e-6)


def test_model_average_and_ema_swap_in_averages():
    def extras(main, startup):
        return (optimizer.ModelAverage(0.5, min_average_window=2, max_average_window=4),
                optimizer.ExponentialMovingAverage(0.9))
    _, exe, main, (avg, ema), (x, y, loss) = _regression(lambda: optimizer.SGD(0.05), 0,
                                                         extras)
    with fluid.program_guard(main):
        ema.update()
    scope = fluid.global_scope()
    w = next(p.name for p in main.global_block().all_parameters() if p.shape[0] == 3)
    seen = []
    for _ in range(6):
        exe.run(main, feed={"x": x, "y": y})
        seen.append(np.array(scope.find_var(w).value._array))
    trained = seen[-1].copy()
    with avg.apply(exe):
        averaged = np.array(scope.find_var(w).value._array)
    np.testing.assert_allclose(np.array(scope.find_var(w).value._array), trained)
    # windows: steps 1-2 closed (sum_3), steps 3-6 accumulating: mean of the last 4 + 2 ...
    assert not np.allclose(averaged, trained)
    lo, hi = np.min(seen, axis=0), np.max(seen, axis=0)
    assert ((averaged >= lo - 1e-6) & (averaged <= hi + 1e-6)).all()
    want, e, pw = 0, 0.0, 1.0
    for s in seen:
        e, pw = 0.9 * e + 0.1 * s, pw * 0.9
    with ema.apply(exe, need_restore=False):
        pass
    np.testing.assert_allclose(np.array(scope.find_var(w).value._array), e / (1 - pw),
                               rtol=1e-5)
    ema.restore(exe)
    np.testing.assert_allclose(np.array(scope.find_var(w).value._array), trained)


def test_minimize_takes_fluids_arguments_and_declines_dgc():
    losses, *_ = _regression(lambda: _ClipMin(optimizer.SGD(0.1)))
    assert losses[-1] < losses[0]
    with pytest.raises(NotImplementedError, match="DGCMomentumOptimizer"):
        optimizer.DGCMomentumOptimizer(0.1, 0.9, rampup_begin_step=0)
    with pytest.raises(NotImplementedError, match="PipelineOptimizer"):
        optimizer.PipelineOptimizer(optimizer.SGD(0.1))
    with pytest.raises(FluidityError, match="Adamax: beta1 must be a number"):
        optimizer.Adamax(0.1, beta1="x")


class _ClipMin:
    """minimize(loss, startup_program, parameter_list, no_grad_set, grad_clip) by keyword."""

    def __init__(self, opt):
        self.opt = opt

    def minimize(self, loss):
        ops, pg = self.opt.minimize(loss, startup_program=None, parameter_list=None,
                                    no_grad_set=None,
                                    grad_clip=fluid.clip.GradientClipByValue(1.0))
        assert any(op.type == "clip" for op in loss.block.ops)
        assert self.opt.get_opti_var_name_list()
        return ops, pg


def test_declined_optimizers_methods_say_why():
    for cls, methods in ((optimizer.DGCMomentumOptimizer,
                          ("apply_gradients", "apply_optimize", "backward", "minimize")),
                         (optimizer.PipelineOptimizer, ("minimize",))):
        for m in methods:
            with pytest.raises(NotImplementedError, match=f"{cls.__name__}.{m}"):
                getattr(cls, m)(None, None)


def test_adam_betas_given_as_variables_train_as_the_same_numbers():
    """Fluid 1.8's Adam takes beta1/beta2 as [1] Variables (op inputs Beta1Tensor,
    Beta2Tensor, read each step); their powers start at Fluid's defaults 0.9 / 0.999, so
    Variables holding those values train exactly as the numbers do."""
    def with_variables():
        b1 = layers.create_global_var([1], 0.9, "float32", persistable=True)
        b2 = layers.create_global_var([1], 0.999, "float32", persistable=True)
        return optimizer.Adam(0.1, beta1=b1, beta2=b2)
    by_number, *_ = _regression(lambda: optimizer.Adam(0.1), steps=5)
    by_var, _, main, _, _ = _regression(with_variables, steps=5)
    adam = [op for op in main.global_block().ops if op.type == "adam"][0]
    assert adam.input("Beta1Tensor") and adam.input("Beta2Tensor")
    np.testing.assert_allclose(by_var, by_number, rtol=1e-6)
    with pytest.raises(FluidityError, match="epsilon must be a number"):
        optimizer.Adam(0.1, epsilon="1e-8")


def test_a_variable_learning_rate_is_known_before_minimize():
    # Fluid 1.8 records a Variable learning rate at construction: PaddleCV's
    # image_classification reads _global_learning_rate() before minimize and fetches it
    import fluidity as fluid
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        lr = fluid.layers.cosine_decay(0.1, step_each_epoch=2, epochs=4)
        opt = fluid.optimizer.Momentum(learning_rate=lr, momentum=0.9)
        assert opt._global_learning_rate() is lr
        x = fluid.layers.data("x", [2])
        loss = fluid.layers.mean(fluid.layers.fc(x, 1))
        opt.minimize(loss)
        assert opt._global_learning_rate() is lr
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    import numpy as np
    got = [float(exe.run(main, feed={"x": np.ones((2, 2), np.float32)}, fetch_list=[lr])[0])
           for _ in range(3)]
    # epoch = floor(step / 2): steps 0, 1 in epoch 0, step 2 in epoch 1
    want = [0.1 * (np.cos(e * np.pi / 4) + 1) / 2 for e in (0, 0, 1)]
    np.testing.assert_allclose(got, want, rtol=1e-6)
