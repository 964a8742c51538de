"""lstmp: LSTM with a recurrent projection layer (Sak et al. 2014; Fluid's dynamic_lstmp),
over LoD sequences, and its gradient.

Per step, with r the projection fed back instead of the hidden state:

    g = x_t + b + r_{t-1} @ Weight               (Weight [P, 4D]; gates c~, i, f, o)
    i = act_gate(g_i + w_ic * c_{t-1}),  f = act_gate(g_f + w_fc * c_{t-1})
    c_t = clip(f * c_{t-1} + i * act_cand(g_c), cell_clip)
    o = act_gate(g_o + w_oc * c_t),      h_t = o * act_cell(c_t)
    r_t = clip(act_proj(h_t @ ProjWeight), proj_clip)          (ProjWeight [D, P])

H0 is the initial projection r_0 [N, P], C0 the initial cell [N, D]; a clip of 0 is none.
(Paddle 1.8's CPU kernel applies cell_activation where proj_activation is not identity;
Fluidity applies proj_activation, as the op documents. They agree whenever the two are the
same or the projection is linear, which is how Fluid's dynamic_lstmp is used.)
"""
import numpy as np

from ..core.tensor import LoDTensor
from ..errors import ExecutionError
from .registry import In, OpDef, Out
from .rnn import ACTS, batches

_ACT_ATTRS = ("gate_activation", "cell_activation", "candidate_activation", "proj_activation")


def _acts(attrs):
    out = []
    for a in _ACT_ATTRS:
        if attrs[a] not in ACTS:
            raise ExecutionError(f"lstmp: {a} must be one of {sorted(ACTS)}, got {attrs[a]!r}")
        out.append(ACTS[attrs[a]])
    return out


def _offsets(x):
    if not x._lod:
        raise ExecutionError("lstmp: Input has no LoD; feed a LoDTensor of sequences "
                             "(fluid.create_lod_tensor)")
    off = np.asarray(x._lod[-1], np.int64)
    if off[-1] != len(x._array):
        raise ExecutionError(f"lstmp: Input's LoD ends at {off[-1]} but it has "
                             f"{len(x._array)} rows")
    return off


def _initial(t, order, shape, dtype, what):
    if t is None:
        return np.zeros(shape, dtype)
    a = t._array
    if a.shape != shape:
        raise ExecutionError(f"lstmp: {what} must be {list(shape)}, got {list(a.shape)}")
    return a[order].astype(dtype, copy=False)


def _peepholes(b, d, peep):
    return (b[4 * d:5 * d], b[5 * d:6 * d], b[6 * d:7 * d]) if peep else (0.0, 0.0, 0.0)


def _clip(v, limit):
    return np.clip(v, -limit, limit) if limit > 0 else v


def _unclipped(v, limit):
    """1 where the clip let the value through (its gradient passes), else 0."""
    return ((v > -limit) & (v < limit)).astype(v.dtype) if limit > 0 else 1.0


class LSTMP(OpDef):
    type = "lstmp"
    inputs = (In("Input"), In("H0", dispensable=True), In("C0", dispensable=True),
              In("Weight"), In("ProjWeight"), In("Bias"))
    outputs = (Out("Projection"), Out("Cell"), Out("BatchGate", intermediate=True),
               Out("BatchCellPreAct", intermediate=True), Out("BatchHidden", intermediate=True))
    attrs = {"use_peepholes": True, "is_reverse": False, "cell_clip": 0.0, "proj_clip": 0.0,
             "gate_activation": "sigmoid", "cell_activation": "tanh",
             "candidate_activation": "tanh", "proj_activation": "tanh"}
    kind = "value"
    share_lod = None
    doc = ("LSTM with a recurrent projection over the LoD sequences of Input [T, 4D]: "
           "Projection [T, P] and Cell [T, D]. Weight [P, 4D], ProjWeight [D, P], Bias [1, 7D] "
           "(with peepholes) or [1, 4D]; H0 [N, P], C0 [N, D].")

    @staticmethod
    def infer_shape(ctx):
        x, w, pw, b = (ctx.input_shape(s) for s in ("Input", "Weight", "ProjWeight", "Bias"))
        if len(x) != 2 or len(w) != 2 or len(pw) != 2 or len(b) != 2:
            ctx.fail(f"Input, Weight, ProjWeight and Bias must be 2-D, got {x}, {w}, {pw}, {b}")
        d = pw[0] if pw[0] > 0 else (x[1] // 4 if x[1] > 0 else -1)
        p = pw[1]
        if x[1] > 0 and x[1] % 4:
            ctx.fail(f"Input's width {x[1]} must be 4 * frame size")
        if (d > 0 and w[1] > 0 and w[1] != 4 * d) or (p > 0 and w[0] > 0 and w[0] != p) or \
                (x[1] > 0 and d > 0 and x[1] != 4 * d):
            ctx.fail(f"Weight must be [P, 4D] = [{p}, {4 * d}] and ProjWeight [D, P] for Input "
                     f"{x}, got {w} and {pw}")
        want = (7 if ctx.attr("use_peepholes") else 4) * d
        if b[0] not in (1, -1) or (d > 0 and b[1] != want):
            ctx.fail(f"Bias must be [1, {want}] (use_peepholes={ctx.attr('use_peepholes')}), "
                     f"got {b}")
        if ctx.has_input("H0") != ctx.has_input("C0"):
            ctx.fail("H0 and C0 must be given together")
        dt, lvl = ctx.input_dtype("Input"), ctx.input_lod_level("Input")
        ctx.set_output("Projection", [x[0], p], dt, lvl)
        ctx.set_output("Cell", [x[0], d], dt, lvl)
        for slot, width in (("BatchGate", x[1]), ("BatchCellPreAct", d), ("BatchHidden", d)):
            if ctx.has_output(slot):
                ctx.set_output(slot, [x[0], width], dt, 0)

    @classmethod
    def prepare(cls, attrs, outputs):
        (gate, _), (cell_act, _), (cand_act, _), (proj_act, _) = _acts(attrs)
        peep, rev = attrs["use_peepholes"], attrs["is_reverse"]
        cclip, pclip = attrs["cell_clip"], attrs["proj_clip"]

        def kernel(x, h0, c0, weight, proj_weight, bias):
            off = _offsets(x)
            w, pw, b = weight._array, proj_weight._array, bias._array.reshape(-1)
            d, p = pw.shape
            if x._array.shape[1] != 4 * d or w.shape != (p, 4 * d):
                raise ExecutionError(f"lstmp: Input {list(x._array.shape)}, Weight "
                                     f"{list(w.shape)} and ProjWeight {list(pw.shape)} do not "
                                     f"agree (want [T, 4D], [P, 4D], [D, P])")
            rows, bounds, order = batches(off, rev)
            n = len(order)
            wic, wfc, woc = _peepholes(b, d, peep)
            r = _initial(h0, order, (n, p), w.dtype, "H0")
            c = _initial(c0, order, (n, d), w.dtype, "C0")
            g_all = x._array[rows] + b[:4 * d]
            gates = np.empty_like(g_all)
            cells, hidden = np.empty((len(rows), d), w.dtype), np.empty((len(rows), d), w.dtype)
            proj = np.empty((len(rows), p), w.dtype)
            for t in range(len(bounds) - 1):
                a, e = bounds[t], bounds[t + 1]
                rp, cp = r[:e - a], c[:e - a]
                g = g_all[a:e] + rp @ w
                cand = cand_act(g[:, :d])
                ig = gate(g[:, d:2 * d] + cp * wic)
                fg = gate(g[:, 2 * d:3 * d] + cp * wfc)
                c = _clip(cand * ig + cp * fg, cclip)
                og = gate(g[:, 3 * d:] + c * woc)
                h = og * cell_act(c)
                r = _clip(proj_act(h @ pw), pclip)
                gates[a:e] = np.concatenate([cand, ig, fg, og], 1)
                cells[a:e], hidden[a:e], proj[a:e] = c, h, r
            out_p, out_c = np.empty_like(proj), np.empty_like(cells)
            out_p[rows], out_c[rows] = proj, cells
            return (LoDTensor(out_p, x._lod), LoDTensor(out_c, x._lod), LoDTensor(gates),
                    LoDTensor(cells), LoDTensor(hidden))
        return kernel

    @staticmethod
    def grad(g):
        ins = {n: g.input(n) for n in ("Input", "H0", "C0", "Weight", "ProjWeight", "Bias")
               if g.input(n)}
        ins.update({n: g.output(n) for n in ("Projection", "Cell", "BatchGate",
                                             "BatchCellPreAct", "BatchHidden")})
        ins["Projection@GRAD"] = g.output_grad("Projection")
        ins["Cell@GRAD"] = g.output_grad("Cell")    # Paddle's lstmp_grad ignores Cell's
        outs = {n + "@GRAD": g.input_grad(n) for n in ("Input", "H0", "C0", "Weight",
                                                        "ProjWeight", "Bias") if g.input(n)}
        g.op("lstmp_grad", ins, outs, g.attrs())


class LSTMPGrad(OpDef):
    type = "lstmp_grad"
    inputs = tuple(In(n, dispensable=True) for n in (
        "Input", "H0", "C0", "Weight", "ProjWeight", "Bias", "Projection", "Cell", "BatchGate",
        "BatchCellPreAct", "BatchHidden", "Projection@GRAD", "Cell@GRAD"))
    outputs = tuple(Out(n + "@GRAD", dispensable=True) for n in (
        "Input", "H0", "C0", "Weight", "ProjWeight", "Bias"))
    attrs = LSTMP.attrs
    kind = "value"
    share_lod = None
    infer_shape = None

    @classmethod
    def prepare(cls, attrs, outputs):
        (_, dgate), (cell_act, dcell), (_, dcand), (_, dproj) = _acts(attrs)
        peep, rev = attrs["use_peepholes"], attrs["is_reverse"]
        cclip, pclip = attrs["cell_clip"], attrs["proj_clip"]

        def kernel(x, h0, c0, weight, proj_weight, bias, projection, _cell, batch_gate,
                   batch_cell, batch_hidden, dproj_out, dcell_out):
            off = _offsets(x)
            w, pw, b = weight._array, proj_weight._array, bias._array.reshape(-1)
            d, p = pw.shape
            rows, bounds, order = batches(off, rev)
            n = len(order)
            gates, cells, hidden = batch_gate._array, batch_cell._array, batch_hidden._array
            proj = projection._array[rows]
            dproj_all = (dproj_out._array[rows] if dproj_out is not None
                         else np.zeros_like(proj))
            dcell_all = (dcell_out._array[rows] if dcell_out is not None
                         else np.zeros_like(cells))
            wic, wfc, woc = _peepholes(b, d, peep)
            r_init = _initial(h0, order, (n, p), w.dtype, "H0")
            c_init = _initial(c0, order, (n, d), w.dtype, "C0")
            dg_all = np.empty_like(gates)
            dw, dpw = np.zeros_like(w), np.zeros_like(pw)
            dpeep = np.zeros(3 * d, w.dtype)
            dr_next, dc_next = np.zeros((n, p), w.dtype), np.zeros((n, d), w.dtype)
            for t in range(len(bounds) - 2, -1, -1):
                a, e = bounds[t], bounds[t + 1]
                k = e - a
                if t == 0:
                    rp, cp = r_init[:k], c_init[:k]
                else:
                    prev = bounds[t - 1]
                    rp, cp = proj[prev:prev + k], cells[prev:prev + k]
                cand, ig, fg, og = np.split(gates[a:e], 4, axis=1)
                c, h, r = cells[a:e], hidden[a:e], proj[a:e]
                dr = (dproj_all[a:e] + dr_next[:k]) * _unclipped(r, pclip)
                dr = dr * dproj(r)      # clipped entries are 0 already
                dpw += h.T @ dr
                dh = dr @ pw.T
                ca = cell_act(c)
                dog = dh * ca * dgate(og)
                dc = (dcell_all[a:e] + dc_next[:k] + dh * og * dcell(ca) + dog * woc) * \
                    _unclipped(c, cclip)
                dcd = dc * ig * dcand(cand)
                dig = dc * cand * dgate(ig)
                dfg = dc * cp * dgate(fg)
                dg = np.concatenate([dcd, dig, dfg, dog], 1)
                dg_all[a:e] = dg
                dw += rp.T @ dg
                dr_next[:k] = dg @ w.T
                dc_next[:k] = dc * fg + dig * wic + dfg * wfc
                if peep:
                    dpeep += np.concatenate([(dig * cp).sum(0), (dfg * cp).sum(0),
                                             (dog * c).sum(0)])
            dx = np.empty_like(x._array)
            dx[rows] = dg_all
            db = dg_all.sum(0)
            if peep:
                db = np.concatenate([db, dpeep])
            dh0, dc0 = np.empty_like(dr_next), np.empty_like(dc_next)
            dh0[order], dc0[order] = dr_next, dc_next
            return (LoDTensor(dx, x._lod), LoDTensor(dh0), LoDTensor(dc0), LoDTensor(dw),
                    LoDTensor(dpw), LoDTensor(db.reshape(bias._array.shape).astype(w.dtype)))
        return kernel

