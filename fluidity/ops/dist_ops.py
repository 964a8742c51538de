"""The ops of distributed training (Paddle's operators/distributed_ops): `split_byref`
(a gradient cut into row blocks), `send`, `recv`, `send_barrier`, `fetch_barrier` on the
trainer, and `listen_and_serv` on a parameter server.

The network is not reached from here: each RPC op's step asks its run environment for the
`rpc` client (or the `pserver` runtime) that `fluidity.distributed` registers, so this
module imports no RPC library."""
import numpy as np

from ..errors import ExecutionError
from .registry import In, OpDef, Out, blocks, ints, strings



class SplitByref(OpDef):
    type = "split_byref"
    inputs = (In("X"),)
    outputs = (Out("Out", duplicable=True),)
    attrs = {"sections": ints(), "num": 0}
    share_lod = None
    doc = "Out = X cut along its first axis into row blocks of sizes `sections` (or `num` equal ones)."

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        n = len(ctx.op.output("Out"))
        sections = list(ctx.attr("sections")) or [xs[0] // n if xs[0] >= 0 else -1] * n
        for i, rows in enumerate(sections):
            ctx.set_output("Out", [rows] + list(xs[1:]), ctx.input_dtype("X"), i=i)

    @classmethod
    def prepare(cls, attrs, outputs):
        sections, num = list(attrs["sections"]), attrs["num"]

        def kernel(x):
            if sections:
                if sum(sections) != x.shape[0]:
                    raise ExecutionError(f"split_byref: sections {sections} do not add up to "
                                         f"the {x.shape[0]} rows of X")
                cuts = np.cumsum(sections)[:-1]
            else:
                if num <= 0 or x.shape[0] % num:
                    raise ExecutionError(f"split_byref: {x.shape[0]} rows do not split into "
                                         f"{num} equal blocks")
                cuts = num
            return tuple(np.split(x, cuts, axis=0))
        return kernel


def _rpc(env):
    return env.service("rpc")



class Send(OpDef):
    type = "send"
    inputs = (In("X", duplicable=True),)
    outputs = (Out("Out", duplicable=True, dispensable=True),)
    attrs = {"epmap": strings(), "send_varnames": strings(), "sync_mode": False,
             "trainer_id": 0}
    kind = "ctx"
    infer_shape = None
    share_lod = None
    doc = ("Send each X to the parameter server of the same position in `epmap` (under its "
           "own name); `sync_mode` waits for every send to be acknowledged.")

    @staticmethod
    def make_step(p):
        names = p.op.input("X")
        idx = p.in_idx("X")
        epmap, tid = list(p.attrs["epmap"]), p.attrs["trainer_id"]
        if len(epmap) != len(names):
            raise ExecutionError(f"send: {len(names)} inputs but {len(epmap)} endpoints in epmap")

        def step(frame, env):
            _rpc(env).send_vars([(ep, n, frame[i].value) for ep, n, i in zip(epmap, names, idx)],
                                tid)
        return step



class Recv(OpDef):
    type = "recv"
    inputs = (In("X", duplicable=True, dispensable=True),)
    outputs = (Out("Out", duplicable=True),)
    attrs = {"epmap": strings(), "varnames": strings(), "sync_mode": True, "trainer_id": 0}
    kind = "ctx"
    infer_shape = None
    share_lod = None
    doc = ("Out[i] = the variable `varnames[i]` (default: Out[i]'s own name) fetched from "
           "the parameter server epmap[i].")

    @staticmethod
    def make_step(p):
        names = p.op.output("Out")
        idx = p.out_idx("Out")
        remote = list(p.attrs["varnames"]) or names
        epmap, tid = list(p.attrs["epmap"]), p.attrs["trainer_id"]
        if not len(epmap) == len(names) == len(remote):
            raise ExecutionError(f"recv: {len(names)} outputs, {len(epmap)} endpoints, "
                                 f"{len(remote)} varnames")

        def step(frame, env):
            values = _rpc(env).get_vars(list(zip(epmap, remote)), tid)
            for i, v in zip(idx, values):
                frame[i].value = v
        return step


class _Barrier(OpDef):
    inputs = (In("X", duplicable=True, dispensable=True),)
    outputs = (Out("Out", duplicable=True, dispensable=True),)
    attrs = {"endpoints": strings(), "sync_mode": True, "trainer_id": 0}
    kind = "ctx"
    infer_shape = None
    share_lod = None
    barrier = None

    @classmethod
    def make_step(cls, p):
        eps, tid, kind = list(p.attrs["endpoints"]), p.attrs["trainer_id"], cls.barrier

        def step(frame, env):
            _rpc(env).barrier(eps, kind, tid)
        return step



class SendBarrier(_Barrier):
    type = "send_barrier"
    barrier = "send"
    doc = "Tell every parameter server this trainer has sent its gradients of the step."



class FetchBarrier(_Barrier):
    type = "fetch_barrier"
    barrier = "fetch"
    doc = "Tell every parameter server this trainer has fetched its parameters of the step."



class ListenAndServ(OpDef):
    type = "listen_and_serv"
    inputs = (In("X", duplicable=True, dispensable=True),)
    outputs = ()
    attrs = {"endpoint": "127.0.0.1:6174", "optimize_blocks": blocks(), "Fanin": 1,
             "sync_mode": True, "grad_to_block_id": strings(), "distributed_mode": 0,
             "dc_asgd": False, "lr_decay_block_id": -1}
    kind = "ctx"
    infer_shape = None
    share_lod = None
    doc = ("Serve this parameter server's variables on `endpoint` until every one of "
           "`Fanin` trainers has said goodbye; run the optimize blocks on the gradients they "
           "send (sync: once all have sent a step's; async: each as it arrives).")

    @staticmethod
    def make_step(p):
        attrs = dict(p.attrs)
        received = list(p.op.input("X"))

        def step(frame, env):
            env.service("pserver").serve(attrs, received, env)
        return step



class CheckpointNotify(OpDef):
    type = "checkpoint_notify"
    inputs = ()
    outputs = ()
    attrs = {"epmap": strings(), "dir": "", "lookup_table": "", "trainer_id": 0}
    kind = "ctx"
    infer_shape = None
    share_lod = None
    doc = ("Ask each parameter server epmap[i] to save a checkpoint of its variables (every "
           "persistable one, sparse table shards included, and its round) atomically into "
           "`dir`/`lookup_table`_i, Paddle's directory for it (`dir`/pserver_i when no "
           "table is named).")

    @staticmethod
    def make_step(p):
        epmap, tid = list(p.attrs["epmap"]), p.attrs["trainer_id"]
        directory, table = p.attrs["dir"], p.attrs["lookup_table"] or "pserver"
        if not directory:
            raise ExecutionError("checkpoint_notify: attribute 'dir' is empty")
        items = [(ep, f"{directory}/{table}_{i}") for i, ep in enumerate(epmap)]

        def step(frame, env):
            _rpc(env).checkpoint_notify(items, tid)
        return step
