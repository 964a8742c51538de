"""C++ emitters of top_k (and its gradient), accuracy and auc."""
from ....ops.metric import stat_size
from .. import register


def _emit_axis(e, x, axis):
    """(pre, n, post) of X around `axis` as C expressions, and the axis made non-negative."""
    if not -x.ndim <= axis < x.ndim:
        e.fail(f"axis {axis} out of range for rank {x.ndim}")
    axis %= x.ndim
    return e.prod(x.dims[:axis]), x.dims[axis], e.prod(x.dims[axis + 1:]), axis


def _emit_topk(e, axis, largest):
    """top_k / top_k_v2: per (pre, post) line, a partial sort of the line's indices by value
    (NaN last, ties by index: numpy's stable argsort of -X or X)."""
    x = e.input("X")
    e.require_float(x)
    if e.op.input("K"):
        e.fail("k comes from a tensor")
    k = int(e.attr("k"))
    pre, n, post, axis = _emit_axis(e, x, axis)
    if e.is_lit(n) and not 1 <= k <= int(n):
        e.fail(f"k={k} is not in [1, {n}]")
    e.check(f"{n} < {k}", f"{e.op.type}: k={k} is more than the axis' size")
    dims = x.dims[:axis] + [str(k)] + x.dims[axis + 1:]
    out, idx = e.output("Out", dims), e.output("Indices", dims, "int64_t")
    order = e.scratch([n], "int64_t")
    cmp = ">" if largest else "<"
    e.code(f"const float* x = {x}; const int64_t n = {n}, post = {post}, k = {k}; "
           f"for (int64_t p = 0; p < {pre}; ++p) for (int64_t q = 0; q < post; ++q) {{ "
           f"const float* line = x + p * n * post + q; "
           f"for (int64_t j = 0; j < n; ++j) {order}[j] = j; "
           f"std::partial_sort({order}, {order} + k, {order} + n, [&](int64_t i, int64_t j) {{ "
           f"const float a = line[i * post], b = line[j * post]; "
           f"const bool an = a != a, bn = b != b; "
           f"if (an || bn) return an == bn ? i < j : bn; "
           f"if (a != b) return a {cmp} b; return i < j; }}); "
           f"for (int64_t r = 0; r < k; ++r) {{ const int64_t o = (p * k + r) * post + q; "
           f"{out}[o] = line[{order}[r] * post]; {idx}[o] = {order}[r]; }} }}")


def _emit_topk_grad(e, axis):
    x, idx, d = e.input("X"), e.input("Indices"), e.input("Out@GRAD")
    e.require_float(x, d)
    pre, n, post, axis = _emit_axis(e, x, axis)
    k = idx.dims[axis]
    dx = e.output("X@GRAD", x.dims)
    e.code(f"const int64_t n = {n}, post = {post}, k = {k}; "
           f"for (int64_t i = 0; i < {x.numel()}; ++i) {dx}[i] = 0.0f; "
           f"for (int64_t p = 0; p < {pre}; ++p) for (int64_t r = 0; r < k; ++r) "
           f"for (int64_t q = 0; q < post; ++q) {{ const int64_t o = (p * k + r) * post + q; "
           f"const int64_t j = {idx}[o]; "
           f"if (j < 0 || j >= n) return fl::fail(err, {e.k}, "
           f"{e.c_string(f'{e.op.type}: an index is out of range')}); "
           f"{dx}[(p * n + j) * post + q] = {d}[o]; }}")


@register("top_k", "cpu")
@register("top_k_v2", "cpu")
def top_k(e):
    _emit_topk(e, e.attr(e.opdef.axis_attr) if e.opdef.axis_attr else -1,
               e.attr("largest") if e.opdef.axis_attr else True)


@register("top_k_grad", "cpu")
@register("top_k_v2_grad", "cpu")
def top_k_grad(e):
    _emit_topk_grad(e, e.attr("axis") if "axis" in e.opdef.attrs else -1)


@register("accuracy", "cpu")
def accuracy(e):
    idx, label = e.input("Indices"), e.input("Label")
    ints = ("int64_t", "int32_t")
    if idx.ctype not in ints or label.ctype not in ints or idx.ndim != 2:
        e.fail(f"Indices {idx.ctype}{idx.dims} / Label {label.ctype}: not integer ids")
    n, k = idx.dims
    e.check(f"{label.numel()} != {n}", "accuracy: Label and Indices differ in rows")
    acc = e.output("Accuracy", [], "float", lod_from=False)
    correct = e.output("Correct", [], "int32_t", lod_from=False)
    total = e.output("Total", [], "int32_t", lod_from=False)
    e.code(f"const int64_t n = {n}, k = {k}; int64_t c = 0; "
           f"for (int64_t i = 0; i < n; ++i) for (int64_t j = 0; j < k; ++j) "
           f"if ((int64_t){idx}[i * k + j] == (int64_t){label}[i]) {{ ++c; break; }} "
           f"{acc}[0] = n ? (float)((double)c / (double)n) : 0.0f; "
           f"{correct}[0] = (int32_t)c; {total}[0] = (int32_t)n;")


@register("auc", "cpu")
def auc(e):
    """The kernel's steps over the stats in place: check every prediction, histogram
    the batch, slide the window, then the ROC area from the totals (in double; summed
    in order where numpy sums pairwise, so within rounding of the kernel's)."""
    pred, label = e.input("Predict"), e.input("Label")
    sp, sn = e.input("StatPos"), e.input("StatNeg")
    e.require_float(pred)
    if label.ctype not in ("int64_t", "int32_t") or sp.ctype != "int64_t" or \
            sn.ctype != "int64_t" or pred.ndim != 2:
        e.fail(f"Label {label.ctype}, stats {sp.ctype}/{sn.ctype}, Predict rank "
               f"{pred.ndim}: not the kernel's int64 stats over [N, C] predictions")
    for out, src in (("StatPosOut", "StatPos"), ("StatNegOut", "StatNeg")):
        if e.op.output(out) != e.op.input(src):
            e.fail(f"{out} is not {src}: not an update in place")
        e.output(out, e.input(src).dims, "int64_t")
    nt, steps = int(e.attr("num_thresholds")), int(e.attr("slide_steps"))
    buckets, size = nt + 1, stat_size(nt, steps)
    n, c = pred.dims
    e.check(f"{label.numel()} != {n}", "auc: Label and Predict differ in rows")
    e.check(f"{sp.numel()} != {size} || {sn.numel()} != {size}",
            "auc: a stat of another size than num_thresholds and slide_steps make")
    auc = e.output("AUC", [], "double", lod_from=False)
    counts = e.scratch([str(2 * buckets)], "int64_t")
    e.code(f"const int64_t n = {n}, c = {c}, B = {buckets}, steps = {steps}; "
           f"for (int64_t i = 0; i < n; ++i) {{ const float p = {pred}[i * c + c - 1]; "
           f'if (!(p >= 0.0f && p <= 1.0f)) return fl::fail(err, {e.k}, "auc: predictions '
           f'must lie in [0, 1] (a NaN or a value outside: has training diverged? try a '
           f'smaller learning rate)"); }} '
           f"int64_t* cp = {counts}; int64_t* cn = {counts} + B; "
           f"for (int64_t j = 0; j < 2 * B; ++j) {counts}[j] = 0; "
           f"for (int64_t i = 0; i < n; ++i) {{ "
           f"const int64_t b = (int64_t)({pred}[i * c + c - 1] * {float(nt)!r}f); "
           f"if ({label}[i] != 0) ++cp[b]; else ++cn[b]; }} "
           f"const int64_t total_at = steps * B; "
           f"const int64_t cur = steps ? {sp}[{size} - 1] % steps : 0; "
           f"int64_t* st[2] = {{{sp}, {sn}}}; const int64_t* cs[2] = {{cp, cn}}; "
           f"for (int s = 0; s < 2; ++s) {{ int64_t* w = st[s] + cur * B; "
           f"int64_t* t = st[s] + total_at; for (int64_t j = 0; j < B; ++j) {{ "
           f"if (steps) {{ t[j] -= w[j]; w[j] = cs[s][j]; }} t[j] += cs[s][j]; }} }} "
           f"const int64_t* tp_ = {sp} + total_at; const int64_t* tn_ = {sn} + total_at; "
           f"double tp = 0, fp = 0, area = 0; for (int64_t j = B - 1; j >= 0; --j) {{ "
           f"const double pj = (double)tp_[j], nj = (double)tn_[j]; tp += pj; fp += nj; "
           f"area += nj * (2 * tp - pj); }} area /= 2; "
           f"{auc}[0] = (tp > 0 && fp > 0) ? area / tp / fp : area; "
           f"if (steps) {{ {sp}[{size} - 1] += 1; {sn}[{size} - 1] += 1; }}")
