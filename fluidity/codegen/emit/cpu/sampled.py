"""C++ emitters of hierarchical_sigmoid and its gradient."""
from .. import register
from ..checks import same_dim
from ..literals import lit_int


def _emit_hsig_inputs(e):
    """hierarchical_sigmoid(_grad)'s X [N, D], W [rows, D], Label (int64, one per row) and
    Bias (W's rows values, or None) Bufs, N, D, num_classes and the path width; code that
    stops the run at a label or tree node out of range, as the kernel does."""
    if e.op.input("PathTable") or e.op.input("PathCode"):
        e.fail("a custom tree (PathTable, PathCode)")
    x, w, lab, b = (e.input(s) for s in ("X", "W", "Label", "Bias"))
    e.require_float(x, w, b)
    if lab.ctype != "int64_t" or x.ndim != 2 or w.ndim != 2:
        e.fail("Label not int64, or X or W not a matrix")
    n, d = x.dims
    classes = int(e.attr("num_classes"))
    if classes < 2:
        e.fail(f"num_classes {classes}")
    same_dim(e, w.dims[1], d, "W has X's width")
    same_dim(e, lab.numel(), n, "Label has one class per row")
    if b is not None:
        same_dim(e, b.numel(), w.dims[0], "Bias has one value per row of W")
    e.code(f"{{ const int64_t bad = fl::hsig_bad_row({lab}, {n}, {classes}, {w.dims[0]}); "
           f"if (bad >= 0) {{ std::snprintf(err, 512, " + e.c_string(
               f"{e.op.type}: label %lld is out of range for num_classes={classes} or its "
               f"tree node for W with %lld rows") + ", "
           f"(long long){lab}[bad], (long long)({w.dims[0]})); return {2 + e.k}; }} }}")
    return x, w, lab, b, n, d, classes, (classes - 1).bit_length()


@register("hierarchical_sigmoid", "cpu")
def hierarchical_sigmoid(e):
    """Paddle's default tree (a custom PathTable runs interpreted): every label and
    node checked first, then fl::hsig_default row by row."""
    x, w, lab, b, n, d, classes, width = _emit_hsig_inputs(e)
    out = e.output("Out", [n, "1"])
    soft = e.output("PreOut", [n, str(width)]) if e.has_output("PreOut") else \
        e.scratch([n, str(width)])
    if e.has_output("W_Out"):
        w_out = e.output("W_Out", w.dims)
        e.code(f"std::memcpy({w_out}, {w}, {w.nbytes()});")
    e.code(f"fl::hsig_default({x}, {w}, {b or 'nullptr'}, {lab}, {n}, {d}, {classes}, "
           f"{width}, {out}, {soft});")


@register("hierarchical_sigmoid_grad", "cpu")
def hierarchical_sigmoid_grad(e):
    """Paddle's default tree and a dense W@GRAD (is_sparse's SelectedRows holds as many
    rows as the batch's paths have nodes, known only from the labels)."""
    if e.attr("is_sparse"):
        e.fail("is_sparse (W@GRAD's rows depend on the labels)")
    x, w, lab, b, n, d, classes, _ = _emit_hsig_inputs(e)
    dout = e.input("Out@GRAD")
    e.require_float(dout)
    same_dim(e, dout.numel(), n, "Out@GRAD has one value per row")
    dx = e.output("X@GRAD", x.dims) if e.has_output("X@GRAD") else None
    dw = e.output("W@GRAD", w.dims) if e.has_output("W@GRAD") else None
    db = e.output("Bias@GRAD", b.dims) if b is not None and e.has_output("Bias@GRAD") \
        else None
    e.code(f"fl::hsig_default_grad({x}, {w}, {b or 'nullptr'}, {lab}, {n}, {d}, {classes}, "
           f"{w.dims[0]}, {dout}, {dx or 'nullptr'}, {dw or 'nullptr'}, {db or 'nullptr'});")


# --- nce: negatives from the op's Philox stream (runtime/nce.h, philox.h) ------------------
def _emit_nce_inputs(e):
    """nce(_grad)'s Input [N, D], Label [N, NT] (int64), Weight [C, D], Bias (C values or
    None), SampleWeight (N values or None) Bufs, N, D, NT and the C expression of its
    fl::NceSampler (sampler 2 reads its three custom_dist inputs)."""
    x, lab, w, b, sw = (e.input(s) for s in ("Input", "Label", "Weight", "Bias",
                                             "SampleWeight"))
    e.require_float(x, w, b, sw)
    if lab.ctype != "int64_t" or x.ndim != 2 or w.ndim != 2 or lab.ndim != 2:
        e.fail("Label not int64 [N, NT], or Input or Weight not a matrix")
    n, d = x.dims
    classes, kind = int(e.attr("num_total_classes")), int(e.attr("sampler"))
    if classes < 1 or kind not in (0, 1, 2):
        e.fail(f"num_total_classes {classes} or sampler {kind}")
    same_dim(e, w.dims[0], str(classes), "Weight has a row per class")
    same_dim(e, w.dims[1], d, "Weight has Input's width")
    same_dim(e, lab.dims[0], n, "Label has a row per Input row")
    if b is not None:
        same_dim(e, b.numel(), str(classes), "Bias has one value per class")
    if sw is not None:
        same_dim(e, sw.numel(), n, "SampleWeight has one value per row")
    custom = "nullptr, nullptr, nullptr"
    if kind == 2:
        probs, alias, ap = (e.input(s) for s in ("CustomDistProbs", "CustomDistAlias",
                                                 "CustomDistAliasProbs"))
        if probs is None or alias is None or ap is None:
            e.fail("custom_dist without its three inputs")
        e.require_float(probs, ap)
        if alias.ctype not in ("int64_t", "int32_t"):
            e.fail("CustomDistAlias is not int32 or int64")
        for t in (probs, alias, ap):
            same_dim(e, t.numel(), str(classes), "custom_dist has one value per class")
        if alias.ctype == "int32_t":      # Fluid's layer makes it int32: widen it once a run
            wide = e.scratch([str(classes)], "int64_t")
            e.code(f"for (int64_t c = 0; c < {classes}; ++c) {wide}[c] = {alias}[c];")
            alias = wide
        # the alias table comes from the model's variables: a class it names is a row of
        # Weight the cost then reads, so it must be one (or -1), as the kernel checks
        e.code(f"for (int64_t c = 0; c < {classes}; ++c) if ({alias}[c] < -1 || "
               f"{alias}[c] >= {classes}) {{ std::snprintf(err, 512, " + e.c_string(
                   f"nce: CustomDistAlias holds %lld, not a class of "
                   f"num_total_classes={classes} (or -1)") +
               f", (long long){alias}[c]); return {2 + e.k}; }}")
        custom = f"{probs}, {alias}, {ap}"
    e.code(f"{{ int64_t bad = -1, top = 0; for (int64_t i = 0; i < {lab.numel()}; ++i) {{ "
           f"if ({lab}[i] > top || i == 0) top = {lab}[i]; "
           f"if ({lab}[i] < 0 || {lab}[i] >= {classes}) bad = i; }} if (bad >= 0) {{ "
           f"std::snprintf(err, 512, " + e.c_string(
               f"nce: label %lld is out of range for num_total_classes={classes}") +
           f", (long long)top); return {2 + e.k}; }} }}")
    sampler = f"fl::NceSampler{{{kind}, {classes}LL, {custom}}}"
    return x, lab, w, b, sw, n, d, lab.dims[1], sampler


@register("nce", "cpu")
def nce(e):
    """Labels checked, the negatives drawn (custom_neg_classes: those, every row), then
    the logits and costs row by row."""
    x, lab, w, b, sw, n, d, nt, sampler = _emit_nce_inputs(e)
    k = int(e.attr("num_neg_samples"))
    custom_neg = [int(c) for c in e.attr("custom_neg_classes")]
    if k < 0 or (custom_neg and len(custom_neg) != k):
        e.fail(f"num_neg_samples {k} or custom_neg_classes {custom_neg}")
    width = str(int(nt) + k) if lit_int(nt) is not None else f"({nt} + {k})"
    cost = e.output("Cost", [n, "1"], lod_from=False)
    logits = e.output("SampleLogits", [n, str(width)], lod_from=False) \
        if e.has_output("SampleLogits") else e.scratch([n, str(width)])
    labels = e.output("SampleLabels", [n, str(width)], "int64_t", lod_from=False) \
        if e.has_output("SampleLabels") else e.scratch([n, str(width)], "int64_t")
    e.code(f"for (int64_t i = 0; i < {n}; ++i) for (int64_t j = 0; j < {nt}; ++j) "
           f"{labels}[i * {width} + j] = {lab}[i * {nt} + j];")
    if custom_neg:
        e.code(f"{{ static const int64_t neg[] = {{{', '.join(f'{c}LL' for c in custom_neg)}}}; "
               f"for (int64_t i = 0; i < {n}; ++i) for (int64_t j = 0; j < {k}; ++j) "
               f"{labels}[i * {width} + {nt} + j] = neg[j]; }}")
    else:
        state, stream = e.random_state()
        e.code(f"{{ const fl::Philox g = fl::philox_for({int(e.attr('seed'))}LL, {state}, "
               f"{stream}u); fl::nce_sample(g, {sampler}, {n}, {nt}, {k}, {labels}); }}")
    e.code(f"fl::nce_forward({x}, {w}, {b or 'nullptr'}, {sw or 'nullptr'}, {labels}, {n}, "
           f"{d}, {nt}, {k}, {sampler}, {logits}, {cost});")


@register("nce_grad", "cpu")
def nce_grad(e):
    """Input@GRAD, Weight@GRAD (dense, or is_sparse's SelectedRows: a row per sampled
    label) and Bias@GRAD from SampleLabels, the logits recomputed as the kernel does."""
    x, lab, w, b, sw, n, d, nt, sampler = _emit_nce_inputs(e)
    k = int(e.attr("num_neg_samples"))
    labels, dcost = e.input("SampleLabels"), e.input("Cost@GRAD")
    e.require_float(dcost)
    if labels.ctype != "int64_t" or labels.ndim != 2:
        e.fail("SampleLabels is not int64 [N, NT + k]")
    same_dim(e, labels.dims[0], n, "SampleLabels has a row per Input row")
    same_dim(e, labels.dims[1], f"({nt} + {k})", "SampleLabels has NT + k columns")
    same_dim(e, dcost.numel(), n, "Cost@GRAD has one value per row")
    e.code(f"for (int64_t i = 0; i < {labels.numel()}; ++i) if ({labels}[i] < 0 || "
           f"{labels}[i] >= {w.dims[0]}) {{ std::snprintf(err, 512, " + e.c_string(
               "nce_grad: sampled label %lld is out of range") +
           f", (long long){labels}[i]); return {2 + e.k}; }}")
    dx = e.output("Input@GRAD", x.dims, lod_from=False) if e.has_output("Input@GRAD") \
        else None
    dw = dw_rows = None
    if e.has_output("Weight@GRAD"):
        if e.attr("is_sparse"):
            dw_rows = e.output_rows("Weight@GRAD", labels.numel(), [d], w.dims[0])
            e.code(f"std::memcpy({dw_rows.rows}, {labels}, sizeof(int64_t) * "
                   f"{labels.numel()});")
        else:
            dw = e.output("Weight@GRAD", w.dims, lod_from=False)
    db = e.output("Bias@GRAD", b.dims, lod_from=False) \
        if b is not None and e.has_output("Bias@GRAD") else None
    e.code(f"fl::nce_backward({x}, {w}, {b or 'nullptr'}, {sw or 'nullptr'}, {labels}, "
           f"{dcost}, {n}, {d}, {nt}, {k}, {sampler}, {dx or 'nullptr'}, "
           f"{dw or 'nullptr'}, {dw_rows or 'nullptr'}, {db or 'nullptr'});")
