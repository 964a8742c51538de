"""The `relu_into_batch_norm` fusion (codegen/fusion.py): a relu that alone reads a
batch_norm's Y is applied by the batch_norm as it writes (Y never stored), in training
(batch statistics) and inference alike; not where anything else reads Y (a fetch, a second
op). The fused step gives bit for bit the unfused compiled step's values (the same
expressions, fmaxnp over the same floats), and the interpreter's within the float rounding
of batch_norm's statistics."""
import numpy as np
import pytest

from fusion_runs import fused_as_unfused, run_steps, unfused_as_interpreted

import fluidity as fluid

PASS = "relu_into_batch_norm"


def _net(train, fetch_y=False, second_reader=False, first="conv"):
    """conv 3x3 6 -> batch_norm -> relu -> pool -> fc 3 -> softmax xent -> mean (SGD when
    `train`); `first="fc"`: an fc of 6 first, batch_norm over [N, 6], no pool (an inference
    conv takes the batch_norm and relu into its own epilogue). `second_reader`: Y is also
    added to the relu's output."""
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 9
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        img = fluid.data("img", [None, 2, 6, 6], "float32")
        label = fluid.data("label", [None, 1], "int64")
        h = fluid.layers.conv2d(img, 6, 3, padding=1) if first == "conv" else \
            fluid.layers.fc(img, 6)
        y = fluid.layers.batch_norm(h, is_test=not train)
        r = fluid.layers.relu(y)
        if second_reader:
            r = fluid.layers.elementwise_add(r, y)
        h = fluid.layers.pool2d(r, 2, pool_stride=2) if first == "conv" else r
        logits = fluid.layers.fc(h, 3)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        if train:
            fluid.optimizer.SGD(0.05).minimize(loss)
    return main, startup, [loss] + ([y] if fetch_y else [])


@pytest.mark.parametrize("train, first", [(True, "conv"), (True, "fc"), (False, "fc")])
def test_the_relu_after_a_batch_norm_is_fused_and_changes_no_bit(train, first, monkeypatch):
    main, startup, fetch = _net(train, first=first)
    fused = fused_as_unfused(lambda compiled: run_steps(main, startup, fetch, compiled),
                             PASS, "relu", monkeypatch)
    interp = run_steps(main, startup, fetch, False)
    # batch statistics summed in double (compiled) vs numpy's float pairwise sums: the
    # loss agrees to a few float roundings of each step
    for got, want in zip(fused[0], interp[0]):
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5)


@pytest.mark.parametrize("case", ["fetch_y", "second_reader"])
def test_a_batch_norm_output_read_elsewhere_is_not_fused(case):
    main, startup, fetch = _net(True, **{case: True})
    unfused_as_interpreted(lambda compiled: run_steps(main, startup, fetch, compiled), PASS,
                           atol=1e-6)
