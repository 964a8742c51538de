"""Training programs as Fluid 1.8 users write them compile whole (issue 29: "whole programs
compiled"): a small fc net trained with each of Fluid 1.x's optimizers, and with each
gradient clip (GradientClipByGlobalNorm / ByNorm passed to the optimizer, or through
set_gradient_clip), is one native segment with no Python step, and trains as the
interpreter does."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.codegen.lower import Lowering

from compiled_runs import train_both

L = fluid.layers


def segments(main):
    """(the native segments of block 0, the ops that run as Python steps)."""
    rows = Lowering(main, 0).explain()
    return ({w for _, _, w, _ in rows if w != "python"},
            [(t, why) for _, t, w, why in rows if w == "python"])


def fc_net(make_optimizer, clip=None, set_clip=False):
    """x -> fc(8, relu) -> fc(1) -> mean squared error, minimized by make_optimizer()'s
    optimizer (given `clip` as grad_clip, or set with set_gradient_clip)."""
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 5           # both runs start from the same parameters
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = L.data("x", [4], dtype="float32")
        y = L.data("y", [1], dtype="float32")
        loss = L.mean(L.square_error_cost(L.fc(L.fc(x, 8, act="relu"), 1), y))
        if set_clip:
            fluid.clip.set_gradient_clip(clip)
            opt = make_optimizer()
        else:
            opt = make_optimizer(grad_clip=clip)
        opt.minimize(loss)
    return main, startup, loss


def feeds(steps=4):
    r = np.random.default_rng(0)
    return [{"x": r.uniform(-1, 1, (6, 4)).astype("float32"),
             "y": r.uniform(-1, 1, (6, 1)).astype("float32")} for _ in range(steps)]


def assert_trains_whole_as_interpreted(main, startup, loss, caplog):
    segs, python = segments(main)
    assert len(segs) == 1 and python == [], python
    want, got = train_both(main, startup, [loss], feeds(), caplog)
    for w, g in zip(want.outs, got.outs):
        np.testing.assert_allclose(g[0], w[0], rtol=1e-5, atol=1e-6)
    for name, w in want.params.items():
        np.testing.assert_allclose(got.params[name], w, rtol=1e-4, atol=1e-6, err_msg=name)


OPTIMIZERS = {
    "rmsprop": lambda **kw: fluid.optimizer.RMSProp(0.01, **kw),
    "rmsprop centered": lambda **kw: fluid.optimizer.RMSProp(0.01, momentum=0.9,
                                                             centered=True, **kw),
    "ftrl": lambda **kw: fluid.optimizer.Ftrl(0.1, l1=0.01, l2=0.01, **kw),
    "adamax": lambda **kw: fluid.optimizer.Adamax(0.01, **kw),
    "decayed_adagrad": lambda **kw: fluid.optimizer.DecayedAdagrad(0.1, **kw),
    "adadelta": lambda **kw: fluid.optimizer.Adadelta(1.0, **kw),
    "lamb": lambda **kw: fluid.optimizer.Lamb(0.01, **kw),
    "lars_momentum": lambda **kw: fluid.optimizer.LarsMomentum(0.1, 0.9, **kw),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_a_net_trained_with_each_optimizer_compiles_whole(name, caplog):
    assert_trains_whole_as_interpreted(*fc_net(OPTIMIZERS[name]), caplog)


CLIPS = {
    "global norm": lambda: fluid.clip.GradientClipByGlobalNorm(clip_norm=0.05),
    "norm": lambda: fluid.clip.GradientClipByNorm(clip_norm=0.05),
}


@pytest.mark.parametrize("set_clip", [False, True], ids=["grad_clip", "set_gradient_clip"])
@pytest.mark.parametrize("clip", sorted(CLIPS))
def test_a_net_trained_with_gradient_clipping_compiles_whole(clip, set_clip, caplog):
    main, startup, loss = fc_net(lambda **kw: fluid.optimizer.SGD(0.5, **kw), CLIPS[clip](),
                                 set_clip)
    types = {op.type for op in main.global_block().ops}
    assert {"global norm": "squared_l2_norm", "norm": "clip_by_norm"}[clip] in types
    assert_trains_whole_as_interpreted(main, startup, loss, caplog)
