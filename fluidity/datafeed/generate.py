"""Synthetic CTR data in MultiSlot format, with clicks drawn from a known logistic model.

Each line has a dense slot `dense_input` (13 floats), 26 sparse slots `C1`..`C26` with one
id each, and the label slot `click`:

    13 0.693 1.204 ... 0.118 1 40311 1 873332 ... 1 5120 1 0

Slot s draws a raw value r from a Zipf distribution (rank r-1 modulo the slot's
cardinality) and hashes (s, r) into `vocab` buckets, like a CTR pipeline's feature hashing.
The click probability is a logistic model over what a reader sees:

    p = sigmoid(bias + dense . dense_weights + sum_s w(id_s)),
    w(id) = sparse_scale * sqrt(3) * (2 u(id) - 1),  u(id) = splitmix64(id ^ weight_salt) / 2^64

so `w` is a fixed function of the hashed id, stored as a few numbers in model.json. Nothing
can predict better than p: the mean of -[p log p + (1-p) log(1-p)] over the lines (the
"optimal_logloss") is the best log-loss a model can expect on data from this generator.

    info = generate_ctr("data/", lines=1_000_000, files=4, seed=0)              # train
    generate_ctr("data/", lines=100_000, seed=0, prefix="test")                  # held out
    evaluate_model("data/model.json", glob("data/test-*"))["optimal_logloss"]

or `python -m fluidity.datafeed.generate data/ --lines 1000000 --files 4`.
Output is deterministic given (seed, prefix, lines) and does not depend on `files`.
"""
import argparse
import json
import os
import zlib

import numpy as np

from google.protobuf import text_format

from .data_feed_pb2 import DataFeedDesc as DataFeedDescProto
from .data_feed_desc import DataFeedDesc

FORMAT = "fluidity-synthetic-ctr/1"
_CHUNK = 50_000  # lines drawn at a time (part of the definition of the output)


def splitmix64(x):
    """The splitmix64 finalizer on a uint64 array (wrapping arithmetic)."""
    x = np.asarray(x, np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def make_model(seed=0, vocab=10**6, sparse_slots=26, dense_slots=13, zipf_a=1.3,
               max_cardinality=10**5, sparse_scale=0.4, bias=-1.8):
    """The generating model's parameters (a JSON-able dict), a function of `seed`."""
    if not 1 <= vocab <= 2**53:
        raise ValueError(f"vocab must be in [1, 2**53], got {vocab}")
    rng = np.random.default_rng([seed, 0])
    card = np.round(10 ** rng.uniform(1, np.log10(max_cardinality), sparse_slots))
    return {
        "format": FORMAT, "seed": seed, "vocab": int(vocab), "zipf_a": zipf_a,
        "dense_slot": "dense_input", "label_slot": "click",
        "sparse_slots": [f"C{i + 1}" for i in range(sparse_slots)],
        "slot_cardinality": card.astype(np.int64).tolist(),
        "slot_salts": rng.integers(0, 2**63, sparse_slots).tolist(),
        "weight_salt": int(rng.integers(0, 2**63)),
        "sparse_scale": sparse_scale, "bias": bias,
        "dense_weights": rng.normal(0.0, 0.3, dense_slots).round(6).tolist(),
    }


def sparse_weights(model, ids):
    """w(id) for an array of hashed ids."""
    u = splitmix64(np.asarray(ids).astype(np.uint64) ^ np.uint64(model["weight_salt"]))
    u = (u >> np.uint64(11)).astype(np.float64) * 2.0**-53
    return model["sparse_scale"] * np.sqrt(3.0) * (2.0 * u - 1.0)


def true_logits(model, dense, ids):
    """dense: [n, dense_slots] floats as read back (float32); ids: [n, sparse_slots]."""
    dense = np.asarray(dense, np.float64)
    return (model["bias"] + dense @ np.asarray(model["dense_weights"])
            + sparse_weights(model, ids).sum(axis=1))


def _losses(logits, clicks):
    p = 1.0 / (1.0 + np.exp(-logits))
    p = np.clip(p, 1e-15, 1 - 1e-15)
    expected = -(p * np.log(p) + (1 - p) * np.log1p(-p))
    realized = -np.where(clicks > 0, np.log(p), np.log1p(-p))
    return expected.sum(), realized.sum()


def _draw(model, rng, n):
    """n lines: dense [n, d] (values exactly as a reader reads them), ids [n, s], clicks."""
    dense = np.log1p(rng.lognormal(0.0, 1.0, (n, len(model["dense_weights"]))))
    dense = dense.round(3).astype(np.float32).astype(np.float64)
    ids = np.empty((n, len(model["sparse_slots"])), np.uint64)
    for s, (card, salt) in enumerate(zip(model["slot_cardinality"], model["slot_salts"])):
        rank = (rng.zipf(model["zipf_a"], n) - 1) % card
        ids[:, s] = splitmix64(rank.astype(np.uint64) ^ np.uint64(salt)) % np.uint64(model["vocab"])
    logits = true_logits(model, dense, ids)
    clicks = (rng.random(n) < 1.0 / (1.0 + np.exp(-logits))).astype(np.int64)
    return dense, ids, clicks, logits


def ctr_data_feed_desc(model, batch_size=32):
    """The DataFeedDesc of the generated files (every slot used)."""
    msg = DataFeedDescProto(name="MultiSlotDataFeed", batch_size=batch_size)
    slots = msg.multi_slot_desc.slots
    slots.add(name=model["dense_slot"], type="float", is_dense=True, is_used=True,
              shape=[-1, len(model["dense_weights"])])
    for name in model["sparse_slots"]:
        slots.add(name=name, type="uint64", is_dense=False, is_used=True)
    slots.add(name=model["label_slot"], type="uint64", is_dense=True, is_used=True,
              shape=[-1, 1])
    return DataFeedDesc.from_text(text_format.MessageToString(msg), "<synthetic ctr>")


def generate_ctr(out_dir, lines, files=1, seed=0, prefix="train", **model_args):
    """Write `lines` lines into `files` files `{prefix}-NNNNN.txt` under out_dir, plus
    data_feed.prototxt and model.json; return a dict with the paths and the data's log-losses
    (optimal_logloss: the best a model can expect; realized_logloss: the true model's on the
    drawn clicks; base_logloss: the best constant prediction's)."""
    os.makedirs(out_dir, exist_ok=True)
    model = make_model(seed, **model_args)
    d, s = len(model["dense_weights"]), len(model["sparse_slots"])
    fmt = f"{d} " + " ".join(["%.3f"] * d) + " " + " ".join(["1 %d"] * (s + 1))
    rng = np.random.default_rng([seed, 1, zlib.crc32(prefix.encode())])
    paths = [os.path.join(out_dir, f"{prefix}-{k:05d}.txt") for k in range(files)]
    bounds = [lines * k // files for k in range(files + 1)]
    expected = realized = clicks_total = 0.0
    outs = [open(p, "w") for p in paths]
    try:
        for start in range(0, lines, _CHUNK):
            n = min(_CHUNK, lines - start)
            dense, ids, clicks, logits = _draw(model, rng, n)
            e, r = _losses(logits, clicks)
            expected, realized, clicks_total = expected + e, realized + r, clicks_total + clicks.sum()
            rows = np.concatenate([dense, ids.astype(np.float64), clicks[:, None]], axis=1)
            text = [fmt % tuple(row) for row in rows.tolist()]
            for k, out in enumerate(outs):  # the slice of this chunk that goes to file k
                a, b = max(bounds[k], start) - start, min(bounds[k + 1], start + n) - start
                if a < b:
                    out.write("\n".join(text[a:b]) + "\n")
    finally:
        for out in outs:
            out.close()
    ctr = clicks_total / max(lines, 1)
    c = min(max(ctr, 1e-15), 1 - 1e-15)
    info = {"files": paths, "lines": lines, "ctr": float(ctr),
            "optimal_logloss": float(expected / max(lines, 1)),
            "realized_logloss": float(realized / max(lines, 1)),
            "base_logloss": float(-(c * np.log(c) + (1 - c) * np.log1p(-c))),
            "desc": os.path.join(out_dir, "data_feed.prototxt"),
            "model": os.path.join(out_dir, "model.json")}
    with open(info["desc"], "w") as f:
        f.write(ctr_data_feed_desc(model).desc())
    with open(info["model"], "w") as f:
        json.dump(model, f, indent=1)
    return info


def evaluate_model(model, files, batch_size=4096):
    """Log-losses of the generating model on generated files (e.g. held-out ones): reads
    them with MultiSlotReader and returns {"lines", "optimal_logloss", "realized_logloss"}."""
    from .multislot import MultiSlotReader
    if not isinstance(model, dict):
        with open(model) as f:
            model = json.load(f)
    reader = MultiSlotReader(ctr_data_feed_desc(model), files, batch_size=batch_size)
    n = expected = realized = 0.0
    for batch in reader:
        ids = np.concatenate([np.asarray(batch[s]) for s in model["sparse_slots"]], axis=1)
        logits = true_logits(model, np.asarray(batch[model["dense_slot"]]), ids)
        e, r = _losses(logits, np.asarray(batch[model["label_slot"]])[:, 0])
        n, expected, realized = n + len(ids), expected + e, realized + r
    return {"lines": int(n), "optimal_logloss": float(expected / max(n, 1)),
            "realized_logloss": float(realized / max(n, 1))}


def main(argv=None):
    ap = argparse.ArgumentParser(description="Write synthetic CTR data (MultiSlot format).")
    ap.add_argument("out_dir")
    ap.add_argument("--lines", type=int, default=100_000)
    ap.add_argument("--files", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prefix", default="train")
    ap.add_argument("--vocab", type=int, default=10**6)
    args = ap.parse_args(argv)
    info = generate_ctr(args.out_dir, args.lines, args.files, args.seed, args.prefix,
                        vocab=args.vocab)
    print(json.dumps({k: v for k, v in info.items() if k != "files"}, indent=1))


if __name__ == "__main__":
    main()
