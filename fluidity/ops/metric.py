"""Metric ops: top_k, top_k_v2 (with gradients), accuracy, auc (streaming, bucketed),
mean_iou."""
import numpy as np

from ..core import dtypes
from ..errors import ExecutionError
from .registry import In, OpDef, Out

VarType = dtypes.VarType


# --- top_k -----------------------------------------------------------------------------------
def _topk(op, x, k, axis, largest=True):
    """The k largest (or smallest) entries along `axis`, sorted; ties keep the lower index
    first. Returns (values, int64 indices)."""
    n = x.shape[axis] if x.ndim else 1
    if not 1 <= k <= n:
        raise ExecutionError(f"{op}: k={k} must be in [1, {n}] (size of axis {axis} of X "
                             f"{list(x.shape)})")
    order = np.argsort(-x if largest else x, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, idx, axis), idx.astype(np.int64, copy=False)


def _k_of(k_tensor, k):
    return k if k_tensor is None else int(np.asarray(k_tensor).reshape(-1)[0])


def _topk_grad(g):
    g.op(g.fwd.type + "_grad", {"X": g.input("X"), "Indices": g.output("Indices"),
                                "Out@GRAD": g.output_grad("Out")},
         {"X@GRAD": g.input_grad("X")}, g.attrs())


class TopK(OpDef):
    type = "top_k"
    inputs = (In("X"), In("K", dispensable=True, no_grad=True))
    outputs = (Out("Out"), Out("Indices"))
    attrs = {"k": 1}
    doc = "Out, Indices = the k largest entries of X's last axis, in descending order."
    axis_attr = None   # top_k always works on the last axis

    @classmethod
    def infer_shape(cls, ctx):
        xs = ctx.input_shape("X")
        axis = ctx.attr(cls.axis_attr) if cls.axis_attr else -1
        if not xs or not -len(xs) <= axis < len(xs):
            ctx.fail(f"axis {axis} is out of range for X of rank {len(xs)}")
        axis %= len(xs)
        k = -1 if ctx.has_input("K") else ctx.attr("k")
        if k != -1 and (k < 1 or 0 < xs[axis] < k):
            ctx.fail(f"k={k} must be in [1, {xs[axis]}] (size of axis {axis})")
        out = xs[:axis] + [k] + xs[axis + 1:]
        lod = ctx.input_lod_level("X")
        ctx.set_output("Out", out, ctx.input_dtype("X"), lod)
        ctx.set_output("Indices", out, VarType.INT64, lod)

    @classmethod
    def prepare(cls, attrs, outputs):
        axis, largest = attrs.get("axis", -1), attrs.get("largest", True)
        return lambda x, k_t: _topk(cls.type, x, _k_of(k_t, attrs["k"]), axis, largest)

    grad = staticmethod(_topk_grad)


class TopKV2(TopK):
    type = "top_k_v2"
    attrs = {"k": 1, "axis": -1, "largest": True, "sorted": True}
    doc = ("Out, Indices = the k largest (largest=True) or smallest entries along `axis`. "
           "Results are always sorted (sorted=False allows any order in Paddle).")
    axis_attr = "axis"


class TopKGrad(OpDef):
    type = "top_k_grad"
    inputs = (In("X"), In("Indices"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = TopK.attrs
    infer_shape = None
    doc = "X@GRAD = Out@GRAD scattered to Indices, zero elsewhere."

    @classmethod
    def prepare(cls, attrs, outputs):
        axis = attrs.get("axis", -1)

        def kernel(x, idx, dout):
            dx = np.zeros_like(x)
            np.put_along_axis(dx, idx, dout.astype(x.dtype, copy=False), axis)
            return dx
        return kernel


class TopKV2Grad(TopKGrad):
    type = "top_k_v2_grad"
    attrs = TopKV2.attrs


# --- accuracy --------------------------------------------------------------------------------
class Accuracy(OpDef):
    type = "accuracy"
    inputs = (In("Out"), In("Indices"), In("Label"))
    outputs = (Out("Accuracy"), Out("Correct"), Out("Total"))
    share_lod = None
    doc = ("A row is correct when its Label is among its top-k Indices. Accuracy = "
           "Correct / Total (float32 [1]); Correct, Total int32 [1] (Fluid 1.x).")

    @staticmethod
    def infer_shape(ctx):
        ins, ls = ctx.input_shape("Indices"), ctx.input_shape("Label")
        if len(ins) != 2:
            ctx.fail(f"Indices must be [N, k], got {ins}")
        if len(ls) != 2 or ls[1] not in (1, -1):
            ctx.fail(f"Label must be [N, 1], got {ls}")
        if ins[0] > 0 and ls[0] > 0 and ins[0] != ls[0]:
            ctx.fail(f"Indices has {ins[0]} rows but Label has {ls[0]}")
        ctx.set_output("Accuracy", [1], VarType.FP32)
        ctx.set_output("Correct", [1], VarType.INT32)
        ctx.set_output("Total", [1], VarType.INT32)

    @staticmethod
    def kernel(out, indices, label):
        n = indices.shape[0]
        if label.size != n:
            raise ExecutionError(f"accuracy: Label has {label.size} entries for {n} rows of "
                                 f"Indices {list(indices.shape)}")
        correct = int((indices.reshape(n, -1) == label.reshape(n, 1)).any(axis=1).sum())
        acc = correct / n if n else 0.0
        return (np.array([acc], np.float32), np.array([correct], np.int32),
                np.array([n], np.int32))


# --- auc -------------------------------------------------------------------------------------
def stat_size(num_thresholds, slide_steps):
    """Length of the stat vectors: slide_steps per-batch histograms, their sum, and (for
    slide_steps > 0) a trailing batch counter. slide_steps == 0 keeps one [1, buckets] sum."""
    buckets = num_thresholds + 1
    return (1 + slide_steps) * buckets + (1 if slide_steps else 0)


def roc_auc_from_buckets(pos, neg):
    """Paddle's calcAuc: trapezoids of the ROC curve walking thresholds from high to low,
    normalized by positives * negatives (left unnormalized, i.e. 0, if either is absent)."""
    pos, neg = pos[::-1].astype(np.float64), neg[::-1].astype(np.float64)
    tp, fp = np.cumsum(pos), np.cumsum(neg)
    area = float((neg * (2 * tp - pos)).sum() / 2)   # sum |dFP| * (TP + TP_prev) / 2
    tot_pos, tot_neg = tp[-1] if tp.size else 0, fp[-1] if fp.size else 0
    return area / tot_pos / tot_neg if tot_pos > 0 and tot_neg > 0 else area


class Auc(OpDef):
    type = "auc"
    # InsTagWeight (Paddle's version 1 of the op): Paddle 3.3.1's CPU kernel ignores it (the
    # same AUC and stats for any weight, 0 included), and so does this one
    inputs = (In("Predict"), In("Label"), In("StatPos"), In("StatNeg"),
              In("InsTagWeight", dispensable=True, no_grad=True))
    outputs = (Out("AUC"), Out("StatPosOut"), Out("StatNegOut"))
    attrs = {"curve": "ROC", "num_thresholds": (2 << 12) - 1, "slide_steps": 1}
    version = 1
    share_lod = None
    doc = ("Streaming ROC AUC. Each prediction (Predict's last column, in [0, 1]) goes to "
           "bucket int(p * num_thresholds) of the positive (Label != 0) or negative "
           "histogram kept in StatPos/StatNeg (persistable; wire StatPosOut/StatNegOut to the "
           "same variables). slide_steps > 0: AUC over the last slide_steps batches; 0: "
           "over everything seen.")

    @staticmethod
    def infer_shape(ctx):
        ps, ls = ctx.input_shape("Predict"), ctx.input_shape("Label")
        if len(ps) != 2 or ps[1] not in (1, 2, -1):
            ctx.fail(f"Predict must be [N, 1] or [N, 2] (binary classification), got {ps}")
        if ps[0] > 0 and ls and ls[0] > 0 and ps[0] != ls[0]:
            ctx.fail(f"Predict has {ps[0]} rows but Label has {ls[0]}")
        nt, steps = ctx.attr("num_thresholds"), ctx.attr("slide_steps")
        if nt < 1 or steps < 0:
            ctx.fail(f"num_thresholds ({nt}) must be >= 1 and slide_steps ({steps}) >= 0")
        stat = [stat_size(nt, steps)] if steps else [1, nt + 1]
        ctx.set_output("AUC", [1], VarType.FP64)
        ctx.set_output("StatPosOut", stat, VarType.INT64)
        ctx.set_output("StatNegOut", stat, VarType.INT64)

    @classmethod
    def prepare(cls, attrs, outputs):
        nt, steps = attrs["num_thresholds"], attrs["slide_steps"]
        buckets, size = nt + 1, stat_size(nt, steps)

        def kernel(predict, label, stat_pos, stat_neg, ins_tag_weight=None):
            n = predict.shape[0]
            if label.size != n:
                raise ExecutionError(f"auc: Label has {label.size} entries for {n} rows of "
                                     f"Predict {list(predict.shape)}")
            for name, s in (("StatPos", stat_pos), ("StatNeg", stat_neg)):
                if s.size != size:
                    raise ExecutionError(f"auc: {name} has {s.size} entries, want {size} for "
                                         f"num_thresholds={nt}, slide_steps={steps}")
            p = predict.reshape(n, predict.shape[-1])[:, -1]
            if n and not (np.all(p >= 0) and np.all(p <= 1)):  # catches NaN too
                nan = int(np.isnan(p).sum())
                raise ExecutionError(
                    "auc: predictions must lie in [0, 1], got "
                    + (f"{nan} NaN values (has training diverged? try a smaller learning "
                       f"rate)" if nan else f"[{p.min()}, {p.max()}]"))
            bins = (p * np.asarray(nt, p.dtype)).astype(np.int64)
            is_pos = label.reshape(-1) != 0
            counts = (np.bincount(bins[is_pos], minlength=buckets),
                      np.bincount(bins[~is_pos], minlength=buckets))
            # update the state in place (StatPosOut is StatPos: shared across Hogwild
            # workers, and no copy per batch); copy only what cannot be written
            stats = [s.reshape(-1) if s.dtype == np.int64 and s.flags.writeable and
                     s.flags.c_contiguous else s.reshape(-1).astype(np.int64)
                     for s in (stat_pos, stat_neg)]
            total_at = steps * buckets
            cur = int(stats[0][-1]) % steps if steps else 0
            for st, c in zip(stats, counts):
                window = st[cur * buckets:(cur + 1) * buckets]
                total = st[total_at:total_at + buckets]
                if steps:          # the oldest batch slides out of the window
                    total -= window
                    window[:] = c
                total += c
            auc = roc_auc_from_buckets(stats[0][total_at:total_at + buckets],
                                       stats[1][total_at:total_at + buckets])
            if steps:
                stats[0][-1] += 1
                stats[1][-1] += 1
            return (np.array([auc], np.float64),
                    stat_pos if np.shares_memory(stats[0], stat_pos) else
                    stats[0].reshape(stat_pos.shape),
                    stat_neg if np.shares_memory(stats[1], stat_neg) else
                    stats[1].reshape(stat_neg.shape))
        return kernel


# --- mean_iou --------------------------------------------------------------------------------
class MeanIou(OpDef):
    type = "mean_iou"
    inputs = (In("Predictions"), In("Labels"), In("InWrongs", duplicable=True, dispensable=True),
              In("InCorrects", duplicable=True, dispensable=True),
              In("InMeanIou", duplicable=True, dispensable=True))
    outputs = (Out("OutMeanIou"), Out("OutWrong"), Out("OutCorrect"))
    attrs = {"num_classes": 2}
    share_lod = None
    doc = ("Per class c: correct = pixels labelled and predicted c, wrong = pixels where just "
           "one of them is c; OutMeanIou = mean of correct / (correct + wrong) over classes "
           "that occur (plus the In* states, summed in).")

    @staticmethod
    def infer_shape(ctx):
        c = ctx.attr("num_classes")
        ctx.set_output("OutMeanIou", [1], dtypes.VarType.FP32)
        ctx.set_output("OutWrong", [c], dtypes.VarType.INT32)
        ctx.set_output("OutCorrect", [c], dtypes.VarType.INT32)

    @staticmethod
    def kernel(pred, label, in_wrongs, in_corrects, in_ious, *, num_classes):
        p, lab = pred.reshape(-1).astype(np.int64), label.reshape(-1).astype(np.int64)
        c = num_classes
        correct = np.bincount(p[p == lab], minlength=c)[:c].astype(np.int32)
        wrong = (np.bincount(p[p != lab], minlength=c)[:c] +
                 np.bincount(lab[p != lab], minlength=c)[:c]).astype(np.int32)
        for extra in in_wrongs or []:
            wrong = wrong + extra.astype(np.int32)
        for extra in in_corrects or []:
            correct = correct + extra.astype(np.int32)
        denom = wrong + correct
        valid = denom > 0
        iou = (correct[valid] / denom[valid]).sum() / max(valid.sum(), 1)
        iou += sum(float(np.asarray(v).reshape(-1)[0]) for v in (in_ious or []))
        return np.array([iou], np.float32), wrong, correct
