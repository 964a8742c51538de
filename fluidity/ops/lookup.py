"""Embedding lookups: lookup_table (ids [N, 1]) and lookup_table_v2 (ids of any shape)."""
import numpy as np

from ..core.dtypes import VarType
from ..core.tensor import LoDTensor, SelectedRows
from ..errors import ExecutionError
from . import sparse_kernels
from .registry import In, OpDef, Out, long, strings


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


def _emit_slots(e, ids, op):
    """C declarations of a fl::Slots over the Ids Bufs (each a LoD tensor of int64 ids) and
    the checks that every slot's LoD fits its ids; returns (slots name, B expression)."""
    if any(b.ctype != "int64_t" for b in ids):
        e.fail("ids are not int64")
    if any(b.lod is None for b in ids):
        e.fail("Ids has no LoD")
    S = len(ids)
    e.code(f"const int64_t* ids_[{S}] = {{{', '.join(str(b) for b in ids)}}};")
    e.code(f"const int64_t* offs_[{S}] = {{{', '.join(b.lod for b in ids)}}};")
    e.code(f"const int64_t n_[{S}] = {{{', '.join(b.numel() for b in ids)}}};")
    e.code(f"const int64_t noffs_[{S}] = {{{', '.join(b.lod_len for b in ids)}}};")
    B = f"({ids[0].lod_len} - 1)"
    e.code(f"const fl::Slots sl{{{S}, {B}, ids_, offs_, n_}};")
    e.code(f'if (fl::check_slots(sl, noffs_, "{op}", err)) return {2 + e.k};')
    return "sl", B


def _emit_check_ids(e, ids, height, op):
    for b in ids:
        e.code(f'if (fl::check_ids({b}, {b.numel()}, {height}, "{op}", err)) return {2 + e.k};')


def _emit_table_grad(e, w, ids, op, rows_code, dense_code, fused_code):
    """W@GRAD of a lookup: fused into its sgd (the update applied row by row, no gradient
    in memory), a SelectedRows (is_sparse), or a dense table gradient."""
    e.require_float(w)
    n = "(" + " + ".join(b.numel() for b in ids) + ")"
    # a sparse gradient's sgd adds row by row (no merge): fused, the same sums in the same
    # order; a dense one sums duplicate ids first, so it is not fused
    update = e.fused_update("W@GRAD") if e.attr("is_sparse") else None
    if update is not None:
        _emit_check_ids(e, ids, w.dims[0], op)
        e.code(fused_code(update[0], f"-{update[1]}[0]"))
    elif e.attr("is_sparse"):
        v = e.output_rows("W@GRAD", n, w.dims[1:], w.dims[0])
        e.code(rows_code(v, v.rows))
    else:
        g = e.output("W@GRAD", w.dims)
        _emit_check_ids(e, ids, w.dims[0], op)
        e.code(dense_code(g))


class LookupTable(OpDef):
    type = "lookup_table"
    version = 1  # Paddle's checkpoint: attribute entry_config
    inputs = (In("W"), In("Ids", no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"is_sparse": False, "is_distributed": False, "padding_idx": long(-1),
             "remote_prefetch": False, "entry_config": "", "is_test": False,
             "table_names": strings()}
    kind = "value"
    doc = "Out = W[Ids]; Ids is [N, 1] int64 (LoD kept: one row per id)."

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
    def compiled_operands(cls, e):
        """W [rows, width], int64 Ids and Out ([*Ids' dims, width]; lookup_table drops Ids'
        trailing 1) for both targets."""
        w, ids = e.input("W"), e.input("Ids")
        e.require_float(w)
        if ids.ctype != "int64_t" or w.ndim != 2:
            e.fail("ids are not int64, or W is not [rows, width]")
        lead = ids.dims[:-1] if cls.type == "lookup_table" and ids.ndim > 1 and \
            ids.dims[-1] == "1" else ids.dims
        out = e.output("Out", lead + w.dims[1:], lod_from=ids)
        return w, ids, out

    @classmethod
    def emit(cls, e):
        w, ids, out = cls.compiled_operands(e)
        d, pad = w.dims[1], e.attr("padding_idx")
        _emit_check_ids(e, [ids], w.dims[0], cls.type)
        e.code(f"for (int64_t k = 0; k < {ids.numel()}; ++k) {{ const int64_t r = {ids}[k]; "
               f"if (r == {pad}LL) std::memset({out} + k * {d}, 0, sizeof(float) * {d}); "
               f"else std::memcpy({out} + k * {d}, {w} + r * {d}, sizeof(float) * {d}); }}")

    @classmethod
    def cuda_emit(cls, e):
        """One device thread per output element; pad ids (and, on the device, ids out of
        the table, which the C++ target reports) give zeros."""
        w, ids, out = cls.compiled_operands(e)
        d, pad, h = w.dims[1], e.attr("padding_idx"), w.dims[0]
        e.code(f"fl::cu::each({e.mul(ids.numel(), d)}, [=] __device__ (int64_t t) {{ "
               f"const int64_t k = t / {d}, c = t % {d}; const int64_t r = {ids}[k]; "
               f"{out}[t] = (r == {pad}LL || r < 0 || r >= {h}) ? 0.0f : {w}[r * {d} + c]; }});")

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

    @classmethod
    def emit(cls, e):
        w, ids, dout = e.input("W"), e.input("Ids"), e.input("Out@GRAD")
        e.require_float(dout)
        if ids.ctype != "int64_t" or w.ndim != 2:
            e.fail("ids are not int64, or W is not [rows, width]")
        n, d, pad = ids.numel(), w.dims[1], e.attr("padding_idx")
        row = f"({ids}[k] == {pad}LL ? 0.0f : {dout}[k * {d} + j])"   # pad rows get zeros
        _emit_table_grad(
            e, w, [ids], cls.type,
            rows_code=lambda v, r: (f"for (int64_t k = 0; k < {n}; ++k) {{ {r}[k] = {ids}[k]; "
                                    f"for (int64_t j = 0; j < {d}; ++j) "
                                    f"{v}[k * {d} + j] = {row}; }}"),
            dense_code=lambda g: (f"std::memset({g}, 0, sizeof(float) * {g.numel()}); "
                                  f"for (int64_t k = 0; k < {n}; ++k) for (int64_t j = 0; "
                                  f"j < {d}; ++j) {g}[{ids}[k] * {d} + j] += {row};"),
            fused_code=lambda p, alpha: (f"const float a = {alpha}; for (int64_t k = 0; "
                                         f"k < {n}; ++k) for (int64_t j = 0; j < {d}; ++j) "
                                         f"{p}[{ids}[k] * {d} + j] += a * {row};"))

    @classmethod
    def cuda_emit(cls, e):
        """A SelectedRows of one row per id (is_sparse), or a dense table gradient summed
        with atomic adds; pad ids give zero rows."""
        w, ids, dout = e.input("W"), e.input("Ids"), e.input("Out@GRAD")
        e.require_float(w, dout)
        if ids.ctype != "int64_t" or w.ndim != 2:
            e.fail("ids are not int64, or W is not [rows, width]")
        n, d, pad, h = ids.numel(), w.dims[1], e.attr("padding_idx"), w.dims[0]
        row = f"({ids}[k] == {pad}LL ? 0.0f : {dout}[t])"
        if e.attr("is_sparse"):
            v = e.output_rows("W@GRAD", n, w.dims[1:], h)
            e.code(f"fl::cu::each({e.mul(n, d)}, [=] __device__ (int64_t t) {{ const int64_t "
                   f"k = t / {d}, c = t % {d}; {v}[t] = {row}; if (c == 0) {v.rows}[k] = "
                   f"{ids}[k]; }});")
            return
        g = e.output("W@GRAD", w.dims)
        e.code(f"fl::cu::fill({g}, {g.numel()}, 0.0f);")
        e.code(f"fl::cu::each({e.mul(n, d)}, [=] __device__ (int64_t t) {{ const int64_t "
               f"k = t / {d}, c = t % {d}; const int64_t r = {ids}[k]; if (r >= 0 && r < {h}) "
               f"atomicAdd({g} + r * {d} + c, {row}); }});")


class LookupTableV2Grad(LookupTableGrad):
    type = "lookup_table_v2_grad"


# --- lookup + sum pooling in one op (what fuse_embedding_seq_pool rewrites pairs into) ----------
def _pooled_lookup_kernel(op, attrs, multi):
    """Forward kernel of fused_embedding_seq_pool (one Ids) and of its many-slot concat form:
    both are sparse_kernels.pool over a Slots layout."""
    pad = attrs["padding_idx"]

    def kernel(w, ids):
        wa = w._array
        slots = sparse_kernels.Slots(ids if multi else [ids], op)
        out = sparse_kernels.pool(wa, slots, pad, op)
        if not multi:
            out = out.reshape((slots.B,) + wa.shape[1:])
        return LoDTensor(out, slots.lod)
    return kernel


def _pooled_lookup_grad_kernel(op, attrs, multi):
    """W@GRAD of both pooled lookups: one row per id holding its sequence's slice of
    Out@GRAD, as a SelectedRows (is_sparse) or summed into a dense table gradient."""
    sparse, pad = attrs["is_sparse"], attrs["padding_idx"]

    def kernel(w, ids, dout):
        wa = w._array
        slots = sparse_kernels.Slots(ids if multi else [ids], op)
        width = int(np.prod(wa.shape[1:], dtype=np.int64))
        value = sparse_kernels.pool_grad(dout._array, slots, pad, width, wa.dtype, op)
        value = value.reshape((len(slots.ids),) + wa.shape[1:])
        if sparse:
            return SelectedRows(slots.ids, wa.shape[0], value)
        out = np.zeros_like(wa)
        sparse_kernels.rows_axpy(out, slots.ids, value, 1.0, op)
        return LoDTensor(out)
    return kernel


def _emit_pooled_lookup(e, op):
    w = e.input("W")
    ids = e.inputs("Ids")
    e.require_float(w)
    if w.ndim != 2 or e.attr("combiner") != "sum":
        e.fail("W is not [rows, width], or combiner is not sum")
    sl, B = _emit_slots(e, ids, op)
    _emit_check_ids(e, ids, w.dims[0], op)
    out = e.output("Out", [B, e.mul(len(ids), w.dims[1])])
    e.code(f"fl::pool({w}, {w.dims[1]}, {sl}, {e.attr('padding_idx')}LL, {out});")


def _emit_pooled_lookup_grad(e, op):
    w, ids, dout = e.input("W"), e.inputs("Ids"), e.input("Out@GRAD")
    e.require_float(dout)
    if w.ndim != 2:
        e.fail("W is not [rows, width]")
    sl, _ = _emit_slots(e, ids, op)
    d, pad = w.dims[1], f"{e.attr('padding_idx')}LL"
    _emit_table_grad(
        e, w, ids, op,
        rows_code=lambda v, r: f"fl::pool_grad({dout}, {d}, {sl}, {pad}, {v}, {r});",
        dense_code=lambda g: (f"std::memset({g}, 0, sizeof(float) * {g.numel()}); "
                              f"fl::pool_grad_sgd({dout}, {d}, {sl}, {pad}, {g}, 1.0f);"),
        fused_code=lambda p, alpha: f"fl::pool_grad_sgd({dout}, {d}, {sl}, {pad}, {p}, {alpha});")


def _cuda_slots(e, ids):
    """CUDA form of the pooled lookups' Ids: [(ids Buf, its LoD offsets)] and the batch B,
    with the host-side check that every slot has B sequences."""
    if any(b.ctype != "int64_t" for b in ids):
        e.fail("ids are not int64")
    if any(b.lod is None for b in ids):
        e.fail("Ids has no LoD")
    for b in ids[1:]:
        e.check(f"{b.lod_len} != {ids[0].lod_len}", f"{e.op.type}: slots have different "
                "numbers of sequences")
    return f"({ids[0].lod_len} - 1)"


def _cuda_pooled_lookup(e):
    """Out[i, s*D:(s+1)*D] = the sum of W's rows for slot s's ids of sequence i: one device
    thread per output element, adding the rows in id order (the CPU's order). Ids out of
    the table are skipped on the device (the C++ target stops with an error)."""
    w, ids = e.input("W"), e.inputs("Ids")
    e.require_float(w)
    if w.ndim != 2 or e.attr("combiner") != "sum":
        e.fail("W is not [rows, width], or combiner is not sum")
    B = _cuda_slots(e, ids)
    D, H, pad = w.dims[1], w.dims[0], e.attr("padding_idx")
    width = e.mul(len(ids), D)
    out = e.output("Out", [B, width])
    for s, b in enumerate(ids):
        e.code(f"fl::cu::each({e.mul(B, D)}, [=] __device__ (int64_t t) {{ const int64_t i = "
               f"t / {D}, c = t % {D}; float acc = 0.0f; for (int64_t j = {b.lod}[i]; "
               f"j < {b.lod}[i + 1]; ++j) {{ const int64_t id = {b}[j]; if (id == {pad}LL || "
               f"id < 0 || id >= {H}) continue; acc += {w}[id * {D} + c]; }} "
               f"{out}[i * {width} + {s * 1} * {D} + c] = acc; }});")


def _cuda_pooled_lookup_grad(e):
    """W@GRAD of the pooled lookups on the device: a SelectedRows of one row per id (slot
    order; each row its sequence's slice of Out@GRAD, found by a binary search of the LoD;
    zeros for pad ids), or with is_sparse off a dense table gradient (atomic adds)."""
    w, ids, dout = e.input("W"), e.inputs("Ids"), e.input("Out@GRAD")
    e.require_float(w, dout)
    if w.ndim != 2:
        e.fail("W is not [rows, width]")
    B = _cuda_slots(e, ids)
    D, H, pad = w.dims[1], w.dims[0], e.attr("padding_idx")
    width = e.mul(len(ids), D)
    if e.attr("is_sparse"):
        n = "(" + " + ".join(b.numel() for b in ids) + ")"
        v = e.output_rows("W@GRAD", n, [D], H)
        rows = v.rows
    else:
        v = e.output("W@GRAD", w.dims)
        rows = None
        e.code(f"fl::cu::fill({v}, {v.numel()}, 0.0f);")
    base = "0"
    for s, b in enumerate(ids):
        find = (f"int64_t lo = 0, hi = {B} - 1; while (lo < hi) {{ const int64_t mid = "
                f"(lo + hi + 1) / 2; if ({b.lod}[mid] <= k) lo = mid; else hi = mid - 1; }} "
                f"const int64_t id = {b}[k]; const float g = id == {pad}LL ? 0.0f : "
                f"{dout}[lo * {width} + {s} * {D} + c];")
        if rows is not None:
            put = (f"{v}[({base} + k) * {D} + c] = g; if (c == 0) {rows}[{base} + k] = id;")
        else:
            put = f"if (id >= 0 && id < {H}) atomicAdd({v} + id * {D} + c, g);"
        e.code(f"fl::cu::each({e.mul(b.numel(), D)}, [=] __device__ (int64_t t) {{ "
               f"const int64_t k = t / {D}, c = t % {D}; {find} {put} }});")
        base = f"({base} + {b.numel()})"


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
        ws = ctx.input_shape("W")
        ctx.set_output("Out", [-1] + ws[1:], ctx.input_dtype("W"), 0)

    @classmethod
    def prepare(cls, attrs, outputs):
        return _pooled_lookup_kernel(cls.type, attrs, multi=False)

    @classmethod
    def emit(cls, e):
        _emit_pooled_lookup(e, cls.type)

    cuda_emit = staticmethod(_cuda_pooled_lookup)

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

    @classmethod
    def emit(cls, e):
        _emit_pooled_lookup_grad(e, cls.type)

    cuda_emit = staticmethod(_cuda_pooled_lookup_grad)


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

    @classmethod
    def emit(cls, e):
        _emit_pooled_lookup(e, cls.type)

    cuda_emit = staticmethod(_cuda_pooled_lookup)

    grad = staticmethod(_lookup_grad)


class FusedEmbeddingSeqPoolConcatGrad(_PooledLookupGrad):
    type = "fused_embedding_seq_pool_concat_grad"
    inputs = (In("W"), In("Ids", duplicable=True), In("Out@GRAD"))
    attrs = FusedEmbeddingSeqPoolConcat.attrs
    doc = "W@GRAD over all slots' ids at once (one SelectedRows when is_sparse)."
    multi = True
