"""fluidity.datafeed.generate_text: synthetic skip-gram corpora and labelled documents from known
models — deterministic, readable by MultiSlotReader, with the planted structure recoverable."""
import json
import os

import numpy as np
import pytest

from fluidity.datafeed import DataFeedDesc, MultiSlotReader
from fluidity.datafeed import generate_text as gt

SMALL_W2V = dict(vocab=400, clusters=20, groups=5, negatives=4, window=2)
SMALL_CLS = dict(vocab=600, classes=2, strength=1.0)


def _lines(paths):
    out = []
    for p in paths:
        with open(p) as f:
            out += f.read().splitlines()
    return out


@pytest.fixture(scope="module")
def w2v(tmp_path_factory):
    d = tmp_path_factory.mktemp("w2v")
    info = gt.generate_skipgram(str(d), 3000, files=3, seed=5, **SMALL_W2V)
    with open(info["model"]) as f:
        info["m"] = json.load(f)
    return info


@pytest.fixture(scope="module")
def cls(tmp_path_factory):
    d = tmp_path_factory.mktemp("cls")
    info = gt.generate_textcls(str(d), 30000, files=2, seed=5, **SMALL_CLS)
    with open(info["model"]) as f:
        info["m"] = json.load(f)
    return info


# --- skip-gram corpus ----------------------------------------------------------------------------
def test_skipgram_is_deterministic_and_independent_of_files(w2v, tmp_path):
    again = gt.generate_skipgram(str(tmp_path / "a"), 3000, files=3, seed=5, **SMALL_W2V)
    assert _lines(again["files"]) == _lines(w2v["files"])
    one = gt.generate_skipgram(str(tmp_path / "b"), 3000, files=1, seed=5, **SMALL_W2V)
    assert sorted(_lines(one["files"])) == sorted(_lines(w2v["files"]))
    assert one["lines"] == w2v["lines"] == len(_lines(one["files"]))
    other = gt.generate_skipgram(str(tmp_path / "c"), 3000, files=1, seed=6, **SMALL_W2V)
    assert _lines(other["files"]) != _lines(one["files"])
    test = gt.generate_skipgram(str(tmp_path / "b"), 300, files=1, seed=5, prefix="test",
                                **SMALL_W2V)
    assert not set(_lines(test["files"])) >= set(_lines(one["files"])[:50])


def test_skipgram_files_parse_with_multislot_reader(w2v):
    desc = DataFeedDesc(w2v["desc"])
    k1 = 1 + SMALL_W2V["negatives"]
    n = 0
    for batch in MultiSlotReader(desc, w2v["files"], batch_size=1000):
        c, x = np.asarray(batch["center"]), np.asarray(batch["context"])
        assert c.dtype == np.int64 and c.shape[1] == 1 and x.shape == (len(c), k1)
        assert c.min() >= 0 and c.max() < SMALL_W2V["vocab"] and x.max() < SMALL_W2V["vocab"]
        n += len(c)
    assert n == w2v["lines"]
    # every token has 1..2*window contexts
    assert 2 * w2v["tokens"] <= n * 1.0 <= 4 * w2v["tokens"]


def test_skipgram_positives_share_clusters_negatives_do_not(w2v):
    m = w2v["m"]
    rows = np.array([list(map(int, ln.split())) for ln in _lines(w2v["files"])])
    center, pos, neg = rows[:, 1], rows[:, 3], rows[:, 4:]
    c = gt.cluster_of(m)
    same_pos = np.mean(c[center] == c[pos])
    same_neg = np.mean(c[center][:, None] == c[neg])
    # two words of a sentence come from the topic cluster together with prob ~ 0.6^2;
    # negatives are drawn independently of the center: ~ 1/clusters
    assert same_pos > 0.35 and same_neg < 0.1, (same_pos, same_neg)
    assert np.mean(gt.planted_similarity(m, center, pos) == 1) > \
        2 * np.mean(gt.planted_similarity(m, center[:, None], neg) == 1)


def test_negatives_follow_unigram_075(w2v):
    m = w2v["m"]
    neg = np.array([list(map(int, ln.split()))[4:] for ln in _lines(w2v["files"])]).ravel()
    want = gt.negative_distribution(m)
    got = np.bincount(neg, minlength=m["vocab"]) / len(neg)
    top = np.argsort(-want)[:20]
    np.testing.assert_allclose(got[top], want[top], rtol=0.1)
    assert want.sum() == pytest.approx(1.0)


def test_word_marginals_match_the_drawn_corpus():
    m = gt.make_skipgram_model(3, **SMALL_W2V)
    words, offs, topics = gt.draw_sentences(m, np.random.default_rng(0), 20000)
    assert offs[-1] == len(words) and len(topics) == 20000
    lens = np.diff(offs)
    assert lens.min() >= m["min_len"] and lens.max() <= m["max_len"]
    got = np.bincount(words, minlength=m["vocab"]) / len(words)
    want = gt.word_marginals(m)
    top = np.argsort(-want)[:30]
    np.testing.assert_allclose(got[top], want[top], rtol=0.08)
    # a sentence's words come from its topic cluster with probability topic_prob
    c = gt.cluster_of(m)
    from_topic = np.mean(c[words] == np.repeat(topics, lens))
    noise_hits = (1 - m["topic_prob"] - m["group_prob"]) / m["clusters"]
    assert from_topic == pytest.approx(m["topic_prob"] + noise_hits, abs=0.01)


def test_model_rejects_bad_parameters():
    with pytest.raises(ValueError, match="multiple"):
        gt.make_skipgram_model(0, clusters=10, groups=3)
    with pytest.raises(ValueError):
        gt.make_skipgram_model(0, topic_prob=0.9, group_prob=0.2)
    with pytest.raises(ValueError):
        gt.make_textcls_model(0, classes=1)


def test_eval_pairs_and_similarity_scores(w2v):
    m = w2v["m"]
    a, b, level = gt.eval_word_pairs(m, 900, seed=1, top=200)
    p = gt.word_marginals(m)
    frequent = np.argsort(-p)[:200]
    assert len(a) == 900 and np.all(a != b) and np.isin(a, frequent).all() \
        and np.isin(b, frequent).all()
    assert np.array_equal(level, gt.planted_similarity(m, a, b))
    assert [np.sum(level == lv) for lv in (2, 1, 0)] == [300, 300, 300]
    a2, b2, _ = gt.eval_word_pairs(m, 900, seed=1, top=200)
    assert np.array_equal(a, a2) and np.array_equal(b, b2)
    # "oracle" vectors built from the planted structure score near the maximum; random ones ~0
    rng = np.random.default_rng(0)
    cvec = rng.standard_normal((m["clusters"], 32))
    gvec = rng.standard_normal((m["groups"], 32))
    oracle = 2 * cvec[gt.cluster_of(m)] + 1.5 * gvec[gt.group_of(m)]
    good = gt.word_similarity(oracle, a, b, level)
    bad = gt.word_similarity(rng.standard_normal((m["vocab"], 32)), a, b, level)
    assert good["spearman"] > 0.85 and good["separation"] > 0.7
    assert good["cos_same"] > good["cos_group"] > good["cos_diff"]
    assert abs(bad["spearman"]) < 0.1 and abs(bad["separation"]) < 0.1
    # frequent words only, when a corpus size is given
    a3, b3, _ = gt.eval_word_pairs(m, 300, corpus_tokens=w2v["tokens"], min_count=50)
    assert np.all(p[a3] * w2v["tokens"] >= 50) and np.all(p[b3] * w2v["tokens"] >= 50)


def test_spearman_and_ranks_match_scipy():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(1)
    x = rng.integers(0, 5, 200).astype(float)
    y = x + rng.standard_normal(200)
    assert gt.spearman(y, x) == pytest.approx(stats.spearmanr(y, x)[0])
    np.testing.assert_allclose(gt.rank_data(x), stats.rankdata(x))


def test_grouped_sampler_draws_by_weight():
    groups = np.array([0, 1, 0, 1, 1, 2])
    w = np.array([1.0, 1.0, 3.0, 2.0, 1.0, 5.0])
    s = gt._GroupedSampler(groups, w)
    rng = np.random.default_rng(0)
    g = rng.integers(0, 3, 60000)
    got = s.draw(rng, g)
    assert np.all(groups[got] == g)
    for grp in range(3):
        sel = got[g == grp]
        freq = np.bincount(sel, minlength=6)[groups == grp] / len(sel)
        want = w[groups == grp] / w[groups == grp].sum()
        np.testing.assert_allclose(freq, want, atol=0.015)


# --- labelled documents --------------------------------------------------------------------------
def test_textcls_is_deterministic_and_independent_of_files(cls, tmp_path):
    again = gt.generate_textcls(str(tmp_path / "a"), 30000, files=2, seed=5, **SMALL_CLS)
    assert _lines(again["files"]) == _lines(cls["files"])
    one = gt.generate_textcls(str(tmp_path / "b"), 30000, files=1, seed=5, **SMALL_CLS)
    assert sorted(_lines(one["files"])) == sorted(_lines(cls["files"]))
    assert one["bayes"] == cls["bayes"]


def test_textcls_files_parse_and_bayes_metrics_are_reproduced(cls):
    m = cls["m"]
    desc = DataFeedDesc(cls["desc"])
    n = lens = 0
    labels = []
    for batch in MultiSlotReader(desc, cls["files"], batch_size=2048):
        w = batch["words"]
        lod = w.lod()[0]
        d = np.diff(lod)
        assert d.min() >= m["min_len"] and d.max() <= m["max_len"]
        assert np.asarray(w).max() < m["vocab"]
        labels.append(np.asarray(batch["label"]).reshape(-1))
        n, lens = n + len(d), lens + int(d.sum())
    labels = np.concatenate(labels)
    assert n == 30000 and lens == cls["tokens"]
    assert 0.45 < labels.mean() < 0.55
    # the Bayes metrics computed while writing = those recomputed from the files
    ev = gt.evaluate_textcls(cls["model"], cls["files"])
    for k in ("accuracy", "logloss", "auc"):
        assert ev[k] == pytest.approx(cls["bayes"][k], rel=1e-9)


def test_bayes_classifier_reaches_the_stated_accuracy(cls, tmp_path):
    """The Bayes classifier is the best possible: its held-out accuracy is the stated one
    (up to sampling error), a misspecified model (another seed) is at chance, and naive
    Bayes *estimated* from the training files approaches it."""
    m = cls["m"]
    test = gt.generate_textcls(str(tmp_path), 20000, 1, 5, "test", **SMALL_CLS)
    acc = test["bayes"]["accuracy"]
    assert abs(acc - cls["bayes"]["accuracy"]) < 0.015
    assert 0.75 < acc < 0.98 and test["bayes"]["auc"] > 0.85
    wrong = gt.class_log_probs(gt.make_textcls_model(99, **SMALL_CLS))
    desc = DataFeedDesc(cls["desc"])
    (batch,) = list(MultiSlotReader(desc, test["files"], batch_size=20000))
    words = np.asarray(batch["words"]).reshape(-1)
    offs = np.asarray(batch["words"].lod()[0])
    y = np.asarray(batch["label"]).reshape(-1)
    assert gt.classification_metrics(y, gt.bayes_posterior(wrong, words, offs))["accuracy"] < 0.56
    # naive Bayes from counts on the training files (add-one smoothing)
    counts = np.ones((m["classes"], m["vocab"]))
    for tb in MultiSlotReader(desc, cls["files"], batch_size=4096):
        w = np.asarray(tb["words"]).reshape(-1)
        doc_y = np.repeat(np.asarray(tb["label"]).reshape(-1), np.diff(tb["words"].lod()[0]))
        np.add.at(counts, (doc_y, w), 1)
    est = np.log(counts / counts.sum(1, keepdims=True))
    got = gt.classification_metrics(y, gt.bayes_posterior(est, words, offs))
    assert acc - 0.03 < got["accuracy"] <= acc + 0.01


def test_classification_metrics():
    y = np.array([0, 1, 1, 0, 1])
    p1 = np.array([0.1, 0.8, 0.4, 0.4, 0.9])
    prob = np.stack([1 - p1, p1], 1)
    m = gt.classification_metrics(y, prob)
    assert m["accuracy"] == pytest.approx(4 / 5)  # p = 0.4 for a positive: predicted 0
    # AUC by brute force over (positive, negative) pairs, ties counting 1/2
    pos, neg = p1[y == 1], p1[y == 0]
    brute = np.mean([(a > b) + 0.5 * (a == b) for a in pos for b in neg])
    assert m["auc"] == pytest.approx(brute)
    assert m["logloss"] == pytest.approx(-np.mean(np.log(prob[np.arange(5), y])))
    three = gt.classification_metrics(np.array([0, 1, 2]), np.eye(3))
    assert three["accuracy"] == 1.0 and three["auc"] == 1.0


def test_command_line(tmp_path, capsys):
    gt.main(["textcls", str(tmp_path), "--size", "100"])
    out = json.loads(capsys.readouterr().out)
    assert out["lines"] == 100 and os.path.exists(out["desc"])
    gt.main(["skipgram", str(tmp_path / "s"), "--size", "50"])
    assert json.loads(capsys.readouterr().out)["sentences"] == 50
