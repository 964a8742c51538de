"""The models the CUDA target is built for (MLP, CTR-DNN, CNN training steps), their feeds,
and a trainer that runs one on a place: shared by tests/codegen/test_cuda_nvcc.py and
tests/executor/test_cuda_executor.py (on the emulated device, or a GPU)."""
import os
import sys

import numpy as np
from paths import EXAMPLES

import fluidity as fluid

sys.path.insert(0, EXAMPLES)
from ctr_dnn import build_ctr_dnn  # noqa: E402

SLOTS = [f"s{k}" for k in range(4)]


def mlp(optimizer="sgd"):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 11
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [20])
        label = fluid.layers.data("label", [1], dtype="int64")
        h = fluid.layers.fc(x, 32, act="relu")
        h = fluid.layers.fc(h, 16, act="sigmoid")
        logits = fluid.layers.fc(h, 4)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        opt = fluid.optimizer.SGD(0.1) if optimizer == "sgd" else fluid.optimizer.Adam(0.01)
        opt.minimize(loss)
    return main, startup, loss


def mlp_feed(rng):
    n = int(rng.integers(1, 9))
    return {"x": rng.normal(size=(n, 20)).astype("float32"),
            "label": rng.integers(0, 4, (n, 1)).astype("int64")}


def ctr(optimizer="sgd"):
    main, startup, _, v = build_ctr_dnn(SLOTS, dense_dim=5, vocab=1000, hidden=(32, 16),
                                        optimizer=optimizer, with_auc=False)
    main.random_seed = startup.random_seed = 3
    return main, startup, v["loss"]


def ctr_feed(rng, batch=8):
    f = {}
    for s in SLOTS:
        lens = rng.integers(0, 5, batch).tolist()           # empty sequences included
        ids = rng.integers(0, 1000, (sum(lens), 1)).astype(np.int64)
        f[s] = fluid.create_lod_tensor(ids, [lens])
    f["dense_input"] = rng.random((batch, 5), dtype=np.float32)
    f["click"] = rng.integers(0, 2, (batch, 1)).astype(np.int64)
    return f


def cnn(optimizer="adam"):
    """digits' CNN (examples/digits.py): conv + batch_norm + relu, max pool, conv + relu,
    avg pool, fc; the first conv has no bias (batch_norm's shift replaces it: a bias there
    has a zero gradient, whose rounding noise Adam would scale up to whole steps)."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        img = fluid.layers.data("img", [1, 8, 8])
        label = fluid.layers.data("label", [1], dtype="int64")
        x = fluid.layers.conv2d(img, num_filters=8, filter_size=3, padding=1, bias_attr=False)
        x = fluid.layers.batch_norm(x, act="relu")
        x = fluid.layers.pool2d(x, pool_size=2, pool_stride=2, pool_type="max")
        x = fluid.layers.conv2d(x, num_filters=16, filter_size=3, padding=1, act="relu")
        x = fluid.layers.pool2d(x, pool_size=2, pool_stride=2, pool_type="avg")
        logits = fluid.layers.fc(x, 10)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        opt = fluid.optimizer.SGD(0.05) if optimizer == "sgd" else fluid.optimizer.Adam(0.01)
        opt.minimize(loss)
    return main, startup, loss


def cnn_feed(rng, batch=6):
    return {"img": rng.random((batch, 1, 8, 8), dtype=np.float32),
            "label": rng.integers(0, 10, (batch, 1)).astype(np.int64)}


MODELS = {"mlp": (mlp, mlp_feed), "ctr": (ctr, ctr_feed), "cnn": (cnn, cnn_feed)}


def train(model, optimizer, place, steps=20, scope=None):
    """(losses, {parameter: value}, scope) of `steps` training steps on `place`."""
    build, make_feed = MODELS[model]
    main, startup, loss = build(optimizer)
    exe, scope = fluid.Executor(place), scope or fluid.Scope()
    exe.run(startup, scope=scope)
    rng = np.random.default_rng(0)
    losses = [float(exe.run(main, feed=make_feed(rng), fetch_list=[loss], scope=scope)[0])
              for _ in range(steps)]
    params = {p.name: np.array(scope.find_var(p.name).get_tensor())
              for p in main.all_parameters()}
    return np.array(losses), params, scope


def has_gpu():
    return fluid.core.get_cuda_device_count() > 0 and not os.environ.get(
        "FLUIDITY_CUDA_EMULATE")
