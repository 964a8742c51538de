"""End to end: word2vec (skip-gram, negative sampling) and a bag-of-words text classifier,
trained by 2 Hogwild AsyncExecutor workers on small generated MultiSlot data, learn the
planted structure."""
import json
import os
import sys

import numpy as np
import pytest

import fluidity as fluid
from fluidity.datafeed import DataFeedDesc, MultiSlotReader
from fluidity.datafeed import generate_text as gt

from paths import EXAMPLES  # noqa: E402

sys.path.insert(0, EXAMPLES)
from textcls import build_textcls  # noqa: E402
from word2vec import build_word2vec  # noqa: E402


def test_word2vec_learns_the_planted_similarity(tmp_path):
    args = dict(vocab=300, clusters=15, groups=5, negatives=4, window=2)
    info = gt.generate_skipgram(str(tmp_path), 1500, files=4, seed=1, **args)
    with open(info["model"]) as f:
        model = json.load(f)
    desc = DataFeedDesc(info["desc"])
    desc.set_batch_size(128)
    pairs = gt.eval_word_pairs(model, 600, seed=2, corpus_tokens=info["tokens"], min_count=40)
    main, startup, test, v = build_word2vec(300, 16, 4, lr=0.05 * 128)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    before = gt.word_similarity(np.asarray(scope.find_var(v["emb"]).get_tensor()), *pairs)
    losses = []
    for _ in range(3):
        res = fluid.AsyncExecutor().run(main, desc, info["files"], 2, fetch=[v["loss"]],
                                        scope=scope, progress=False)
        assert len(res.workers) == 2 and res.examples == info["lines"]
        losses.append(res[0])
    after = gt.word_similarity(np.asarray(scope.find_var(v["emb"]).get_tensor()), *pairs)
    # random initial vectors: no similarity signal; trained ones: strong and ordered
    assert abs(before["spearman"]) < 0.15
    assert after["spearman"] > 0.6 and after["spearman"] > before["spearman"] + 0.5, after
    assert after["cos_same"] > after["cos_group"] > after["cos_diff"]
    assert losses[-1] < losses[0] < 4 * np.log(2) + np.log(2)  # below the untrained 5 log 2
    # the held-out loss (test program: no optimizer ops) is well below the untrained one
    batch = next(iter(MultiSlotReader(desc, info["files"][:1], batch_size=2000)))
    (loss,) = exe.run(test, feed=batch, fetch_list=[v["loss"]], scope=scope)
    assert float(np.asarray(loss).mean()) < 0.8 * 5 * np.log(2)


def test_text_classifier_learns_close_to_bayes(tmp_path):
    args = dict(vocab=800, classes=2, strength=1.0)
    train = gt.generate_textcls(str(tmp_path), 24000, files=4, seed=1, **args)
    test = gt.generate_textcls(str(tmp_path), 4000, files=1, seed=1, prefix="test", **args)
    desc = DataFeedDesc(train["desc"])
    desc.set_batch_size(64)
    main, startup, test_prog, v = build_textcls(800, 2, 8, lr=0.1, optimizer="adagrad")
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    for _ in range(2):
        res = fluid.AsyncExecutor().run(main, desc, train["files"], 2, fetch=[v["loss"]],
                                        scope=scope, progress=False)
    assert len(res.workers) == 2 and all(w["examples"] > 0 for w in res.workers)
    (batch,) = list(MultiSlotReader(desc, test["files"], batch_size=4000))
    (p,) = exe.run(test_prog, feed=batch, fetch_list=[v["predict"]], scope=scope)
    got = gt.classification_metrics(np.asarray(batch["label"]).reshape(-1), p)
    bayes = test["bayes"]
    assert got["accuracy"] > 0.7 and got["auc"] > 0.8, got  # chance: 0.5 and 0.5
    assert got["accuracy"] > bayes["accuracy"] - 0.05, (got, bayes)
    assert got["logloss"] < bayes["logloss"] + 0.1 < np.log(2)


@pytest.mark.parametrize("pool", ["average"])
def test_text_classifier_average_pooling_trains(tmp_path, pool):
    train = gt.generate_textcls(str(tmp_path), 6000, files=2, seed=2, vocab=300, strength=1.2)
    desc = DataFeedDesc(train["desc"])
    main, startup, test_prog, v = build_textcls(300, 2, 8, pool=pool, lr=0.1,
                                                optimizer="adagrad")
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    losses = []
    fluid.AsyncExecutor().run(main, desc, train["files"], 2, fetch=[v["loss"]], scope=scope,
                              progress=False,
                              callback=lambda n, f: losses.append(f[v["loss"].name]))
    assert np.mean(losses[-3:]) < np.log(2) - 0.1
