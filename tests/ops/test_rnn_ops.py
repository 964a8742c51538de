"""Recurrent ops: lstm/gru over LoD sequences against a numpy loop per sequence (forward,
reverse, peepholes, initial states, empty sequences), lstm_unit/gru_unit against one numpy
step, numeric gradients for all of them, and Paddle 2.x's `rnn` op against values Paddle 2.6
computed (tests/fixtures/rnn_paddle.npz, made by scripts/gen_rnn_fixture.py) and its
numeric gradients."""
import json
import os

import numpy as np
import pytest

from fluidity.core.tensor import LoDTensor
from fluidity.errors import ExecutionError
from op_test import check_grad, run_op
from paths import FIXTURES

rng = np.random.default_rng(3)
FIXTURE = os.path.join(FIXTURES, "rnn_paddle.npz")


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def lod_t(x, lens):
    t = LoDTensor(np.asarray(x))
    t.set_recursive_sequence_lengths([lens])
    return t


def per_sequence(x, lens, reverse, step, init):
    """Run `step(x_row, state) -> (state, outputs)` along each sequence; outputs per row."""
    outs = [None] * len(x)
    start = 0
    for i, n in enumerate(lens):
        idx = range(start + n - 1, start - 1, -1) if reverse else range(start, start + n)
        state = init(i)
        for r in idx:
            state, outs[r] = step(x[r], state)
        start += n
    return [np.array([o[k] for o in outs]) for k in range(len(outs[0]))] if outs else []


# --- lstm -----------------------------------------------------------------------------------
def lstm_ref(x, lens, w, b, h0, c0, peep, reverse):
    d = w.shape[0]
    b = b.reshape(-1)
    wic, wfc, woc = (b[4 * d:5 * d], b[5 * d:6 * d], b[6 * d:]) if peep else (0, 0, 0)

    def step(xr, state):
        h, c = state
        g = xr + b[:4 * d] + h @ w
        cand, i, f, o = np.split(g, 4)
        i, f = sigmoid(i + wic * c), sigmoid(f + wfc * c)
        c = f * c + i * np.tanh(cand)
        h = sigmoid(o + woc * c) * np.tanh(c)
        return (h, c), (h, c)
    return per_sequence(x, lens, reverse, step, lambda i: (h0[i], c0[i]))


LSTM_CASES = [  # lens, peepholes, reverse, initial states
    ([2, 3, 1], True, False, False),
    ([3, 0, 2, 3], False, True, True),
    ([1, 4, 2], True, True, True),
    ([0, 2, 0], False, False, True),
]


@pytest.mark.parametrize("lens,peep,reverse,init", LSTM_CASES)
def test_lstm(lens, peep, reverse, init):
    d, n = 3, len(lens)
    x = rng.normal(size=(sum(lens), 4 * d))
    w = rng.normal(size=(d, 4 * d)) * 0.5
    b = rng.normal(size=(1, 7 * d if peep else 4 * d)) * 0.5
    h0, c0 = (rng.normal(size=(n, d)), rng.normal(size=(n, d))) if init else \
        (np.zeros((n, d)), np.zeros((n, d)))
    attrs = {"use_peepholes": peep, "is_reverse": reverse}
    ins = {"Input": lod_t(x, lens), "Weight": w, "Bias": b}
    if init:
        ins.update(H0=h0, C0=c0)
    got = run_op("lstm", ins, attrs, return_lod=True)
    h, c = lstm_ref(x, lens, w, b, h0, c0, peep, reverse)
    np.testing.assert_allclose(np.asarray(got["Hidden"]), h, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(np.asarray(got["Cell"]), c, rtol=1e-6, atol=1e-9)
    assert got["Hidden"].recursive_sequence_lengths() == [lens]
    # BatchCellPreAct holds act(cell) in batch (time-major) order
    np.testing.assert_allclose(np.sort(np.asarray(got["BatchCellPreAct"]).ravel()),
                               np.sort(np.tanh(c).ravel()), rtol=1e-6)
    wrt = ["Input", "Weight", "Bias"] + (["H0", "C0"] if init else [])
    check_grad("lstm", ins, wrt, attrs, outputs=["Hidden", "Cell", "BatchGate",
                                                  "BatchCellPreAct"])


# --- gru ------------------------------------------------------------------------------------
def gru_step_ref(xr, h, w, b, origin):
    """Paddle's GRU step; Weight [D, 3D] stored flat: [D, 2D] gate part, then [D, D]."""
    d = w.shape[0]
    w_ur = w.ravel()[:2 * d * d].reshape(d, 2 * d)
    w_c = w.ravel()[2 * d * d:].reshape(d, d)
    g = xr + b.reshape(-1)
    u, r = np.split(sigmoid(g[..., :2 * d] + h @ w_ur), 2, axis=-1)
    c = np.tanh(g[..., 2 * d:] + (r * h) @ w_c)
    return u * h + (1 - u) * c if origin else u * c + (1 - u) * h


GRU_CASES = [([2, 3, 1], False, False, True), ([3, 0, 2, 3], True, True, True),
             ([1, 4, 2], False, True, False), ([2, 0, 4], True, False, False)]


@pytest.mark.parametrize("lens,origin,reverse,init", GRU_CASES)
def test_gru(lens, origin, reverse, init):
    d, n = 3, len(lens)
    x = rng.normal(size=(sum(lens), 3 * d))
    w = rng.normal(size=(d, 3 * d)) * 0.5
    b = rng.normal(size=(1, 3 * d)) * 0.5
    h0 = rng.normal(size=(n, d)) if init else np.zeros((n, d))
    attrs = {"origin_mode": origin, "is_reverse": reverse}
    ins = {"Input": lod_t(x, lens), "Weight": w, "Bias": b}
    if init:
        ins["H0"] = h0

    def step(xr, h):
        h = gru_step_ref(xr, h, w, b, origin)
        return h, (h,)
    (want,) = per_sequence(x, lens, reverse, step, lambda i: h0[i])
    got = run_op("gru", ins, attrs, return_lod=True)
    np.testing.assert_allclose(np.asarray(got["Hidden"]), want, rtol=1e-6, atol=1e-9)
    assert got["Hidden"].recursive_sequence_lengths() == [lens]
    check_grad("gru", ins, ["Input", "Weight", "Bias"] + (["H0"] if init else []), attrs,
               outputs=["BatchGate", "BatchResetHiddenPrev", "BatchHidden", "Hidden"])


def test_gru_without_bias():
    lens, d = [2, 3], 2
    x, w = rng.normal(size=(5, 3 * d)), rng.normal(size=(d, 3 * d))
    got = run_op("gru", {"Input": lod_t(x, lens), "Weight": w})["Hidden"]

    def step(xr, h):
        h = gru_step_ref(xr, h, w, np.zeros(3 * d), False)
        return h, (h,)
    np.testing.assert_allclose(got, per_sequence(x, lens, False, step,
                                                 lambda i: np.zeros(d))[0], rtol=1e-6)


def test_batches_order():
    """Time-major batches: longest sequence first, ties in input order; reverse walks each
    sequence from its end."""
    from fluidity.ops.rnn import batches
    off = np.array([0, 2, 5, 6])                    # lengths 2, 3, 1
    rows, bounds, order = batches(off)
    assert order.tolist() == [1, 0, 2]
    assert bounds.tolist() == [0, 3, 5, 6]
    assert rows.tolist() == [2, 0, 5, 3, 1, 4]
    rows, _, _ = batches(off, reverse=True)
    assert rows.tolist() == [4, 1, 5, 3, 0, 2]


def test_gru_clips_its_gate_input_at_13_as_fluid_and_gru_unit_does_not():
    # Fluid 1.8's gru (and lstm, lstmp) kernels clip a sigmoid's input to [-40, 13]: an
    # update gate driven to 20 is 1 - 2.26e-6, not 1 - 2e-9; its gru_unit does not clip
    x = np.array([[20.0, 0.0, 0.5]])
    w, b, h0 = np.zeros((1, 3)), np.zeros((1, 3)), np.ones((1, 1))
    u13, u20 = 1 / (1 + np.exp(-13.0)), 1 / (1 + np.exp(-20.0))
    want = lambda u: u * np.tanh(0.5) + (1 - u) * 1.0       # noqa: E731
    got = run_op("gru", {"Input": lod_t(x, [1]), "Weight": w, "Bias": b, "H0": h0}, {},
                 outputs=["BatchGate", "BatchResetHiddenPrev", "BatchHidden", "Hidden"])
    np.testing.assert_allclose(np.asarray(got["Hidden"]), [[want(u13)]], rtol=0, atol=1e-12)
    got = run_op("gru_unit", {"Input": x, "HiddenPrev": h0, "Weight": w, "Bias": b}, {})
    np.testing.assert_allclose(got["Hidden"], [[want(u20)]], rtol=0, atol=1e-12)


# --- one-step units -------------------------------------------------------------------------
@pytest.mark.parametrize("origin", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_gru_unit(origin, bias):
    n, d = 4, 3
    x, h = rng.normal(size=(n, 3 * d)), rng.normal(size=(n, d))
    w = rng.normal(size=(d, 3 * d)) * 0.5
    b = rng.normal(size=(1, 3 * d))
    ins = {"Input": x, "HiddenPrev": h, "Weight": w}
    if bias:
        ins["Bias"] = b
    attrs = {"origin_mode": origin}
    got = run_op("gru_unit", ins, attrs)
    want = gru_step_ref(x, h, w, b if bias else np.zeros(3 * d), origin)
    np.testing.assert_allclose(got["Hidden"], want, rtol=1e-6)
    check_grad("gru_unit", ins, list(ins), attrs)


def test_lstm_unit():
    n, d, fb = 3, 2, 0.5
    x, c_prev = rng.normal(size=(n, 4 * d)), rng.normal(size=(n, d))
    got = run_op("lstm_unit", {"X": x, "C_prev": c_prev}, {"forget_bias": fb})
    i, f, o, g = np.split(x, 4, axis=1)
    c = sigmoid(f + fb) * c_prev + sigmoid(i) * np.tanh(g)
    np.testing.assert_allclose(got["C"], c, rtol=1e-6)
    np.testing.assert_allclose(got["H"], sigmoid(o) * np.tanh(c), rtol=1e-6)
    check_grad("lstm_unit", {"X": x, "C_prev": c_prev}, ["X", "C_prev"], {"forget_bias": fb})


# --- bad input ------------------------------------------------------------------------------
@pytest.mark.parametrize("op,width", [("lstm", 4), ("gru", 3)])
def test_recurrent_ops_need_lod(op, width):
    ins = {"Input": np.ones((3, width * 2), np.float32),
           "Weight": np.ones((2, width * 2), np.float32),
           "Bias": np.ones((1, width * 2), np.float32)}
    attrs = {"use_peepholes": False} if op == "lstm" else {}
    with pytest.raises(ExecutionError, match=f"{op}: input Input has no LoD"):
        run_op(op, ins, attrs)


# --- Paddle 2.x rnn op ----------------------------------------------------------------------
def _fixture_cases():
    data = np.load(FIXTURE)
    return data, sorted({k.split("/")[0] for k in data.files})


@pytest.mark.parametrize("name", _fixture_cases()[1])
def test_rnn_op_matches_paddle(name):
    data, _ = _fixture_cases()

    def get(k):
        return data[f"{name}/{k}"]

    def count(prefix):
        return sum(1 for k in data.files if k.startswith(f"{name}/{prefix}"))
    attrs = json.loads(str(get("attrs")))
    ins = {"Input": get("x"),
           "PreState": [(f"pre{k}", get(f"pre_state_{k}")) for k in range(count("pre_state_"))],
           "WeightList": [(f"w{k}", get(f"weight_{k}")) for k in range(count("weight_"))]}
    if f"{name}/seq_len" in data.files:
        ins["SequenceLength"] = get("seq_len")
    n_states = count("state_")
    got = run_op("rnn", ins, attrs, outputs={"Out": 1, "State": n_states})
    np.testing.assert_allclose(got["Out"], get("out"), rtol=1e-5, atol=1e-6)
    for k in range(n_states):
        np.testing.assert_allclose(got["State"][k], get(f"state_{k}"), rtol=1e-5, atol=1e-6)


def _rnn_inputs(mode, layers, bidirec, with_len, t=3, b=2, i=2, h=2):
    """Random inputs of the rnn op in Paddle's WeightList layout."""
    dirs, gates = 2 if bidirec else 1, {"LSTM": 4, "GRU": 3}.get(mode, 1)
    ws, bs = [], []
    for layer in range(layers):
        for _ in range(dirs):
            ws += [rng.normal(size=(gates * h, i if layer == 0 else h * dirs)) * 0.7,
                   rng.normal(size=(gates * h, h)) * 0.7]
            bs += [rng.normal(size=(gates * h,)) * 0.3, rng.normal(size=(gates * h,)) * 0.3]
    n_states = 2 if mode == "LSTM" else 1
    ins = {"Input": rng.normal(size=(t, b, i)),
           "PreState": [(f"s{k}", rng.normal(size=(layers * dirs, b, h)))
                        for k in range(n_states)],
           "WeightList": [(f"w{k}", w) for k, w in enumerate(ws + bs)]}
    if with_len:
        ins["SequenceLength"] = np.array([t, 1], np.int64)
    attrs = {"mode": mode, "num_layers": layers, "is_bidirec": bidirec, "hidden_size": h,
             "input_size": i}
    wrt = ["Input"] + [("PreState", k) for k in range(n_states)] + \
        [("WeightList", k) for k in range(len(ws + bs))]
    return ins, attrs, wrt, n_states


@pytest.mark.parametrize("mode,layers,bidirec,with_len", [
    ("LSTM", 2, True, True), ("GRU", 2, True, True), ("RNN_TANH", 1, True, False),
    ("RNN_RELU", 2, False, True), ("LSTM", 1, False, False)])
def test_rnn_op_gradient(mode, layers, bidirec, with_len):
    ins, attrs, wrt, n_states = _rnn_inputs(mode, layers, bidirec, with_len)
    check_grad("rnn", ins, wrt, attrs, outputs={"Out": 1, "State": n_states},
               output_slots=["Out", "State"])


def test_rnn_op_dropout_between_layers():
    """Dropout (training) masks the inner layer's output; the gradient replays the masks the
    forward run kept in Reserve; is_test turns dropout off."""
    ins, attrs, wrt, _ = _rnn_inputs("LSTM", 2, False, False)
    attrs.update(dropout_prob=0.5, seed=3)
    outs = {"Out": 1, "State": 2, "Reserve": 1}
    check_grad("rnn", ins, wrt[:4], attrs, outputs=outs, output_slots=["Out", "State"])
    train = run_op("rnn", ins, attrs, outputs=outs)
    test = run_op("rnn", ins, dict(attrs, is_test=True), outputs=outs)
    assert np.abs(train["Out"] - test["Out"]).max() > 1e-3
    assert set(np.unique(train["Reserve"])) <= {0.0, 2.0} and train["Reserve"].size == 3 * 2 * 2


# --- layers ---------------------------------------------------------------------------------
def test_dynamic_lstm_and_gru_layers_match_numpy():
    """fluid.layers.dynamic_lstm(size=4D) / dynamic_gru(size=D) build the ops with Fluid's
    parameter shapes, and their outputs equal the numpy loops on the same parameters."""
    import fluidity as fluid
    d, lens = 3, [3, 1, 2]
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [4 * d], lod_level=1)
        xg = fluid.layers.data("xg", [3 * d], lod_level=1)
        h, c = fluid.layers.dynamic_lstm(x, 4 * d, is_reverse=True,
                                         param_attr=fluid.ParamAttr(name="lw"),
                                         bias_attr=fluid.ParamAttr(name="lb"))
        g = fluid.layers.dynamic_gru(xg, d, param_attr=fluid.ParamAttr(name="gw"),
                                     bias_attr=fluid.ParamAttr(name="gb"))
    assert list(main.global_block().var("lw").shape) == [d, 4 * d]
    assert list(main.global_block().var("lb").shape) == [1, 7 * d]
    assert list(main.global_block().var("gw").shape) == [d, 3 * d]
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    xv = rng.normal(size=(6, 4 * d)).astype(np.float32)
    xgv = rng.normal(size=(6, 3 * d)).astype(np.float32)
    hv, cv, gv = exe.run(main, feed={"x": lod_t(xv, lens), "xg": lod_t(xgv, lens)},
                         fetch_list=[h, c, g], scope=scope)
    p = {n: np.asarray(scope.find_var(n).get_tensor()) for n in ("lw", "lb", "gw", "gb")}
    zeros = np.zeros((3, d))
    want_h, want_c = lstm_ref(xv, lens, p["lw"], p["lb"], zeros, zeros, True, True)
    np.testing.assert_allclose(hv, want_h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(cv, want_c, rtol=1e-5, atol=1e-6)

    def step(xr, hh):
        hh = gru_step_ref(xr, hh, p["gw"], p["gb"], False)
        return hh, (hh,)
    np.testing.assert_allclose(gv, per_sequence(xgv, lens, False, step, lambda i: zeros[i])[0],
                               rtol=1e-5, atol=1e-6)


def test_unit_layers_train():
    """lstm_unit / gru_unit layers: a step of each fits a fixed target (loss falls)."""
    import fluidity as fluid
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [4])
        h_prev = fluid.layers.data("h", [3])
        c_prev = fluid.layers.data("c", [3])
        y = fluid.layers.data("y", [3])
        h1, _ = fluid.layers.lstm_unit(x, h_prev, c_prev, forget_bias=1.0)
        h2, _, _ = fluid.layers.gru_unit(fluid.layers.fc(x, 9), h_prev, 9)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(h1 + h2, y))
        fluid.optimizer.Adam(0.05).minimize(loss)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    feed = {"x": rng.normal(size=(8, 4)).astype(np.float32),
            "h": rng.normal(size=(8, 3)).astype(np.float32),
            "c": rng.normal(size=(8, 3)).astype(np.float32),
            "y": rng.uniform(-0.5, 0.5, size=(8, 3)).astype(np.float32)}
    losses = [float(exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0])
              for _ in range(60)]
    assert losses[-1] < 0.2 * losses[0]


def test_lstm_two_level_lod_and_empty_batch():
    d = 2
    w, b = rng.normal(size=(d, 4 * d)), rng.normal(size=(1, 4 * d))
    x = rng.normal(size=(5, 4 * d))
    t = LoDTensor(x, [[0, 1, 2], [0, 2, 5]])
    got = run_op("lstm", {"Input": t, "Weight": w, "Bias": b}, {"use_peepholes": False},
                 return_lod=True)["Hidden"]
    assert got.lod() == [[0, 1, 2], [0, 2, 5]]
    zeros = np.zeros((2, d))
    np.testing.assert_allclose(np.asarray(got), lstm_ref(x, [2, 3], w, b, zeros, zeros, False,
                                                         False)[0], rtol=1e-6)
    empty = LoDTensor(np.zeros((0, 4 * d)), [[0, 0]])
    got = run_op("lstm", {"Input": empty, "Weight": w, "Bias": b}, {"use_peepholes": False})
    assert got["Hidden"].shape == (0,)   # an empty batch: fetched as [0] (Fluid 1.8)
