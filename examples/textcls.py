"""Bag-of-words text classifier, as a Fluid program for AsyncExecutor.

word ids (one LoD sequence per document) -> sparse embedding -> sequence_pool (sum or
average) -> fc -> softmax over the classes; cross-entropy loss. With sum pooling and no
hidden layer the model is linear in the bag of words, the family of the Bayes-optimal
classifier of fluidity.datafeed.generate_text's documents.

    main, startup, test, v = build_textcls(vocab=10000, classes=2, dim=16)
    v["loss"], v["predict"] ([batch, classes] probabilities)

With fuse=True (and sum pooling) the lookup and the pool are one fused_embedding_seq_pool op.
"""
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
