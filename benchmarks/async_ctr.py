"""Hogwild CTR training: scaling with workers, quality vs. a synchronous baseline, and
throughput vs. PyTorch Hogwild and PaddlePaddle's train_from_dataset — in one run.

Workload (defaults): the demo's synthetic CTR data (fluidity.datafeed.generate: 26 sparse slots
of Zipf ids hashed into 10^6 buckets, 13 dense features, clicks from a known logistic model),
`--lines` (400,000) training lines in 32 files and 50,000 held-out lines; the CTR-DNN (one
shared 10^6 x 10 sparse embedding table, sum-pooled per slot, concat dense, 3 fc layers of
400 + relu, 2-way softmax, cross-entropy), SGD lr `--lr` (0.5), batch 128 per worker.

Quality (`--epochs` 4 over all files; each run from the same initial parameters):
  sync     plain fluid.Executor over MultiSlotReader batches in one process (the baseline)
  async-1  AsyncExecutor, 1 worker
  async-N  AsyncExecutor, N = os.cpu_count() workers (worker threads running the compiled
           training step: the program compiles whole)
held-out log-loss/AUC of each (vs. the generating model's optimum), and a PNG of training
loss vs. wall time.

Throughput (`--rounds` 5 rounds, each run one epoch over the first `--round-files` 16 files
from fresh parameters, in alternating order; medians and per-round ratios, since the VM's
speed drifts by 10-40% over minutes):
  async-1, async-N as above
  proc-N   AsyncExecutor with workers="processes": forked workers running the interpreter
           over shared-memory parameters (the mode before compiled steps)
  indep-N  the control: N independent async-1 trainers at once, each on every N-th file with
           private parameters; indep-N / async-1 is what this machine gives N copies of the
           single-worker job (memory, L3 and the cores' clocks are shared, not only the cores)
  torch-N  PyTorch Hogwild (torch.multiprocessing, share_memory(), sparse nn.EmbeddingBag,
           1 thread per process, torch.optim.SGD) on the same files, model and batch size,
           when torch is importable (optional: `pip install torch==2.13.0`); timed from
           its workers' first step to their last (their ~1.5 s start is not counted, where
           Fluidity's times include everything from the call to its return)
  paddle-N PaddlePaddle's train_from_dataset (QueueDataset, N threads) on the same files, when
           a Python with paddle is given (--paddle-python; default .venv-paddle/bin/python)
Prints examples/s, the N-vs-1 scaling ratio and the ratios to PyTorch and Paddle.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/async_ctr.py
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import fluidity as fluid  # noqa: E402
from ctr_dnn import build_ctr_dnn  # noqa: E402
from demo import ensure_data, evaluate  # noqa: E402
from fluidity.datafeed import DataFeedDesc, MultiSlotReader  # noqa: E402

EMB, HIDDEN, BATCH = 10, (400, 400, 400), 128


def fresh_model(model, lr):
    # no streaming AUC in the trained program: the PyTorch baseline computes none either
    main, startup, test, v = build_ctr_dnn(model["sparse_slots"], vocab=model["vocab"],
                                           emb_dim=EMB, hidden=HIDDEN, lr=lr, optimizer="sgd",
                                           with_auc=False)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    return main, test, v, exe, scope


def epoch_lrs(lr, epochs, decay):
    """The learning rate of each epoch: lr, then times `decay` each epoch (a step schedule
    every run here follows, PyTorch's included)."""
    return [lr * decay ** e for e in range(epochs)]


def set_lr(main, scope, lr):
    """Set the program's SGD learning rate in place (shared with Hogwild workers)."""
    for name in {op.input("LearningRate")[0] for op in main.global_block().ops
                 if op.type == "sgd"}:
        np.asarray(scope.find_var(name).get_tensor())[...] = lr


def run_sync(model, desc, files, epochs, lr, decay=1.0):
    main, test, v, exe, scope = fresh_model(model, lr)
    hist, n, t0 = [], 0, time.perf_counter()
    for rate in epoch_lrs(lr, epochs, decay):
        set_lr(main, scope, rate)
        losses = []
        for batch in MultiSlotReader(desc, files):
            (l,) = exe.run(main, feed=batch, fetch_list=[v["loss"]], scope=scope)
            n += len(batch["click"].lod()[0]) - 1 if batch["click"].lod() else \
                np.asarray(batch["click"]).shape[0]
            losses.append(float(l))
            if len(losses) == 20:
                hist.append((time.perf_counter() - t0, float(np.mean(losses))))
                losses = []
    secs = time.perf_counter() - t0
    return {"examples": n, "seconds": secs, "eps": n / secs, "curve": hist}, (exe, scope,
                                                                            test, v)


def run_async(model, desc, files, epochs, lr, workers, decay=1.0, mode="auto"):
    main, test, v, exe, scope = fresh_model(model, lr)
    hist, n, secs = [], 0, 0.0
    for rate in epoch_lrs(lr, epochs, decay):
        set_lr(main, scope, rate)
        t0 = time.perf_counter()
        marks = []
        res = fluid.AsyncExecutor().run(
            main, desc, files, workers, fetch=[v["loss"]], scope=scope, progress=False,
            workers=mode, callback=lambda seen, f: marks.append((time.perf_counter() - t0, f[v["loss"].name])))
        hist += [(secs + t, loss) for t, loss in marks]
        n += res.examples
        secs += res.seconds
    return {"examples": n, "seconds": secs, "eps": n / secs, "curve": hist}, (exe, scope,
                                                                            test, v)


TORCH_WORKER = r"""
import json, sys, time
import numpy as np
import torch
import torch.multiprocessing as mp
sys.path.insert(0, sys.argv[2])
from fluidity.datafeed import DataFeedDesc, MultiSlotReader

class CtrDnn(torch.nn.Module):
    def __init__(self, vocab, dense_dim, slots, emb, hidden):
        super().__init__()
        self.emb = torch.nn.EmbeddingBag(vocab, emb, mode="sum", sparse=True)
        torch.nn.init.uniform_(self.emb.weight, -0.01, 0.01)
        dims = [slots * emb + dense_dim] + list(hidden)
        self.fcs = torch.nn.ModuleList(torch.nn.Linear(a, b) for a, b in zip(dims, dims[1:]))
        self.out = torch.nn.Linear(dims[-1], 2)

    def forward(self, ids, offsets, dense, n_slots):
        e = self.emb(ids, offsets).view(n_slots, -1, self.emb.embedding_dim)
        h = torch.cat([e.permute(1, 0, 2).reshape(e.shape[1], -1), dense], dim=1)
        for fc in self.fcs:
            h = torch.relu(fc(h))
        return self.out(h)

def batches(desc, files, slots):
    for b in MultiSlotReader(desc, files):
        ids, offs, base = [], [], 0
        for s in slots:  # one bag per (slot, example): bags of slot 0 first, then slot 1, ...
            t = b[s]
            lod = np.asarray(t.lod()[0])
            ids.append(np.asarray(t).reshape(-1))
            offs.append(lod[:-1] + base)
            base += lod[-1]
        yield (torch.from_numpy(np.concatenate(ids)), torch.from_numpy(np.concatenate(offs)),
               torch.from_numpy(np.asarray(b["dense_input"])),
               torch.from_numpy(np.asarray(b["click"]).reshape(-1)))

def train(rank, model, cfg, files, q):
    torch.set_num_threads(1)
    desc = DataFeedDesc(cfg["desc"]); desc.set_batch_size(cfg["batch"])
    opt = torch.optim.SGD(model.parameters(), lr=cfg["lr"])
    n, t0 = 0, time.time()
    for _ in range(cfg["epochs"]):
        for ids, offs, dense, y in batches(desc, files, cfg["slots"]):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(ids, offs, dense, len(cfg["slots"])), y)
            loss.backward()
            opt.step()
            n += len(y)
    q.put((n, t0, time.time()))  # wall clock: comparable across processes

if __name__ == "__main__":
    cfg = json.loads(sys.argv[1])
    torch.manual_seed(0)
    model = CtrDnn(cfg["vocab"], cfg["dense_dim"], len(cfg["slots"]), cfg["emb"], cfg["hidden"])
    model.share_memory()
    q = mp.get_context("fork").SimpleQueue()
    files = cfg["files"]
    shares = [files[i::cfg["workers"]] for i in range(cfg["workers"])]
    ps = [mp.get_context("fork").Process(target=train, args=(r, model, cfg, shares[r], q))
          for r in range(cfg["workers"])]
    for p in ps: p.start()
    res = [q.get() for _ in ps]
    # steady state: from the first worker's first step to the last worker's last step. A
    # forked torch worker takes ~1.5 s to start here (not counted; Fluidity's numbers include
    # its workers' start), and its exit as long again.
    secs = max(r[2] for r in res) - min(r[1] for r in res)
    for p in ps: p.join()
    print(json.dumps({"examples": sum(r[0] for r in res), "seconds": secs,
                      "version": torch.__version__}))
"""


def run_torch(model, info, files, epochs, lr, workers):
    try:
        import torch  # noqa: F401
    except ImportError:
        return None, "torch not installed (pip install torch==2.13.0)"
    cfg = {"vocab": model["vocab"], "dense_dim": len(model["dense_weights"]),
           "slots": model["sparse_slots"], "emb": EMB, "hidden": list(HIDDEN), "lr": lr,
           "epochs": epochs, "workers": workers, "files": files, "batch": BATCH,
           "desc": info["train"]["desc"]}
    r = subprocess.run([sys.executable, "-c", TORCH_WORKER, json.dumps(cfg), ROOT],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None, "torch run failed: " + (r.stderr.strip().splitlines() or ["?"])[-1]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out["eps"] = out["examples"] / out["seconds"]
    return out, f"torch {out['version']}"


PADDLE_SCRIPT = r"""
import json, os, sys, time
import numpy as np
import paddle
paddle.enable_static()
cfg = json.loads(sys.argv[1])
main, startup = paddle.static.Program(), paddle.static.Program()
with paddle.static.program_guard(main, startup):
    dense = paddle.static.data("dense_input", [-1, cfg["dense_dim"]], "float32")
    ids = [paddle.static.data(s, [-1, 1], "int64", lod_level=1) for s in cfg["slots"]]
    label = paddle.static.data("click", [-1, 1], "int64")
    # paddle.static.nn.embedding (lookup_table_v2) gives [-1, 1, emb]: pool, then flatten
    embs = [paddle.reshape(paddle.static.nn.sequence_lod.sequence_pool(
        paddle.static.nn.embedding(i, [cfg["vocab"], cfg["emb"]], is_sparse=True,
                                   param_attr=paddle.ParamAttr(name="SparseFeatFactors")),
        "sum"), [-1, cfg["emb"]]) for i in ids]
    h = paddle.concat(embs + [dense], axis=1)
    for w in cfg["hidden"]:
        h = paddle.static.nn.fc(h, w, activation="relu")
    pred = paddle.static.nn.fc(h, 2, activation="softmax")
    loss = paddle.mean(paddle.nn.functional.cross_entropy(pred, label, use_softmax=False))
    paddle.optimizer.SGD(cfg["lr"]).minimize(loss)
exe = paddle.static.Executor(paddle.CPUPlace())
exe.run(startup)
ds = paddle.distributed.QueueDataset()
ds.init(batch_size=cfg["batch"], thread_num=cfg["workers"], pipe_command="cat",
        use_var=[dense] + ids + [label])
ds.set_filelist(cfg["files"])
t0 = time.perf_counter()
for _ in range(cfg["epochs"]):
    exe.train_from_dataset(main, ds, thread=cfg["workers"], debug=False)
secs = time.perf_counter() - t0
print(json.dumps({"examples": cfg["lines"] * cfg["epochs"], "seconds": secs,
                  "version": paddle.__version__}))
"""


def run_paddle(python, model, info, files, epochs, lr, workers, lines):
    if not python or not os.path.exists(python):
        return None, "paddle python not found"
    cfg = {"vocab": model["vocab"], "dense_dim": len(model["dense_weights"]),
           "slots": model["sparse_slots"], "emb": EMB, "hidden": list(HIDDEN), "lr": lr,
           "epochs": epochs, "workers": workers, "files": files, "batch": BATCH,
           "lines": lines}
    with tempfile.TemporaryDirectory() as cwd:  # Paddle writes <id>_train_desc.prototxt there
        r = subprocess.run([python, "-c", PADDLE_SCRIPT, json.dumps(cfg)], capture_output=True,
                           text=True, env={**os.environ, "GLOG_minloglevel": "2"}, cwd=cwd)
    if r.returncode != 0:
        return None, "paddle run failed: " + (r.stderr.strip().splitlines() or ["?"])[-1]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out["eps"] = out["examples"] / out["seconds"]
    return out, f"paddle {out['version']}"


def plot(curves, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, c in curves.items():
        if c:
            t, loss = np.array([t for t, _ in c]), np.array([l for _, l in c])
            k = max(1, min(25, len(loss) // 10))  # moving average: the trend, not the noise
            smooth = np.convolve(loss, np.ones(k) / k, mode="valid")
            line, = ax.plot(t[k - 1:], smooth, lw=1.4, label=f"{name} (mean of {k})")
            ax.plot(t, loss, lw=0.5, alpha=0.25, color=line.get_color())
    ax.set_xlabel("wall time (s)")
    ax.set_ylabel("training log-loss")
    ax.set_title("CTR-DNN: loss vs. wall time")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _indep_child(model, desc, files, lr, barrier, q):
    try:
        main, _, v, _, scope = fresh_model(model, lr)
        barrier.wait()  # all trainers built: the timed runs overlap
        t0 = time.time()
        res = fluid.AsyncExecutor().run(main, desc, files, 1, fetch=[v["loss"]], scope=scope,
                                        progress=False)
        q.put((res.examples, t0, time.time(), None))
    except BaseException as e:  # report, don't hang the parent
        q.put((0, 0.0, 0.0, repr(e)))


def run_independent(model, desc, files, lr, n):
    """The control for Hogwild: n independent async-1 trainers at once, each on every n-th
    file with its own private parameters (nothing shared), timed from the first one's start
    to the last one's end. Their total examples/s is what this machine gives n concurrent
    copies of the single-worker workload."""
    import multiprocessing as mp
    ctx = mp.get_context("fork")
    q, barrier = ctx.Queue(), ctx.Barrier(n)
    ps = [ctx.Process(target=_indep_child, args=(model, desc, files[i::n], lr, barrier, q))
          for i in range(n)]
    for p in ps:
        p.start()
    outs = [q.get() for _ in ps]
    for p in ps:
        p.join()
    errors = [o[3] for o in outs if o[3]]
    if errors:
        raise RuntimeError(f"independent trainer failed: {errors[0]}")
    n_ex = sum(o[0] for o in outs)
    secs = max(o[2] for o in outs) - min(o[1] for o in outs)
    return {"examples": n_ex, "seconds": secs, "eps": n_ex / secs}


def count_lines(files):
    n = 0
    for f in files:
        with open(f, "rb") as fh:
            n += sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
    return n


def throughput_rounds(a, model, info, desc, files, n, skip):
    """Examples/s of async-1, async-N, torch-N and paddle-N, each from fresh parameters for
    one epoch over `files`, repeated `a.rounds` times in alternating order: the VM's speed
    drifts by 10-40% over minutes, so ratios are taken within a round and their median
    reported."""
    lines = count_lines(files)
    runs = [(f"indep-{n}", lambda: run_independent(model, desc, files, a.lr, n)),
            ("async-1", lambda: run_async(model, desc, files, 1, a.lr, 1)[0]),
            (f"async-{n}", lambda: run_async(model, desc, files, 1, a.lr, n)[0]),
            (f"proc-{n}", lambda: run_async(model, desc, files, 1, a.lr, n,
                                            mode="processes")[0])]
    notes = {}

    def baseline(fn, name):
        def go():
            r, note = fn()
            notes[name] = note
            return r
        return go
    if "torch" not in skip:
        runs.append((f"torch-{n}", baseline(
            lambda: run_torch(model, info, files, 1, a.lr, n), "torch")))
    if "paddle" not in skip:
        runs.append((f"paddle-{n}", baseline(
            lambda: run_paddle(a.paddle_python, model, info, files, 1, a.lr, n, lines),
            "paddle")))
    eps = {name: [] for name, _ in runs}
    for r in range(a.rounds):
        # forward, then backward: each compared pair (async-1/async-N, async-N/torch-N)
        # stays side by side in time, and neither is always first
        order = runs if r % 2 == 0 else runs[::-1]
        for name, fn in order:
            out = fn()
            eps[name].append(out["eps"] if out else None)
        print(f"  round {r + 1}: " + ", ".join(
            f"{name} {eps[name][-1]:,.0f}" if eps[name][-1] else f"{name} -"
            for name, _ in runs), flush=True)
    return lines, eps, notes


def _median_ratio(num, den):
    pairs = [x / y for x, y in zip(num, den) if x and y]
    return (float(np.median(pairs)), pairs) if pairs else (None, [])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", type=int, default=400_000)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--decay", type=float, default=1.0,
                    help="multiply the learning rate by this after each epoch")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--rounds", type=int, default=5,
                    help="throughput rounds (async-1, async-N, torch-N, paddle-N each)")
    ap.add_argument("--round-files", type=int, default=16,
                    help="files (of 32) each throughput run trains on for one epoch")
    ap.add_argument("--data-dir", default=os.path.join(ROOT, "data", "ctr_bench"))
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "out"))
    ap.add_argument("--skip", default="",
                    help="comma list of what to skip: sync,quality,torch,paddle")
    ap.add_argument("--paddle-python", default=os.path.join(ROOT, ".venv-paddle", "bin",
                                                            "python"))
    a = ap.parse_args()
    skip = set(filter(None, a.skip.split(",")))
    # 32 files: files are the unit of work, so with few of them one worker idles at the end
    info = ensure_data(a.data_dir, a.lines, 50_000, 32)
    model = json.load(open(info["train"]["model"]))
    desc = DataFeedDesc(info["train"]["desc"])
    desc.set_batch_size(BATCH)
    files = info["train"]["files"]
    n = a.workers
    print(f"workload: {a.lines} lines, CTR-DNN {model['vocab']}x{EMB} sparse table + fc "
          f"{HIDDEN}, SGD lr={a.lr} (x{a.decay} per epoch), batch {BATCH}/worker; "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)
    rows, curves = {}, {}
    if "quality" not in skip:
        print(f"quality: {a.epochs} epoch(s) over all {len(files)} files, from the same "
              f"initial parameters", flush=True)
        runs = [("async-1", lambda: run_async(model, desc, files, a.epochs, a.lr, 1, a.decay)),
                (f"async-{n}", lambda: run_async(model, desc, files, a.epochs, a.lr, n,
                                                 a.decay))]
        if "sync" not in skip:
            runs.insert(0, ("sync", lambda: run_sync(model, desc, files, a.epochs, a.lr,
                                                     a.decay)))
        for name, fn in runs:
            r, (exe, scope, test, v) = fn()
            r.update(evaluate(exe, scope, test, v["predict"], desc, info["test"]["files"],
                              model))
            rows[name], curves[name] = r, r["curve"]
            print(f"{name:>9}: {r['eps']:9,.0f} ex/s  held-out log-loss {r['logloss']:.4f} "
                  f"AUC {r['auc']:.4f}", flush=True)
        opt = rows[f"async-{n}"]
        print(f"{'optimum':>9}: {'':>15}  held-out log-loss {opt['opt_logloss']:.4f} "
              f"AUC {opt['opt_auc']:.4f} (generating model)")
        ref = rows.get("sync", rows["async-1"])
        for name in rows:
            if name != "sync":
                d = (rows[name]["logloss"] - ref["logloss"]) / ref["logloss"] * 100
                print(f"quality: {name} held-out log-loss {d:+.2f}% vs "
                      f"{'sync' if 'sync' in rows else 'async-1'} (target within 1%)")
        os.makedirs(a.out_dir, exist_ok=True)
        png = os.path.join(a.out_dir, "async_ctr_loss.png")
        plot(curves, png)
        print(f"plot: {png}")

    sub = files[:a.round_files]
    print(f"throughput: {a.rounds} round(s), each run one epoch over {len(sub)} files "
          f"from fresh parameters", flush=True)
    lines, eps, notes = throughput_rounds(a, model, info, desc, sub, n, skip)
    print(f"throughput: {lines:,} lines per run; medians of {a.rounds} round(s):")
    for name, vals in eps.items():
        got = [x for x in vals if x]
        if got:
            print(f"{name:>9}: {np.median(got):9,.0f} ex/s "
                  f"({', '.join(f'{x:,.0f}' for x in got)})")
    for key in ("torch", "paddle"):
        if key in notes and not any(eps.get(f"{key}-{n}", [])):
            print(f"{key}: skipped: {notes[key]}")
    scale, per = _median_ratio(eps[f"async-{n}"], eps["async-1"])
    print(f"scaling: async-{n} / async-1 = {scale:.2f}x examples/s (per round "
          f"{', '.join(f'{x:.2f}' for x in per)}; target >= 1.8x on 2 cores)")
    ceiling, per = _median_ratio(eps[f"indep-{n}"], eps["async-1"])
    cost, per2 = _median_ratio(eps[f"async-{n}"], eps[f"indep-{n}"])
    print(f"control: indep-{n} ({n} independent async-1 trainers at once, nothing shared) / "
          f"async-1 = {ceiling:.2f}x (what this machine gives {n} copies; per round "
          f"{', '.join(f'{x:.2f}' for x in per)}); async-{n} / indep-{n} = {cost:.2f}x "
          f"(Hogwild vs. unshared copies; per round {', '.join(f'{x:.2f}' for x in per2)})")
    ratio, per = _median_ratio(eps[f"async-{n}"], eps[f"proc-{n}"])
    print(f"threads vs processes: async-{n} / proc-{n} = {ratio:.2f}x (per round "
          f"{', '.join(f'{x:.2f}' for x in per)})")
    if f"torch-{n}" in eps:
        ratio, per = _median_ratio(eps[f"async-{n}"], eps[f"torch-{n}"])
        if ratio:
            print(f"vs torch: fluidity async-{n} / torch-{n} = {ratio:.2f}x ({notes['torch']}; "
                  f"per round {', '.join(f'{x:.2f}' for x in per)}; target >= 1.5x)")
    if f"paddle-{n}" in eps:
        ratio, per = _median_ratio(eps[f"async-{n}"], eps[f"paddle-{n}"])
        if ratio:
            print(f"vs paddle: fluidity async-{n} / paddle-{n} = {ratio:.2f}x "
                  f"({notes['paddle']} train_from_dataset; per round "
                  f"{', '.join(f'{x:.2f}' for x in per)})")


if __name__ == "__main__":
    main()
