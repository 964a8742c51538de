"""The parameter-server runtime behind `listen_and_serv` (the `pserver` run-time service).

`serve(attrs, received, env)` starts the gRPC service on `attrs["endpoint"]` and returns
when every one of `Fanin` trainers has said goodbye.

* Sync mode, per step: each trainer sends its gradients (`<grad>.trainer_<id>`) and a send
  barrier; when all active trainers' barriers are in, the optimize blocks run (their `sum`
  and `scale(1/N)` average the trainers' gradients) and the parameter version goes up. A
  trainer's get waits until the version is newer than the one it last fetched (so a fast
  trainer never reads last step's values), and its fetch barrier records the version it
  has. The first round of gets (the trainers' startup) is answered at once.
* Async mode: each gradient runs the optimize block mapped to it (`grad_to_block_id`) as
  it arrives; gets answer the current values; barriers are errors.

Blocks run one at a time (one lock) with the executor that runs `listen_and_serv`."""
import threading

from ..errors import ExecutionError
from .service import start_server


class PServer:
    def __init__(self, executor=None):
        self._server = None

    def serve(self, attrs, received, env):
        state = _State(attrs, received, env)
        self._server = start_server(attrs["endpoint"], state)
        try:
            state.wait_done()
        finally:
            self._server.stop(grace=1.0).wait(5.0)
            self._server = None
        if state.error is not None:
            raise ExecutionError(f"pserver {attrs['endpoint']}: {state.error}")

    def close(self):
        if self._server is not None:
            self._server.stop(grace=None)
            self._server = None


class _State:
    def __init__(self, attrs, received, env):
        self.endpoint = attrs["endpoint"]
        self.fanin = int(attrs["Fanin"])
        self.sync = bool(attrs["sync_mode"])
        self.blocks = list(attrs["optimize_blocks"])
        self.grad_to_block = {}
        for s in attrs["grad_to_block_id"]:
            name, _, idx = s.rpartition(":")
            self.grad_to_block[name] = int(idx)
        self.received = set(received)
        self.env = env
        self.scope = env.scope
        self.run_lock = threading.Lock()     # blocks and variable reads/writes
        self.cv = threading.Condition()
        self.version = 0
        self.fetched = {}
        self.sent = set()
        self.gone = set()
        self.error = None
        self.prefetch_blocks = _name_to_block(attrs.get("prefetch_var_name_to_block_id", []))

    # -- helpers -----------------------------------------------------------------------------
    def _tid(self, header):
        tid = int(header.get("trainer_id", 0))
        if not 0 <= tid < self.fanin:
            raise ValueError(f"trainer_id {tid} is not in [0, {self.fanin}) (Fanin)")
        return tid

    def _run(self, block_idx):
        try:
            self.env.run_block(block_idx, self.scope)
        except Exception as e:
            self.error = e
            with self.cv:
                self.cv.notify_all()
            raise

    def _optimize_if_all_sent(self):
        """(cv held) run the optimize blocks once every active trainer's barrier is in."""
        active = self.fanin - len(self.gone - self.sent)
        if self.sent and len(self.sent) >= active:
            with self.run_lock:
                for b in self.blocks:
                    self._run(b)
            self.version += 1
            self.sent.clear()
            self.cv.notify_all()

    # -- the RPC methods ----------------------------------------------------------------------
    def send_variable(self, header, value):
        name = header["name"]
        self._tid(header)
        if name not in self.received:
            raise KeyError(f"pserver {self.endpoint} does not receive variable '{name}'")
        with self.run_lock:
            self.scope.var(name).value = value
            if not self.sync:
                self._run(self.grad_to_block[name])
        return None

    def get_variable(self, header, _value):
        name, tid = header["name"], self._tid(header)
        if self.sync:
            with self.cv:
                while not (self.version > self.fetched.get(tid, -1) or self.error or
                           len(self.gone) >= self.fanin):
                    self.cv.wait(1.0)
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
        with self.cv:
            self.sent.add(tid)
            self._optimize_if_all_sent()
        return None

    def fetch_barrier(self, header, _value):
        self._need_sync("fetch_barrier")
        tid = self._tid(header)
        with self.cv:
            self.fetched[tid] = self.version
        return None

    def goodbye(self, header, _value):
        tid = self._tid(header)
        with self.cv:
            self.gone.add(tid)
            if self.sync and len(self.gone) < self.fanin:
                self._optimize_if_all_sent()
            self.cv.notify_all()
        return None

    def prefetch_variable(self, header, value):
        """The rows of the ids `value` from this server's shard of the distributed table:
        its prefetch block (lookup_sparse_table) run in a scope of its own, so lookups from
        several trainers run at once (the table locks itself)."""
        name, table = header["name"], header.get("table_name", "")
        self._tid(header)
        block = self.prefetch_blocks.get(name)
        tables = self._prefetch_tables()
        if block is None or (table and tables.get(name) != table):
            have = sorted(set(tables.values())) or "none"
            raise KeyError(f"pserver {self.endpoint} has no distributed table "
                           f"'{table or name}' to prefetch from (its tables: {have})")
        local = self.scope.new_scope()
        try:
            local.var(name).value = value
            out = local.var(header["out_name"])
            self.env.run_block(block, local)
            return out.value
        finally:
            self.scope.delete_scope(local)

    def _prefetch_tables(self):
        """{ids variable: table name} of the prefetch blocks (their lookup's W)."""
        out = {}
        for name, idx in self.prefetch_blocks.items():
            for op in self.env.program.block(idx).ops:
                if op.type == "lookup_sparse_table":
                    out[name] = op.input("W")[0]
        return out

    def wait_done(self):
        with self.cv:
            while len(self.gone) < self.fanin and self.error is None:
                self.cv.wait(1.0)


def _name_to_block(entries):
    """{name: block index} of listen_and_serv's "<name>:<block>" strings."""
    out = {}
    for s in entries:
        name, _, idx = s.rpartition(":")
        out[name] = int(idx)
    return out
