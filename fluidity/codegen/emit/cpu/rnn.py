"""C++ emitters of lstm, gru (and their gradients), gru_unit, lstm_unit and rnn over
runtime/rnn.h."""
from ....core.names import EMPTY_VAR_NAME
from ....ops.rnn import ACT_CODES, ACTS, GATES
from .. import register
from ..checks import same_dim


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
    return x.lod_len - 1, x.dims[0]


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


@register("lstm", "cpu")
def lstm(e):
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


@register("lstm_grad", "cpu")
def lstm_grad(e):
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
               e.scratch([rows + 2], "int64_t"), e.scratch([rows, d]),
               e.scratch([rows, d]), e.scratch([rows, g]), e.scratch([n, d]),
               e.scratch([n, d]), e.scratch([n, d]), e.scratch([n, d])]
    e.code(f"fl::lstm_seq_grad<{acts}, {e.literal(peep)}>({x.lod}, {n}, {rows}, {d}, "
           f"{e.literal(bool(e.attr('is_reverse')))}, {w}, {b}, {h0}, {c0}, {hidden}, "
           f"{cell}, {gates}, {cacts}, {douts[0]}, {douts[1]}, {dx}, {dh0}, {dc0}, {dw}, "
           f"{db}, {', '.join(s.name for s in scratch)});")


@register("gru", "cpu")
def gru(e):
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


@register("gru_grad", "cpu")
def gru_grad(e):
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
               e.scratch([rows + 2], "int64_t"), e.scratch([rows, g]),
               e.scratch([n, d]), e.scratch([n, d]), e.scratch([n, d])]
    e.code(f"fl::gru_seq_grad<{gate}, {act}>({x.lod}, {n}, {d}, "
           f"{e.literal(bool(e.attr('is_reverse')))}, "
           f"{e.literal(bool(e.attr('origin_mode')))}, {w}, {h0}, {gates}, {rh}, {bh}, "
           f"{dh.name if dh is not None else 'nullptr'}, {dx}, {dh0}, {dw}, {db}, "
           f"{', '.join(t.name for t in scratch)});")


@register("gru_unit", "cpu")
def gru_unit(e):
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


@register("lstm_unit", "cpu")
def lstm_unit(e):
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


# rnn's mode -> the runtime's cell (runtime/rnn.h)
RNN_MODES = {"LSTM": "fl::RNN_LSTM", "GRU": "fl::RNN_GRU", "RNN_TANH": "fl::RNN_TANH",
             "RNN_RELU": "fl::RNN_RELU"}


def _check_rnn_weights(e, ws, layers, dirs, i, h, gh):
    """Each layer and direction's W_ih [gh, in], W_hh [gh, h] and biases of gh values (the
    WeightList's weights first, then its biases)."""
    n_w = 2 * layers * dirs
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


@register("rnn", "cpu")
def rnn(e):
    """The forward without dropout masks (is_test, no dropout, or one layer), by
    fl::rnn_forward: per layer and direction the input projection of all steps one gemm,
    then a gemm and the gates per step. Reserve (no masks) and DropoutState are empty, as
    the kernel makes them. The weights' shapes must be known when compiling."""
    mode, layers = e.attr("mode"), int(e.attr("num_layers"))
    dirs = 2 if e.attr("is_bidirec") else 1
    if mode not in RNN_MODES or layers < 1:
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
    gh = GATES[mode] * h
    _check_rnn_weights(e, ws, layers, dirs, i, h, gh)
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
    e.code(f"fl::rnn_forward<{RNN_MODES[mode]}>({t}, {batch}, {i}, {h}, {layers}, {dirs}, "
           f"{x}, wl, {pre[0]}, {c_pre}, {lens or '(const int64_t*)nullptr'}, {out}, "
           f"{states[0]}, {c_state}, {inner[0]}, {inner[1]}, {xg}, {hg});")
