"""The CTR-DNN on one machine vs 2 trainers x 2 parameter servers on loopback, in one run:
examples/s, bytes per step, the share of a step spent in RPC, and the sparse table's
traffic against the ideal.

Workload (defaults): the demo's synthetic CTR data (fluidity.datafeed.generate: 26 sparse
slots of Zipf ids hashed into `--vocab` (10^6) buckets, 13 dense features), `--lines`
(200,000) training lines in 8 files and 20,000 held-out lines; the CTR-DNN of the demo (one
shared vocab x 10 sparse embedding table, 3 fc layers of 400, softmax), SGD lr `--lr` (0.5),
batch 128 per worker, one epoch.

  local  AsyncExecutor with `--workers` (2) worker threads over all files
  geo    2 pservers + 2 trainers (separate processes, started by the launcher), GEO-SGD: each
         trainer an AsyncExecutor with `--trainer-workers` (1, so that both runs use the same
         number of training threads) over every 2nd file, its communicator syncing every
         `--push-nums` (100, Paddle's default) batches
  sync, async  per-step training: 2 pservers + 2 trainers (separate processes, started by
         the launcher), each trainer running DistributeTranspiler's trainer program on every
         batch (`--step-batches` (150) timed batches of 128 over every 2nd file, after one
         untimed): the CTR-DNN unfused (lookup_table + sequence_pool per slot, as Fluid
         writes it), its embedding `is_sparse` (the table sliced over the pservers like a
         dense parameter: SelectedRows gradients up, the whole table back by recv each step,
         Paddle's design) and `is_distributed` (the distributed lookup table: split_ids ->
         prefetch of the touched rows -> merge_ids, the touched rows' gradients up; no table
         comes back). Four runs: {sync, async} x {sparse, distributed}.

Figures (the trainers' processes measure and report them): examples/s of the whole job (all
trainers' examples over the longest trainer's time from its first step to its last sync);
bytes per step (what a trainer's communicator sent plus received, over its batches; tensor
bytes, message headers excluded); the share of a step in RPC (geo: worker
threads never call RPC inside a step; the share of their time spent waiting for a sync, and
the communicator thread's share of wall time in RPC); the sparse table's traffic (delta rows
up with their ids, the ids of the pull, the pulled rows down) over the ideal 2 x touched rows
x width x 4 bytes; and each run's held-out log-loss (geo: the servers' final parameters).
Per-step runs: examples/s of the job (all trainers' timed examples over the longest
trainer's timed steps), bytes per step each way (`RPCClient.of(exe).stats`, whole wire
messages, headers included), the share of a step in RPC (the stats' wall_seconds over the
steps' time), and the table's traffic (the calls naming the table's gradient, its prefetch
ids and rows, or its blocks) against the ideal: the batch's distinct ids x width x 4 bytes,
each way. No held-out loss for them: a few hundred batches is a timing run, not training.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE nice .venv/bin/python benchmarks/distributed_ctr.py
"""
import argparse
import glob
import json
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import fluidity as fluid  # noqa: E402
from ctr_dnn import build_ctr_dnn  # noqa: E402
from dist_ctr import held_out_logloss, read_data, serve, geo_transpile  # noqa: E402
from fluidity.datafeed import DataFeedDesc  # noqa: E402
from fluidity.datafeed.generate import generate_ctr  # noqa: E402
from fluidity.distributed.communicator import GeoCommunicator  # noqa: E402

EMB, HIDDEN, BATCH = 10, (400, 400, 400), 128


def build(model, lr):
    return build_ctr_dnn(model["sparse_slots"], dense_dim=len(model["dense_weights"]),
                         vocab=model["vocab"], emb_dim=EMB, hidden=HIDDEN, lr=lr,
                         optimizer="sgd", with_auc=False)


def load(data_dir):
    train, test = read_data(data_dir)
    with open(train["model"]) as f:
        model = json.load(f)
    desc = DataFeedDesc(train["desc"])
    desc.set_batch_size(BATCH)
    return train, test, model, desc


def run_local(a):
    train, test, model, desc = load(a.data_dir)
    main, startup, test_prog, v = build(model, a.lr)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    r = fluid.AsyncExecutor().run(main, desc, train["files"], a.workers, fetch=[v["loss"]],
                                  scope=scope, progress=False)
    return {"examples": r.examples, "seconds": r.seconds, "mode": r.mode,
            "loss": held_out_logloss(test_prog, v["predict"], desc, test["files"], scope)}


def _barrier(out_dir, name, k, n, timeout=600):
    open(os.path.join(out_dir, f"{name}.{k}"), "w").close()
    end = time.monotonic() + timeout
    while len(glob.glob(os.path.join(out_dir, f"{name}.*"))) < n:
        if time.monotonic() > end:
            raise SystemExit(f"trainer {k}: the others did not reach '{name}'")
        time.sleep(0.05)


def role_geo(a):
    """One process of the geo job (the launcher's environment says which)."""
    train, test, model, desc = load(a.data_dir)
    main, startup, test_prog, v = build(model, a.lr)
    eps = os.environ["PADDLE_PSERVERS_IP_PORT_LIST"].split(",")
    n, tid = int(os.environ["PADDLE_TRAINERS_NUM"]), int(os.environ["PADDLE_TRAINER_ID"])
    t = geo_transpile(main, startup, tid, eps, n, a.push_nums)
    if os.environ["TRAINING_ROLE"] == "PSERVER":
        serve(t, os.environ["POD_IP"] + ":" + os.environ["PADDLE_PORT"])
        return
    scope = fluid.Scope()
    fluid.Executor().run(startup, scope=scope)
    comm = GeoCommunicator(t.plan, scope)
    try:
        comm.start()                  # the first pull (waits for the servers to come up)
        t0 = time.perf_counter()
        r = fluid.AsyncExecutor().run(t.get_trainer_program(), desc, train["files"][tid::n],
                                      a.trainer_workers, fetch=[v["loss"]], scope=scope,
                                      progress=False)
        comm.stop()
        seconds = time.perf_counter() - t0
        out = {"examples": r.examples, "seconds": seconds, "run_seconds": r.seconds,
               "batches": sum(w["batches"] for w in r.workers), "mode": r.mode,
               "stats": comm.stats.as_dict()}
        _barrier(a.out_dir, "stopped", tid, n)      # every trainer's last push is in
        if tid == 0:
            comm.pull_all()
            out["loss"] = held_out_logloss(test_prog, v["predict"], desc, test["files"], scope)
        with open(os.path.join(a.out_dir, f"trainer{tid}.json"), "w") as f:
            json.dump(out, f)
        _barrier(a.out_dir, "evaluated", tid, n)    # servers stay up until trainer 0 pulled
    finally:
        comm.close()


def run_geo(a):
    from fluidity.distributed.launch import launch
    with tempfile.TemporaryDirectory() as out:
        args = ["--server_num", "2", "--worker_num", "2", "--log_dir",
                os.path.join(out, "log"), os.path.abspath(__file__), "--role", "geo",
                "--data-dir", a.data_dir, "--out-dir", out, "--lr", str(a.lr),
                "--push-nums", str(a.push_nums), "--trainer-workers", str(a.trainer_workers)]
        if launch(args) != 0:
            for f in sorted(glob.glob(os.path.join(out, "log", "*"))):
                print(f"== {f}\n{open(f).read()[-3000:]}", file=sys.stderr)
            raise SystemExit("the geo job failed")
        return [json.load(open(os.path.join(out, f"trainer{k}.json"))) for k in range(2)]


TABLE = "SparseFeatFactors"


def build_per_step(model, lr, distributed):
    """The demo's CTR-DNN as a Fluid user writes it (build_ctr_dnn's layers, seed and
    initializer, unfused), its embedding is_sparse and, when `distributed`, is_distributed."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 7
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        dense = fluid.layers.data("dense_input", [len(model["dense_weights"])])
        ids = [fluid.layers.data(s, [1], dtype="int64", lod_level=1)
               for s in model["sparse_slots"]]
        y = fluid.layers.data("click", [1], dtype="int64")
        embs = [fluid.layers.sequence_pool(
            fluid.layers.embedding(i, [model["vocab"], EMB], is_sparse=True,
                                   is_distributed=distributed,
                                   param_attr=fluid.ParamAttr(
                                       name=TABLE,
                                       initializer=fluid.initializer.Uniform(-0.01, 0.01))),
            "sum") for i in ids]
        h = fluid.layers.concat(embs + [dense], axis=1)
        for width in HIDDEN:
            h = fluid.layers.fc(h, width, act="relu")
        predict = fluid.layers.fc(h, 2, act="softmax")
        loss = fluid.layers.mean(fluid.layers.cross_entropy(predict, y))
        fluid.optimizer.SGD(lr).minimize(loss)
    return main, startup, loss


def _table_traffic(variables):
    """(bytes sent, bytes received) of the calls that carry the table: its gradient's
    sends, its prefetches (ids up, rows down) and gets of its blocks."""
    up = down = 0
    for name, r in variables.items():
        if name.startswith(TABLE) or name.startswith("prefetch_compress_in_tmp"):
            up, down = up + r["bytes_sent"], down + r["bytes_received"]
    return up, down


def role_step(a):
    """One process of a per-step job (`--step-mode` sync|async, `--table`
    sparse|distributed; the launcher's environment says which role)."""
    from fluidity.datafeed import MultiSlotReader
    from fluidity.distributed import RPCClient
    import numpy as np
    train, _test, model, desc = load(a.data_dir)
    main, startup, loss = build_per_step(model, a.lr, a.table == "distributed")
    eps = os.environ["PADDLE_PSERVERS_IP_PORT_LIST"]
    n, tid = int(os.environ["PADDLE_TRAINERS_NUM"]), int(os.environ["PADDLE_TRAINER_ID"])
    t = fluid.DistributeTranspiler()
    t.transpile(tid, program=main, pservers=eps, trainers=n,
                sync_mode=(a.step_mode == "sync"), startup_program=startup)
    exe = fluid.Executor(fluid.CPUPlace())
    if os.environ["TRAINING_ROLE"] == "PSERVER":
        pmain, pstart = t.get_pserver_programs(os.environ["POD_IP"] + ":" +
                                               os.environ["PADDLE_PORT"])
        exe.run(pstart)
        exe.run(pmain)
        return
    prog = t.get_trainer_program()
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    client = RPCClient.of(exe)
    slots = model["sparse_slots"]
    examples = steps = touched = 0
    t0 = None
    try:
        for k, batch in enumerate(MultiSlotReader(desc, train["files"][tid::n],
                                                  batch_size=BATCH)):
            if k > a.step_batches:
                break
            if k == 1:                          # the first step is not timed
                client.stats.reset()
                t0 = time.perf_counter()
            exe.run(prog, feed=batch, fetch_list=[loss], scope=scope)
            if k >= 1:
                steps += 1
                examples += len(np.asarray(batch["click"]))
                touched += len(np.unique(np.concatenate(
                    [np.asarray(batch[s]).reshape(-1) for s in slots])))
        seconds = time.perf_counter() - t0
        stats = client.stats.snapshot()
    finally:
        exe.close()
    up, down = _table_traffic(stats["variables"])
    out = {"examples": examples, "steps": steps, "seconds": seconds, "touched": touched,
           "bytes_sent": stats["bytes_sent"], "bytes_received": stats["bytes_received"],
           "wall_seconds": stats["wall_seconds"], "table_sent": up, "table_received": down,
           "methods": stats["methods"]}
    with open(os.path.join(a.out_dir, f"trainer{tid}.json"), "w") as f:
        json.dump(out, f)


def run_step(a, mode, table):
    from fluidity.distributed.launch import launch
    with tempfile.TemporaryDirectory() as out:
        args = ["--server_num", "2", "--worker_num", "2", "--log_dir",
                os.path.join(out, "log"), os.path.abspath(__file__), "--role", "step",
                "--step-mode", mode, "--table", table, "--data-dir", a.data_dir,
                "--out-dir", out, "--lr", str(a.lr), "--step-batches", str(a.step_batches)]
        if launch(args) != 0:
            for f in sorted(glob.glob(os.path.join(out, "log", "*"))):
                print(f"== {f}\n{open(f).read()[-3000:]}", file=sys.stderr)
            raise SystemExit(f"the {mode} {table} job failed")
        return [json.load(open(os.path.join(out, f"trainer{k}.json"))) for k in range(2)]


def report_step(mode, table, tr, local_rate):
    ex = sum(t["examples"] for t in tr)
    secs = max(t["seconds"] for t in tr)
    rel = f" ({ex / secs / local_rate:.2f}x local)" if local_rate else ""
    print(f"{mode:6} per-step, table {'is_distributed' if table == 'distributed' else 'is_sparse'}"
          f", 2 trainers + 2 pservers: {ex / secs:,.0f} examples/s{rel}")
    for k, t in enumerate(tr):
        n, ideal = t["steps"], t["touched"] * EMB * 4
        print(f"  trainer {k}: {n} steps in {t['seconds']:.1f} s "
              f"({1e3 * t['seconds'] / n:.0f} ms a step), {t['bytes_sent'] / n / 1e3:,.1f} kB "
              f"sent + {t['bytes_received'] / n / 1e3:,.1f} kB received per step; RPC "
              f"{100 * t['wall_seconds'] / t['seconds']:.0f}% of a step; table traffic vs "
              f"ideal ({ideal / n / 1e3:,.1f} kB each way a step: {t['touched'] / n:,.0f} "
              f"distinct ids x {EMB} x 4 B): up {t['table_sent'] / ideal:.3f}x, down "
              f"{t['table_received'] / ideal:.3f}x, both {(t['table_sent'] + t['table_received']) / (2 * ideal):.3f}x")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=200_000)
    ap.add_argument("--vocab", type=int, default=10**6)
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--trainer-workers", type=int, default=1)
    ap.add_argument("--push-nums", type=int, default=100)
    ap.add_argument("--step-batches", type=int, default=150,
                    help="timed batches per trainer of each per-step run")
    ap.add_argument("--modes", default="local,geo,sync,async",
                    help="local, geo, sync, async (sync and async: both tables)")
    ap.add_argument("--tables", default="sparse,distributed",
                    help="the per-step runs' embeddings: sparse (is_sparse), distributed")
    ap.add_argument("--step-mode", default="", help=argparse.SUPPRESS)
    ap.add_argument("--table", default="", help=argparse.SUPPRESS)
    ap.add_argument("--data-dir", default="")
    ap.add_argument("--role", default="", help=argparse.SUPPRESS)
    ap.add_argument("--out-dir", default="", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.role == "geo":
        return role_geo(a)
    if a.role == "step":
        return role_step(a)
    tmp = None
    if not a.data_dir:
        tmp = tempfile.TemporaryDirectory()
        a.data_dir = tmp.name
        generate_ctr(a.data_dir, a.lines, files=8, seed=0, vocab=a.vocab)
        generate_ctr(a.data_dir, 20_000, files=1, seed=0, prefix="test", vocab=a.vocab)
    modes = a.modes.split(",")
    print(f"workload: {a.lines:,} generated CTR lines (26 sparse slots over {a.vocab:,} ids, "
          f"13 dense) in 8 files + 20,000 held out; CTR-DNN (embedding {a.vocab:,} x {EMB}, "
          f"fc {'-'.join(map(str, HIDDEN))}, softmax), SGD lr {a.lr}, batch {BATCH} per "
          f"worker, 1 epoch; {os.cpu_count()} cores")
    res = {}
    if "local" in modes:
        res["local"] = r = run_local(a)
        print(f"local  AsyncExecutor, {a.workers} worker {r['mode']}: "
              f"{r['examples'] / r['seconds']:,.0f} examples/s, held-out log-loss "
              f"{r['loss']:.4f}")
    if "geo" in modes:
        tr = run_geo(a)
        ex = sum(t["examples"] for t in tr)
        secs = max(t["seconds"] for t in tr)
        run_secs = max(t["run_seconds"] for t in tr)
        res["geo"] = {"examples_per_sec": ex / secs, "trainers": tr}
        print(f"geo    2 trainers x {a.trainer_workers} worker {tr[0]['mode']} + 2 pservers, "
              f"push every {a.push_nums} batches: {ex / secs:,.0f} examples/s from the first "
              f"step to the last sync ({ex / run_secs:,.0f} over the AsyncExecutor runs "
              f"alone), held-out log-loss {tr[0]['loss']:.4f} (the servers' final "
              f"parameters)")
        for k, t in enumerate(tr):
            s = t["stats"]
            per_step = (s["bytes_sent"] + s["bytes_received"]) / max(t["batches"], 1)
            wait = s["wait_seconds"] / (a.trainer_workers * t["seconds"])
            sparse = (s["sparse_sent"] + s["sparse_received"]) / max(
                2 * s["sparse_ideal_each_way"], 1)
            print(f"  trainer {k}: {t['examples'] / t['seconds']:,.0f} examples/s over "
                  f"{t['seconds']:.1f} s, {s['syncs']} syncs, {per_step / 1e3:,.1f} kB per step "
                  f"({s['bytes_sent'] / 1e6:.1f} MB sent, {s['bytes_received'] / 1e6:.1f} MB "
                  f"received); RPC inside a step: none, workers waiting for a sync "
                  f"{100 * wait:.1f}% of their time, communicator in RPC "
                  f"{100 * s['rpc_seconds'] / t['seconds']:.0f}% of wall time; sparse "
                  f"traffic {sparse:.3f}x the ideal ({s['rows_pushed']:,} rows pushed)")
        if "local" in res:
            ratio = res["geo"]["examples_per_sec"] / (res["local"]["examples"] /
                                                      res["local"]["seconds"])
            print(f"ratio geo / local examples/s: {ratio:.2f}")
    local_rate = res["local"]["examples"] / res["local"]["seconds"] if "local" in res else None
    for mode in ("sync", "async"):
        if mode in modes:
            for table in a.tables.split(","):
                report_step(mode, table, run_step(a, mode, table), local_rate)
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    sys.exit(main())
