"""Embedding lookups: lookup_table (ids [N, 1]) and lookup_table_v2 (ids of any shape)."""
import numpy as np

from ..core.dtypes import VarType
from ..core.tensor import LoDTensor, SelectedRows
from ..errors import ExecutionError
from . import sparse_kernels
from .dist_ops import remote_rows
from .registry import In, OpDef, Out, long, longs, strings


def _lookup(w, ids, padding_idx, name):
    flat = ids.reshape(-1)
    if flat.size and (flat.min() < 0 or flat.max() >= w.shape[0]):
        bad = flat[(flat < 0) | (flat >= w.shape[0])][0]
        raise ExecutionError(f"{name}: id {int(bad)} is out of range for a table of "
                             f"{w.shape[0]} rows")
    out = w[flat]  # fancy indexing copies
    if padding_idx != -1 and padding_idx is not None:
        out[flat == padding_idx] = 0
    return out


def _lookup_rows(table, ids, padding_idx, name):
    """Out rows for `ids` from a SelectedRows table (Paddle's "W is SelectedRows" path: the
    table holds some rows of a tall one; an id is looked up among its row ids, and one it
    lacks is an error)."""
    flat = ids.reshape(-1).astype(np.int64)
    value = np.asarray(table.value)
    rows = np.asarray(table.rows, np.int64)
    pad = padding_idx is not None and padding_idx != -1
    wanted = flat[flat != padding_idx] if pad else flat
    if wanted.size and wanted.min() < 0:
        raise ExecutionError(f"{name}: id {int(wanted[wanted < 0][0])} is negative")
    order = np.argsort(rows, kind="stable")
    pos = np.searchsorted(rows[order], flat)
    pos = np.minimum(pos, max(len(rows) - 1, 0))
    found = (rows[order][pos] == flat) if len(rows) else np.zeros(flat.shape, bool)
    missing = ~found & ((flat != padding_idx) if pad else True)
    if missing.any():
        raise ExecutionError(f"{name}: id {int(flat[missing][0])} is not among the rows of "
                             f"the SelectedRows table W ({len(rows)} rows)")
    out = value[order[pos]] if len(rows) else np.zeros((flat.size,) + value.shape[1:],
                                                       value.dtype)
    if pad:
        out[flat == padding_idx] = 0
    return out


def _lookup_grad(g):
    g.op(g.fwd.type + "_grad", {"W": g.input("W"), "Ids": g.input("Ids"),
                                "Out@GRAD": g.output_grad("Out")},
         {"W@GRAD": g.input_grad("W")}, g.attrs())


class LookupTable(OpDef):
    type = "lookup_table"
    version = 1  # Paddle's checkpoint: attribute entry_config
    inputs = (In("W"), In("Ids", no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"is_sparse": False, "is_distributed": False, "padding_idx": long(-1),
             "remote_prefetch": False, "entry_config": "", "is_test": False,
             "table_names": strings(), "epmap": strings(), "height_sections": longs(),
             "trainer_id": 0}
    kind = "value"
    doc = ("Out = W[Ids]; Ids is [N, 1] int64 (LoD kept: one row per id). With "
           "remote_prefetch and an epmap the rows come from the table split over parameter "
           "servers by height_sections (table_names[k] on epmap[k]).")

    @staticmethod
    def ids_shape(ids_shape):
        """The leading dims of Out: lookup_table drops Ids' trailing 1 ([N, 1] -> [N])."""
        ids_shape = list(ids_shape)
        return ids_shape[:-1] if len(ids_shape) > 1 and ids_shape[-1] == 1 else ids_shape

    @classmethod
    def infer_shape(cls, ctx):
        ws, ids = ctx.input_shape("W"), ctx.input_shape("Ids")
        ctx.set_output("Out", cls.ids_shape(ids) + ws[1:], ctx.input_dtype("W"),
                       ctx.input_lod_level("Ids"))

    @classmethod
    def prepare(cls, attrs, outputs):
        pad, lead = attrs["padding_idx"], cls.ids_shape

        def kernel(w, ids):
            a = ids._array
            if isinstance(w, SelectedRows):
                out = _lookup_rows(w, a, pad, cls.type)
            else:
                out = _lookup(w._array, a, pad, cls.type)
            return LoDTensor(out.reshape(tuple(lead(a.shape)) + out.shape[1:]), ids._lod)
        return kernel

    @classmethod
    def service_step(cls, p):
        """Fluid 1.x's remote prefetch (`remote_prefetch` with an `epmap`): each id's row
        from the parameter server holding its section (`dist_ops.remote_rows`), padding
        ids zero; otherwise None (the local kernel)."""
        attrs = p.attrs
        if not (attrs["remote_prefetch"] and len(attrs["epmap"])):
            return None
        pad, lead, op = attrs["padding_idx"], cls.ids_shape, cls.type
        wi, ii, oi = p.in_one("W"), p.in_one("Ids"), p.out_one("Out")
        w_var = p.find_var(p.op.input("W")[0])
        declared = list(w_var.shape) if w_var is not None else []

        def step(frame, env):
            ids = frame[ii].value
            a = ids._array
            flat = a.reshape(-1).astype(np.int64)
            used = flat != pad if pad is not None and pad != -1 else np.ones(flat.shape, bool)
            got = remote_rows(env, flat[used], attrs["epmap"], attrs["table_names"],
                              attrs["height_sections"], attrs["trainer_id"], op)
            w = frame[wi].value if wi is not None else None
            local = getattr(w, "_array", None)
            dtype = local.dtype if local is not None else np.float32
            width = next(iter(got.values())).shape if got else \
                tuple(local.shape[1:]) if local is not None else tuple(declared[1:])
            out = np.zeros((flat.size,) + tuple(width), dtype)
            if got:
                out[used] = np.stack([got[i] for i in flat[used].tolist()])
            frame[oi].value = LoDTensor(out.reshape(tuple(lead(a.shape)) + out.shape[1:]),
                                        ids._lod)
        return step

    grad = staticmethod(_lookup_grad)


class LookupTableV2(LookupTable):
    type = "lookup_table_v2"
    version = 1  # Paddle's checkpoint: int32 as well as int64 ids
    doc = "Out = W[Ids]; Ids of any shape, Out has Ids' shape + [width]."

    @staticmethod
    def ids_shape(ids_shape):
        return list(ids_shape)


# --- gradient: dense, or SelectedRows of the looked-up rows when is_sparse ---------------------
def _table_grad_shape(ctx):
    t = VarType.SELECTED_ROWS if ctx.attr("is_sparse") else VarType.LOD_TENSOR
    ctx.set_output("W@GRAD", ctx.input_shape("W"), ctx.input_dtype("W"), type=t)


class LookupTableGrad(OpDef):
    type = "lookup_table_grad"
    inputs = (In("W"), In("Ids"), In("Out@GRAD"))
    outputs = (Out("W@GRAD"),)
    attrs = LookupTable.attrs
    kind = "value"
    doc = "W@GRAD: rows Ids of Out@GRAD (a SelectedRows when is_sparse; duplicates kept)."

    infer_shape = staticmethod(_table_grad_shape)

    @classmethod
    def prepare(cls, attrs, outputs):
        sparse, pad = attrs["is_sparse"], attrs["padding_idx"]

        def kernel(w, ids, dout):
            wa = w._array
            flat = ids._array.reshape(-1)
            d = dout._array.reshape(len(flat), -1).reshape((len(flat),) + wa.shape[1:])
            if pad is not None and pad != -1:
                d = np.where((flat == pad).reshape((-1,) + (1,) * (d.ndim - 1)), 0, d)
            if sparse:
                return SelectedRows(flat.astype(np.int64), wa.shape[0], d)
            out = np.zeros_like(wa)
            np.add.at(out, flat, d)
            return LoDTensor(out)
        return kernel


class LookupTableV2Grad(LookupTableGrad):
    type = "lookup_table_v2_grad"


# --- lookup + sum pooling in one op (what fuse_embedding_seq_pool rewrites pairs into) ----------
def _id_columns(ids, op):
    """fused_embedding_seq_pool's Ids as slots: Ids [T, ..., 1] with LoD over its T rows holds
    numel / T ids per row (Fluid's idx_width); column k of every row is slot k, so Out is the
    k slots' pooled rows side by side ([B, idx_width * D]). One id per row is one slot."""
    a = ids._array
    if not ids._lod:
        raise ExecutionError(f"{op}: Ids has no LoD; feed a LoDTensor with one sequence of "
                             f"ids per example")
    rows = ids._lod[-1][-1]
    if a.shape[0] != rows or (rows and a.size % rows):
        raise ExecutionError(f"{op}: the LoD of Ids ends at {rows} but Ids has shape "
                             f"{list(a.shape)}: it must have one row (of numel / rows ids) "
                             f"per LoD position")
    width = a.size // rows if rows else 1
    if width == 1:
        return [ids]
    cols = a.reshape(rows, width)
    return [LoDTensor(np.ascontiguousarray(cols[:, k]), ids._lod) for k in range(width)]


def _pooled_lookup_kernel(op, attrs, multi):
    """Forward kernel of fused_embedding_seq_pool (one Ids, one or more ids a row) and of its
    many-slot concat form: both are sparse_kernels.pool over a Slots layout."""
    pad = attrs["padding_idx"]

    def kernel(w, ids):
        wa = w._array
        slots = sparse_kernels.Slots(ids if multi else _id_columns(ids, op), op)
        out = sparse_kernels.pool(wa, slots, pad, op)
        if not multi and slots.S == 1:
            out = out.reshape((slots.B,) + wa.shape[1:])
        return LoDTensor(out, slots.lod)
    return kernel


def _pooled_lookup_grad_kernel(op, attrs, multi):
    """W@GRAD of both pooled lookups: one row per id holding its sequence's slice of
    Out@GRAD, as a SelectedRows (is_sparse) or summed into a dense table gradient."""
    sparse, pad = attrs["is_sparse"], attrs["padding_idx"]

    def kernel(w, ids, dout):
        wa = w._array
        slots = sparse_kernels.Slots(ids if multi else _id_columns(ids, op), op)
        width = int(np.prod(wa.shape[1:], dtype=np.int64))
        value = sparse_kernels.pool_grad(dout._array, slots, pad, width, wa.dtype, op)
        value = value.reshape((len(slots.ids),) + wa.shape[1:])
        if sparse:
            return SelectedRows(slots.ids, wa.shape[0], value)
        out = np.zeros_like(wa)
        sparse_kernels.rows_axpy(out, slots.ids, value, 1.0, op)
        return LoDTensor(out)
    return kernel


class FusedEmbeddingSeqPool(OpDef):
    type = "fused_embedding_seq_pool"
    inputs = (In("W"), In("Ids", no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"combiner": "sum", "padding_idx": long(-1), "is_sparse": False,
             "is_distributed": False, "grad_inplace": False}
    kind = "value"
    share_lod = None
    doc = ("Out[i] = sum of W's rows for the ids of sequence i (Ids: [N, 1] with LoD): "
           "lookup_table + sequence_pool(SUM) in one op; empty sequences give zeros.")

    @staticmethod
    def infer_shape(ctx):
        if ctx.attr("combiner") != "sum":
            ctx.fail(f"combiner must be 'sum', got {ctx.attr('combiner')!r}")
        ws, ids = ctx.input_shape("W"), ctx.input_shape("Ids")
        if ids and ids[-1] not in (1, -1):
            ctx.fail(f"the last dimension of Ids must be 1, got shape {ids}")
        per_row = 1
        for d in ids[1:-1]:
            per_row = per_row * d if d >= 0 and per_row >= 0 else -1
        width = ws[1] * per_row if len(ws) == 2 and ws[1] >= 0 and per_row >= 0 else -1
        ctx.set_output("Out", [-1, width] if per_row != 1 else [-1] + ws[1:],
                       ctx.input_dtype("W"), 0)

    @classmethod
    def prepare(cls, attrs, outputs):
        return _pooled_lookup_kernel(cls.type, attrs, multi=False)


    grad = staticmethod(_lookup_grad)


class _PooledLookupGrad(OpDef):
    """Base of the two pooled lookups' grad ops: one kernel, `multi` says whether Ids is a
    list of slots."""
    outputs = (Out("W@GRAD"),)
    kind = "value"
    infer_shape = staticmethod(_table_grad_shape)
    multi = False

    @classmethod
    def prepare(cls, attrs, outputs):
        return _pooled_lookup_grad_kernel(cls.type, attrs, multi=cls.multi)


class FusedEmbeddingSeqPoolGrad(_PooledLookupGrad):
    type = "fused_embedding_seq_pool_grad"
    inputs = (In("W"), In("Ids"), In("Out@GRAD"))
    attrs = FusedEmbeddingSeqPool.attrs
    doc = "W@GRAD: each id's row gets its sequence's Out@GRAD (SelectedRows when is_sparse)."


class FusedEmbeddingSeqPoolConcat(OpDef):
    """Fluidity's op (Paddle has none of this name): what fuse_embedding_seq_pool_concat makes
    of the per-slot fused_embedding_seq_pool ops over one table that feed one concat. One
    kernel call and one sparse gradient for all slots instead of S of each plus a `sum`."""
    type = "fused_embedding_seq_pool_concat"
    inputs = (In("W"), In("Ids", duplicable=True, no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"combiner": "sum", "padding_idx": long(-1), "is_sparse": False,
             "is_distributed": False}
    kind = "value"
    share_lod = None
    doc = ("Out = concat([fused_embedding_seq_pool(W, ids) for ids in Ids], axis=1): "
           "[B, len(Ids) * D], slot k's pooled rows in columns [k*D, (k+1)*D).")

    @staticmethod
    def infer_shape(ctx):
        if ctx.attr("combiner") != "sum":
            ctx.fail(f"combiner must be 'sum', got {ctx.attr('combiner')!r}")
        ws = ctx.input_shape("W")
        if len(ws) != 2:
            ctx.fail(f"W must be a [rows, width] table, got shape {ws}")
        n = len(ctx.input_shapes("Ids"))
        width = ws[1] * n if ws[1] >= 0 else -1
        ctx.set_output("Out", [-1, width], ctx.input_dtype("W"), 0)

    @classmethod
    def prepare(cls, attrs, outputs):
        return _pooled_lookup_kernel(cls.type, attrs, multi=True)


    grad = staticmethod(_lookup_grad)


class FusedEmbeddingSeqPoolConcatGrad(_PooledLookupGrad):
    type = "fused_embedding_seq_pool_concat_grad"
    inputs = (In("W"), In("Ids", duplicable=True), In("Out@GRAD"))
    attrs = FusedEmbeddingSeqPoolConcat.attrs
    doc = "W@GRAD over all slots' ids at once (one SelectedRows when is_sparse)."
    multi = True
