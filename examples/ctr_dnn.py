"""The CTR-DNN of Paddle's AsyncExecutor examples: one sparse embedding per categorical
slot (summed over the slot's ids), concatenated with the dense features, three fc+relu
layers and a 2-way softmax; cross-entropy loss and a streaming AUC.

    main, startup, vars_ = build_ctr_dnn(slot_names, dense_dim, vocab)

With fuse=True two IR passes rewrite the embeddings: each lookup+sum-pool pair becomes one
fused_embedding_seq_pool op (Paddle's op: the test program, which may be saved for Paddle,
stops there), each fc layer's mul + bias + relu becomes one `fc` op, and in the training
program the 26 of them feeding the concat become one
fused_embedding_seq_pool_concat (one kernel and one sparse gradient for all slots).
"""
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
