"""Fluid 1.x's low-level RPC layers (`fluid.layers.io.ListenAndServ`, `Send`, `Recv`): a
hand-written parameter server and its client, without the distribute transpiler.

    with fluid.program_guard(server_main):
        serv = ListenAndServ("127.0.0.1:0", ["X"], optimizer_mode=False)
        with serv.do():                      # the block the server runs per round
            x = layers.data(name="X", shape=[32, 32], append_batch_size=False)
            layers.scale(x, scale=10.0)
    exe.run(server_main)                     # serves until the trainers say goodbye

    with fluid.program_guard(client_main):
        Send("127.0.0.1:%d" % port, [x])     # send + send_barrier: the server's round runs
        out = Recv("127.0.0.1:%d" % port, [y])   # recv + fetch_barrier

The ops are the same `listen_and_serv`, `send`, `recv` and barriers the transpiler writes,
so the server runs the same runtime (distributed/pserver.py). As in Fluid the server's op is
sync (`distributed_mode` 0) with one optimize block, and the port it listens on (an endpoint
port 0 picks a free one) is written to /tmp/paddle.<pid>.port once it serves."""
from ..core.names import OpRole, op_proto_and_checker_maker
from ..framework import Variable, default_main_program

__all__ = ["ListenAndServ", "Send", "Recv"]

_ROLE = op_proto_and_checker_maker.kOpRoleAttrName()


class _ServerBlock:
    """The guard `ListenAndServ.do()` returns: ops built inside go into a new block, and the
    `listen_and_serv` op that runs it is appended to the parent block on a clean exit."""

    def __init__(self, server):
        self.server = server

    def __enter__(self):
        self.program = default_main_program()
        self.block = self.program._create_block()
        return self.block

    def __exit__(self, exc_type, exc_val, exc_tb):
        try:
            if exc_type is None:
                self.server.complete_op(self.program, self.block)
        finally:
            self.program._rollback()
        return False


class ListenAndServ:
    """A server on `endpoint` that receives `inputs` (variable names or Variables) from
    `fan_in` clients and runs the block built under `do()` once all of them have sent a
    round. `optimizer_mode` only changes what `get_params_and_grads` reads from the block."""

    def __init__(self, endpoint, inputs, fan_in=1, optimizer_mode=True):
        if not isinstance(endpoint, str) or ":" not in endpoint:
            raise ValueError(f"ListenAndServ: endpoint must be 'host:port', got {endpoint!r}")
        if int(fan_in) < 1:
            raise ValueError(f"ListenAndServ: fan_in must be at least 1, got {fan_in}")
        self.endpoint = endpoint
        self.inputs = list(inputs)
        self.fan_in = int(fan_in)
        self.optimizer_mode = bool(optimizer_mode)
        self._block = None

    def do(self):
        return _ServerBlock(self)

    def get_params_and_grads(self):
        """(params, grads) of the server block: the Param and Grad of its optimizer ops
        (optimizer_mode), else every input of its ops, paired with itself."""
        if self._block is None:
            raise RuntimeError("ListenAndServ.get_params_and_grads: build the block with "
                               "`with serv.do():` first")
        params, grads = [], []
        for op in self._block.ops:
            if self.optimizer_mode:
                if "Param" in op.input_names and "Grad" in op.input_names:
                    params.extend(op.input("Param"))
                    grads.extend(op.input("Grad"))
            else:
                names = [n for slot in op.input_names for n in op.input(slot)]
                params.extend(names)
                grads.extend(names)
        return params, grads

    def parent_block(self):
        if self._block is None:
            raise RuntimeError("ListenAndServ.parent_block: no server block built yet")
        return self._block.parent

    def complete_op(self, program, block):
        self._block = block
        names = [v.name if isinstance(v, Variable) else str(v) for v in self.inputs]
        block.parent.append_op(
            type="listen_and_serv", inputs={"X": names}, outputs={},
            attrs={"endpoint": self.endpoint, "Fanin": self.fan_in,
                   "optimize_blocks": [block], "distributed_mode": 0, "sync_mode": True,
                   "grad_to_block_id": [""]})


def _endpoints(endpoints, what):
    if not isinstance(endpoints, str) or not endpoints:
        raise ValueError(f"{what}: endpoints must be a comma separated 'host:port' string, "
                         f"got {endpoints!r}")
    return [e.strip() for e in endpoints.split(",")]


def _var_list(xs, what, arg):
    if xs is None:
        return []
    if isinstance(xs, Variable):
        return [xs]
    if not isinstance(xs, list):
        raise TypeError(f"{what}: {arg} must be a list of Variables, got {type(xs).__name__}")
    return xs


def _per_var(epmap, n, what):
    """One endpoint per variable: a single endpoint serves all of them, else one each."""
    if len(epmap) == 1:
        return epmap * n
    if len(epmap) != n:
        raise ValueError(f"{what}: {n} variables but {len(epmap)} endpoints")
    return epmap


def Send(endpoints, send_vars, dummy_output=None, sync=True):  # noqa: N802 -- Fluid's name
    """Send `send_vars` to the servers of `endpoints` (one per variable, in order, or one for
    all); with `sync`, a send_barrier tells the servers the round is complete."""
    if not isinstance(send_vars, list):
        raise TypeError(f"Send: send_vars must be a list, got {type(send_vars).__name__}")
    dummy_output = _var_list(dummy_output, "Send", "dummy_output")
    epmap = _per_var(_endpoints(endpoints, "Send"), len(send_vars), "Send")
    eps = list(dict.fromkeys(epmap))
    block = default_main_program().current_block()
    block.append_op(type="send", inputs={"X": send_vars}, outputs={"Out": dummy_output},
                    attrs={"epmap": epmap, _ROLE: OpRole.RPC})
    if sync:
        block.append_op(type="send_barrier", inputs={"X": dummy_output}, outputs={"Out": []},
                        attrs={"endpoints": eps, _ROLE: OpRole.RPC})


def Recv(endpoints, get_vars, dummy_input=None, sync=True):  # noqa: N802 -- Fluid's name
    """Fetch `get_vars` (by their names) from the servers of `endpoints`; with `sync`, a
    fetch_barrier follows. Returns `get_vars`."""
    if not isinstance(get_vars, list):
        raise TypeError(f"Recv: get_vars must be a list, got {type(get_vars).__name__}")
    dummy_input = _var_list(dummy_input, "Recv", "dummy_input")
    epmap = _per_var(_endpoints(endpoints, "Recv"), len(get_vars), "Recv")
    eps = list(dict.fromkeys(epmap))
    block = default_main_program().current_block()
    block.append_op(type="recv", inputs={"X": dummy_input}, outputs={"Out": get_vars},
                    attrs={"epmap": epmap, _ROLE: OpRole.RPC})
    if sync:
        block.append_op(type="fetch_barrier", outputs={"Out": get_vars},
                        attrs={"endpoints": eps, _ROLE: OpRole.RPC})
    return get_vars
