"""C++ emitters of linear_chain_crf (and its gradient), crf_decoding and chunk_eval."""
from ....ops.crf import CHUNK_SCHEMES
from .. import register
from ..checks import same_dim, sequences


def _emit_crf_inputs(e):
    """The CRF ops' Emission [rows, D] (LoD, float), Transition [D + 2, D] Bufs, the number
    of sequences, rows and D as C expressions; padded Emission with Length runs
    interpreted."""
    x, w = e.input("Emission"), e.input("Transition")
    if e.op.input("Length"):
        e.fail("padded Emission with Length")
    e.require_float(x, w)
    if x.ndim != 2 or w.ndim != 2:
        e.fail("Emission or Transition is not a matrix")
    n = sequences(e, x, "Emission")
    rows, d = x.dims
    same_dim(e, w.dims[1], d, "Transition has a column per tag")
    same_dim(e, w.dims[0], d + 2, "Transition has tags + 2 rows")
    return x, w, n, rows, d


def _emit_labels(e, slot, rows, what):
    """Input `slot`: int64, one per row."""
    y = e.input(slot)
    if y is None or y.ctype != "int64_t":
        e.fail(f"{slot} is absent or not int64")
    same_dim(e, y.numel(), rows, f"{what} has one {slot} per row")
    return y


def _emit_bad_label(e, y, rows, d):
    """Code that stops the run naming the first label out of [0, D), as the kernel does."""
    e.code(f"{{ const int64_t bad = fl::crf_bad_label({y}, {rows}, {d}); if (bad >= 0) {{ "
           f"std::snprintf(err, 512, "
           f"{e.c_string(f'{e.op.type}: label %lld is out of range for %lld tags')}, "
           f"(long long){y}[bad], (long long)({d})); return {2 + e.k}; }} }}")


def _out_or_scratch(e, slot, dims, ctype="float", lod_from=False):
    if e.has_output(slot):
        return e.output(slot, dims, ctype, lod_from=lod_from)
    return e.scratch(dims, ctype)


@register("linear_chain_crf", "cpu")
def linear_chain_crf(e):
    """fl::linear_chain_crf: every label checked first, then each sequence's forward
    recursion in double; Alpha, EmissionExps, TransitionExps and the nll as the kernel
    writes them."""
    x, w, n, rows, d = _emit_crf_inputs(e)
    y = _emit_labels(e, "Label", rows, "Emission")
    alpha = _out_or_scratch(e, "Alpha", x.dims, lod_from=x)
    em = _out_or_scratch(e, "EmissionExps", x.dims, lod_from=x)
    tr = _out_or_scratch(e, "TransitionExps", w.dims)
    nll = e.output("LogLikelihood", [n, "1"], lod_from=False)
    xd, wd, la = e.scratch(x.dims, "double"), e.scratch(w.dims, "double"), \
        e.scratch(x.dims, "double")
    tmp = e.scratch([d], "double")
    _emit_bad_label(e, y, rows, d)
    e.code(f"fl::linear_chain_crf({x}, {w}, {y}, {x.lod}, {n}, {rows}, {d}, {alpha}, {em}, "
           f"{tr}, {nll}, {xd}, {wd}, {la}, {tmp});")


@register("linear_chain_crf_grad", "cpu")
def linear_chain_crf_grad(e):
    """fl::linear_chain_crf_grad: forward-backward per sequence in double, as the
    kernel's _CRF.grads."""
    x, w, n, rows, d = _emit_crf_inputs(e)
    y = _emit_labels(e, "Label", rows, "Emission")
    g = e.input("LogLikelihood@GRAD")
    e.require_float(g)
    same_dim(e, g.numel(), n, "LogLikelihood@GRAD has one value per sequence")
    dx = e.output("Emission@GRAD", x.dims, lod_from=x) if e.has_output("Emission@GRAD") \
        else None
    dw = e.output("Transition@GRAD", w.dims, lod_from=False) \
        if e.has_output("Transition@GRAD") else None
    if dx is None and dw is None:
        return
    xd, la, lb = (e.scratch(x.dims, "double") for _ in range(3))
    wd, dwd = e.scratch(w.dims, "double"), e.scratch(w.dims, "double")
    tmp = e.scratch([d], "double")
    _emit_bad_label(e, y, rows, d)
    e.code(f"fl::linear_chain_crf_grad({x}, {w}, {y}, {x.lod}, {n}, {rows}, {d}, {g}, "
           f"{dx or 'nullptr'}, {dw or 'nullptr'}, {xd}, {wd}, {la}, {lb}, {dwd}, {tmp});")


@register("crf_decoding", "cpu")
def crf_decoding(e):
    """fl::crf_decoding: Viterbi per sequence in double (ties to the lowest tag); with
    Label, whether the path agrees with it."""
    x, w, n, rows, d = _emit_crf_inputs(e)
    y = _emit_labels(e, "Label", rows, "Emission") if e.op.input("Label") else None
    path = e.output("ViterbiPath", [rows, "1"], "int64_t", lod_from=x)
    xd, wd = e.scratch(x.dims, "double"), e.scratch(w.dims, "double")
    delta, step = e.scratch([d], "double"), e.scratch([d], "double")
    track = e.scratch(x.dims, "int64_t")
    e.code(f"fl::crf_decoding({x}, {w}, {y or 'nullptr'}, {x.lod}, {n}, {rows}, {d}, "
           f"{path}, {xd}, {wd}, {delta}, {step}, {track});")


@register("chunk_eval", "cpu")
def chunk_eval(e):
    """fl::chunk_eval: every label checked, then each sequence's chunks found by the
    kernel's rules and matched; the ratios in double, stored as float32."""
    inf, lab = e.input("Inference"), e.input("Label")
    if e.op.input("SeqLength"):
        e.fail("padded input with SeqLength")
    if inf.ctype != "int64_t" or lab.ctype != "int64_t":
        e.fail("Inference or Label is not int64")
    scheme = e.attr("chunk_scheme")
    if scheme not in CHUNK_SCHEMES:
        e.fail(f"chunk_scheme {scheme!r}")
    e.same_dims(inf, lab)
    n = sequences(e, inf, "Inference")
    rows = inf.numel()
    same_dim(e, inf.dims[0], rows, "Inference has one label per row")
    n_types = int(e.attr("num_chunk_types"))
    n_tags, begin, inside, end, single = CHUNK_SCHEMES[scheme]
    excl = [int(t) for t in e.attr("excluded_chunk_types")]
    outs = {s: _out_or_scratch(e, s, ["1"]) for s in ("Precision", "Recall", "F1-Score")}
    counts = e.scratch(["3"], "int64_t")
    so, st = e.scratch([rows, "3"], "int64_t"), e.scratch([rows, "3"], "int64_t")
    table = (f"static const int64_t excl[] = {{{', '.join(f'{t}LL' for t in excl)}}}; "
             if excl else "const int64_t* excl = nullptr; ")
    e.code(f"{table}const fl::ChunkScheme c{{{n_tags}, {begin}, {inside}, {end}, {single}, "
           f"{n_types}}};")
    e.code(f"{{ const int64_t bad = fl::chunk_eval({inf}, {lab}, {inf.lod}, {n}, {rows}, c, "
           f"{n_types * n_tags}, excl, {len(excl)}, {so}, {st}, {counts}); if (bad >= 0) "
           f"{{ std::snprintf(err, 512, " + e.c_string(
               f"chunk_eval: label %lld is out of range [0, {n_types * n_tags}] for "
               f"{n_types} chunk types in scheme {scheme}") + ", "
           f"(long long)({inf}[bad] < 0 || {inf}[bad] > {n_types * n_tags} ? {inf}[bad] : "
           f"{lab}[bad])); return {2 + e.k}; }} }}")
    e.code(f"const int64_t ni = {counts}[0], nl = {counts}[1], nc = {counts}[2]; "
           f"const double p = ni ? (double)nc / (double)ni : 0.0, "
           f"r = nl ? (double)nc / (double)nl : 0.0; "
           f"{outs['Precision']}[0] = (float)p; {outs['Recall']}[0] = (float)r; "
           f"{outs['F1-Score']}[0] = (float)(nc ? 2 * p * r / (p + r) : 0.0);")
    for k, slot in enumerate(("NumInferChunks", "NumLabelChunks", "NumCorrectChunks")):
        if e.has_output(slot):
            o = e.output(slot, ["1"], "int64_t", lod_from=False)
            e.code(f"{o}[0] = {counts}[{k}];")
