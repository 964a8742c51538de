"""Corrupt saved parameter files at random and count how loads end: the tester's experiment
behind docs/reliability.md's "190 of 1,200 corrupted parameter files loaded silently".

A small model (an MLP with Adam: weights, moments, beta powers, a learning-rate counter) is
saved with `save_persistables` (one file per variable); each trial copies the save, corrupts
one file (a bit flip, a byte overwrite, a truncation or an appended byte at a random place),
loads it and sorts the outcome:

  refused      the load raised a FluidityError (ManifestError names the changed file;
               FormatError the broken record)
  same         it loaded, every value equal to the save's (the change hit nothing read)
  silent       it loaded with different values and no word: what a checksum prevents
  raw          any other exception (a defect)

`--no-manifest` deletes the manifest first (as in a directory Paddle wrote), which shows what
the record checks alone catch.

    python scripts/corrupt_saves.py --trials 1200 [--no-manifest] [--seed 0]
"""
import argparse
import collections
import os
import shutil
import sys
import tempfile

import numpy as np

import fluidity as fluid
from fluidity.errors import FluidityError


def build():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [16])
        label = fluid.layers.data("label", [1], dtype="int64")
        h = fluid.layers.fc(x, 32, act="relu")
        y = fluid.layers.fc(h, 4, act="softmax")
        loss = fluid.layers.mean(fluid.layers.cross_entropy(y, label))
        fluid.optimizer.Adam(0.01).minimize(loss)
    return main, startup


def values(program, scope):
    return {v.name: np.array(scope.find_var(v.name).get_tensor())
            for v in program.list_vars() if fluid.io.is_persistable(v)}


def corrupt(path, rng):
    data = bytearray(open(path, "rb").read())
    kind = rng.integers(4)
    at = int(rng.integers(len(data)))
    if kind == 0:
        data[at] ^= 1 << int(rng.integers(8))
    elif kind == 1:
        data[at] = int(rng.integers(256))
    elif kind == 2:
        del data[at:]
    else:
        data.append(int(rng.integers(256)))
    open(path, "wb").write(bytes(data))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=1200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-manifest", action="store_true")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    prog, startup = build()
    exe = fluid.Executor(fluid.CPUPlace())
    work = tempfile.mkdtemp(prefix="fluidity-corrupt-")
    try:
        scope = fluid.Scope()
        with fluid.scope_guard(scope):
            exe.run(startup)
            saved = os.path.join(work, "saved")
            fluid.io.save_persistables(exe, saved, prog)
            want = values(prog, scope)
        if args.no_manifest:
            os.remove(os.path.join(saved, "__fluidity_manifest__.json"))
        files = sorted(f for f in os.listdir(saved) if not f.startswith("__fluidity"))
        outcomes = collections.Counter()
        for _ in range(args.trials):
            d = os.path.join(work, "trial")
            shutil.rmtree(d, ignore_errors=True)
            shutil.copytree(saved, d)
            corrupt(os.path.join(d, files[int(rng.integers(len(files)))]), rng)
            scope = fluid.Scope()
            with fluid.scope_guard(scope):
                exe.run(startup)
                try:
                    fluid.io.load_persistables(exe, d, prog)
                except FluidityError:
                    outcomes["refused"] += 1
                    continue
                except Exception as e:  # noqa: BLE001 - counted and shown, the point
                    outcomes["raw"] += 1
                    print(f"raw {type(e).__name__}: {e}", file=sys.stderr)
                    continue
                got = values(prog, scope)
                same = all(np.array_equal(got[n], want[n], equal_nan=True) for n in want)
                outcomes["same" if same else "silent"] += 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    mode = "without the manifest" if args.no_manifest else "with the manifest"
    print(f"{args.trials} corrupted parameter files ({len(files)} files a save), {mode}: "
          + ", ".join(f"{k} {outcomes[k]}" for k in ("refused", "same", "silent", "raw")))
    return 1 if outcomes["raw"] else 0


if __name__ == "__main__":
    sys.exit(main())
