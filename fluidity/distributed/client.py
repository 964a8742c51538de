"""The trainer's RPC client (the `rpc` run-time service of send / recv / barrier ops).

Every call has a deadline (`FLAGS_rpc_deadline`, milliseconds, Paddle's flag; default
180000) and waits for the server to come up within it; a call that fails as UNAVAILABLE is
retried with exponential backoff (`FLAGS_rpc_retry_times`, default 3). A server that cannot
be reached in time raises RPCError naming its endpoint. `close()` (from `Executor.close()`)
says goodbye to every server this client talked to, as Fluid's trainers do."""
import os
import threading
import time

from ..errors import ExecutionError
from . import wire
from .service import method_path


class RPCError(ExecutionError):
    """An RPC to a parameter server failed; the message names the endpoint."""


def _flag(name, default):
    v = os.environ.get(name)
    try:
        return float(v) if v not in (None, "") else default
    except ValueError:
        raise ValueError(f"{name}={v!r} is not a number") from None


class RPCClient:
    def __init__(self, deadline_s=None, retries=None, backoff_s=0.05):
        import grpc
        self._grpc = grpc
        self.deadline_s = (deadline_s if deadline_s is not None
                           else _flag("FLAGS_rpc_deadline", 180000.0) / 1000.0)
        self.retries = int(retries if retries is not None else _flag("FLAGS_rpc_retry_times", 3))
        self.backoff_s = backoff_s
        self._channels = {}
        self._lock = threading.Lock()
        self._trainer_id = 0
        self.traffic = {}   # {method: {"calls", "sent", "received"}}: count_traffic

    def _channel(self, endpoint):
        with self._lock:
            ch = self._channels.get(endpoint)
            if ch is None:
                ch = self._channels[endpoint] = self._grpc.insecure_channel(
                    endpoint, options=[("grpc.max_send_message_length", -1),
                                       ("grpc.max_receive_message_length", -1)])
            return ch

    def call(self, endpoint, method, header, value=None, deadline_s=None):
        """(header, value) of `method` on `endpoint`, within the deadline (retried with
        backoff while the server is unavailable)."""
        grpc = self._grpc
        deadline_s = self.deadline_s if deadline_s is None else deadline_s
        fn = self._channel(endpoint).unary_unary(method_path(method))
        request = wire.encode(header, value)
        end = time.monotonic() + deadline_s
        delay, attempt = self.backoff_s, 0
        while True:
            left = end - time.monotonic()
            if left <= 0:
                raise RPCError(f"{method} to pserver {endpoint}: unreachable or no answer "
                               f"within the {deadline_s:g} s deadline (FLAGS_rpc_deadline)")
            try:
                response = fn(request, timeout=left, wait_for_ready=True)
                self.count_traffic(method, len(request), len(response))
                return wire.decode(response)
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.UNAVAILABLE and attempt < self.retries:
                    attempt += 1
                    time.sleep(min(delay, max(0.0, end - time.monotonic())))
                    delay *= 2
                    continue
                raise self._error(endpoint, method, e, deadline_s) from None

    def _error(self, endpoint, method, e, deadline_s):
        if e.code() == self._grpc.StatusCode.DEADLINE_EXCEEDED:
            return RPCError(f"{method} to pserver {endpoint}: unreachable or no answer "
                            f"within the {deadline_s:g} s deadline (FLAGS_rpc_deadline); is "
                            f"the pserver running?")
        return RPCError(f"{method} to pserver {endpoint} failed ({e.code().name}): "
                        f"{e.details()}")

    def call_many(self, calls):
        """[(header, value)] of each (endpoint, method, header, value), the calls made at
        once; one that finds its server unavailable goes on as `call` (retries)."""
        if len(calls) <= 1:
            return [self.call(*c) for c in calls]
        grpc = self._grpc
        requests = [wire.encode(h, v) for _ep, _m, h, v in calls]
        futs = [self._channel(ep).unary_unary(method_path(m)).future(
                    request, timeout=self.deadline_s, wait_for_ready=True)
                for (ep, m, _h, _v), request in zip(calls, requests)]
        out = []
        try:
            for (ep, m, h, v), f, request in zip(calls, futs, requests):
                try:
                    response = f.result()
                    self.count_traffic(m, len(request), len(response))
                    out.append(wire.decode(response))
                except grpc.RpcError as e:
                    if e.code() != grpc.StatusCode.UNAVAILABLE:
                        raise self._error(ep, m, e, self.deadline_s) from None
                    out.append(self.call(ep, m, h, v))
        finally:
            for f in futs:
                f.cancel()
        return out

    # -- what the ops call -----------------------------------------------------------------
    def send_vars(self, items, trainer_id):
        """Send each (endpoint, name, value)."""
        self._trainer_id = trainer_id
        self.call_many([(ep, "SendVariable", {"name": name, "trainer_id": trainer_id}, value)
                        for ep, name, value in items])

    def get_vars(self, items, trainer_id):
        """The values of each (endpoint, name)."""
        self._trainer_id = trainer_id
        return [v for _h, v in self.call_many(
            [(ep, "GetVariable", {"name": name, "trainer_id": trainer_id}, None)
             for ep, name in items])]

    def barrier(self, endpoints, kind, trainer_id):
        self._trainer_id = trainer_id
        method = {"send": "SendBarrier", "fetch": "FetchBarrier"}[kind]
        self.call_many([(ep, method, {"trainer_id": trainer_id}, None) for ep in endpoints])

    def prefetch_vars(self, items, trainer_id):
        """The rows of each (endpoint, ids name, out name, table name, ids) from the
        distributed table's shards (their prefetch blocks), asked at once."""
        self._trainer_id = trainer_id
        return [v for _h, v in self.call_many(
            [(ep, "PrefetchVariable", {"name": name, "out_name": out, "table_name": table,
                                       "trainer_id": trainer_id}, ids)
             for ep, name, out, table, ids in items])]

    def count_traffic(self, method, sent, received):
        """Add one answered RPC's message bytes (request, response) to `traffic`."""
        with self._lock:
            c = self.traffic.setdefault(method, {"calls": 0, "sent": 0, "received": 0})
            c["calls"] += 1
            c["sent"] += sent
            c["received"] += received

    def reset_traffic(self):
        """Forget the counts: `traffic` is {method: {"calls", "sent", "received"}} of the
        RPCs answered since (whole wire messages: header and payload)."""
        with self._lock:
            self.traffic = {}

    def close(self):
        """Say goodbye to every server contacted, then close the channels."""
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
            for ch in chans:
                ch.close()
        if errors:
            raise errors[0]
