"""Variables larger than gRPC's 4 MiB message cap travel streamed: a 25 MiB parameter is
fetched, its gradient sent and the updated value fetched back in a real training step."""
import numpy as np

import fluidity as fluid
from fluidity.distributed import RPCClient, service

from pserver_fixture import InProcessPServer

DIN, WIDE, ROWS = 64, 100_000, 8          # fc_0.w_0: 64 x 100000 float32 = 25.6 MB


def build(lr):
    main, start = fluid.Program(), fluid.Program()
    main.random_seed = start.random_seed = 5
    with fluid.program_guard(main, start), fluid.unique_name.guard():
        x = fluid.layers.data("x", [DIN])
        loss = fluid.layers.mean(fluid.layers.fc(x, WIDE))
        fluid.optimizer.SGD(lr).minimize(loss)
    return main, start, loss


def test_a_25_mib_parameter_trains_through_streams(monkeypatch):
    monkeypatch.setenv("FLAGS_rpc_deadline", "60000")
    assert service.stream_threshold() == 4 << 20      # gRPC's default cap, kept for unary
    ps = InProcessPServer(build=build)
    x = np.random.RandomState(0).uniform(-1, 1, (ROWS, DIN)).astype("float32")
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(ps.start, scope=scope)                    # fetches the servers' initial values
    w0 = np.array(scope.find_var("fc_0.w_0").get_tensor())
    assert w0.nbytes > 20 << 20
    np.testing.assert_array_equal(w0, ps.value("fc_0.w_0"))
    exe.run(ps.t.get_trainer_program(), feed={"x": x}, scope=scope)
    w1 = np.array(scope.find_var("fc_0.w_0").get_tensor())
    # d mean(x @ w + b) / dw = x.sum(0)[:, None] / (ROWS * WIDE) in every column
    want = w0 - 0.1 * np.repeat(x.sum(0, keepdims=True).T / (ROWS * WIDE), WIDE, axis=1)
    np.testing.assert_allclose(w1, want, rtol=1e-6, atol=1e-9)
    np.testing.assert_array_equal(w1, ps.value("fc_0.w_0"))
    stats = RPCClient.of(exe).stats.snapshot()
    assert stats["methods"]["SendVariable"]["bytes_sent"] > 20 << 20
    assert stats["methods"]["SendVariable"]["streamed"] >= 1
    assert stats["methods"]["GetVariable"]["streamed"] >= 2
    assert stats["methods"]["GetVariable"]["bytes_received"] > 2 * (20 << 20)
    assert stats["wall_seconds"] > 0 and stats["calls"] >= 6
    exe.close()
    ps.join()
    assert ps.error is None
