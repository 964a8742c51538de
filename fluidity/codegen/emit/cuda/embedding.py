"""CUDA emitters of the embedding lookups (lookup_table, its v2, the fused pooled lookups)
and their gradients, dense or SelectedRows (runtime/cuda_ops.h)."""
from ...dim import dim
from .. import register
from ..embedding import lookup_operands


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
    return ids[0].lod_len - 1


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
        e.code(f"fl::cu::pooled_lookup({w}, {b}, {b.lod}, {out}, {B}, {D}, {H}, {pad}LL, "
               f"{width}, {s});")


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
        n = sum((b.numel() for b in ids[1:]), ids[0].numel())
        v = e.output_rows("W@GRAD", n, [D], H)
        rows = v.rows
    else:
        v = e.output("W@GRAD", w.dims)
        rows = "nullptr"
        e.code(f"fl::cu::fill({v}, {v.numel()}, 0.0f);")
    base = dim(0)
    for s, b in enumerate(ids):
        e.code(f"fl::cu::pooled_lookup_grad({b}, {b.lod}, {dout}, {v}, {rows}, {b.numel()}, "
               f"{B}, {D}, {H}, {pad}LL, {width}, {s}, {base});")
        base = base + b.numel()


@register("lookup_table", "cuda")
@register("lookup_table_v2", "cuda")
def lookup_table(e):
    """One device thread per output element; pad ids (and, on the device, ids out of
    the table, which the C++ target reports) give zeros."""
    w, ids, out = lookup_operands(e)
    d, pad, h = w.dims[1], e.attr("padding_idx"), w.dims[0]
    e.code(f"fl::cu::lookup({w}, {ids}, {out}, {ids.numel()}, {d}, {h}, {pad}LL);")


@register("lookup_table_grad", "cuda")
@register("lookup_table_v2_grad", "cuda")
def lookup_table_grad(e):
    """A SelectedRows of one row per id (is_sparse), or a dense table gradient summed
    with atomic adds; pad ids give zero rows."""
    w, ids, dout = e.input("W"), e.input("Ids"), e.input("Out@GRAD")
    e.require_float(w, dout)
    if ids.ctype != "int64_t" or w.ndim != 2:
        e.fail("ids are not int64, or W is not [rows, width]")
    n, d, pad, h = ids.numel(), w.dims[1], e.attr("padding_idx"), w.dims[0]
    if e.attr("is_sparse"):
        v = e.output_rows("W@GRAD", n, w.dims[1:], h)
        e.code(f"fl::cu::lookup_grad_rows({ids}, {dout}, {v}, {v.rows}, {n}, {d}, {pad}LL);")
        return
    g = e.output("W@GRAD", w.dims)
    e.code(f"fl::cu::lookup_grad_dense({ids}, {dout}, {g}, {n}, {d}, {h}, {pad}LL);")


register("fused_embedding_seq_pool", "cuda")(_cuda_pooled_lookup)
register("fused_embedding_seq_pool_concat", "cuda")(_cuda_pooled_lookup)
register("fused_embedding_seq_pool_grad", "cuda")(_cuda_pooled_lookup_grad)
register("fused_embedding_seq_pool_concat_grad", "cuda")(_cuda_pooled_lookup_grad)
