"""A real parameter server (dist_mlp's model by default, sync) serving in a thread of the
test process, for tests that talk to it with raw or chosen RPCs."""
import threading

import numpy as np

import fluidity as fluid
from fluidity.core import dtypes
from fluidity.distributed import RPCClient
from fluidity.distributed.launch import free_ports

import dist_mlp


class InProcessPServer:
    """`build(lr)` -> (main, startup, loss); `endpoint` reuses an address (a restart on the
    same recovery directory); the server runs until every trainer said goodbye."""

    def __init__(self, build=dist_mlp.build, trainers=1, sync=True, endpoint=None):
        if endpoint is None:
            (port,) = free_ports(1)
            endpoint = f"127.0.0.1:{port}"
        self.ep = endpoint
        self.trainers = trainers
        self.prog, self.start, self.loss = build(0.1)
        self.t = fluid.DistributeTranspiler()
        self.t.transpile(0, program=self.prog, pservers=self.ep, trainers=trainers,
                         sync_mode=sync, startup_program=self.start)
        self.scope = fluid.Scope()
        self.error = None
        self.pmain, pstart = self.t.get_pserver_programs(self.ep)
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(pstart, scope=self.scope)

        def serve():
            try:
                exe.run(self.pmain, scope=self.scope)
            except Exception as e:  # noqa: BLE001 - the test reports it
                self.error = e
        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()

    def value(self, name):
        return np.array(self.scope.find_var(name).get_tensor())

    def received(self):
        """{name: (var type, numpy dtype, shape)} of the variables the server receives (its
        listen_and_serv's X), as its program declares them."""
        block = self.pmain.global_block()
        (op,) = [o for o in block.ops if o.type == "listen_and_serv"]
        out = {}
        for name in op.input("X"):
            v = block.var(name)
            out[name] = (v.type, np.dtype(dtypes.to_numpy(v.dtype)), tuple(v.shape))
        return out

    def wait_ready(self, token=None):
        """Return once the server answers (a first raw call could find it still starting)."""
        RPCClient(token=token).call(self.ep, "GetStatus", {})
        return self

    def goodbye_all(self, token=None):
        client = RPCClient(token=token)
        for tid in range(self.trainers):
            client.call(self.ep, "Goodbye", {"trainer_id": tid})

    def join(self, timeout=20):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the pserver did not exit"


def serve_table(value, name="table"):
    """A bare parameter server (no optimize ops, one trainer, sync) holding `name` = value
    in its scope, serving in a thread until that trainer's goodbye; returns (endpoint,
    thread)."""
    (port,) = free_ports(1)
    ep = f"127.0.0.1:{port}"
    scope = fluid.Scope()
    scope.var(name).get_tensor().set(value, fluid.CPUPlace())
    prog = fluid.Program()
    blk = prog._create_block()
    prog._rollback()
    prog.global_block().append_op(
        type="listen_and_serv", inputs={"X": []}, outputs={},
        attrs={"optimize_blocks": [blk], "endpoint": ep, "Fanin": 1,
               "distributed_mode": 0, "grad_to_block_id": []})
    t = threading.Thread(target=lambda: fluid.Executor().run(prog, scope=scope), daemon=True)
    t.start()
    return ep, t
