"""The CTR-DNN of Paddle's AsyncExecutor examples: one sparse embedding per categorical
slot (summed over the slot's ids), concatenated with the dense features, three fc+relu
layers and a 2-way softmax; cross-entropy loss and a streaming AUC.

    main, startup, vars_ = build_ctr_dnn(slot_names, dense_dim, vocab)

With fuse=True two IR passes rewrite the embeddings: each lookup+sum-pool pair becomes one
fused_embedding_seq_pool op (Paddle's op: the test program, which may be saved for Paddle,
stops there), each fc layer's mul + bias + relu becomes one `fc` op, and in the training
program the 26 of them feeding the concat become one
fused_embedding_seq_pool_concat (one kernel and one sparse gradient for all slots).

Run on its own, it trains a small CTR-DNN on generated data in a temporary directory with
2 Hogwild workers and prints the held-out log-loss next to the generating model's (the
optimum) and the constant predictor's (`examples/demo.py` is the full-size run):

    python examples/ctr_dnn.py [--lines 40000] [--epochs 2] [--workers 2]
"""
import argparse
import json
import sys
import tempfile

import numpy as np

import fluidity as fluid
from fluidity.transpiler.fuse import fuse_embedding_seq_pool, fuse_embedding_seq_pool_concat, fuse_fc


def build_ctr_dnn(sparse_slots, dense_slot="dense_input", dense_dim=13, label="click",
                  vocab=10**6, emb_dim=10, hidden=(400, 400, 400), lr=1e-3,
                  optimizer="adam", seed=7, with_auc=True, fuse=True):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        dense = fluid.layers.data(dense_slot, [dense_dim])
        ids = [fluid.layers.data(s, [1], dtype="int64", lod_level=1) for s in sparse_slots]
        y = fluid.layers.data(label, [1], dtype="int64")
        embs = [fluid.layers.sequence_pool(
            fluid.layers.embedding(i, [vocab, emb_dim], is_sparse=True,
                                   param_attr=fluid.ParamAttr(
                                       name="SparseFeatFactors",
                                       initializer=fluid.initializer.Uniform(-0.01, 0.01))),
            "sum") for i in ids]
        h = fluid.layers.concat(embs + [dense], axis=1)
        for width in hidden:
            h = fluid.layers.fc(h, width, act="relu")
        predict = fluid.layers.fc(h, 2, act="softmax")
        if fuse:  # lookup_table + sequence_pool(sum) -> fused_embedding_seq_pool, per slot;
            fuse_embedding_seq_pool(main)  # mul + bias + relu -> fc (both Paddle ops)
            fuse_fc(main)
        loss = fluid.layers.mean(fluid.layers.cross_entropy(predict, y))
        auc = batch_auc = auc_states = None
        if with_auc:  # a streaming metric: extra ops per batch
            auc, batch_auc, auc_states = fluid.layers.auc(predict, y)
        test = main.clone(for_test=True)
        if fuse:
            fuse_embedding_seq_pool_concat(main)
        opt = {"adam": lambda: fluid.optimizer.Adam(lr, lazy_mode=True),
               "sgd": lambda: fluid.optimizer.SGD(lr),
               "adagrad": lambda: fluid.optimizer.Adagrad(lr)}[optimizer]()
        opt.minimize(loss)
    return main, startup, test, {"loss": loss, "auc": auc, "batch_auc": batch_auc,
                                 "predict": predict, "auc_states": auc_states}


def main():
    from fluidity.datafeed import DataFeedDesc, MultiSlotReader
    from fluidity.datafeed.generate import generate_ctr
    ap = argparse.ArgumentParser(description="a small CTR-DNN, Hogwild training",
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--lines", type=int, default=40000, help="training lines to generate")
    ap.add_argument("--epochs", type=int, default=2, help="passes over the training files")
    ap.add_argument("--workers", type=int, default=2, help="Hogwild workers")
    ap.add_argument("--tensorboard", default="", metavar="DIR",
                    help="write TensorBoard scalars (loss, examples/s) to DIR "
                         "(pip install 'fluidity[tensorboard]')")
    a = ap.parse_args()
    shape = dict(vocab=5000, sparse_slots=8, dense_slots=5)
    with tempfile.TemporaryDirectory() as d:
        train = generate_ctr(d, a.lines, files=4, seed=3, **shape)
        test = generate_ctr(d, 5000, files=1, seed=3, prefix="test", **shape)
        print(f"data: {a.lines} generated CTR lines (8 sparse slots over 5000 ids, 5 dense "
              f"features) + 5000 held out, in {d}")
        with open(train["model"]) as f:
            model = json.load(f)
        desc = DataFeedDesc(train["desc"])
        desc.set_batch_size(64)
        main_prog, startup, test_prog, v = build_ctr_dnn(
            model["sparse_slots"], dense_dim=5, vocab=5000, emb_dim=8, hidden=(64, 64),
            lr=0.05, optimizer="sgd")
        exe, scope = fluid.Executor(), fluid.Scope()
        exe.run(startup, scope=scope)
        print(f"train: CTR-DNN (embeddings 5000x8, fc 64-64, softmax), SGD, {a.epochs} "
              f"epoch(s), {a.workers} AsyncExecutor workers")
        for epoch in range(a.epochs):
            res = fluid.AsyncExecutor().run(main_prog, desc, train["files"], a.workers,
                                            fetch=[v["loss"], v["auc"]], scope=scope,
                                            progress=False, fetch_info=["loss", "auc"],
                                            tensorboard_dir=a.tensorboard or None)
            print(f"epoch {epoch + 1}: mean loss {res[0]:.4f}, running AUC {res[1]:.4f}, "
                  f"{res.examples_per_sec:,.0f} examples/s ({res.mode})")
        total, n = 0.0, 0
        for batch in MultiSlotReader(desc, test["files"], batch_size=5000):
            (p,) = exe.run(test_prog, feed=batch, fetch_list=[v["predict"]], scope=scope)
            y = np.asarray(batch["click"]).reshape(-1)
            q = np.clip(p[np.arange(len(y)), y].astype(np.float64), 1e-7, 1)
            total, n = total - np.log(q).sum(), n + len(y)
    print(f"held-out log-loss {total / n:.4f} (optimum {test['optimal_logloss']:.4f}, "
          f"constant click rate {test['base_logloss']:.4f})")


if __name__ == "__main__":
    sys.exit(main())
