"""A real-English skip-gram workload, built at run time from text every Python ships.

The text: the docstrings of the standard library's modules, classes and functions (read with
`ast` from the installed `*.py` files, tests and site-packages left out) and the Python
reference's topic pages (`pydoc_data.topics`, the text `help()` shows): about 300,000 words
of technical English with the long-tailed frequencies of real text, no download.

Skip-gram examples as word2vec (Mikolov et al. 2013, and its C tool's defaults) makes them:
lowercase words, sentences split at . ! ? ; : and blank lines; words seen fewer than
`min_count` times dropped; frequent words subsampled (kept with probability
(sqrt(f / (t * N)) + 1) * t * N / f for a word seen f times in N); every kept word a center
with a window drawn from 1..`window`, every word within it a positive context, and
`negatives` ids drawn from the unigram^0.75 distribution. Every tenth sentence is held out.
One example per line, three uint64 dense slots (the positive and the negatives are separate
slots, looked up in the same output table):

    1 <center> 1 <context> 5 <neg1> ... <neg5>        (slots center [1], pos [1], neg [k])

Deterministic given the seed and the Python installation (its docstrings are the corpus).

    info = build_corpus("data/w2v-text", files=32)
"""
import ast
import collections
import glob
import json
import os
import re
import sysconfig

import numpy as np
from google.protobuf import text_format

from fluidity.datafeed import DataFeedDesc, data_feed_pb2

FORMAT = "fluidity-stdlib-text-skipgram/1"
_WORD = re.compile(r"[a-z]+")
_SENTENCE = re.compile(r"[.!?;:]\s|\n\s*\n")


def stdlib_text():
    """The documentation text of this Python: stdlib docstrings, then the reference topics."""
    root = sysconfig.get_paths()["stdlib"]
    paths = sorted(glob.glob(os.path.join(root, "*.py")) +
                   glob.glob(os.path.join(root, "*", "*.py")))
    docs = []
    for path in paths:
        rel = os.path.relpath(path, root)
        if rel.startswith(("test", "site-packages", "idlelib/idle_test", "lib2to3/tests")) or \
                "/test" in rel:
            continue
        try:
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
        except (SyntaxError, UnicodeDecodeError, ValueError, OSError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                 ast.AsyncFunctionDef)):
                d = ast.get_docstring(node)
                if d:
                    docs.append(d)
    try:
        from pydoc_data.topics import topics
        docs += [topics[k] for k in sorted(topics)]
    except ImportError:
        pass
    return docs


def sentences_of(docs):
    """Lists of lowercase words, one per sentence of the documents."""
    out = []
    for d in docs:
        for s in _SENTENCE.split(d):
            words = _WORD.findall(s.lower())
            if len(words) > 1:
                out.append(words)
    return out


def _desc(negatives, batch_size):
    msg = data_feed_pb2.DataFeedDesc(name="MultiSlotDataFeed", batch_size=batch_size)
    for name, n in (("center", 1), ("pos", 1), ("neg", negatives)):
        msg.multi_slot_desc.slots.add(name=name, type="uint64", is_dense=True, is_used=True,
                                      shape=[-1, n])
    return DataFeedDesc.from_text(text_format.MessageToString(msg), "<stdlib text skipgram>")


def _examples(rng, sents, keep_p, window, negatives, neg_cdf):
    """[m, 5 + k] MultiSlot rows of the skip-gram examples of id sentences."""
    rows = []
    for s in sents:
        s = s[rng.random(len(s)) < keep_p[s]]           # subsampling, per occurrence
        n = len(s)
        if n < 2:
            continue
        win = rng.integers(1, window + 1, n)
        for d in range(-window, window + 1):
            if d == 0:
                continue
            pos = np.arange(max(0, -d), min(n, n - d))
            pos = pos[np.abs(d) <= win[pos]]
            if len(pos):
                rows.append(np.stack([s[pos], s[pos + d]], 1))
    pairs = np.concatenate(rows) if rows else np.zeros((0, 2), np.int64)
    m = len(pairs)
    negs = np.searchsorted(neg_cdf, rng.random(m * negatives), side="right")
    negs = np.minimum(negs, len(neg_cdf) - 1).reshape(m, negatives)
    out = np.empty((m, 5 + negatives), np.int64)
    out[:, 0], out[:, 1], out[:, 2], out[:, 3] = 1, pairs[:, 0], 1, pairs[:, 1]
    out[:, 4], out[:, 5:] = negatives, negs
    return out


def _write(rows, paths):
    """Row j into file j % len(paths)."""
    fmt = " ".join(["%d"] * rows.shape[1])
    for f, path in enumerate(paths):
        with open(path, "w") as out:
            part = rows[f::len(paths)]
            if len(part):
                out.write("\n".join(fmt % tuple(r) for r in part.tolist()) + "\n")


def build_corpus(out_dir, files=32, min_count=5, sample=1e-3, window=5, negatives=5,
                 batch_size=100, seed=0):
    """Write train-NNNNN.txt (shuffled examples), test-00000.txt, data_feed.prototxt and
    vocab.json into out_dir. Returns {"train", "test", "lines", "test_lines", "tokens",
    "vocab", "desc", "vocab_path"}."""
    os.makedirs(out_dir, exist_ok=True)
    sents = sentences_of(stdlib_text())
    counts = collections.Counter(w for s in sents for w in s)
    words = sorted((w for w, c in counts.items() if c >= min_count),
                   key=lambda w: (-counts[w], w))           # id = frequency rank
    index = {w: i for i, w in enumerate(words)}
    freq = np.array([counts[w] for w in words], np.float64)
    ids = [np.array([index[w] for w in s if w in index], np.int64) for s in sents]
    ids = [s for s in ids if len(s) > 1]
    total = freq.sum()
    keep_p = np.minimum(1.0, (np.sqrt(freq / (sample * total)) + 1) * sample * total / freq)
    neg_w = freq ** 0.75
    neg_cdf = np.cumsum(neg_w) / neg_w.sum()
    rng = np.random.default_rng(seed)
    held = np.arange(len(ids)) % 10 == 9
    train = _examples(rng, [s for s, h in zip(ids, held) if not h], keep_p, window, negatives,
                      neg_cdf)
    test = _examples(rng, [s for s, h in zip(ids, held) if h], keep_p, window, negatives,
                     neg_cdf)
    train = train[rng.permutation(len(train))]
    paths = [os.path.join(out_dir, f"train-{k:05d}.txt") for k in range(files)]
    _write(train, paths)
    test_path = os.path.join(out_dir, "test-00000.txt")
    _write(test, [test_path])
    desc_path = os.path.join(out_dir, "data_feed.prototxt")
    with open(desc_path, "w") as f:
        f.write(_desc(negatives, batch_size).desc())
    vocab_path = os.path.join(out_dir, "vocab.json")
    with open(vocab_path, "w") as f:
        json.dump({"format": FORMAT, "words": words, "counts": freq.astype(int).tolist()}, f)
    return {"train": paths, "test": [test_path], "lines": int(len(train)),
            "test_lines": int(len(test)), "tokens": int(sum(len(s) for s in ids)),
            "vocab": len(words), "desc": desc_path, "vocab_path": vocab_path}


if __name__ == "__main__":
    import sys
    import time
    t = time.perf_counter()
    info = build_corpus(sys.argv[1] if len(sys.argv) > 1 else "data/w2v-text")
    print({k: v for k, v in info.items() if k not in ("train",)},
          f"{time.perf_counter() - t:.1f}s")
