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
from ..errors import ExecutionError, ShapeError
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
            return tuple(split_selected_rows(x, sections))
        return kernel


def split_selected_rows(x, sections):
    """[SelectedRows] of `x`'s rows in each row section of its height (`sections`, which
    add up to it), renumbered from the section's first row (ids checked by the caller)."""
    starts = np.concatenate(([0], np.cumsum(sections))).astype(np.int64)
    rows = np.asarray(x.rows, dtype=np.int64)
    part = np.searchsorted(starts, rows, side="right") - 1
    out = []
    for i, h in enumerate(sections):
        sel = np.flatnonzero(part == i)
        out.append(SelectedRows(rows[sel] - starts[i], h, np.asarray(x.value)[sel]))
    return out


def split_by_sections(value, sections, what):
    """`value` (a LoDTensor or SelectedRows) cut into row blocks of `sections` rows, as
    Fluid's send op with `sections` cuts a whole gradient at run time."""
    if isinstance(value, SelectedRows):
        if sum(sections) != value.height:
            raise ExecutionError(f"{what}: sections {sections} do not add up to the height "
                                 f"{value.height} of the SelectedRows")
        rows = np.asarray(value.rows, dtype=np.int64)
        if rows.size and (rows.min() < 0 or rows.max() >= value.height):
            raise ExecutionError(f"{what}: a row of the SelectedRows is outside its height "
                                 f"{value.height}")
        return split_selected_rows(value, sections)
    arr = value._array if isinstance(value, LoDTensor) else np.asarray(value)
    if arr is None or arr.ndim == 0 or sum(sections) != arr.shape[0]:
        got = None if arr is None else list(arr.shape)
        raise ExecutionError(f"{what}: sections {sections} do not add up to the rows of a "
                             f"value of shape {got}")
    return [LoDTensor(a) for a in np.split(arr, np.cumsum(sections)[:-1], axis=0)]


def _rpc(env):
    return env.service("rpc")



class Send(OpDef):
    type = "send"
    inputs = (In("X", duplicable=True),)
    outputs = (Out("Out", duplicable=True, dispensable=True),)
    attrs = {"epmap": strings(), "send_varnames": strings(), "sync_mode": False,
             "trainer_id": 0, "sections": ints()}
    kind = "ctx"
    infer_shape = None
    share_lod = None
    doc = ("Send each X to the parameter server of the same position in `epmap` (under its "
           "own name; one X with several endpoints goes to each); `sync_mode` waits for "
           "every send to be acknowledged. With `sections` "
           "(Fluid's run-time split), the one X is cut into row blocks of those sizes and "
           "block i goes to epmap[i] as send_varnames[i].")

    @staticmethod
    def make_step(p):
        names = p.op.input("X")
        idx = p.in_idx("X")
        epmap, tid = list(p.attrs["epmap"]), p.attrs["trainer_id"]
        sections = [int(r) for r in p.attrs["sections"]]
        if sections:
            remote = list(p.attrs["send_varnames"])
            if len(names) != 1 or not len(sections) == len(epmap) == len(remote):
                raise ExecutionError(
                    f"send: a run-time split sends one X ({len(names)} given) in "
                    f"len(sections) = len(epmap) = len(send_varnames) blocks ({len(sections)}, "
                    f"{len(epmap)}, {len(remote)})")
            (i0,) = idx

            def split_step(frame, env):
                parts = split_by_sections(_rows_lod_only(frame[i0].value), sections,
                                          f"send of '{names[0]}'")
                _rpc(env).send_vars(list(zip(epmap, remote, parts)), tid)
            return split_step
        if len(names) == 1 and len(epmap) > 1:     # one value to every server in epmap
            names, idx = names * len(epmap), list(idx) * len(epmap)
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
    attrs = {"epmap": strings(), "varnames": strings(), "sync_mode": True, "trainer_id": 0,
             "recv_varnames": strings()}
    kind = "ctx"
    infer_shape = None
    share_lod = None
    doc = ("Out[i] = the variable `varnames[i]` (default: Out[i]'s own name) fetched from "
           "the parameter server epmap[i]. With `recv_varnames` (Fluid's run-time split) "
           "the one Out is the blocks recv_varnames[i] fetched from epmap[i], joined along "
           "the first axis.")

    @staticmethod
    def make_step(p):
        names = p.op.output("Out")
        idx = p.out_idx("Out")
        blocks = list(p.attrs["recv_varnames"])
        if blocks:
            eps, tid = list(p.attrs["epmap"]), p.attrs["trainer_id"]
            if len(names) != 1 or len(blocks) != len(eps):
                raise ExecutionError(f"recv: a run-time split receives one Out ({len(names)} "
                                     f"given) from len(epmap) = len(recv_varnames) blocks "
                                     f"({len(eps)}, {len(blocks)})")
            (o0,) = idx

            def join_step(frame, env):
                values = _rpc(env).get_vars(list(zip(eps, blocks)), tid)
                arrays = [v._array if isinstance(v, LoDTensor) else np.asarray(v)
                          for v in values]
                frame[o0].value = LoDTensor(np.concatenate(arrays, axis=0))
            return join_step
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



class RecvSave(OpDef):
    type = "recv_save"
    inputs = ()
    outputs = ()
    attrs = {"dtype": int(VarType.FP32), "overwrite": True, "file_path": "", "shape": longs(),
             "slice_varnames": strings(), "remote_varnames": strings(),
             "slice_shapes": strings(), "endpoints": strings(), "trainer_id": 0}
    kind = "ctx"
    infer_shape = None
    share_lod = None
    doc = ("Fetch the slices `remote_varnames[i]` of one variable from the parameter servers "
           "`endpoints[i]` (each of shape `slice_shapes[i]`, \"d0,d1,...\"), join them along "
           "the first axis in that order and save the result, of shape `shape`, to "
           "file_path as one tensor record (what a trainer saves of a sliced parameter).")

    @staticmethod
    def make_step(p):
        a = p.attrs
        path, shape = a["file_path"], [int(d) for d in a["shape"]]
        remote, eps = list(a["remote_varnames"]), list(a["endpoints"])
        slices = []
        for s in a["slice_shapes"]:
            try:
                slices.append([int(d) for d in str(s).split(",")])
            except ValueError:
                raise ExecutionError(f"recv_save: slice_shapes entry {s!r} is not a comma "
                                     f"separated list of integers") from None
        if not path:
            raise ExecutionError("recv_save: attribute file_path is empty")
        if not len(slices) == len(remote) == len(eps) == len(a["slice_varnames"]):
            raise ExecutionError(
                f"recv_save: slice_shapes ({len(slices)}), slice_varnames "
                f"({len(a['slice_varnames'])}), remote_varnames ({len(remote)}) and "
                f"endpoints ({len(eps)}) must have one entry per slice")
        if slices and (any(sl[1:] != shape[1:] for sl in slices) or
                       sum(sl[0] for sl in slices) != shape[0]):
            raise ExecutionError(f"recv_save: slices {slices} do not make up shape {shape} "
                                 f"along the first axis")
        overwrite, tid = a["overwrite"], a["trainer_id"]

        def step(frame, env):
            import os
            from ..core import serialization as ser
            if not overwrite and os.path.exists(path):
                raise ExecutionError(f"recv_save: {path} exists and overwrite is false")
            values = _rpc(env).get_vars(list(zip(eps, remote)), tid)
            parts = []
            for name, ep, want, v in zip(remote, eps, slices, values):
                arr = v._array if isinstance(v, LoDTensor) else np.asarray(v)
                if list(arr.shape) != want:
                    raise ExecutionError(f"recv_save: '{name}' from {ep} has shape "
                                         f"{list(arr.shape)}, slice_shapes says {want}")
                parts.append(arr)
            whole = np.concatenate(parts, axis=0) if parts else np.zeros(shape, np.float32)
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            ser.atomic_write(path, lambda f: ser.write_lod_tensor(f, whole))
        return step


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


def remote_rows(env, ids, epmap, table_names, height_sections, trainer_id, op):
    """{id: row} of the unique `ids` fetched from a table split over parameter servers by
    `height_sections` (Fluid 1.x's remote prefetch, `remote_prefetch=True` with an `epmap`):
    shard k holds the global rows [start_k, start_k + height_sections[k]) as its own rows
    from 0 in the variable table_names[k] on epmap[k], so each server is asked for the
    local ids of its section, and the rows come back under their global ids."""
    epmap, tables = list(epmap), list(table_names)
    sections = [int(h) for h in height_sections]
    if not (len(epmap) == len(tables) == len(sections)) or not epmap:
        raise ExecutionError(f"{op}: remote prefetch needs one endpoint, table name and "
                             f"height section per shard, got epmap {epmap}, table_names "
                             f"{tables}, height_sections {sections}")
    if any(h <= 0 for h in sections):
        raise ExecutionError(f"{op}: height_sections must be positive, got {sections}")
    starts = np.concatenate([[0], np.cumsum(sections)]).astype(np.int64)
    uniq = np.unique(np.asarray(ids, np.int64).reshape(-1))
    if uniq.size and (uniq[0] < 0 or uniq[-1] >= starts[-1]):
        bad = uniq[0] if uniq[0] < 0 else uniq[-1]
        raise ExecutionError(f"{op}: id {int(bad)} is outside the remote table's "
                             f"{int(starts[-1])} rows (height_sections {sections})")
    shard = np.searchsorted(starts, uniq, side="right") - 1
    calls, asked = [], []
    for k, ep in enumerate(epmap):
        mine = uniq[shard == k]
        if mine.size:
            local = LoDTensor((mine - starts[k]).reshape(-1, 1))
            calls.append((ep, "prefetch_send@" + ep, "prefetch_recv@" + ep, tables[k], local))
            asked.append(mine)
    got = _rpc(env).prefetch_vars(calls, trainer_id) if calls else []
    out = {}
    for mine, rows, (ep, *_rest) in zip(asked, got, calls):
        a = rows._array if isinstance(rows, LoDTensor) else None
        if a is None or a.ndim != 2 or len(a) != len(mine):
            raise ExecutionError(f"{op}: pserver {ep} sent "
                                 f"{'nothing' if a is None else list(a.shape)} for "
                                 f"{len(mine)} rows")
        out.update(zip(mine.tolist(), a))
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
    kind = "ctx"
    share_lod = None
    doc = ("Out = a tensor of `shape` that takes no memory (every element the one zero): "
           "a trainer's stand-in for a table the servers hold, whose gradient op reads its "
           "shape only. A value of that shape already there (received from the servers) "
           "is kept, as Fluid's op only allocates.")

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", [int(d) for d in ctx.attr("shape")])

    @staticmethod
    def make_step(p):
        o, name = p.out_one("Out"), p.op.output("Out")[0]
        shape = tuple(int(d) for d in p.attrs["shape"])
        var = p.find_var(name)
        sparse = var is not None and var.type == VarType.SELECTED_ROWS

        def step(frame, env):
            held = frame[o].value
            arr = held._array if isinstance(held, LoDTensor) else None
            if arr is not None and tuple(arr.shape) == shape:
                return      # a value received before (a trainer's startup keeps it)
            value = np.broadcast_to(np.zeros(1, np.float32), shape)
            # a SELECTED_ROWS Out (a distributed table's stand-in) gets a value tensor of
            # `shape` and no rows, as Paddle's fake_init resizes the SelectedRows' value
            frame[o].value = (SelectedRows([], shape[0] if shape else 0, value) if sparse
                              else LoDTensor(value))
        return step


class PullSparse(OpDef):
    type = "pull_sparse"
    inputs = (In("Ids", duplicable=True, no_grad=True), In("W"))
    outputs = (Out("Out", duplicable=True),)
    attrs = {"EmbeddingDim": 11, "TableId": 0, "AccessorClass": "", "CtrLabelName": "",
             "PaddingId": 0, "ScaleSparseGrad": True, "InputNames": strings(),
             "is_distributed": True}
    kind = "ctx"
    share_lod = None
    doc = ("Out[i] = the rows of pslib sparse table TableId for Ids[i] ([..., 1] ids -> "
           "[..., EmbeddingDim]). The table lives in pslib's servers, which Fluidity does not "
           "carry: the program builds, running it is refused.")
    append_dim = False

    @classmethod
    def infer_shape(cls, ctx):
        dim = int(ctx.attr("EmbeddingDim"))
        for i, s in enumerate(ctx.input_shapes("Ids")):
            s = list(s)
            if not cls.append_dim and (not s or s[-1] not in (1, -1)):
                raise ShapeError(f"{cls.type}: Ids[{i}] must end in a dim of 1, got {s}")
            shape = s + [dim] if cls.append_dim else s[:-1] + [dim]
            if i < len(ctx.op.output("Out")):
                ctx.set_output("Out", shape, VarType.FP32, ctx.input_lod_level("Ids", i), i=i)

    @classmethod
    def make_step(cls, p):
        table = p.attrs["TableId"]

        def step(frame, env):
            raise ExecutionError(f"{cls.type}: pslib sparse table {table} lives in pslib's "
                                 f"servers; pslib is not part of Fluidity (use the "
                                 f"distribute transpiler's fleet and a distributed "
                                 f"embedding instead)")
        return step


class PullSparseV2(PullSparse):
    type = "pull_sparse_v2"
    append_dim = True
    doc = ("Out[i] = the rows of pslib sparse table TableId for Ids[i] (Ids' shape + "
           "[EmbeddingDim]); needs pslib, as pull_sparse.")


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
