"""fluid.metrics: each metric's arithmetic on known values, reset/get_config, and the
Accuracy metric over batches of a real program's `layers.accuracy`."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity import layers, metrics


def test_precision_recall_and_composite():
    preds = np.array([[0.9], [0.2], [0.7], [0.6], [0.1]], "float32")
    labels = np.array([[1], [0], [0], [1], [1]], "int64")
    comp = metrics.CompositeMetric()
    p, r = metrics.Precision(), metrics.Recall()
    comp.add_metric(p)
    comp.add_metric(r)
    comp.update(preds, labels)
    # predicted 1: rows 0, 2, 3 -> tp 2, fp 1; actual 1: rows 0, 3, 4 -> tp 2, fn 1
    assert (p.tp, p.fp, r.tp, r.fn) == (2, 1, 2, 1)
    assert comp.eval() == [pytest.approx(2 / 3), pytest.approx(2 / 3)]
    p.update(np.array([0.0]), np.array([1]))          # no new positive prediction
    assert p.eval() == pytest.approx(2 / 3)
    p.reset()
    assert (p.tp, p.fp, p.eval()) == (0, 0, 0.0)
    assert p.get_config() == {"name": "Precision", "states": {"tp": 0, "fp": 0}}
    with pytest.raises(ValueError, match="SubMetric"):
        comp.add_metric(object())
    with pytest.raises(ValueError, match="numpy"):
        r.update([1, 0], labels)


def test_accuracy_chunk_and_edit_distance():
    acc = metrics.Accuracy("acc")
    assert str(acc) == "acc"
    with pytest.raises(ValueError, match="no data"):
        acc.eval()
    acc.update(value=0.5, weight=4)
    acc.update(value=np.array([1.0], "float32"), weight=2)
    assert float(acc.eval()) == pytest.approx((0.5 * 4 + 1.0 * 2) / 6)
    with pytest.raises(ValueError, match="'value'"):
        acc.update(value="high", weight=1)

    chunk = metrics.ChunkEvaluator()
    chunk.update(np.array([10]), np.array([8]), np.array([6]))
    chunk.update(5, 4, 3)
    precision, recall, f1 = chunk.eval()
    assert precision == pytest.approx(9 / 15) and recall == pytest.approx(9 / 12)
    assert f1 == pytest.approx(2 * precision * recall / (precision + recall))
    chunk.reset()
    assert chunk.eval() == (0.0, 0.0, 0.0)

    ed = metrics.EditDistance("ed")
    ed.update(np.array([[0.0], [2.0], [1.0]], "float32"), seq_num=3)
    ed.update(np.array([[0.0]], "float32"), seq_num=np.array([1]))
    avg, err = ed.eval()
    assert avg == pytest.approx(3 / 4) and err == pytest.approx(2 / 4)
    with pytest.raises(ValueError, match="no data"):
        metrics.EditDistance("e").eval()


def _exact_auc(p, labels):
    pos, neg = p[labels == 1], p[labels == 0]
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return wins / (len(pos) * len(neg))


def test_auc_matches_the_exact_area():
    rng = np.random.RandomState(3)
    labels = rng.randint(0, 2, size=400)
    p1 = np.clip(labels * 0.3 + rng.rand(400) * 0.7, 0, 1)
    preds = np.stack([1 - p1, p1], axis=1)
    auc = metrics.Auc("auc")
    auc.update(preds[:200], labels[:200])
    auc.update(preds[200:], labels[200:])
    assert auc.eval() == pytest.approx(_exact_auc(p1, labels), abs=2e-3)
    # the bucket counts are lists of num_thresholds + 1, as Fluid 1.8's
    assert isinstance(auc._stat_pos, list) and len(auc._stat_neg) == 4096
    assert sum(auc._stat_pos) == labels.sum() and sum(auc._stat_neg) == 400 - labels.sum()
    auc.reset()
    assert auc.eval() == 0.0
    with pytest.raises(ValueError, match=r"\[N, 2\]"):
        auc.update(p1, labels)


def test_accuracy_metric_over_a_programs_batches():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 5
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        x = layers.data("x", [4])
        label = layers.data("label", [1], dtype="int64")
        prob = layers.fc(x, 3, act="softmax")
        batch_acc = layers.accuracy(input=prob, label=label)
    rng = np.random.RandomState(0)
    acc = metrics.Accuracy()
    exe, scope = fluid.Executor(), fluid.Scope()
    correct = total = 0
    with fluid.scope_guard(scope):
        exe.run(startup)
        for n in (5, 7, 3):
            xs = rng.rand(n, 4).astype("float32")
            ys = rng.randint(0, 3, size=(n, 1)).astype("int64")
            a, p = exe.run(main, feed={"x": xs, "label": ys}, fetch_list=[batch_acc, prob])
            acc.update(value=a, weight=n)
            correct += int((p.argmax(1) == ys[:, 0]).sum())
            total += n
    assert float(acc.eval()) == pytest.approx(correct / total, rel=1e-6)
