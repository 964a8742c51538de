"""Synthetic text in MultiSlot format, drawn from known models, for the word2vec and text
classification benchmarks of AsyncExecutor.

**Skip-gram corpus** (`generate_skipgram`). A vocabulary of `vocab` words with Zipfian
frequencies (word id = frequency rank, as word2vec numbers them) is split into `clusters`
semantic clusters (a random partition, so every cluster holds frequent and rare words), and
the clusters into `groups`. A sentence picks a topic cluster t uniformly; each of its words
comes from t with probability `topic_prob`, from another cluster of t's group with
probability `group_prob`, and from the whole vocabulary otherwise (noise); inside a cluster
words are drawn in proportion to their Zipf weight. So words of one cluster co-occur, words
of one group co-occur less, and the planted similarity of two words is

    2 (same cluster) > 1 (same group, other cluster) > 0 (different groups).

Sentences become skip-gram examples as word2vec makes them: every position is a center, its
window is drawn from 1..`window`, every word within it is a positive context; each example
also carries `negatives` ids drawn from the unigram^0.75 distribution (from the model's
marginal word frequencies). One example per line, two uint64 dense slots:

    1 <center> 6 <context> <neg1> ... <neg5>        (slots `center` [1], `context` [1 + k])

**Labelled documents** (`generate_textcls`). A Zipfian base distribution q over `vocab`
words; class c has word distribution p_c(w) ∝ q(w) exp(strength * z[c, w]) where z is
N(0, 1) on a random `informative` fraction of the words and 0 elsewhere. A document draws
its class uniformly, a length uniformly in [min_len, max_len] (independent of the class) and
its words i.i.d. from p_c. The Bayes posterior is multinomial naive Bayes with the true p_c,
which is linear in the bag of words — a sum-pooled embedding + fc can represent it exactly —
and `evaluate_textcls` gives the Bayes-optimal accuracy, log-loss and AUC on any files:

    <n> <w1> ... <wn> 1 <label>                      (slots `words` (LoD), `label` [1])

Both are vectorized numpy and deterministic given (seed, prefix, size); the set of lines does
not depend on `files`. `model.json` holds everything needed to recompute the model.

    info = generate_skipgram("data/w2v", sentences=50_000, files=4, seed=0)
    generate_skipgram("data/w2v", sentences=5_000, seed=0, prefix="test")
    generate_textcls("data/cls", docs=100_000, files=4, seed=0)
"""
import argparse
import json
import os
import zlib

import numpy as np
from google.protobuf import text_format

from .data_feed_pb2 import DataFeedDesc as DataFeedDescProto
from .data_feed_desc import DataFeedDesc

SKIPGRAM_FORMAT = "fluidity-synthetic-skipgram/1"
TEXTCLS_FORMAT = "fluidity-synthetic-textcls/1"
_CHUNK = 20_000  # sentences / documents drawn at a time (part of the definition of the output)


# --- helpers ---------------------------------------------------------------------------------
def zipf_weights(n, s):
    """Unnormalized Zipf weights 1/(rank+1)^s for ranks 0..n-1."""
    return 1.0 / np.arange(1, n + 1, dtype=np.float64) ** s


def _stream(seed, tag, prefix):
    return np.random.default_rng([seed, tag, zlib.crc32(prefix.encode())])


class _GroupedSampler:
    """Draws, for an array of group indices g, one item per g with probability proportional
    to weight within the group: one searchsorted over the concatenated per-group CDFs
    shifted by the group index (group g's CDF lives in (g, g + 1])."""

    def __init__(self, groups, weights):
        groups = np.asarray(groups)
        order = np.lexsort((np.arange(len(groups)), groups))
        self.items = order
        g = groups[order]
        w = np.asarray(weights, np.float64)[order]
        cum = np.cumsum(w)
        starts = np.searchsorted(g, g, side="left")  # index of each item's group start
        before = np.where(starts > 0, cum[starts - 1], 0.0)
        ends = np.searchsorted(g, g, side="right") - 1
        total = cum[ends] - before
        self.keys = g + (cum - before) / total
        self.keys[ends] = g[ends] + 1.0  # exact upper end of every group
        self.n_groups = int(g.max()) + 1 if len(g) else 0

    def draw(self, rng, group_idx):
        u = rng.random(len(group_idx))
        pos = np.searchsorted(self.keys, group_idx + u, side="right")
        return self.items[np.minimum(pos, len(self.items) - 1)]


def _write_lines(outs, text_lines, first_index):
    """Line j (global index) goes to file j % len(outs): the set of lines is independent of
    the number of files."""
    k = len(outs)
    for f in range(k):
        start = (f - first_index) % k
        part = text_lines[start::k]
        if part:
            outs[f].write("\n".join(part) + "\n")


def _rows_to_text(rows):
    """Lines of space-separated ints from a 2-D int array (fixed width)."""
    fmt = " ".join(["%d"] * rows.shape[1])
    return [fmt % tuple(r) for r in rows.tolist()]


def _desc(slots, batch_size, source):
    msg = DataFeedDescProto(name="MultiSlotDataFeed", batch_size=batch_size)
    for s in slots:
        msg.multi_slot_desc.slots.add(**s)
    return DataFeedDesc.from_text(text_format.MessageToString(msg), source)


def _save(out_dir, info, desc, model):
    info["desc"] = os.path.join(out_dir, "data_feed.prototxt")
    info["model"] = os.path.join(out_dir, "model.json")
    with open(info["desc"], "w") as f:
        f.write(desc.desc())
    with open(info["model"], "w") as f:
        json.dump(model, f, indent=1)
    return info


# --- skip-gram corpus ------------------------------------------------------------------------
def make_skipgram_model(seed=0, vocab=5000, clusters=50, groups=10, zipf_s=1.0,
                        topic_prob=0.6, group_prob=0.2, min_len=8, max_len=20, window=3,
                        negatives=5):
    """The corpus model's parameters (a JSON-able dict), a function of its arguments."""
    if clusters % groups:
        raise ValueError(f"clusters ({clusters}) must be a multiple of groups ({groups})")
    if vocab < 2 * clusters:
        raise ValueError(f"vocab ({vocab}) must be at least 2 * clusters ({clusters})")
    if not (0 <= topic_prob and 0 <= group_prob and topic_prob + group_prob <= 1):
        raise ValueError("need topic_prob, group_prob >= 0 and topic_prob + group_prob <= 1")
    if not 1 <= min_len <= max_len or window < 1 or negatives < 1:
        raise ValueError("need 1 <= min_len <= max_len, window >= 1, negatives >= 1")
    rng = np.random.default_rng([seed, 0])
    cluster = rng.permutation(vocab) % clusters  # every cluster: a spread of frequencies
    return {"format": SKIPGRAM_FORMAT, "seed": seed, "vocab": int(vocab),
            "clusters": int(clusters), "groups": int(groups), "zipf_s": zipf_s,
            "topic_prob": topic_prob, "group_prob": group_prob, "min_len": int(min_len),
            "max_len": int(max_len), "window": int(window), "negatives": int(negatives),
            "cluster": cluster.tolist(), "center_slot": "center", "context_slot": "context"}


def cluster_of(model):
    return np.asarray(model["cluster"], np.int64)


def group_of(model):
    """Group of each word."""
    per_group = model["clusters"] // model["groups"]
    return cluster_of(model) // per_group


def word_marginals(model):
    """p(w): the expected frequency of each word in the corpus."""
    V, K, G = model["vocab"], model["clusters"], model["groups"]
    q = zipf_weights(V, model["zipf_s"])
    c = cluster_of(model)
    in_cluster = q / np.bincount(c, q, minlength=K)[c]  # p(w | cluster(w))
    per_group = K // G
    p_topic = 1.0 / K
    # from its own cluster as the topic; from a sibling cluster's topic (group draw picks
    # one of the per_group - 1 other clusters of the group uniformly); as noise
    p = model["topic_prob"] * p_topic * in_cluster
    if per_group > 1:
        p = p + model["group_prob"] * p_topic * in_cluster  # (per_group-1) topics x 1/(pg-1)
    noise = 1.0 - model["topic_prob"] - (model["group_prob"] if per_group > 1 else 0.0)
    p = p + noise * q / q.sum()
    return p / p.sum()


def negative_distribution(model):
    """word2vec's noise distribution: marginal^0.75, normalized."""
    p = word_marginals(model) ** 0.75
    return p / p.sum()


def planted_similarity(model, a, b):
    """2 for pairs in one cluster, 1 for one group (other clusters), 0 otherwise."""
    c, g = cluster_of(model), group_of(model)
    a, b = np.asarray(a), np.asarray(b)
    return np.where(c[a] == c[b], 2, np.where(g[a] == g[b], 1, 0))


def draw_sentences(model, rng, n):
    """n sentences: (flat token ids, sentence offsets [n + 1], topics [n])."""
    V, K, G = model["vocab"], model["clusters"], model["groups"]
    per_group = K // G
    q = zipf_weights(V, model["zipf_s"])
    c = cluster_of(model)
    lens = rng.integers(model["min_len"], model["max_len"] + 1, n)
    offs = np.concatenate([[0], np.cumsum(lens)])
    topic = rng.integers(0, K, n)
    t = np.repeat(topic, lens)
    u = rng.random(len(t))
    src = t.copy()
    sib = (u >= model["topic_prob"]) & (u < model["topic_prob"] + model["group_prob"])
    if per_group > 1:  # another cluster of the topic's group, uniformly
        shift = rng.integers(1, per_group, len(t))
        base = (t // per_group) * per_group
        src = np.where(sib, base + (t - base + shift) % per_group, src)
    else:
        sib[:] = False
    noise = u >= model["topic_prob"] + (model["group_prob"] if per_group > 1 else 0.0)
    words = _GroupedSampler(c, q).draw(rng, src)
    if noise.any():
        words[noise] = _GroupedSampler(np.zeros(V, np.int64), q).draw(
            rng, np.zeros(int(noise.sum()), np.int64))
    return words.astype(np.int64), offs, topic


def skipgram_pairs(model, rng, words, offs):
    """(center, context) pairs with word2vec's dynamic window, in corpus order."""
    n_tok = len(words)
    sent = np.repeat(np.arange(len(offs) - 1), np.diff(offs))
    win = rng.integers(1, model["window"] + 1, n_tok)  # each center's reduced window
    pos = np.arange(n_tok)
    centers, contexts, order = [], [], []
    for d in range(-model["window"], model["window"] + 1):
        if d == 0:
            continue
        j = pos + d
        ok = (j >= 0) & (j < n_tok) & (abs(d) <= win)
        ok[ok] &= sent[j[ok]] == sent[pos[ok]]
        centers.append(pos[ok])
        contexts.append(j[ok])
    ci, xi = np.concatenate(centers), np.concatenate(contexts)
    order = np.lexsort((xi, ci))  # corpus order: by center position, then context position
    return words[ci[order]], words[xi[order]]


def skipgram_desc(model, batch_size=256):
    k = model["negatives"]
    return _desc([dict(name=model["center_slot"], type="uint64", is_dense=True, is_used=True,
                       shape=[-1, 1]),
                  dict(name=model["context_slot"], type="uint64", is_dense=True, is_used=True,
                       shape=[-1, 1 + k])], batch_size, "<synthetic skipgram>")


def generate_skipgram(out_dir, sentences, files=1, seed=0, prefix="train", shuffle=True,
                      **model_args):
    """Write the skip-gram examples of `sentences` sentences into `files` files
    `{prefix}-NNNNN.txt` under out_dir (line j into file j % files), plus data_feed.prototxt
    and model.json. Examples are shuffled within each chunk of 20,000 sentences when
    `shuffle`. Returns {"files", "lines", "tokens", "sentences", "desc", "model"}."""
    os.makedirs(out_dir, exist_ok=True)
    model = make_skipgram_model(seed, **model_args)
    neg = _GroupedSampler(np.zeros(model["vocab"], np.int64), negative_distribution(model))
    rng = _stream(seed, 1, prefix)
    paths = [os.path.join(out_dir, f"{prefix}-{k:05d}.txt") for k in range(files)]
    lines = tokens = 0
    outs = [open(p, "w") for p in paths]
    try:
        for start in range(0, sentences, _CHUNK):
            n = min(_CHUNK, sentences - start)
            words, offs, _ = draw_sentences(model, rng, n)
            center, context = skipgram_pairs(model, rng, words, offs)
            m, k = len(center), model["negatives"]
            negs = neg.draw(rng, np.zeros(m * k, np.int64)).reshape(m, k)
            rows = np.empty((m, 4 + k), np.int64)
            rows[:, 0], rows[:, 1], rows[:, 2] = 1, center, 1 + k
            rows[:, 3], rows[:, 4:] = context, negs
            if shuffle:
                rows = rows[rng.permutation(m)]
            _write_lines(outs, _rows_to_text(rows), lines)
            lines, tokens = lines + m, tokens + len(words)
    finally:
        for out in outs:
            out.close()
    info = {"files": paths, "lines": lines, "tokens": tokens, "sentences": sentences}
    return _save(out_dir, info, skipgram_desc(model), model)


def eval_word_pairs(model, n=3000, seed=0, min_count=50, corpus_tokens=None, top=None):
    """Held-out evaluation pairs (a, b, planted similarity), a third of each level (the
    first level gets the remainder), drawn among the `top` most frequent words (by expected
    frequency), or, with `corpus_tokens`, among the words expected at least `min_count`
    times in a corpus of that many tokens; all words if neither is given."""
    V = model["vocab"]
    p = word_marginals(model)
    by_freq = np.argsort(-p, kind="stable")
    if top is None:
        top = int(np.sum(p * corpus_tokens >= min_count)) if corpus_tokens is not None else V
    words = by_freq[:max(min(top, V), 2)]
    rng = np.random.default_rng([seed, 7])
    c, g = cluster_of(model)[words], group_of(model)[words]
    pairs = []
    for level in (2, 1, 0):
        need, got = n // 3 + (n % 3 if level == 2 else 0), []
        for _ in range(200):
            i, j = rng.integers(0, len(words), (2, 4 * need + 64))
            lv = np.where(c[i] == c[j], 2, np.where(g[i] == g[j], 1, 0))
            ok = (i != j) & (lv == level)
            got.append(np.stack([words[i[ok]], words[j[ok]]], 1))
            if sum(len(x) for x in got) >= need:
                break
        got = np.concatenate(got)[:need]
        pairs.append(np.concatenate([got, np.full((len(got), 1), level)], 1))
    out = np.concatenate(pairs)
    return out[:, 0], out[:, 1], out[:, 2]


def rank_data(x):
    """Ranks 1..n with ties averaged."""
    x = np.asarray(x)
    order = np.argsort(x, kind="mergesort")
    sx = x[order]
    first = np.r_[True, sx[1:] != sx[:-1]]
    idx = np.flatnonzero(first)
    ends = np.r_[idx[1:], len(x)]
    avg = (idx + ends - 1) / 2.0 + 1.0
    ranks = np.empty(len(x))
    ranks[order] = np.repeat(avg, ends - idx)
    return ranks


def spearman(x, y):
    rx, ry = rank_data(x), rank_data(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    den = np.sqrt((rx * rx).sum() * (ry * ry).sum())
    return float((rx * ry).sum() / den) if den > 0 else 0.0


def word_similarity(emb, a, b, level):
    """Scores of an embedding table [vocab, dim] on pairs (a, b) with planted similarity
    `level`: {"spearman": rank correlation of cosine with the planted level,
    "separation": mean cosine of same-cluster pairs - mean cosine of different-group pairs,
    "cos_same", "cos_group", "cos_diff"}."""
    e = np.asarray(emb, np.float64)
    e = e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)
    cos = np.einsum("ij,ij->i", e[a], e[b])
    means = {lv: float(cos[level == lv].mean()) if np.any(level == lv) else float("nan")
             for lv in (2, 1, 0)}
    return {"spearman": spearman(cos, level), "separation": means[2] - means[0],
            "cos_same": means[2], "cos_group": means[1], "cos_diff": means[0]}


# --- labelled documents ------------------------------------------------------------------------
def make_textcls_model(seed=0, vocab=10000, classes=2, zipf_s=1.1, informative=0.3,
                       strength=0.8, min_len=5, max_len=40):
    """The document model's parameters (a JSON-able dict; class log-weights are recomputed
    from the seed by `class_log_probs`)."""
    if classes < 2 or vocab < 2 or not 1 <= min_len <= max_len:
        raise ValueError("need classes >= 2, vocab >= 2, 1 <= min_len <= max_len")
    return {"format": TEXTCLS_FORMAT, "seed": seed, "vocab": int(vocab),
            "classes": int(classes), "zipf_s": zipf_s, "informative": informative,
            "strength": strength, "min_len": int(min_len), "max_len": int(max_len),
            "words_slot": "words", "label_slot": "label"}


def class_log_probs(model):
    """log p_c(w): [classes, vocab] float64."""
    rng = np.random.default_rng([model["seed"], 2])
    V, C = model["vocab"], model["classes"]
    z = rng.standard_normal((C, V)) * (rng.random(V) < model["informative"])
    logit = np.log(zipf_weights(V, model["zipf_s"]))[None, :] + model["strength"] * z
    return logit - np.logaddexp.reduce(logit, axis=1, keepdims=True)


def draw_documents(model, rng, n, logp=None):
    """n documents: (flat word ids, offsets [n + 1], labels [n])."""
    logp = class_log_probs(model) if logp is None else logp
    C, V = logp.shape
    labels = rng.integers(0, C, n)
    lens = rng.integers(model["min_len"], model["max_len"] + 1, n)
    offs = np.concatenate([[0], np.cumsum(lens)])
    sampler = _GroupedSampler(np.repeat(np.arange(C), V), np.exp(logp).reshape(-1))
    words = sampler.draw(rng, np.repeat(labels, lens)) % V
    return words.astype(np.int64), offs, labels


def textcls_desc(model, batch_size=128):
    return _desc([dict(name=model["words_slot"], type="uint64", is_dense=False, is_used=True),
                  dict(name=model["label_slot"], type="uint64", is_dense=True, is_used=True,
                       shape=[-1, 1])], batch_size, "<synthetic textcls>")


def _doc_lines(words, offs, labels):
    lens = np.diff(offs)
    toks = words.astype(str)
    out, pos = [], 0
    for L, y in zip(lens.tolist(), labels.tolist()):
        out.append(f"{L} {' '.join(toks[pos:pos + L])} 1 {y}")
        pos += L
    return out


def generate_textcls(out_dir, docs, files=1, seed=0, prefix="train", **model_args):
    """Write `docs` documents into `files` files `{prefix}-NNNNN.txt` under out_dir (line j
    into file j % files), plus data_feed.prototxt and model.json; returns {"files", "lines",
    "tokens", "desc", "model"} and the Bayes-optimal "bayes" metrics on what was written."""
    os.makedirs(out_dir, exist_ok=True)
    model = make_textcls_model(seed, **model_args)
    logp = class_log_probs(model)
    rng = _stream(seed, 3, prefix)
    paths = [os.path.join(out_dir, f"{prefix}-{k:05d}.txt") for k in range(files)]
    tokens = 0
    post, ys = [], []
    outs = [open(p, "w") for p in paths]
    try:
        for start in range(0, docs, _CHUNK):
            n = min(_CHUNK, docs - start)
            words, offs, labels = draw_documents(model, rng, n, logp)
            _write_lines(outs, _doc_lines(words, offs, labels), start)
            post.append(bayes_posterior(logp, words, offs))
            ys.append(labels)
            tokens += len(words)
    finally:
        for out in outs:
            out.close()
    info = {"files": paths, "lines": docs, "tokens": tokens,
            "bayes": classification_metrics(np.concatenate(ys), np.concatenate(post))}
    return _save(out_dir, info, textcls_desc(model), model)


def bayes_posterior(logp, words, offs):
    """p(class | document) under the true model (uniform class prior): [n, classes]."""
    n = len(offs) - 1
    per_word = logp[:, words].T  # [tokens, C]
    doc = np.repeat(np.arange(n), np.diff(offs))
    score = np.zeros((n, logp.shape[0]))
    np.add.at(score, doc, per_word)
    score -= score.max(axis=1, keepdims=True)
    p = np.exp(score)
    return p / p.sum(axis=1, keepdims=True)


def rank_auc(y, score):
    """ROC AUC of binary labels y by ranks (ties averaged)."""
    y = np.asarray(y).astype(bool)
    r = rank_data(score)
    npos, nneg = y.sum(), (~y).sum()
    if npos == 0 or nneg == 0:
        return float("nan")
    return float((r[y].sum() - npos * (npos + 1) / 2) / (npos * nneg))


def classification_metrics(y, prob):
    """{"accuracy", "logloss", "auc"} of class probabilities [n, C] against labels y (AUC:
    of class 1's probability for two classes, else the mean one-vs-rest AUC)."""
    y, prob = np.asarray(y).reshape(-1).astype(np.int64), np.asarray(prob, np.float64)
    p_true = np.clip(prob[np.arange(len(y)), y], 1e-12, 1.0)
    C = prob.shape[1]
    auc = rank_auc(y == 1, prob[:, 1]) if C == 2 else \
        float(np.nanmean([rank_auc(y == c, prob[:, c]) for c in range(C)]))
    return {"accuracy": float(np.mean(prob.argmax(1) == y)),
            "logloss": float(-np.mean(np.log(p_true))), "auc": auc, "n": int(len(y))}


def evaluate_textcls(model, files, batch_size=8192):
    """Bayes-optimal metrics of the true model on generated files (read back with
    MultiSlotReader): {"accuracy", "logloss", "auc", "n"}."""
    from .multislot import MultiSlotReader
    if not isinstance(model, dict):
        with open(model) as f:
            model = json.load(f)
    logp = class_log_probs(model)
    ys, post = [], []
    for batch in MultiSlotReader(textcls_desc(model), files, batch_size=batch_size):
        w = batch[model["words_slot"]]
        post.append(bayes_posterior(logp, np.asarray(w).reshape(-1), np.asarray(w.lod()[0])))
        ys.append(np.asarray(batch[model["label_slot"]]).reshape(-1))
    return classification_metrics(np.concatenate(ys), np.concatenate(post))


def main(argv=None):
    ap = argparse.ArgumentParser(description="Write synthetic text data (MultiSlot format).")
    ap.add_argument("kind", choices=["skipgram", "textcls"])
    ap.add_argument("out_dir")
    ap.add_argument("--size", type=int, default=50_000, help="sentences or documents")
    ap.add_argument("--files", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prefix", default="train")
    args = ap.parse_args(argv)
    gen = generate_skipgram if args.kind == "skipgram" else generate_textcls
    info = gen(args.out_dir, args.size, args.files, args.seed, args.prefix)
    print(json.dumps({k: v for k, v in info.items() if k != "files"}, indent=1))


if __name__ == "__main__":
    main()
