"""warpctc: the CTC loss (Graves et al. 2006) of unnormalized logits against label
sequences, as Paddle's warpctc op computes it (softmax inside; the gradient with respect to
the logits is made in the forward pass, WarpCTCGrad, and scaled by Loss@GRAD).

Sequences come as LoD (Logits [T_total, K], Label [L_total, 1]) or padded (Logits
[T_max, B, K] with LogitsLength, Label [B, L_max] with LabelLength). The forward-backward
recursions run in log space per sequence.
"""
import numpy as np

from ..core import dtypes
from ..core.tensor import LoDTensor
from ..errors import ExecutionError
from .registry import In, OpDef, Out


# The loss of a sequence no alignment fits (more labels, with repeats, than frames): Fluid
# 1.8 (warp-ctc) gives 0 and a zero gradient, not an infinite loss (whose finite
# differences are NaN), so a batch holding one still trains on the others
INFEASIBLE_LOSS = 0.0


def _logsumexp(*xs):
    m = np.maximum.reduce(xs)
    safe = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return np.where(np.isfinite(m), safe + np.log(sum(np.exp(x - safe) for x in xs)), m)


def ctc_one(logits, label, blank):
    """(loss, d loss / d logits) of one sequence: logits [T, K], label [L]."""
    t_len, k = logits.shape
    z = logits.astype(np.float64)
    logy = z - z.max(axis=1, keepdims=True)
    logy -= np.log(np.exp(logy).sum(axis=1, keepdims=True))
    ext = np.full(2 * len(label) + 1, blank, np.int64)
    ext[1::2] = label
    s_len = len(ext)
    skip = np.zeros(s_len, bool)                   # s may come from s - 2
    skip[2:] = (ext[2:] != blank) & (ext[2:] != ext[:-2])
    neg = -np.inf
    alpha = np.full((t_len, s_len), neg)
    beta = np.full((t_len, s_len), neg)
    if t_len == 0:
        return (0.0 if len(label) == 0 else INFEASIBLE_LOSS), np.zeros_like(z)
    alpha[0, 0] = logy[0, ext[0]]
    if s_len > 1:
        alpha[0, 1] = logy[0, ext[1]]
    for t in range(1, t_len):
        prev = alpha[t - 1]
        a1 = np.concatenate([[neg], prev[:-1]])
        a2 = np.where(skip, np.concatenate([[neg, neg], prev[:-2]]), neg)
        alpha[t] = _logsumexp(prev, a1, a2) + logy[t, ext]
    beta[-1, -1] = logy[-1, ext[-1]]
    if s_len > 1:
        beta[-1, -2] = logy[-1, ext[-2]]
    skip_next = np.concatenate([skip[2:], [False, False]])     # s + 2 may come from s
    for t in range(t_len - 2, -1, -1):
        nxt = beta[t + 1]
        b1 = np.concatenate([nxt[1:], [neg]])
        b2 = np.where(skip_next, np.concatenate([nxt[2:], [neg, neg]]), neg)
        beta[t] = _logsumexp(nxt, b1, b2) + logy[t, ext]
    log_p = _logsumexp(alpha[-1, -1], alpha[-1, -2] if s_len > 1 else neg)
    if not np.isfinite(log_p):
        return INFEASIBLE_LOSS, np.zeros_like(z)
    ab = alpha + beta                                   # [T, S]
    occupancy = np.full((t_len, k), neg)
    for s in range(s_len):
        occupancy[:, ext[s]] = _logsumexp(occupancy[:, ext[s]], ab[:, s])
    grad = np.exp(logy) - np.exp(occupancy - log_p - logy)
    return -float(log_p), grad


def _split(logits, label, logits_len, label_len):
    """[(logits [T, K], label [L])] per sequence, and how to put gradients back."""
    if logits_len is not None:
        tl = np.asarray(logits_len).reshape(-1).astype(np.int64)
        ll = np.asarray(label_len).reshape(-1).astype(np.int64)
        a, lab = logits._array, label._array
        return [(a[:tl[b], b], lab[b, :ll[b]]) for b in range(len(tl))], ("padded", tl)
    if not logits._lod or not label._lod:
        raise ExecutionError("warpctc: Logits and Label need LoD, or give LogitsLength and "
                             "LabelLength for padded input")
    lo, la = logits._lod[-1], label._lod[-1]
    if len(lo) != len(la):
        raise ExecutionError(f"warpctc: {len(lo) - 1} logit sequences but {len(la) - 1} "
                             f"label sequences")
    a, lab = logits._array, label._array.reshape(-1)
    return [(a[lo[i]:lo[i + 1]], lab[la[i]:la[i + 1]]) for i in range(len(lo) - 1)], \
        ("lod", lo)


class Warpctc(OpDef):
    type = "warpctc"
    kind = "value"
    inputs = (In("Logits"), In("Label", no_grad=True),
              In("LogitsLength", dispensable=True, no_grad=True),
              In("LabelLength", dispensable=True, no_grad=True))
    outputs = (Out("WarpCTCGrad", intermediate=True), Out("Loss"))
    attrs = {"blank": 0, "norm_by_times": False}
    share_lod = None
    doc = "Loss[i] = -log p(Label_i | Logits_i) under CTC with class `blank` as the blank."

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Loss", [-1, 1], ctx.input_dtype("Logits"))
        ctx.set_output("WarpCTCGrad", ctx.input_shape("Logits"), ctx.input_dtype("Logits"))

    @staticmethod
    def kernel(logits, label, logits_len, label_len, *, blank, norm_by_times):
        seqs, (mode, pos) = _split(logits, label, logits_len, label_len)
        k = logits._array.shape[-1]
        if not 0 <= blank < k:
            raise ExecutionError(f"warpctc: blank {blank} is not a class of {k}")
        grad = np.zeros(logits._array.shape, np.float64)
        losses = []
        for i, (z, lab) in enumerate(seqs):
            if ((lab < 0) | (lab >= k)).any() or (lab == blank).any():
                raise ExecutionError(f"warpctc: sequence {i} has labels outside [0, {k}) or "
                                     f"the blank {blank}")
            loss, g = ctc_one(z, lab.astype(np.int64), blank)
            if norm_by_times and len(z):
                g = g / len(z)
            losses.append(loss)
            if mode == "padded":
                grad[:len(z), i] = g
            else:
                grad[pos[i]:pos[i + 1]] = g
        dtype = logits._array.dtype
        return (LoDTensor(grad.astype(dtype), logits._lod),
                LoDTensor(np.array(losses, dtype).reshape(-1, 1)))

    grad = staticmethod(lambda g: g.op(
        "warpctc_grad", {"WarpCTCGrad": g.output("WarpCTCGrad"), "Logits": g.input("Logits"),
                         "Loss@GRAD": g.output_grad("Loss"),
                         **({"LogitsLength": g.input("LogitsLength")}
                            if g.input("LogitsLength") else {})},
        {"Logits@GRAD": g.input_grad("Logits")}, g.attrs()))


class WarpctcGrad(OpDef):
    type = "warpctc_grad"
    kind = "value"
    inputs = (In("WarpCTCGrad"), In("Logits"), In("Loss@GRAD"),
              In("LogitsLength", dispensable=True))
    outputs = (Out("Logits@GRAD"),)
    attrs = Warpctc.attrs
    infer_shape = None
    share_lod = None

    @staticmethod
    def kernel(grad, logits, dloss, logits_len, *, blank, norm_by_times):
        g, d = grad._array, dloss._array.reshape(-1)
        if logits_len is not None:                      # padded [T, B, K]: per column b
            out = g * d.reshape(1, -1, 1)
        else:
            lo = logits._lod[-1]
            per_row = np.repeat(d, np.diff(lo))
            out = g * per_row.reshape(-1, 1)
        return LoDTensor(out.astype(g.dtype), logits._lod)


class CtcAlign(OpDef):
    type = "ctc_align"
    kind = "value"
    inputs = (In("Input"), In("InputLength", dispensable=True))
    outputs = (Out("Output"), Out("OutputLength", dispensable=True))
    attrs = {"blank": 0, "merge_repeated": True, "padding_value": 0}
    share_lod = None
    doc = ("Per sequence of token ids: repeated tokens merged (merge_repeated), then blanks "
           "removed. LoD Input [T, 1] -> LoD Output (a lone -1 row, with one empty sequence per "
           "input sequence in the LoD, when every result is empty); "
           "padded Input [B, T] with InputLength -> Output [B, T] padded with padding_value "
           "and OutputLength.")

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Output", ctx.input_shape("Input"), ctx.input_dtype("Input"),
                       lod_level=ctx.input_lod_level("Input"))
        if ctx.has_output("OutputLength"):
            ctx.set_output("OutputLength", [-1, 1], ctx.input_dtype("InputLength")
                           if ctx.has_input("InputLength") else dtypes.VarType.INT64)

    @staticmethod
    def _align(ids, blank, merge):
        keep = np.ones(len(ids), bool)
        if merge and len(ids):
            keep[1:] = ids[1:] != ids[:-1]
        return ids[keep & (ids != blank)]

    @staticmethod
    def kernel(x, lengths, *, blank, merge_repeated, padding_value):
        a = x._array
        if lengths is not None:
            lens = lengths._array.reshape(-1).astype(np.int64)
            out = np.full(a.shape, padding_value, a.dtype)
            out_len = np.zeros((len(lens), 1), lengths._array.dtype)
            for b, n in enumerate(lens):
                got = CtcAlign._align(a[b, :n], blank, merge_repeated)
                out[b, :len(got)] = got
                out_len[b, 0] = len(got)
            return LoDTensor(out), LoDTensor(out_len)
        if not x._lod:
            raise ExecutionError("ctc_align: Input needs LoD, or give InputLength")
        offs = x._lod[-1]
        flat = a.reshape(-1)
        parts = [CtcAlign._align(flat[offs[i]:offs[i + 1]], blank, merge_repeated)
                 for i in range(len(offs) - 1)]
        lod = [0]
        for p in parts:
            lod.append(lod[-1] + len(p))
        if lod[-1] == 0:
            # Fluid 1.8: every sequence empty -> a lone -1 row, but the LoD still holds one
            # (empty) sequence per input sequence, so edit_distance and the user see n results
            return LoDTensor(np.full((1, 1), -1, a.dtype), [lod]), None
        return LoDTensor(np.concatenate(parts).reshape(-1, 1), [lod]), None


def _levenshtein(a, b):
    prev = np.arange(len(b) + 1)
    for i in range(1, len(a) + 1):
        cur = np.empty_like(prev)
        cur[0] = i
        for j in range(1, len(b) + 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]))
        prev = cur
    return int(prev[-1])


class EditDistance(OpDef):
    type = "edit_distance"
    kind = "value"
    inputs = (In("Hyps"), In("Refs"), In("HypsLength", dispensable=True),
              In("RefsLength", dispensable=True))
    outputs = (Out("Out"), Out("SequenceNum"))
    attrs = {"normalized": False}
    share_lod = None
    doc = ("Out[i] = the Levenshtein distance of hypothesis i to reference i (divided by "
           "the reference's length when normalized); SequenceNum = the number of pairs. "
           "LoD int64 [*, 1] inputs, or padded [B, T] with lengths.")

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", [-1, 1], dtypes.VarType.FP32)
        ctx.set_output("SequenceNum", [1], dtypes.VarType.INT64)

    @staticmethod
    def _seqs(t, lengths, slot):
        a = t._array
        if lengths is not None:
            lens = lengths._array.reshape(-1).astype(np.int64)
            return [a[i, :n].reshape(-1) for i, n in enumerate(lens)]
        if not t._lod:
            raise ExecutionError(f"edit_distance: {slot} needs LoD, or give its lengths")
        o = t._lod[-1]
        return [a[o[i]:o[i + 1]].reshape(-1) for i in range(len(o) - 1)]

    @staticmethod
    def kernel(hyps, refs, hyps_len, refs_len, *, normalized):
        hs = EditDistance._seqs(hyps, hyps_len, "Hyps")
        rs = EditDistance._seqs(refs, refs_len, "Refs")
        if len(hs) != len(rs):
            raise ExecutionError(f"edit_distance: {len(hs)} hypotheses but {len(rs)} "
                                 f"references")
        out = []
        for h, r in zip(hs, rs):
            d = float(_levenshtein(h, r))
            if normalized:
                if not len(r):
                    raise ExecutionError("edit_distance: a reference is empty; it cannot "
                                         "normalize")
                d /= len(r)
            out.append(d)
        return (LoDTensor(np.array(out, np.float32).reshape(-1, 1)),
                LoDTensor(np.array([len(hs)], np.int64)))
