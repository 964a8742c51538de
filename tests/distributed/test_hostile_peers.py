"""What a peer without the token, or with a malformed request, can make a pserver do: the
token is checked before a byte of a call is read (a 256 MiB token-less stream leaves the
server's memory where it was; 40 half-open token-less streams leave a trainer's heartbeats
served); streamed calls are bounded overall and per peer (RESOURCE_EXHAUSTED) and cancelled
when idle; every malformed header is INVALID_ARGUMENT; and random, truncated and oversize
messages to every method fail that call alone, never the job."""
import os
import subprocess
import sys
import threading
import time

import grpc
import numpy as np
import pytest

from fluidity.distributed import RPCClient, RPCError, service, wire
from fluidity.distributed.admission import Refused, StreamGate
from fluidity.distributed.launch import free_ports

from pserver_fixture import InProcessPServer

HERE = os.path.dirname(os.path.abspath(__file__))
TOKEN = "s3cret-token"
MiB = 1 << 20


def _peak_rss(pid):
    """(VmHWM, VmRSS) of process `pid`, bytes."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmHWM", "VmRSS"):
                out[key] = int(rest.split()[0]) * 1024
    return out["VmHWM"], out["VmRSS"]


def _channel(ep):
    # a connection of its own (gRPC shares one between equal channels by default)
    return grpc.insecure_channel(ep, options=[("grpc.use_local_subchannel_pool", 1)])


def _code(fn):
    try:
        fn()
        return grpc.StatusCode.OK, ""
    except grpc.RpcError as e:
        return e.code(), e.details()


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads /proc")
def test_a_tokenless_256_mib_stream_leaves_the_servers_memory_bounded():
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "service_server.py"), TOKEN],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    try:
        port = int(proc.stdout.readline().split()[1])
        ep = f"127.0.0.1:{port}"
        ch = _channel(ep)
        md = ((service.TOKEN_KEY, TOKEN),)
        # warm up: the worker threads and gRPC's buffers a real call takes
        ch.unary_unary(service.method_path("Heartbeat"))(
            wire.encode({"trainer_id": 0}), metadata=md, timeout=30, wait_for_ready=True)
        list(ch.stream_stream(service.method_path("Heartbeat", True))(
            iter([wire.encode({"trainer_id": 0})]), metadata=md, timeout=30))
        peak0, _ = _peak_rss(proc.pid)
        chunk = bytes(MiB)
        pulled = []

        def stream():
            for _ in range(256):              # 256 MiB, made as gRPC asks for it
                pulled.append(1)
                yield chunk
        for token in (None, "wrong"):
            code, details = _code(lambda: list(ch.stream_stream(
                service.method_path("SendVariable", True))(
                    stream(), timeout=60,
                    metadata=None if token is None else ((service.TOKEN_KEY, token),))))
            assert code == grpc.StatusCode.UNAUTHENTICATED, (code, details)
            # a unary message of the largest size gRPC takes, token-less: never read either
            code, _ = _code(lambda: ch.unary_unary(service.method_path("SendVariable"))(
                bytes(service.stream_threshold()), timeout=60))
            assert code == grpc.StatusCode.UNAUTHENTICATED
        peak1, _ = _peak_rss(proc.pid)
        ch.close()
    finally:
        proc.stdin.close()
        out = proc.stdout.read()
        proc.wait(30)
    # The refusing handler never asks gRPC for a message, so what a token-less call can
    # make the server hold is its metadata (<= MAX_METADATA) and the transport's buffers of
    # one connection; those hold at most one message (the unary cap: threshold + header
    # room) plus the HTTP/2 window, which gRPC keeps under a few MiB. Reading the stream
    # (as before) took > 256 MiB.
    cap = service.stream_threshold() + (1 << 16)
    bound = 2 * cap + service.MAX_METADATA + 8 * MiB
    assert peak1 - peak0 < bound, (peak0, peak1, bound)
    assert len(pulled) < 64, len(pulled)  # gRPC stopped asking for chunks: refused at once
    assert "calls 2" in out, out           # the warm-up calls only reached the handler


def test_forty_half_open_tokenless_streams_do_not_starve_heartbeats(monkeypatch):
    monkeypatch.setenv("FLUIDITY_RPC_TOKEN", TOKEN)
    monkeypatch.setenv("FLAGS_rpc_deadline", "20000")
    ps = InProcessPServer()
    release = threading.Event()

    def half_open():
        release.wait(60)
        return
        yield  # a generator that never sends a chunk
    channels = [_channel(ps.ep) for _ in range(40)]
    client = RPCClient(token=TOKEN)
    ps.wait_ready(TOKEN)
    try:
        calls = [ch.stream_stream(service.method_path("SendVariable", True))(
            half_open(), timeout=60, wait_for_ready=True) for ch in channels]
        for _ in range(5):     # each within its deadline, while the streams are open
            client.call(ps.ep, "Heartbeat", {"trainer_id": 0}, deadline_s=10)
        codes = [c.code() for c in calls]       # each refused at once, not held
        assert codes == [grpc.StatusCode.UNAUTHENTICATED] * 40, codes
        assert ps.error is None
    finally:
        release.set()
        for ch in channels:
            ch.close()
        RPCClient(token=TOKEN).call(ps.ep, "Goodbye", {"trainer_id": 0})
        ps.join()
    assert ps.error is None


def test_gets_abandoned_by_their_callers_free_their_threads(monkeypatch):
    monkeypatch.setenv("FLUIDITY_RPC_TOKEN", TOKEN)
    ps = InProcessPServer().wait_ready(TOKEN)       # 24 worker threads
    md = ((service.TOKEN_KEY, TOKEN),)
    ch = grpc.insecure_channel(ps.ep)
    try:
        client = RPCClient(token=TOKEN)
        client.call(ps.ep, "FetchBarrier", {"trainer_id": 0})     # its gets now wait
        get = ch.unary_unary(service.method_path("GetVariable"))
        msg = wire.encode({"name": "fc_0.w_0", "trainer_id": 0})
        waits = [get.future(msg, timeout=0.3, metadata=md) for _ in range(40)]
        for f in waits:     # more than the server's threads, each given up by its caller
            assert f.exception().code() == grpc.StatusCode.DEADLINE_EXCEEDED
        # their threads come back: a trainer's calls are served, and its step runs
        client.call(ps.ep, "Heartbeat", {"trainer_id": 0}, deadline_s=20)
        for name, (_vt, dtype, shape) in ps.received().items():
            client.call(ps.ep, "SendVariable", {"name": name, "trainer_id": 0},
                        np.ones(shape, dtype), deadline_s=20)
        client.call(ps.ep, "SendBarrier", {"trainer_id": 0}, deadline_s=20)
        h, _ = client.call(ps.ep, "GetStatus", {})
        assert h["version"] == 1 and ps.error is None
    finally:
        ch.close()
        RPCClient(token=TOKEN).call(ps.ep, "Goodbye", {"trainer_id": 0})
        ps.join()


class _Nothing:
    def __getattr__(self, name):
        if name not in service.METHODS.values():
            raise AttributeError(name)
        return lambda header, value: None


def _wait(pred, timeout=20.0):
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, "timed out waiting"
        time.sleep(0.02)


@pytest.fixture
def bare():
    """start(max_workers, limits) -> the endpoint of a service without a token (everyone is
    in, so only the limits protect its threads); half_open(first=()) -> a request stream
    that sends `first` and then nothing until the test ends."""
    servers, release = [], threading.Event()

    def start(max_workers, limits):
        (port,) = free_ports(1)
        ep = f"127.0.0.1:{port}"
        servers.append(service.start_server(ep, _Nothing(), max_workers=max_workers,
                                            token="", limits=limits))
        return ep

    def half_open(first=()):
        yield from first
        release.wait(60)
    yield start, half_open
    release.set()
    for server in servers:
        server.stop(None)


def test_streams_are_bounded_overall_and_per_peer_and_unary_calls_still_run(bare):
    start, half_open = bare
    ep = start(8, (4, 2, 60.0))
    channels = [_channel(ep) for _ in range(40)]
    path = service.method_path("SendVariable", True)
    try:
        calls = [ch.stream_stream(path)(half_open(), timeout=60, wait_for_ready=True)
                 for ch in channels]
        _wait(lambda: sum(c.done() for c in calls) >= 36)
        held = [c for c in calls if not c.done()]
        refused = [c for c in calls if c.done()]
        assert len(held) == 4, len(held)
        for c in refused:
            assert c.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "FLAGS_rpc_max_streams" in c.details(), c.details()
        # unary calls find threads while 4 of the 8 are held
        beat = wire.encode({"trainer_id": 0})
        for ch in channels[:5]:
            ch.unary_unary(service.method_path("Heartbeat"))(beat, timeout=10)
        for c in held:           # the callers give up: their slots come back
            c.cancel()
        msg = wire.encode({"trainer_id": 0})

        def one_stream():
            return list(channels[0].stream_stream(service.method_path("Heartbeat", True))(
                iter([msg]), timeout=10))
        _wait(lambda: _code(one_stream)[0] == grpc.StatusCode.OK)
        # per peer: a third stream on one connection is refused, naming the flag
        one = _channel(ep)
        channels.append(one)
        three = [one.stream_stream(path)(half_open(), timeout=60, wait_for_ready=True)
                 for _ in range(3)]
        _wait(lambda: any(c.done() for c in three))     # whichever came last
        (refused,) = [c for c in three if c.done()]
        assert refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "FLAGS_rpc_max_streams_per_peer" in refused.details(), refused.details()
        for c in three:
            c.cancel()
    finally:
        for ch in channels:
            ch.close()


def test_an_idle_stream_is_cancelled_and_its_thread_freed(bare):
    start, half_open = bare
    ep = start(4, (1, 1, 0.3))
    ch = _channel(ep)
    try:
        first = [wire.encode({"trainer_id": 0})[:3]]     # a first chunk, then nothing
        call = ch.stream_stream(service.method_path("SendVariable", True))(
            half_open(first), timeout=60, wait_for_ready=True)
        assert call.code() == grpc.StatusCode.CANCELLED    # by the server's watchdog
        # the one stream slot is free again
        ok = list(ch.stream_stream(service.method_path("Heartbeat", True))(
            iter([wire.encode({"trainer_id": 0})]), timeout=10))
        assert wire.decode(b"".join(ok))[0]["kind"] == "none"
    finally:
        ch.close()


def test_a_trainer_retries_a_stream_the_server_was_too_busy_to_take(monkeypatch, bare):
    monkeypatch.setenv("FLAGS_rpc_stream_threshold", "1024")   # this message streams
    start, half_open = bare
    ep = start(4, (1, 1, 60.0))
    ch = _channel(ep)
    try:
        held = None

        def taken():      # a half-open stream holds the one slot: another one is refused
            nonlocal held
            if held is None or held.done():      # refused: the probe came first
                held = ch.stream_stream(service.method_path("SendVariable", True))(
                    half_open(), timeout=60, wait_for_ready=True)
            code, _ = _code(lambda: list(ch.stream_stream(
                service.method_path("Heartbeat", True))(iter([b"x"]), timeout=5)))
            return code == grpc.StatusCode.RESOURCE_EXHAUSTED and not held.done()
        _wait(taken)
        client = RPCClient(token="")
        big = np.zeros(4096, "float32")
        with pytest.raises(RPCError, match=r"RESOURCE_EXHAUSTED.*FLAGS_rpc_max_streams"):
            client.call(ep, "SendVariable", {"name": "w", "trainer_id": 0}, big,
                        deadline_s=0.5)                          # busy past its deadline
        threading.Timer(0.3, held.cancel).start()                # the slot comes back
        client.call(ep, "SendVariable", {"name": "w", "trainer_id": 0}, big, deadline_s=20)
        assert client.stats.snapshot()["methods"]["SendVariable"]["streamed"] == 1
    finally:
        ch.close()


class _Context:
    def __init__(self):
        self.cancelled = threading.Event()

    def cancel(self):
        self.cancelled.set()


def test_stream_gate_counts_limits_and_reaps():
    gate = StreamGate(3, 2, 0.2)
    a1, a2 = gate.enter("a", _Context()), gate.enter("a", _Context())
    with pytest.raises(Refused, match="FLAGS_rpc_max_streams_per_peer") as e:
        gate.enter("a", _Context())
    assert e.value.code == "RESOURCE_EXHAUSTED"
    b = gate.enter("b", _Context())
    with pytest.raises(Refused, match=r"at most 3, FLAGS_rpc_max_streams\)"):
        gate.enter("c", _Context())
    gate.leave(a1)
    gate.leave(a1)                       # twice: counted once
    assert gate.in_flight() == 2
    c = gate.enter("c", _Context())
    b.watched = False                    # waiting in its method: not idle
    _wait(lambda: a2.context.cancelled.is_set() and c.context.cancelled.is_set(), 10)
    assert a2.timed_out and c.timed_out and not b.timed_out
    for t in (a2, b, c):
        gate.leave(t)
    assert gate.in_flight() == 0
    with pytest.raises(ValueError, match="positive"):
        StreamGate(0, 1, 1.0)


# -- malformed headers ------------------------------------------------------------------------

def _framed(header_bytes, payload=b""):
    return len(header_bytes).to_bytes(4, "little") + header_bytes + payload


HOSTILE_HEADERS = {
    "nested 5000 deep": b'{"name":' + b"[" * 5000 + b"]" * 5000 + b',"kind":"none"}',
    "a nested object": b'{"name":"fc_0.w_0","trainer_id":0,"kind":"none","x":{"y":{}}}',
    "a list of objects": b'{"name":"fc_0.w_0","trainer_id":0,"kind":"none","x":[{}]}',
    "brackets in strings count as text": None,          # a good header: see below
    "oversize": b'{"name":"' + b"n" * (wire.MAX_HEADER_BYTES + 1) + b'","kind":"none"}',
    "not UTF-8": b'{"name":"\xff\xfe","kind":"none","trainer_id":0}',
    "a JSON string": b'"just a string"',
    "a JSON null": b"null",
    "trainer_id a float": b'{"name":"fc_0.w_0","trainer_id":0.5,"kind":"none"}',
    "trainer_id a bool": b'{"name":"fc_0.w_0","trainer_id":true,"kind":"none"}',
    "trainer_id a list": b'{"name":"fc_0.w_0","trainer_id":[0],"kind":"none"}',
    "trainer_id huge": b'{"name":"fc_0.w_0","trainer_id":' + b"9" * 40 + b',"kind":"none"}',
    "trainer_id missing": b'{"name":"fc_0.w_0","kind":"none"}',
    "name a number": b'{"name":5,"trainer_id":0,"kind":"none"}',
    "kind a list": b'{"name":"fc_0.w_0","trainer_id":0,"kind":["none"]}',
    "payload on kind none": None,
}


@pytest.mark.parametrize("stream", [False, True])
def test_every_malformed_header_is_invalid_argument(monkeypatch, stream):
    monkeypatch.setenv("FLUIDITY_RPC_TOKEN", TOKEN)
    ps = InProcessPServer().wait_ready(TOKEN)
    md = ((service.TOKEN_KEY, TOKEN),)
    ch = grpc.insecure_channel(ps.ep)
    try:
        for what, header in HOSTILE_HEADERS.items():
            if header is None:
                continue
            for method in ("SendVariable", "GetVariable", "SendBarrier", "FetchBarrier",
                           "Goodbye", "CheckpointNotify", "Heartbeat", "PrefetchVariable"):
                if what == "name a number" and method in ("SendBarrier", "FetchBarrier",
                                                          "Goodbye", "Heartbeat"):
                    continue              # these take no name
                msg = _framed(header)
                if stream:
                    fn = ch.stream_stream(service.method_path(method, True))
                    call = lambda: list(fn(iter([msg]), timeout=20, metadata=md))  # noqa: E731
                else:
                    fn = ch.unary_unary(service.method_path(method))
                    call = lambda: fn(msg, timeout=20, metadata=md)  # noqa: E731
                code, details = _code(call)
                assert code == grpc.StatusCode.INVALID_ARGUMENT, (what, method, code, details)
                assert "bad request" in details, details
        # brackets inside a string are text, not nesting; a payload on "none" is refused
        code, details = _code(lambda: ch.unary_unary(service.method_path("Heartbeat"))(
            _framed(b'{"trainer_id":0,"kind":"none","note":"[[[[{{{{"}'), timeout=20,
            metadata=md))
        assert code == grpc.StatusCode.OK, details
        code, details = _code(lambda: ch.unary_unary(service.method_path("Heartbeat"))(
            _framed(b'{"trainer_id":0,"kind":"none"}', b"extra"), timeout=20, metadata=md))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and "payload" in details, details
        assert ps.error is None
        h, _ = RPCClient(token=TOKEN).call(ps.ep, "GetStatus", {})
        assert h["version"] == 0
    finally:
        ch.close()
        RPCClient(token=TOKEN).call(ps.ep, "Goodbye", {"trainer_id": 0})
        ps.join()
    assert ps.error is None


# -- fuzz ----------------------------------------------------------------------------------------

# a hostile value for each header field: never one the method would accept
HOSTILE_VALUES = [None, True, -1, 1 << 62, 10 ** 40, 0.5, "", "x" * 3000, "\u202e\u0000",
                  [0], ["fc_0.w_0"], [[[[1]]]], {"a": 1}, "../../etc", "/abs"]
ALLOWED = {grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT,
           grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.RESOURCE_EXHAUSTED}


def _base(received):
    """A well-formed request (header, value) of each method."""
    name, (_vt, dtype, shape) = next(iter(received.items()))
    return {
        "SendVariable": ({"name": name, "trainer_id": 0}, np.ones(shape, dtype)),
        "GetVariable": ({"name": "fc_0.w_0", "trainer_id": 0}, None),
        "SendBarrier": ({"trainer_id": 0}, None),
        "FetchBarrier": ({"trainer_id": 0}, None),
        "Goodbye": ({"trainer_id": 0}, None),
        "CheckpointNotify": ({"dir": "fuzz", "trainer_id": 0}, None),
        "GetStatus": ({"trainer_id": 0}, None),
        "Heartbeat": ({"trainer_id": 0}, None),
        "PrefetchVariable": ({"name": "ids", "out_name": "out", "trainer_id": 0},
                             np.array([[1], [2]], "int64")),
    }


def _mutants(rng, method, header, value):
    """Malformed variants of a good request: random bytes, truncations, flipped bytes, a
    field given a hostile value, an oversize header. None of them is a request the method
    would accept (a byte flip that leaves a valid message would be a real request: only the
    payload of a SendVariable, a value like any other, can stay valid)."""
    good = wire.encode(header, value)
    end = 4 + int.from_bytes(good[:4], "little")          # the length and the header
    out = [bytes(rng.integers(0, 256, rng.integers(0, 64), dtype=np.uint8))
           for _ in range(3)]
    out += [good[:int(k)] for k in rng.integers(0, len(good), 3)]
    for _ in range(3):
        b = bytearray(good)
        for at in rng.choice(end, 2, replace=False):
            b[int(at)] ^= int(rng.integers(1, 256))
        out.append(bytes(b))
    for key in header:
        h = dict(header)
        h[key] = HOSTILE_VALUES[int(rng.integers(len(HOSTILE_VALUES)))]
        out.append(wire.encode(h, value))
    big = dict(header, pad="p" * (wire.MAX_HEADER_BYTES + 10))
    out.append(wire.encode(big, value))
    return out


def test_fuzzed_requests_fail_alone_and_the_job_goes_on(monkeypatch, tmp_path):
    monkeypatch.setenv("FLUIDITY_RPC_TOKEN", TOKEN)
    monkeypatch.setenv("FLAGS_pserver_checkpoint_notify_root", str(tmp_path / "root"))
    ps = InProcessPServer().wait_ready(TOKEN)
    received = ps.received()
    before = {n: ps.value(n) for n in ("fc_0.w_0", "fc_1.b_0")}
    rng = np.random.default_rng(24)
    md = ((service.TOKEN_KEY, TOKEN),)
    ch = grpc.insecure_channel(ps.ep)
    seen = {}
    try:
        for method, (header, value) in _base(received).items():
            for msg in _mutants(rng, method, header, value):
                for stream in (False, True):
                    if stream:
                        fn = ch.stream_stream(service.method_path(method, True))
                        call = lambda: list(fn(iter(service.chunks(msg)), timeout=20,  # noqa
                                               metadata=md))
                    else:
                        fn = ch.unary_unary(service.method_path(method))
                        call = lambda: fn(msg, timeout=20, metadata=md)  # noqa: E731
                    code, details = _code(call)
                    assert code in ALLOWED, (method, msg[:120], code, details)
                    seen[code] = seen.get(code, 0) + 1
        # oversize: a unary message past gRPC's cap, a stream of garbage past it
        code, _ = _code(lambda: ch.unary_unary(service.method_path("SendVariable"))(
            bytes(service.stream_threshold() + (1 << 17)), timeout=20, metadata=md))
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
        garbage = bytes(rng.integers(0, 256, 6 * MiB, dtype=np.uint8))
        code, _ = _code(lambda: list(ch.stream_stream(
            service.method_path("SendVariable", True))(
                iter(service.chunks(garbage)), timeout=20, metadata=md)))
        assert code == grpc.StatusCode.INVALID_ARGUMENT
        assert ps.error is None and ps.thread.is_alive()
        assert seen.get(grpc.StatusCode.INVALID_ARGUMENT, 0) > 100, seen
        for n, v in before.items():            # no round ran, nothing was changed
            np.testing.assert_array_equal(ps.value(n), v)
        # notified checkpoints stayed inside the root
        assert not os.path.exists(tmp_path / "fuzz")
        # and the job goes on: a real step applies exactly the trainer's gradients
        client = RPCClient(token=TOKEN)
        for name, (_vt, dtype, shape) in received.items():
            client.call(ps.ep, "SendVariable", {"name": name, "trainer_id": 0},
                        np.ones(shape, dtype))
        client.call(ps.ep, "SendBarrier", {"trainer_id": 0})
        for n, v in before.items():
            np.testing.assert_array_equal(ps.value(n), v - np.float32(0.1))
    finally:
        ch.close()
        RPCClient(token=TOKEN).call(ps.ep, "Goodbye", {"trainer_id": 0})
        ps.join()
    assert ps.error is None
