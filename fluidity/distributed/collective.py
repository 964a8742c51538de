"""The `collective` run-time service behind the collective ops (ops/collective_ops.py):
rings of ranks that all-reduce, broadcast, all-gather and reduce-scatter arrays, over gloo
through PyTorch's `torch.distributed`: the optional extra `pip install 'fluidity[collective]'`
(the CPU build of torch is enough). A ring of one rank runs without the library; a ring of
more without it fails at c_comm_init with an error naming the extra.

Why gloo through torch (docs/architecture.md, "Collective training over processes", has the
figures of benchmarks/collective_allreduce.py): its rendezvous is a TCP store at an address,
as Fluid's rings meet at rank 0's endpoint, so trainers started one by one with Paddle's
environment (PADDLE_TRAINER_ID, PADDLE_TRAINER_ENDPOINTS, PADDLE_CURRENT_ENDPOINT) find each
other; MPI (mpi4py over the `mpich` wheel) needs its own launcher, `mpiexec`, for that;
pygloo has no wheel nor source for current Pythons.

A rank that dies never leaves the others waiting: gloo fails a collective call whose peer
closed its connection at once, and one a peer does not join after `FLAGS_collective_timeout_s`
(default 300 s); either comes out of the op as an ExecutionError naming the op, the ring and
the ranks, and so does a ring whose ranks do not all meet within that time.

A ring is the process's, not one executor's (a startup program run by one executor makes
the rings a main program run by another uses): `c_gen_nccl_id` gives a `CommId` (rank 0's
endpoint, where the ring's TCP store listens, and every endpoint), `c_comm_init` makes ring
`ring_id` from it. Rank 0 serves the store on its endpoint's port; the others connect to it
(retrying until `FLAGS_collective_timeout_s`, default 300 s, as the ranks start at different
times). Arrays are reduced in place through a torch view of a contiguous copy.
"""
import atexit
import collections
import datetime
import threading

import numpy as np

from ..errors import ExecutionError

__all__ = ["CommId", "Ring", "CollectiveService", "EXTRA", "library_missing", "init_ring", "ring",
           "rings", "destroy_rings"]

CommId = collections.namedtuple("CommId", "master endpoints")
CommId.__doc__ = ("A communicator's id: `master` (host, port) of rank 0's store, and the "
                  "ring's endpoints.")

_LOCK = threading.Lock()
_RINGS = {}          # ring_id -> Ring
_STORES = {}         # (host, port) -> the TCP store this process made or joined


def _timeout():
    """FLAGS_collective_timeout_s (environment; default 300) as a timedelta; a value that is
    not a positive number raises ValueError naming the variable."""
    from .service import env_flag
    seconds = env_flag("FLAGS_collective_timeout_s", 300.0)
    if not 0 < seconds < 1e9:          # not NaN, not infinite (timedelta refuses those)
        raise ValueError(f"FLAGS_collective_timeout_s={seconds!r}: the collective timeout must "
                         f"be a positive number of seconds (below 1e9)")
    return datetime.timedelta(seconds=seconds)


EXTRA = "pip install 'fluidity[collective]'"


def library_missing():
    """None when the collective library (gloo through torch.distributed) can be used; else
    why not, with what to install."""
    try:
        import torch.distributed as dist
    except ImportError as e:
        return (f"collective training over several processes needs the collective library, "
                f"gloo through PyTorch's torch.distributed: {EXTRA} (the CPU build of torch "
                f"is enough) [{e}]")
    if not dist.is_available() or not dist.is_gloo_available():
        return (f"this PyTorch has no gloo backend for torch.distributed; {EXTRA} installs "
                f"one that has")
    return None


def _dist():
    missing = library_missing()
    if missing:
        raise ExecutionError(missing)
    import torch
    import torch.distributed as dist
    return torch, dist


def _split(endpoint):
    host, _, port = str(endpoint).rpartition(":")
    if not host or not port.isdigit():
        raise ExecutionError(f"collective: endpoint {endpoint!r} is not host:port")
    return host, int(port)


class Ring:
    """`nranks` ranks (this one `rank`) joined by a gloo process group (None for one rank)."""

    def __init__(self, ring_id, rank, nranks, group=None, timeout_s=None):
        self.ring_id, self.rank, self.nranks, self.group = ring_id, rank, nranks, group
        self.timeout_s = timeout_s
        self._torch = _dist()[0] if group is not None else None

    def _wait(self, start, what):
        """Start gloo's work (`start()`) and wait for it; its failure (a peer gone, or silent
        past the timeout) as an ExecutionError that says which ring, rank and call."""
        try:
            start().wait()
        except RuntimeError as e:
            raise ExecutionError(
                f"{what} on ring {self.ring_id} (rank {self.rank} of {self.nranks}) failed: "
                f"another rank died, or did not join within FLAGS_collective_timeout_s="
                f"{self.timeout_s:g} s ({str(e).strip().splitlines()[0]})"
            ) from None

    def _tensor(self, array):
        arr = np.ascontiguousarray(array).copy()
        return arr, self._torch.from_numpy(arr.reshape(-1) if arr.ndim == 0 else arr)

    def allreduce(self, array, red="sum"):
        if self.group is None:
            return np.array(array, copy=True)
        _, dist = _dist()
        op = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN,
              "prod": dist.ReduceOp.PRODUCT}[red]
        arr, t = self._tensor(array)
        opts = dist.AllreduceOptions()
        opts.reduceOp = op
        self._wait(lambda: self.group.allreduce([t], opts), f"all-reduce ({red})")
        return arr

    def broadcast(self, array, root):
        if not 0 <= root < self.nranks:
            raise ExecutionError(f"c_broadcast: root {root} is not a rank of ring "
                                 f"{self.ring_id} ({self.nranks} ranks)")
        if self.group is None:
            return np.array(array, copy=True)
        _, dist = _dist()
        arr, t = self._tensor(array)
        opts = dist.BroadcastOptions()
        opts.rootRank, opts.rootTensor = root, 0
        self._wait(lambda: self.group.broadcast([t], opts), f"broadcast from rank {root}")
        return arr

    def allgather(self, array):
        if self.group is None:
            return np.array(array, copy=True)
        arr, t = self._tensor(array)
        outs = [self._torch.empty_like(t) for _ in range(self.nranks)]
        self._wait(lambda: self.group.allgather([outs], [t]), "all-gather")
        return np.concatenate([o.numpy().reshape(arr.shape) for o in outs], axis=0) \
            if arr.ndim else np.stack([o.numpy()[0] for o in outs])

    def reducescatter(self, array):
        total = self.allreduce(array, "sum")
        n = total.shape[0] // self.nranks
        return total[self.rank * n:(self.rank + 1) * n].copy()

    def barrier(self):
        if self.group is not None:
            self._wait(self.group.barrier, "barrier")

    def gather_objects(self, data):
        """Every rank's bytes `data`, in rank order (sizes first, then padded buffers)."""
        if self.group is None:
            return [bytes(data)]
        size = self.allgather(np.array([len(data)], np.int64))
        buf = np.zeros(int(size.max()), np.uint8)
        buf[:len(data)] = np.frombuffer(data, np.uint8)
        allb = self.allgather(buf.reshape(1, -1))
        return [allb[k, :int(size[k])].tobytes() for k in range(self.nranks)]


def _store(master, is_master, nranks, timeout):
    with _LOCK:
        st = _STORES.get(master)
        if st is None:
            _, dist = _dist()
            st = dist.TCPStore(master[0], master[1], nranks, is_master, timeout=timeout)
            _STORES[master] = st
        return st


def init_ring(ring_id, comm_id, rank, nranks):
    """Make ring `ring_id` (c_comm_init); replaces a ring of that id made before."""
    if not isinstance(comm_id, CommId):
        raise ExecutionError(f"c_comm_init: X is not a communicator id (c_gen_nccl_id's "
                             f"output), got {type(comm_id).__name__}")
    if len(comm_id.endpoints) != nranks:
        raise ExecutionError(f"c_comm_init: nranks={nranks} but the id names "
                             f"{len(comm_id.endpoints)} endpoint(s)")
    group = None
    if nranks > 1:
        timeout = _timeout()
        _, dist = _dist()
        with _LOCK:
            old = _RINGS.get(ring_id)
            generation = getattr(old, "generation", -1) + 1
        try:
            store = dist.PrefixStore(f"ring{ring_id}.{generation}",
                                     _store(comm_id.master, rank == 0, nranks, timeout))
            group = dist.ProcessGroupGloo(store, rank, nranks, timeout)
        except RuntimeError as e:
            raise ExecutionError(
                f"c_comm_init: ring {ring_id} (rank {rank} of {nranks}, meeting at "
                f"{comm_id.master[0]}:{comm_id.master[1]}) could not start: not every rank "
                f"joined within FLAGS_collective_timeout_s={timeout.total_seconds():g} s "
                f"({str(e).strip().splitlines()[0]})") from None
    r = Ring(ring_id, rank, nranks, group, timeout.total_seconds() if group else None)
    r.generation = generation if nranks > 1 else 0
    with _LOCK:
        _RINGS[ring_id] = r
    return r


def ring(ring_id, op="collective op"):
    with _LOCK:
        r = _RINGS.get(ring_id)
    if r is None:
        raise ExecutionError(f"{op}: ring {ring_id} is not initialized: run the startup "
                             f"program (c_gen_nccl_id + c_comm_init) first, or run the "
                             f"program as a data-parallel run (CompiledProgram(...)."
                             f"with_data_parallel), whose replicas it then combines")
    return r


def rings():
    with _LOCK:
        return dict(_RINGS)


def destroy_rings():
    """Forget every ring (the stores stay: another ring may meet there again)."""
    with _LOCK:
        _RINGS.clear()


@atexit.register
def _close_at_exit():
    """Free the process groups, then the stores, while the interpreter still runs: left to
    the interpreter's teardown, gloo's threads may be destroyed still joinable, and the
    process aborts ('terminate called without an active exception') after a good run."""
    with _LOCK:
        _RINGS.clear()
        _STORES.clear()


class CollectiveService:
    """What the collective ops see through their run environment (one per executor, over
    the process's rings)."""

    @staticmethod
    def gen_comm_id(rank, endpoint, other_endpoints):
        if not endpoint:
            raise ExecutionError("c_gen_nccl_id: attribute 'endpoint' is empty")
        endpoints = list(other_endpoints)
        endpoints.insert(min(rank, len(endpoints)), endpoint)
        master = _split(endpoint if rank == 0 else other_endpoints[0])
        return CommId(master, endpoints)

    init_ring = staticmethod(init_ring)
    ring = staticmethod(ring)
