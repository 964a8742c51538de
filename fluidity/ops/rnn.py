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

from ..core.names import EMPTY_VAR_NAME
from ..core.tensor import LoDTensor
from ..errors import ExecutionError
from .c_emit import same_dim
from .registry import In, OpDef, Out


def _sigmoid(x):
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


# --- compiled forms (fluidity/codegen; C++ in codegen/runtime/rnn.h) -------------------------
def _c_act(e, attr):
    """The C++ activation constant of activation attribute `attr` (a name, or gru_unit's
    code); NotCompilable for one the kernels do not know."""
    name = e.attr(attr)
    if isinstance(name, int):
        name = ACT_CODES[name] if 0 <= name < len(ACT_CODES) else str(name)
    if name not in ACTS:
        e.fail(f"unknown activation {name!r}")
    return "fl::ACT_" + name.upper()


def _out_or_scratch(e, slot, dims):
    """Output `slot` (no LoD) when the op has it, else a scratch buffer: the kernels compute
    the intermediate batches either way."""
    return e.output(slot, dims, lod_from=False) if e.has_output(slot) else e.scratch(dims)


def _gru_compiled_shapes(e, x, w, b):
    """gru's and gru_grad's shared checks: Weight [D, 3D] and Bias 3D values. Returns D, 3D
    (C expressions), the C gate and candidate activations, and Input's sequences and rows
    (_emit_sequences)."""
    if w.ndim != 2:
        e.fail("Weight is not [D, 3D]")
    d = w.dims[0]
    g = e.mul(3, d)
    same_dim(e, w.dims[1], g, "Weight is not [D, 3D]")
    if b is not None:
        same_dim(e, b.numel(), g, "Bias has not 3D values")
    gate, act = _c_act(e, "gate_activation"), _c_act(e, "activation")
    n, rows = _emit_sequences(e, x, g)
    return d, g, gate, act, n, rows


def _emit_sequences(e, x, width):
    """Checks of a LoD Input [rows, width * D] of lstm/gru: (number of sequences as a C
    expression, rows). Offsets that do not start at 0, decrease or end elsewhere than its rows
    run the op interpreted (the kernel reports them)."""
    if x.lod is None:
        e.fail("Input has no LoD")
    if x.ndim != 2:
        e.fail("Input is not [rows, columns]")
    same_dim(e, x.dims[1], width, "Input's columns do not match Weight")
    e.check(f"!fl::lod_is_offsets({x.lod}, {x.lod_len}, {x.dims[0]})",
            f"{e.op.type}: the LoD of Input is not offsets of its rows")
    return f"({x.lod_len} - 1)", x.dims[0]


def _emit_initial(e, slot, n, d):
    """Initial state input `slot` ([N, D]) as a C pointer, or nullptr without it."""
    s = e.input(slot)
    if s is None:
        return "nullptr"
    e.require_float(s)
    if s.ndim != 2:
        e.fail(f"{slot} is not [sequences, D]")
    same_dim(e, s.dims[0], n, f"{slot} has a row per sequence")
    same_dim(e, s.dims[1], d, f"{slot} has D columns")
    return s.name


def _lstm_grad(g):
    ins = {n: g.input(n) for n in ("Input", "H0", "C0", "Weight", "Bias") if g.input(n)}
    ins.update({n: g.output(n) for n in ("Hidden", "Cell", "BatchGate", "BatchCellPreAct")})
    ins["Hidden@GRAD"], ins["Cell@GRAD"] = g.output_grad("Hidden"), g.output_grad("Cell")
    outs = {n + "@GRAD": g.input_grad(n) for n in ("Input", "H0", "C0", "Weight", "Bias")
            if g.input(n)}
    g.op("lstm_grad", ins, outs, g.attrs())


# --- lstm -----------------------------------------------------------------------------------
def _emit_lstm_inputs(e):
    """What lstm and lstm_grad read alike, checked: (Input, Weight, Bias, D, 4D, peepholes,
    the C activations, sequences, rows, H0, C0) with D and 4D as C expressions."""
    x, w, b = e.input("Input"), e.input("Weight"), e.input("Bias")
    if None in (x, w, b):
        e.fail("Input, Weight or Bias is absent")
    e.require_float(x, w, b)
    if w.ndim != 2:
        e.fail("Weight is not [D, 4D]")
    d, peep = w.dims[0], bool(e.attr("use_peepholes"))
    g = e.mul(4, d)
    same_dim(e, w.dims[1], g, "Weight is not [D, 4D]")
    same_dim(e, b.numel(), e.mul(7 if peep else 4, d), "Bias has not 7D (peepholes) or 4D values")
    acts = ", ".join(_c_act(e, a) for a in ("gate_activation", "cell_activation",
                                            "candidate_activation"))
    n, rows = _emit_sequences(e, x, g)
    h0, c0 = _emit_initial(e, "H0", n, d), _emit_initial(e, "C0", n, d)
    return x, w, b, d, g, peep, acts, n, rows, h0, c0


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

    @staticmethod
    def emit(e):
        """fl::lstm_seq: the sequences walked in the kernel's batch order, per step a gemm of
        the running ones' states by Weight, then the gates in the kernel's order."""
        x, w, b, d, g, peep, acts, n, rows, h0, c0 = _emit_lstm_inputs(e)
        hidden = e.output("Hidden", [rows, d], lod_from=x)
        cell = e.output("Cell", [rows, d], lod_from=x)
        gates = _out_or_scratch(e, "BatchGate", [rows, g])
        cacts = _out_or_scratch(e, "BatchCellPreAct", [rows, d])
        order = e.scratch([n], "int64_t")
        h, c, hg = e.scratch([n, d]), e.scratch([n, d]), e.scratch([n, g])
        e.code(f"fl::lstm_seq<{acts}, {e.literal(peep)}>({x}, {x.lod}, {n}, {d}, "
               f"{e.literal(bool(e.attr('is_reverse')))}, {w}, {b}, {h0}, {c0}, {hidden}, "
               f"{cell}, {gates}, {cacts}, {order}, {h}, {c}, {hg});")

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

    @staticmethod
    def emit(e):
        """fl::lstm_seq_grad: the kernel's backward in its batch order (a gemm per step for
        dW and for the next step's dh); sums of rows (dBias, peepholes) in order, so within
        rounding of numpy's pairwise sums."""
        hidden, cell = e.input("Hidden"), e.input("Cell")
        gates, cacts = e.input("BatchGate"), e.input("BatchCellPreAct")
        if None in (hidden, cell, gates, cacts):
            e.fail("an input the backward reads is absent")
        e.require_float(hidden, cell, gates, cacts)
        x, w, b, d, g, peep, acts, n, rows, h0, c0 = _emit_lstm_inputs(e)
        for t, width in ((hidden, d), (cell, d), (gates, g), (cacts, d)):
            same_dim(e, t.dims[0], rows, f"{t.var} has Input's rows")
            same_dim(e, e.prod(t.dims[1:]), width, f"{t.var} has {width} columns")
        douts = []
        for slot in ("Hidden@GRAD", "Cell@GRAD"):
            t = e.input(slot)
            if t is not None:
                e.require_float(t)
                e.same_dims(t, hidden)
            douts.append(t.name if t is not None else "nullptr")

        def out(slot, dims, scratch_too=False):
            if e.has_output(slot):
                return e.output(slot, dims, lod_from=x if slot == "Input@GRAD" else False).name
            return e.scratch(dims).name if scratch_too else "nullptr"
        dx = out("Input@GRAD", x.dims)
        dh0 = out("H0@GRAD", [n, d]) if h0 != "nullptr" else "nullptr"
        dc0 = out("C0@GRAD", [n, d]) if c0 != "nullptr" else "nullptr"
        dw = out("Weight@GRAD", w.dims, True)
        db = out("Bias@GRAD", b.dims, True)
        scratch = [e.scratch([n], "int64_t"), e.scratch([rows], "int64_t"),
                   e.scratch([f"({rows} + 2)"], "int64_t"), e.scratch([rows, d]),
                   e.scratch([rows, d]), e.scratch([rows, g]), e.scratch([n, d]),
                   e.scratch([n, d]), e.scratch([n, d]), e.scratch([n, d])]
        e.code(f"fl::lstm_seq_grad<{acts}, {e.literal(peep)}>({x.lod}, {n}, {rows}, {d}, "
               f"{e.literal(bool(e.attr('is_reverse')))}, {w}, {b}, {h0}, {c0}, {hidden}, "
               f"{cell}, {gates}, {cacts}, {douts[0]}, {douts[1]}, {dx}, {dh0}, {dc0}, {dw}, "
               f"{db}, {', '.join(s.name for s in scratch)});")


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

    @staticmethod
    def emit(e):
        """fl::gru_seq: the sequences walked in the kernel's batch order, per step the two
        gemms of fl::gru_step (the gates' part of Weight, then the candidate's)."""
        x, w, b = e.input("Input"), e.input("Weight"), e.input("Bias")
        e.require_float(x, w, b)
        d, g, gate, act, n, rows = _gru_compiled_shapes(e, x, w, b)
        h0 = _emit_initial(e, "H0", n, d)
        hidden = e.output("Hidden", [rows, d], lod_from=x)
        gates = _out_or_scratch(e, "BatchGate", [rows, g])
        rh = _out_or_scratch(e, "BatchResetHiddenPrev", [rows, d])
        bh = _out_or_scratch(e, "BatchHidden", [rows, d])
        order = e.scratch([n], "int64_t")
        h_init, hg = e.scratch([n, d]), e.scratch([n, e.mul(2, d)])
        e.code(f"fl::gru_seq<{gate}, {act}>({x}, {x.lod}, {n}, {d}, "
               f"{e.literal(bool(e.attr('is_reverse')))}, "
               f"{e.literal(bool(e.attr('origin_mode')))}, {w}, {b or 'nullptr'}, {h0}, "
               f"{hidden}, {gates}, {rh}, {bh}, {order}, {h_init}, {hg});")

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

    @staticmethod
    def emit(e):
        """fl::gru_seq_grad: the kernel's backward in gru's batch order (gemms per step for
        drh, dh and dW); the bias gradient a sum of rows in order."""
        x, w, b = e.input("Input"), e.input("Weight"), e.input("Bias")
        gates, rh, bh = (e.input(s) for s in ("BatchGate", "BatchResetHiddenPrev",
                                              "BatchHidden"))
        dh = e.input("Hidden@GRAD")
        if None in (gates, rh, bh):
            e.fail("an input the backward reads is absent")
        e.require_float(x, w, b, gates, rh, bh, dh)
        d, g, gate, act, n, rows = _gru_compiled_shapes(e, x, w, b)
        for t, width in ((gates, g), (rh, d), (bh, d)):
            same_dim(e, t.dims[0], rows, f"{t.var} has Input's rows")
            same_dim(e, e.prod(t.dims[1:]), width, f"{t.var} has {width} columns")
        if dh is not None:
            same_dim(e, dh.numel(), e.mul(rows, d), "Hidden@GRAD is [rows, D]")
        h0 = _emit_initial(e, "H0", n, d)

        def out(slot, dims, lod_from=False):
            return e.output(slot, dims, lod_from=lod_from).name if e.has_output(slot) \
                else "nullptr"
        dx = out("Input@GRAD", x.dims, x)
        dh0 = out("H0@GRAD", [n, d]) if h0 != "nullptr" else "nullptr"
        dw = out("Weight@GRAD", w.dims)
        dw = dw if dw != "nullptr" else e.scratch(w.dims).name
        db = out("Bias@GRAD", b.dims) if b is not None else "nullptr"
        scratch = [e.scratch([n], "int64_t"), e.scratch([rows], "int64_t"),
                   e.scratch([f"({rows} + 2)"], "int64_t"), e.scratch([rows, g]),
                   e.scratch([n, d]), e.scratch([n, d]), e.scratch([n, d])]
        e.code(f"fl::gru_seq_grad<{gate}, {act}>({x.lod}, {n}, {d}, "
               f"{e.literal(bool(e.attr('is_reverse')))}, "
               f"{e.literal(bool(e.attr('origin_mode')))}, {w}, {h0}, {gates}, {rh}, {bh}, "
               f"{dh.name if dh is not None else 'nullptr'}, {dx}, {dh0}, {dw}, {db}, "
               f"{', '.join(t.name for t in scratch)});")


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
    share_lod = "Input"
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

    @staticmethod
    def emit(e):
        """Gate = Input + Bias, then fl::gru_step over the batch."""
        x, hp, w, b = (e.input(s) for s in ("Input", "HiddenPrev", "Weight", "Bias"))
        e.require_float(x, hp, w, b)
        if x.ndim != 2 or hp.ndim != 2 or w.ndim != 2:
            e.fail("Input, HiddenPrev or Weight is not 2-D")
        d = w.dims[0]
        g = e.mul(3, d)
        same_dim(e, w.dims[1], g, "Weight is not [D, 3D]")
        same_dim(e, x.dims[1], g, "Input is not [N, 3D]")
        same_dim(e, hp.dims[1], d, "HiddenPrev is not [N, D]")
        same_dim(e, hp.dims[0], x.dims[0], "Input and HiddenPrev differ in rows")
        if b is not None:
            same_dim(e, b.numel(), g, "Bias has not 3D values")
        gate, act = _c_act(e, "gate_activation"), _c_act(e, "activation")
        n = x.dims[0]
        gates = _out_or_scratch(e, "Gate", [n, g])
        rh = _out_or_scratch(e, "ResetHiddenPrev", [n, d])
        h = e.output("Hidden", [n, d])
        hg = e.scratch([n, e.mul(2, d)])
        add = f" + {b}[i % {g}]" if b is not None else ""
        e.code(f"for (int64_t i = 0; i < {e.mul(n, g)}; ++i) {gates}[i] = {x}[i]{add};")
        e.code(f"fl::gru_step<{gate}, {act}>({n}, {d}, {gates}, {hp}, {w}, "
               f"{w} + {e.mul(e.mul(2, d), d)}, {rh}, {hg}, {h}, {e.literal(bool(e.attr('origin_mode')))});")

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
        return _sigmoid(i), _sigmoid(f + forget_bias), _sigmoid(o), np.tanh(g)

    @classmethod
    def kernel(cls, x, c_prev, *, forget_bias):
        i, f, o, g = cls.gates(x, forget_bias)
        c = f * c_prev + i * g
        return c, o * np.tanh(c)

    @staticmethod
    def emit(e):
        x, cp = e.input("X"), e.input("C_prev")
        e.require_float(x, cp)
        if x.ndim != 2 or cp.ndim != 2:
            e.fail("X or C_prev is not 2-D")
        n, d = cp.dims
        same_dim(e, x.dims[1], e.mul(4, d), "X is not [N, 4D] for C_prev [N, D]")
        same_dim(e, x.dims[0], n, "X and C_prev differ in rows")
        c, h = e.output("C", cp.dims), e.output("H", cp.dims)
        e.code(f"fl::lstm_unit({n}, {d}, {x}, {cp}, {e.literal(float(e.attr('forget_bias')))}, "
               f"{c}, {h});")

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
_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _relu(v):
    return np.maximum(v, 0)


def _rnn_cell(mode):
    """(step, back) for one time step of `mode`. step(xg, states, w_hh, b_hh) -> new states,
    with xg = x @ W_ih^T + b_ih. back(xg, states, w_hh, b_hh, dnew) -> (d states, d xg,
    d of h @ W_hh^T + b_hh), given the gradients dnew of the new states."""
    if mode == "LSTM":
        def gates(xg, h, c, w_hh, b_hh):
            i, f, g, o = np.split(xg + h @ w_hh.T + b_hh, 4, axis=1)
            return _sigmoid(i), _sigmoid(f), np.tanh(g), _sigmoid(o)

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
            r, z = _sigmoid(xr + hr), _sigmoid(xz + hz)
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


def _rnn_forward(attrs, x, pre_states, weights, seq_len, masks=None, tape=None):
    """Run every layer and direction. Returns (out, final states per slot, dropout masks).
    `masks` replays the dropout masks of an earlier run; `tape` (a list) records per
    (layer, direction): its input, xg, the steps in order and the states before each."""
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
    rng = np.random.default_rng(attrs["seed"] or None)
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
            mask = masks[layer] if masks is not None else \
                (rng.random(inp.shape) >= p).astype(x.dtype) / (1 - p)
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
        if ctx.attr("mode") not in _GATES:
            ctx.fail(f"mode must be one of {list(_GATES)}, got {ctx.attr('mode')!r}")
        dirs = 2 if ctx.attr("is_bidirec") else 1
        ctx.set_output("Out", shape[:2] + [ctx.attr("hidden_size") * dirs],
                       ctx.input_dtype("Input"), 0)
        for i, s in enumerate(ctx.input_shapes("PreState")[:len(ctx.op.output("State"))]):
            ctx.set_output("State", s, ctx.input_dtype("Input"), 0, i=i)
        if ctx.has_output("Reserve"):
            ctx.set_output("Reserve", [-1], ctx.input_dtype("Input"), 0)

    @classmethod
    def prepare(cls, attrs, outputs):
        if attrs["mode"] not in _GATES:
            raise ExecutionError(f"rnn: mode must be one of {list(_GATES)}, "
                                 f"got {attrs['mode']!r}")

        def kernel(x, pre_states, weights, seq_len):
            out, finals, masks = _rnn_forward(attrs, x, pre_states, weights, seq_len)
            # Reserve keeps the dropout masks between layers for the gradient
            reserve = np.concatenate([m.reshape(-1) for m in masks]) if masks else \
                np.zeros(0, x.dtype)
            return out.astype(x.dtype, copy=False), np.zeros(0, np.uint8), finals, reserve
        return kernel

    C_MODES = {"LSTM": "fl::RNN_LSTM", "GRU": "fl::RNN_GRU", "RNN_TANH": "fl::RNN_TANH",
               "RNN_RELU": "fl::RNN_RELU"}

    @classmethod
    def emit(cls, e):
        """The forward without dropout masks (is_test, no dropout, or one layer), by
        fl::rnn_forward: per layer and direction the input projection of all steps one gemm,
        then a gemm and the gates per step. Reserve (no masks) and DropoutState are empty, as
        the kernel makes them. The weights' shapes must be known when compiling."""
        mode, layers = e.attr("mode"), int(e.attr("num_layers"))
        dirs = 2 if e.attr("is_bidirec") else 1
        if mode not in cls.C_MODES or layers < 1:
            e.fail(f"mode {mode!r} with {layers} layers")
        if layers > 1 and not e.attr("is_test") and e.attr("dropout_prob") > 0:
            e.fail("dropout between layers (training) draws random masks")
        x, pre, ws = e.input("Input"), e.inputs("PreState"), e.inputs("WeightList")
        lens = e.input("SequenceLength")
        e.require_float(x, *pre, *ws)
        n_states, n_w = (2 if mode == "LSTM" else 1), 2 * layers * dirs
        state_names = e.op.output("State")
        if len(pre) != n_states or len(state_names) > n_states or len(ws) != 2 * n_w:
            e.fail(f"{len(pre)} PreState, {len(state_names)} State and {len(ws)} WeightList "
                   f"tensors for {mode} with {layers} layer(s) x {dirs} direction(s)")
        if x.ndim != 3:
            e.fail("Input is not [T, B, I]")
        if not all(e.is_lit(v) for w in ws for v in w.dims) or ws[1].ndim != 2:
            e.fail("the weights' shapes are not known when compiling")
        t, batch, i = x.dims
        h = int(ws[1].dims[1])
        gh = _GATES[mode] * h
        for layer in range(layers):
            for d in range(dirs):
                k = layer * dirs + d
                w_ih, w_hh = ws[2 * k], ws[2 * k + 1]
                if w_ih.ndim != 2 or [int(v) for v in w_hh.dims] != [gh, h] or \
                        int(w_ih.dims[0]) != gh:
                    e.fail(f"WeightList's weights of layer {layer} are not [{gh}, in], "
                           f"[{gh}, {h}]")
                same_dim(e, w_ih.dims[1], i if layer == 0 else dirs * h,
                      f"W_ih of layer {layer} does not match its input")
                for b in (ws[n_w + 2 * k], ws[n_w + 2 * k + 1]):
                    if int(b.numel()) != gh:
                        e.fail(f"WeightList's biases of layer {layer} have not {gh} values")
        for s in pre:
            if s.ndim != 3:
                e.fail("PreState is not [layers * directions, B, H]")
            for a, want in zip(s.dims, (layers * dirs, batch, h)):
                same_dim(e, a, want, "PreState is not [layers * directions, B, H]")
        if lens is not None:
            if lens.ctype not in ("int32_t", "int64_t"):
                e.fail(f"SequenceLength is {lens.ctype}")
            same_dim(e, lens.numel(), batch, "SequenceLength has not B values")
        out = e.output("Out", [t, batch, dirs * h], lod_from=False)
        sdims = [layers * dirs, batch, h]
        states = [e.output("State", sdims, i=s, lod_from=False)
                  if s < len(state_names) and state_names[s] != EMPTY_VAR_NAME
                  else e.scratch(sdims) for s in range(n_states)]
        if e.has_output("Reserve"):
            e.output("Reserve", ["0"], x.ctype, lod_from=False)
        if e.has_output("DropoutState"):
            e.output("DropoutState", ["0"], "uint8_t", lod_from=False)
        xg, hg = e.scratch([e.mul(t, batch), gh]), e.scratch([batch, gh])
        inner = [e.scratch([t, batch, dirs * h]).name if layers > j else "nullptr"
                 for j in (1, 2)]
        c_pre, c_state = (pre[1].name, states[1].name) if mode == "LSTM" else ("nullptr",) * 2
        e.code(f"const float* const wl[] = {{{', '.join(w.name for w in ws)}}};")
        e.code(f"fl::rnn_forward<{cls.C_MODES[mode]}>({t}, {batch}, {i}, {h}, {layers}, {dirs}, "
               f"{x}, wl, {pre[0]}, {c_pre}, {lens or '(const int64_t*)nullptr'}, {out}, "
               f"{states[0]}, {c_state}, {inner[0]}, {inner[1]}, {xg}, {hg});")

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
