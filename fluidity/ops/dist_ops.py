"""The ops of distributed training (Paddle's operators/distributed_ops): `split_byref`
(a gradient cut into row blocks), `send`, `recv`, `send_barrier`, `fetch_barrier` on the
trainer, and `listen_and_serv` on a parameter server.

The network is not reached from here: each RPC op's step asks its run environment for the
`rpc` client (or the `pserver` runtime) that `fluidity.distributed` registers, so this
module imports no RPC library."""
import numpy as np

from ..core.dtypes import VarType
from ..core.tensor import LoDTensor, SelectedRows
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


class SplitSelectedRows(OpDef):
    type = "split_selected_rows"
    inputs = (In("X"),)
    outputs = (Out("Out", duplicable=True),)
    attrs = {"height_sections": ints()}
    kind = "value"
    share_lod = None
    doc = ("Out[i] = the rows of SelectedRows X that fall in row section i of its height "
           "(`height_sections`), renumbered from the section's first row, of height "
           "height_sections[i] (a sparse gradient cut like its sliced parameter).")

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        for i, rows in enumerate(ctx.attr("height_sections")):
            ctx.set_output("Out", [rows] + list(xs[1:]), ctx.input_dtype("X"), i=i,
                           type=VarType.SELECTED_ROWS)

    @classmethod
    def prepare(cls, attrs, outputs):
        sections = [int(h) for h in attrs["height_sections"]]
        starts = np.concatenate(([0], np.cumsum(sections))).astype(np.int64)

        def kernel(x):
            if not isinstance(x, SelectedRows):
                raise ExecutionError(f"split_selected_rows: X is {type(x).__name__}, not "
                                     f"SelectedRows")
            if int(starts[-1]) != x.height:
                raise ExecutionError(f"split_selected_rows: height_sections {sections} do "
                                     f"not add up to X's height {x.height}")
            rows = np.asarray(x.rows, dtype=np.int64)
            if rows.size and (rows.min() < 0 or rows.max() >= x.height):
                bad = rows[(rows < 0) | (rows >= x.height)][0]
                raise ExecutionError(f"split_selected_rows: row {int(bad)} is outside X's "
                                     f"height {x.height}")
            part = np.searchsorted(starts, rows, side="right") - 1
            out = []
            for i, h in enumerate(sections):
                sel = np.flatnonzero(part == i)
                out.append(SelectedRows(rows[sel] - starts[i], h, x.value[sel]))
            return tuple(out)
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
            _rpc(env).send_vars([(ep, n, _rows_lod_only(frame[i].value))
                                 for ep, n, i in zip(epmap, names, idx)], tid)
        return step


def _rows_lod_only(value):
    """`value` without a LoD that does not describe its rows: the executor gives every
    output of an op the LoD of its `share_lod` input, so a bias gradient (one row) can carry
    the batch's LoD, which Paddle's tensor record (and so the wire) refuses."""
    if isinstance(value, LoDTensor) and value._lod and value._array is not None:
        last = value._lod[-1]
        if not last or last[-1] != value._array.shape[0] if value._array.ndim else True:
            return LoDTensor(value._array)
    return value



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
