#!/usr/bin/env python
"""Regenerate the PaddlePaddle 3.x model zoo fixtures under tests/fixtures/paddle3_zoo/.

Run it with a real PaddlePaddle 3.x (3.3.1 made the committed ones; never needed by
Fluidity or its tests):

    .venv-paddle/bin/python scripts/gen_paddle3_zoo.py [--out DIR] [--only NAME ...]

Paddle 3.x saves PIR JSON by default; this script sets `FLAGS_enable_pir_api=0` before
importing paddle, so `paddle.enable_static()` builds legacy ProgramDescs and
`paddle.static.save_inference_model` writes them as `model.pdmodel` (the ProgramDesc
protobuf, `version` 3003001) + `model.pdiparams`. Paddle 3.x has no `paddle.fluid`, so no
`fluid.io` `__model__` writer; the Fluid-1.x directory layout (mlp/model_dir) is made as
scripts/gen_paddle_zoo.py makes it.

The models are scripts/gen_paddle_zoo.py's (the same functions, the same fixed inputs and
parameters), saved by Paddle 3.x, plus:

    sparse_ctr    is_sparse embeddings (`lookup_table` of Fluid's static.nn.embedding with
                  is_sparse/is_distributed routing attributes, and `lookup_table_v2`)
    zero_d_loss   the 0-D results of Paddle >= 2.5 as outputs: mean, reduce_sum over all,
                  accuracy, arg_max of a 1-D row, a slice dropping every dim, numel,
                  softmax_with_cross_entropy + mean (the loss), cross_entropy + mean

The Python APIs that Paddle 3.x wired to PIR-only `_C_ops` calls (`paddle.sum`,
`paddle.matmul`, ...) are given their Paddle 2.x legacy ops by
scripts/paddle3_legacy_shim.py, so the programs hold the ops Paddle 3.x's own legacy
builders write, with the attributes its OpProtos fill in.

Per model: model.pdmodel, model.pdiparams, input.npz, output.npz and meta.json, as the
2.6.2 zoo (scripts/gen_paddle_zoo.py's docstring).

Training programs (tests/fixtures/paddle3_train; `_save_training` says what each holds):
train_sparse_sgd and train_adam, the whole main program Paddle 3.x builds for `minimize`
(backward seeded by a 0-D loss@GRAD, the 0-D learning rate), its persistables before
training and Paddle's losses and persistables after a few steps.
"""
import argparse
import os
import sys

os.environ["FLAGS_enable_pir_api"] = "0"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import paddle  # noqa: E402

import gen_paddle_zoo as zoo  # noqa: E402
import paddle3_legacy_shim  # noqa: E402

paddle3_legacy_shim.install()
OUT = os.path.join(zoo.ROOT, "tests", "fixtures", "paddle3_zoo")
MODELS = dict(zoo.MODELS)


def model(fn):
    MODELS[fn.__name__] = fn
    return fn


@model
def sparse_ctr():
    """Sparse embeddings: Fluid's 1.x-style `lookup_table` (ids [N, 1], is_sparse) and
    `lookup_table_v2` (paddle.nn.Embedding(sparse=True)), summed, fc, sigmoid."""
    main, startup = zoo._programs()
    with paddle.static.program_guard(main, startup):
        user = paddle.static.data("user", [None, 1], "int64")
        items = paddle.static.data("items", [None, 4], "int64")
        helper = paddle.base.layer_helper.LayerHelper("embedding")
        w = paddle.static.create_parameter([30, 6], "float32", name="emb_user")
        u = helper.create_variable_for_type_inference("float32")
        helper.append_op(type="lookup_table", inputs={"Ids": [user], "W": [w]},
                         outputs={"Out": [u]},
                         attrs={"is_sparse": True, "is_distributed": False,
                                "remote_prefetch": False, "padding_idx": -1})
        u = paddle.reshape(u, [-1, 6])
        it = paddle.nn.Embedding(50, 6, sparse=True, padding_idx=0)(items)
        h = paddle.concat([u, paddle.sum(it, axis=1)], axis=1)
        h = paddle.static.nn.fc(h, 8, activation="relu")
        ctr = paddle.nn.functional.sigmoid(paddle.static.nn.fc(h, 1))
    rng = np.random.default_rng(31)
    feed = {"user": rng.integers(0, 30, size=(5, 1)).astype("int64"),
            "items": rng.integers(0, 50, size=(5, 4)).astype("int64")}
    zoo._save("sparse_ctr", main, startup, [user, items], [ctr], feed, seed=21)


@model
def zero_d_loss():
    """Full reductions and losses that Paddle >= 2.5 makes 0-D, as fetched outputs."""
    main, startup = zoo._programs()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [None, 6], "float32")
        label = paddle.static.data("label", [None, 1], "int64")
        logits = paddle.static.nn.fc(x, 4)
        prob = paddle.nn.functional.softmax(logits)
        sce = paddle.nn.functional.softmax_with_cross_entropy(logits, label)
        loss = paddle.mean(sce)
        ce = paddle.mean(paddle.nn.functional.cross_entropy(logits, label, reduction="none"))
        outs = [loss, ce, paddle.sum(x), paddle.max(x), paddle.static.accuracy(prob, label),
                paddle.argmax(x[0]), x[1, 2], paddle.numel(x), paddle.mean(x, axis=[0, 1]),
                paddle.all(x > -5.0)]
    rng = np.random.default_rng(32)
    feed = {"x": rng.normal(size=(5, 6)).astype("float32"),
            "label": rng.integers(0, 4, size=(5, 1)).astype("int64")}
    zoo._save("zero_d_loss", main, startup, [x, label], outs, feed, seed=22)


# --- training programs (tests/fixtures/paddle3_train) ----------------------------------------
TRAIN_OUT = os.path.join(zoo.ROOT, "tests", "fixtures", "paddle3_train")
TRAIN = {}
STEPS = 4


def training(fn):
    TRAIN[fn.__name__] = fn
    return fn


def _save_training(name, main, startup, loss, feeds, seed, out_root):
    """The whole training program as Paddle 3.x built it (forward, backward with its 0-D
    loss@GRAD seed, optimizer ops, the 0-D learning rate): main.pdmodel (the ProgramDesc),
    params.pdiparams (every persistable before training, combined in sorted-name order),
    feeds.npz (step_<i>/<name>), result.npz (loss_<i> per step, then every float persistable
    after the last step) and meta.json."""
    out_dir = os.path.join(out_root, name)
    zoo.shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    exe = paddle.static.Executor(paddle.CPUPlace())
    scope = paddle.static.Scope()
    persist = sorted((v for v in main.list_vars() if zoo.is_persistable(v)),
                     key=lambda v: v.name)
    with paddle.static.scope_guard(scope):
        exe.run(startup)
        rng = np.random.default_rng(seed)   # the parameters only; optimizer state as made
        for p in sorted(main.all_parameters(), key=lambda p: p.name):
            t = scope.find_var(p.name).get_tensor()
            shape = np.array(t).shape
            t.set(rng.normal(0, 1.0 / np.sqrt(shape[0]), size=shape).astype("float32"),
                  paddle.CPUPlace())
        paddle.static.save_vars(exe, out_dir, main, vars=persist, filename="params.pdiparams")
        result = {}
        for i, feed in enumerate(feeds):
            loss_v, = exe.run(main, feed=feed, fetch_list=[loss])
            result[f"loss_{i}"] = np.asarray(loss_v)
        for v in persist:
            arr = np.array(scope.find_var(v.name).get_tensor())
            if arr.dtype.kind == "f":
                result[v.name] = arr
    with open(os.path.join(out_dir, "main.pdmodel"), "wb") as f:
        f.write(main.desc.serialize_to_string())
    np.savez(os.path.join(out_dir, "feeds.npz"),
             **{f"step_{i}/{k}": v for i, f in enumerate(feeds) for k, v in f.items()})
    np.savez(os.path.join(out_dir, "result.npz"), **result)
    ops = sorted({op.type for b in main.blocks for op in b.ops})
    meta = {"paddle_version": paddle.__version__, "loss": loss.name, "steps": len(feeds),
            "feeds": sorted(feeds[0]), "persistables": [v.name for v in persist], "ops": ops}
    with open(os.path.join(out_dir, "meta.json"), "w") as f:
        zoo.json.dump(meta, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{name}: ops {ops}")


@training
def train_sparse_sgd():
    """An is_sparse embedding (SelectedRows gradient) + fc, softmax_with_cross_entropy,
    mean (0-D loss), SGD."""
    main, startup = zoo._programs()
    with paddle.static.program_guard(main, startup):
        ids = paddle.static.data("ids", [None, 3], "int64")
        label = paddle.static.data("label", [None, 1], "int64")
        emb = paddle.nn.Embedding(20, 5, sparse=True)(ids)
        h = paddle.static.nn.fc(paddle.sum(emb, axis=1), 8, activation="tanh")
        logits = paddle.static.nn.fc(h, 3)
        loss = paddle.mean(paddle.nn.functional.softmax_with_cross_entropy(logits, label))
        paddle.optimizer.SGD(0.2).minimize(loss)
    rng = np.random.default_rng(41)
    feeds = [{"ids": rng.integers(0, 20, size=(6, 3)).astype("int64"),
              "label": rng.integers(0, 3, size=(6, 1)).astype("int64")} for _ in range(STEPS)]
    _save_training("train_sparse_sgd", main, startup, loss, feeds, 31, TRAIN_OUT)


@training
def train_adam():
    """fc layers, F.cross_entropy (mean reduction: a 0-D loss), Adam (0-D learning rate,
    [1] beta powers)."""
    main, startup = zoo._programs()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [None, 6], "float32")
        label = paddle.static.data("label", [None, 1], "int64")
        h = paddle.static.nn.fc(x, 10, activation="relu")
        logits = paddle.static.nn.fc(h, 4)
        loss = paddle.nn.functional.cross_entropy(logits, label)
        paddle.optimizer.Adam(0.05).minimize(loss)
    rng = np.random.default_rng(42)
    feeds = [{"x": rng.normal(size=(5, 6)).astype("float32"),
              "label": rng.integers(0, 4, size=(5, 1)).astype("int64")} for _ in range(STEPS)]
    _save_training("train_adam", main, startup, loss, feeds, 32, TRAIN_OUT)


def write_op_protos(path):
    """Paddle's OpProto (slots, attributes, which attributes are "extra") of every op type
    Fluidity registers, and each type's op version, as JSON: what Paddle 3.x may write on
    those ops, for tests/ops/test_paddle3_attrs.py. Fluidity is imported from this checkout
    (its framework.proto lives in its own package, so both load in one process)."""
    sys.path.insert(0, zoo.ROOT)
    from fluidity.ops import registry
    from paddle.base.proto import framework_pb2 as ppb
    protos = {}
    for raw in paddle.base.core.get_all_op_protos():
        p = ppb.OpProto.FromString(raw)
        if registry.has(p.type):
            protos[p.type] = {"attrs": sorted(a.name for a in p.attrs),
                              "extra": sorted(a.name for a in p.attrs if a.extra),
                              "inputs": sorted(v.name for v in p.inputs),
                              "outputs": sorted(v.name for v in p.outputs)}
    for pair in _op_versions():
        if pair[0] in protos:
            protos[pair[0]]["version"] = pair[1]
    with open(path, "w") as f:
        zoo.json.dump({"paddle_version": paddle.__version__, "ops": protos}, f, indent=0,
                      sort_keys=True)
        f.write("\n")
    print(f"{path}: {len(protos)} op types")


def _op_versions():
    """(op type, version) of every op Paddle versions: what a saved program records."""
    return [(t, v.version_id()) for t, v in paddle.base.core.get_op_version_map().items()]


def main():
    global TRAIN_OUT
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=OUT, help="fixture root (default: %(default)s)")
    ap.add_argument("--train-out", default=TRAIN_OUT,
                    help="training fixture root (default: %(default)s)")
    ap.add_argument("--only", nargs="*", choices=sorted(MODELS) + sorted(TRAIN),
                    help="models to regenerate")
    args = ap.parse_args()
    zoo.OUT, TRAIN_OUT = args.out, args.train_out
    os.makedirs(args.out, exist_ok=True)
    if not args.only:
        write_op_protos(os.path.join(zoo.ROOT, "tests", "fixtures", "paddle3_op_protos.json"))
    for name in args.only or list(MODELS) + list(TRAIN):
        with paddle.utils.unique_name.guard():
            (TRAIN.get(name) or MODELS[name])()
    return 0


if __name__ == "__main__":
    sys.exit(main())
