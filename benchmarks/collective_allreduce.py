"""All-reduce of float32 arrays between local processes over the collective library the
collective ops use (gloo through torch.distributed, distributed/collective.py): the time
of one `Ring.allreduce` (the c_allreduce_sum kernel's call) per array size, median of
`--iters` calls after 3 warm-up calls, on rank 0.

    .venv/bin/python benchmarks/collective_allreduce.py [--nranks 2]
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

import numpy as np

SIZES = (1_000, 100_000, 1_000_000)


def worker(rank, nranks, port, iters):
    from fluidity.distributed import collective
    eps = [f"127.0.0.1:{port + k}" for k in range(nranks)]
    comm = collective.CollectiveService.gen_comm_id(rank, eps[rank],
                                                    [e for e in eps if e != eps[rank]])
    ring = collective.init_ring(0, comm, rank, nranks)
    for n in SIZES:
        x = np.ones(n, np.float32)
        times = []
        for i in range(iters + 3):
            ring.barrier()
            t = time.perf_counter()
            ring.allreduce(x)
            if i >= 3:
                times.append(time.perf_counter() - t)
        if rank == 0:
            med = statistics.median(times)
            print(f"{n:>9} floats: {med * 1e3:8.3f} ms per all-reduce "
                  f"({n * 4 / med / 1e6:8.1f} MB/s of the array)", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nranks", type=int, default=2)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--rank", type=int, default=-1)
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args()
    if a.rank >= 0:
        return worker(a.rank, a.nranks, a.port, a.iters)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    print(f"gloo (torch.distributed) all-reduce, {a.nranks} local processes, load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    procs = [subprocess.Popen([sys.executable, __file__, "--rank", str(r), "--nranks",
                               str(a.nranks), "--port", str(port), "--iters", str(a.iters)])
             for r in range(a.nranks)]
    sys.exit(max(p.wait() for p in procs))


if __name__ == "__main__":
    main()
