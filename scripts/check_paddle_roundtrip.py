#!/usr/bin/env python
"""Check model interchange with a real PaddlePaddle, both ways.

Run it with Fluidity's interpreter; Paddle runs in its own (``.venv-paddle`` by default,
``--paddle-python`` to change) through a subprocess, so neither environment needs the other:

    .venv/bin/python scripts/check_paddle_roundtrip.py [--paddle-python PATH] [--keep DIR]

1. Fluidity -> Paddle: an MLP, one with 0-D outputs (mean, full reduce_max: Paddle must
   give them shape [] too), an embedding model and the demo's CTR-DNN (LoD ids, its
   fused_embedding_seq_pool and fc ops; Paddle 3.x no longer registers that op, so it is
   reported as skipped there) built with fluidity.layers are saved in
   three layouts (directory + separate parameter files, directory + combined file, 2.x
   prefix .pdmodel/.pdiparams). Paddle's `paddle.static.load_inference_model` loads and runs
   each; outputs must match Fluidity's. Paddle then re-saves the loaded parameters with
   `paddle.static.save_vars(filename=...)`: the bytes must equal Fluidity's .pdiparams.
2. Paddle -> Fluidity: Paddle builds an MLP (static.nn.fc) and an embedding model
   (static.nn.embedding) and saves them with `paddle.static.save_inference_model` (prefix)
   and as a directory (`__model__` + separate files via `save_vars`). Fluidity loads and
   runs each; outputs must match Paddle's, and Fluidity's re-saved .pdiparams must equal
   Paddle's byte for byte.

Prints one line per check and exits 1 if any failed.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import fluidity as fluid  # noqa: E402
from fluidity import io as fio  # noqa: E402

RTOL, ATOL = 1e-5, 1e-6

# --- what Paddle runs -----------------------------------------------------------------------
PADDLE_LOAD = r"""
import json, os, sys, numpy as np, paddle
paddle.enable_static()
work = sys.argv[1]
spec = json.load(open(os.path.join(work, "spec.json")))
exe = paddle.static.Executor(paddle.CPUPlace())
results = {}
for name, m in spec.items():
    data = np.load(os.path.join(work, name + ".npz"))
    for layout, (path, kw) in m["layouts"].items():
        key = f"{name}/{layout}"
        try:
            with paddle.static.scope_guard(paddle.static.Scope()):
                prog, feeds, fetches = paddle.static.load_inference_model(path, exe, **kw)
                feed = {}
                for n in feeds:  # a LoD input comes with its offsets as lod_<name>
                    feed[n] = data["in_" + n]
                    if "lod_" + n in data:
                        t = paddle.base.core.LoDTensor()
                        t.set(feed[n], paddle.CPUPlace())
                        t.set_lod([data["lod_" + n].tolist()])
                        feed[n] = t
                outs = exe.run(prog, feed=feed, fetch_list=fetches)
                diffs = [float(np.abs(o - data[f"out_{i}"]).max()) for i, o in enumerate(outs)]
                res = {"ok": all(np.allclose(o, data[f"out_{i}"], rtol=%(rtol)g, atol=%(atol)g)
                                 and np.shape(o) == data[f"out_{i}"].shape   # 0-D stays 0-D
                                 for i, o in enumerate(outs)),
                       "max_abs_diff": max(diffs), "feeds": feeds}
                if layout == "prefix":  # re-save the loaded parameters with Paddle
                    gb = prog.global_block()
                    pvars = [v for v in prog.list_vars() if v.persistable and
                             v.type not in (paddle.base.core.VarDesc.VarType.FEED_MINIBATCH,
                                            paddle.base.core.VarDesc.VarType.FETCH_LIST)]
                    paddle.static.save_vars(exe, os.path.join(work, "resaved"), prog,
                                            vars=pvars, filename=name + ".pdiparams")
                    mine = open(path + ".pdiparams", "rb").read()
                    theirs = open(os.path.join(work, "resaved", name + ".pdiparams"), "rb").read()
                    res["params_bytes_identical"] = mine == theirs
                    res["ok"] = res["ok"] and mine == theirs
        except Exception as e:
            res = {"ok": False, "error": f"{type(e).__name__}: {e}"[:2000]}
        results[key] = res
json.dump(results, open(os.path.join(work, "paddle_results.json"), "w"), indent=1)
""" % {"rtol": RTOL, "atol": ATOL}

PADDLE_SAVE = r"""
import json, os, sys, numpy as np, paddle
from paddle.framework.io_utils import is_persistable
paddle.enable_static()
work = sys.argv[1]
exe = paddle.static.Executor(paddle.CPUPlace())
rng = np.random.default_rng(7)
spec = {}

def save(name, main, startup, feed_vars, fetch_vars, feed):
    with paddle.static.scope_guard(paddle.static.Scope()):
        exe.run(startup)
        outs = exe.run(main, feed=feed, fetch_list=fetch_vars)
        prefix = os.path.join(work, "paddle_" + name, "model")
        paddle.static.save_inference_model(prefix, feed_vars, fetch_vars, exe, program=main)
        d = os.path.join(work, "paddle_" + name + "_dir")
        os.makedirs(d, exist_ok=True)
        prog = paddle.static.normalize_program(main, feed_vars, fetch_vars)
        with open(os.path.join(d, "__model__"), "wb") as f:
            f.write(paddle.static.serialize_program(feed_vars, fetch_vars, program=main))
        paddle.static.save_vars(exe, d, prog, predicate=is_persistable)
    np.savez(os.path.join(work, "paddle_" + name + ".npz"),
             **{"in_" + k: v for k, v in feed.items()},
             **{f"out_{i}": o for i, o in enumerate(outs)})
    spec[name] = {"prefix": prefix, "dir": d, "feeds": list(feed)}

main, startup = paddle.static.Program(), paddle.static.Program()
with paddle.static.program_guard(main, startup):
    x = paddle.static.data("x", [None, 4], "float32")
    h = paddle.static.nn.fc(x, 8, activation="relu")
    y = paddle.static.nn.fc(h, 3, activation="softmax")
save("mlp", main, startup, [x], [y], {"x": rng.normal(size=(5, 4)).astype("float32")})

main, startup = paddle.static.Program(), paddle.static.Program()
with paddle.static.program_guard(main, startup):
    ids = paddle.static.data("ids", [None, 1], "int64")
    e = paddle.static.nn.embedding(ids, [20, 6])
    y = paddle.static.nn.fc(paddle.reshape(e, [-1, 6]), 3, activation="softmax")
save("embedding", main, startup, [ids], [y],
     {"ids": rng.integers(0, 20, size=(7, 1)).astype("int64")})
json.dump(spec, open(os.path.join(work, "paddle_spec.json"), "w"), indent=1)
"""


def run_paddle(python, code, work):
    # Paddle 3.x builds PIR programs by default; the ProgramDesc (.pdmodel) format wants the
    # legacy IR, which Paddle 2.x always used
    env = {**os.environ, "FLAGS_enable_pir_api": "0"}
    r = subprocess.run([python, "-c", code, work], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"Paddle ({python}) failed:\n{r.stderr[-4000:]}")


# --- Fluidity -> Paddle -----------------------------------------------------------------------
def _mlp(scalars=False, seed=1):
    """x -> fc relu -> fc softmax; with `scalars` the outputs are 0-D (Paddle >= 2.5's
    shapes): a mean of the softmax and a full reduce_max of the hidden layer."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [4])
        h = fluid.layers.fc(x, 8, act="relu")
        y = fluid.layers.fc(h, 3, act="softmax")
        outs = [fluid.layers.mean(y), fluid.layers.reduce_max(h), y] if scalars else [y, h]
    feed = {"x": np.random.default_rng(seed).normal(size=(5, 4)).astype("float32")}
    return main, startup, [x], outs, feed


def _embedding():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ids = fluid.layers.data("ids", [1], dtype="int64")
        e = fluid.layers.embedding(ids, [20, 5])
        y = fluid.layers.fc(e, 3, act="softmax")
    feed = {"ids": np.random.default_rng(2).integers(0, 20, size=(6, 1)).astype("int64")}
    return main, startup, [ids], [y], feed


def _ctr():
    """The demo's CTR-DNN, small: the inference program build_ctr_dnn makes (its per-slot
    fused_embedding_seq_pool ops and fused `fc` layers are Paddle ops), fed LoD ids."""
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    from ctr_dnn import build_ctr_dnn
    slots = ["c1", "c2", "c3"]
    _, startup, test, v = build_ctr_dnn(slots, dense_dim=4, vocab=50, emb_dim=3, hidden=(8,),
                                        optimizer="sgd", with_auc=False)
    block = test.global_block()
    rng = np.random.default_rng(3)
    lens = [2, 1, 3, 0, 1]
    feed = {"dense_input": rng.normal(size=(5, 4)).astype("float32")}
    for s in slots:
        t = fluid.LoDTensor()
        t.set(rng.integers(0, 50, size=(sum(lens), 1)).astype("int64"), fluid.CPUPlace())
        t.set_recursive_sequence_lengths([lens])
        feed[s] = t
    feed["click"] = rng.integers(0, 2, size=(5, 1)).astype("int64")  # the loss ops want it
    feed_vars = [block.var("dense_input")] + [block.var(s) for s in slots]
    return test, startup, feed_vars, [v["predict"]], feed


def save_fluidity_models(work):
    exe = fluid.Executor(fluid.CPUPlace())
    spec = {}
    for name, build in [("mlp", _mlp), ("scalars", lambda: _mlp(scalars=True, seed=4)),
                        ("embedding", _embedding), ("ctr", _ctr)]:
        main, startup, feed_vars, fetch_vars, feed = build()
        names = [v.name for v in feed_vars]
        with fluid.scope_guard(fluid.Scope()):
            exe.run(startup)
            outs = exe.run(main, feed=feed, fetch_list=fetch_vars)
            d = os.path.join(work, name)
            fio.save_inference_model(d + "_sep", names, fetch_vars, exe, main)
            fio.save_inference_model(d + "_comb", names, fetch_vars, exe, main,
                                     params_filename="params")
            fio.save_inference_model(os.path.join(d, name), feed_vars, fetch_vars, exe, main)
        np.savez(os.path.join(work, name + ".npz"),
                 **{"in_" + k: np.asarray(v) for k, v in feed.items()},
                 **{"lod_" + k: np.asarray(v.lod()[0]) for k, v in feed.items()
                    if isinstance(v, fluid.LoDTensor) and v.lod()},
                 **{f"out_{i}": o for i, o in enumerate(outs)})
        spec[name] = {"layouts": {
            "dir+separate": [d + "_sep", {"model_filename": "__model__",
                                          "params_filename": None}],
            "dir+combined": [d + "_comb", {"model_filename": "__model__",
                                           "params_filename": "params"}],
            "prefix": [os.path.join(d, name), {}]}}
    with open(os.path.join(work, "spec.json"), "w") as f:
        json.dump(spec, f)


# --- Paddle -> Fluidity -----------------------------------------------------------------------
def load_paddle_models(work):
    with open(os.path.join(work, "paddle_spec.json")) as f:
        spec = json.load(f)
    exe = fluid.Executor(fluid.CPUPlace())
    results = {}
    for name, m in spec.items():
        data = np.load(os.path.join(work, f"paddle_{name}.npz"))
        for layout in ("prefix", "dir"):
            key = f"{name}/{layout}"
            try:
                with fluid.scope_guard(fluid.Scope()):
                    prog, feeds, fetches = fio.load_inference_model(m[layout], exe)
                    outs = exe.run(prog, feed={n: data["in_" + n] for n in feeds},
                                   fetch_list=fetches)
                    res = {"ok": all(np.allclose(o, data[f"out_{i}"], rtol=RTOL, atol=ATOL)
                                     for i, o in enumerate(outs)),
                           "max_abs_diff": max(float(np.abs(o - data[f"out_{i}"]).max())
                                               for i, o in enumerate(outs)),
                           "ops": sorted({op.type for op in prog.global_block().ops})}
                    if layout == "prefix":  # re-save with Fluidity: same bytes as Paddle's
                        out = os.path.join(work, "fluidity_resaved", name)
                        fio.save_persistables(exe, os.path.dirname(out), prog,
                                              name + ".pdiparams")
                        with open(out + ".pdiparams", "rb") as f1, \
                                open(m["prefix"] + ".pdiparams", "rb") as f2:
                            res["params_bytes_identical"] = f1.read() == f2.read()
                        res["ok"] = res["ok"] and res["params_bytes_identical"]
            except Exception as e:  # report, don't stop
                res = {"ok": False, "error": f"{type(e).__name__}: {e}"[:2000]}
            results[key] = res
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--paddle-python", default=os.path.join(ROOT, ".venv-paddle", "bin",
                                                            "python"))
    ap.add_argument("--keep", help="work in this directory and keep the files")
    args = ap.parse_args()
    if not os.path.exists(args.paddle_python):
        sys.exit(f"no Paddle interpreter at {args.paddle_python} (--paddle-python)")
    work = args.keep or tempfile.mkdtemp(prefix="paddle_roundtrip_")
    os.makedirs(work, exist_ok=True)

    save_fluidity_models(work)
    run_paddle(args.paddle_python, PADDLE_LOAD, work)
    with open(os.path.join(work, "paddle_results.json")) as f:
        to_paddle = json.load(f)
    run_paddle(args.paddle_python, PADDLE_SAVE, work)
    from_paddle = load_paddle_models(work)

    failed = 0
    for title, results in [("Fluidity-saved model, run by Paddle", to_paddle),
                           ("Paddle-saved model, run by Fluidity", from_paddle)]:
        print(title)
        for key, r in results.items():
            # an op this Paddle no longer has (Paddle 3.x dropped fused_embedding_seq_pool's
            # CPU kernel) is Paddle's limit, not an interchange failure: reported, not counted
            gone = not r["ok"] and "is not registered" in r.get("error", "")
            failed += not r["ok"] and not gone
            detail = r.get("error") or (
                f"max |diff| {r['max_abs_diff']:.2e}" +
                (f", .pdiparams byte-identical: {r['params_bytes_identical']}"
                 if "params_bytes_identical" in r else "") +
                (f", ops {r['ops']}" if "ops" in r else ""))
            mark = "ok  " if r["ok"] else "skip" if gone else "FAIL"
            print(f"  {mark} {key:24s} {detail.splitlines()[0] if gone else detail}")
    print(f"{'all checks passed' if not failed else f'{failed} check(s) failed'} (files in {work})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
