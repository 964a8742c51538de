"""C++ emitters of beam search: beam_search, beam_search_decode and gather_tree
(runtime/beam.h, ops/beam.py's twins).

beam_search's outputs carry a LoD it computes (sources -> prefixes -> selected rows): two
int64 arena buffers of offsets (`Emit.lod_output`), level 0 the sources as absolute row
offsets of its input (as many as the grouping level of scores' LoD has), level 1 one entry
per input row (its rows + 1). How many rows it selects is known only when it runs: a first
pass over the candidates counts them (`beam_search_rows`, the op's run-time dim), the op's
code then selects into outputs reserved at the bound - each source keeps at most beam_size
rows, so at most (sources + 1) * beam_size: the count of its grouping level's offsets times
beam_size, a bound that does not grow with its input's rows (a decoder loop's arrays reach
a fixed point: Segmenter.entry_bound).

beam_search_decode's sentences are as many as the steps the loop ran make them: no bound
known on entry covers them, so its outputs are HeldBufs (made at their own size in memory
the segment function owns, handed back whole).
"""
from ...cir import ArrayBuf, Buf, mul
from .. import register

ID_TYPES = ("int64_t", "int32_t")
SCORE_TYPES = ("float", "double")


def _ptr(p, in_segment):
    """The C name of LoD offsets `p` (a segment input's name, or an arena Buf)."""
    if not isinstance(p, Buf):
        return str(p)
    return f"{p.name}_" if in_segment else p.name


@register("beam_search", "cpu")
def beam_search(e):
    pre_ids, pre_scores = e.input("pre_ids"), e.input("pre_scores")
    ids, scores = e.input("ids"), e.input("scores")
    level, beam = int(e.attr("level")), int(e.attr("beam_size"))
    end_id, acc = int(e.attr("end_id")), bool(e.attr("is_accumulated"))
    if pre_ids.ctype not in ID_TYPES or (ids is not None and ids.ctype not in ID_TYPES):
        e.fail("pre_ids and ids must be integers")
    if scores.ctype not in SCORE_TYPES or pre_scores.ctype != scores.ctype:
        e.fail(f"scores ({scores.ctype}) and pre_scores ({pre_scores.ctype}) must be one "
               "float type")
    n_levels = len(scores.levels)
    if not 1 <= n_levels <= 2 or not 0 <= level < n_levels:
        e.fail(f"scores carries {n_levels} LoD levels; compiled beam_search groups by level "
               f"{level} of one or two")
    if beam < 0:
        e.fail(f"beam_size is {beam}")
    if scores.ndim not in (1, 2):
        e.fail(f"scores is {scores.ndim}-D, not [prefixes, candidates]")
    n = scores.dims[0]
    width = scores.dims[1] if scores.ndim == 2 else 1
    for buf, what in ((pre_ids, "pre_ids"), (pre_scores, "pre_scores")):
        e.check(f"{buf.numel()} != {n}", f"beam_search: {what} needs one row per prefix")
    if ids is not None:
        e.check(f"{ids.numel()} != {scores.numel()}",
                "beam_search: ids and scores must have the same shape")
    (lod0, n0), (lod1, n1) = scores.levels[0], scores.levels[-1]
    n_high = scores.levels[level][1] if n_levels == 1 else (n0 if level == 0 else n1)
    high = e.lod_output("sources", n_high)
    ids_seg = f"{ids.name}_" if ids is not None else "(const int64_t*)nullptr"
    ids_op = f"{ids}" if ids is not None else "(const int64_t*)nullptr"
    # at most beam_size rows a source: a bound that does not grow with the rows it reads
    # (a decoder loop's arrays reach a fixed point, Segmenter.entry_bound)
    bound = mul(e.bound_of(n_high), beam)
    rows = e.runtime_dim(bound, lambda v: (
        f"fl::beam_search_rows({pre_ids.name}_, {pre_scores.name}_, {ids_seg}, "
        f"{scores.name}_, {n}, {width}, {_ptr(lod0, True)}, {n0}, {_ptr(lod1, True)}, {n1}, "
        f"{n_levels}, {level}, {high.name}_, {beam}, {end_id}, {str(acc).lower()}, &{v}, "
        f"err, {e.k})"))
    low = e.lod_output("prefixes", n + 1)
    sel_ids = e.output("selected_ids", [rows, 1], "int64_t", lod_from=False)
    sel_scores = e.output("selected_scores", [rows, 1], scores.ctype, lod_from=False)
    for out in (sel_ids, sel_scores):
        out.levels, out.lod_src = [(high, n_high), (low, n + 1)], None
    parent = e.output("parent_idx", [rows], "int32_t", lod_from=False) \
        if e.has_output("parent_idx") else e.scratch([rows], "int32_t")
    e.code("int64_t got = 0;")
    e.code(f"return fl::beam_search({pre_ids}, {pre_scores}, {ids_op}, {scores}, {n}, "
           f"{width}, {high}, {n_high}, {beam}, {end_id}, {str(acc).lower()}, {sel_ids}, "
           f"{sel_scores}, {parent}, {low}, &got, err, {e.k});")


@register("beam_search_decode", "cpu")
def beam_search_decode(e):
    """The sentences walked back over the Ids and Scores arrays the segment wrote (entries
    with beam_search's 2-level LoD). Their number and length are data (as many steps as the
    loop ran), so the outputs are HeldBufs: made at their own size, handed back whole."""
    ids, scores = e.input("Ids"), e.input("Scores")
    for a, slot in ((ids, "Ids"), (scores, "Scores")):
        if not isinstance(a, ArrayBuf) or a.elem is None:
            e.fail(f"{slot} '{a.var}' is not a tensor array the compiled code writes")
        if a.lod_bounds is None or len(a.lod_bounds) != 2:
            e.fail(f"{slot} '{a.var}' holds entries without beam_search's 2-level LoD")
        if not all(d.value is not None and d.value >= 1 for d in a.row_dims):
            # the walk reads value r of an entry for its row r: a row of no values (or of a
            # size known only at run time) would read past the entry
            e.fail(f"{slot} '{a.var}' holds rows of {a.row_dims} values, not one or more")
    if ids.elem not in ID_TYPES or scores.elem not in SCORE_TYPES:
        e.fail(f"Ids hold {ids.elem}, Scores {scores.elem}")
    out_ids = e.held_output("SentenceIds", "int64_t", 1)
    out_scores = e.held_output("SentenceScores", scores.elem, 1)
    e.code(f"return fl::beam_decode_arrays<{ids.elem}, {scores.elem}>({ids}, {scores}, "
           f"{int(e.attr('end_id'))}, {out_ids}, {out_scores}, err, {e.k});")


@register("gather_tree", "cpu")
def gather_tree(e):
    """Out = the full paths of fixed-width beam search, followed back from each beam of the
    last step through Parents (fl::gather_tree; Parents out of [0, beam) stops the run
    with the kernel's message)."""
    ids, parents = e.input("Ids"), e.input("Parents")
    if ids.ctype not in ID_TYPES or parents.ctype not in ID_TYPES:
        e.fail(f"Ids is {ids.ctype} and Parents {parents.ctype}: integers only")
    if ids.ndim != 3:
        e.fail(f"Ids{ids.dims} is not [max_time, batch, beam]")
    e.same_dims(ids, parents)
    steps, batch, beam = ids.dims
    out = e.output("Out", ids.dims, ids.ctype, lod_from=False)
    e.code(f"if (int rc = fl::gather_tree({ids}, {parents}, {out}, {steps}, {batch}, {beam}, "
           f"err, {e.k})) return rc;")
