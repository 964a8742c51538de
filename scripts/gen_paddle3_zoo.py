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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=OUT, help="fixture root (default: %(default)s)")
    ap.add_argument("--only", nargs="*", choices=sorted(MODELS), help="models to regenerate")
    args = ap.parse_args()
    zoo.OUT = args.out
    os.makedirs(args.out, exist_ok=True)
    for name in args.only or MODELS:
        with paddle.utils.unique_name.guard():
            MODELS[name]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
