"""Linear-chain CRF ops for sequence labelling: linear_chain_crf (the negative log-likelihood
of a tag sequence, with its gradient), crf_decoding (Viterbi) and chunk_eval (chunk
precision/recall/F1 for IOB, IOE, IOBES and plain tagging schemes).

Transition is [D + 2, D]: row 0 holds the start weights, row 1 the end weights, rows 2.. the
tag-to-tag weights (w[2 + i, j]: tag i followed by tag j). Sequences come as a LoDTensor
Emission [N, D] (its last LoD level) or, with input Length, padded [B, S, D]. Kernels pad the
sequences to [B, Lmax, D] and run the recursions over time for all sequences at once.
"""
import numpy as np

from ..core.tensor import LoDTensor
from ..errors import ExecutionError
from .registry import In, OpDef, Out, ints


def _layout(op, emission, length):
    """(rows [R, D] of Emission, row offsets of every sequence, padded shape or None)."""
    e = emission._array
    if length is not None:
        if e.ndim != 3:
            raise ExecutionError(f"{op}: with input Length, Emission must be [batch, "
                                 f"max_len, tags], got {list(e.shape)}")
        lens = np.asarray(length._array).reshape(-1).astype(np.int64)
        if len(lens) != e.shape[0] or (lens > e.shape[1]).any() or (lens < 0).any():
            raise ExecutionError(f"{op}: Length {lens.tolist()} does not fit Emission of "
                                 f"shape {list(e.shape)}")
        starts = np.arange(len(lens)) * e.shape[1]
        return e.reshape(-1, e.shape[2]), starts, lens, e.shape[:2]
    if not emission._lod:
        raise ExecutionError(f"{op}: Emission has no LoD; feed a LoDTensor of sequences or "
                             f"give input Length with padded Emission")
    if e.ndim != 2:
        raise ExecutionError(f"{op}: Emission with LoD must be [rows, tags], got "
                             f"{list(e.shape)}")
    off = np.asarray(emission._lod[-1], dtype=np.int64)
    if off[-1] != e.shape[0]:
        raise ExecutionError(f"{op}: Emission's LoD ends at {off[-1]} but it has "
                             f"{e.shape[0]} rows")
    return e, off[:-1], np.diff(off), None


def _padded(rows, starts, lens, fill=0.0):
    """rows[starts[b] + t] as [B, Lmax, ...] (fill past each length) and the [B, Lmax] mask."""
    lmax = int(lens.max(initial=0))
    t = np.arange(lmax)
    mask = t[None, :] < lens[:, None]
    idx = np.where(mask, starts[:, None] + t[None, :], 0)
    out = rows[idx] if len(rows) else np.zeros(idx.shape + rows.shape[1:], rows.dtype)
    out[~mask] = fill
    return out, mask


def _labels(op, label, n_rows):
    y = np.asarray(label._array).reshape(-1).astype(np.int64)
    if len(y) != n_rows:
        raise ExecutionError(f"{op}: Label has {len(y)} entries for {n_rows} emission rows")
    return y


def _lse(a, axis):
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    return np.squeeze(m, axis) + np.log(np.sum(np.exp(a - m), axis=axis))


def _check_tags(op, y, mask, d):
    v = y[mask]
    if v.size and (v.min() < 0 or v.max() >= d):
        raise ExecutionError(f"{op}: label {int(v[(v < 0) | (v >= d)][0])} is out of range "
                             f"for {d} tags")


class _CRF:
    """Forward-backward over padded sequences x [B, L, D] (float64) with transition w."""

    def __init__(self, x, mask, lens, w):
        self.x, self.mask, self.lens, self.w = x, mask, lens, w
        b, lmax, d = x.shape
        self.trans = w[2:]
        la = np.zeros((b, lmax, d))
        if lmax:
            la[:, 0] = w[0] + x[:, 0]
        for t in range(1, lmax):
            step = x[:, t] + _lse(la[:, t - 1, :, None] + self.trans[None], axis=1)
            la[:, t] = np.where(mask[:, t, None], step, la[:, t - 1])
        self.la = la
        last = np.maximum(lens - 1, 0)
        self.log_z = _lse(la[np.arange(b), last] + w[1], axis=1) if lmax else np.zeros(b)

    def score(self, y):
        """Score of the tag paths y [B, L]."""
        x, w, mask = self.x, self.w, self.mask
        b, lmax, _ = x.shape
        if not lmax:
            return np.zeros(b)
        rows = np.arange(b)
        s = np.where(mask, np.take_along_axis(x, y[..., None], 2)[..., 0], 0.0).sum(1)
        s += w[0][y[:, 0]] + w[1][y[rows, np.maximum(self.lens - 1, 0)]]
        if lmax > 1:
            s += np.where(mask[:, 1:], self.trans[y[:, :-1], y[:, 1:]], 0.0).sum(1)
        return s

    def nll(self, y):
        return np.where(self.lens > 0, self.log_z - self.score(y), 0.0)

    def grads(self, y, dnll):
        """d nll / d x [B, L, D] and d nll / d w, each scaled by dnll [B]."""
        x, w, mask, lens = self.x, self.w, self.mask, self.lens
        b, lmax, d = x.shape
        lb = np.zeros((b, lmax, d))
        for t in range(lmax - 1, -1, -1):
            nxt = (_lse(self.trans[None] + (x[:, t + 1] + lb[:, t + 1])[:, None, :], axis=2)
                   if t + 1 < lmax else 0.0)
            lb[:, t] = np.where((t == lens - 1)[:, None], w[1], nxt)
        g = dnll * (lens > 0)
        marg = np.exp(self.la + lb - self.log_z[:, None, None]) * mask[..., None]
        onehot = np.eye(d)[y] * mask[..., None]
        dx = (marg - onehot) * g[:, None, None]
        dw = np.zeros_like(w)
        rows = np.arange(b)
        last = np.maximum(lens - 1, 0)
        if lmax:
            dw[0] = (g[:, None] * (marg[:, 0] - onehot[:, 0])).sum(0)
            dw[1] = (g[:, None] * (marg[rows, last] - onehot[rows, last])).sum(0)
        for t in range(1, lmax):
            pair = np.exp(self.la[:, t - 1, :, None] + self.trans[None] +
                          (x[:, t] + lb[:, t])[:, None, :] - self.log_z[:, None, None])
            pair -= onehot[:, t - 1, :, None] * onehot[:, t, None, :]
            dw[2:] += (pair * (g * mask[:, t])[:, None, None]).sum(0)
        return dx, dw


def _crf_setup(op, emission, transition, label, length):
    rows, starts, lens, padded = _layout(op, emission, length)
    w = transition._array.astype(np.float64)
    d = rows.shape[1]
    if w.shape != (d + 2, d):
        raise ExecutionError(f"{op}: Transition must be [tags + 2, tags] = [{d + 2}, {d}], "
                             f"got {list(w.shape)}")
    x, mask = _padded(rows.astype(np.float64), starts, lens)
    y = None
    if label is not None:
        y, _ = _padded(_labels(op, label, len(rows)), starts, lens)
        _check_tags(op, y, mask, d)
    return rows, starts, lens, padded, x, mask, y, w


class LinearChainCRF(OpDef):
    type = "linear_chain_crf"
    inputs = (In("Emission"), In("Transition"), In("Label", no_grad=True),
              In("Length", dispensable=True, no_grad=True))
    outputs = (Out("Alpha", intermediate=True), Out("EmissionExps", intermediate=True),
               Out("TransitionExps", intermediate=True), Out("LogLikelihood"))
    attrs = {}
    kind = "value"
    share_lod = None
    doc = ("LogLikelihood[b] = log Z(x_b) - score(x_b, label_b): the negative log-likelihood "
           "of each sequence's tags (despite the slot's name, as in Paddle).")

    @staticmethod
    def infer_shape(ctx):
        shape, dt = ctx.input_shape("Emission"), ctx.input_dtype("Emission")
        # Alpha and EmissionExps are row for row Emission's, and keep its LoD
        lod = ctx.input_lod_level("Emission")
        ctx.set_output("Alpha", shape, dt, lod)
        ctx.set_output("EmissionExps", shape, dt, lod)
        ctx.set_output("TransitionExps", ctx.input_shape("Transition"), dt, 0)
        ctx.set_output("LogLikelihood", [-1, 1], dt, 0)

    @classmethod
    def prepare(cls, attrs, outputs):
        def kernel(emission, transition, label, length):
            rows, starts, lens, padded, x, mask, y, w = _crf_setup(
                cls.type, emission, transition, label, length)
            crf = _CRF(x, mask, lens, w)
            dt = rows.dtype
            alpha = np.zeros(rows.shape, dt)
            if mask.any():   # Paddle's alpha: each step's forward vector normalized to sum 1
                la = crf.la[mask]
                norm = np.exp(la - la.max(1, keepdims=True))
                alpha[(starts[:, None] + np.arange(mask.shape[1]))[mask]] = \
                    norm / norm.sum(1, keepdims=True)
            em_exps = np.exp(rows - rows.max(1, keepdims=True)) if rows.size else rows.copy()
            shape = emission._array.shape
            return (LoDTensor(alpha.reshape(shape), emission._lod),
                    LoDTensor(em_exps.reshape(shape).astype(dt), emission._lod),
                    LoDTensor(np.exp(transition._array)),
                    LoDTensor(crf.nll(y).reshape(-1, 1).astype(dt)))
        return kernel


    grad = staticmethod(lambda g: g.op(
        "linear_chain_crf_grad",
        {"Emission": g.input("Emission"), "Transition": g.input("Transition"),
         "Label": g.input("Label"), "Length": g.input("Length"), "Alpha": g.output("Alpha"),
         "EmissionExps": g.output("EmissionExps"),
         "TransitionExps": g.output("TransitionExps"),
         "LogLikelihood@GRAD": g.output_grad("LogLikelihood")},
        {"Emission@GRAD": g.input_grad("Emission"),
         "Transition@GRAD": g.input_grad("Transition")}))


class LinearChainCRFGrad(OpDef):
    type = "linear_chain_crf_grad"
    inputs = (In("Emission"), In("Transition"), In("Label"), In("Length", dispensable=True),
              In("Alpha"), In("EmissionExps"), In("TransitionExps"), In("LogLikelihood@GRAD"))
    outputs = (Out("Emission@GRAD", dispensable=True), Out("Transition@GRAD", dispensable=True))
    attrs = {}
    kind = "value"
    infer_shape = None

    @classmethod
    def prepare(cls, attrs, outputs):
        def kernel(emission, transition, label, length, alpha, em_exps, tr_exps, dnll):
            rows, starts, lens, padded, x, mask, y, w = _crf_setup(
                cls.type, emission, transition, label, length)
            crf = _CRF(x, mask, lens, w)
            dx, dw = crf.grads(y, np.asarray(dnll._array, np.float64).reshape(-1))
            demission = np.zeros(rows.shape, rows.dtype)
            demission[(starts[:, None] + np.arange(mask.shape[1]))[mask]] = dx[mask]
            return (LoDTensor(demission.reshape(emission._array.shape), emission._lod),
                    LoDTensor(dw.astype(transition._array.dtype)))
        return kernel


class CRFDecoding(OpDef):
    type = "crf_decoding"
    inputs = (In("Emission"), In("Transition"), In("Label", dispensable=True),
              In("Length", dispensable=True))
    outputs = (Out("ViterbiPath"),)
    attrs = {}
    kind = "value"
    share_lod = None
    doc = ("ViterbiPath: the highest-scoring tag of every row (int64); with Label, 1 where "
           "the path agrees with the label and 0 elsewhere.")

    @staticmethod
    def infer_shape(ctx):
        shape = ctx.input_shape("Emission")
        out = shape[:2] if ctx.has_input("Length") else [shape[0], 1]
        ctx.set_output("ViterbiPath", out, "int64", ctx.input_lod_level("Emission"))

    @classmethod
    def prepare(cls, attrs, outputs):
        def kernel(emission, transition, label, length):
            rows, starts, lens, padded, x, mask, _, w = _crf_setup(
                cls.type, emission, transition, None, length)
            path = cls.viterbi(x, mask, lens, w)
            out = np.zeros(len(rows), np.int64)
            out[(starts[:, None] + np.arange(mask.shape[1]))[mask]] = path[mask]
            if label is not None:
                out = (out == _labels(cls.type, label, len(rows))).astype(np.int64)
                if padded is not None:   # rows past a sequence's end say nothing
                    out[~_padded(np.ones(len(rows), bool), starts, lens)[0].reshape(-1)] = 0
            shape = tuple(padded) if padded is not None else (len(rows), 1)
            return LoDTensor(out.reshape(shape), emission._lod)
        return kernel


    @staticmethod
    def viterbi(x, mask, lens, w):
        """Best tag paths [B, L] (ties go to the lowest tag, as Paddle's loop)."""
        b, lmax, d = x.shape
        path = np.zeros((b, lmax), np.int64)
        if not lmax:
            return path
        trans = w[2:]
        delta = w[0] + x[:, 0]
        track = np.zeros((b, lmax, d), np.int64)
        for t in range(1, lmax):
            cand = delta[:, :, None] + trans[None]
            best = cand.argmax(1)
            step = np.take_along_axis(cand, best[:, None, :], 1)[:, 0] + x[:, t]
            track[:, t] = best
            delta = np.where(mask[:, t, None], step, delta)
        cur = (delta + w[1]).argmax(1)
        for t in range(lmax - 1, -1, -1):
            alive = t <= lens - 1
            path[:, t] = np.where(alive, cur, 0)
            if t:
                back = track[np.arange(b), t, cur]
                cur = np.where(alive & (t > 0), back, cur)
        return path


# --- chunk_eval ------------------------------------------------------------------------------
# scheme -> (number of tag kinds, tag of begin, inside, end, single; -1 where it has none)
CHUNK_SCHEMES = {"IOB": (2, 0, 1, -1, -1), "IOE": (2, -1, 0, 1, -1),
                 "IOBES": (4, 0, 1, 2, 3), "plain": (1, -1, -1, -1, -1)}


def _chunk_end(prev_tag, prev_type, tag, type_, other, begin, inside, end, single):
    if prev_type == other:
        return False
    if type_ == other or type_ != prev_type:
        return True
    if prev_tag in (begin, inside):
        return tag in (begin, single)
    return prev_tag in (end, single)


def _chunk_begin(prev_tag, prev_type, tag, type_, other, begin, inside, end, single):
    if prev_type == other:
        return type_ != other
    if type_ == other:
        return False
    if type_ != prev_type or tag in (begin, single):
        return True
    if tag in (inside, end):
        return prev_tag in (end, single)
    return False


def chunk_segments(labels, num_chunk_types, scheme):
    """[(start, end, type)] of the chunks in one sequence of labels (Paddle's rules)."""
    n_tags, begin, inside, end, single = CHUNK_SCHEMES[scheme]
    other = num_chunk_types
    segs, start, in_chunk, tag, type_ = [], 0, False, -1, other
    for i, lab in enumerate(labels):
        prev_tag, prev_type = tag, type_
        tag, type_ = int(lab) % n_tags, int(lab) // n_tags
        if in_chunk and _chunk_end(prev_tag, prev_type, tag, type_, other, begin, inside, end,
                                   single):
            segs.append((start, i - 1, prev_type))
            in_chunk = False
        if _chunk_begin(prev_tag, prev_type, tag, type_, other, begin, inside, end, single):
            start, in_chunk = i, True
    if in_chunk:
        segs.append((start, len(labels) - 1, type_))
    return segs


class ChunkEval(OpDef):
    type = "chunk_eval"
    inputs = (In("Inference", no_grad=True), In("Label", no_grad=True),
              In("SeqLength", dispensable=True, no_grad=True))
    outputs = (Out("Precision"), Out("Recall"), Out("F1-Score"), Out("NumInferChunks"),
               Out("NumLabelChunks"), Out("NumCorrectChunks"))
    attrs = {"num_chunk_types": 1, "chunk_scheme": "IOB", "excluded_chunk_types": ints()}
    kind = "value"
    share_lod = None
    doc = "Chunk precision, recall and F1 of Inference against Label, and the chunk counts."

    @staticmethod
    def infer_shape(ctx):
        if ctx.attr("chunk_scheme") not in CHUNK_SCHEMES:
            ctx.fail(f"chunk_scheme must be one of {sorted(CHUNK_SCHEMES)}, got "
                     f"{ctx.attr('chunk_scheme')!r}")
        for s in ("Precision", "Recall", "F1-Score"):
            ctx.set_output(s, [1], "float32", 0)
        for s in ("NumInferChunks", "NumLabelChunks", "NumCorrectChunks"):
            ctx.set_output(s, [1], "int64", 0)

    @classmethod
    def prepare(cls, attrs, outputs):
        n_types, scheme = attrs["num_chunk_types"], attrs["chunk_scheme"]
        excluded = set(int(t) for t in attrs["excluded_chunk_types"])
        if scheme not in CHUNK_SCHEMES:
            raise ExecutionError(f"chunk_eval: unknown chunk_scheme {scheme!r}; use one of "
                                 f"{sorted(CHUNK_SCHEMES)}")
        limit = n_types * CHUNK_SCHEMES[scheme][0]

        def kernel(inference, label, seq_length):
            seqs = cls.sequences(inference, label, seq_length)
            n_infer = n_label = n_correct = 0
            for out, lab in seqs:
                for v in (out, lab):
                    if v.size and (v.min() < 0 or v.max() > limit):
                        raise ExecutionError(f"chunk_eval: label {int(v.max())} is out of "
                                             f"range [0, {limit}] for {n_types} chunk types "
                                             f"in scheme {scheme}")
                o = [s for s in chunk_segments(out, n_types, scheme) if s[2] not in excluded]
                t = [s for s in chunk_segments(lab, n_types, scheme) if s[2] not in excluded]
                n_infer, n_label = n_infer + len(o), n_label + len(t)
                n_correct += len(set(o) & set(t))
            p = n_correct / n_infer if n_infer else 0.0
            r = n_correct / n_label if n_label else 0.0
            f1 = 2 * p * r / (p + r) if n_correct else 0.0
            f = [LoDTensor(np.array([v], np.float32)) for v in (p, r, f1)]
            return tuple(f + [LoDTensor(np.array([v], np.int64))
                              for v in (n_infer, n_label, n_correct)])
        return kernel


    @staticmethod
    def sequences(inference, label, seq_length):
        """[(inferred labels, true labels)] of every sequence."""
        a = np.asarray(inference._array).astype(np.int64)
        b = np.asarray(label._array).astype(np.int64)
        if a.shape != b.shape:
            raise ExecutionError(f"chunk_eval: Inference {list(a.shape)} and Label "
                                 f"{list(b.shape)} must have the same shape")
        if seq_length is not None:
            lens = np.asarray(seq_length._array).reshape(-1).astype(np.int64)
            a2, b2 = a.reshape(len(lens), -1), b.reshape(len(lens), -1)
            return [(a2[i, :n], b2[i, :n]) for i, n in enumerate(lens)]
        if not inference._lod:
            raise ExecutionError("chunk_eval: Inference has no LoD; feed LoD tensors or give "
                                 "seq_length with padded input")
        off = inference._lod[-1]
        a, b = a.reshape(-1), b.reshape(-1)
        return [(a[s:e], b[s:e]) for s, e in zip(off[:-1], off[1:])]
