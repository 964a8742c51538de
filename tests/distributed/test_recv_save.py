"""recv_save (a sliced variable fetched from its servers and saved whole) and
save_persistables of a distributed program (the chief saves what the servers hold)."""
import threading

import numpy as np
import pytest

import fluidity as fluid
from fluidity.core.dtypes import VarType
from fluidity.distributed import RPCClient
from fluidity.transpiler.details import VarsDistributed, VarStruct

from pserver_fixture import serve_table as _serve


def _load(path, shape, seek=-1):
    prog = fluid.Program()
    out = prog.global_block().create_var(name="out", shape=shape, dtype="float32",
                                         persistable=True)
    attrs = {"file_path": path}
    if seek >= 0:
        attrs.update(seek=seek, shape=shape)
    prog.global_block().append_op(type="load", outputs={"Out": [out]}, attrs=attrs)
    scope = fluid.Scope()
    fluid.Executor().run(prog, scope=scope)
    return np.array(scope.find_var("out").get_tensor())


@pytest.fixture
def servers():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = -np.arange(8, dtype=np.float32).reshape(2, 4) - 1
    (ep0, t0), (ep1, t1) = _serve(a), _serve(b)
    exe = fluid.Executor()
    yield exe, [ep0, ep1], np.concatenate([a, b])
    exe.close()                  # goodbye: the servers stop
    t0.join(10)
    t1.join(10)


def test_recv_save_joins_the_slices(servers, tmp_path):
    exe, eps, whole = servers
    path = str(tmp_path / "sub" / "table")
    prog = fluid.Program()
    prog.global_block().append_op(type="recv_save", attrs={
        "shape": [5, 4], "slice_shapes": ["3,4", "2,4"], "slice_varnames": ["t0", "t1"],
        "remote_varnames": ["table", "table"], "endpoints": eps, "file_path": path})
    exe.run(prog)
    np.testing.assert_array_equal(_load(path, [5, 4]), whole)
    np.testing.assert_array_equal(_load(path, [2, 4], seek=3 * 4), whole[3:])

    bad = fluid.Program()       # a slice whose shape is not what the servers hold
    bad.global_block().append_op(type="recv_save", attrs={
        "shape": [5, 4], "slice_shapes": ["2,4", "3,4"], "slice_varnames": ["t0", "t1"],
        "remote_varnames": ["table", "table"], "endpoints": eps, "file_path": path})
    with pytest.raises(Exception, match="slice_shapes says"):
        exe.run(bad)


def test_recv_save_refuses_inconsistent_attributes(tmp_path):
    prog = fluid.Program()
    prog.global_block().append_op(type="recv_save", attrs={
        "shape": [5, 4], "slice_shapes": ["3,4", "3,4"], "slice_varnames": ["a", "b"],
        "remote_varnames": ["t", "t"], "endpoints": ["127.0.0.1:1", "127.0.0.1:2"],
        "file_path": str(tmp_path / "x")})
    with pytest.raises(Exception, match="do not make up shape"):
        fluid.Executor().run(prog)


def test_save_persistables_of_a_distributed_program(servers, tmp_path):
    exe, eps, whole = servers

    def vs(shape):
        return VarStruct(name="table", shape=shape, dtype="float32",
                         type=VarType.LOD_TENSOR, lod_level=0, persistable=True)

    overview = VarsDistributed()
    # listed out of order: the block ids put them in place
    overview.add_distributed_var(vs([5, 4]), vs([2, 4]), block_id=1, offset=12, is_slice=True,
                                 vtype="Optimizer", endpoint=eps[1])
    overview.add_distributed_var(vs([5, 4]), vs([3, 4]), block_id=0, offset=0, is_slice=True,
                                 vtype="Optimizer", endpoint=eps[0])
    prog = fluid.Program()
    local = prog.global_block().create_var(name="step", shape=[1], dtype="float32",
                                           persistable=True)
    prog.global_block().create_var(name="table", shape=[5, 4], dtype="float32",
                                   persistable=True)
    prog._is_distributed, prog._is_chief = True, True
    prog._parameters_on_pservers = overview
    fluid.global_scope().var(local.name).get_tensor().set(np.array([7.0], np.float32),
                                                          fluid.CPUPlace())
    fluid.io.save_persistables(exe, str(tmp_path), prog)
    np.testing.assert_array_equal(_load(str(tmp_path / "table"), [5, 4]), whole)
    np.testing.assert_array_equal(_load(str(tmp_path / "step"), [1]), [7.0])

    prog._is_chief = False       # another trainer saves only its own variables
    other = tmp_path / "other"
    fluid.io.save_persistables(exe, str(other), prog)
    assert (other / "step").exists() and not (other / "table").exists()


def test_whole_copies_on_several_servers_save_the_first(servers, tmp_path):
    """An accumulator each server keeps whole (Adam's beta1_pow of a parameter sliced over
    both) is saved once, from its first copy, in its own shape."""
    exe, eps, whole = servers
    var = VarStruct(name="table", shape=[3, 4], dtype="float32", type=VarType.LOD_TENSOR,
                    lod_level=0, persistable=True)
    overview = VarsDistributed()
    for ep in eps:
        overview.add_distributed_var(var, var, is_slice=False, block_id=0, offset=0,
                                     vtype="Optimizer", endpoint=ep)
    prog = fluid.Program()
    prog.global_block().create_var(name="table", shape=[3, 4], dtype="float32",
                                   persistable=True)
    prog._is_distributed, prog._is_chief = True, True
    prog._parameters_on_pservers = overview
    fluid.io.save_persistables(exe, str(tmp_path), prog)
    np.testing.assert_array_equal(_load(str(tmp_path / "table"), [3, 4]), whole[:3])
    RPCClient().call(eps[1], "Goodbye", {"trainer_id": 0})   # the server not asked stops too


def test_recv_save_reads_a_sync_server_without_waiting_for_the_next_step():
    """A trainer that has fetched this step's values (its fetch barrier) and saves them
    (recv_save's GetVariable without barrier) gets them at once; a plain GetVariable would
    wait for the next step's update."""
    value = np.arange(6, dtype=np.float32).reshape(3, 2)
    ep, thread = _serve(value)
    client = RPCClient()
    client.call(ep, "FetchBarrier", {"trainer_id": 0})
    (got,) = client.get_vars([(ep, "table")], 0, no_barrier=True)
    np.testing.assert_array_equal(np.array(got), value)
    client.close()               # the one trainer's goodbye: the server stops
    thread.join(10)
    assert not thread.is_alive()


def test_a_serving_server_writes_its_port_file(tmp_path):
    """As Fluid's listen_and_serv: /tmp/paddle.<pid>.port holds the port once it serves (port
    0 picks a free one), and the file goes when it stops."""
    import os
    import time
    from fluidity.distributed.pserver import port_file_path
    path = port_file_path()
    if os.path.exists(path):
        os.unlink(path)
    prog = fluid.Program()
    blk = prog._create_block()
    prog._rollback()
    prog.global_block().append_op(
        type="listen_and_serv", inputs={"X": []}, outputs={},
        attrs={"optimize_blocks": [blk], "endpoint": "127.0.0.1:0", "Fanin": 1,
               "distributed_mode": 0, "grad_to_block_id": [""]})
    t = threading.Thread(target=lambda: fluid.Executor().run(prog, scope=fluid.Scope()),
                         daemon=True)
    t.start()
    for _ in range(200):
        if os.path.exists(path):
            break
        time.sleep(0.05)
    port = int(open(path).read())
    assert port > 0
    exe = fluid.Executor()          # a client says hello (a fetch barrier) and goodbye
    bar = fluid.Program()
    bar.global_block().append_op(type="fetch_barrier", outputs={"Out": []},
                                 attrs={"endpoints": [f"127.0.0.1:{port}"]})
    exe.run(bar)
    exe.close()
    t.join(10)
    assert not t.is_alive() and not os.path.exists(path)
