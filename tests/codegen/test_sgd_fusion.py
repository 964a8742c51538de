"""The `sgd_into_gradient` fusion (codegen/fusion.py): a plain SGD update of a weight is
applied by the mul_grad that makes its gradient (the gradient never stored), and only where
that is safe: not for a shared parameter (its gradient is a sum of two), a fetched gradient,
a clipped or regularized one (other ops read it), nor under Momentum or Adam (no sgd). In
every case the compiled step trains as the interpreter does (3 steps; float rounding:
the fused batch>1 update is one gemm accumulating into W, so its rounding differs from
dW's gemm followed by W - lr * dW by a few ulp of W)."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.codegen.lower import Lowering

from compiled_runs import train_both

FUSED = "(sgd_into_gradient)"


def _net(case):
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 7
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [5])
        label = fluid.layers.data("label", [1], dtype="int64")
        if case == "shared":       # one weight used by two layers: its gradient is a sum
            attr = fluid.ParamAttr(name="shared_w")
            h = fluid.layers.fc(x, 5, act="relu", param_attr=attr)
            h = fluid.layers.fc(h, 5, act="relu", param_attr=attr)
        else:
            h = fluid.layers.fc(x, 6, act="relu")
        logits = fluid.layers.fc(h, 3)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        opt = {"clip": lambda: fluid.optimizer.SGD(
                   0.1, grad_clip=fluid.clip.GradientClipByGlobalNorm(0.5)),
               "regularized": lambda: fluid.optimizer.SGD(
                   0.1, regularization=fluid.regularizer.L2Decay(0.01)),
               "momentum": lambda: fluid.optimizer.Momentum(0.1, momentum=0.9),
               "adam": lambda: fluid.optimizer.Adam(0.01)}.get(
                   case, lambda: fluid.optimizer.SGD(0.1))()
        opt.minimize(loss)
    weights = [p.name for p in main.all_parameters() if p.name.endswith(".w_0")
               or p.name == "shared_w"]
    fetch = [loss] + ([weights[0] + "@GRAD"] if case == "fetched" else [])
    return main, startup, fetch, weights


def _fused_updates(main, fetch):
    """{Param of each sgd op: whether explain() shows it fused}."""
    names = [f if isinstance(f, str) else f.name for f in fetch]
    rows = Lowering(main, 0, keep=names).explain()
    ops = main.global_block().ops
    return {ops[i].input("Param")[0]: FUSED in why for i, t, _, why in rows if t == "sgd"}


def _feeds():
    """Three steps: batch 1 (the rank-1 update) and larger."""
    r = np.random.default_rng(1)
    return [{"x": r.normal(size=(n, 5)).astype("float32"),
             "label": r.integers(0, 3, (n, 1)).astype("int64")} for n in (1, 4, 3)]


@pytest.mark.parametrize("case, fused", [
    ("sgd", True), ("shared", False), ("fetched", False), ("clip", False),
    ("regularized", False), ("momentum", None), ("adam", None)])
def test_the_update_is_fused_only_where_safe_and_trains_as_the_interpreter(case, fused):
    main, startup, fetch, weights = _net(case)
    got = _fused_updates(main, fetch)
    if fused is None:
        assert got == {}                  # no sgd op at all
    elif case in ("fetched", "shared"):   # that weight's update only; the others fused
        unsafe = "shared_w" if case == "shared" else weights[0]
        assert {w: got[w] for w in weights} == {w: w != unsafe for w in weights}
    else:
        assert all(got[w] is fused for w in weights), got
        assert not any(v for p, v in got.items() if p not in weights)   # biases: not gemms
    (want_out, want_p), (got_out, got_p) = train_both(main, startup, fetch, _feeds())
    for a, b in zip(got_out, want_out):
        for u, v in zip(a, b):
            np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6)
    for name, want in want_p.items():
        np.testing.assert_allclose(got_p[name], want, rtol=1e-5, atol=1e-6, err_msg=name)
