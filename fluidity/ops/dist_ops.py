"""The ops of distributed training (Paddle's operators/distributed_ops): `split_byref`
(a gradient cut into row blocks), `send`, `recv`, `send_barrier`, `fetch_barrier` on the
trainer, and `listen_and_serv` on a parameter server.

The network is not reached from here: each RPC op's step asks its run environment for the
`rpc` client (or the `pserver` runtime) that `fluidity.distributed` registers, so this
module imports no RPC library."""
import numpy as np

from ..core import dtypes
from ..core.dtypes import VarType
from ..core.tensor import LoDTensor, SelectedRows
from ..errors import ExecutionError
from .registry import In, OpDef, Out, blocks, ints, long, longs, strings



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
            # Fluid 1.8 does not ask the sections to add up to the height (its own test
            # cuts height 21 into [5, 5, 5, 5, 3]); each row must fall in X and a section
            rows = np.asarray(x.rows, dtype=np.int64)
            if rows.size and (rows.min() < 0 or rows.max() >= min(x.height, starts[-1])):
                bad = rows[(rows < 0) | (rows >= min(x.height, starts[-1]))][0]
                raise ExecutionError(f"split_selected_rows: row {int(bad)} is outside X's "
                                     f"height {x.height} or height_sections {sections}")
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
    if not (isinstance(value, LoDTensor) and value._lod and value._array is not None):
        return value
    rows = value._array.shape[0] if value._array.ndim else None
    last = value._lod[-1]
    return value if last and last[-1] == rows else LoDTensor(value._array)



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
             "dc_asgd": False, "lr_decay_block_id": -1,
             "prefetch_var_name_to_block_id": strings(), "pserver_id": -1,
             "sparse_grad_to_param": strings(), "checkpint_block_id": -1}
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


# --- the distributed lookup table (Paddle 1.x: split_ids -> prefetch -> merge_ids) ------------
def _ids_array(v, op, slot):
    a = v._array if isinstance(v, LoDTensor) else np.asarray(v)
    if a is None:
        raise ExecutionError(f"{op}: input {slot} holds no data")
    return a.reshape(-1).astype(np.int64, copy=False)


def split_ids(ids, n):
    """The `split_ids` rule: [n] shards of a list of id tensors (unique, sorted ids) or of
    one SelectedRows (its rows, duplicates summed, and values; ids kept)."""
    if len(ids) == 1 and isinstance(ids[0], SelectedRows):
        rows, value = _rows_in_first_order(ids[0])
        if rows.size and rows.min() < 0:
            raise ExecutionError(f"split_ids: negative id {int(rows.min())}")
        shard = rows % n
        return [SelectedRows(rows[shard == k], ids[0].height, value[shard == k])
                for k in range(n)]
    if any(isinstance(v, SelectedRows) for v in ids):
        raise ExecutionError("split_ids: a SelectedRows Ids must be the only input")
    flat = np.unique(np.concatenate([_ids_array(v, "split_ids", "Ids") for v in ids]))
    if flat.size and flat[0] < 0:
        raise ExecutionError(f"split_ids: negative id {int(flat[0])}")
    shard = flat % n
    return [LoDTensor(flat[shard == k].reshape(-1, 1)) for k in range(n)]


def _rows_in_first_order(sr):
    """(rows, values) of SelectedRows `sr` in the order its rows come, as Fluid 1.8's
    split_ids keeps them; a repeated id is summed into its first place, so each touched row
    travels once (Fluid would send each copy with the last copy's value)."""
    rows = np.asarray(sr.rows, dtype=np.int64).reshape(-1)
    value = np.asarray(sr.value)
    uniq, first, where = np.unique(rows, return_index=True, return_inverse=True)
    if uniq.size == rows.size:
        return rows, value
    merged = np.zeros((uniq.size,) + value.shape[1:], value.dtype)
    np.add.at(merged, where.reshape(-1), value)
    order = np.argsort(first, kind="stable")
    return uniq[order], merged[order]


class SplitIds(OpDef):
    type = "split_ids"
    inputs = (In("Ids", duplicable=True),)
    outputs = (Out("Out", duplicable=True),)
    kind = "ctx"
    share_lod = None
    doc = ("Out[k] = the ids of every Ids with id % len(Out) == k: unique and sorted for id "
           "tensors (each row fetched once), the rows with their values (ids kept, in X's "
           "order, a repeated id summed into its first place) for one SelectedRows (a table "
           "gradient).")

    @staticmethod
    def infer_shape(ctx):
        v = ctx.input_vars("Ids")[0]
        for i in range(len(ctx.op.output("Out"))):
            ctx.set_output("Out", [-1] + list(v.shape[1:]), v.dtype, i=i, type=v.type)

    @staticmethod
    def make_step(p):
        ii, oi = p.in_idx("Ids"), p.out_idx("Out")

        def step(frame, env):
            for o, v in zip(oi, split_ids([frame[i].value for i in ii], len(oi))):
                frame[o].value = v
        return step


class MergeIds(OpDef):
    type = "merge_ids"
    inputs = (In("Ids", duplicable=True), In("Rows", duplicable=True),
              In("X", duplicable=True))
    outputs = (Out("Out", duplicable=True),)
    kind = "value"
    share_lod = None
    doc = ("Out[i][j] = the row of X[k] at the position of Ids[i][j] in Rows[k] (the "
           "prefetched rows put back in the order of each Ids; Out keeps Ids' LoD).")

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_vars("X")
        for i, v in enumerate(ctx.input_vars("Ids")):
            lead = list(v.shape)
            if len(lead) > 1 and lead[-1] == 1:
                lead = lead[:-1]
            ctx.set_output("Out", lead + list(xs[0].shape[1:]), xs[0].dtype, v.lod_level, i=i)

    @staticmethod
    def kernel(ids, rows, xs):
        if len(rows) != len(xs):
            raise ExecutionError(f"merge_ids: {len(rows)} Rows but {len(xs)} X")
        keys, vals = [], []
        for k, (r, x) in enumerate(zip(rows, xs)):
            ra = _ids_array(r, "merge_ids", "Rows")
            xa = x._array if isinstance(x, LoDTensor) else np.asarray(x)
            if xa is None or len(xa) != len(ra):
                raise ExecutionError(f"merge_ids: X[{k}] has "
                                     f"{0 if xa is None else len(xa)} rows for {len(ra)} ids")
            keys.append(ra)
            vals.append(xa.reshape(len(ra), -1))
        keys = np.concatenate(keys) if keys else np.zeros(0, np.int64)
        width = next((v.shape[1] for v in vals if v.size), vals[0].shape[1] if vals else 0)
        table = np.concatenate([v.reshape(-1, width) for v in vals]) if vals else \
            np.zeros((0, width))
        order = np.argsort(keys, kind="stable")
        skeys = keys[order]
        out = []
        for i, v in enumerate(ids):
            want = _ids_array(v, "merge_ids", "Ids")
            at = np.searchsorted(skeys, want)
            ok = (at < len(skeys)) & (skeys[np.minimum(at, len(skeys) - 1)] == want) \
                if len(skeys) else np.zeros(len(want), bool)
            if not ok.all():
                raise ExecutionError(f"merge_ids: id {int(want[~ok][0])} of Ids[{i}] was "
                                     f"not prefetched")
            lod = v._lod if isinstance(v, LoDTensor) else []
            out.append(LoDTensor(table[order[at]], lod))
        return out


class Prefetch(OpDef):
    type = "prefetch"
    inputs = (In("X", duplicable=True),)
    outputs = (Out("Out", duplicable=True),)
    attrs = {"epmap": strings(), "table_names": strings(), "trainer_id": 0}
    kind = "ctx"
    infer_shape = None
    share_lod = None
    doc = ("Out[k] = the rows of the ids X[k] fetched from the distributed table's shard "
           "on epmap[k] (its prefetch block: lookup_sparse_table); a shard with no ids is "
           "not asked.")

    @staticmethod
    def make_step(p):
        names, outs = p.op.input("X"), p.op.output("Out")
        xi, oi = p.in_idx("X"), p.out_idx("Out")
        epmap, tid = list(p.attrs["epmap"]), p.attrs["trainer_id"]
        tables = list(p.attrs["table_names"]) or [""] * len(names)
        if not len(epmap) == len(names) == len(outs) == len(tables):
            raise ExecutionError(f"prefetch: {len(names)} inputs, {len(outs)} outputs, "
                                 f"{len(epmap)} endpoints, {len(tables)} table_names")
        out_var = p.find_var(outs[0])
        width = int(out_var.shape[-1]) if out_var is not None and out_var.shape else -1
        dtype = dtypes.to_numpy(out_var.dtype) if out_var is not None else np.float32

        def step(frame, env):
            calls, where = [], []
            for k, (i, o) in enumerate(zip(xi, oi)):
                ids = frame[i].value
                if _ids_array(ids, "prefetch", "X").size:
                    calls.append((epmap[k], names[k], outs[k], tables[k], ids))
                    where.append(o)
                else:
                    frame[o].value = LoDTensor(np.zeros((0, max(width, 0)), dtype))
            for o, rows in zip(where, _rpc(env).prefetch_vars(calls, tid) if calls else []):
                frame[o].value = rows
        return step


class LookupSparseTable(OpDef):
    type = "lookup_sparse_table"
    inputs = (In("W"), In("Ids"))
    outputs = (Out("Out"),)
    attrs = {"padding_idx": long(-1), "auto_grown_table": True, "is_test": False,
             "is_sparse": False, "is_distributed": False, "init_type": "uniform_random",
             "min": -1.0, "max": 1.0, "mean": 0.0, "std": 1.0, "value": 0.0, "seed": 0,
             "table_height": long(-1)}
    kind = "ctx"
    infer_shape = None
    share_lod = None
    # table_height (Fluidity's): the whole table's rows, which ids are checked against; the
    # shard W is declared with ceil(rows / servers) rows, as Fluid declares it (-1: W's rows)
    doc = ("Out = the rows of Ids in the table shard W (a SelectedRows of the ids seen so "
           "far); an unseen id gets a new row from the table's initializer (`init_type` and "
           "its attributes) when auto_grown_table, zeros when is_test.")

    @staticmethod
    def make_step(p):
        (wname,) = p.op.input("W")
        wi, ii, oi = p.in_one("W"), p.in_one("Ids"), p.out_one("Out")
        wv = p.find_var(wname)
        if wv is None or len(wv.shape) != 2:
            raise ExecutionError(f"lookup_sparse_table: table '{wname}' must be declared "
                                 f"[height, width]")
        height, width = int(wv.shape[0]), int(wv.shape[1])
        dtype = dtypes.to_numpy(wv.dtype)
        a = p.attrs
        if a["table_height"] > 0:
            height = int(a["table_height"])
        init = {"type": a["init_type"], "min": a["min"], "max": a["max"], "mean": a["mean"],
                "std": a["std"], "value": a["value"], "seed": a["seed"]}
        grow = a["auto_grown_table"] and not a["is_test"]
        pad = a["padding_idx"]

        def step(frame, env):
            w = frame[wi].value
            if not hasattr(w, "lookup"):       # first use, or a SelectedRows a checkpoint loaded
                w = frame[wi].value = env.service("sparse_table").adopt(
                    w, wname, height, width, init, dtype)
            ids = _ids_array(frame[ii].value, "lookup_sparse_table", "Ids")
            out = w.lookup(ids, grow)
            if pad is not None and pad != -1:
                out[ids == pad] = 0
            frame[oi].value = LoDTensor(out)
        return step


class FakeInit(OpDef):
    type = "fake_init"
    inputs = ()
    outputs = (Out("Out"),)
    attrs = {"shape": longs()}
    kind = "value"
    share_lod = None
    doc = ("Out = a tensor of `shape` that takes no memory (every element the one zero): "
           "a trainer's stand-in for a distributed table, whose gradient op reads its shape "
           "only.")

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", [int(d) for d in ctx.attr("shape")])

    @staticmethod
    def kernel(*, shape):
        return LoDTensor(np.broadcast_to(np.zeros(1, np.float32), tuple(int(d) for d in shape)))



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
