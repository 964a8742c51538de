"""The `relu_grad_into_gradient` fusion (codegen/fusion.py): a relu_grad that alone reads a
max pool2d_grad's X@GRAD, where the pool's X is the relu's Out, is applied by the
pool2d_grad as it writes (d * (the window's maximum > 0) at the maximum, 0 elsewhere); the
relu_grad is not emitted. It gives bit for bit the unfused compiled step's values (the same
float product) and the interpreter's; not fused where anything else reads the pool's
X@GRAD (a fetch)."""
import numpy as np
import pytest

from fusion_runs import fused_as_unfused, run_steps, unfused_as_interpreted

import fluidity as fluid

PASS = "relu_grad_into_gradient"


def _net(bn, fetch_dx=False):
    """conv 3x3 6 -> [batch_norm ->] relu -> max pool 2x2 -> fc 3 -> softmax xent -> mean,
    SGD; the pooled plane is 4 x 10 (a vector of 8 windows a row and 2 past it)."""
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 5
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        img = fluid.data("img", [None, 2, 8, 20], "float32")
        label = fluid.data("label", [None, 1], "int64")
        h = fluid.layers.conv2d(img, 6, 3, padding=1)
        if bn:
            h = fluid.layers.batch_norm(h)
        r = fluid.layers.relu(h)
        p = fluid.layers.pool2d(r, 2, pool_stride=2)
        logits = fluid.layers.fc(p, 3)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        fluid.optimizer.SGD(0.05).minimize(loss)
    fetch = [loss]
    if fetch_dx:
        fetch.append(main.global_block().var(r.name + "@GRAD"))
    return main, startup, fetch


def _ties(x):
    x[0, :, :4, :6] = 0.0           # equal windows after the conv: ties at the relu's 0


def _run(main, startup, fetch, compiled):
    return run_steps(main, startup, fetch, compiled, image=(2, 8, 20), edit=_ties)


@pytest.mark.parametrize("bn", [False, True])
def test_the_relu_grad_after_a_max_pool_grad_is_fused_and_changes_no_bit(bn, monkeypatch):
    main, startup, fetch = _net(bn)
    fused = fused_as_unfused(lambda compiled: _run(main, startup, fetch, compiled), PASS,
                             "relu_grad", monkeypatch)
    interp = _run(main, startup, fetch, False)
    for (got,), (want,) in zip(fused[0], interp[0]):    # batch_norm's sums: a few roundings
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_a_pool_gradient_read_elsewhere_is_not_fused():
    main, startup, fetch = _net(False, fetch_dx=True)
    unfused_as_interpreted(lambda compiled: _run(main, startup, fetch, compiled), PASS,
                           atol=1e-7)
