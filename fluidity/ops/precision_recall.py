"""precision_recall: per-class true/false positive/negative counts of a batch of predicted
class ids (optionally weighted, optionally added to earlier counts StatesInfo), and from them
the macro- and micro-averaged precision, recall and F1 of the batch and of the accumulated
counts, as Fluid 1.8's metric op computes them. No gradient (Fluid has none)."""
import numpy as np

from ..errors import ExecutionError, ShapeError
from .registry import In, OpDef, Out

TP, FP, TN, FN = range(4)


def class_states(idx, label, weights, classes):
    """[classes, 4] counts (TP, FP, TN, FN) of predictions `idx` against `label`."""
    states = np.zeros((classes, 4), np.float64)
    hit = idx == label
    np.add.at(states[:, TP], idx[hit], weights[hit])
    np.add.at(states[:, FP], idx[~hit], weights[~hit])
    np.add.at(states[:, FN], label[~hit], weights[~hit])
    # every sample is a true negative for each class it neither is nor is predicted as
    states[:, TN] = weights.sum()
    np.subtract.at(states[:, TN], idx, weights)
    np.subtract.at(states[:, TN], label[~hit], weights[~hit])
    return states


def _ratio(num, other):
    return num / (num + other) if num > 0 or other > 0 else 1.0


def _f1(p, r):
    return 2 * p * r / (p + r) if p > 0 or r > 0 else 0.0


def metrics(states):
    """[macro P, macro R, macro F1, micro P, micro R, micro F1] of `states`."""
    n = states.shape[0]
    macro_p = sum(_ratio(s[TP], s[FP]) for s in states) / n
    macro_r = sum(_ratio(s[TP], s[FN]) for s in states) / n
    tp, fp, fn = states[:, TP].sum(), states[:, FP].sum(), states[:, FN].sum()
    micro_p, micro_r = _ratio(tp, fp), _ratio(tp, fn)
    return np.array([macro_p, macro_r, _f1(macro_p, macro_r), micro_p, micro_r,
                     _f1(micro_p, micro_r)], np.float32)


class PrecisionRecall(OpDef):
    type = "precision_recall"
    inputs = (In("MaxProbs", no_grad=True), In("Indices", no_grad=True),
              In("Labels", no_grad=True), In("Weights", dispensable=True, no_grad=True),
              In("StatesInfo", dispensable=True, no_grad=True))
    outputs = (Out("BatchMetrics"), Out("AccumMetrics"), Out("AccumStatesInfo"))
    attrs = {"class_number": 0}
    share_lod = None
    doc = ("Indices, Labels: [N, 1] class ids; Weights [N, 1] (1 when absent); StatesInfo "
           "[class_number, 4] earlier TP/FP/TN/FN counts. BatchMetrics, AccumMetrics [6]: "
           "macro P/R/F1 then micro P/R/F1 of the batch's and of the accumulated counts; "
           "AccumStatesInfo = StatesInfo + the batch's counts.")

    @staticmethod
    def infer_shape(ctx):
        ps, ids = list(ctx.input_shape("MaxProbs")), list(ctx.input_shape("Indices"))
        if len(ps) != 2 or (ps[1] >= 0 and ps[1] != 1):
            ctx.fail(f"MaxProbs must be [N, 1], got {ps}")
        if len(ids) != 2 or (ids[1] >= 0 and ids[1] != 1):
            ctx.fail(f"Indices must be [N, 1], got {ids}")
        n = ctx.attr("class_number")
        if n <= 0:
            ctx.fail(f"class_number must be positive, got {n}")
        ctx.set_output("BatchMetrics", [6], ctx.input_dtype("MaxProbs"))
        ctx.set_output("AccumMetrics", [6], ctx.input_dtype("MaxProbs"))
        ctx.set_output("AccumStatesInfo", [n, 4], ctx.input_dtype("MaxProbs"))

    @staticmethod
    def kernel(probs, idx, label, weights, states, *, class_number):
        n = probs.shape[0]
        idx, label = idx.reshape(-1).astype(np.int64), label.reshape(-1).astype(np.int64)
        if idx.size != n or label.size != n:
            raise ShapeError(f"precision_recall: Indices ({idx.size}) and Labels "
                             f"({label.size}) must have MaxProbs' {n} rows")
        for what, v in (("Indices", idx), ("Labels", label)):
            bad = v[(v < 0) | (v >= class_number)]
            if bad.size:
                raise ExecutionError(f"precision_recall: {what} holds class {bad[0]} outside "
                                     f"[0, class_number={class_number})")
        w = np.ones(n) if weights is None else weights.reshape(-1).astype(np.float64)
        batch = class_states(idx, label, w, class_number)
        accum = batch.copy()
        if states is not None:
            if states.shape != (class_number, 4):
                raise ShapeError(f"precision_recall: StatesInfo must be [{class_number}, 4], "
                                 f"got {list(states.shape)}")
            accum += states
        dt = probs.dtype
        return metrics(batch).astype(dt), metrics(accum).astype(dt), accum.astype(dt)
