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


def masked_mean():
    """The cell API's masked loss: sequence_mask(len, maxlen=shape(x)[1]) over a padded
    batch, and a mask as wide as a fill_constant says."""
    x = L.data("x", [-1, -1, 3], dtype="float32", append_batch_size=False)
    n = L.data("n", [-1], dtype="int64", append_batch_size=False)
    mask = L.sequence_mask(n, maxlen=L.shape(x)[1], dtype="float32")
    wide = L.sequence_mask(n, maxlen=L.fill_constant([1], "int32", 4), dtype="int64")
    loss = L.reduce_sum(L.reduce_sum(x, dim=2) * mask) / L.reduce_sum(mask)
    return [mask, wide, loss]


@pytest.mark.parametrize("lengths,time", [([3, 0, 5, 1], 5), ([2], 7), ([9, 2], 4)],
                         ids=["ragged", "one shorter than the batch", "longer than maxlen"])
def test_sequence_mask_with_its_maxlen_from_a_shape_compiles(lengths, time, caplog):
    main, startup, fetch = build(masked_mean)
    segs, python = segments(main)
    assert len(segs) == 1 and not python, python
    feed = {**padded(len(lengths), time), "n": np.array(lengths, "int64")}
    want, got = train_both(main, startup, fetch, [feed], caplog)
    for w, g in zip(want.outs[0], got.outs[0]):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-6)


@pytest.mark.parametrize("how", ["X's values", "a fed tensor"])
def test_sequence_mask_sized_by_data_runs_interpreted(how):
    def prog():
        n = L.data("n", [-1], dtype="int64", append_batch_size=False)
        m = L.data("m", [1], dtype="int32", append_batch_size=False)
        return [L.sequence_mask(n, maxlen=None if how == "X's values" else m)]
    main, _, _ = build(prog)
    _, python = segments(main)
    assert [t for t, _ in python] == ["sequence_mask"]
    why = python[0][1]
    assert ("X's values" in why) if how == "X's values" else ("only at run time" in why)
