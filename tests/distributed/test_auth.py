"""Strangers and garbage: a wrong or missing token is refused UNAUTHENTICATED and garbage
bytes INVALID_ARGUMENT with the reason, for every method, unary and streaming, without
touching the server's state; the server goes on serving. Servers bind 127.0.0.1 unless the
endpoint names another address."""
import json
import struct

import grpc
import numpy as np
import pytest

from fluidity.distributed import RPCClient, RPCError, service, wire
from fluidity.distributed.launch import free_ports

from pserver_fixture import InProcessPServer

TOKEN = "s3cret-token"


@pytest.fixture
def pserver(monkeypatch):
    monkeypatch.setenv("FLUIDITY_RPC_TOKEN", TOKEN)
    monkeypatch.setenv("FLAGS_rpc_deadline", "20000")
    ps = InProcessPServer()
    yield ps
    client = RPCClient(token=TOKEN)
    client.call(ps.ep, "Goodbye", {"trainer_id": 0})
    ps.join()
    assert ps.error is None


def _raw(ep, method, message, token=None, stream=False):
    """The grpc status code and details of one raw call."""
    ch = grpc.insecure_channel(ep)
    try:
        md = ((service.TOKEN_KEY, token),) if token is not None else None
        path = service.method_path(method, stream)
        if stream:
            fn = ch.stream_stream(path)
            list(fn(iter([message]), timeout=10, metadata=md, wait_for_ready=True))
        else:
            ch.unary_unary(path)(message, timeout=10, metadata=md, wait_for_ready=True)
        return grpc.StatusCode.OK, ""
    except grpc.RpcError as e:
        return e.code(), e.details()
    finally:
        ch.close()


def _state(ps):
    return {n: ps.value(n) for n in ("fc_0.w_0", "fc_1.b_0")}


def _assert_untouched(ps, before):
    for k, v in _state(ps).items():
        np.testing.assert_array_equal(v, before[k])
    h, _ = RPCClient(token=TOKEN).call(ps.ep, "GetStatus", {})
    assert h["version"] == 0


GOOD_SEND = wire.encode({"name": "fc_0.w_0@GRAD", "trainer_id": 0},
                        np.ones((64, 256), "float32"))


@pytest.mark.parametrize("stream", [False, True])
def test_wrong_or_missing_token_is_refused_untouched(pserver, stream):
    before = _state(pserver)
    for token in (None, "wrong", TOKEN + "x", ""):
        for method in service.METHODS:
            msg = GOOD_SEND if method == "SendVariable" else wire.encode({"trainer_id": 0})
            code, details = _raw(pserver.ep, method, msg, token, stream)
            assert code == grpc.StatusCode.UNAUTHENTICATED, (method, token, code, details)
            assert "token" in details
    code, _ = _raw(pserver.ep, "SendBarrier", wire.encode({"trainer_id": 0}), None, stream)
    _assert_untouched(pserver, before)
    with pytest.raises(RPCError, match=f"GetStatus to pserver {pserver.ep} refused.*TOKEN"):
        RPCClient(token="wrong", deadline_s=5).call(pserver.ep, "GetStatus", {})


def _header(obj):
    h = json.dumps(obj).encode()
    return struct.pack("<I", len(h)) + h


GARBAGE = {
    "random bytes": bytes(range(7, 250, 3)) * 5,
    "empty": b"",
    "header overruns": struct.pack("<I", 1 << 30) + b"{}",
    "header not JSON": struct.pack("<I", 3) + b"\xff\xfe{",
    "header a list": _header([1, 2]),
    "unknown kind": _header({"kind": "pickle"}) + b"\x80\x04K\x01.",
    "bad tensor bytes": _header({"kind": "lod_tensor", "name": "fc_0.w_0@GRAD",
                                 "trainer_id": 0}) + b"\x00" * 3,
    "trainer_id a string": _header({"kind": "none", "name": "fc_0.w_0", "trainer_id": "0"}),
    "trainer_id out of range": _header({"kind": "none", "name": "fc_0.w_0",
                                        "trainer_id": 99}),
    "name missing": _header({"kind": "none", "trainer_id": 0}),
    "version a string": _header({"kind": "none", "trainer_id": 0, "version": "x"}),
}


@pytest.mark.parametrize("stream", [False, True])
def test_garbage_is_refused_with_the_reason_and_the_server_keeps_serving(pserver, stream):
    before = _state(pserver)
    for what, msg in GARBAGE.items():
        for method in ("SendVariable", "GetVariable", "SendBarrier", "FetchBarrier",
                       "CheckpointNotify", "Heartbeat"):
            if what in ("name missing",) and method in ("SendBarrier", "FetchBarrier",
                                                        "Heartbeat"):
                continue          # these methods take no name: a real request
            if what == "version a string" and method not in ("SendVariable", "SendBarrier"):
                continue          # only sends and barriers read a version
            code, details = _raw(pserver.ep, method, msg, TOKEN, stream)
            assert code == grpc.StatusCode.INVALID_ARGUMENT, (what, method, code, details)
            assert "bad request" in details, details
    _assert_untouched(pserver, before)
    # still serving: a trainer's real get works
    client = RPCClient(token=TOKEN)
    (w,) = client.get_vars([(pserver.ep, "fc_0.w_0")], 0)
    np.testing.assert_array_equal(np.array(w), before["fc_0.w_0"])


def _listening(port):
    """Local addresses (hex, as /proc/net/tcp* writes them; an IPv4-mapped IPv6 one as
    its IPv4 address) listening on `port`."""
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            addr, hexport = cols[1].rsplit(":", 1)
            if int(hexport, 16) == port and cols[3] == "0A":
                mapped = "0000000000000000FFFF0000"          # ::ffff:a.b.c.d
                out.append(addr[len(mapped):] if addr.startswith(mapped) else addr)
    return out


class _Nothing:
    def __getattr__(self, name):
        return lambda header, value: None


@pytest.mark.parametrize("endpoint", ["127.0.0.1:{p}", ":{p}", "{p}"])
def test_servers_bind_loopback_unless_told(endpoint):
    (port,) = free_ports(1)
    server = service.start_server(endpoint.format(p=port), _Nothing(), token="")
    try:
        assert _listening(port) == ["0100007F"]        # 127.0.0.1, nothing else
    finally:
        server.stop(None)


def test_an_endpoint_naming_all_interfaces_binds_them():
    (port,) = free_ports(1)
    server = service.start_server(f"0.0.0.0:{port}", _Nothing(), token="")
    try:
        got = _listening(port)
        assert got and set(got) <= {"00000000", "0" * 32}     # 0.0.0.0 or [::]
    finally:
        server.stop(None)


def test_bind_address():
    assert service.bind_address("6174") == "127.0.0.1:6174"
    assert service.bind_address(":6174") == "127.0.0.1:6174"
    assert service.bind_address("10.0.0.5:6174") == "10.0.0.5:6174"
    with pytest.raises(ValueError, match="no port"):
        service.bind_address("127.0.0.1:")
