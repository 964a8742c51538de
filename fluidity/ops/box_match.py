"""Matching predictions to ground truth for SSD-style training, as Paddle 1.8 defines it:
bipartite_match (greedy maximum matching on a distance matrix), target_assign (gather each
prediction's target by its match) and mine_hard_examples (pick the negatives that count).
ssd_loss (fluidity/layers/detection.py) is these three around a softmax and a smooth-L1 loss.
None has a gradient in Paddle.
"""
import numpy as np

from ..core.tensor import LoDTensor
from ..errors import ExecutionError
from .registry import In, OpDef, Out

EPS = 1e-6


def bipartite_match(dist, big=False):
    """(col -> row indices [M] (-1: unmatched), their distances [M]) of greedy bipartite
    matching on dist [N rows, M cols]: repeatedly the largest entry among unmatched rows and
    columns (at least 1e-6; above 0 for the large-N path Paddle takes from 130 rows), ties to
    the lowest column, then row."""
    n, m = dist.shape
    idx = np.full(m, -1, np.int32)
    val = np.zeros(m, dist.dtype)
    work = dist.T.astype(np.float64)      # [cols, rows]: argmax order is column, then row
    low = (work <= 0) if big else (work < EPS)
    work[low] = -np.inf
    for _ in range(min(n, m)):
        k = int(np.argmax(work))
        j, i = divmod(k, n)
        if not np.isfinite(work[j, i]):
            break
        idx[j], val[j] = i, dist[i, j]
        work[j, :] = -np.inf
        work[:, i] = -np.inf
    return idx, val


def argmax_match(dist, idx, val, threshold):
    """per_prediction's second pass: each column still unmatched takes its best row if that
    distance reaches `threshold` (and 1e-6)."""
    for j in np.nonzero(idx == -1)[0]:
        col = dist[:, j]
        ok = (col >= EPS) & (col >= threshold)
        if ok.any():
            i = int(np.argmax(np.where(ok, col, -np.inf)))
            idx[j], val[j] = i, col[i]


class BipartiteMatch(OpDef):
    type = "bipartite_match"
    inputs = (In("DistMat"),)
    outputs = (Out("ColToRowMatchIndices"), Out("ColToRowMatchDist"))
    attrs = {"match_type": "bipartite", "dist_threshold": 0.5}
    kind = "value"
    share_lod = None
    doc = ("For each instance (sequence of DistMat's LoD, rows = ground truth, columns = "
           "priors): greedy bipartite matching, then with match_type per_prediction each "
           "unmatched column's best row at or above dist_threshold. ColToRowMatchIndices "
           "[N, M] (int32, -1 unmatched) and ColToRowMatchDist [N, M].")

    @staticmethod
    def infer_shape(ctx):
        d = ctx.input_shape("DistMat")
        if len(d) != 2:
            ctx.fail(f"DistMat must be 2-D, got {d}")
        if ctx.attr("match_type") not in ("bipartite", "per_prediction"):
            ctx.fail(f"match_type must be bipartite or per_prediction, got "
                     f"{ctx.attr('match_type')!r}")
        ctx.set_output("ColToRowMatchIndices", [-1, d[1]], "int32", 0)
        ctx.set_output("ColToRowMatchDist", [-1, d[1]], ctx.input_dtype("DistMat"), 0)

    @staticmethod
    def kernel(dist, *, match_type, dist_threshold):
        d = dist._array
        if len(dist._lod) > 1:
            raise ExecutionError("bipartite_match: DistMat may have one LoD level, got "
                                 f"{len(dist._lod)}")
        lod = dist._lod[-1] if dist._lod else [0, len(d)]
        idx = np.full((len(lod) - 1, d.shape[1]), -1, np.int32)
        val = np.zeros((len(lod) - 1, d.shape[1]), d.dtype)
        for k, (a, b) in enumerate(zip(lod[:-1], lod[1:])):
            one = d[a:b]
            idx[k], val[k] = bipartite_match(one, big=len(one) >= 130)
            if match_type == "per_prediction":
                argmax_match(one, idx[k], val[k], dist_threshold)
        return LoDTensor(idx), LoDTensor(val)


class TargetAssign(OpDef):
    type = "target_assign"
    inputs = (In("X"), In("MatchIndices"), In("NegIndices", dispensable=True))
    outputs = (Out("Out"), Out("OutWeight"))
    attrs = {"mismatch_value": 0}
    kind = "value"
    share_lod = None
    doc = ("Out[i, j] = X[lod[i] + MatchIndices[i, j], j % P] with OutWeight 1 where matched, "
           "mismatch_value with weight 0 elsewhere; the negatives NegIndices (a LoDTensor, "
           "per instance) get mismatch_value with weight 1. X [rows, P, K] has one LoD "
           "sequence per instance.")

    @staticmethod
    def infer_shape(ctx):
        x, mi = ctx.input_shape("X"), ctx.input_shape("MatchIndices")
        if len(x) != 3 or len(mi) != 2:
            ctx.fail(f"X must be 3-D and MatchIndices 2-D, got {x} and {mi}")
        if ctx.has_input("NegIndices"):
            neg = ctx.input_shape("NegIndices")
            if len(neg) != 2 or neg[1] not in (1, -1):
                ctx.fail(f"NegIndices must be [K, 1], got {neg}")
        ctx.set_output("Out", [mi[0], mi[1], x[2]], ctx.input_dtype("X"), 0)
        ctx.set_output("OutWeight", [mi[0], mi[1], 1], "float32", 0)

    @staticmethod
    def kernel(x, match, neg, *, mismatch_value):
        xa, mi = x._array, np.asarray(match._array)
        if len(x._lod) != 1:
            raise ExecutionError(f"target_assign: X needs one LoD level (rows per instance), "
                                 f"got {len(x._lod)}")
        lod = np.asarray(x._lod[0])
        n, m = mi.shape
        p, k = xa.shape[1], xa.shape[2]
        if len(lod) - 1 != n:
            raise ExecutionError(f"target_assign: X has {len(lod) - 1} instances (its LoD), "
                                 f"MatchIndices {n}")
        rows = lod[:-1, None] + np.maximum(mi, 0)
        if ((mi >= 0) & (rows >= lod[1:, None])).any():
            raise ExecutionError("target_assign: a match index is past its instance's rows "
                                 "of X")
        if len(xa):
            out = xa[np.minimum(rows, len(xa) - 1), np.arange(m)[None, :] % p]
        else:
            out = np.zeros((n, m, k), xa.dtype)
        matched = (mi > -1)[..., None]
        out = np.where(matched, out, np.asarray(mismatch_value, xa.dtype)).astype(xa.dtype)
        weight = matched.astype(np.float32)
        if neg is not None:
            ni = np.asarray(neg._array).reshape(-1).astype(np.int64)
            nlod = neg._lod[-1] if neg._lod else None
            if nlod is None or len(nlod) - 1 != n:
                raise ExecutionError("target_assign: NegIndices needs a LoD with one sequence "
                                     "per instance")
            inst = np.repeat(np.arange(n), np.diff(nlod))
            out[inst, ni] = mismatch_value
            weight[inst, ni] = 1.0
        return LoDTensor(out), LoDTensor(weight)


class MineHardExamples(OpDef):
    type = "mine_hard_examples"
    inputs = (In("ClsLoss"), In("LocLoss", dispensable=True), In("MatchIndices"),
              In("MatchDist"))
    outputs = (Out("NegIndices"), Out("UpdatedMatchIndices"))
    attrs = {"neg_pos_ratio": 1.0, "neg_dist_threshold": 0.5, "sample_size": 0,
             "mining_type": "max_negative"}
    kind = "value"
    share_lod = None
    doc = ("max_negative: per instance, among unmatched priors with match distance below "
           "neg_dist_threshold, the neg_pos_ratio * (matched count) of highest ClsLoss are "
           "NegIndices (ascending). hard_example: the sample_size highest ClsLoss (+ LocLoss) "
           "of all priors; matched ones not chosen are unmatched in UpdatedMatchIndices.")

    @staticmethod
    def infer_shape(ctx):
        cls, mi, md = (ctx.input_shape(s) for s in ("ClsLoss", "MatchIndices", "MatchDist"))
        if len(cls) != 2 or len(mi) != 2 or len(md) != 2:
            ctx.fail(f"ClsLoss, MatchIndices and MatchDist must be 2-D, got {cls}, {mi}, {md}")
        if ctx.attr("mining_type") not in ("max_negative", "hard_example"):
            ctx.fail(f"mining_type must be max_negative or hard_example, got "
                     f"{ctx.attr('mining_type')!r}")
        ctx.set_output("NegIndices", [-1, 1], "int32", 1)
        ctx.set_output("UpdatedMatchIndices", mi, ctx.input_dtype("MatchIndices"), 0)

    @staticmethod
    def kernel(cls_loss, loc_loss, match, dist, *, neg_pos_ratio, neg_dist_threshold,
               sample_size, mining_type):
        cl, mi, md = (np.asarray(t._array) for t in (cls_loss, match, dist))
        if not cl.shape == mi.shape == md.shape:
            raise ExecutionError(f"mine_hard_examples: ClsLoss {list(cl.shape)}, MatchIndices "
                                 f"{list(mi.shape)} and MatchDist {list(md.shape)} must agree")
        hard = mining_type == "hard_example"
        loss = cl + np.asarray(loc_loss._array) if hard and loc_loss is not None else cl
        updated = mi.copy()
        negs, lod = [], [0]
        for n in range(len(mi)):
            eligible = (np.ones(mi.shape[1], bool) if hard
                        else (mi[n] == -1) & (md[n] < neg_dist_threshold))
            cand = np.nonzero(eligible)[0]
            if hard:
                count = min(sample_size, len(cand))
            else:
                count = min(int((mi[n] != -1).sum() * neg_pos_ratio), len(cand))
            chosen = cand[np.argsort(-loss[n, cand], kind="stable")[:count]]
            sel = np.zeros(mi.shape[1], bool)
            sel[chosen] = True
            if hard:
                updated[n][(mi[n] > -1) & ~sel] = -1
                neg = np.nonzero((mi[n] <= -1) & sel)[0]
            else:
                neg = np.nonzero(sel)[0]
            negs.append(neg)
            lod.append(lod[-1] + len(neg))
        neg_all = (np.concatenate(negs) if negs else np.zeros(0)).astype(np.int32)
        return LoDTensor(neg_all.reshape(-1, 1), [lod]), LoDTensor(updated)
