"""MultiSlot reader throughput, one thread: the C parser vs the pure-Python fallback.

Workload: synthetic CTR data from fluidity.datafeed.generate (seed 0, two files): per line a
dense slot of 13 floats ("%.3f"), 26 sparse uint64 slots of one id each (Zipf ids hashed
into 10**6 buckets) and a label slot, all used: 68 tokens, about 316 bytes a line. Timed:
iterating one MultiSlotReader over the files (read in 2 MiB chunks, parse, slice into batches
of LoDTensors), from OS-cached files. Reports lines/s and MB/s per backend (best of
--repeats runs; the Python backend runs once unless --python-repeats says otherwise) and
the ratio. Then the C backend with one reader per file in 2 threads at once (the files are
the same lines split in two), to show that parsing runs outside the GIL.

    .venv/bin/python benchmarks/multislot_reader.py [--lines 200000] [--batch-size 512]
"""
import argparse
import os
import platform
import tempfile
import threading
import time

from fluidity.datafeed import MultiSlotReader
from fluidity.datafeed.generate import generate_ctr


def time_reader(info, backend, batch_size, repeats):
    best = float("inf")
    for _ in range(repeats):
        reader = MultiSlotReader(info["desc"], info["files"], batch_size=batch_size,
                                 backend=backend)
        t = time.perf_counter()
        batches = sum(1 for _ in reader)
        best = min(best, time.perf_counter() - t)
        assert reader.examples == info["lines"], (reader.examples, info["lines"])
    return best, batches


def time_threads(info, batch_size):
    """One C reader per file, all in threads at once; wall time for all lines."""
    def work(path):
        for _ in MultiSlotReader(info["desc"], [path], batch_size=batch_size, backend="c"):
            pass
    threads = [threading.Thread(target=work, args=(f,)) for f in info["files"]]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=200_000)
    ap.add_argument("--batch-size", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--python-repeats", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        info = generate_ctr(tmp, args.lines, files=2, seed=0)
        size = sum(os.path.getsize(f) for f in info["files"])
        with open(info["files"][0], "rb") as f:
            tokens = len(f.readline().split())
        print(f"workload: {args.lines} lines of synthetic CTR data, {size / 1e6:.1f} MB "
              f"({size / args.lines:.0f} bytes/line, {tokens} tokens/line: 13 floats, "
              f"26 one-id uint64 slots, 1 label), batch_size {args.batch_size}, 2 MiB chunks, "
              f"one thread")
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, "
              f"Python {platform.python_version()}")
        rates = {}
        for backend, repeats in (("c", args.repeats), ("python", args.python_repeats)):
            secs, batches = time_reader(info, backend, args.batch_size, repeats)
            rates[backend] = args.lines / secs
            print(f"{backend:>6}: {secs:7.3f} s  {rates[backend]:12,.0f} lines/s  "
                  f"{size / secs / 1e6:7.1f} MB/s  ({batches} batches)")
        print(f"ratio C / Python: {rates['c'] / rates['python']:.1f}x")
        secs = min(time_threads(info, args.batch_size) for _ in range(args.repeats))
        print(f"c, 2 threads (one reader per file): {args.lines / secs:12,.0f} lines/s in all, "
              f"{args.lines / secs / rates['c']:.2f}x one thread")


if __name__ == "__main__":
    main()
