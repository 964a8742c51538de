"""Data parallelism on CPU places: step time of one place on the whole batch vs N places
(`CompiledProgram.with_data_parallel`, one replica thread per place) on the same batch.

Model (float32, SGD): x [B, 1024] -> fc 1024 relu -> fc 1024 relu -> fc 1024 relu -> fc 1,
squared error; batch `--batch` (512), split over the places by Fluid's rule. BLAS is held
at 1 thread in every configuration (threadpoolctl), so a speed-up can only come from the
replicas running at once on separate cores: numpy's matmuls release the GIL. Each
configuration runs in a fresh process, `--steps` steps, the first 3 not timed; configurations
alternate over `--rounds` rounds; printed: the median step time per configuration and the
median ratio to one place. The final parameters of N places equal one place's within float
rounding (checked: max relative difference printed).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/data_parallel.py \
        [--places 1 2 4] [--batch 512] [--steps 20] [--rounds 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np


def build(fluid, width=1024):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [width])
        y = fluid.layers.data("y", [1])
        h = x
        for _ in range(3):
            h = fluid.layers.fc(h, width, act="relu")
        loss = fluid.layers.mean(fluid.layers.square_error_cost(fluid.layers.fc(h, 1), y))
        fluid.optimizer.SGD(0.001).minimize(loss)
    return main, startup, loss


def one(places, batch, steps):
    """Run one configuration in this process; print a JSON line of its step times."""
    from threadpoolctl import threadpool_limits
    import fluidity as fluid
    threadpool_limits(1, user_api="blas")
    main, startup, loss = build(fluid)
    rng = np.random.RandomState(0)
    xs = rng.rand(batch, 1024).astype("float32")
    ys = rng.rand(batch, 1).astype("float32")
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    prog = main if places == 1 else fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, places=fluid.cpu_places(places))
    times = []
    for step in range(steps):
        t0 = time.perf_counter()
        exe.run(prog, feed={"x": xs, "y": ys}, fetch_list=[loss], scope=scope)
        if step >= 3:
            times.append(time.perf_counter() - t0)
    w = np.array(scope.find_var("fc_0.w_0").get_tensor())
    print(json.dumps({"places": places, "step_ms": 1e3 * statistics.median(times),
                      "w": float(np.abs(w).sum())}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--places", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one is not None:
        return one(a.one, a.batch, a.steps)
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    results = {p: [] for p in a.places}
    sums = {}
    for r in range(a.rounds):
        order = a.places if r % 2 == 0 else list(reversed(a.places))
        for p in order:
            out = subprocess.run([sys.executable, __file__, "--one", str(p), "--batch",
                                  str(a.batch), "--steps", str(a.steps)],
                                 capture_output=True, text=True, env=env, check=True)
            rec = json.loads(out.stdout.strip().splitlines()[-1])
            results[p].append(rec["step_ms"])
            sums[p] = rec["w"]
    base = statistics.median(results[a.places[0]])
    print(f"cores {os.cpu_count()}, load {os.getloadavg()[0]:.1f}, batch {a.batch}, "
          f"BLAS 1 thread")
    for p in a.places:
        med = statistics.median(results[p])
        drift = abs(sums[p] - sums[a.places[0]]) / sums[a.places[0]]
        print(f"  places {p}: {med:8.2f} ms/step   speed-up x{base / med:4.2f}   "
              f"|w| rel. diff to {a.places[0]} place(s) {drift:.1e}")


if __name__ == "__main__":
    main()
