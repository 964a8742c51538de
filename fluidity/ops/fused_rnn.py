"""Fluid 1.8's fused recurrent CPU ops (inference ops: no gradients, as in Fluid).

* fusion_gru: gru(X @ WeightX + Bias) with hidden weight WeightH.
* fusion_lstm: lstm(X @ WeightX) with hidden weight WeightH and Bias (gate bias + peepholes).
* fused_embedding_fc_lstm: lstm(Embeddings[Ids]) where Embeddings is the table already
  multiplied by the input weight, the gate bias included: Bias only brings the peepholes.
* attention_lstm: an LSTM whose input at each step is the attention-pooled sequence (the
  attention scores read the previous cell), with Paddle's gate order [forget, input,
  output, candidate] and one combined weight [(D + M), 4D] over [h_prev, x_att].

The first three run the `gru` / `lstm` ops' own kernels (ops/rnn.py) on the projected input,
so the recurrences are one piece of code. Their batched intermediates (BatchedInput,
BatchedHidden, ReorderedH0, ...) are the rows in the time-major order those kernels use
(rnn.batches); XX is the projected input [T, gates] in X's row order. Paddle uses them as
scratch buffers whose layout depends on `use_seq`; Fluidity accepts `use_seq` and computes
the same Hidden/Cell either way.
"""
import numpy as np

from ..core.tensor import LoDTensor
from ..errors import ExecutionError, ProgramError
from . import fused_parts
from .rnn import ACTS, batches
from .registry import In, OpDef, Out

_ACT_NAMES = tuple(ACTS)


def _act(attrs, name, op):
    """The forward of activation attribute `name` (rnn.ACTS), or ProgramError naming op."""
    value = attrs[name]
    if value not in ACTS:
        raise ProgramError(f"{op}: {name} must be one of {list(_ACT_NAMES)}, got {value!r}")
    return ACTS[value][0]


def _scratch(name):
    return Out(name, dispensable=True, intermediate=True)


def _check_acts(ctx, names):
    for a in names:
        if ctx.attr(a) not in _ACT_NAMES:
            ctx.fail(f"{a} must be one of {list(_ACT_NAMES)}, got {ctx.attr(a)!r}")


def _check_rows(op, slot, t, n, d):
    if t is not None and tuple(t._array.shape) != (n, d):
        raise ExecutionError(f"{op}: {slot} must be [{n}, {d}] (one row per sequence), got "
                             f"{list(t._array.shape)}")


def _project(op, x, wx, wh, gates):
    """X @ WeightX in WeightH's dtype, after checking X [T, M], WeightX [M, G*D] and WeightH
    [D, G*D] fit (a loaded program is not trusted to have passed the build-time rule)."""
    a, w, h = x._array, wx._array, wh._array
    d = h.shape[0] if h.ndim == 2 else -1
    if a.ndim != 2 or w.ndim != 2 or h.shape != (d, gates * d) or \
            w.shape != (a.shape[1], gates * d):
        raise ExecutionError(f"{op}: X {list(a.shape)}, WeightX {list(w.shape)} and WeightH "
                             f"{list(h.shape)} are not [T, M], [M, {gates}D] and [D, {gates}D]")
    return (a @ w).astype(h.dtype, copy=False)


def _reordered(t, order):
    return None if t is None else LoDTensor(t._array[order])


def _projection_shape(ctx, gates):
    """Shared shape rule of fusion_gru/fusion_lstm: X [T, M], WeightX [M, G*D], WeightH
    [D, G*D]; returns (T, D)."""
    xs, wx, wh = ctx.input_shape("X"), ctx.input_shape("WeightX"), ctx.input_shape("WeightH")
    if len(xs) != 2:
        ctx.fail(f"X must be 2-D [T, M], got {xs}")
    if len(wx) != 2 or (xs[1] >= 0 and wx[0] >= 0 and wx[0] != xs[1]):
        ctx.fail(f"WeightX must be [M, {gates}D] with M = X's width {xs[1]}, got {wx}")
    d = wh[0] if len(wh) == 2 else -1
    if len(wh) != 2 or (d >= 0 and wh[1] >= 0 and wh[1] != gates * d):
        ctx.fail(f"WeightH must be [D, {gates}D], got {wh}")
    if d >= 0 and wx[1] >= 0 and wx[1] != gates * d:
        ctx.fail(f"WeightX must have {gates}D = {gates * d} columns, got {wx[1]}")
    return xs[0], d


def _declare_rows(ctx, t, lod, slots_widths):
    """Outputs of T rows: Hidden, Cell and XX keep the input's LoD level, the batched
    scratch none."""
    dt = ctx.input_dtype("X" if ctx.has_input("X") else "Embeddings")
    for slot, width in slots_widths:
        ctx.set_output(slot, [t, width], dt, lod if slot in ("Hidden", "Cell", "XX") else 0)


# --- fusion_gru --------------------------------------------------------------------------
class FusionGRU(OpDef):
    type = "fusion_gru"
    grad_undefined = True    # Fluid registers no gradient maker for it
    inputs = (In("X"), In("H0", dispensable=True), In("WeightX"), In("WeightH"),
              In("Bias", dispensable=True))
    outputs = (_scratch("ReorderedH0"), _scratch("XX"), _scratch("BatchedInput"),
               _scratch("BatchedOut"), Out("Hidden"))
    attrs = {"activation": "tanh", "gate_activation": "sigmoid", "is_reverse": False,
             "use_seq": True}
    kind = "value"
    share_lod = None
    doc = ("Hidden = gru(X @ WeightX + Bias, H0, WeightH) over X's sequences: fc + gru in "
           "one op; gates [update, reset, candidate], h = u * c + (1 - u) * h_prev.")

    @staticmethod
    def infer_shape(ctx):
        _check_acts(ctx, ("activation", "gate_activation"))
        t, d = _projection_shape(ctx, 3)
        if ctx.has_input("Bias"):
            b = ctx.input_shape("Bias")
            if len(b) != 2 or b[0] != 1 or (d >= 0 and b[1] >= 0 and b[1] != 3 * d):
                ctx.fail(f"Bias must be [1, 3D] = [1, {3 * d}], got {b}")
        if ctx.has_input("H0"):
            h = ctx.input_shape("H0")
            if h[-1] >= 0 and d >= 0 and h[-1] != d:
                ctx.fail(f"H0 must be [N, D] with D = {d}, got {h}")
        lod = ctx.input_lod_level("X")
        _declare_rows(ctx, t, lod, (("Hidden", d), ("XX", 3 * d), ("BatchedInput", 3 * d),
                                       ("BatchedOut", d)))
        ctx.set_output("ReorderedH0", [-1, d], ctx.input_dtype("X"), 0)

    @classmethod
    def prepare(cls, attrs, outputs):
        gru = fused_parts.kernel("gru", activation=attrs["activation"],
                                 gate_activation=attrs["gate_activation"],
                                 is_reverse=attrs["is_reverse"], origin_mode=False)
        rev = attrs["is_reverse"]

        def kernel(x, h0, wx, wh, bias):
            off = fused_parts.lod_offsets(x, cls.type, "X")
            d = wh._array.shape[0]
            _check_rows(cls.type, "H0", h0, len(off) - 1, d)
            xx = _project(cls.type, x, wx, wh, 3)
            if bias is not None:
                if bias._array.size != 3 * d:
                    raise ExecutionError(f"{cls.type}: Bias holds {bias._array.size} values, "
                                         f"not 3D = {3 * d}")
                xx += bias._array.reshape(-1)
            xx = LoDTensor(xx, x._lod)
            _gates, _rh, batched_out, hidden = gru(xx, h0, wh, None)
            rows, _bounds, order = batches(off, rev)
            return (_reordered(h0, order), xx, LoDTensor(xx._array[rows]), batched_out, hidden)
        return kernel


# --- fusion_lstm and fused_embedding_fc_lstm -----------------------------------------------
_LSTM_ATTRS = {"use_peepholes": True, "is_reverse": False, "use_seq": True,
               "gate_activation": "sigmoid", "cell_activation": "tanh",
               "candidate_activation": "tanh"}
_LSTM_ACTS = ("gate_activation", "cell_activation", "candidate_activation")


def _lstm_kernel(attrs):
    return fused_parts.kernel("lstm", **{k: attrs[k] for k in ("use_peepholes", "is_reverse")
                                         + _LSTM_ACTS})


def _check_lstm_bias(ctx, d):
    b = ctx.input_shape("Bias")
    want = 7 * d if ctx.attr("use_peepholes") else 4 * d
    if len(b) != 2 or b[0] != 1 or (d >= 0 and b[1] >= 0 and b[1] != want):
        ctx.fail(f"Bias must be [1, {want}] (4D gate bias"
                 f"{' + 3D peepholes' if ctx.attr('use_peepholes') else ''}), got {b}")
    for slot in ("H0", "C0"):
        if ctx.has_input(slot):
            s = ctx.input_shape(slot)
            if s[-1] >= 0 and d >= 0 and s[-1] != d:
                ctx.fail(f"{slot} must be [N, D] with D = {d}, got {s}")


def _run_lstm(op, lstm, xx, off, h0, c0, wh, bias, rev, peep):
    """lstm over the projected input xx (LoDTensor [T, 4D]); returns Paddle's outputs
    Hidden, Cell, XX, BatchedInput, BatchedHidden, BatchedCell, ReorderedH0, ReorderedC0,
    CheckedCell (the last a [2, D] scratch of Paddle's peephole kernel: zeros here)."""
    d = wh._array.shape[0]
    n = len(off) - 1
    _check_rows(op, "H0", h0, n, d)
    _check_rows(op, "C0", c0, n, d)
    hidden, cell, _gates, _cacts = lstm(xx, h0, c0, wh, bias)
    rows, _bounds, order = batches(off, rev)
    checked = LoDTensor(np.zeros((2, d), wh._array.dtype)) if peep else None
    return (hidden, cell, xx, LoDTensor(xx._array[rows]), LoDTensor(hidden._array[rows]),
            LoDTensor(cell._array[rows]), _reordered(h0, order), _reordered(c0, order),
            checked)


class FusionLSTM(OpDef):
    type = "fusion_lstm"
    grad_undefined = True    # Fluid registers no gradient maker for it
    inputs = (In("X"), In("WeightX"), In("WeightH"), In("Bias"), In("H0", dispensable=True),
              In("C0", dispensable=True))
    outputs = (Out("Hidden"), Out("Cell"), _scratch("XX"), _scratch("BatchedInput"),
               _scratch("BatchedHidden"), _scratch("BatchedCell"), _scratch("ReorderedH0"),
               _scratch("ReorderedC0"), _scratch("CheckedCell"))
    attrs = dict(_LSTM_ATTRS)
    kind = "value"
    share_lod = None
    doc = ("Hidden, Cell = lstm(X @ WeightX, H0, C0, WeightH, Bias) over X's sequences: fc + "
           "lstm in one op (the fc bias folded into Bias's first 4D; gates [candidate, "
           "input, forget, output]).")

    @staticmethod
    def infer_shape(ctx):
        _check_acts(ctx, _LSTM_ACTS)
        t, d = _projection_shape(ctx, 4)
        _check_lstm_bias(ctx, d)
        _declare_lstm_outputs(ctx, t, d, ctx.input_lod_level("X"))

    @classmethod
    def prepare(cls, attrs, outputs):
        lstm, rev, peep = _lstm_kernel(attrs), attrs["is_reverse"], attrs["use_peepholes"]

        def kernel(x, wx, wh, bias, h0, c0):
            off = fused_parts.lod_offsets(x, cls.type, "X")
            xx = LoDTensor(_project(cls.type, x, wx, wh, 4), x._lod)
            return _run_lstm(cls.type, lstm, xx, off, h0, c0, wh, bias, rev, peep)
        return kernel


def _declare_lstm_outputs(ctx, t, d, lod):
    _declare_rows(ctx, t, lod, (("Hidden", d), ("Cell", d), ("XX", 4 * d),
                                   ("BatchedInput", 4 * d), ("BatchedHidden", d),
                                   ("BatchedCell", d)))
    dt = ctx.input_dtype("WeightH")
    for slot in ("ReorderedH0", "ReorderedC0"):
        ctx.set_output(slot, [-1, d], dt, 0)
    ctx.set_output("CheckedCell", [2, d], dt, 0)


class FusedEmbeddingFCLSTM(OpDef):
    type = "fused_embedding_fc_lstm"
    grad_undefined = True    # Fluid registers no gradient maker for it
    inputs = (In("Ids", no_grad=True), In("Embeddings"), In("WeightH"), In("Bias"),
              In("H0", dispensable=True), In("C0", dispensable=True))
    outputs = (Out("Hidden"), Out("Cell"), _scratch("XX"), _scratch("BatchedInput"),
               _scratch("BatchedHidden"), _scratch("BatchedCell"), _scratch("ReorderedH0"),
               _scratch("ReorderedC0"))
    attrs = dict(_LSTM_ATTRS)
    kind = "value"
    share_lod = None
    doc = ("Hidden, Cell = lstm(Embeddings[Ids], H0, C0, WeightH) over Ids' sequences, where "
           "Embeddings [V, 4D] is the embedding table already multiplied by the input "
           "weight with the gate bias added: Bias's first 4D are not added again, its last "
           "3D are the peepholes (use_peepholes).")

    @staticmethod
    def infer_shape(ctx):
        _check_acts(ctx, _LSTM_ACTS)
        ids, emb, wh = (ctx.input_shape(s) for s in ("Ids", "Embeddings", "WeightH"))
        d = wh[0] if len(wh) == 2 else -1
        if len(wh) != 2 or (d >= 0 and wh[1] >= 0 and wh[1] != 4 * d):
            ctx.fail(f"WeightH must be [D, 4D], got {wh}")
        if len(emb) != 2 or (d >= 0 and emb[1] >= 0 and emb[1] != 4 * d):
            ctx.fail(f"Embeddings must be [V, 4D] = [V, {4 * d}], got {emb}")
        if len(ids) != 2 or ids[1] != 1:
            ctx.fail(f"Ids must be [T, 1] ids with LoD, got {ids}")
        _check_lstm_bias(ctx, d)
        _declare_lstm_outputs(ctx, ids[0], d, ctx.input_lod_level("Ids"))

    @classmethod
    def prepare(cls, attrs, outputs):
        lstm, rev, peep = _lstm_kernel(attrs), attrs["is_reverse"], attrs["use_peepholes"]
        lookup = fused_parts.kernel("lookup_table")

        def kernel(ids, emb, wh, bias, h0, c0):
            off = fused_parts.lod_offsets(ids, cls.type, "Ids")
            xx = lookup(emb, ids)
            xx = LoDTensor(xx._array.reshape(len(xx._array), -1), ids._lod)
            b = bias._array.copy()
            b.reshape(-1)[:xx._array.shape[1]] = 0     # the gate bias is inside Embeddings
            out = _run_lstm(cls.type, lstm, xx, off, h0, c0, wh, LoDTensor(b), rev, peep)
            return out[:-1]
        return kernel


# --- attention_lstm ------------------------------------------------------------------------
def _softmax(v):
    e = np.exp(v - v.max())
    return e / e.sum()


class AttentionLSTM(OpDef):
    type = "attention_lstm"
    grad_undefined = True    # Fluid registers no gradient maker for it
    inputs = (In("X"), In("C0"), In("H0", dispensable=True), In("AttentionWeight"),
              In("AttentionBias", dispensable=True), In("AttentionScalar", dispensable=True),
              In("AttentionScalarBias", dispensable=True), In("LSTMWeight"), In("LSTMBias"))
    outputs = (Out("Hidden"), Out("Cell"), _scratch("AttentionedX"),
               _scratch("AttentionFCOut"), _scratch("LSTMX"), _scratch("LSTMOUT"))
    attrs = {"gate_activation": "sigmoid", "cell_activation": "tanh",
             "candidate_activation": "tanh"}
    kind = "value"
    share_lod = None
    doc = ("LSTM over each sequence of X [T, M] whose step input is sum_j a_j X[j], a = "
           "softmax_j(relu(scalar * relu([X[j], c_prev] @ AttentionWeight + AttentionBias) "
           "+ scalar_bias)) over the sequence's rows; gates = [h_prev, x_att] @ LSTMWeight + "
           "LSTMBias in the order [forget, input, output, candidate].")

    @staticmethod
    def infer_shape(ctx):
        _check_acts(ctx, tuple(AttentionLSTM.attrs))
        xs, w, b = (ctx.input_shape(s) for s in ("X", "LSTMWeight", "LSTMBias"))
        aw = ctx.input_shape("AttentionWeight")
        if len(xs) != 2:
            ctx.fail(f"X must be 2-D [T, M], got {xs}")
        m = xs[1]
        d = b[1] // 4 if len(b) == 2 and b[1] >= 0 else -1
        if len(b) != 2 or b[0] != 1 or (b[1] >= 0 and b[1] % 4):
            ctx.fail(f"LSTMBias must be [1, 4D], got {b}")
        if len(w) != 2 or (d >= 0 and m >= 0 and w != [d + m, 4 * d]):
            ctx.fail(f"LSTMWeight must be [D + M, 4D] = [{d + m}, {4 * d}], got {w}")
        if len(aw) != 2 or aw[1] != 1 or (d >= 0 and m >= 0 and aw[0] != d + m):
            ctx.fail(f"AttentionWeight must be [M + D, 1] = [{m + d}, 1], got {aw}")
        for slot in ("AttentionBias", "AttentionScalar", "AttentionScalarBias"):
            if ctx.has_input(slot) and ctx.input_shape(slot) != [1, 1]:
                ctx.fail(f"{slot} must be [1, 1], got {ctx.input_shape(slot)}")
        for slot in ("C0", "H0"):
            if ctx.has_input(slot):
                s = ctx.input_shape(slot)
                if len(s) != 2 or (d >= 0 and s[1] >= 0 and s[1] != d):
                    ctx.fail(f"{slot} must be [N, D] with D = {d}, got {s}")
        dt, lod = ctx.input_dtype("X"), ctx.input_lod_level("X")
        for slot in ("Hidden", "Cell"):
            ctx.set_output(slot, [xs[0], d], dt, lod)
        ctx.set_output("AttentionedX", [xs[0], 1], dt, 0)
        ctx.set_output("AttentionFCOut", [-1, 1], dt, 0)
        ctx.set_output("LSTMX", [1, m], dt, 0)
        ctx.set_output("LSTMOUT", [1, 4 * d], dt, 0)

    @classmethod
    def prepare(cls, attrs, outputs):
        gate, cell_act, cand_act = (_act(attrs, a, cls.type) for a in (
            "gate_activation", "cell_activation", "candidate_activation"))
        relu = ACTS["relu"][0]

        def kernel(x, c0, h0, aw, ab, ascalar, asbias, lw, lb):
            off = fused_parts.lod_offsets(x, cls.type, "X")
            xa = x._array
            m, n = xa.shape[1], len(off) - 1
            w, b = lw._array, lb._array.reshape(-1)
            d = b.shape[0] // 4
            _check_rows(cls.type, "C0", c0, n, d)
            _check_rows(cls.type, "H0", h0, n, d)
            awa = aw._array.reshape(-1)
            if w.shape != (d + m, 4 * d) or awa.shape[0] != m + d:
                raise ExecutionError(f"{cls.type}: LSTMWeight {list(w.shape)} and "
                                     f"AttentionWeight {list(aw._array.shape)} do not fit X "
                                     f"width M = {m} and D = {d}")
            w_h, w_x = w[:d], w[d:]
            atted = xa @ awa[:m]
            if ab is not None:
                atted = atted + ab._array.reshape(-1)[0]
            scalar = None if ascalar is None else ascalar._array.reshape(-1)[0]
            sbias = 0 if asbias is None else asbias._array.reshape(-1)[0]
            hidden, cell = np.empty((len(xa), d), xa.dtype), np.empty((len(xa), d), xa.dtype)
            fc_out = lstm_x = lstm_out = None
            for i in range(n):
                a, e = off[i], off[i + 1]
                xi, c = xa[a:e], c0._array[i]
                h = None if h0 is None else h0._array[i]
                for t in range(a, e):
                    fc_out = relu(atted[a:e] + c @ awa[m:])
                    if scalar is not None:
                        fc_out = relu(fc_out * scalar + sbias)
                    lstm_x = _softmax(fc_out) @ xi
                    lstm_out = lstm_x @ w_x + b
                    if h is not None:
                        lstm_out = lstm_out + h @ w_h
                    f, ig, o = (gate(lstm_out[k * d:(k + 1) * d]) for k in range(3))
                    c = f * c + ig * cand_act(lstm_out[3 * d:])
                    h = o * cell_act(c)
                    hidden[t], cell[t] = h, c
            scratch = [None if v is None else LoDTensor(np.asarray(v, xa.dtype).reshape(1, -1))
                       for v in (lstm_x, lstm_out)]
            fc = None if fc_out is None else LoDTensor(fc_out.reshape(-1, 1).astype(xa.dtype))
            return (LoDTensor(hidden, x._lod), LoDTensor(cell, x._lod),
                    LoDTensor(atted.reshape(-1, 1).astype(xa.dtype)), fc, *scratch)
        return kernel
