"""The ops that cut the seq2seq example's cell API (issue 29) compiled: transpose2, squeeze2
and unsqueeze2 over several dims known only at run time, against the interpreter, for
batches of several sizes and lengths, and trained through their gradients."""
import numpy as np
import pytest

import fluidity as fluid

from compiled_runs import train_both
from test_arrays_compiled import build, segments

L = fluid.layers


def padded(batch, time, width=3, seed=0):
    r = np.random.default_rng(seed)
    return {"x": r.uniform(-1, 1, (batch, time, width)).astype("float32")}


def rearranged():
    """[batch, time, 3] (both run-time dims) -> time-major and back through squeeze2 and
    unsqueeze2, then an fc over the rearranged value and a loss that trains it."""
    x = L.data("x", [-1, -1, 3], dtype="float32", append_batch_size=False)
    x.stop_gradient = False
    t = L.transpose(x, [1, 0, 2])                        # [time, batch, 3]
    u = L.unsqueeze(t, [0, 3])                           # [1, time, batch, 1, 3]
    s = L.squeeze(u, [3, 0])                             # [time, batch, 3]
    h = L.fc(s, 4, num_flatten_dims=2, act="tanh")      # [time, batch, 4]
    back = L.transpose(h, [1, 0, 2])                     # [batch, time, 4]
    loss = L.mean(back * back)
    fluid.optimizer.SGD(0.5).minimize(loss)
    return [t, s, back, loss]


@pytest.mark.parametrize("shapes", [[(2, 5), (3, 2)], [(1, 1)], [(4, 7)]],
                         ids=["two batches", "one by one", "four by seven"])
def test_rearranging_ops_over_two_run_time_dims_compile_and_train(shapes, caplog):
    main, startup, fetch = build(rearranged)
    segs, python = segments(main)
    assert len(segs) == 1 and not python, python
    feeds = [padded(b, t, seed=k) for k, (b, t) in enumerate(shapes)]
    want, got = train_both(main, startup, fetch, feeds, caplog)
    for w_step, g_step in zip(want.outs, got.outs):
        for w, g in zip(w_step, g_step):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    for name, w in want.params.items():
        np.testing.assert_allclose(got.params[name], w, rtol=1e-5, atol=1e-6)


def test_squeezing_a_run_time_dim_still_runs_interpreted():
    """Whether a dim of unknown size is 1 is known only at run time: squeeze2 refuses."""
    def prog():
        x = L.data("x", [-1, -1, 3], dtype="float32", append_batch_size=False)
        return [L.squeeze(x, [1])]
    main, _, _ = build(prog)
    _, python = segments(main)
    assert [t for t, _ in python] == ["squeeze2"]
