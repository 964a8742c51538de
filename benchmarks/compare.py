"""Before and after, in one run: the headline figures of the benchmarks, measured for two
revisions of Fluidity in alternating rounds.

The base revision is checked out into a temporary git worktree; each round runs every chosen
benchmark once with the base tree and once with the working tree (the order alternating
between rounds, so both sides see the same drift of a shared machine), each with its own
tree's script and its own package first on `sys.path`. Printed per figure: the median of
each side and the median of the per-round ratios, as a speed ratio (> 1: the working tree is
faster; memory figures as after/before). OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE are unset for
the runs (they slow a current numpy on these machines).

Benchmarks and the figures taken (each benchmark's own docstring states its workload):
  dispatch   benchmarks/dispatch.py: executor us/op over 1000 chained scale ops
  train_mlp  benchmarks/train_mlp.py --steps 200: MLP 784-256-128-10 SGD steps/s at batch
             1, 64, 512 (and the numpy floor, the same code on both sides: a control)
  memory     benchmarks/memory.py --steps 3: per model and executor configuration, the
             activation bytes (must not change) and the step time
  compiled   benchmarks/compiled.py --mode train-mlp: us per compiled MLP training step at
             batch 1, 64, 512
  compiled_ctr  benchmarks/compiled.py --mode ctr-train: compiled CTR-DNN training steps/s
  async_ctr  benchmarks/async_ctr.py throughput only (no quality, torch or paddle runs), one
             round over 8 files of the 400k-line CTR data: async-1, async-N and indep-N
             examples/s

    .venv/bin/python benchmarks/compare.py --base 314afb8 [--rounds 3] \\
        [dispatch train_mlp memory async_ctr]
"""
import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CTR_DATA = os.path.join(ROOT, "data", "ctr_bench")


def _grab(pattern, label, better):
    def parse(out):
        return {label: (float(m.group(1).replace(",", "")), better)
                for m in re.finditer(pattern, out, re.M)}
    return parse


def _named(pattern, unit, better):
    """Figures whose label is the pattern's first group, value its second."""
    def parse(out):
        return {f"{m.group(1)} {unit}": (float(m.group(2).replace(",", "")), better)
                for m in re.finditer(pattern, out, re.M)}
    return parse


def _memory(out):
    got, model = {}, None
    for line in out.splitlines():
        m = re.match(r"^(\w+): \d+ steps", line)
        if m:
            model = m.group(1)
            continue
        m = re.match(r"^(interpreter|release|memopt|linear)\s+([\d.]+) MiB\s+\S+\s+[\d.]+ MiB"
                     r"\s+\d+ MiB\s+(\d+)", line)
        if m and model:
            got[f"{model} {m.group(1)} activations MiB"] = (float(m.group(2)), "same")
            got[f"{model} {m.group(1)} step ms"] = (float(m.group(3)), "lower")
    return got


def _join(*parsers):
    def parse(out):
        got = {}
        for p in parsers:
            got.update(p(out))
        return got
    return parse


BENCHES = {
    "dispatch": (["benchmarks/dispatch.py", "--repeats", "30"],
                 _grab(r"^executor :\s+([\d.]+) us/op", "executor us/op", "lower")),
    "train_mlp": (["benchmarks/train_mlp.py", "--steps", "200", "--paddle-python", "none"],
                  _join(*[_grab(rf"^\s*{b}\s+(\d+)/s", f"batch {b} steps/s", "higher")
                          for b in (1, 64, 512)],
                        *[_grab(rf"^\s*{b}\s+\d+/s\s+(\d+)/s", f"batch {b} numpy floor "
                                f"steps/s (control)", "higher") for b in (1, 64, 512)])),
    "memory": (["benchmarks/memory.py", "--steps", "3"], _memory),
    "compiled": (["benchmarks/compiled.py", "--mode", "train-mlp", "--steps", "100",
                  "--paddle-python", "none"],
                 _join(*[_grab(rf"^\s*{b}\s+(\d+)us", f"compiled MLP batch {b} us/step", "lower")
                         for b in (1, 64, 512)])),
    "compiled_ctr": (["benchmarks/compiled.py", "--mode", "ctr-train", "--steps", "300",
                      "--paddle-python", "none"],
                     _grab(r"^\s*compiled:\s+([\d.]+) steps/s", "compiled CTR-DNN steps/s",
                           "higher")),
    "async_ctr": (["benchmarks/async_ctr.py", "--skip", "quality,torch,paddle", "--rounds", "1",
                   "--round-files", "8", "--data-dir", CTR_DATA],
                  _named(r"^\s*((?:async|indep)-\d+): +([\d,]+) ex/s", "ex/s", "higher")),
}


def run(tree, args):
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    env["PYTHONPATH"] = tree
    t = time.perf_counter()
    r = subprocess.run([sys.executable, *args], cwd=tree, env=env, capture_output=True,
                       text=True)
    if r.returncode:
        sys.exit(f"{' '.join(args)} failed in {tree}:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")
    return r.stdout, time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("benches", nargs="*", metavar="BENCH",
                    help=f"any of {', '.join(BENCHES)} (default: all)")
    ap.add_argument("--base", required=True, help="the git revision to compare against")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    unknown = [b for b in a.benches if b not in BENCHES]
    if unknown:
        ap.error(f"unknown benchmark(s) {unknown}; choose from {', '.join(BENCHES)}")
    a.benches = a.benches or list(BENCHES)
    base_rev = subprocess.run(["git", "rev-parse", "--short", a.base], cwd=ROOT, text=True,
                              capture_output=True, check=True).stdout.strip()
    head_rev = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, text=True,
                              capture_output=True, check=True).stdout.strip()
    print(f"compare: base {base_rev} vs working tree {head_rev}; {a.rounds} rounds, "
          f"alternating order; {platform.machine()} {os.cpu_count()} cores, Python "
          f"{platform.python_version()}; load average {os.getloadavg()[0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="fluidity-base-") as tmp:
        base = os.path.join(tmp, "base")
        subprocess.run(["git", "worktree", "add", "--detach", "-q", base, base_rev], cwd=ROOT,
                       check=True)
        try:
            trees = {"before": base, "after": ROOT}
            got = {name: {"before": [], "after": []} for name in a.benches}
            for r in range(a.rounds):
                order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
                for name in a.benches:
                    args, parse = BENCHES[name]
                    for side in order:
                        out, secs = run(trees[side], args)
                        figures = parse(out)
                        if not figures:
                            sys.exit(f"{name}: no figures found in the output of {side}:\n"
                                     f"{out[-2000:]}")
                        got[name][side].append(figures)
                        print(f"round {r + 1} {name:9s} {side:6s} {secs:6.1f}s", flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", base], cwd=ROOT)
    print()
    print(f"{'figure':48s} {'before':>11s} {'after':>11s} {'speed ratio':>12s}  per round")
    for name in a.benches:
        labels = list(got[name]["before"][0])
        for label in labels:
            b = [f[label][0] for f in got[name]["before"]]
            h = [f[label][0] for f in got[name]["after"]]
            better = got[name]["before"][0][label][1]
            if better == "higher":
                per = [y / x for x, y in zip(b, h)]
            elif better == "lower":
                per = [x / y for x, y in zip(b, h)]
            else:                       # a size: after / before, 1.00 = the same
                per = [y / x for x, y in zip(b, h)]
            print(f"{name + ' ' + label:48s} {statistics.median(b):11.3f} "
                  f"{statistics.median(h):11.3f} {statistics.median(per):11.2f}x  "
                  f"{', '.join(f'{x:.2f}' for x in per)}"
                  + ("  (size: after/before)" if better == "same" else ""))


if __name__ == "__main__":
    main()
