"""Bag-of-words text classifier, as a Fluid program for AsyncExecutor.

word ids (one LoD sequence per document) -> sparse embedding -> sequence_pool (sum or
average) -> fc -> softmax over the classes; cross-entropy loss. With sum pooling and no
hidden layer the model is linear in the bag of words, the family of the Bayes-optimal
classifier of fluidity.datafeed.generate_text's documents.

    main, startup, test, v = build_textcls(vocab=10000, classes=2, dim=16)
    v["loss"], v["predict"] ([batch, classes] probabilities)

With fuse=True (and sum pooling) the lookup and the pool are one fused_embedding_seq_pool op.

Run on its own, it generates a small corpus into a temporary directory, trains the
classifier with 2 Hogwild workers and prints held-out accuracy next to the Bayes-optimal
classifier's:

    python examples/textcls.py [--docs 24000] [--epochs 2] [--workers 2]
"""
import argparse
import sys
import tempfile

import numpy as np

import fluidity as fluid
from fluidity.transpiler.fuse import fuse_embedding_seq_pool


def build_textcls(vocab, classes=2, dim=16, pool="sum", hidden=0, lr=0.5, words="words",
                  label="label", seed=7, optimizer="sgd", fuse=True):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        w = fluid.layers.data(words, [1], dtype="int64", lod_level=1)
        y = fluid.layers.data(label, [1], dtype="int64")
        emb = fluid.layers.embedding(w, [vocab, dim], is_sparse=True, param_attr=fluid.ParamAttr(
            name="bow_emb", initializer=fluid.initializer.Uniform(-0.05, 0.05)))
        h = fluid.layers.sequence_pool(emb, pool)
        if fuse:  # lookup + sum pool -> fused_embedding_seq_pool (Paddle's op; C kernel)
            fuse_embedding_seq_pool(main)
        if hidden:
            h = fluid.layers.fc(h, hidden, act="relu")
        predict = fluid.layers.fc(h, classes, act="softmax")
        loss = fluid.layers.mean(fluid.layers.cross_entropy(predict, y))
        test = main.clone(for_test=True)
        opt = {"sgd": lambda: fluid.optimizer.SGD(lr),
               "adagrad": lambda: fluid.optimizer.Adagrad(lr)}[optimizer]()
        opt.minimize(loss)
    return main, startup, test, {"loss": loss, "predict": predict}


def main():
    from fluidity.datafeed import DataFeedDesc, MultiSlotReader
    from fluidity.datafeed import generate_text as gt
    ap = argparse.ArgumentParser(description="bag-of-words classifier, Hogwild training",
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--docs", type=int, default=24000, help="training documents to generate")
    ap.add_argument("--epochs", type=int, default=2, help="passes over the training files")
    ap.add_argument("--workers", type=int, default=2, help="Hogwild workers")
    ap.add_argument("--tensorboard", default="", metavar="DIR",
                    help="write TensorBoard scalars (loss, examples/s) to DIR "
                         "(pip install 'fluidity[tensorboard]')")
    a = ap.parse_args()
    vocab = 800
    with tempfile.TemporaryDirectory() as d:
        print(f"data: {a.docs} generated documents (vocabulary {vocab}, 2 classes) + 4000 "
              f"held out, in {d}")
        args = dict(vocab=vocab, classes=2, strength=1.0)
        train = gt.generate_textcls(d, a.docs, files=4, seed=1, **args)
        test = gt.generate_textcls(d, 4000, files=1, seed=1, prefix="test", **args)
        desc = DataFeedDesc(train["desc"])
        desc.set_batch_size(64)
        main_prog, startup, test_prog, v = build_textcls(vocab, 2, 8, lr=0.1,
                                                         optimizer="adagrad")
        exe, scope = fluid.Executor(), fluid.Scope()
        exe.run(startup, scope=scope)
        print(f"train: embedding -> sum pool -> fc -> softmax, Adagrad, {a.epochs} epoch(s), "
              f"{a.workers} AsyncExecutor workers")
        for epoch in range(a.epochs):
            res = fluid.AsyncExecutor().run(main_prog, desc, train["files"], a.workers,
                                            fetch=[v["loss"]], scope=scope, progress=False,
                                            tensorboard_dir=a.tensorboard or None)
            print(f"epoch {epoch + 1}: mean loss {res[0]:.4f}, {res.examples_per_sec:,.0f} "
                  f"examples/s ({res.mode})")
        (batch,) = list(MultiSlotReader(desc, test["files"], batch_size=4000))
        (p,) = exe.run(test_prog, feed=batch, fetch_list=[v["predict"]], scope=scope)
    got = gt.classification_metrics(np.asarray(batch["label"]).reshape(-1), p)
    bayes = test["bayes"]
    print(f"held out: accuracy {got['accuracy']:.4f} (Bayes-optimal {bayes['accuracy']:.4f}, "
          f"chance 0.5), log-loss {got['logloss']:.4f} (Bayes {bayes['logloss']:.4f})")


if __name__ == "__main__":
    sys.exit(main())
