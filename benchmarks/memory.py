"""Peak memory of one training step: interpreter, + release_memory, memory_optimize, linear.

Models (float32, Adam): a deep MLP (16 fc layers of 1024 with relu, batch 256, squared
error) and a CNN (3 x [conv 3x3 + batch_norm + relu + max-pool 2], channels 16/32/64 on
3x32x32 images, fixed-seed dropout, fc 10, softmax cross-entropy; batch 64).

Configurations, each in a fresh subprocess:
  interpreter   the default Executor
  release       interpreter on the program after release_memory (delete_var after last use)
  memopt        interpreter on the program after memory_optimize (dead variables reused)
  linear        ExecutionStrategy("linear"): static memory plan in one arena

Measured in each: `activations` -- bytes of temporaries alive at once: after every op of a
step, the distinct arrays (by owning buffer) held by the run's variables outside the
persistable ones, plus the linear plan's arena, maximum over the step; `traced` -- the same
step's tracemalloc peak over its start (every numpy allocation, kernels' scratch included,
plus the linear plan's arena, allocated in an earlier step);
`rss` -- the process's peak resident set (ru_maxrss, parameters and optimizer state
included); `ms` -- median step time of the untraced steps. Losses of all steps must be
bit-identical across configurations.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/memory.py \
        [--models mlp cnn] [--steps 4]
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc

import numpy as np

import fluidity as fluid
from fluidity.executor import ExecutionStrategy
from fluidity.transpiler.memory_optimization import memory_optimize, release_memory

CONFIGS = ["interpreter", "release", "memopt", "linear"]


def mlp():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [1024])
        y = fluid.layers.data("y", [1])
        h = x
        for _ in range(16):
            h = fluid.layers.fc(h, 1024, act="relu")
        loss = fluid.layers.mean(fluid.layers.square_error_cost(fluid.layers.fc(h, 1), y))
        fluid.optimizer.Adam(1e-4).minimize(loss)
    r = np.random.default_rng(0)
    xv = r.normal(size=(256, 1024)).astype("float32")
    return main, startup, loss, {"x": xv, "y": xv[:, :8].sum(1, keepdims=True)}


def cnn():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup):
        img = fluid.layers.data("img", [3, 32, 32])
        label = fluid.layers.data("label", [1], dtype="int64")
        h = img
        for ch in (16, 32, 64):
            h = fluid.layers.conv2d(h, ch, 3, padding=1)
            h = fluid.layers.batch_norm(h, act="relu")
            h = fluid.layers.pool2d(h, 2, "max", pool_stride=2)
        h = fluid.layers.dropout(h, 0.2, seed=7)
        logits = fluid.layers.fc(h, 10)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        fluid.optimizer.Adam(1e-3).minimize(loss)
    r = np.random.default_rng(0)
    return main, startup, loss, {"img": r.normal(size=(64, 3, 32, 32)).astype("float32"),
                                 "label": r.integers(0, 10, size=(64, 1)).astype("int64")}


MODELS = {"mlp": mlp, "cnn": cnn}


def _owners(scope, extra=()):
    owners = {id(a): a.nbytes for a in extra}
    for v in scope._vars.values():
        val = v.value
        arrays = []
        if isinstance(val, fluid.LoDTensor):
            arrays = [val._array]
        elif isinstance(val, fluid.SelectedRows):
            arrays = [val.value, val.rows]
        for a in arrays:
            if isinstance(a, np.ndarray):
                base = a if a.base is None else a.base
                owners[id(base)] = base.nbytes
    return sum(owners.values())


def child(model, config, steps):
    main, startup, loss, feed = MODELS[model]()
    if config == "release":
        release_memory(main)
    elif config == "memopt":
        memory_optimize(main)
    exe = fluid.Executor(fluid.CPUPlace(),
                         strategy=ExecutionStrategy("linear") if config == "linear" else None)
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    losses, times = [], []
    losses.append(exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0])   # prepares
    plan = next(iter(exe._cache[main].values())).plan
    for _ in range(steps - 2):
        t = time.perf_counter()
        losses.append(exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0])
        times.append(time.perf_counter() - t)

    # one more step, measured op by op (and by tracemalloc)
    live = []
    tls = getattr(plan, "_tls", None)      # the linear plan's arena of the running step

    def measure(step):
        def wrapped(frame, env):
            step(frame, env)
            live.append(_owners(env.scope, [tls.arena.arena] if tls is not None else []))
        return wrapped
    plain = plan.steps
    plan.steps = [measure(s) for s in plain]
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    losses.append(exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0])
    traced = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    if tls is not None:        # the arena outlives steps: allocated before tracing began
        traced += plan._arenas[0].nbytes
    plan.steps = plain
    out = {"model": model, "config": config, "activations": max(live), "traced": traced,
           "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
           "ms": statistics.median(times) * 1e3 if times else None,
           "losses": [float(v.reshape(-1)[0]) for v in losses],
           "loss_bytes": b"".join(v.tobytes() for v in losses).hex()}
    if config == "linear":
        out["plan"] = plan.memory.report()
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--configs", nargs="+", default=CONFIGS, choices=CONFIGS)
    ap.add_argument("--steps", type=int, default=4, help="training steps per configuration "
                    "(the first prepares, the last is measured op by op)")
    ap.add_argument("--child", nargs=2, metavar=("MODEL", "CONFIG"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(*a.child, max(a.steps, 3))
    mib = 1 << 20
    for model in a.models:
        rows = []
        for config in a.configs:
            r = subprocess.run([sys.executable, __file__, "--child", model, config,
                                "--steps", str(a.steps)], capture_output=True, text=True,
                               env=os.environ)
            if r.returncode:
                sys.exit(f"{model}/{config} failed:\n{r.stderr}")
            rows.append(json.loads(r.stdout.strip().splitlines()[-1]))
        ref = rows[0]
        print(f"\n{model}: {len(ref['losses'])} steps, losses {ref['losses']}")
        print(f"{'config':12s} {'activations':>12s} {'vs interp':>9s} {'traced peak':>12s} "
              f"{'peak RSS':>9s} {'step ms':>8s}  losses identical")
        for r in rows:
            same = r["loss_bytes"] == ref["loss_bytes"]
            ms = f"{r['ms']:8.0f}" if r["ms"] is not None else f"{'-':>8s}"
            print(f"{r['config']:12s} {r['activations'] / mib:10.1f} MiB "
                  f"{r['activations'] / ref['activations']:8.1%} "
                  f"{r['traced'] / mib:8.1f} MiB {r['rss'] / mib:5.0f} MiB {ms}  {same}")
        for r in rows:
            if "plan" in r:
                print(r["plan"])
        if not all(r["loss_bytes"] == ref["loss_bytes"] for r in rows):
            sys.exit("losses differ between configurations")


if __name__ == "__main__":
    main()
