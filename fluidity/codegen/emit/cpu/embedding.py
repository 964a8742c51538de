"""C++ emitters of the embedding lookups (lookup_table, its v2, the fused pooled lookups)
and their gradients, dense or SelectedRows; an sgd update of the table may be fused in."""
from .. import register
from ..embedding import lookup_operands


def _emit_slots(e, ids, op):
    """C declarations of a fl::Slots over the Ids Bufs (each a LoD tensor of int64 ids) and
    the checks that every slot's LoD fits its ids; returns (slots name, B expression)."""
    if any(b.ctype != "int64_t" for b in ids):
        e.fail("ids are not int64")
    if any(b.lod is None for b in ids):
        e.fail("Ids has no LoD")
    S = len(ids)
    e.code(f"const int64_t* ids_[{S}] = {{{', '.join(str(b) for b in ids)}}};")
    e.code(f"const int64_t* offs_[{S}] = {{{', '.join(str(b.lod) for b in ids)}}};")
    e.code(f"const int64_t n_[{S}] = {{{', '.join(str(b.numel()) for b in ids)}}};")
    e.code(f"const int64_t noffs_[{S}] = {{{', '.join(str(b.lod_len) for b in ids)}}};")
    B = ids[0].lod_len - 1
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
    n = sum((b.numel() for b in ids[1:]), ids[0].numel())
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


def _one_id_per_row(e, ids):
    """fused_embedding_seq_pool's Ids may hold several ids per LoD row ([T, k, 1]: Out gets
    k pooled blocks); the C kernels take one a row, so other layouts run interpreted."""
    if len(ids) == 1 and not all(d == 1 for d in ids[0].dims[1:]):
        e.fail("Ids holds more than one id per LoD row")


def _emit_pooled_lookup(e, op):
    w = e.input("W")
    ids = e.inputs("Ids")
    _one_id_per_row(e, ids)
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
    _one_id_per_row(e, ids)
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


@register("lookup_table", "cpu")
@register("lookup_table_v2", "cpu")
def lookup_table(e):
    if e.attr("remote_prefetch") and e.attr("epmap"):
        e.fail("remote_prefetch: the rows come from the parameter servers")
    w, ids, out = lookup_operands(e)
    d, pad = w.dims[1], e.attr("padding_idx")
    _emit_check_ids(e, [ids], w.dims[0], e.opdef.type)
    e.code(f"fl::lookup_rows({w}, {d}, {ids}, {ids.numel()}, {pad}LL, {out});")


@register("lookup_table_grad", "cpu")
@register("lookup_table_v2_grad", "cpu")
def lookup_table_grad(e):
    w, ids, dout = e.input("W"), e.input("Ids"), e.input("Out@GRAD")
    e.require_float(dout)
    if ids.ctype != "int64_t" or w.ndim != 2:
        e.fail("ids are not int64, or W is not [rows, width]")
    n, d, pad = ids.numel(), w.dims[1], e.attr("padding_idx")
    row = f"({ids}[k] == {pad}LL ? 0.0f : {dout}[k * {d} + j])"   # pad rows get zeros
    _emit_table_grad(
        e, w, [ids], e.opdef.type,
        rows_code=lambda v, r: (f"for (int64_t k = 0; k < {n}; ++k) {{ {r}[k] = {ids}[k]; "
                                f"for (int64_t j = 0; j < {d}; ++j) "
                                f"{v}[k * {d} + j] = {row}; }}"),
        dense_code=lambda g: (f"std::memset({g}, 0, sizeof(float) * {g.numel()}); "
                              f"for (int64_t k = 0; k < {n}; ++k) for (int64_t j = 0; "
                              f"j < {d}; ++j) {g}[{ids}[k] * {d} + j] += {row};"),
        fused_code=lambda p, alpha: (f"fl::lookup_grad_sgd({p}, {d}, {ids}, {n}, {pad}LL, "
                                     f"{dout}, {alpha});"))


@register("fused_embedding_seq_pool", "cpu")
def fused_embedding_seq_pool(e):
    _emit_pooled_lookup(e, e.opdef.type)


@register("fused_embedding_seq_pool_concat_grad", "cpu")
@register("fused_embedding_seq_pool_grad", "cpu")
def pooled_lookup_grad(e):
    _emit_pooled_lookup_grad(e, e.opdef.type)


@register("fused_embedding_seq_pool_concat", "cpu")
def fused_embedding_seq_pool_concat(e):
    _emit_pooled_lookup(e, e.opdef.type)
