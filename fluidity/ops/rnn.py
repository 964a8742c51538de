"""Recurrent ops: Fluid's `lstm` (dynamic_lstm), `gru` (dynamic_gru), `lstm_unit`, `gru_unit`
over LoD sequences, and Paddle 2.x's `rnn` op (paddle.nn.LSTM/GRU/SimpleRNN in static
mode), all with gradients.

Sequences are never padded. `lstm`/`gru` reorder the packed rows into time-major *batches*
(Paddle's LoDTensor2Batch): sequences sorted by length, longest first, so the sequences still
running at step t are a prefix of that order; step t is one matrix product over all of them.

Gate layouts (Paddle's):
* lstm: Input/BatchGate columns [candidate, input, forget, output]; Bias [1, 4D], or [1, 7D]
  with peepholes (then W_ic, W_fc, W_oc follow); BatchCellPreAct holds act(cell).
* lstm_unit: X columns [input, forget, output, candidate]; f = sigmoid(f + forget_bias).
* gru, gru_unit: columns [update, reset, candidate]; Weight [D, 3D] is stored flat: its first
  2D*D values are the [D, 2D] gate weight, the last D*D the [D, D] candidate weight.
  h = u * c + (1 - u) * h_prev, or u * h_prev + (1 - u) * c with origin_mode.
* rnn: WeightList = every (layer, direction)'s W_ih [G*H, in], W_hh [G*H, H], then every
  b_ih, b_hh in the same order; LSTM gates [i, f, c, o], GRU [r, z, c] with
  c = tanh(x_c + r * (W_hc h + b_hc)) and h = z * h_prev + (1 - z) * c. Its gradient reruns
  the forward (keeping each step's states) and walks the steps back; Reserve holds the
  dropout masks between layers.
"""
import numpy as np

from ..core import philox
from ..core.tensor import LoDTensor
from ..errors import ExecutionError
from .registry import In, OpDef, Out


def _sigmoid(x):
    """Fluid 1.8's sigmoid of its lstm / gru / lstmp kernels: the input clipped to
    [-40, 13] first (1 - sigmoid(13) ~ 2.3e-6 shows in their outputs)."""
    return 1.0 / (1.0 + np.exp(-np.clip(x, -40.0, 13.0)))


def _sigmoid_unclipped(x):
    return 1.0 / (1.0 + np.exp(-x))


# activation: (function, derivative written in terms of the activation's output)
ACTS = {
    "sigmoid": (_sigmoid, lambda y: y * (1.0 - y)),
    "tanh": (np.tanh, lambda y: 1.0 - y * y),
    "relu": (lambda x: np.maximum(x, 0), lambda y: (y > 0).astype(y.dtype)),
    "identity": (lambda x: x, lambda y: np.ones_like(y)),
}
ACT_CODES = ["identity", "sigmoid", "tanh", "relu"]   # gru_unit's int attributes


def _act(name, op):
    if isinstance(name, int):
        name = ACT_CODES[name] if 0 <= name < len(ACT_CODES) else str(name)
    if name not in ACTS:
        raise ExecutionError(f"{op}: unknown activation {name!r} (one of {list(ACTS)})")
    if op.startswith("gru_unit") and name == "sigmoid":   # Fluid's gru_unit does not clip
        return _sigmoid_unclipped, ACTS[name][1]
    return ACTS[name]


def _seq_offsets(t, op):
    if t is None or not t._lod:
        raise ExecutionError(f"{op}: input Input has no LoD; feed a LoDTensor with sequence "
                             f"lengths (fluid.create_lod_tensor)")
    off = np.asarray(t._lod[-1], dtype=np.int64)
    if off[-1] != t._array.shape[0]:
        raise ExecutionError(f"{op}: LoD of input Input ends at {off[-1]} but it has "
                             f"{t._array.shape[0]} rows")
    return off


def batches(off, reverse=False):
    """Time-major order of packed rows. Returns (rows, bounds, order): `order` sorts the
    sequences longest first (stable); step t holds rows[bounds[t]:bounds[t+1]], the t-th row
    (from the end when `reverse`) of sequences order[:bounds[t+1] - bounds[t]]."""
    lens = np.diff(off)
    order = np.argsort(-lens, kind="stable")
    steps = int(lens.max(initial=0))
    active = lens[order][None, :] > np.arange(steps)[:, None]
    t, k = np.nonzero(active)
    seq = order[k]
    rows = off[seq + 1] - 1 - t if reverse else off[seq] + t
    bounds = np.concatenate([[0], np.cumsum(active.sum(1))]).astype(np.int64)
    return rows, bounds, order


def _initial(h0, order, n, d, dtype):
    return np.zeros((n, d), dtype) if h0 is None else h0._array[order].astype(dtype, copy=False)


def _arr(t):
    return None if t is None else t._array


def _lstm_grad(g):
    ins = {n: g.input(n) for n in ("Input", "H0", "C0", "Weight", "Bias") if g.input(n)}
    ins.update({n: g.output(n) for n in ("Hidden", "Cell", "BatchGate", "BatchCellPreAct")})
    ins["Hidden@GRAD"], ins["Cell@GRAD"] = g.output_grad("Hidden"), g.output_grad("Cell")
    outs = {n + "@GRAD": g.input_grad(n) for n in ("Input", "H0", "C0", "Weight", "Bias")
            if g.input(n)}
    g.op("lstm_grad", ins, outs, g.attrs())


class LSTM(OpDef):
    type = "lstm"
    inputs = (In("Input"), In("H0", dispensable=True), In("C0", dispensable=True),
              In("Weight"), In("Bias"))
    outputs = (Out("Hidden"), Out("Cell"), Out("BatchGate", intermediate=True),
               Out("BatchCellPreAct", intermediate=True))
    attrs = {"use_peepholes": True, "is_reverse": False, "is_test": False,
             "gate_activation": "sigmoid", "cell_activation": "tanh",
             "candidate_activation": "tanh"}
    kind = "value"
    share_lod = None
    doc = "LSTM over LoD sequences of projected inputs [T, 4D] (Fluid's dynamic_lstm)."

    @staticmethod
    def infer_shape(ctx):
        shape, w = ctx.input_shape("Input"), ctx.input_shape("Weight")
        d = w[0]
        if len(shape) != 2 or w != [d, 4 * d] or (shape[1] > 0 and shape[1] != 4 * d):
            ctx.fail(f"Input must be [T, 4D] and Weight [D, 4D] (got D = {d})")
        b = ctx.input_shape("Bias")
        want = 7 * d if ctx.attr("use_peepholes") else 4 * d
        if b[-1] != want:
            ctx.fail(f"Bias must be [1, {want}] (use_peepholes={ctx.attr('use_peepholes')})")
        dt, lvl = ctx.input_dtype("Input"), ctx.input_lod_level("Input")
        for slot in ("Hidden", "Cell"):
            ctx.set_output(slot, [-1, d], dt, lvl)
        if ctx.has_output("BatchGate"):
            ctx.set_output("BatchGate", [-1, 4 * d], dt, 0)
        if ctx.has_output("BatchCellPreAct"):
            ctx.set_output("BatchCellPreAct", [-1, d], dt, 0)

    @staticmethod
    def acts(attrs):
        return (_act(attrs["gate_activation"], "lstm"), _act(attrs["cell_activation"], "lstm"),
                _act(attrs["candidate_activation"], "lstm"))

    @classmethod
    def prepare(cls, attrs, outputs):
        (gate, _), (cell_act, _), (cand_act, _) = cls.acts(attrs)
        peep, rev = attrs["use_peepholes"], attrs["is_reverse"]

        def kernel(x, h0, c0, weight, bias):
            off = _seq_offsets(x, "lstm")
            w, b = weight._array, bias._array.reshape(-1)
            d = w.shape[0]
            rows, bounds, order = batches(off, rev)
            g_all = x._array[rows] + b[:4 * d]
            wic, wfc, woc = (b[4 * d:5 * d], b[5 * d:6 * d], b[6 * d:]) if peep else (0, 0, 0)
            h = _initial(h0, order, len(order), d, w.dtype)
            c = _initial(c0, order, len(order), d, w.dtype)
            gates, cells, cacts = np.empty_like(g_all), np.empty((len(rows), d), w.dtype), \
                np.empty((len(rows), d), w.dtype)
            hid = np.empty_like(cells)
            for t in range(len(bounds) - 1):
                a, e = bounds[t], bounds[t + 1]
                hp, cp = h[:e - a], c[:e - a]
                g = g_all[a:e] + hp @ w
                cand = cand_act(g[:, :d])
                ig = gate(g[:, d:2 * d] + cp * wic)
                fg = gate(g[:, 2 * d:3 * d] + cp * wfc)
                c = cand * ig + cp * fg
                og = gate(g[:, 3 * d:] + c * woc)
                ca = cell_act(c)
                h = og * ca
                gates[a:e] = np.concatenate([cand, ig, fg, og], 1)
                cells[a:e], cacts[a:e], hid[a:e] = c, ca, h
            hidden, cell = np.empty_like(hid), np.empty_like(cells)
            hidden[rows], cell[rows] = hid, cells
            return (LoDTensor(hidden, x._lod), LoDTensor(cell, x._lod), LoDTensor(gates),
                    LoDTensor(cacts))
        return kernel


    grad = staticmethod(_lstm_grad)


class LSTMGrad(OpDef):
    type = "lstm_grad"
    inputs = tuple(In(n, dispensable=True) for n in (
        "Input", "H0", "C0", "Weight", "Bias", "Hidden", "Cell", "BatchGate", "BatchCellPreAct",
        "Hidden@GRAD", "Cell@GRAD"))
    outputs = tuple(Out(n + "@GRAD", dispensable=True) for n in ("Input", "H0", "C0", "Weight",
                                                                  "Bias"))
    attrs = LSTM.attrs
    kind = "value"
    infer_shape = None

    @classmethod
    def prepare(cls, attrs, outputs):
        (_, dgate), (_, dcell), (_, dcand_act) = LSTM.acts(attrs)
        peep, rev = attrs["use_peepholes"], attrs["is_reverse"]

        def kernel(x, h0, c0, weight, bias, hidden, cell, batch_gate, cell_act, dh_out, dc_out):
            off = _seq_offsets(x, "lstm_grad")
            w, b = weight._array, bias._array.reshape(-1)
            d, n_seq = w.shape[0], len(off) - 1
            rows, bounds, order = batches(off, rev)
            gates, cacts = batch_gate._array, cell_act._array
            hid, cells = hidden._array[rows], cell._array[rows]
            dh_all = _arr(dh_out)[rows] if dh_out is not None else np.zeros_like(hid)
            dc_all = _arr(dc_out)[rows] if dc_out is not None else np.zeros_like(cells)
            wic, wfc, woc = (b[4 * d:5 * d], b[5 * d:6 * d], b[6 * d:]) if peep else (0, 0, 0)
            h_init = _initial(h0, order, n_seq, d, w.dtype)
            c_init = _initial(c0, order, n_seq, d, w.dtype)
            dg_all = np.empty_like(gates)
            dw = np.zeros_like(w)
            dpeep = np.zeros(3 * d, w.dtype)
            dh_next, dc_next = np.zeros((n_seq, d), w.dtype), np.zeros((n_seq, d), w.dtype)
            for t in range(len(bounds) - 2, -1, -1):
                a, e = bounds[t], bounds[t + 1]
                n = e - a
                if t == 0:
                    hp, cp = h_init[:n], c_init[:n]
                else:
                    hp, cp = hid[bounds[t - 1]:bounds[t - 1] + n], \
                        cells[bounds[t - 1]:bounds[t - 1] + n]
                cand, ig, fg, og = np.split(gates[a:e], 4, axis=1)
                c, ca = cells[a:e], cacts[a:e]
                dh = dh_all[a:e] + dh_next[:n]
                dog = dh * ca * dgate(og)
                dc = dc_all[a:e] + dc_next[:n] + dh * og * dcell(ca) + dog * woc
                dcand = dc * ig * dcand_act(cand)
                dig = dc * cand * dgate(ig)
                dfg = dc * cp * dgate(fg)
                dg = np.concatenate([dcand, dig, dfg, dog], 1)
                dg_all[a:e] = dg
                dw += hp.T @ dg
                dh_next[:n] = dg @ w.T
                dc_next[:n] = dc * fg + dig * wic + dfg * wfc
                if peep:
                    dpeep += np.concatenate([(dig * cp).sum(0), (dfg * cp).sum(0),
                                             (dog * c).sum(0)])
            dx = np.empty_like(x._array)
            dx[rows] = dg_all
            db = dg_all.sum(0)
            if peep:
                db = np.concatenate([db, dpeep])
            dh0, dc0 = np.empty_like(dh_next), np.empty_like(dc_next)
            dh0[order], dc0[order] = dh_next, dc_next
            return (LoDTensor(dx, x._lod), LoDTensor(dh0), LoDTensor(dc0), LoDTensor(dw),
                    LoDTensor(db.reshape(bias._array.shape).astype(w.dtype)))
        return kernel


# --- gru (and the step it shares with gru_unit) ---------------------------------------------
def _gru_weights(w):
    d = w.shape[0]
    flat = w.reshape(-1)
    return flat[:2 * d * d].reshape(d, 2 * d), flat[2 * d * d:].reshape(d, d)


def _gru_step(g, hp, w_ur, w_c, gate, act, origin):
    """One GRU step for rows g ([n, 3D] projected input + bias) and previous states hp.
    Returns (gates [u, r, c], reset hidden prev r * hp, h)."""
    d = hp.shape[1]
    ur = gate(g[:, :2 * d] + hp @ w_ur)
    u, r = ur[:, :d], ur[:, d:]
    rh = r * hp
    c = act(g[:, 2 * d:] + rh @ w_c)
    h = u * hp + (1 - u) * c if origin else u * c + (1 - u) * hp
    return np.concatenate([ur, c], 1), rh, h


def _gru_step_grad(gates, rh, hp, dh, w_ur, w_c, dgate, dact, origin):
    """Backward of one step: returns (d of [u, r, c] pre-activations, d hp, dW_ur, dW_c)."""
    d = hp.shape[1]
    u, r, c = gates[:, :d], gates[:, d:2 * d], gates[:, 2 * d:]
    if origin:
        du, dhp, dc = dh * (hp - c), dh * u, dh * (1 - u)
    else:
        du, dhp, dc = dh * (c - hp), dh * (1 - u), dh * u
    dc = dc * dact(c)
    drh = dc @ w_c.T
    dur = np.concatenate([du * dgate(u), drh * hp * dgate(r)], 1)
    dhp = dhp + drh * r + dur @ w_ur.T
    return np.concatenate([dur, dc], 1), dhp, hp.T @ dur, rh.T @ dc


def _gru_grad(g):
    ins = {n: g.input(n) for n in ("Input", "H0", "Weight", "Bias") if g.input(n)}
    ins.update({n: g.output(n) for n in ("BatchGate", "BatchResetHiddenPrev", "BatchHidden",
                                         "Hidden")})
    ins["Hidden@GRAD"] = g.output_grad("Hidden")
    outs = {n + "@GRAD": g.input_grad(n) for n in ("Input", "H0", "Weight", "Bias")
            if g.input(n)}
    g.op("gru_grad", ins, outs, g.attrs())


class GRU(OpDef):
    type = "gru"
    inputs = (In("Input"), In("H0", dispensable=True), In("Weight"), In("Bias", dispensable=True))
    outputs = (Out("BatchGate", intermediate=True), Out("BatchResetHiddenPrev", intermediate=True),
               Out("BatchHidden", intermediate=True), Out("Hidden"))
    attrs = {"activation": "tanh", "gate_activation": "sigmoid", "is_reverse": False,
             "origin_mode": False, "is_test": False}
    kind = "value"
    share_lod = None
    doc = "GRU over LoD sequences of projected inputs [T, 3D] (Fluid's dynamic_gru)."

    @staticmethod
    def infer_shape(ctx):
        shape, w = ctx.input_shape("Input"), ctx.input_shape("Weight")
        d = w[0]
        if len(shape) != 2 or w != [d, 3 * d] or (shape[1] > 0 and shape[1] != 3 * d):
            ctx.fail(f"Input must be [T, 3D] and Weight [D, 3D] (got D = {d})")
        dt = ctx.input_dtype("Input")
        ctx.set_output("Hidden", [-1, d], dt, ctx.input_lod_level("Input"))
        for slot, width in (("BatchGate", 3 * d), ("BatchResetHiddenPrev", d),
                            ("BatchHidden", d)):
            if ctx.has_output(slot):
                ctx.set_output(slot, [-1, width], dt, 0)

    @classmethod
    def prepare(cls, attrs, outputs):
        gate, _ = _act(attrs["gate_activation"], "gru")
        act, _ = _act(attrs["activation"], "gru")
        rev, origin = attrs["is_reverse"], attrs["origin_mode"]

        def kernel(x, h0, weight, bias):
            off = _seq_offsets(x, "gru")
            w = weight._array
            d = w.shape[0]
            w_ur, w_c = _gru_weights(w)
            rows, bounds, order = batches(off, rev)
            g_all = x._array[rows]
            if bias is not None:
                g_all = g_all + bias._array.reshape(-1)
            h = _initial(h0, order, len(order), d, w.dtype)
            gates, rhs = np.empty_like(g_all), np.empty((len(rows), d), w.dtype)
            hid = np.empty_like(rhs)
            for t in range(len(bounds) - 1):
                a, e = bounds[t], bounds[t + 1]
                gates[a:e], rhs[a:e], h = _gru_step(g_all[a:e], h[:e - a], w_ur, w_c, gate,
                                                     act, origin)
                hid[a:e] = h
            hidden = np.empty_like(hid)
            hidden[rows] = hid
            return (LoDTensor(gates), LoDTensor(rhs), LoDTensor(hid), LoDTensor(hidden, x._lod))
        return kernel


    grad = staticmethod(_gru_grad)


class GRUGrad(OpDef):
    type = "gru_grad"
    inputs = tuple(In(n, dispensable=True) for n in (
        "Input", "H0", "Weight", "Bias", "BatchGate", "BatchResetHiddenPrev", "BatchHidden",
        "Hidden", "Hidden@GRAD"))
    outputs = tuple(Out(n + "@GRAD", dispensable=True) for n in ("Input", "H0", "Weight",
                                                                  "Bias"))
    attrs = GRU.attrs
    kind = "value"
    infer_shape = None

    @classmethod
    def prepare(cls, attrs, outputs):
        _, dgate = _act(attrs["gate_activation"], "gru")
        _, dact = _act(attrs["activation"], "gru")
        rev, origin = attrs["is_reverse"], attrs["origin_mode"]

        def kernel(x, h0, weight, bias, batch_gate, batch_rh, batch_hidden, hidden, dh_out):
            off = _seq_offsets(x, "gru_grad")
            w = weight._array
            d, n_seq = w.shape[0], len(off) - 1
            w_ur, w_c = _gru_weights(w)
            rows, bounds, order = batches(off, rev)
            gates, rhs, hid = batch_gate._array, batch_rh._array, batch_hidden._array
            dh_all = dh_out._array[rows]
            h_init = _initial(h0, order, n_seq, d, w.dtype)
            dg_all = np.empty_like(gates)
            dw_ur, dw_c = np.zeros_like(w_ur), np.zeros_like(w_c)
            dh_next = np.zeros((n_seq, d), w.dtype)
            for t in range(len(bounds) - 2, -1, -1):
                a, e = bounds[t], bounds[t + 1]
                n = e - a
                hp = h_init[:n] if t == 0 else hid[bounds[t - 1]:bounds[t - 1] + n]
                dg_all[a:e], dh_next[:n], dwu, dwc = _gru_step_grad(
                    gates[a:e], rhs[a:e], hp, dh_all[a:e] + dh_next[:n], w_ur, w_c, dgate,
                    dact, origin)
                dw_ur += dwu
                dw_c += dwc
            dx = np.empty_like(x._array)
            dx[rows] = dg_all
            dh0 = np.empty_like(dh_next)
            dh0[order] = dh_next
            dw = np.concatenate([dw_ur.reshape(-1), dw_c.reshape(-1)]).reshape(w.shape)
            db = None if bias is None else LoDTensor(dg_all.sum(0).reshape(bias._array.shape))
            return LoDTensor(dx, x._lod), LoDTensor(dh0), LoDTensor(dw), db
        return kernel


def _gru_unit_grad(g):
    ins = {n: g.input(n) for n in ("Input", "HiddenPrev", "Weight", "Bias") if g.input(n)}
    ins.update({"Gate": g.output("Gate"), "ResetHiddenPrev": g.output("ResetHiddenPrev"),
                "Hidden@GRAD": g.output_grad("Hidden")})
    outs = {n + "@GRAD": g.input_grad(n) for n in ("Input", "HiddenPrev", "Weight", "Bias")
            if g.input(n)}
    g.op("gru_unit_grad", ins, outs, g.attrs())


# --- gru_unit / lstm_unit: one step over a dense batch --------------------------------------
class GRUUnit(OpDef):
    type = "gru_unit"
    inputs = (In("Input"), In("HiddenPrev"), In("Weight"), In("Bias", dispensable=True))
    outputs = (Out("Gate", intermediate=True), Out("ResetHiddenPrev", intermediate=True),
               Out("Hidden"))
    attrs = {"activation": 2, "gate_activation": 1, "origin_mode": False}
    share_lod = None
    lod_outputs = ("Gate", "ResetHiddenPrev", "Hidden")
    doc = "One GRU step: Input [N, 3D] (projected x), HiddenPrev [N, D] -> Hidden [N, D]."

    @staticmethod
    def infer_shape(ctx):
        shape, w = ctx.input_shape("Input"), ctx.input_shape("Weight")
        d = w[0]
        if w != [d, 3 * d] or (shape[-1] > 0 and shape[-1] != 3 * d):
            ctx.fail(f"Input must be [N, 3D] and Weight [D, 3D] (got D = {d})")
        dt = ctx.input_dtype("Input")
        ctx.set_output("Gate", [shape[0], 3 * d], dt)
        ctx.set_output("ResetHiddenPrev", [shape[0], d], dt)
        ctx.set_output("Hidden", [shape[0], d], dt)

    @classmethod
    def prepare(cls, attrs, outputs):
        gate, _ = _act(attrs["gate_activation"], "gru_unit")
        act, _ = _act(attrs["activation"], "gru_unit")

        def kernel(x, hp, w, b):
            w_ur, w_c = _gru_weights(w)
            g = x if b is None else x + b.reshape(-1)
            return _gru_step(g, hp, w_ur, w_c, gate, act, attrs["origin_mode"])
        return kernel


    grad = staticmethod(_gru_unit_grad)


class GRUUnitGrad(OpDef):
    type = "gru_unit_grad"
    inputs = (In("Input"), In("HiddenPrev"), In("Weight"), In("Bias", dispensable=True),
              In("Gate"), In("ResetHiddenPrev"), In("Hidden@GRAD"))
    outputs = tuple(Out(n + "@GRAD", dispensable=True) for n in ("Input", "HiddenPrev",
                                                                  "Weight", "Bias"))
    attrs = GRUUnit.attrs
    infer_shape = None

    @classmethod
    def prepare(cls, attrs, outputs):
        _, dgate = _act(attrs["gate_activation"], "gru_unit")
        _, dact = _act(attrs["activation"], "gru_unit")

        def kernel(x, hp, w, b, gates, rh, dh):
            w_ur, w_c = _gru_weights(w)
            dg, dhp, dwu, dwc = _gru_step_grad(gates, rh, hp, dh, w_ur, w_c, dgate, dact,
                                               attrs["origin_mode"])
            dw = np.concatenate([dwu.reshape(-1), dwc.reshape(-1)]).reshape(w.shape)
            db = None if b is None else dg.sum(0).reshape(b.shape)
            return dg, dhp, dw, db
        return kernel


class LSTMUnit(OpDef):
    type = "lstm_unit"
    share_lod = None
    lod_outputs = ("C", "H")
    inputs = (In("X"), In("C_prev"))
    outputs = (Out("C"), Out("H"))
    attrs = {"forget_bias": 0.0}
    doc = "One LSTM step: X [N, 4D] = [i, f, o, candidate] pre-activations, C_prev [N, D]."

    @staticmethod
    def infer_shape(ctx):
        x, c = ctx.input_shape("X"), ctx.input_shape("C_prev")
        if x[-1] > 0 and c[-1] > 0 and x[-1] != 4 * c[-1]:
            ctx.fail("X must be [N, 4D] for C_prev [N, D]")
        ctx.share("C_prev", "C")
        ctx.share("C_prev", "H")

    @staticmethod
    def gates(x, forget_bias):
        i, f, o, g = np.split(x, 4, axis=1)
        sig = _sigmoid_unclipped          # Fluid's lstm_unit does not clip
        return sig(i), sig(f + forget_bias), sig(o), np.tanh(g)

    @classmethod
    def kernel(cls, x, c_prev, *, forget_bias):
        i, f, o, g = cls.gates(x, forget_bias)
        c = f * c_prev + i * g
        return c, o * np.tanh(c)


    grad = staticmethod(lambda g: g.op(
        "lstm_unit_grad", {"X": g.input("X"), "C_prev": g.input("C_prev"), "C": g.output("C"),
                           "H": g.output("H"), "C@GRAD": g.output_grad("C"),
                           "H@GRAD": g.output_grad("H")},
        {"X@GRAD": g.input_grad("X"), "C_prev@GRAD": g.input_grad("C_prev")}, g.attrs()))


class LSTMUnitGrad(OpDef):
    type = "lstm_unit_grad"
    inputs = (In("X"), In("C_prev"), In("C"), In("H"), In("C@GRAD"), In("H@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True), Out("C_prev@GRAD", dispensable=True))
    attrs = LSTMUnit.attrs
    infer_shape = None

    @staticmethod
    def kernel(x, c_prev, c, h, dc, dh, *, forget_bias):
        i, f, o, g = LSTMUnit.gates(x, forget_bias)
        tc = np.tanh(c)
        dc = dc + dh * o * (1 - tc * tc)
        dx = np.concatenate([dc * g * i * (1 - i), dc * c_prev * f * (1 - f),
                             dh * tc * o * (1 - o), dc * i * (1 - g * g)], 1)
        return dx, dc * f


# --- Paddle 2.x `rnn` (cuDNN-style multi-layer, bidirectional; dense time-major input) ------
GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _relu(v):
    return np.maximum(v, 0)


def _rnn_cell(mode):
    """(step, back) for one time step of `mode`. step(xg, states, w_hh, b_hh) -> new states,
    with xg = x @ W_ih^T + b_ih. back(xg, states, w_hh, b_hh, dnew) -> (d states, d xg,
    d of h @ W_hh^T + b_hh), given the gradients dnew of the new states."""
    if mode == "LSTM":
        def gates(xg, h, c, w_hh, b_hh):
            i, f, g, o = np.split(xg + h @ w_hh.T + b_hh, 4, axis=1)
            sig = _sigmoid_unclipped
            return sig(i), sig(f), np.tanh(g), sig(o)

        def step(xg, states, w_hh, b_hh):
            h, c = states
            i, f, g, o = gates(xg, h, c, w_hh, b_hh)
            c = f * c + i * g
            return [o * np.tanh(c), c]

        def back(xg, states, w_hh, b_hh, dnew):
            h, c = states
            i, f, g, o = gates(xg, h, c, w_hh, b_hh)
            tc = np.tanh(f * c + i * g)
            dh, dc = dnew
            dc = dc + dh * o * (1 - tc * tc)
            dz = np.concatenate([dc * g * i * (1 - i), dc * c * f * (1 - f),
                                 dc * i * (1 - g * g), dh * tc * o * (1 - o)], 1)
            return [dz @ w_hh, dc * f], dz, dz
    elif mode == "GRU":
        def parts(xg, h, w_hh, b_hh):
            xr, xz, xc = np.split(xg, 3, axis=1)
            hr, hz, hc = np.split(h @ w_hh.T + b_hh, 3, axis=1)
            r, z = _sigmoid_unclipped(xr + hr), _sigmoid_unclipped(xz + hz)
            return r, z, np.tanh(xc + r * hc), hc

        def step(xg, states, w_hh, b_hh):
            h, = states
            r, z, c, _ = parts(xg, h, w_hh, b_hh)
            return [z * h + (1 - z) * c]

        def back(xg, states, w_hh, b_hh, dnew):
            h, = states
            dh, = dnew
            r, z, c, hc = parts(xg, h, w_hh, b_hh)
            dzp = dh * (h - c) * z * (1 - z)
            dcp = dh * (1 - z) * (1 - c * c)
            drp = dcp * hc * r * (1 - r)
            dhg = np.concatenate([drp, dzp, dcp * r], 1)
            return [dh * z + dhg @ w_hh], np.concatenate([drp, dzp, dcp], 1), dhg
    else:
        act, dact = (np.tanh, lambda y: 1 - y * y) if mode == "RNN_TANH" else \
            (_relu, lambda y: (y > 0).astype(y.dtype))

        def step(xg, states, w_hh, b_hh):
            return [act(xg + states[0] @ w_hh.T + b_hh)]

        def back(xg, states, w_hh, b_hh, dnew):
            dz = dnew[0] * dact(step(xg, states, w_hh, b_hh)[0])
            return [dz @ w_hh], dz, dz
    return step, back


def _rnn_forward(attrs, x, pre_states, weights, seq_len, masks=None, tape=None, draw=None):
    """Run every layer and direction. Returns (out, final states per slot, dropout masks).
    `masks` replays the dropout masks of an earlier run, else `draw` = (k0, k1, run) draws
    them from the Philox stream (core/philox.py: layer l's mask from the words after the
    earlier layers'; a seeded op's key is (seed, 0)); `tape` (a list) records per (layer,
    direction): its input, xg, the steps in order and the states before each."""
    layers, dirs = attrs["num_layers"], 2 if attrs["is_bidirec"] else 1
    p = 0.0 if attrs["is_test"] else attrs["dropout_prob"]
    step, _ = _rnn_cell(attrs["mode"])
    n_w = 2 * layers * dirs
    if len(weights) != 2 * n_w:
        raise ExecutionError(f"rnn: WeightList has {len(weights)} tensors; {layers} layer(s) x "
                             f"{dirs} direction(s) need {2 * n_w}")
    steps, batch = x.shape[:2]
    valid = None
    if seq_len is not None:
        valid = (np.arange(steps)[:, None] < np.asarray(seq_len).reshape(-1))[..., None]
    if draw is None:
        draw = philox.key_and_run(attrs["seed"], None, 0) if attrs["seed"] else None
    inp, finals, used_masks = x, [[] for _ in pre_states], []
    for layer in range(layers):
        outs = []
        for d in range(dirs):
            k = layer * dirs + d
            w_ih, w_hh = weights[2 * k], weights[2 * k + 1]
            b_ih, b_hh = weights[n_w + 2 * k], weights[n_w + 2 * k + 1]
            xg = inp @ w_ih.T + b_ih
            states = [s[k] for s in pre_states]
            out = np.zeros((steps, batch, w_hh.shape[1]), x.dtype)
            order = range(steps - 1, -1, -1) if d else range(steps)
            history = []
            for t in order:
                history.append(states)
                new = step(xg[t], states, w_hh, b_hh)
                if valid is not None:
                    new = [np.where(valid[t], n, s) for n, s in zip(new, states)]
                    out[t] = np.where(valid[t], new[0], 0)
                else:
                    out[t] = new[0]
                states = new
            outs.append(out)
            for f, s in zip(finals, states):
                f.append(s)
            if tape is not None:
                tape.append((inp, xg, list(order), history))
        inp = np.concatenate(outs, axis=2) if dirs == 2 else outs[0]
        if p > 0 and layer + 1 < layers:
            if masks is not None:
                mask = masks[layer]
            else:
                if draw is None:
                    raise ExecutionError("rnn: dropout between layers with seed 0 needs the "
                                         "op's random state")
                w = philox.words(inp.size, *draw, first=layer * inp.size) >> np.uint32(8)
                mask = (w >= np.uint32(philox.keep_threshold(p))).reshape(inp.shape) \
                    .astype(x.dtype) / (1 - p)
            used_masks.append(mask)
            inp = inp * mask
    return inp, [np.stack(f).astype(x.dtype, copy=False) for f in finals], used_masks


def _rnn_backward(attrs, x, pre_states, weights, seq_len, masks, dout, dfinals):
    layers, dirs = attrs["num_layers"], 2 if attrs["is_bidirec"] else 1
    _, back = _rnn_cell(attrs["mode"])
    tape = []
    _, _, masks = _rnn_forward(attrs, x, pre_states, weights, seq_len, masks, tape)
    n_w = 2 * layers * dirs
    dw = [np.zeros_like(w) for w in weights]
    dpre = [np.zeros_like(s) for s in pre_states]
    valid = None
    if seq_len is not None:
        valid = (np.arange(x.shape[0])[:, None] < np.asarray(seq_len).reshape(-1))[..., None]
    d_inp = dout
    for layer in range(layers - 1, -1, -1):
        if layer + 1 < layers and masks:
            d_inp = d_inp * masks[layer]
        d_below = np.zeros_like(tape[layer * dirs][0])
        for d in range(dirs):
            k = layer * dirs + d
            inp, xg, order, history = tape[k]
            w_ih, w_hh = weights[2 * k], weights[2 * k + 1]
            h = w_hh.shape[1]
            d_out = d_inp[..., d * h:(d + 1) * h]
            dst = [ds[k] for ds in dfinals]
            dxg = np.zeros_like(xg)
            for t, states in zip(reversed(order), reversed(history)):
                dnew = [dst[0] + d_out[t]] + dst[1:]
                keep = [0.0] * len(dst)
                if valid is not None:
                    keep = [np.where(valid[t], 0, v) for v in dst]
                    dnew = [np.where(valid[t], v, 0) for v in dnew]
                dprev, dxg[t], dhg = back(xg[t], states, w_hh, weights[n_w + 2 * k + 1], dnew)
                dw[2 * k + 1] += dhg.T @ states[0]
                dw[n_w + 2 * k + 1] += dhg.sum(0)
                dst = [a + b for a, b in zip(dprev, keep)]
            for ds, v in zip(dpre, dst):
                ds[k] = v
            flat = dxg.reshape(-1, dxg.shape[-1])
            dw[2 * k] += flat.T @ inp.reshape(-1, inp.shape[-1])
            dw[n_w + 2 * k] += flat.sum(0)
            d_below += dxg @ w_ih
        d_inp = d_below
    return d_inp, dpre, dw


def _rnn_grad(g):
    ins = {"Input": g.input("Input"), "PreState": g.input("PreState"),
           "WeightList": g.input("WeightList"), "Reserve": g.output("Reserve"),
           "Out@GRAD": g.output_grad("Out"), "State@GRAD": g.output_grad("State")}
    if g.input("SequenceLength"):
        ins["SequenceLength"] = g.input("SequenceLength")
    g.op("rnn_grad", ins, {"Input@GRAD": g.input_grad("Input"),
                           "PreState@GRAD": g.input_grad("PreState"),
                           "WeightList@GRAD": g.input_grad("WeightList")}, g.attrs())


class RNN(OpDef):
    type = "rnn"
    inputs = (In("Input"), In("PreState", duplicable=True), In("WeightList", duplicable=True),
              In("SequenceLength", dispensable=True, no_grad=True))
    outputs = (Out("Out"), Out("DropoutState", dispensable=True),
               Out("State", duplicable=True), Out("Reserve", intermediate=True))
    attrs = {"dropout_prob": 0.0, "is_bidirec": False, "input_size": 10, "hidden_size": 100,
             "num_layers": 1, "mode": "LSTM", "seed": 0, "is_test": False}
    share_lod = None
    doc = ("Paddle 2.x multi-layer (bidirectional) LSTM/GRU/RNN_TANH/RNN_RELU over a dense "
           "time-major Input [T, B, I]; SequenceLength masks steps past each length.")

    @staticmethod
    def infer_shape(ctx):
        shape = ctx.input_shape("Input")
        if ctx.attr("mode") not in GATES:
            ctx.fail(f"mode must be one of {list(GATES)}, got {ctx.attr('mode')!r}")
        dirs = 2 if ctx.attr("is_bidirec") else 1
        ctx.set_output("Out", shape[:2] + [ctx.attr("hidden_size") * dirs],
                       ctx.input_dtype("Input"), 0)
        for i, s in enumerate(ctx.input_shapes("PreState")[:len(ctx.op.output("State"))]):
            ctx.set_output("State", s, ctx.input_dtype("Input"), 0, i=i)
        if ctx.has_output("Reserve"):
            ctx.set_output("Reserve", [-1], ctx.input_dtype("Input"), 0)

    random_stream = "Out"
    random_off = "is_test"

    @classmethod
    def prepare(cls, attrs, outputs, stream):
        if attrs["mode"] not in GATES:
            raise ExecutionError(f"rnn: mode must be one of {list(GATES)}, "
                                 f"got {attrs['mode']!r}")

        def kernel(x, pre_states, weights, seq_len, state=None):
            draw = None
            if attrs["dropout_prob"] > 0 and attrs["num_layers"] > 1 and not attrs["is_test"]:
                draw = philox.key_and_run(attrs["seed"], state, stream)
            out, finals, masks = _rnn_forward(attrs, x, pre_states, weights, seq_len,
                                              draw=draw)
            # Reserve keeps the dropout masks between layers for the gradient
            reserve = np.concatenate([m.reshape(-1) for m in masks]) if masks else \
                np.zeros(0, x.dtype)
            return out.astype(x.dtype, copy=False), np.zeros(0, np.uint8), finals, reserve
        return kernel

    grad = staticmethod(_rnn_grad)


class RNNGrad(OpDef):
    type = "rnn_grad"
    inputs = (In("Input"), In("PreState", duplicable=True), In("WeightList", duplicable=True),
              In("SequenceLength", dispensable=True), In("Reserve", dispensable=True),
              In("Out@GRAD"), In("State@GRAD", duplicable=True))
    outputs = (Out("Input@GRAD", dispensable=True), Out("PreState@GRAD", duplicable=True),
               Out("WeightList@GRAD", duplicable=True))
    attrs = RNN.attrs
    share_lod = None
    infer_shape = None

    @classmethod
    def prepare(cls, attrs, outputs):
        def kernel(x, pre_states, weights, seq_len, reserve, dout, dstates):
            masks = None
            if reserve is not None and reserve.size:    # dropout masks, one per inner layer
                masks = list(reserve.reshape((-1,) + dout.shape))
            elif (attrs["dropout_prob"] > 0 and not attrs["is_test"] and not attrs["seed"]
                  and attrs["num_layers"] > 1):
                raise ExecutionError("rnn_grad: the dropout masks of the forward run are "
                                     "missing; give the rnn op its Reserve output")
            dstates = [np.zeros_like(s) if d is None else d for s, d in
                       zip(pre_states, list(dstates) + [None] * len(pre_states))]
            return _rnn_backward(attrs, x, pre_states, weights, seq_len, masks, dout, dstates)
        return kernel
