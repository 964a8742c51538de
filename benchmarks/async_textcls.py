"""Hogwild bag-of-words text classification: scaling with workers and held-out accuracy,
log-loss and AUC vs. a synchronous baseline and the Bayes-optimal classifier — in one run.

Workload (defaults): synthetic labelled documents from fluidity.datafeed.generate_text — 10,000
words with Zipfian base frequencies, 2 classes whose word distributions differ on a random
30% of the words (log-ratio strength 0.8), lengths uniform in 5..40 words; 500,000 training
documents in 32 MultiSlot files and 20,000 held-out ones. Because the generating model is
known, so is the best possible classifier (naive Bayes with the true word distributions).
Model (examples/textcls.py): word ids (LoD) -> 10,000 x 16 sparse embedding -> sequence_pool
(sum) -> fc(2) -> softmax, cross-entropy; Adagrad lr 0.05, batch 128 per worker, 2 epochs.
The model is linear in the bag of words: the Bayes classifier's family.

Runs, each from the same initial parameters on the same files:
  sync     plain fluid.Executor over MultiSlotReader batches in this process (the baseline)
  async-1  AsyncExecutor, 1 worker
  async-N  AsyncExecutor, N = os.cpu_count() workers (Hogwild; the fc weights and bias are
           dense parameters every batch of every worker updates)
  torch-N  PyTorch Hogwild on the same files, model, optimizer and batch (nn.EmbeddingBag
           sum, sparse, in shared memory; one thread per process), when torch is importable;
           throughput only
Prints examples/s, the scaling ratio, the CPU time the workers got, held-out accuracy /
log-loss / AUC of each run next to the Bayes-optimal ones and the baseline's, and writes a
PNG of training loss vs. wall time.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/async_textcls.py

The harness (timing, CPU accounting, the indep-N control, plot, --rounds, --wait-idle,
--profile) is shared with async_word2vec.py; see its docstring.
"""
import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from async_word2vec import (TORCH_HEADER, TORCH_HOGWILD_MAIN, add_harness_args,  # noqa: E402
                            ensure_data, loadavg, plot_curves, profile_batches, report_quality,
                            report_runs, run_torch, train_runs)
from fluidity.datafeed import DataFeedDesc, MultiSlotReader  # noqa: E402
from fluidity.datafeed import generate_text as gt  # noqa: E402
import fluidity as fluid  # noqa: E402


# PyTorch Hogwild on the same files, model and batch: nn.EmbeddingBag(sum, sparse) in shared
# memory -> Linear -> cross-entropy, the optimizer named (Adagrad takes the sparse rows), one
# thread per forked process; throughput only (async_word2vec.run_torch).
TORCH_TEXTCLS = TORCH_HEADER + r"""
class BagOfWords(torch.nn.Module):
    def __init__(self, vocab, dim, classes, pool):
        super().__init__()
        self.emb = torch.nn.EmbeddingBag(vocab, dim, mode=pool, sparse=True)
        self.fc = torch.nn.Linear(dim, classes)
        torch.nn.init.uniform_(self.emb.weight, -0.05, 0.05)

    def forward(self, ids, offsets):
        return self.fc(self.emb(ids, offsets))

def make_model(cfg):
    return BagOfWords(cfg["vocab"], cfg["dim"], cfg["classes"], cfg["pool"])

def train(model, cfg, files, q):
    torch.set_num_threads(1)
    desc = DataFeedDesc(cfg["desc"]); desc.set_batch_size(cfg["batch"])
    opt = {"sgd": torch.optim.SGD, "adagrad": torch.optim.Adagrad}[cfg["optimizer"]](
        model.parameters(), lr=cfg["lr"])
    n, t0 = 0, time.time()
    for _ in range(cfg["epochs"]):
        for b in MultiSlotReader(desc, files):
            words = b["words"]
            ids = torch.from_numpy(np.asarray(words).reshape(-1))
            offsets = torch.from_numpy(np.asarray(words.lod()[0][:-1], np.int64))
            y = torch.from_numpy(np.asarray(b["label"]).reshape(-1))
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(ids, offsets), y)
            loss.backward()
            opt.step()
            n += len(y)
    q.put((n, t0, time.time()))
""" + TORCH_HOGWILD_MAIN


TORCH_POOL = {"sum": "sum", "average": "mean"}   # EmbeddingBag has no sqrt pooling


def evaluate(ctx, desc, files):
    exe, scope, test, v = ctx
    ys, ps = [], []
    for batch in MultiSlotReader(desc, files, batch_size=4096):
        (p,) = exe.run(test, feed=batch, fetch_list=[v["predict"]], scope=scope)
        ps.append(np.asarray(p, np.float64))
        ys.append(np.asarray(batch["label"]).reshape(-1))
    return gt.classification_metrics(np.concatenate(ys), np.concatenate(ps))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=500_000)
    ap.add_argument("--test-docs", type=int, default=20_000)
    ap.add_argument("--vocab", type=int, default=10_000)
    ap.add_argument("--classes", type=int, default=2)
    ap.add_argument("--strength", type=float, default=0.8)
    ap.add_argument("--dim", type=int, default=16)
    ap.add_argument("--pool", default="sum", choices=["sum", "average", "sqrt"])
    ap.add_argument("--optimizer", default="adagrad", choices=["adagrad", "sgd"])
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--files", type=int, default=32)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=0)
    add_harness_args(ap, "textcls")
    a = ap.parse_args()

    model_args = dict(vocab=a.vocab, classes=a.classes, strength=a.strength)
    params = dict(model_args, docs=a.docs, test_docs=a.test_docs, files=a.files, seed=a.seed)

    def make(d):
        train = gt.generate_textcls(d, a.docs, a.files, a.seed, "train", **model_args)
        test = gt.generate_textcls(d, a.test_docs, 1, a.seed, "test", **model_args)
        return {"train": train["files"], "test": test["files"], "tokens": train["tokens"],
                "desc": train["desc"], "model": train["model"], "bayes_test": test["bayes"]}
    info = ensure_data(a.data_dir, params, make)
    with open(info["model"]) as f:
        model = json.load(f)
    desc = DataFeedDesc(info["desc"])
    desc.set_batch_size(a.batch)

    from textcls import build_textcls

    def build():
        return build_textcls(a.vocab, a.classes, a.dim, pool=a.pool, lr=a.lr,
                             optimizer=a.optimizer)

    bayes = info["bayes_test"]
    print(f"workload: {a.classes}-class bag-of-words; vocab {a.vocab:,}, {a.docs:,} documents "
          f"= {info['tokens']:,} tokens in {a.files} files (+ {a.test_docs:,} held out); "
          f"embedding {a.vocab:,} x {a.dim} (sparse) -> sequence_pool({a.pool}) -> "
          f"fc({a.classes}) -> softmax; {a.optimizer} lr {a.lr}, batch {a.batch} per worker, "
          f"{a.epochs} epochs")
    print(f"Bayes-optimal on the held-out documents: accuracy {bayes['accuracy']:.4f}, "
          f"log-loss {bayes['logloss']:.4f}, AUC {bayes['auc']:.4f}; machine: "
          f"{os.cpu_count()} cores, load average {loadavg()}")
    if a.profile:
        profile_batches(build, desc, info["train"][:1])
    skip = {s.strip().replace("-N", f"-{a.workers}") for s in a.skip.split(",") if s.strip()}
    quality = {"bayes": bayes}
    runs, q = train_runs(build, desc, info["train"], a.epochs, a.workers, a.rounds, skip,
                         lambda ctx: evaluate(ctx, desc, info["test"]),
                         lambda q: f"held-out accuracy {q['accuracy']:.4f}, log-loss "
                                   f"{q['logloss']:.4f}, AUC {q['auc']:.4f}",
                         wait=a.wait_idle, extra={f"torch-{a.workers}": lambda: run_torch(
                             TORCH_TEXTCLS, {
                                 "desc": info["desc"], "files": info["train"], "vocab": a.vocab,
                                 "dim": a.dim, "classes": a.classes, "lr": a.lr,
                                 "pool": TORCH_POOL[a.pool], "optimizer": a.optimizer,
                                 "batch": a.batch, "epochs": a.epochs, "workers": a.workers})
                             if a.pool in TORCH_POOL else None})
    quality.update(q)

    report_runs(runs, a.workers)
    report_quality(quality, [("accuracy", "accuracy", ".4f"), ("logloss", "log-loss", ".4f"),
                             ("auc", "AUC", ".4f")], checked=("accuracy", "logloss", "auc"))
    print(f"load average after: {loadavg()}")
    os.makedirs(a.out_dir, exist_ok=True)
    png = os.path.join(a.out_dir, "async_textcls_loss.png")
    with open(os.path.join(a.out_dir, "async_textcls.json"), "w") as f:  # everything measured
        json.dump({"args": vars(a), "runs": runs, "quality": quality}, f, indent=1)
    first_round = {k: r for k, r in runs.items() if "#" not in k}
    plot_curves(first_round, png, f"bag-of-words classifier, Hogwild AsyncExecutor "
                f"({os.cpu_count()} cores)", "training log-loss (batch mean)",
                hline=(bayes["logloss"], "Bayes-optimal (held out)"))
    print(f"plot: {png}")


if __name__ == "__main__":
    main()
