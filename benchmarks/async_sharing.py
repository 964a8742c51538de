"""What a Hogwild worker thread pays for another one training beside it, on the word2vec
workloads of async_word2vec.py: its CPU time a batch in the compiled worker loop when

  solo     it trains alone (the other thread waits),
  duo      both train, on the shared tables (AsyncExecutor's threads),
  private  both train, each on a private copy of the tables (nothing shared: the most any
           scheme that keeps hot rows per worker could recover),

taking turns chunk by chunk in one process (two loops, each on its own files' chunks, a
barrier before each chunk), so that the machine's drift in speed (+-20% over seconds on a
shared VM) falls on every mode alike; runs done one after another do not compare that finely.
duo / solo is the cost of the second thread to the first (sharing, caches, memory), private
/ solo the part that is not the tables' sharing. Worker 0's CPU time is counted
(CLOCK_THREAD_CPUTIME_ID in the loop), so a loaded machine that deschedules it does not count.
The modes train the same chunks in turn; the parameters keep training across turns.

On a loaded machine the two threads seldom run at once, which dilutes duo and private
towards solo; so the loop also logs each batch's wall and CPU times (native_loop's batch
log), and the script reports worker 0's median CPU a batch over its batches that ran
undisturbed (wall time within 3% of CPU time) while worker 1 ran undisturbed batches the
whole time: two cores at once, as on an idle machine.

    PYTHONPATH=. .venv/bin/python benchmarks/async_sharing.py --workload text --rounds 3

(async_word2vec.py builds the data first: run it once with the same --workload.)
"""
import argparse
import ctypes
import json
import os
import sys
import threading

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "examples"))

import fluidity as fluid  # noqa: E402
from fluidity.codegen import abi  # noqa: E402
from fluidity.datafeed import DataFeedDesc, MultiSlotReader  # noqa: E402
from fluidity.executor.async_executor import align_persistables, lower_step  # noqa: E402
from fluidity.executor.native_loop import ChunkCursor, CompiledWorkerStep  # noqa: E402
from fluidity.executor.shared_memory import aligned_empty  # noqa: E402

MODES = ("solo", "duo", "private")
UNDISTURBED = 1.03      # a batch whose wall time is within 3% (+ 1.5 us) of its CPU time


def undisturbed(log):
    """Which of a batch log's batches ran on a core from start to end."""
    return log[:, 1] - log[:, 0] <= (log[:, 3] - log[:, 2]) * UNDISTURBED + 1500


def corun_cpu(a, b):
    """CPU ns of the batches of log `a` that ran undisturbed while undisturbed batches of
    log `b` (3 us apart at most) covered their whole wall interval."""
    ok_b = undisturbed(b)
    starts, ends = b[ok_b, 0], b[ok_b, 1]
    out = []
    for k in np.flatnonzero(undisturbed(a)):
        j = np.searchsorted(starts, a[k, 0], side="right") - 1
        if j < 0 or ends[j] < a[k, 0]:
            continue
        while ends[j] < a[k, 1] and j + 1 < len(starts) and starts[j + 1] - ends[j] < 3000:
            j += 1
        if ends[j] >= a[k, 1]:
            out.append(a[k, 3] - a[k, 2])
    return out


def workload(name, data_dir):
    """(program, startup, loss, desc, batch, train files) of async_word2vec.py's workload."""
    if name == "text":
        from async_word2vec import build_text_sgns
        info_path, batch = os.path.join(data_dir or os.path.join(ROOT, "data", "w2v-text"),
                                        "bench.json"), 100
    else:
        from word2vec import build_word2vec
        info_path, batch = os.path.join(data_dir or os.path.join(ROOT, "data", "w2v"),
                                        "bench.json"), 256
    if not os.path.exists(info_path):
        sys.exit(f"no data at {info_path}: run benchmarks/async_word2vec.py --workload {name} "
                 f"first")
    with open(info_path) as f:
        info = json.load(f)
    if name == "text":
        main, startup, _, v = build_text_sgns(info["vocab"], 64, 5, lr=0.025 * batch)
    else:
        main, startup, _, v = build_word2vec(5000, 32, 5, lr=0.025 * batch)
    desc = DataFeedDesc(info["desc"])
    desc.set_batch_size(batch)
    return main, startup, v["loss"].name, desc, batch, info["train"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", choices=("text", "synthetic"), default="text")
    ap.add_argument("--rounds", type=int, default=3, help="passes over the files")
    ap.add_argument("--data-dir", default=None)
    a = ap.parse_args()
    main_prog, startup, loss, desc, batch, files = workload(a.workload, a.data_dir)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    align_persistables(main_prog, scope)
    low = lower_step(main_prog, [loss])
    slots = MultiSlotReader(desc, []).slots
    steps = []
    for _ in range(2):
        step, why = CompiledWorkerStep.make(low, [loss], slots, scope)
        if step is None:
            sys.exit(f"no compiled worker loop: {why}")
        step.configure(stop=np.zeros(1, np.int8), budget_s=0, report_every=1 << 40)
        step.log_batches(1 << 16)
        steps.append(step)
    chunks = [[c for f in files[w::2] for c in MultiSlotReader(desc, [f]).chunks()]
              for w in range(2)]
    tables = {var.name: var.value.array for _, var, _ in steps[0].params}
    private = [{k: aligned_empty(t.shape, t.dtype) for k, t in tables.items()} for _ in range(2)]
    for copy in private:
        for k, t in copy.items():
            t[...] = tables[k]
    barrier = threading.Barrier(2)
    spent, logs = {}, {}

    def worker(w):
        step = steps[w]
        try:
            for i, (chunk, dense_dim) in enumerate(chunks[w][:min(map(len, chunks))]):
                for mode in (MODES if i % 2 == 0 else MODES[::-1]):
                    step.bind(chunk, dense_dim, batch, ChunkCursor())
                    for j, var, _ in step.params:
                        t = private[w][var.name] if mode == "private" else tables[var.name]
                        abi.put_tensor(step.args.inputs[j], t.ctypes.data, t.shape)
                    step.batch_log()
                    barrier.wait()
                    if mode == "solo" and w == 1:
                        continue
                    c0, b0 = step.state.cpu_ns, step.state.total_batches
                    step.lib.fl_worker_run(ctypes.byref(step.state), chunk.n)
                    ns, nb = spent.get((w, mode), (0, 0))
                    spent[(w, mode)] = (ns + step.state.cpu_ns - c0,
                                        nb + step.state.total_batches - b0)
                    logs[(w, mode, i)] = step.batch_log()
        except threading.BrokenBarrierError:
            pass
        except BaseException:
            barrier.abort()
            raise

    print(f"workload: {a.workload} word2vec, batch {batch}, {len(files)} files, machine: "
          f"{os.cpu_count()} cores")
    per = {m: [] for m in MODES}
    corun = {m: [] for m in MODES}
    for r in range(a.rounds):
        spent.clear()
        logs.clear()
        threads = [threading.Thread(target=worker, args=(w,)) for w in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for m in MODES:
            ns, nb = spent[(0, m)]
            per[m].append(ns / nb / 1e3)
            for (w, mode, i), log in logs.items():
                if w == 0 and mode == m:
                    corun[m] += [int(x) for x in (log[undisturbed(log), 3] -
                                                  log[undisturbed(log), 2])] if m == "solo" \
                        else corun_cpu(log, logs.get((1, m, i), np.zeros((0, 4), np.int64)))
        print(f"round {r + 1}: worker 0's CPU us a batch: " +
              ", ".join(f"{m} {per[m][-1]:.1f}" for m in MODES) +
              f" (load average {os.getloadavg()[0]:.2f})", flush=True)
    for m in MODES[1:]:
        ratio = np.array(per[m]) / np.array(per["solo"])
        print(f"{m} / solo: {np.median(ratio):.3f} (per round "
              f"{', '.join(f'{x:.3f}' for x in ratio)})")
    print("worker 0's batches that ran undisturbed (solo) / undisturbed while worker 1 ran "
          "too (duo, private): median CPU us a batch")
    for m in MODES:
        print(f"  {m:8s} {len(corun[m]):7,d} batches  " +
              (f"{np.median(corun[m]) / 1e3:.1f} us  ({np.median(corun[m]) / np.median(corun['solo']):.3f}x solo)"
               if corun[m] and corun["solo"] else "none"))
    for s in steps:
        s.close()


if __name__ == "__main__":
    main()
