"""Four small training models (an MLP, a CNN, sparse embeddings, the CTR-DNN demo over LoD
ids) and the harness that trains one under an executor strategy or a program transform:
shared by the executor tests and the memory-optimization transpiler tests, which compare
every variant with the plain interpreter's run bit for bit."""
import numpy as np

import fluidity as fluid
from paths import EXAMPLES


# --- models: (main, startup, loss, feeds(step) -> dict) -------------------------------------
def mlp(depth=3, width=32, optimizer=lambda: fluid.optimizer.Adam(0.01)):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 11
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [16])
        y = fluid.layers.data("y", [1])
        h = x
        for _ in range(depth):
            h = fluid.layers.fc(h, width, act="relu")
        h = fluid.layers.tanh(fluid.layers.scale(h, 0.5, bias=0.1))
        pred = fluid.layers.fc(h, 1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        optimizer().minimize(loss)

    def feeds(step, batch=8):
        r = np.random.default_rng(step)
        xv = r.normal(size=(batch, 16)).astype("float32")
        return {"x": xv, "y": xv[:, :1] * 2 - xv[:, 1:2]}
    return main, startup, loss, feeds


def cnn():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 5
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        img = fluid.layers.data("img", [1, 8, 8])
        label = fluid.layers.data("label", [1], dtype="int64")
        c = fluid.layers.conv2d(img, 4, 3, padding=1)
        c = fluid.layers.batch_norm(c, act="relu")
        c = fluid.layers.pool2d(c, 2, "max", pool_stride=2)
        c = fluid.layers.dropout(c, 0.3, seed=3)
        c = fluid.layers.conv2d(c, 6, 3, padding=1, act="relu")
        logits = fluid.layers.fc(c, 3)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        fluid.optimizer.Momentum(0.05, 0.9).minimize(loss)

    def feeds(step, batch=4):
        r = np.random.default_rng(100 + step)
        return {"img": r.normal(size=(batch, 1, 8, 8)).astype("float32"),
                "label": r.integers(0, 3, size=(batch, 1)).astype("int64")}
    return main, startup, loss, feeds


def embedding_model():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 9
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ids = fluid.layers.data("ids", [1], dtype="int64")
        y = fluid.layers.data("y", [1])
        e = fluid.layers.embedding(ids, size=[50, 8], is_sparse=True)
        e2 = fluid.layers.embedding(ids, size=[50, 8], is_sparse=True,
                                    param_attr=fluid.ParamAttr(name="emb2"))
        h = fluid.layers.fc(fluid.layers.elementwise_add(e, e2), 8, act="sigmoid")
        loss = fluid.layers.mean(fluid.layers.square_error_cost(fluid.layers.fc(h, 1), y))
        fluid.optimizer.Adam(0.05).minimize(loss)

    def feeds(step, batch=6):
        r = np.random.default_rng(200 + step)
        ids_v = r.integers(0, 50, size=(batch, 1)).astype("int64")
        return {"ids": ids_v, "y": (ids_v % 3).astype("float32")}
    return main, startup, loss, feeds


def ctr_model():
    """The demo's CTR-DNN, small, with its fusion passes: fused_embedding_seq_pool_concat over
    LoD ids (empty sequences included), fc layers, lazy Adam on the sparse table."""
    import sys
    sys.path.insert(0, EXAMPLES)
    from ctr_dnn import build_ctr_dnn
    slots = ["c1", "c2", "c3"]
    main, startup, _, v = build_ctr_dnn(slots, dense_dim=4, vocab=40, emb_dim=3, hidden=(8, 8),
                                        lr=0.05, with_auc=False, seed=9)

    def feeds(step, batch=6):
        r = np.random.default_rng(300 + step)
        f = {"dense_input": r.normal(size=(batch, 4)).astype("float32"),
             "click": r.integers(0, 2, size=(batch, 1)).astype("int64")}
        for s in slots:
            lens = r.integers(0, 3, size=batch)
            t = fluid.LoDTensor()
            t.set(r.integers(0, 40, size=(int(lens.sum()), 1)).astype("int64"),
                  fluid.CPUPlace())
            t.set_recursive_sequence_lengths([lens.tolist()])
            f[s] = t
        return f
    return main, startup, v["loss"], feeds


MODELS = {"mlp": mlp, "cnn": cnn, "embedding": embedding_model, "ctr": ctr_model}


def train(model, strategy=None, steps=3, transform=None, batches=None):
    """Losses of each step and every persistable value after the last."""
    main, startup, loss, feeds = model()
    if transform is not None:
        transform(main, loss)
    exe, scope = fluid.Executor(fluid.CPUPlace(), strategy=strategy), fluid.Scope()
    exe.run(startup, scope=scope)
    losses = []
    for s in range(steps):
        f = feeds(s) if batches is None else feeds(s, batches[s])
        losses.append(exe.run(main, feed=f, fetch_list=[loss], scope=scope)[0])
    state = {v.name: np.array(scope.find_var(v.name).get_tensor())
             for v in main.list_vars() if v.persistable and scope.find_var(v.name) is not None
             and scope.find_var(v.name).is_initialized()}
    exe.close()
    return losses, state


def assert_same(a, b):
    (la, sa), (lb, sb) = a, b
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        assert x.dtype == y.dtype and np.array_equal(x, y), (x, y)
    assert sa.keys() == sb.keys()
    for k in sa:
        assert np.array_equal(sa[k], sb[k]), k


_REF = {}


def reference(name):
    if name not in _REF:
        _REF[name] = train(MODELS[name])
    return _REF[name]
