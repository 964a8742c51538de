"""Skip-gram with negative sampling (word2vec), as a Fluid program for AsyncExecutor.

Each example holds a center word id and 1 + k context ids: the observed context word first,
then k negative samples. Two sparse embedding tables (input vectors for centers, output
vectors for contexts); the score of a (center, context) pair is the dot product of their
vectors (elementwise_mul + reduce_sum), and the loss is the sigmoid cross-entropy of the
scores against label 1 for the observed pair and 0 for the negatives, summed over the 1 + k
pairs of an example and averaged over the batch.

    main, startup, test, v = build_word2vec(vocab=5000, dim=64, negatives=5, lr=...)
    v["loss"], v["emb"] (the input-vector table's name)

Run on its own, it generates a small corpus with planted word clusters into a temporary
directory, trains with 2 Hogwild workers and prints how well the learned vectors' cosine
similarities rank word pairs by the planted similarity (Spearman), before and after:

    python examples/word2vec.py [--sentences 1500] [--epochs 3] [--workers 2]
"""
import argparse
import json
import sys
import tempfile

import numpy as np

import fluidity as fluid
from fluidity.layer_helper import LayerHelper


def _zeros_like(x):
    helper = LayerHelper("zeros_like")
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("fill_zeros_like", inputs={"X": x}, outputs={"Out": out})
    out.stop_gradient = True
    return out


def build_word2vec(vocab, dim=64, negatives=5, lr=1.0, center="center", context="context",
                   seed=7, optimizer="sgd"):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed
    k1 = 1 + negatives
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        c = fluid.layers.data(center, [1], dtype="int64")
        x = fluid.layers.data(context, [k1], dtype="int64")
        ce = fluid.layers.embedding(c, [vocab, dim], is_sparse=True, param_attr=fluid.ParamAttr(
            name="w2v_in", initializer=fluid.initializer.Uniform(-0.5 / dim, 0.5 / dim)))
        xe = fluid.layers.embedding(x, [vocab, dim], is_sparse=True, param_attr=fluid.ParamAttr(
            name="w2v_out", initializer=fluid.initializer.Constant(0.0)))   # [B, 1+k, D]
        ce3 = fluid.layers.unsqueeze(ce, [1])                                # [B, 1, D]
        score = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(xe, ce3), dim=2)
        label = fluid.layers.one_hot(_zeros_like(c), k1)                     # [1, 0, ..., 0]
        xent = fluid.layers.sigmoid_cross_entropy_with_logits(score, label)  # [B, 1+k]
        loss = fluid.layers.mean(fluid.layers.reduce_sum(xent, dim=1))
        test = main.clone(for_test=True)
        opt = {"sgd": lambda: fluid.optimizer.SGD(lr),
               "adagrad": lambda: fluid.optimizer.Adagrad(lr)}[optimizer]()
        opt.minimize(loss)
    return main, startup, test, {"loss": loss, "score": score, "emb": "w2v_in",
                                 "emb_out": "w2v_out"}


def main():
    from fluidity.datafeed import DataFeedDesc
    from fluidity.datafeed import generate_text as gt
    ap = argparse.ArgumentParser(description="skip-gram word2vec, Hogwild training",
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--sentences", type=int, default=1500, help="sentences to generate")
    ap.add_argument("--epochs", type=int, default=3, help="passes over the training files")
    ap.add_argument("--workers", type=int, default=2, help="Hogwild workers")
    ap.add_argument("--tensorboard", default="", metavar="DIR",
                    help="write TensorBoard scalars (loss, examples/s) to DIR "
                         "(pip install 'fluidity[tensorboard]')")
    a = ap.parse_args()
    args = dict(vocab=300, clusters=15, groups=5, negatives=4, window=2)
    with tempfile.TemporaryDirectory() as d:
        info = gt.generate_skipgram(d, a.sentences, files=4, seed=1, **args)
        print(f"data: {info['lines']} skip-gram examples from {a.sentences} generated "
              f"sentences (vocabulary 300 in 15 planted clusters), in {d}")
        with open(info["model"]) as f:
            model = json.load(f)
        desc = DataFeedDesc(info["desc"])
        desc.set_batch_size(128)
        pairs = gt.eval_word_pairs(model, 600, seed=2, corpus_tokens=info["tokens"],
                                   min_count=40)
        main_prog, startup, test, v = build_word2vec(300, 16, 4, lr=0.05 * 128)
        exe, scope = fluid.Executor(), fluid.Scope()
        exe.run(startup, scope=scope)
        before = gt.word_similarity(np.asarray(scope.find_var(v["emb"]).get_tensor()), *pairs)
        print(f"train: 16-d vectors, 4 negatives, SGD, {a.epochs} epoch(s), {a.workers} "
              f"AsyncExecutor workers")
        for epoch in range(a.epochs):
            res = fluid.AsyncExecutor().run(main_prog, desc, info["files"], a.workers,
                                            fetch=[v["loss"]], scope=scope, progress=False,
                                            tensorboard_dir=a.tensorboard or None)
            print(f"epoch {epoch + 1}: mean loss {res[0]:.4f}, {res.examples_per_sec:,.0f} "
                  f"examples/s ({res.mode})")
    after = gt.word_similarity(np.asarray(scope.find_var(v["emb"]).get_tensor()), *pairs)
    print(f"word similarity vs. the planted one (Spearman, {len(pairs[0])} held-out pairs): "
          f"{before['spearman']:.3f} untrained -> {after['spearman']:.3f} trained")


if __name__ == "__main__":
    sys.exit(main())
