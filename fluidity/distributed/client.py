"""The trainer's RPC client (the `rpc` run-time service of send / recv / barrier ops).

Every call has a deadline (`FLAGS_rpc_deadline`, milliseconds, Paddle's flag; default
180000) and waits for the server to come up within it: a call that finds its server down
(UNAVAILABLE: not started yet, or restarting) is retried with exponential backoff until the
deadline, so the deadline is also the window a pserver has to restart in; so is a streamed
call the server was too busy to take (RESOURCE_EXHAUSTED marked for retry: its limits on
streams in flight). A server that
cannot be reached in time raises RPCError naming its endpoint. `close()` (from
`Executor.close()`) says goodbye to every server this client talked to, as Fluid's trainers
do.

Restarts (sync mode): every reply carries the server's incarnation and version (rounds
applied); every call carries the incarnation the client knows, and a restarted server
refuses an old one (ABORTED). The client then asks the new server's status: when its
version is the one this trainer last fetched, the step in flight was not applied, and the
client resends the step's gradients and barrier (kept, by reference, until the step's fetch
barrier) before going on; when it is one more, the step was applied; anything else means
the server lost applied rounds, and the call fails saying so. Sends and barriers carry the
version they were computed from, so a retried one is applied once.

Also: the shared token (`service.rpc_token()`) in each call's metadata; requests above
`FLAGS_rpc_stream_threshold` bytes, and gets whose replies are, go by the streaming form
of the method; a heartbeat per server every FLAGS_rpc_heartbeat_interval seconds (default
1; 0: none) from a background thread, so servers tell a dead trainer from a slow one; and
`stats` (`RPCStats`): per call kind, calls, bytes each way, seconds, for benchmarks
(`RPCClient.of(executor).stats.snapshot()`)."""
import logging
import threading
import time

import numpy as np

from ..core.tensor import LoDTensor
from ..errors import ExecutionError
from . import wire
from .service import (RETRY_KEY, TOKEN_KEY, UNCHECKED, chunks, env_flag, message_options,
                      method_path, rpc_token, stream_threshold)


logger = logging.getLogger("fluidity")


class RPCError(ExecutionError):
    """An RPC to a parameter server failed; the message names the endpoint."""


class RPCStats:
    """Counters of one client's calls: per method, `calls`, `streamed` (of them, those that
    went by the streaming form), `bytes_sent`, `bytes_received` (whole wire messages) and
    `seconds` (wall time of the calls; calls made together share their batch's time), and
    `wall_seconds`, the time spent in RPC in all; and per variable named in a call
    (`variables`: {name: {calls, bytes_sent, bytes_received}}), so a benchmark can tell a
    sparse table's traffic from the dense parameters'."""

    KEYS = ("calls", "streamed", "bytes_sent", "bytes_received", "seconds")
    VAR_KEYS = ("calls", "bytes_sent", "bytes_received")

    def __init__(self):
        self._lock = threading.Lock()
        self.reset()

    def reset(self):
        with self._lock:
            self._by_method = {}
            self._by_var = {}
            self._wall = 0.0

    def record(self, method, sent, received, seconds, streamed=False, name=None):
        with self._lock:
            row = self._by_method.get(method)
            if row is None:
                row = self._by_method[method] = dict.fromkeys(self.KEYS, 0)
            row["calls"] += 1
            row["streamed"] += bool(streamed)
            row["bytes_sent"] += sent
            row["bytes_received"] += received
            row["seconds"] += seconds
            if name is not None:
                var = self._by_var.get(name)
                if var is None:
                    var = self._by_var[name] = dict.fromkeys(self.VAR_KEYS, 0)
                var["calls"] += 1
                var["bytes_sent"] += sent
                var["bytes_received"] += received

    def add_wall(self, seconds):
        with self._lock:
            self._wall += seconds

    def snapshot(self):
        """{"methods": {method: {calls, bytes_sent, bytes_received, seconds}},
        "variables": {name: {calls, bytes_sent, bytes_received}}, "wall_seconds": float,
        and the totals over methods}."""
        with self._lock:
            methods = {m: dict(r) for m, r in self._by_method.items()}
            variables = {n: dict(r) for n, r in self._by_var.items()}
            wall = self._wall
        totals = {k: sum(r[k] for r in methods.values()) for k in self.KEYS}
        return {"methods": methods, "variables": variables, "wall_seconds": wall, **totals}


class _Peer:
    """What the client knows of one server: its incarnation, whether it runs sync, the
    version this trainer last fetched (`have`) and got (`got`), and the step's calls."""

    def __init__(self):
        self.incarnation = None
        self.sync = False
        self.have = -1
        self.got = -1
        self.step = []


class _Aborted(Exception):
    """The server refused a call made for an earlier incarnation of it."""


_STEP_METHODS = ("SendVariable", "SendBarrier")


class RPCClient:
    def __init__(self, deadline_s=None, backoff_s=0.05, token=None):
        import grpc
        self._grpc = grpc
        self.deadline_s = (deadline_s if deadline_s is not None
                           else env_flag("FLAGS_rpc_deadline", 180000.0) / 1000.0)
        self.backoff_s = backoff_s
        token = rpc_token() if token is None else token
        self._metadata = ((TOKEN_KEY, token),) if token else None
        self._threshold = stream_threshold()
        self._heartbeat_s = env_flag("FLAGS_rpc_heartbeat_interval", 1.0)
        self._channels = {}
        self._stubs = {}
        self._streamed = set()          # (endpoint, method, name) whose replies stream
        self._peers = {}
        self._lock = threading.RLock()          # the tables; never held over the network
        self._resync_lock = threading.RLock()   # one resynchronisation at a time
        self._trainer_id = 0
        self._beat = None
        self._stop = threading.Event()
        self.stats = RPCStats()

    @staticmethod
    def of(executor):
        """The RPC client of `executor` (made on first use), e.g. to read its `stats`."""
        return executor.services.get("rpc")

    # -- plumbing ------------------------------------------------------------------------------
    def _channel(self, endpoint):
        with self._lock:
            ch = self._channels.get(endpoint)
            if ch is None:
                ch = self._channels[endpoint] = self._grpc.insecure_channel(
                    endpoint, options=message_options(self._threshold))
                self._peers[endpoint] = _Peer()
            return ch

    def _stub(self, endpoint, method, stream):
        key = (endpoint, method, stream)
        fn = self._stubs.get(key)
        if fn is None:
            ch = self._channel(endpoint)
            make = ch.stream_stream if stream else ch.unary_unary
            fn = self._stubs[key] = make(method_path(method, stream))
        return fn

    def _peer(self, endpoint):
        self._channel(endpoint)
        return self._peers[endpoint]

    def _request(self, endpoint, method, header, value):
        """(header as sent, message): the incarnation this client knows added."""
        peer = self._peer(endpoint)
        h = dict(header)
        if peer.incarnation is not None and method not in UNCHECKED:
            h["incarnation"] = peer.incarnation
        return h, wire.encode(h, value)

    def _streams(self, endpoint, method, header, request):
        return (len(request) > self._threshold
                or (endpoint, method, header.get("name")) in self._streamed)

    def _once(self, endpoint, method, header, request, timeout):
        """The reply message of one attempt (grpc errors propagate)."""
        md = self._metadata
        if self._streams(endpoint, method, header, request):
            fn = self._stub(endpoint, method, True)
            return b"".join(fn(iter(chunks(request)), timeout=timeout, wait_for_ready=True,
                               metadata=md))
        reply = self._stub(endpoint, method, False)(request, timeout=timeout,
                                                    wait_for_ready=True, metadata=md)
        if _stream_required(reply):          # the reply is too big for one message
            self._streamed.add((endpoint, method, header.get("name")))
            fn = self._stub(endpoint, method, True)
            return b"".join(fn(iter(chunks(request)), timeout=timeout,
                               wait_for_ready=True, metadata=md))
        return reply

    def _attempts(self, endpoint, method, header, request, end, deadline_s):
        """The reply message, retrying while the server is unavailable, or too busy to take
        another streamed call, until `end`."""
        grpc = self._grpc
        delay, busy = self.backoff_s, None
        while True:
            left = end - time.monotonic()
            if left <= 0:
                if busy is not None:
                    raise self._error(endpoint, method, busy, deadline_s)
                raise self._unreachable(endpoint, method, deadline_s)
            try:
                return self._once(endpoint, method, header, request, left)
            except grpc.RpcError as e:
                code = e.code()
                if code == grpc.StatusCode.ABORTED:
                    raise _Aborted(e.details()) from None
                if code == grpc.StatusCode.RESOURCE_EXHAUSTED and _retry_later(e):
                    busy = e
                elif code != grpc.StatusCode.UNAVAILABLE:
                    raise self._error(endpoint, method, e, deadline_s) from None
            time.sleep(max(0.0, min(delay, end - time.monotonic())))
            delay = min(delay * 2, 1.0)

    def _unreachable(self, endpoint, method, deadline_s):
        return RPCError(f"{method} to pserver {endpoint}: unreachable or no answer within "
                        f"the {deadline_s:g} s deadline (FLAGS_rpc_deadline); is the "
                        f"pserver running?")

    def _error(self, endpoint, method, e, deadline_s):
        code = e.code()
        if code == self._grpc.StatusCode.DEADLINE_EXCEEDED:
            return self._unreachable(endpoint, method, deadline_s)
        if code == self._grpc.StatusCode.UNAUTHENTICATED:
            return RPCError(f"{method} to pserver {endpoint} refused: {e.details()} (this "
                            f"trainer's FLUIDITY_RPC_TOKEN differs from the server's)")
        return RPCError(f"{method} to pserver {endpoint} failed ({code.name}): "
                        f"{e.details()}")

    # -- bookkeeping of replies ----------------------------------------------------------------
    def _finish(self, endpoint, method, header, value, reply):
        """(header, value) of `reply`, noting what it says about the server and the step."""
        rh, rv = wire.decode(reply)
        peer = self._peers[endpoint]
        with self._lock:
            if "incarnation" in rh and peer.incarnation is None:
                peer.incarnation = rh["incarnation"]
            peer.sync = bool(rh.get("sync", peer.sync))
            if method == "GetVariable" and "version" in rh and not header.get("no_barrier"):
                peer.got = rh["version"]
            elif method == "FetchBarrier":
                peer.have = max(peer.have, peer.got)
                peer.step = []
            elif method in _STEP_METHODS and peer.sync:
                peer.step.append((method, header, value))
        return rh, rv

    def _resync(self, endpoint, deadline_s, end):
        """After the server on `endpoint` restarted: learn its incarnation and version and
        resend this step's calls when the step was not applied."""
        status = {"trainer_id": self._trainer_id}
        h, req = self._request(endpoint, "GetStatus", status, None)
        rh, _ = wire.decode(self._attempts(endpoint, "GetStatus", h, req, end, deadline_s))
        peer = self._peers[endpoint]
        with self._lock:
            version, replay = rh.get("version", 0), []
            if rh.get("sync") and peer.incarnation is not None:
                if version == peer.have:
                    replay = list(peer.step)
                elif version != peer.have + 1:
                    raise RPCError(
                        f"pserver {endpoint} restarted at version {version}, but this "
                        f"trainer has fetched version {peer.have}: the server lost applied "
                        f"rounds (is FLAGS_pserver_checkpoint_dir set for it?)")
            peer.incarnation = rh.get("incarnation")
            peer.step = []
        logger.warning("pserver %s restarted (now at version %s): %s", endpoint, version,
                       f"resending this step's {len(replay)} calls" if replay else
                       "nothing to resend")
        for method, header, value in replay:
            self.call(endpoint, method, header, value, deadline_s)

    # -- calls ---------------------------------------------------------------------------------
    def call(self, endpoint, method, header, value=None, deadline_s=None):
        """(header, value) of `method` on `endpoint`, within the deadline (retried with
        backoff while the server is unavailable; resynchronised after its restart)."""
        deadline_s = self.deadline_s if deadline_s is None else deadline_s
        end = time.monotonic() + deadline_s
        while True:
            h, request = self._request(endpoint, method, header, value)
            t0 = time.perf_counter()
            try:
                reply = self._attempts(endpoint, method, h, request, end, deadline_s)
            except _Aborted:
                with self._resync_lock:
                    if h.get("incarnation") == self._peers[endpoint].incarnation:
                        self._resync(endpoint, deadline_s, end)
                continue
            finally:
                dt = time.perf_counter() - t0
                self.stats.add_wall(dt)
            self.stats.record(method, len(request), len(reply), dt,
                              self._streams(endpoint, method, h, request), h.get("name"))
            return self._finish(endpoint, method, header, value, reply)

    def call_many(self, calls):
        """[(header, value)] of each (endpoint, method, header, value), the calls made at
        once; one whose server was down or restarted, or that streams, goes on as `call`
        (retries, resync) after all the others are in; any other failure raises."""
        if len(calls) <= 1:
            return [self.call(*c) for c in calls]
        grpc = self._grpc
        t0 = time.perf_counter()
        sent = []
        for ep, m, h, v in calls:
            hh, req = self._request(ep, m, h, v)
            if self._streams(ep, m, hh, req):
                sent.append((req, None))
                continue
            sent.append((req, self._stub(ep, m, False).future(
                req, timeout=self.deadline_s, wait_for_ready=True, metadata=self._metadata)))
        replies, again = [], (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.ABORTED)
        try:
            for (ep, m, _h, _v), (_req, f) in zip(calls, sent):
                try:
                    replies.append(None if f is None else f.result())
                except grpc.RpcError as e:
                    if e.code() not in again:    # down or restarted: `call` handles it
                        raise self._error(ep, m, e, self.deadline_s) from None
                    replies.append(None)
        finally:
            for _req, f in sent:
                if f is not None:
                    f.cancel()
        dt = time.perf_counter() - t0
        self.stats.add_wall(dt)
        out = [None] * len(calls)
        for i, ((ep, m, h, v), (req, _f), reply) in enumerate(zip(calls, sent, replies)):
            if reply is not None and _stream_required(reply):
                self._streamed.add((ep, m, h.get("name")))
                reply = None
            if reply is not None:
                self.stats.record(m, len(req), len(reply), dt / len(calls), name=h.get("name"))
                out[i] = self._finish(ep, m, h, v, reply)
        for i, c in enumerate(calls):
            if out[i] is None:
                out[i] = self.call(*c)
        return out

    # -- heartbeats ----------------------------------------------------------------------------
    def _start_heartbeat(self, trainer_id):
        self._trainer_id = trainer_id
        if self._beat is not None or self._heartbeat_s <= 0:
            return
        self._beat = threading.Thread(target=self._heartbeats, name="rpc-heartbeat",
                                      daemon=True)
        self._beat.start()

    def _heartbeats(self):
        msg = wire.encode({"trainer_id": self._trainer_id})
        while not self._stop.wait(self._heartbeat_s):
            with self._lock:
                eps = list(self._channels)
            for ep in eps:
                try:
                    f = self._stub(ep, "Heartbeat", False).future(
                        msg, timeout=max(self._heartbeat_s, 0.5), metadata=self._metadata)
                    f.add_done_callback(_ignore)
                except Exception:  # noqa: BLE001 - a closed channel: the client is closing
                    return

    # -- what the ops call -----------------------------------------------------------------
    def _versioned(self, ep, header):
        peer = self._peer(ep)
        if peer.sync and peer.have >= 0:
            header["version"] = peer.have
        return header

    def send_vars(self, items, trainer_id):
        """Send each (endpoint, name, value)."""
        self._start_heartbeat(trainer_id)
        self.call_many([(ep, "SendVariable",
                         self._versioned(ep, {"name": name, "trainer_id": trainer_id}), value)
                        for ep, name, value in items])

    def get_vars(self, items, trainer_id, no_barrier=False):
        """The values of each (endpoint, name). `no_barrier` (Fluid's GetVarNoBarrier, what
        recv_save asks): the values as they stand, without waiting for the next step's
        update in sync mode, and without counting as this trainer's fetch of the step."""
        self._start_heartbeat(trainer_id)
        extra = {"no_barrier": True} if no_barrier else {}
        return [v for _h, v in self.call_many(
            [(ep, "GetVariable", {"name": name, "trainer_id": trainer_id,
                                  "after": self._peer(ep).have, **extra}, None)
             for ep, name in items])]

    def barrier(self, endpoints, kind, trainer_id):
        self._start_heartbeat(trainer_id)
        method = {"send": "SendBarrier", "fetch": "FetchBarrier"}[kind]
        self.call_many([(ep, method, self._versioned(ep, {"trainer_id": trainer_id}), None)
                        for ep in endpoints])

    def checkpoint_notify(self, items, trainer_id):
        """Ask each (endpoint, directory) to save a checkpoint there."""
        self._trainer_id = trainer_id
        self.call_many([(ep, "CheckpointNotify", {"dir": d, "trainer_id": trainer_id}, None)
                        for ep, d in items])

    def prefetch_vars(self, items, trainer_id):
        """The rows of each (endpoint, ids name, out name, table name, ids) from the
        distributed table's shards (their prefetch blocks), asked at once."""
        self._trainer_id = trainer_id
        return [v for _h, v in self.call_many(
            [(ep, "PrefetchVariable", {"name": name, "out_name": out, "table_name": table,
                                       "trainer_id": trainer_id}, _narrow_ids(ids))
             for ep, name, out, table, ids in items])]

    def close(self):
        """Say goodbye to every server contacted, then close the channels."""
        self._stop.set()
        if self._beat is not None:
            self._beat.join(5.0)
            self._beat = None
        with self._lock:
            eps = list(self._channels)
        errors = []
        try:
            for ep in eps:
                try:
                    self.call(ep, "Goodbye", {"trainer_id": self._trainer_id},
                              deadline_s=min(self.deadline_s, 10.0))
                except RPCError as e:
                    errors.append(e)
        finally:
            with self._lock:
                chans, self._channels = list(self._channels.values()), {}
                self._stubs, self._peers = {}, {}
            for ch in chans:
                ch.close()
        if errors:
            raise errors[0]


_INT32_MAX = np.iinfo(np.int32).max


def _narrow_ids(ids):
    """The int64 ids of a prefetch as int32 when they fit (tables under 2^31 rows): 4 bytes
    an id on the wire instead of 8, so a step's table traffic (ids up, rows and gradient
    rows both ways) stays within 1.2x of the rows alone at width 10. The server reads ids
    of any integer type."""
    a = ids._array if isinstance(ids, LoDTensor) else None
    if a is None or a.dtype != np.int64 or not a.size or a.min() < 0 or a.max() > _INT32_MAX:
        return ids
    return LoDTensor(a.astype(np.int32), ids.lod())


def _stream_required(reply):
    """Whether a unary reply is the server's note that the real reply must be streamed."""
    return (len(reply) < 256 and b"stream_required" in reply
            and "stream_required" in wire.decode(reply)[0])


def _retry_later(error):
    """Whether a refusal says the server was busy (its streamed-call limits), not wrong."""
    try:
        return any(k == RETRY_KEY for k, _v in (error.trailing_metadata() or ()))
    except Exception:  # noqa: BLE001 - an error without metadata: not a busy server's
        return False


def _ignore(_future):
    """Heartbeats are fire and forget: a lost one only matters when they all are."""
