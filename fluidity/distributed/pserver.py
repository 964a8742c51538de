"""The parameter-server runtime behind `listen_and_serv` (the `pserver` run-time service).

`serve(attrs, received, env)` starts the gRPC service on `attrs["endpoint"]` and returns
when every one of `Fanin` trainers has said goodbye.

* Sync mode, per step: each trainer sends its gradients (`<grad>.trainer_<id>`) and a send
  barrier; when all active trainers' barriers are in, the optimize blocks run (their `sum`
  and `scale(1/N)` average the trainers' gradients) and the parameter version (the number
  of rounds applied) goes up. A trainer's get waits until the version is newer than the
  one it last fetched (so a fast trainer never reads last step's values), and its fetch
  barrier records the version it has. The first round of gets (the trainers' startup) is
  answered at once. Sends and barriers carry the version the trainer computed from: one
  for a round already applied (a retry) is ignored, so each round is applied once.
* Async mode: each gradient runs the optimize block mapped to it (`grad_to_block_id`) as
  it arrives; gets answer the current values; barriers are errors.

What a request may do: every received value is checked against its declaration in the
pserver program (`accepts.py`: kind, dtype, shape; a SelectedRows' height and width)
before it is stored, logged or applied, and a bad one is refused to its sender
INVALID_ARGUMENT; a round whose inputs were never all sent is not run (its last barrier is
refused); prefetch ids must be integers within the table. So a bad request fails that
request, never the job, and never enters the round log.

Checkpoints (`checkpoint.py` has the format). `CheckpointNotify` (Paddle's
`checkpoint_notify` op) saves a snapshot of every persistable variable and the version
into the directory it names, relative to the server's checkpoint root
(FLAGS_pserver_checkpoint_notify_root, default the server's working directory): an
absolute path, `..`, a symbolic link on the way, or an existing directory that is not a
checkpoint of this server is refused INVALID_ARGUMENT (`checkpoint.notify_target`). With a
recovery directory (env FLAGS_pserver_checkpoint_dir; each server uses
`<dir>/<host>_<port>`) the server also keeps a snapshot there, taken when
it starts and every FLAGS_pserver_checkpoint_minutes (default 10; 0: only at start), and
in sync mode logs each round's gradients before applying it. A server started on an
endpoint whose recovery directory holds a snapshot resumes from it: loads it, re-runs the
logged rounds, and serves with a new incarnation id; each reply carries the incarnation
and the version, and a call made for an earlier incarnation is refused (ABORTED), so each
trainer asks the new server's version and resends the step's gradients and barrier when
that step was not applied (`client.py`). Flags are environment variables, as Paddle's
gflags are, so a script runs unchanged under the launcher or a cluster system.

Failures: every call and each trainer's heartbeat (client.py) marks the trainer alive. A
trainer that has been heard from, has not said goodbye and is silent for
FLAGS_pserver_trainer_timeout seconds (default 10) is presumed dead: every waiting and
later call fails with an error naming it, and after a short linger (so waiting trainers get
that error) `serve` raises it.

Blocks run one at a time (one lock) with the executor that runs `listen_and_serv`."""
import os
import secrets
import threading
import time

from ..errors import ExecutionError, FluidityError
from . import accepts, checkpoint, sparse_table
from .admission import Refused
from .service import UNCHECKED, call_abandoned, env_flag, start_server
from .wire import BadRequest, field

LINGER_S = 2.0               # how long a failed server keeps answering with its error


def _step_count(held, received, name):
    """An async schedule's step counter after a trainer's count arrives: the sum (the
    counter a trainer sends holds its steps since its last send; async_lr.py)."""
    import numpy as np
    from ..core.tensor import LoDTensor
    a = received._array if isinstance(received, LoDTensor) else np.asarray(received)
    if held is None:
        return received
    h = held._array if isinstance(held, LoDTensor) else np.asarray(held)
    if h is None or h.shape != a.shape:
        raise BadRequest(f"step counter '{name}' has shape {list(a.shape)}, the server holds "
                         f"{None if h is None else list(h.shape)}")
    return LoDTensor(h + a.astype(h.dtype))


def recovery_dir(root, endpoint):
    """The recovery directory of the server on `endpoint` under `root`."""
    return os.path.join(root, endpoint.replace(":", "_").replace("/", "_"))


def port_file_path(pid=None):
    """Where a serving pserver process writes its port, as Fluid's does: scripts and tests
    that start a server on port 0 wait for this file and read the port from it."""
    return f"/tmp/paddle.{os.getpid() if pid is None else pid}.port"


def save_port(port):
    """Write `port` to this process's port file (written whole, then renamed into place,
    so a reader never sees it half written); its path, or None when /tmp is not writable."""
    path = port_file_path()
    tmp = f"{path}.{threading.get_ident()}.{secrets.token_hex(4)}.tmp"
    try:   # a new file (never one planted there, nor a link's target), renamed into place
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                     0o644)
        with os.fdopen(fd, "w") as f:
            f.write(f"{int(port)}\n")
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return None
    return path


def remove_port_file(path):
    if path is not None:
        try:
            os.unlink(path)
        except OSError:
            pass


class PServer:
    def __init__(self, executor=None):
        self._server = None

    def serve(self, attrs, received, env):
        state = _State(attrs, received, env)
        state.restore()
        if not state.sync and state.lr_block >= 0:
            state._run(state.lr_block)     # async: the rate of the first step, before any
        workers = min(512, 16 + 2 * state.fanin * max(1, len(state.received)))
        self._server = start_server(attrs["endpoint"], state, max_workers=workers)
        saver = state.start_periodic_checkpoints()
        port_file = save_port(self._server.selected_port)
        try:
            state.wait_done()
            if state.error is not None:
                time.sleep(LINGER_S)
        finally:
            state.stop.set()
            if saver is not None:
                saver.join()
            state.close()
            self._server.stop(grace=1.0).wait(5.0)
            self._server = None
            remove_port_file(port_file)
        if state.error is not None:
            raise ExecutionError(f"pserver {attrs['endpoint']}: {state.error}")

    def close(self):
        if self._server is not None:
            self._server.stop(grace=None)
            self._server = None


class TrainerLost(FluidityError):
    """A trainer stopped calling (no heartbeat) without saying goodbye."""


class _State:
    def __init__(self, attrs, received, env):
        self.endpoint = attrs["endpoint"]
        self.fanin = int(attrs["Fanin"])
        self.sync = bool(attrs["sync_mode"])
        self.blocks = list(attrs["optimize_blocks"])
        self.grad_to_block = {}
        for s in attrs["grad_to_block_id"]:
            if not s:           # Fluid's ListenAndServ layer writes [""]: no mapping
                continue
            name, _, idx = s.rpartition(":")
            self.grad_to_block[name] = int(idx)
        self.received = list(received)
        self._received = set(received)
        self.declared = accepts.declarations(env.program, self.received)
        self.env = env
        self.scope = env.scope
        self.persistables = checkpoint.persistable_names(env.program)
        self.run_lock = threading.Lock()     # blocks and variable reads/writes
        self.cv = threading.Condition()
        self.version = 0
        self.incarnation = secrets.token_hex(8)
        self.fetched = {}
        self.sent = set()
        self.gone = set()
        self.last_seen = {}
        self.error = None
        self.prefetch_blocks = _name_to_block(attrs.get("prefetch_var_name_to_block_id", []))
        self.lr_block = int(attrs.get("lr_decay_block_id", -1))
        self.stop = threading.Event()
        self.trainer_timeout = env_flag("FLAGS_pserver_trainer_timeout", 10.0)
        root = os.environ.get("FLAGS_pserver_checkpoint_dir") or None
        self.recovery = None if root is None else recovery_dir(root, self.endpoint)
        self.notify_root = os.path.realpath(
            os.environ.get("FLAGS_pserver_checkpoint_notify_root") or os.getcwd())
        self.log = None
        if self.recovery is not None and self.sync:
            self.log = checkpoint.RoundLog(
                os.path.join(self.recovery, checkpoint.ROUND_LOG),
                fsync=bool(env_flag("FLAGS_pserver_log_fsync", 0, int)))

    # -- checkpoints ---------------------------------------------------------------------------
    def _snapshot_dir(self):
        return os.path.join(self.recovery, checkpoint.SNAPSHOT)

    def restore(self):
        """Resume from the recovery snapshot and round log when there are any, then write
        the snapshot the log continues from."""
        if self.recovery is None:
            sparse_table.adopt_tables(self.env.program, self.scope)
            return
        snap = self._snapshot_dir()
        resumed = checkpoint.exists(snap)
        if resumed:
            self.version = int(checkpoint.load(snap, self.scope)["version"])
        tables = sparse_table.adopt_tables(self.env.program, self.scope)    # loaded shards too
        if resumed:
            for round_no, values in (self.log.rounds() if self.log else []):
                if round_no <= self.version:
                    continue
                if round_no != self.version + 1:
                    raise checkpoint.CheckpointError(
                        f"{self.log.path}: round {round_no} follows round {self.version}")
                for name, value in values.items():
                    try:
                        accepts.check(self.declared.get(name), name, value,
                                      f"round {round_no} of the log")
                    except BadRequest as e:
                        raise checkpoint.CheckpointError(f"{self.log.path}: {e}") from None
                    self.scope.var(name).value = value
                for b in self.blocks:
                    self.env.run_block(b, self.scope)
                self.version = round_no
            print(f"pserver {self.endpoint}: resumed from {self.recovery} at version "
                  f"{self.version}" + "".join(f"; {t!r}" for t in tables.values()),
                  flush=True)
        self._save_recovery()

    def _save_recovery(self):
        """(run_lock held, or before serving) snapshot now, then empty the round log."""
        os.makedirs(self.recovery, exist_ok=True)
        checkpoint.save(self._snapshot_dir(), self.scope, self.persistables, self.version,
                        self.endpoint)
        if self.log is not None:
            self.log.truncate()

    def start_periodic_checkpoints(self):
        minutes = env_flag("FLAGS_pserver_checkpoint_minutes", 10.0)
        if self.recovery is None or minutes <= 0:
            return None

        def loop():
            while not self.stop.wait(minutes * 60.0):
                with self.run_lock:
                    self._save_recovery()
        t = threading.Thread(target=loop, name=f"pserver-checkpoint-{self.endpoint}",
                             daemon=True)
        t.start()
        return t

    def close(self):
        if self.log is not None:
            self.log.close()

    # -- helpers -----------------------------------------------------------------------------
    def _tid(self, header):
        tid = field(header, "trainer_id", int)
        if not 0 <= tid < self.fanin:
            raise BadRequest(f"trainer_id {tid} is not in [0, {self.fanin}) (Fanin)")
        return tid

    def _run(self, block_idx):
        try:
            self.env.run_block(block_idx, self.scope)
        except Exception as e:
            self.error = e
            with self.cv:
                self.cv.notify_all()
            raise

    def _unsent(self):
        """The received variables that hold no value yet (a round cannot run without)."""
        return [n for n in self.received
                if (v := self.scope.find_local_var(n)) is None or v.value is None]

    def _optimize_if_all_sent(self):
        """(cv held) run the optimize blocks once every active trainer's barrier is in;
        the round's inputs are logged first when there is a recovery log. A round some of
        whose inputs were never sent is not run: FluidityError naming them (the caller
        refuses the barrier that would have started it)."""
        active = self.fanin - len(self.gone - self.sent)
        if self.sent and len(self.sent) >= active:
            unsent = self._unsent()
            if unsent:
                raise FluidityError(
                    f"round {self.version + 1} cannot run on pserver {self.endpoint}: no "
                    f"value was sent for {', '.join(unsent[:4])}"
                    + (f" and {len(unsent) - 4} more" if len(unsent) > 4 else ""))
            with self.run_lock:
                if self.log is not None:
                    self.log.append(self.version + 1, {
                        n: v.value for n in self.received
                        if (v := self.scope.find_local_var(n)) is not None
                        and v.value is not None})
                for b in self.blocks:
                    self._run(b)
                self.version += 1
            self.sent.clear()
            self.cv.notify_all()

    def _stale(self, header):
        """Whether a sync call is for a round already applied (a retry after a lost reply or
        a restart); a trainer ahead of this server means the server lost rounds."""
        v = header.get("version")
        if not self.sync or v is None:
            return False
        if not isinstance(v, int) or isinstance(v, bool):
            raise BadRequest(f"header field 'version' must be an int, got {v!r:.60}")
        if v > self.version:
            raise FluidityError(
                f"trainer {header.get('trainer_id')} computed from version {v} but pserver "
                f"{self.endpoint} is at version {self.version}: it restarted from an older "
                f"state, so applied rounds are lost (is FLAGS_pserver_checkpoint_dir set?)")
        return v < self.version

    # -- the service hooks ---------------------------------------------------------------------
    def admit(self, method, header):
        tid = header.get("trainer_id")
        if isinstance(tid, int) and 0 <= tid < self.fanin:
            self.last_seen[tid] = time.monotonic()
        if method in UNCHECKED:
            return
        inc = header.get("incarnation")
        if inc is not None and inc != self.incarnation:
            raise Refused("ABORTED", f"pserver {self.endpoint} restarted (incarnation "
                                     f"{self.incarnation}, version {self.version}); the "
                                     f"trainer resynchronises")
        if self.error is not None and method != "Goodbye":
            raise ExecutionError(f"the pserver failed: {self.error}")

    def reply_header(self):
        return {"incarnation": self.incarnation, "version": self.version, "sync": self.sync}

    # -- the RPC methods ----------------------------------------------------------------------
    def send_variable(self, header, value):
        name = field(header, "name")
        tid = self._tid(header)
        if name not in self._received:
            raise KeyError(f"pserver {self.endpoint} does not receive variable '{name}'")
        accepts.check(self.declared.get(name), name, value, f"trainer {tid}")
        if self._stale(header):
            return None
        with self.run_lock:
            var = self.scope.var(name)
            if not self.sync and self.grad_to_block.get(name) == self.lr_block:
                var.value = _step_count(var.value, value, name)   # async schedule: add
            else:
                var.value = value
            if not self.sync:
                self._run(self.grad_to_block[name])
        return None

    def get_variable(self, header, _value):
        name, tid = field(header, "name"), self._tid(header)
        if self.sync:
            after = max(self.fetched.get(tid, -1), field(header, "after", int, default=-1))
            if after > self.version:
                raise FluidityError(
                    f"trainer {tid} has fetched version {after} but pserver {self.endpoint} "
                    f"is at version {self.version}: it restarted from an older state")
            with self.cv:
                while not (self.version > after or self.error or
                           len(self.gone) >= self.fanin):
                    self.cv.wait(1.0)
                    if call_abandoned():
                        raise Refused("CANCELLED", f"trainer {tid} stopped waiting for "
                                                   f"'{name}'")
        if self.error is not None:
            raise ExecutionError(f"the pserver failed: {self.error}")
        with self.run_lock:
            var = self.scope.find_var(name)
            if var is None or var.value is None:
                raise KeyError(f"pserver {self.endpoint} has no variable '{name}'")
            return var.value

    def _need_sync(self, what):
        if not self.sync:
            raise ValueError(f"{what} sent to pserver {self.endpoint} in async mode")

    def send_barrier(self, header, _value):
        self._need_sync("send_barrier")
        tid = self._tid(header)
        if self._stale(header):
            return None
        with self.cv:
            had = tid in self.sent
            self.sent.add(tid)
            try:
                self._optimize_if_all_sent()
            except FluidityError:
                if not had:
                    self.sent.discard(tid)
                raise
        return None

    def fetch_barrier(self, header, _value):
        tid = self._tid(header)
        if not self.sync:      # a trainer's startup fetch (Fluid's): nothing to wait for
            return None
        with self.cv:
            self.fetched[tid] = self.version
        return None

    def goodbye(self, header, _value):
        tid = self._tid(header)
        with self.cv:
            self.gone.add(tid)
            if self.sync and len(self.gone) < self.fanin:
                try:
                    self._optimize_if_all_sent()
                except FluidityError as e:   # the trainers left cannot go on: the job fails
                    self.error = e
            self.cv.notify_all()
        return None

    def prefetch_variable(self, header, value):
        """The rows of the ids `value` from this server's shard of the distributed table:
        its prefetch block (lookup_sparse_table) run in a scope of its own, so lookups from
        several trainers run at once (the table locks itself)."""
        name, table = field(header, "name"), field(header, "table_name", default="")
        out_name = field(header, "out_name")
        tid = self._tid(header)
        block = self.prefetch_blocks.get(name)
        tables = self._prefetch_tables()
        if block is None and table and table not in tables.values():
            return self._rows_of_dense_table(table, value, tid)
        if block is None or (table and tables.get(name) != table):
            have = sorted(set(tables.values())) or "none"
            raise KeyError(f"pserver {self.endpoint} has no distributed table "
                           f"'{table or name}' to prefetch from (its tables: {have})")
        table = tables.get(name, table)
        held = self.scope.find_var(table)
        held = held.value if held is not None else None
        if isinstance(held, sparse_table.SparseTable):   # the whole table's rows (W declares the shard's)
            height = held.height
        else:
            w = self.env.program.global_block().vars.get(table)
            height = int(w.shape[0]) if w is not None and len(w.shape) == 2 else -1
        accepts.check_ids(value, table, height, f"trainer {tid}")
        local = self.scope.new_scope()
        try:
            local.var(name).value = value
            out = local.var(out_name)
            self.env.run_block(block, local)
            return out.value
        finally:
            self.scope.delete_scope(local)

    def _rows_of_dense_table(self, table, value, tid):
        """The rows `value` (ids local to this server's shard) of the dense table variable
        `table` in this server's scope: Fluid 1.x's remote prefetch by table name (an op
        with `remote_prefetch`, `epmap` and `table_names` asks the server's table itself,
        with no prefetch block)."""
        import numpy as np
        from ..core.tensor import LoDTensor
        held = self.scope.find_var(table)
        arr = getattr(held.value, "_array", None) if held is not None else None
        if arr is None or arr.ndim != 2:
            have = sorted(set(self._prefetch_tables().values())) or "none"
            raise KeyError(f"pserver {self.endpoint} has no table '{table}' to prefetch "
                           f"from (its distributed tables: {have})")
        accepts.check_ids(value, table, arr.shape[0], f"trainer {tid}")
        return LoDTensor(arr[value._array.reshape(-1).astype(np.int64)])

    def _prefetch_tables(self):
        """{ids variable: table name} of the prefetch blocks (their lookup's W)."""
        out = {}
        for name, idx in self.prefetch_blocks.items():
            for op in self.env.program.block(idx).ops:
                if op.type == "lookup_sparse_table":
                    out[name] = op.input("W")[0]
        return out
    def checkpoint_notify(self, header, _value):
        """Save a snapshot into the directory the request names (Paddle's
        CheckpointNotify), at a round boundary: a path relative to this server's checkpoint
        root, confined to it (`checkpoint.notify_target`)."""
        directory = field(header, "dir")
        with self.run_lock:
            target = checkpoint.notify_target(self.notify_root, directory, self.endpoint,
                                              self.recovery)
            checkpoint.save(target, self.scope, self.persistables, self.version,
                            self.endpoint)
        return None

    def get_status(self, header, _value):
        return None                 # the reply header says it all

    def heartbeat(self, header, _value):
        self._tid(header)           # admit() noted the trainer alive
        return None

    # -- liveness ------------------------------------------------------------------------------
    def _check_trainers(self):
        """(cv held) fail the job when a trainer went silent without a goodbye."""
        now = time.monotonic()
        for tid, seen in list(self.last_seen.items()):
            if tid not in self.gone and now - seen > self.trainer_timeout:
                self.error = TrainerLost(
                    f"trainer {tid} has not been heard from for {now - seen:.1f} s (no "
                    f"heartbeat within FLAGS_pserver_trainer_timeout="
                    f"{self.trainer_timeout:g} s) and did not say goodbye: it died or hangs")
                self.cv.notify_all()
                return

    def wait_done(self):
        with self.cv:
            while len(self.gone) < self.fanin and self.error is None:
                self.cv.wait(0.5)
                self._check_trainers()


def _name_to_block(entries):
    """{name: block index} of listen_and_serv's "<name>:<block>" strings."""
    out = {}
    for s in entries:
        name, _, idx = s.rpartition(":")
        out[name] = int(idx)
    return out
