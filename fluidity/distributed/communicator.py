"""The GEO-SGD communicator of a trainer (Paddle 1.6's `GeoSgdCommunicator`): the trainer
trains its own copy of the parameters with the AsyncExecutor as on one machine (compiled
Hogwild worker threads, no RPC in the step), and this communicator's thread, every
`push_nums` batches (or `push_seconds`), syncs that copy with the parameter servers:

1. push: per parameter, delta = (local - old) * scale, where `old` is the value at the last
   sync and scale = 1 / trainers (Paddle's: the servers' value moves by the trainers'
   mean progress; the rest of a trainer's change goes out with its next pushes: what it has
   pushed plus its `local - old` is always all it trained); `old += delta`; the delta goes
   to the servers, whose `sum` block adds it (transpiler/geo_sgd_transpiler.py). A sparse
   table sends only its touched rows, as a SelectedRows per block. The last sync, at
   `stop()`, pushes all of `local - old` (Paddle's stop pushes nothing more), so the
   servers end with every update of every trainer.
2. pull: the servers' current values (a sparse table: only the touched rows, through the
   per-trainer `lookup_table_v2` block), merged so that the local progress made since the push
   is kept: `local += server - old; old = server` (in place, while the workers train).

Touched rows. The AsyncExecutor's worker threads report the ids of the slots that index a
table after each run of batches (and wait there while they are `push_nums` batches ahead
of the sync in progress, so a trainer's copy never drifts more than about 2 x push_nums
batches from the servers') (`async_executor.add_observer`: the executor never imports
this package); the communicator keeps their unique values per table and swaps the list out
at a push, so finding the rows costs O(ids seen since the last push), whatever the table's
size: for a 1e8-row table and 1e5 touched rows, a sort of 1e5 ids, not a scan. When the
workers are processes (a program that does not compile) no ids come back and the rows are
found by comparing the table with `old`: O(rows x width) per push (about 1 s per push for
1e8 x 10 floats on one core), correct but only for moderate tables.

Memory: `old` is one copy of every parameter per trainer process (Paddle keeps the same
"old scope"), never one per worker. Byte counters (`stats`) count the tensors' bytes each
way, with the sparse traffic's ideal (touched rows x width x 4 bytes each way) beside it.
"""
import threading
import time

import numpy as np

from ..core.scope import global_scope
from ..core.tensor import LoDTensor, SelectedRows
from ..errors import ExecutionError
from ..executor import async_executor


class CommStats:
    """What the communicator did: syncs, seconds (in RPC, in syncs overall, and the worker
    threads' waits for a sync), bytes each way (all, and the sparse tables' with their
    ideal), rows pushed."""

    def __init__(self):
        self.syncs = 0
        self.rpc_seconds = self.sync_seconds = 0.0
        self.bytes_sent = self.bytes_received = 0
        self.sparse_sent = self.sparse_received = 0
        self.sparse_ideal_each_way = 0
        self.rows_pushed = 0
        self.wait_seconds = 0.0     # worker threads' time waiting for a sync (summed)
        self.whole_pull_bytes = 0   # pull_all's (the start's, an evaluation's): not a sync's

    def as_dict(self):
        return dict(vars(self))


def _nbytes(value):
    if isinstance(value, SelectedRows):
        return value.rows.nbytes + np.asarray(value.value).nbytes
    if isinstance(value, LoDTensor):
        return value._array.nbytes
    return np.asarray(value).nbytes


class GeoCommunicator:
    """`GeoCommunicator(plan, scope=None)`: `start()` before training (pulls the servers'
    values into the scope), `stop()` after (a last push and pull), `close()` to say goodbye
    to the servers. `plan`: the GeoPlan of geo_sgd_transpiler (`GeoSgdTranspiler.plan`)."""

    def __init__(self, plan, scope=None, client=None, push_nums=None, push_seconds=None,
                 scale=None):
        self.plan = plan
        self.scope = scope if scope is not None else global_scope()
        self.push_nums = int(push_nums if push_nums is not None else plan.push_nums)
        if self.push_nums < 1:
            raise ValueError(f"push_nums must be at least 1, got {self.push_nums}")
        self.push_seconds = push_seconds
        # the AsyncExecutor's workers report (and may wait) every this many batches
        self.report_every = max(1, self.push_nums // 4)
        self.scale = 1.0 / plan.trainers if scale is None else float(scale)
        self.trainer_id = plan.trainer_id
        self._client = client
        # slot -> tables it indexes; table -> [unique id arrays] since the last push
        self.id_slots = sorted({s for v in plan.sparse for s in v.id_slots})
        self._tables_of = {s: [v.name for v in plan.sparse if s in v.id_slots]
                           for s in self.id_slots}
        self._touched = {v.name: [] for v in plan.sparse}
        self._ids_lock = threading.Lock()
        self._tracking = False          # ids reported by worker threads this run
        self._old = {}
        self._cv = threading.Condition()
        self._pending = 0
        self._stopping = False
        self._thread = None
        self._sync_lock = threading.Lock()
        self._deferred = False
        self.error = None
        self.stats = CommStats()

    # -- the scope's parameters --------------------------------------------------------------
    def _local(self, name):
        var = self.scope.find_var(name)
        if var is None or not var.is_initialized():
            raise ExecutionError(f"geo-sgd communicator: parameter '{name}' has no value in "
                                 f"the trainer's scope (run the startup program first)")
        return var.value._array      # looked up each time: a run may move it to shared memory

    # -- the AsyncExecutor's observer methods --------------------------------------------------
    def run_started(self, threads):
        self._tracking = bool(threads)
        if self._deferred:           # start(lazy=True) before the startup program ran
            self._deferred = False
            self._start_now()

    def batches_trained(self, n, ids):
        """(worker threads) Record the rows touched; count the batches; wait while the
        thread is `push_nums` batches ahead of the sync in progress (Paddle's GEO bounds
        it the same way: its queue of per-batch ids holds `geo_sgd_need_push_nums`)."""
        got = {}
        for slot, arr in ids.items():
            u = np.unique(arr)
            for t in self._tables_of.get(slot, ()):
                got.setdefault(t, []).append(u)
        with self._ids_lock:
            for t, arrs in got.items():
                self._touched[t] += arrs
        self._count(n, wait=True)

    def batches_done(self, n):
        """(the run's thread, per worker report) Raise the communicator's error, if any;
        count the batches of worker processes (threads count theirs themselves)."""
        if self.error is not None:
            raise self.error
        if not self._tracking:
            self._count(n, wait=False)

    def _count(self, n, wait):
        with self._cv:
            self._pending += n
            if self._pending >= self.push_nums:
                self._cv.notify_all()
            t0 = None
            while (wait and self._pending >= self.push_nums and not self._stopping and
                   self.error is None and self._thread is not None):
                t0 = t0 or time.perf_counter()
                self._cv.wait(0.05)
            if t0 is not None:
                self.stats.wait_seconds += time.perf_counter() - t0

    def run_ended(self):
        pass

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self, lazy=False):
        """Pull every parameter from the servers into the scope (every trainer starts from the
        servers' values), then follow the runs and sync in the background. lazy: if the
        parameters have no values yet (the startup program has not run: fleet's
        `init_worker()` may come first), do that when the first run starts."""
        if self._thread is not None or self._deferred:
            raise RuntimeError("the communicator is already running")
        if lazy and not all(self.scope.find_var(v.name) is not None and
                            self.scope.find_var(v.name).is_initialized()
                            for v in self.plan.vars):
            self._deferred = True
            async_executor.add_observer(self)
            return
        self._start_now()

    def _start_now(self):
        if self._client is None:
            from .client import RPCClient
            self._client = RPCClient()
        for v in self.plan.vars:
            local = self._local(v.name)
            if list(local.shape) != list(v.shape):
                raise ExecutionError(f"geo-sgd communicator: '{v.name}' has shape "
                                     f"{list(local.shape)} in the scope, the program says "
                                     f"{v.shape}")
        self.pull_all()
        self._stopping = False
        async_executor.add_observer(self)      # (again, after a lazy start: no-op)
        self._thread = threading.Thread(target=self._loop, daemon=True,
                                        name=f"geo-communicator-{self.trainer_id}")
        self._thread.start()

    def is_running(self):
        return self._thread is not None

    def stop(self):
        """Stop the thread, then push and pull once more (nothing trained is left behind).
        Raises the thread's error, if it failed."""
        if self._deferred:
            self._deferred = False
            async_executor.remove_observer(self)
        if self._thread is None:
            return
        async_executor.remove_observer(self)
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        self._thread.join()
        self._thread = None
        if self.error is not None:
            raise self.error
        self.sync(flush=True)

    def close(self):
        """Stop (if running) and say goodbye to the servers."""
        try:
            self.stop()
        finally:
            if self._client is not None:
                self._client.close()
                self._client = None

    def abort(self):
        """After a failed run: stop the thread without a last sync, and say goodbye."""
        async_executor.remove_observer(self)
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._client is not None:
            try:
                self._client.close()
            finally:
                self._client = None

    def _loop(self):
        last = time.monotonic()
        while True:
            with self._cv:
                while not self._stopping and self._pending < self.push_nums and not (
                        self.push_seconds and time.monotonic() - last >= self.push_seconds):
                    self._cv.wait(0.1 if self.push_seconds is None else
                                  min(0.1, self.push_seconds))
                if self._stopping:
                    return
                self._pending = 0
                self._cv.notify_all()    # workers waiting for this sync go on
            try:
                self.sync()
            except BaseException as e:  # noqa: BLE001 - raised by the run (batches_done)
                with self._cv:
                    self.error = e if isinstance(e, ExecutionError) else ExecutionError(
                        f"geo-sgd communicator of trainer {self.trainer_id}: "
                        f"{type(e).__name__}: {e}")
                    self._cv.notify_all()
                return
            last = time.monotonic()

    # -- one sync ------------------------------------------------------------------------------
    def _take_rows(self, v):
        """The sorted unique rows of table `v` touched since the last push."""
        with self._ids_lock:
            arrs, self._touched[v.name] = self._touched[v.name], []
        if self._tracking and v.id_slots:
            if not arrs:
                return np.zeros(0, np.int64)
            return np.unique(np.concatenate(arrs)).astype(np.int64)
        local, old = self._local(v.name), self._old[v.name]
        return np.flatnonzero((local != old).reshape(len(local), -1).any(axis=1))

    def sync(self, flush=False):
        """Push the deltas since the last sync, then pull and merge (see the module doc).
        flush: push all of (local - old), not its `scale` share (the last sync, at stop)."""
        with self._sync_lock:
            t0 = time.perf_counter()
            self._sync(1.0 if flush else self.scale)
            self.stats.syncs += 1
            self.stats.sync_seconds += time.perf_counter() - t0

    def _sync(self, scale):
        st, tid = self.stats, self.trainer_id
        pushes, rows_of = [], {}
        for v in self.plan.dense:
            local, old = self._local(v.name), self._old[v.name]
            delta = (local - old) * np.asarray(scale, local.dtype)
            old += delta
            for b in v.blocks:
                pushes.append((b.endpoint, b.delta, LoDTensor(delta[b.begin:b.begin + b.rows])))
        for v in self.plan.sparse:
            rows = self._take_rows(v)
            rows_of[v.name] = rows
            if not len(rows):
                continue
            local, old = self._local(v.name), self._old[v.name]
            delta = (local[rows] - old[rows]) * np.asarray(scale, local.dtype)
            old[rows] += delta
            st.rows_pushed += len(rows)
            st.sparse_ideal_each_way += delta.nbytes
            for b in v.blocks:
                m = (rows >= b.begin) & (rows < b.begin + b.rows)
                if m.any():
                    sr = SelectedRows(rows[m] - b.begin, b.rows, delta[m])
                    pushes.append((b.endpoint, b.delta, sr))
                    st.sparse_sent += _nbytes(sr)
        self._send(pushes)
        # pull: dense blocks whole; sparse blocks by the rows just pushed
        asks, gets, where = [], [], []
        for v in self.plan.dense:
            for b in v.blocks:
                gets.append((b.endpoint, b.name))
                where.append((v, b, None))
        for v in self.plan.sparse:
            rows = rows_of[v.name]
            for b in v.blocks:
                m = (rows >= b.begin) & (rows < b.begin + b.rows)
                if not m.any():
                    continue
                ids = LoDTensor((rows[m] - b.begin).astype(b.ids_dtype))
                asks.append((b.endpoint, b.rows_var(tid), ids))
                st.sparse_sent += _nbytes(ids)
                gets.append((b.endpoint, b.pulled_var(tid)))
                where.append((v, b, rows[m]))
        self._send(asks)
        values = self._get(gets)
        for (v, b, rows), value in zip(where, values):
            local, old = self._local(v.name), self._old[v.name]
            server = np.asarray(value._array)
            if rows is None:
                sl = slice(b.begin, b.begin + b.rows)
                server = server.reshape(old[sl].shape)
                local[sl] += server - old[sl]
                old[sl] = server
            else:
                st.sparse_received += server.nbytes
                server = server.reshape((len(rows),) + old.shape[1:])
                local[rows] += server - old[rows]
                old[rows] = server

    def _send(self, items):
        if not items:
            return
        t0 = time.perf_counter()
        self._client.send_vars(items, self.trainer_id)
        self.stats.rpc_seconds += time.perf_counter() - t0
        self.stats.bytes_sent += sum(_nbytes(v) for _e, _n, v in items)

    def _get(self, items, whole=False):
        if not items:
            return []
        t0 = time.perf_counter()
        values = self._client.get_vars(items, self.trainer_id)
        n = sum(_nbytes(v) for v in values)
        if whole:
            self.stats.whole_pull_bytes += n
        else:
            self.stats.rpc_seconds += time.perf_counter() - t0
            self.stats.bytes_received += n
        return values

    def pull_all(self):
        """Overwrite the local parameters (and `old`) with the servers' whole values (e.g.
        to evaluate the global model once every trainer has stopped)."""
        with self._sync_lock:
            values = self._get([(b.endpoint, b.name) for v in self.plan.vars
                                for b in v.blocks], whole=True)
            it = iter(values)
            for v in self.plan.vars:
                local = self._local(v.name)
                for b in v.blocks:
                    local[b.begin:b.begin + b.rows] = np.asarray(next(it)._array).reshape(
                        (b.rows,) + local.shape[1:])
                self._old[v.name] = local.copy()


__all__ = ["CommStats", "GeoCommunicator"]
