"""Readers' cost: a training loop fed by a DataLoader vs. by pre-built numpy feeds, and
exe.train_from_dataset vs. AsyncExecutor.run.

1. MLP 784-256-128-10 (relu, relu, softmax_with_cross_entropy + mean, SGD 0.01), batch 64,
   `--batches` batches a pass (pre-built float32/int64 arrays, cycled):
     feed      exe.run(main, feed={x, label}, fetch_list=[loss]) per batch (the baseline)
     loader    iterable fluid.io.DataLoader (use_double_buffer, set_batch_generator over the
               same arrays): `for data in loader(): exe.run(main, feed=data, ...)`
     in-prog   non-iterable DataLoader: the reader in the program (create_py_reader +
               create_double_buffer_reader + read), exe.run(main) until EOFException
   steps/s of a pass, `--rounds` rounds in alternating order; medians and ratios to feed.
2. The CTR-DNN (examples/ctr_dnn.py, SGD, no AUC) on generated CTR data (`--lines` lines in
   8 files), `--workers` Hogwild workers, one epoch per run from fresh parameters:
     async     fluid.AsyncExecutor().run(main, desc, files, workers)
     dataset   exe.train_from_dataset(main, QueueDataset over the same files, thread=workers)
   examples/s, `--rounds` rounds alternating; medians and the ratio.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/readers.py
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import fluidity as fluid  # noqa: E402
from ctr_dnn import build_ctr_dnn  # noqa: E402
from fluidity.datafeed.generate import generate_ctr  # noqa: E402

SIZES = (784, 256, 128, 10)


def mlp(loader_kind=None):
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 1
    loader = None
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [SIZES[0]])
        label = fluid.layers.data("label", [1], dtype="int64")
        if loader_kind is not None:
            loader = fluid.io.DataLoader.from_generator(
                feed_list=[x, label], capacity=4, use_double_buffer=True,
                iterable=loader_kind == "loader")
        h = fluid.layers.fc(x, SIZES[1], act="relu")
        h = fluid.layers.fc(h, SIZES[2], act="relu")
        logits = fluid.layers.fc(h, SIZES[3])
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        fluid.optimizer.SGD(0.01).minimize(loss)
    exe = fluid.Executor()
    exe.run(startup)
    return main, loss, exe, loader


def mlp_pass(kind, batches, n):
    """Steps/s of one pass of n batches fed the `kind` way."""
    main, loss, exe, loader = mlp(None if kind == "feed" else kind)

    def gen():
        for i in range(n):
            yield batches[i % len(batches)]
    # one warm-up step prepares the plan
    exe.run(main, feed={"x": batches[0][0], "label": batches[0][1]}, fetch_list=[loss]) \
        if kind != "in-prog" else None
    t0, c0 = time.perf_counter(), time.process_time()
    if kind == "feed":
        for x, y in gen():
            exe.run(main, feed={"x": x, "label": y}, fetch_list=[loss])
    elif kind == "loader":
        loader.set_batch_generator(gen)
        for data in loader():
            exe.run(main, feed=data, fetch_list=[loss])
    else:
        loader.set_batch_generator(gen)
        loader.start()
        try:
            while True:
                exe.run(main, fetch_list=[loss])
        except fluid.core.EOFException:
            loader.reset()
    return n / (time.perf_counter() - t0), n / (time.process_time() - c0)


def ctr_run(kind, files, desc_vars, workers):
    model_slots, vocab = desc_vars
    main, startup, test, v = build_ctr_dnn(model_slots, vocab=vocab, emb_dim=10,
                                           hidden=(400, 400, 400), lr=0.5, optimizer="sgd",
                                           with_auc=False)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    block = main.global_block()
    use_vars = [block.var("dense_input")] + [block.var(s) for s in model_slots] + \
        [block.var("click")]
    ds = fluid.DatasetFactory().create_dataset("QueueDataset")
    ds.set_use_var(use_vars)
    ds.set_batch_size(128)
    ds.set_thread(workers)
    ds.set_filelist(files)
    t0, c0 = time.perf_counter(), time.process_time()
    if kind == "async":
        res = fluid.AsyncExecutor().run(main, ds.data_feed_desc(), files, workers,
                                        fetch=[v["loss"]], scope=scope, progress=False)
    else:
        res = exe.train_from_dataset(main, ds, scope=scope, thread=workers,
                                     fetch_list=[v["loss"]])
    return res.examples / (time.perf_counter() - t0), res.examples / (time.process_time() - c0)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--lines", type=int, default=100_000)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--skip-ctr", action="store_true")
    args = ap.parse_args(argv)

    rng = np.random.default_rng(0)
    batches = [(rng.random((64, SIZES[0]), dtype=np.float32),
                rng.integers(0, SIZES[-1], (64, 1)).astype(np.int64)) for _ in range(8)]
    kinds = ["feed", "loader", "in-prog"]
    res = {k: [] for k in kinds}
    for r in range(args.rounds):
        for k in (kinds if r % 2 == 0 else kinds[::-1]):
            res[k].append(mlp_pass(k, batches, args.batches))
    report(f"MLP batch 64, {args.batches} batches a pass, {args.rounds} rounds (steps/s)",
           res, "feed")
    if args.skip_ctr:
        return
    with tempfile.TemporaryDirectory() as d:
        info = generate_ctr(d, args.lines, files=8, seed=1)
        model = json.load(open(info["model"]))
        files = sorted(info["files"])
        spec = (model["sparse_slots"], model["vocab"])
        ctr_run("async", files[:1], spec, args.workers)     # build the native code once
        out = {"async": [], "dataset": []}
        for r in range(args.rounds):
            for k in (["async", "dataset"] if r % 2 == 0 else ["dataset", "async"]):
                out[k].append(ctr_run(k, files, spec, args.workers))
    report(f"CTR-DNN, {args.lines} lines, {args.workers} workers, {args.rounds} rounds "
           f"(examples/s)", out, "async")


def report(title, res, base):
    """Medians of wall-clock and CPU-time rates, and per-round ratios to `base`. On a
    loaded machine the CPU-time rate (work per CPU second of the process, all its threads)
    is the steadier measure of cost; wall-clock rates follow the scheduler."""
    print(title)
    for which, col in (("wall", 0), ("cpu", 1)):
        b = statistics.median(r[col] for r in res[base])
        for k, runs in res.items():
            vals = [r[col] for r in runs]
            ratios = [v[col] / w[col] for v, w in zip(runs, res[base])]
            print(f"  {which:4s} {k:8s} median {statistics.median(vals):10.1f}  ratio to "
                  f"{base} {statistics.median(vals) / b:.3f}  (per round "
                  f"{', '.join(f'{x:.3f}' for x in ratios)})")


if __name__ == "__main__":
    main()
