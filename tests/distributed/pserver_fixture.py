"""A real parameter server (dist_mlp's model, one trainer, sync) serving in a thread of the
test process, for tests that talk to it with raw or chosen RPCs."""
import threading

import fluidity as fluid
from fluidity.distributed.launch import free_ports

import dist_mlp


class InProcessPServer:
    def __init__(self, build=dist_mlp.build, trainers=1, sync=True):
        (port,) = free_ports(1)
        self.ep = f"127.0.0.1:{port}"
        self.prog, self.start, self.loss = build(0.1)
        self.t = fluid.DistributeTranspiler()
        self.t.transpile(0, program=self.prog, pservers=self.ep, trainers=trainers,
                         sync_mode=sync, startup_program=self.start)
        self.scope = fluid.Scope()
        self.error = None
        pmain, pstart = self.t.get_pserver_programs(self.ep)
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(pstart, scope=self.scope)

        def serve():
            try:
                exe.run(pmain, scope=self.scope)
            except Exception as e:  # noqa: BLE001 - the test reports it
                self.error = e
        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()

    def value(self, name):
        import numpy as np
        return np.array(self.scope.find_var(name).get_tensor())

    def join(self, timeout=20):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the pserver did not exit"
