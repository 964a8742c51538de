"""A training step with dropout, interpreted vs compiled: MLP 784-256-128-10 (relu, each
hidden layer followed by dropout 0.5, upscale_in_train), softmax_with_cross_entropy + mean,
SGD lr 0.01. Before the Philox stream (core/philox.py) training dropout ran as a Python step
between native segments; now the step compiles whole.

Median time of a full `exe.run(program, feed={x, label}, fetch_list=[loss])`, the two
taking turns round by round (so a loaded machine slows both alike); the ratio is
interpreter time / compiled time. One math thread.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/dropout_train.py [--rounds 15]
"""
import argparse
import os
import statistics
import time

import numpy as np

import fluidity as fluid


def build(p):
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 1
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [784])
        label = fluid.layers.data("label", [1], dtype="int64")
        h = x
        for width in (256, 128):
            h = fluid.layers.dropout(fluid.layers.fc(h, width, act="relu"), p,
                                     dropout_implementation="upscale_in_train")
        logits = fluid.layers.fc(h, 10)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        fluid.optimizer.SGD(0.01).minimize(loss)
    return main, startup, loss


def stepper(kind, batch, p):
    main, startup, loss = build(p)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    prog = main
    if kind == "compiled":
        prog = fluid.CompiledProgram(main).with_native_code(feed=["x", "label"],
                                                            fetch_list=[loss])
        assert "0 as Python steps" in prog.explain(feed=["x", "label"], fetch_list=[loss.name])
    rng = np.random.default_rng(0)
    feed = {"x": rng.standard_normal((batch, 784)).astype(np.float32),
            "label": rng.integers(0, 10, (batch, 1))}

    def step():
        exe.run(prog, feed=feed, fetch_list=[loss], scope=scope)
    return step


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--per-round", type=int, default=20)
    ap.add_argument("--p", type=float, default=0.5)
    a = ap.parse_args()
    print(f"dropout MLP training step (p={a.p}), median of {a.rounds} rounds x "
          f"{a.per_round} steps, alternating")
    print(f"{'batch':>5} {'compiled':>10} {'interpreter':>12} {'ratio':>7}")
    for batch in (1, 64, 512):
        steps = {k: stepper(k, batch, a.p) for k in ("interpreter", "compiled")}
        for fn in steps.values():
            for _ in range(10):
                fn()
        times = {k: [] for k in steps}
        for _ in range(a.rounds):
            for k, fn in steps.items():
                t = time.perf_counter()
                for _ in range(a.per_round):
                    fn()
                times[k].append((time.perf_counter() - t) / a.per_round)
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"{batch:>5} {med['compiled'] * 1e6:>8.0f}us {med['interpreter'] * 1e6:>10.0f}us "
              f"{med['interpreter'] / med['compiled']:>6.2f}x")
    print(f"(load average at end {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
