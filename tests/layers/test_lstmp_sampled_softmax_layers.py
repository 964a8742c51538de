"""dynamic_lstmp and sampled_softmax_with_cross_entropy as Fluid programs use them: a
projected LSTM over LoD sequences trains; the sampled softmax with customized samples equals
softmax cross-entropy over those classes, and trains a classifier over many classes."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.core.tensor import LoDTensor

L = fluid.layers
rng = np.random.default_rng(21)


def test_dynamic_lstmp_trains():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        words = L.data("words", [1], dtype="int64", lod_level=1)
        emb = L.embedding(words, size=[20, 8])
        proj, cell = L.dynamic_lstmp(L.fc(emb, 4 * 6), size=4 * 6, proj_size=3,
                                     cell_clip=3.0, proj_clip=2.0)
        last = L.sequence_last_step(proj)
        loss = L.mean(L.square_error_cost(L.fc(last, 1), L.data("y", [1])))
        fluid.optimizer.Adam(0.05).minimize(loss)
        with pytest.raises(ValueError, match="bias_attr"):
            L.dynamic_lstmp(emb, 8, 2, bias_attr=False)
    ops = [op.type for op in main.global_block().ops]
    assert "lstmp" in ops and "lstmp_grad" in ops
    lens = [3, 1, 4]
    feed = {"words": LoDTensor(rng.integers(0, 20, (8, 1)), [np.cumsum([0] + lens).tolist()]),
            "y": np.array([[1.0], [-1.0], [0.5]], np.float32)}
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    losses = [float(exe.run(main, feed=feed, fetch_list=[loss])[0]) for _ in range(15)]
    assert losses[-1] < 0.5 * losses[0]
    p, c = exe.run(main, feed=feed, fetch_list=[proj, cell], return_numpy=False)
    assert np.asarray(p).shape == (8, 3) and np.asarray(c).shape == (8, 6)
    assert p.lod() == feed["words"].lod() and np.abs(np.asarray(p)).max() <= 2.0


def test_sampled_softmax_with_customized_samples_is_softmax_over_them():
    n, k, s = 4, 30, 5
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        logits = L.data("logits", [k])
        label = L.data("label", [1], dtype="int64")
        samples = L.data("samples", [1 + s], dtype="int64")
        probs = L.data("probs", [1 + s])
        loss = L.sampled_softmax_with_cross_entropy(
            logits, label, s, use_customized_samples=True, customized_samples=samples,
            customized_probabilities=probs)
    lg = rng.normal(size=(n, k)).astype(np.float32)
    lab = rng.integers(0, k, (n, 1))
    negs = np.array([rng.choice([c for c in range(k) if c != lab[i, 0]], s, replace=False)
                     for i in range(n)])
    smp = np.concatenate([lab, negs], 1)
    pr = rng.uniform(0.1, 0.9, (n, 1 + s)).astype(np.float32)
    (got,) = fluid.Executor(fluid.CPUPlace()).run(
        main, feed={"logits": lg, "label": lab, "samples": smp, "probs": pr},
        fetch_list=[loss])
    z = np.take_along_axis(lg, smp, 1) - np.log(pr)
    want = -(z[:, 0] - np.log(np.exp(z).sum(1)))
    np.testing.assert_allclose(np.asarray(got).reshape(-1), want, rtol=1e-5)


def test_sampled_softmax_trains_a_classifier():
    k = 50
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [8])
        label = L.data("label", [1], dtype="int64")
        logits = L.fc(x, k)
        loss = L.mean(L.sampled_softmax_with_cross_entropy(logits, label, num_samples=10,
                                                           seed=3))
        fluid.optimizer.SGD(0.5).minimize(loss)
    xs = rng.normal(size=(16, 8)).astype(np.float32)
    labels = rng.integers(0, k, (16, 1))
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    losses = [float(exe.run(main, feed={"x": xs, "label": labels}, fetch_list=[loss])[0])
              for _ in range(20)]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
