"""The demo's CTR-DNN trained by several trainers and parameter servers, GEO-SGD style
(Paddle 1.6's geo_sgd_mode): each trainer trains its own copy with the AsyncExecutor's
compiled Hogwild worker threads at full speed, and its communicator pushes what changed to
the pservers every `--push-nums` batches and pulls the global values back (only the touched
rows of the sparse table travel). Started by the launcher, which sets Paddle's environment
variables (TRAINING_ROLE, PADDLE_PSERVERS_IP_PORT_LIST, PADDLE_TRAINERS_NUM,
PADDLE_TRAINER_ID, POD_IP, PADDLE_PORT):

    fluidity launch --server_num 2 --worker_num 2 examples/dist_ctr.py [--lines 20000]

Every process generates the same small CTR data set (seeded) in a temporary directory, or
reads `--data-dir` (a directory of generate_ctr's files: `examples/demo.py`'s data/ctr/);
trainer k trains on files k, k + N, ... . Each trainer prints its examples/s, the traffic
of its communicator, and the held-out log-loss of the servers' parameters as of its last
sync (the last trainer to finish sees every trainer's updates).
"""
import argparse
import glob
import json
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fluidity as fluid  # noqa: E402
from ctr_dnn import build_ctr_dnn  # noqa: E402
from fluidity.datafeed import DataFeedDesc, MultiSlotReader  # noqa: E402
from fluidity.datafeed.generate import generate_ctr  # noqa: E402
from fluidity.distributed.communicator import GeoCommunicator  # noqa: E402
from fluidity.transpiler import DistributeTranspilerConfig  # noqa: E402
from fluidity.transpiler.geo_sgd_transpiler import GeoSgdTranspiler  # noqa: E402

SHAPE = dict(vocab=5000, sparse_slots=8, dense_slots=5)   # the generated data's


def make_data(out_dir, lines, files, test_lines=2000, seed=3):
    """(train, test) dicts of generate_ctr: `files` training files, one held-out file."""
    train = generate_ctr(out_dir, lines, files=files, seed=seed, **SHAPE)
    test = generate_ctr(out_dir, test_lines, files=1, seed=seed, prefix="test", **SHAPE)
    return train, test


def read_data(data_dir):
    """(train, test) dicts like make_data's from a directory generate_ctr wrote into."""
    files = sorted(glob.glob(os.path.join(data_dir, "train-*.txt")))
    test = sorted(glob.glob(os.path.join(data_dir, "test-*.txt")))
    if not files or not test:
        raise SystemExit(f"{data_dir} holds no train-*.txt / test-*.txt files")
    common = {"desc": os.path.join(data_dir, "data_feed.prototxt"),
              "model": os.path.join(data_dir, "model.json")}
    return dict(common, files=files), dict(common, files=test)


def build(model, vocab, lr=0.05, emb_dim=8, hidden=(64, 64)):
    """(main, startup, test program, vars) of the CTR-DNN over the data's slots (SGD)."""
    return build_ctr_dnn(model["sparse_slots"], dense_dim=len(model["dense_weights"]),
                         vocab=vocab, emb_dim=emb_dim, hidden=hidden, lr=lr, optimizer="sgd",
                         with_auc=False)


def geo_transpile(main, startup, trainer_id, endpoints, trainers, push_nums):
    config = DistributeTranspilerConfig()
    config.geo_sgd_mode = True
    config.geo_sgd_need_push_nums = push_nums
    t = GeoSgdTranspiler(config)
    t.transpile(trainer_id, program=main, pservers=",".join(endpoints), trainers=trainers,
                sync_mode=False, startup_program=startup)
    return t


def serve(t, endpoint, scope=None):
    """Run the pserver of `endpoint` until every trainer has said goodbye."""
    scope = scope if scope is not None else fluid.Scope()
    pmain, pstart = t.get_pserver_programs(endpoint)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(pstart, scope=scope)
    exe.run(pmain, scope=scope)
    return scope


def train(t, startup, desc, files, workers, epochs, loss, scope, push_nums=None,
          push_seconds=None, scale=None):
    """Train `t`'s trainer program on `files` with a GEO communicator; returns (the
    stopped communicator, the AsyncExecutor's result per epoch). The caller closes the
    communicator (its goodbye to the servers); after a failure it has said goodbye."""
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    comm = GeoCommunicator(t.plan, scope, push_nums=push_nums, push_seconds=push_seconds,
                           scale=scale)
    comm.start()
    results = []
    try:
        for _ in range(epochs):
            results.append(fluid.AsyncExecutor().run(
                t.get_trainer_program(), desc, files, workers, fetch=[loss], scope=scope,
                progress=False))
    except BaseException:
        comm.abort()
        raise
    comm.stop()
    return comm, results


def held_out_logloss(test_prog, predict, desc, files, scope):
    exe = fluid.Executor(fluid.CPUPlace())
    total, n = 0.0, 0
    for batch in MultiSlotReader(desc, files, batch_size=4096):
        (p,) = exe.run(test_prog, feed=batch, fetch_list=[predict], scope=scope)
        y = np.asarray(batch["click"]).reshape(-1)
        q = np.clip(p[np.arange(len(y)), y].astype(np.float64), 1e-7, 1)
        total, n = total - np.log(q).sum(), n + len(y)
    return total / n


def main():
    ap = argparse.ArgumentParser(description="CTR-DNN, GEO-SGD over parameter servers",
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--lines", type=int, default=20000, help="generated training lines")
    ap.add_argument("--files", type=int, default=8, help="generated training files")
    ap.add_argument("--data-dir", default="", help="read generate_ctr files from here")
    ap.add_argument("--epochs", type=int, default=2, help="passes over a trainer's files")
    ap.add_argument("--workers", type=int, default=2, help="AsyncExecutor threads a trainer")
    ap.add_argument("--push-nums", type=int, default=20,
                    help="batches between a trainer's syncs (geo_sgd_need_push_nums)")
    a = ap.parse_args()
    role = os.environ.get("TRAINING_ROLE")
    if role not in ("PSERVER", "TRAINER"):
        raise SystemExit("run me with `fluidity launch --server_num 2 --worker_num 2 "
                         "examples/dist_ctr.py` (TRAINING_ROLE is not set)")
    endpoints = os.environ["PADDLE_PSERVERS_IP_PORT_LIST"].split(",")
    trainers = int(os.environ["PADDLE_TRAINERS_NUM"])
    tid = int(os.environ["PADDLE_TRAINER_ID"])
    with tempfile.TemporaryDirectory() as d:
        train_data, test_data = (read_data(a.data_dir) if a.data_dir else
                                 make_data(d, a.lines, a.files))
        with open(train_data["model"]) as f:
            model = json.load(f)
        vocab = int(model.get("vocab", SHAPE["vocab"]))
        main_prog, startup, test_prog, v = build(model, vocab)
        t = geo_transpile(main_prog, startup, tid, endpoints, trainers, a.push_nums)
        if role == "PSERVER":
            ep = os.environ["POD_IP"] + ":" + os.environ["PADDLE_PORT"]
            mine = [b.name for v in t.plan.vars for b in v.blocks if b.endpoint == ep]
            print(f"pserver {ep}: serving {len(mine)} parameter blocks ({', '.join(mine)})")
            serve(t, ep)
            print(f"pserver {ep}: every trainer said goodbye")
            return 0
        desc = DataFeedDesc(train_data["desc"])
        desc.set_batch_size(64)
        mine = train_data["files"][tid::trainers]
        if not mine:
            raise SystemExit(f"trainer {tid}: no training file (fewer files than trainers)")
        scope = fluid.Scope()
        comm, results = train(t, startup, desc, mine, a.workers, a.epochs, v["loss"], scope,
                              push_nums=a.push_nums)
        try:
            for e, r in enumerate(results):
                print(f"trainer {tid} epoch {e + 1}: mean loss {r[0]:.4f}, "
                      f"{r.examples_per_sec:,.0f} examples/s ({r.mode})")
            s = comm.stats
            print(f"trainer {tid}: {s.syncs} syncs, {s.bytes_sent / 1e6:.2f} MB sent, "
                  f"{s.bytes_received / 1e6:.2f} MB received, {s.rows_pushed} table rows "
                  f"pushed, {s.rpc_seconds:.2f} s in RPC")
            loss = held_out_logloss(test_prog, v["predict"], desc, test_data["files"], scope)
            print(f"trainer {tid}: held-out log-loss {loss:.4f} of the servers' parameters at "
                  f"its last sync")
        finally:
            comm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
