"""fluid.layers.io.ListenAndServ / Send / Recv: a hand-built server whose block scales what a
client sends, and the client's round trip (send, send_barrier, recv, fetch_barrier)."""
import threading

import numpy as np
import pytest

import fluidity as fluid
from fluidity.distributed.launch import free_ports
from fluidity.layers.io import ListenAndServ, Recv, Send


def _server(ep):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        serv = ListenAndServ(ep, ["X"], optimizer_mode=False)
        with serv.do():
            out = main.global_block().create_var(name="Y", dtype="float32", shape=[2, 3],
                                                 persistable=True)
            x = fluid.layers.data(name="X", shape=[2, 3], append_batch_size=False)
            fluid.layers.ops._scale(x=x, scale=3.0, out=out)
    return main, serv


def test_server_program_layout():
    main, serv = _server("127.0.0.1:0")
    (op,) = main.global_block().ops
    assert op.type == "listen_and_serv" and op.input("X") == ["X"]
    assert op.attr("Fanin") == 1 and op.attr("distributed_mode") == 0
    assert [o.type for o in main.block(op.attr("optimize_blocks")[0]).ops] == ["scale"]
    assert serv.get_params_and_grads() == (["X"], ["X"])
    with pytest.raises(ValueError, match="host:port"):
        ListenAndServ("nowhere", ["X"])


def test_send_and_recv_through_the_server():
    (port,) = free_ports(1)
    ep = f"127.0.0.1:{port}"
    main, _ = _server(ep)
    errors = []

    def serve():
        try:
            fluid.Executor().run(main, scope=fluid.Scope())
        except Exception as e:      # noqa: BLE001 - reported below
            errors.append(e)
    t = threading.Thread(target=serve, daemon=True)
    t.start()

    client = fluid.Program()
    with fluid.program_guard(client, fluid.Program()):
        x = fluid.layers.data(name="X", shape=[2, 3], append_batch_size=False)
        y = client.global_block().create_var(name="Y", dtype="float32", shape=[2, 3])
        Send(ep, [x])
        got = Recv(ep, [y])
    types = [op.type for op in client.global_block().ops]
    assert types == ["send", "send_barrier", "recv", "fetch_barrier"]
    exe = fluid.Executor()
    value = np.arange(6, dtype=np.float32).reshape(2, 3)
    (out,) = exe.run(client, feed={"X": value}, fetch_list=got)
    exe.close()
    t.join(10)
    assert not errors, errors
    np.testing.assert_array_equal(out, value * 3.0)


def test_bad_arguments():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data(name="X", shape=[2], append_batch_size=False)
        with pytest.raises(TypeError, match="list"):
            Send("127.0.0.1:1", x)
        with pytest.raises(ValueError, match="2 variables but 3 endpoints"):
            Recv("127.0.0.1:1,127.0.0.1:2,127.0.0.1:3", [x, x])
