"""A bad request fails that request, never the job: a gradient of the wrong shape, dtype or
kind (dense or SelectedRows) is refused INVALID_ARGUMENT naming the variable, what the
server declares and what came, before it is stored, logged or applied; the round then runs
on the good gradients, its log holds only them, and a restart replays it exactly. A round
whose gradients never came is not run. CheckpointNotify writes only inside the server's
checkpoint root."""
import json
import os

import grpc
import numpy as np
import pytest

import fluidity as fluid
from fluidity.core.dtypes import VarType
from fluidity.core.tensor import LoDTensor, SelectedRows
from fluidity.distributed import RPCClient, checkpoint, pserver, service, wire

import sparse_steps
from pserver_fixture import InProcessPServer

TOKEN = "s3cret-token"
LR = np.float32(0.1)


def _raw(ep, method, header, value=None, stream=False):
    """(status code, details) of one call made with the token."""
    return _raw_bytes(ep, method, wire.encode(header, value), stream)


@pytest.fixture
def env(monkeypatch, tmp_path):
    monkeypatch.setenv("FLUIDITY_RPC_TOKEN", TOKEN)
    monkeypatch.setenv("FLAGS_rpc_deadline", "20000")
    monkeypatch.setenv("FLAGS_pserver_checkpoint_dir", str(tmp_path / "recovery"))
    monkeypatch.setenv("FLAGS_pserver_checkpoint_minutes", "0")
    monkeypatch.setenv("FLAGS_pserver_checkpoint_notify_root", str(tmp_path / "root"))
    return tmp_path


def _trainer_of(name):
    return int(name.split(".trainer_")[1].split(".")[0])


def _param_of(grad):
    """The parameter (block) a received gradient updates: "w@GRAD.block1.trainer_0" ->
    "w.block1"."""
    head, tail = grad.split("@GRAD")
    return head + tail.rsplit(".trainer_", 1)[0]


def _good(shape, dtype, tid):
    """A gradient whose average over trainers and SGD step are exact in float32."""
    return np.full(shape, 1 + 2 * tid, dtype)          # trainers 0, 1: mean 2


def _wrong_dense(shape, dtype):
    """(what, value) of dense gradients that do not fit [shape] of dtype."""
    return [("transposed", np.zeros(shape[::-1] if len(shape) > 1 else (shape[0] + 1,),
                                    dtype)),
            ("one row short", np.zeros((shape[0] - 1,) + shape[1:], dtype)),
            ("an extra axis", np.zeros(shape + (1,), dtype)),
            ("float64", np.zeros(shape, np.float64)),
            ("int64", np.zeros(shape, np.int64)),
            ("no value", None),
            ("a SelectedRows", SelectedRows([0], shape[0], np.zeros((1,) + shape[1:], dtype)))]


def test_wrong_gradients_are_refused_and_the_round_the_log_and_a_restart_stay_good(env):
    ps = InProcessPServer(trainers=2)
    received = ps.received()
    before = {_param_of(n): ps.value(_param_of(n)) for n in received}
    for name, (_vt, dtype, shape) in received.items():
        tid = _trainer_of(name)
        for what, bad in _wrong_dense(shape, dtype):
            for stream in (False, True):
                code, details = _raw(ps.ep, "SendVariable",
                                     {"name": name, "trainer_id": tid}, bad, stream)
                assert code == grpc.StatusCode.INVALID_ARGUMENT, (name, what, code, details)
                assert f"'{name}'" in details and f"float32 {list(shape)}" in details, details
                got = "nothing" if bad is None else (
                    "SelectedRows" if isinstance(bad, SelectedRows) else
                    f"LoDTensor {bad.dtype} {list(bad.shape)}")
                assert got in details, (what, details)
    # nothing was stored: a round now would have no inputs, so its last barrier is refused
    assert _raw(ps.ep, "SendBarrier", {"trainer_id": 0})[0] == grpc.StatusCode.OK
    code, details = _raw(ps.ep, "SendBarrier", {"trainer_id": 1})
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "no value was sent for" in details
    assert ps.error is None
    # the trainers send their real gradients: round 1 runs on them alone
    client = RPCClient(token=TOKEN)
    for name, (_vt, dtype, shape) in received.items():
        client.call(ps.ep, "SendVariable", {"name": name, "trainer_id": _trainer_of(name)},
                    _good(shape, dtype, _trainer_of(name)))
    for tid in (0, 1):
        client.call(ps.ep, "SendBarrier", {"trainer_id": tid})
    h, _ = client.call(ps.ep, "GetStatus", {"trainer_id": 0})
    assert h["version"] == 1
    after = {p: ps.value(p) for p in before}
    for p, value in before.items():
        # sgd: p - lr * (g0 + g1) / 2 = p - lr * 2: every step exact in float32 but the last
        np.testing.assert_array_equal(after[p], value - LR * np.float32(2))
    log = checkpoint.RoundLog(os.path.join(pserver.recovery_dir(
        str(env / "recovery"), ps.ep), checkpoint.ROUND_LOG)).rounds()
    assert [r for r, _ in log] == [1]
    for name, value in log[0][1].items():
        np.testing.assert_array_equal(np.array(value), _good(received[name][2],
                                                             received[name][1],
                                                             _trainer_of(name)))
    ps.goodbye_all(TOKEN)
    ps.join()
    assert ps.error is None
    # a restart on the same endpoint replays the log: the same parameters, version 1
    again = InProcessPServer(trainers=2, endpoint=ps.ep)
    try:
        h, _ = RPCClient(token=TOKEN).call(again.ep, "GetStatus", {"trainer_id": 0})
        assert h["version"] == 1
        for pname, value in after.items():
            np.testing.assert_array_equal(again.value(pname), value)
    finally:
        again.goodbye_all(TOKEN)
        again.join()
    assert again.error is None


def _is_sparse_model(_lr):
    return sparse_steps.build("is_sparse")


def test_wrong_selected_rows_are_refused_and_the_job_goes_on(env):
    ps = InProcessPServer(build=_is_sparse_model, trainers=1)
    try:
        received = ps.received()
        (name,) = [n for n, (vt, _, _) in received.items() if vt == VarType.SELECTED_ROWS]
        _vt, dtype, (height, width) = received[name]
        rows = np.array([0, 3, 3, height - 1])
        bad = {
            "another height": SelectedRows(rows, height + 1, np.ones((4, width), dtype)),
            "a narrower value": SelectedRows(rows, height, np.ones((4, width - 1), dtype)),
            "a wider value": SelectedRows(rows, height, np.ones((4, width, 2), dtype)),
            "float64 values": SelectedRows(rows, height, np.ones((4, width), np.float64)),
            "a dense tensor": LoDTensor(np.ones((height, width), dtype)),
        }
        for what, value in bad.items():
            code, details = _raw(ps.ep, "SendVariable", {"name": name, "trainer_id": 0}, value)
            assert code == grpc.StatusCode.INVALID_ARGUMENT, (what, code, details)
            assert f"'{name}'" in details and \
                f"SelectedRows float32 [{height}, {width}]" in details, details
        # rows beyond the height never decode
        msg = bytearray(wire.encode({"name": name, "trainer_id": 0},
                                    SelectedRows([1], height, np.ones((1, width), dtype))))
        code, details = _raw_bytes(ps.ep, "SendVariable",
                                   _with_row(msg, height + 5))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and "row ids" in details, details
        # the good ones go through and the round runs
        client = RPCClient(token=TOKEN)
        table = _param_of(name)
        before = ps.value(table)
        for n, (vt, dt, shape) in received.items():
            value = SelectedRows(rows, height, np.ones((4, width), dt)) if n == name else \
                np.ones(shape, dt)
            client.call(ps.ep, "SendVariable", {"name": n, "trainer_id": 0}, value)
        client.call(ps.ep, "SendBarrier", {"trainer_id": 0})
        got = ps.value(table)
        want = before.copy()
        for r in rows:        # duplicate rows add up: row 3 moves twice
            want[r] -= np.float32(sparse_steps.LR) * np.ones(width, dtype)
        np.testing.assert_allclose(got, want, rtol=0, atol=float(np.spacing(
            np.abs(want).max() + 2 * sparse_steps.LR)) * 2)
        assert ps.error is None
    finally:
        ps.goodbye_all(TOKEN)
        ps.join()


def _raw_bytes(ep, method, message, stream=False):
    """(status code, details) of one call of the bytes `message`, made with the token."""
    ch = grpc.insecure_channel(ep)
    md = ((service.TOKEN_KEY, TOKEN),)
    try:
        if stream:
            list(ch.stream_stream(service.method_path(method, True))(
                iter(service.chunks(bytes(message))), timeout=20, metadata=md,
                wait_for_ready=True))
        else:
            ch.unary_unary(service.method_path(method))(bytes(message), timeout=20,
                                                        metadata=md, wait_for_ready=True)
        return grpc.StatusCode.OK, ""
    except grpc.RpcError as e:
        return e.code(), e.details()
    finally:
        ch.close()


def _with_row(message, row):
    """`message` (one SelectedRows of one row) with its row id replaced by `row`."""
    (n,) = np.frombuffer(message[:4], "<u4")
    payload = 4 + int(n)
    # SelectedRows record: u32 version, u64 row count, the rows (i64)...
    at = payload + 4 + 8
    message[at:at + 8] = np.array([row], "<i8").tobytes()
    return message


# -- CheckpointNotify ------------------------------------------------------------------------

def test_checkpoint_notify_is_confined_to_the_servers_root(env):
    root, outside = env / "root", env / "outside"
    outside.mkdir()
    (outside / "precious").write_text("keep")
    root.mkdir()
    (root / "user_stuff").mkdir()
    (root / "user_stuff" / "notes.txt").write_text("mine")
    (root / "a_file").write_text("not a directory")
    (root / "empty").mkdir()
    os.symlink(outside, root / "link")
    ps = InProcessPServer(trainers=1)
    try:
        checkpoint.save(str(root / "other_server"), fluid.Scope(), [], 3, "127.0.0.1:1")
        refused = {
            str(outside / "x"): "absolute",
            "/tmp/x": "absolute",
            "../outside/x": "'..'",
            "a/../../outside/x": "'..'",
            "link": "symbolic link",
            "link/x": "symbolic link",
            "user_stuff": "holds something else",
            "a_file": "not a directory",
            "a_file/x": "not a directory",
            ".hidden": "hidden",
            "saved/.pserver_0.fluidity-new": "hidden",
            "other_server": "pserver 127.0.0.1:1",
            "": "empty",
            ".": "root itself",
            "x\nsecond line": "control characters",
            "d" * 5000: "too long",
        }
        for directory, why in refused.items():
            code, details = _raw(ps.ep, "CheckpointNotify", {"dir": directory,
                                                             "trainer_id": 0})
            assert code == grpc.StatusCode.INVALID_ARGUMENT, (directory, code, details)
            assert why in details and "checkpoint root" in details, (directory, details)
        assert (outside / "precious").read_text() == "keep"
        assert sorted(os.listdir(outside)) == ["precious"]
        assert (root / "user_stuff" / "notes.txt").read_text() == "mine"
        assert sorted(os.listdir(root / "user_stuff")) == ["notes.txt"]
        for ok in ("saved/pserver_0", "./saved//pserver_1", "empty"):
            assert _raw(ps.ep, "CheckpointNotify", {"dir": ok, "trainer_id": 0})[0] == \
                grpc.StatusCode.OK, ok
        # its own checkpoint may be saved again
        assert _raw(ps.ep, "CheckpointNotify", {"dir": "saved/pserver_0",
                                                "trainer_id": 0})[0] == grpc.StatusCode.OK
        scope = fluid.Scope()
        state = checkpoint.load(str(root / "saved" / "pserver_0"), scope)
        assert state["endpoint"] == ps.ep and "fc_0.w_0" in state["variables"]
        np.testing.assert_array_equal(np.array(scope.find_var("fc_0.w_0").get_tensor()),
                                      ps.value("fc_0.w_0"))
        with open(root / "empty" / checkpoint.STATE_FILE) as f:
            assert json.load(f)["endpoint"] == ps.ep
        assert ps.error is None
    finally:
        ps.goodbye_all(TOKEN)
        ps.join()


def test_checkpoint_notify_refuses_the_servers_recovery_directory(env, monkeypatch):
    root = env / "root"
    monkeypatch.setenv("FLAGS_pserver_checkpoint_dir", str(root / "rec"))
    ps = InProcessPServer(trainers=1)
    try:
        rec = os.path.relpath(pserver.recovery_dir(str(root / "rec"), ps.ep), root)
        for directory in (rec, rec + "/snapshot", rec + "/more"):
            code, details = _raw(ps.ep, "CheckpointNotify", {"dir": directory,
                                                             "trainer_id": 0})
            assert code == grpc.StatusCode.INVALID_ARGUMENT, (directory, code, details)
            assert "recovery directory" in details, details
    finally:
        ps.goodbye_all(TOKEN)
        ps.join()


def test_a_round_log_record_without_its_fields_is_a_checkpoint_error(tmp_path):
    path = str(tmp_path / "rounds.log")
    grad = wire.encode({"name": "g"}, np.ones(2, "float32"))
    commit = wire.encode({"commit": True})                   # a commit without its round
    with open(path, "wb") as f:
        for rec in (grad, commit):
            f.write(len(rec).to_bytes(8, "little") + rec)
    with pytest.raises(checkpoint.CheckpointError,
                       match=f"rounds.log: corrupt record at byte {8 + len(grad)}: header "
                             f"field 'round' is missing"):
        checkpoint.RoundLog(path).rounds()
