"""`make demo`: click-through-rate prediction trained with Hogwild workers on all cores.

1. Generates (once, cached under data/ctr/) a CTR data set in Paddle's MultiSlot text format:
   26 sparse slots of Zipf-distributed ids hashed into 10^6 buckets and 13 dense features,
   with clicks drawn from a known logistic model — so the best achievable log-loss is known.
2. Builds the CTR-DNN (one shared 10^6 x 10 sparse embedding table summed per slot, 3 fc
   layers of 400, softmax) and trains it with AsyncExecutor: one worker process per core,
   all updating the same parameters in shared memory without locks.
3. Prints examples/s, then held-out AUC and log-loss next to the generating model's
   (the optimum) and the constant predictor's; saves the inference model, a few held-out
   examples to run it on (out/ctr_sample.npz: the inputs by name and each sequence input's
   lengths as NAME.lod, as `fluidity run` and the compiled `model_run` take them), a PNG of
   the training loss curve and, when tensorboardX is installed, the curves for TensorBoard
   (out/tensorboard) under out/, and prints the commands that run the saved model.

While it trains, the loss and AUC are printed every --print-period batches (a bar with the
ETA too on a terminal). With the defaults it writes about 200 MB of data to data/ctr/
(once; later runs reuse it) and 40 MB to out/; it says where and how much before it starts.

    .venv/bin/python examples/demo.py [--lines 600000] [--epochs 2] [--workers N]
"""
import argparse
import importlib.util
import json
import os
import shlex
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fluidity as fluid  # noqa: E402
from ctr_dnn import build_ctr_dnn  # noqa: E402
from fluidity.datafeed import DataFeedDesc, MultiSlotReader  # noqa: E402
from fluidity.datafeed.generate import generate_ctr, true_logits  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BYTES_PER_LINE = 302        # a generated line, on average (what the size notice says)
MODEL_BYTES = 41e6          # the saved model (the 10^6 x 10 table) and the rest of out/


def ensure_data(data_dir, lines, test_lines, files, seed=0):
    """Generate the train/test files unless the same ones are already there."""
    stamp = os.path.join(data_dir, "demo.json")
    want = {"lines": lines, "test_lines": test_lines, "files": files, "seed": seed}
    if os.path.exists(stamp):
        with open(stamp) as f:
            have = json.load(f)
        if have.get("params") == want:
            print(f"data: reusing {shown(data_dir)} ({lines} train + {test_lines} test "
                  f"lines)")
            return have
    print(f"data: generating {lines} train + {test_lines} held-out lines into "
          f"{shown(data_dir)} ...")
    t = time.perf_counter()
    train = generate_ctr(data_dir, lines, files=files, seed=seed, prefix="train")
    test = generate_ctr(data_dir, test_lines, files=1, seed=seed, prefix="test")
    info = {"params": want, "train": train, "test": test}
    with open(stamp, "w") as f:
        json.dump(info, f, indent=1)
    print(f"data: done in {time.perf_counter() - t:.1f}s")
    return info


def rank_auc(y, p):
    """ROC AUC by ranks (ties averaged)."""
    order = np.argsort(p, kind="mergesort")
    ranks = np.empty(len(p))
    sp = p[order]
    i = 0
    while i < len(sp):  # average ranks of ties
        j = i
        while j + 1 < len(sp) and sp[j + 1] == sp[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    pos = y == 1
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / max(n_pos * n_neg, 1))


def evaluate(exe, scope, test_prog, predict, desc, files, model):
    ys, ps, ptrue = [], [], []
    for batch in MultiSlotReader(desc, files, batch_size=4096):
        (pr,) = exe.run(test_prog, feed=batch, fetch_list=[predict], scope=scope)
        ys.append(np.asarray(batch["click"]).reshape(-1))
        ps.append(pr[:, 1].astype(np.float64))
        ids = np.concatenate([np.asarray(batch[s]) for s in model["sparse_slots"]], axis=1)
        ptrue.append(1 / (1 + np.exp(-true_logits(model, np.asarray(batch["dense_input"]), ids))))
    y, p, pt = np.concatenate(ys), np.concatenate(ps), np.concatenate(ptrue)
    eps = 1e-7

    def logloss(q):
        q = np.clip(q, eps, 1 - eps)
        return float(-np.mean(y * np.log(q) + (1 - y) * np.log(1 - q)))
    ctr = y.mean()
    return {"auc": rank_auc(y, p), "logloss": logloss(p), "opt_auc": rank_auc(y, pt),
            "opt_logloss": logloss(pt), "base_logloss": logloss(np.full_like(p, ctr)),
            "n": len(y)}


def plot(history, path, info, epoch_ends):
    """Training loss per report (and its moving average) against examples seen, the
    optimum and the constant predictor's loss on held-out data, epoch boundaries (from the
    second epoch on the training loss is measured on examples the model has seen, so it
    may dip below the held-out optimum), and the held-out result after training. The
    legend sits below the axes, where it hides no line."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker  # noqa: F401 - matplotlib.ticker below
    fig, ax = plt.subplots(figsize=(8, 5.2))
    x = [h[0] for h in history]
    y = np.array([h[1] for h in history])
    ax.plot(x, y, lw=0.8, alpha=0.45, label="training loss (mean per report)")
    k = len(y) // 25  # a moving average to see the trend through the noise
    if k > 1:
        smooth = np.convolve(y, np.ones(k) / k, mode="valid")
        ax.plot(x[k - 1:], smooth, lw=2,
                label=f"training loss, moving average ({k} reports)")
    ax.axhline(info["opt_logloss"], color="g", ls="--",
               label=f"optimum: generating model, held out ({info['opt_logloss']:.4f})")
    ax.axhline(info["base_logloss"], color="r", ls=":",
               label=f"constant click rate, held out ({info['base_logloss']:.4f})")
    for e, end in enumerate(epoch_ends[:-1]):
        ax.axvline(end, color="0.4", lw=0.8, ls="-.",
                   label="epoch boundary (later epochs: examples seen before)" if e == 0
                   else None)
    for e, (a, b) in enumerate(zip([0] + epoch_ends[:-1], epoch_ends)):
        ax.text((a + b) / 2, 0.98, f"epoch {e + 1}", transform=ax.get_xaxis_transform(),
                ha="center", va="top", color="0.3")
    ax.plot([epoch_ends[-1]], [info["logloss"]], "k*", ms=13, ls="none",
            label=f"CTR-DNN held out, after training ({info['logloss']:.4f}, "
                  f"AUC {info['auc']:.3f})")
    lo = min(info["opt_logloss"], info["logloss"], float(y.min()))
    hi = max(info["base_logloss"], float(np.percentile(y, 99)))
    ax.set_ylim(lo - 0.05 * (hi - lo), hi + 0.12 * (hi - lo))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.set_xlabel("examples seen")
    ax.set_ylabel("log-loss")
    ax.set_title("CTR-DNN, Hogwild AsyncExecutor")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize=8,
              frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_sample(desc, files, feeds, path, n=8):
    """The first `n` examples of `files` as the .npz `fluidity run --input` takes: each feed
    by name, and for a sequence feed NAME its sequence lengths as NAME.lod."""
    batch = next(iter(MultiSlotReader(desc, files, batch_size=n)))
    arrays = {}
    for name in feeds:
        t = batch[name]
        arrays[name] = np.asarray(t)
        if t.lod():
            arrays[name + ".lod"] = np.asarray(t.recursive_sequence_lengths()[0], np.int64)
    np.savez(path, **arrays)
    return len(np.asarray(batch[feeds[0]]))


def shown(path):
    """A path as a user would type it here: relative to the current directory when it is
    below it."""
    rel = os.path.relpath(path)
    return shlex.quote(path if rel.startswith("..") else rel)


def dir_size(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--lines", type=int, default=600_000, help="training lines to generate")
    ap.add_argument("--test-lines", type=int, default=50_000,
                    help="held-out lines to generate")
    ap.add_argument("--files", type=int, default=32,
                    help="files are the unit of work: enough of them keeps every worker busy")
    ap.add_argument("--epochs", type=int, default=2, help="passes over the training files")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                    help="Hogwild workers (threads or processes)")
    ap.add_argument("--batch", type=int, default=128, help="examples per batch")
    ap.add_argument("--lr", type=float, default=1e-3, help="Adam's learning rate")
    ap.add_argument("--print-period", type=int, default=500,
                    help="batches between the printed loss/AUC lines")
    ap.add_argument("--data-dir", default=os.path.join(ROOT, "data", "ctr"),
                    help="where the generated data is kept (and reused)")
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "out"),
                    help="where the model, sample, plot and curves go")
    ap.add_argument("--tensorboard", default="auto", metavar="DIR",
                    help="write TensorBoard scalars to DIR ('auto': OUT_DIR/tensorboard when "
                         "tensorboardX is installed; '': none)")
    a = ap.parse_args()
    # the data stamp records file paths: absolute ones serve from any working directory
    a.data_dir, a.out_dir = os.path.abspath(a.data_dir), os.path.abspath(a.out_dir)
    if a.tensorboard == "auto":
        a.tensorboard = os.path.join(a.out_dir, "tensorboard") \
            if importlib.util.find_spec("tensorboardX") else ""

    data_mb = (a.lines + a.test_lines) * BYTES_PER_LINE / 1e6
    print(f"writes: ~{data_mb:,.0f} MB of data to {shown(a.data_dir)} (once; reused after), "
          f"~{MODEL_BYTES / 1e6:,.0f} MB (model, sample, plot) to {shown(a.out_dir)}")
    info = ensure_data(a.data_dir, a.lines, a.test_lines, a.files)
    with open(info["train"]["model"]) as f:
        model = json.load(f)
    desc = DataFeedDesc(info["train"]["desc"])
    desc.set_batch_size(a.batch)
    main_prog, startup, test_prog, v = build_ctr_dnn(model["sparse_slots"],
                                                     vocab=model["vocab"], lr=a.lr)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    n_params = sum(int(np.prod(p.shape)) for p in main_prog.all_parameters())
    print(f"model: CTR-DNN, {n_params / 1e6:.1f}M parameters "
          f"({model['vocab']}x10 sparse table + 3x400 fc), Adam lr={a.lr}, batch {a.batch}")
    print(f"train: {a.epochs} epoch(s) over {len(info['train']['files'])} files with "
          f"{a.workers} Hogwild workers")
    history, seen, t_total, epoch_ends = [], 0, 0.0, []
    for epoch in range(a.epochs):
        res = fluid.AsyncExecutor().run(main_prog, desc, info["train"]["files"], a.workers,
                                        fetch=[v["loss"], v["auc"]],
                                        fetch_info=["loss", "auc"], scope=scope,
                                        print_period=a.print_period,
                                        tensorboard_dir=a.tensorboard or None)
        history += [(seen + n, m[0]) for n, m in res.history]
        seen += res.examples
        epoch_ends.append(seen)
        t_total += res.seconds
        print(f"epoch {epoch + 1}: {res.examples} examples in {res.seconds:.1f}s = "
              f"{res.examples_per_sec:,.0f} examples/s ({res.mode}); mean loss {res[0]:.4f}, "
              f"running auc {res[1]:.4f}")
    ev = evaluate(exe, scope, test_prog, v["predict"], desc, info["test"]["files"], model)
    print(f"\nheld-out ({ev['n']} lines):")
    print(f"  {'':24s} {'log-loss':>9s} {'AUC':>7s}")
    print(f"  {'CTR-DNN (Fluidity)':24s} {ev['logloss']:9.4f} {ev['auc']:7.4f}")
    print(f"  {'generating model (best)':24s} {ev['opt_logloss']:9.4f} {ev['opt_auc']:7.4f}")
    print(f"  {'constant click rate':24s} {ev['base_logloss']:9.4f} {0.5:7.4f}")
    gap = (ev["logloss"] - ev["opt_logloss"]) / (ev["base_logloss"] - ev["opt_logloss"])
    print(f"  the model closes {100 * (1 - gap):.0f}% of the log-loss gap between the "
          f"constant predictor and the optimum")
    os.makedirs(a.out_dir, exist_ok=True)
    model_dir = os.path.join(a.out_dir, "ctr_model")
    feeds = [model["dense_slot"]] + model["sparse_slots"]
    with fluid.scope_guard(scope):
        fluid.io.save_inference_model(model_dir, feeds, [v["predict"]], exe, test_prog)
    sample = os.path.join(a.out_dir, "ctr_sample.npz")
    n_sample = write_sample(desc, info["test"]["files"], feeds, sample)
    png = os.path.join(a.out_dir, "ctr_loss.png")
    plot(history, png, ev, epoch_ends)
    print(f"\nsaved to {shown(a.out_dir)} ({dir_size(a.out_dir) / 1e6:,.0f} MB): the "
          f"inference model {shown(model_dir)}, {n_sample} held-out examples "
          f"{shown(sample)}, the loss curve {shown(png)}"
          + (f", TensorBoard scalars {shown(a.tensorboard)}" if a.tensorboard else ""))
    fluidity = shown(os.path.join(os.path.dirname(sys.executable), "fluidity"))
    build = "build/ctr"
    print("run the saved model on those examples (each prints P(no click), P(click)):")
    print(f"  {fluidity} run {shown(model_dir)} --input {shown(sample)} "
          f"--output {shown(os.path.join(a.out_dir, 'ctr_pred.npz'))}")
    print("build it as native code (a C library and an executable), and run that:")
    print(f"  {fluidity} compile {shown(model_dir)} -o {build}")
    print(f"  {build}/model_run {shown(sample)} -o {shown(os.path.join(a.out_dir, 'ctr_run'))}")
    if a.tensorboard:
        print("watch the training curves (pip install tensorboard):")
        print(f"  tensorboard --logdir {shown(a.tensorboard)}")
    print(f"throughput: {seen / t_total:,.0f} examples/s overall with {a.workers} workers")


if __name__ == "__main__":
    main()
