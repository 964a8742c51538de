"""Admission of a server's streamed calls: how many may be in flight, overall and from one
peer, and how long one may sit without moving a chunk.

A streamed call holds a worker thread for as long as its peer takes to send it (and to read
the reply), so a peer that opens streams and then sends nothing could occupy every thread
and starve the unary calls (a trainer's heartbeats, barriers and gets). `StreamGate` bounds
that:

* at most `max_streams` streamed calls are served at once, and at most `per_peer` from one
  peer (one connection, as gRPC's `context.peer()` names it); a call over either limit is
  refused at once, RESOURCE_EXHAUSTED, naming the limit and the flag that sets it, before a
  byte of it is read. `max_streams` is kept below the server's worker count, so unary calls
  always find a thread;
* a streamed call that moves no chunk (in or out) for `idle_s` seconds is cancelled by the
  gate's watchdog thread (one per gate, alive only while streams are in flight), which
  frees its thread; the time the method itself takes (a sync get waiting for its round) is
  not counted.

The gate is only consulted by streamed calls (large variables); unary calls never touch its
lock. Calls without the server's token never reach it: they are refused before admission
(`service.py`)."""
import threading
import time

from ..errors import FluidityError


class Refused(FluidityError):
    """A call the handler refuses with a given gRPC status (`code`: a StatusCode name)."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class _Ticket:
    """One admitted stream: its peer, its context (to cancel), when it last moved a chunk,
    whether the watchdog watches it now, and whether the watchdog cancelled it."""
    __slots__ = ("peer", "context", "last", "watched", "timed_out")

    def __init__(self, peer, context):
        self.peer, self.context = peer, context
        self.last = time.monotonic()
        self.watched = True
        self.timed_out = False

    def moved(self):
        self.last = time.monotonic()


class StreamGate:
    """The limits of one server's streamed calls (see the module's docstring)."""

    def __init__(self, max_streams, per_peer, idle_s):
        if max_streams < 1 or per_peer < 1 or idle_s <= 0:
            raise ValueError(f"stream limits must be positive: max_streams={max_streams}, "
                             f"per_peer={per_peer}, idle_s={idle_s}")
        self.max_streams, self.per_peer, self.idle_s = int(max_streams), int(per_peer), \
            float(idle_s)
        self._lock = threading.Lock()
        self._active = set()
        self._by_peer = {}
        self._watchdog = None

    def enter(self, peer, context):
        """A ticket for a new stream from `peer`, or Refused RESOURCE_EXHAUSTED."""
        with self._lock:
            if len(self._active) >= self.max_streams:
                raise Refused("RESOURCE_EXHAUSTED",
                              f"the server already serves {len(self._active)} streamed calls "
                              f"(at most {self.max_streams}, FLAGS_rpc_max_streams); retry "
                              f"later")
            mine = self._by_peer.get(peer, 0)
            if mine >= self.per_peer:
                raise Refused("RESOURCE_EXHAUSTED",
                              f"{peer} already has {mine} streamed calls in flight (at most "
                              f"{self.per_peer} a peer, FLAGS_rpc_max_streams_per_peer)")
            ticket = _Ticket(peer, context)
            self._active.add(ticket)
            self._by_peer[peer] = mine + 1
            if self._watchdog is None:
                self._watchdog = threading.Thread(target=self._watch, daemon=True,
                                                  name="rpc-stream-watchdog")
                self._watchdog.start()
        return ticket

    def leave(self, ticket):
        with self._lock:
            if ticket in self._active:
                self._active.discard(ticket)
                left = self._by_peer[ticket.peer] - 1
                if left:
                    self._by_peer[ticket.peer] = left
                else:
                    del self._by_peer[ticket.peer]

    def in_flight(self):
        with self._lock:
            return len(self._active)

    def _watch(self):
        period = min(self.idle_s / 4.0, 0.5)
        while True:
            time.sleep(period)
            with self._lock:
                if not self._active:
                    self._watchdog = None
                    return
                tickets = list(self._active)
            now = time.monotonic()
            for t in tickets:
                if t.watched and not t.timed_out and now - t.last > self.idle_s:
                    t.timed_out = True
                    t.context.cancel()


def read_stream(ticket, request_iterator, gate):
    """The chunks of a streamed request joined, each noted as progress; Refused
    DEADLINE_EXCEEDED when the watchdog cancelled the stream for idling, CANCELLED when its
    caller did (what arrived is dropped: a cut stream is never served as if whole)."""
    parts = []
    try:
        for part in request_iterator:
            ticket.moved()
            parts.append(part)
    except Exception:  # noqa: BLE001 - grpc's error of a cancelled call
        if not ticket.timed_out:
            raise Refused("CANCELLED", f"the streamed call from {ticket.peer} was "
                                       f"cancelled before it was whole") from None
    if ticket.timed_out:
        raise Refused("DEADLINE_EXCEEDED",
                      f"streamed call from {ticket.peer} sent nothing for {gate.idle_s:g} s "
                      f"(FLAGS_rpc_stream_idle_timeout): cancelled")
    return b"".join(parts)
