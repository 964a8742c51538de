"""Whole training steps compiled: the MLP with each optimizer trains as the interpreter does
(20 steps; losses and parameters within float rounding: BLAS blocking, exp/log and the fused
sgd's gemm may round differently), and so does the MLP with fused fc ops."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.codegen.lower import Lowering
from fluidity.transpiler.fuse import fuse_fc

OPTIMIZERS = {
    "sgd": lambda: fluid.optimizer.SGD(0.1),
    "momentum": lambda: fluid.optimizer.Momentum(0.05, momentum=0.9, use_nesterov=True),
    "adam": lambda: fluid.optimizer.Adam(0.01),
    "adagrad": lambda: fluid.optimizer.Adagrad(0.1),
}


def _mlp(optimizer, fused=False):
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 11
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [20])
        label = fluid.layers.data("label", [1], dtype="int64")
        h = fluid.layers.fc(x, 32, act="relu")
        h = fluid.layers.fc(h, 16, act="sigmoid")
        logits = fluid.layers.fc(h, 4)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        if fused:
            fuse_fc(main)
        OPTIMIZERS[optimizer]().minimize(loss)
    return main, startup, loss


def _train(main, startup, loss, compiled, steps=20):
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    prog = fluid.CompiledProgram(main).with_native_code() if compiled else main
    r = np.random.default_rng(0)
    losses = []
    for _ in range(steps):
        n = int(r.integers(1, 9))
        feed = {"x": r.normal(size=(n, 20)).astype("float32"),
                "label": r.integers(0, 4, (n, 1)).astype("int64")}
        losses.append(float(exe.run(prog, feed=feed, fetch_list=[loss], scope=scope)[0]))
    params = {p.name: np.array(scope.find_var(p.name).get_tensor())
              for p in main.all_parameters()}
    return np.array(losses), params


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_a_compiled_training_step_trains_as_the_interpreter(optimizer, fused):
    main, startup, loss = _mlp(optimizer, fused)
    rows = Lowering(main, 0).explain()
    assert {w for _, _, w, _ in rows} == {"segment 0"}, "the whole step is one native call"
    want_l, want_p = _train(main, startup, loss, False)
    got_l, got_p = _train(main, startup, loss, True)
    np.testing.assert_allclose(got_l, want_l, rtol=1e-5, atol=1e-6)
    for name in want_p:
        np.testing.assert_allclose(got_p[name], want_p[name], rtol=1e-4, atol=1e-6,
                                   err_msg=name)
