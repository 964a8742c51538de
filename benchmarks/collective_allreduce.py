"""All-reduce (sum) of float32 arrays between 2 local processes, per candidate collective
library: the figures behind the choice of the library the collective ops use
(docs/architecture.md, "Collective training over processes").

* `gloo`: gloo through torch.distributed (ProcessGroupGloo over a TCPStore at rank 0's
  address, as distributed/collective.py makes its rings), the all-reduce in place on a
  torch view of the numpy array;
* `ring`: the same through fluidity's Ring.allreduce, the c_allreduce_sum kernel's call
  (a contiguous copy, then the in-place all-reduce);
* `mpi`: mpi4py's `Comm.Allreduce(IN_PLACE, array)` over the MPI of the `mpich` wheel, the
  ranks started by that wheel's `mpiexec` (not a dependency: `pip install mpi4py mpich` to
  measure it; the recorded figures used mpi4py 4.1.2 and mpich 5.0.2).

A backend whose library is not installed is left out, saying so.

Each round starts the 2 processes of every backend in turn (alternating, so a change of the
machine's load hits them alike) and times `--iters` all-reduces per size after 3 warm-up
calls, each after a barrier; a round's figure is the median call of rank 0; the result is
the median over rounds, and the ratio to gloo.

    .venv/bin/python benchmarks/collective_allreduce.py [--rounds 5] [--iters 20]
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time

import numpy as np

SIZES = {"4 KB": 1_024, "1 MB": 262_144, "16 MB": 4_194_304}     # float32 elements


def _times(allreduce, barrier, iters):
    out = {}
    for label, n in SIZES.items():
        x = np.ones(n, np.float32)
        ts = []
        for i in range(iters + 3):
            barrier()
            t = time.perf_counter()
            allreduce(x)
            if i >= 3:
                ts.append(time.perf_counter() - t)
        out[label] = statistics.median(ts)
    return out


def worker_gloo(rank, port, iters, through_ring):
    if through_ring:
        from fluidity.distributed import collective
        eps = [f"127.0.0.1:{port}", f"127.0.0.1:{port + 1}"]
        comm = collective.CollectiveService.gen_comm_id(rank, eps[rank],
                                                        [e for e in eps if e != eps[rank]])
        ring = collective.init_ring(0, comm, rank, 2)
        res = _times(ring.allreduce, ring.barrier, iters)
    else:
        import datetime

        import torch
        import torch.distributed as dist
        store = dist.TCPStore("127.0.0.1", port, 2, rank == 0,
                              timeout=datetime.timedelta(seconds=60))
        group = dist.ProcessGroupGloo(store, rank, 2, datetime.timedelta(seconds=60))

        def allreduce(x):
            group.allreduce([torch.from_numpy(x)]).wait()
        res = _times(allreduce, lambda: group.barrier().wait(), iters)
    return res


def worker_mpi(iters):
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    res = _times(lambda x: comm.Allreduce(MPI.IN_PLACE, x), comm.Barrier, iters)
    return comm.Get_rank(), res


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _available(backend):
    """Whether `backend`'s library is installed (else say so and leave it out)."""
    if backend == "mpi":
        import importlib.util
        ok = importlib.util.find_spec("mpi4py") is not None and shutil.which(
            "mpiexec", path=os.path.dirname(sys.executable))
        why = "pip install mpi4py mpich"
    else:
        from fluidity.distributed.collective import library_missing
        why = library_missing()
        ok = why is None
    if not ok:
        print(f"{backend}: not measured ({why})")
    return bool(ok)


def _run(backend, iters):
    me = [sys.executable, os.path.abspath(__file__), "--worker", backend, "--iters", str(iters)]
    if backend == "mpi":
        mpiexec = shutil.which("mpiexec", path=os.path.dirname(sys.executable))
        procs = [subprocess.Popen([mpiexec, "-n", "2"] + me, stdout=subprocess.PIPE,
                                  text=True)]
    else:
        port = _free_port()
        procs = [subprocess.Popen(me + ["--rank", str(r), "--port", str(port)],
                                  stdout=subprocess.PIPE, text=True) for r in range(2)]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit(f"{backend} failed")
    for line in "".join(outs).splitlines():
        if line.startswith("{"):
            return json.loads(line)
    raise SystemExit(f"{backend}: no result")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--backends", default="gloo,ring,mpi")
    ap.add_argument("--worker", default="")
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args()
    if a.worker:
        if a.worker == "mpi":
            rank, res = worker_mpi(a.iters)
        else:
            rank = a.rank
            res = worker_gloo(a.rank, a.port, a.iters, a.worker == "ring")
        if rank == 0:
            print(json.dumps(res), flush=True)
        return
    backends = [b for b in a.backends.split(",") if _available(b)]
    if not backends:
        raise SystemExit("no backend to measure")
    print(f"all-reduce (sum) of float32 between 2 local processes; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {a.rounds} alternating "
          f"rounds of {a.iters} calls")
    got = {b: {s: [] for s in SIZES} for b in backends}
    for _ in range(a.rounds):
        for b in backends:
            for s, t in _run(b, a.iters).items():
                got[b][s].append(t)
    base = backends[0]
    for s in SIZES:
        ref = statistics.median(got[base][s])
        for b in backends:
            med = statistics.median(got[b][s])
            print(f"{s:>6} {b:>5}: {med * 1e3:8.3f} ms per all-reduce  "
                  f"({SIZES[s] * 4 / med / 1e6:7.1f} MB/s)  x{med / ref:.2f} of {base}")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
