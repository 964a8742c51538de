"""positive_negative_pair: the ranking metric of Fluid 1.8 (and of PaddleRec's CTR models):
within each query, every pair of items with different labels is concordant (positive: the
scores order them as the labels do), discordant (negative) or tied (neutral: equal scores),
weighted by the mean of the two items' weights; the three sums, optionally added to earlier
ones (Accumulate*Pair). No gradient (Fluid has none)."""
import numpy as np

from ..errors import ShapeError
from .registry import In, OpDef, Out

_ACC = ("AccumulatePositivePair", "AccumulateNegativePair", "AccumulateNeutralPair")


def pair_counts(score, label, query, weight):
    """(positive, negative, neutral) weighted pair counts of 1-D arrays, query by query."""
    pos = neg = neu = 0.0
    order = np.argsort(query, kind="stable")
    q = query[order]
    starts = np.flatnonzero(np.r_[True, q[1:] != q[:-1]])
    for a, b in zip(starts, np.r_[starts[1:], len(q)]):
        idx = order[a:b]
        s_q, l_q, w_q = score[idx], label[idx], weight[idx]
        # item i against every later item of its query: O(items) memory per step, so a
        # batch of one large query does not allocate all its pairs at once
        for i in range(len(idx) - 1):
            s2, l2 = s_q[i + 1:], l_q[i + 1:]
            w = (w_q[i] + w_q[i + 1:]) * 0.5
            differ = l_q[i] != l2
            tied = differ & (s_q[i] == s2)
            agree = differ & ~tied & ((s_q[i] - s2) * (l_q[i] - l2) > 0)
            pos += w[agree].sum()
            neu += w[tied].sum()
            neg += w[differ & ~tied & ~agree].sum()
    return pos, neg, neu


class PositiveNegativePair(OpDef):
    type = "positive_negative_pair"
    inputs = (In("Score", no_grad=True), In("Label", no_grad=True),
              In("QueryID", no_grad=True)) + \
        tuple(In(s, dispensable=True, no_grad=True) for s in _ACC) + \
        (In("Weight", dispensable=True, no_grad=True),)
    outputs = (Out("PositivePair"), Out("NegativePair"), Out("NeutralPair"))
    attrs = {"column": -1}
    share_lod = None
    doc = ("Score [N, D] (column `column` ranks, -1 the last), Label, QueryID, Weight [N, 1]: "
           "the weighted counts of concordant, discordant and tied pairs of differently "
           "labelled items of one query, each [1], plus Accumulate*Pair when given (all "
           "three or none).")

    @staticmethod
    def infer_shape(ctx):
        ss = list(ctx.input_shape("Score"))
        if len(ss) != 2:
            ctx.fail(f"Score must be [N, D], got {ss}")
        col = ctx.attr("column")
        if ss[1] >= 0 and not -1 <= col < ss[1]:
            ctx.fail(f"column {col} is outside Score's {ss[1]} columns ([-1, {ss[1]}))")
        for slot in ("Label", "QueryID", "Weight"):
            if ctx.has_input(slot):
                s = list(ctx.input_shape(slot))
                if len(s) != 2 or (s[1] >= 0 and s[1] != 1):
                    ctx.fail(f"{slot} must be [N, 1], got {s}")
        given = [ctx.has_input(s) for s in _ACC]
        if any(given) and not all(given):
            ctx.fail("AccumulatePositivePair, AccumulateNegativePair and "
                     "AccumulateNeutralPair are given all three or none")
        for out in ("PositivePair", "NegativePair", "NeutralPair"):
            ctx.set_output(out, [1], ctx.input_dtype("Score"))

    @staticmethod
    def kernel(score, label, query, acc_pos, acc_neg, acc_neu, weight, *, column):
        n = score.shape[0]
        if score.ndim != 2 or not -1 <= column < score.shape[1]:
            raise ShapeError(f"positive_negative_pair: column {column} is outside Score "
                             f"{list(score.shape)}")
        cols = [("Label", label), ("QueryID", query)] + \
            ([("Weight", weight)] if weight is not None else [])
        for what, v in cols:
            if v.size != n:
                raise ShapeError(f"positive_negative_pair: {what} has {v.size} values for "
                                 f"Score's {n} rows")
        w = np.ones(n) if weight is None else weight.reshape(-1).astype(np.float64)
        counts = pair_counts(score[:, column].astype(np.float64),
                             label.reshape(-1).astype(np.float64), query.reshape(-1), w)
        accs = (acc_pos, acc_neg, acc_neu)
        dt = score.dtype
        return tuple(np.array([c + (float(a.reshape(-1)[0]) if a is not None else 0.0)], dt)
                     for c, a in zip(counts, accs))
