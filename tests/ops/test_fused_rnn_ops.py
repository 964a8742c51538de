"""fusion_gru, fusion_lstm, fused_embedding_fc_lstm, attention_lstm against numpy references
written step by step per sequence (no batching), and their bad-input errors."""
import numpy as np
import pytest

from fluidity.core.tensor import LoDTensor
from fluidity.errors import FluidityError
from tests.op_test import check_output, run_op

RNG = np.random.default_rng(7)
LENS = [2, 4, 1]
OFF = np.concatenate([[0], np.cumsum(LENS)])


def sig(v):
    return 1 / (1 + np.exp(-v))


def _seq(n, m):
    return LoDTensor(RNG.normal(size=(n, m)).astype("float32"), [OFF.tolist()])


def ref_gru(xg, h0, wh, rev):
    """xg: [T, 3D] projected input + bias; wh stored flat: [D, 2D] gates then [D, D]."""
    d = wh.shape[0]
    w_ur = wh.reshape(-1)[:2 * d * d].reshape(d, 2 * d)
    w_c = wh.reshape(-1)[2 * d * d:].reshape(d, d)
    out = np.zeros((len(xg), d))
    for i in range(len(LENS)):
        h = h0[i].astype(float)
        steps = range(OFF[i], OFF[i + 1])
        for t in (reversed(steps) if rev else steps):
            ur = sig(xg[t, :2 * d] + h @ w_ur)
            u, r = ur[:d], ur[d:]
            c = np.tanh(xg[t, 2 * d:] + (r * h) @ w_c)
            h = u * c + (1 - u) * h
            out[t] = h
    return out


def ref_lstm(xg, h0, c0, wh, bias, peep, rev):
    """xg: [T, 4D] projected input; gates [candidate, input, forget, output]."""
    d = wh.shape[0]
    b = bias.reshape(-1)
    wic, wfc, woc = (b[4 * d:5 * d], b[5 * d:6 * d], b[6 * d:]) if peep else (0, 0, 0)
    hs, cs = np.zeros((len(xg), d)), np.zeros((len(xg), d))
    for i in range(len(LENS)):
        h, c = h0[i].astype(float), c0[i].astype(float)
        steps = range(OFF[i], OFF[i + 1])
        for t in (reversed(steps) if rev else steps):
            g = xg[t] + b[:4 * d] + h @ wh
            ig = sig(g[d:2 * d] + c * wic)
            fg = sig(g[2 * d:3 * d] + c * wfc)
            c = np.tanh(g[:d]) * ig + c * fg
            h = sig(g[3 * d:] + c * woc) * np.tanh(c)
            hs[t], cs[t] = h, c
    return hs, cs


@pytest.mark.parametrize("rev,with_h0,with_bias", [(False, True, True), (True, False, False)])
def test_fusion_gru(rev, with_h0, with_bias):
    m, d = 3, 4
    x = _seq(OFF[-1], m)
    wx = RNG.normal(size=(m, 3 * d)).astype("float32")
    wh = RNG.normal(size=(d, 3 * d)).astype("float32") * 0.5
    bias = RNG.normal(size=(1, 3 * d)).astype("float32")
    h0 = RNG.normal(size=(3, d)).astype("float32")
    xg = x._array @ wx + (bias if with_bias else 0)
    want = ref_gru(xg, h0 if with_h0 else np.zeros((3, d)), wh, rev)
    inputs = {"X": x, "WeightX": wx, "WeightH": wh, "Bias": bias if with_bias else None,
              "H0": h0 if with_h0 else None}
    got = check_output("fusion_gru", inputs, {"Hidden": want}, {"is_reverse": rev},
                       atol=1e-5, rtol=1e-4, outputs=["Hidden", "XX", "BatchedOut"])
    np.testing.assert_allclose(got["XX"], xg, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("peep,rev", [(True, False), (False, True)])
def test_fusion_lstm(peep, rev):
    m, d = 3, 4
    x = _seq(OFF[-1], m)
    wx = RNG.normal(size=(m, 4 * d)).astype("float32")
    wh = RNG.normal(size=(d, 4 * d)).astype("float32") * 0.5
    bias = RNG.normal(size=(1, (7 if peep else 4) * d)).astype("float32")
    h0, c0 = (RNG.normal(size=(3, d)).astype("float32") for _ in range(2))
    hs, cs = ref_lstm(x._array @ wx, h0, c0, wh, bias, peep, rev)
    check_output("fusion_lstm", {"X": x, "WeightX": wx, "WeightH": wh, "Bias": bias,
                                 "H0": h0, "C0": c0},
                 {"Hidden": hs, "Cell": cs}, {"use_peepholes": peep, "is_reverse": rev},
                 atol=1e-5, rtol=1e-4)


def test_fused_embedding_fc_lstm_does_not_add_the_gate_bias_twice():
    v, d = 6, 3
    ids = LoDTensor(RNG.integers(0, v, size=(OFF[-1], 1)).astype("int64"), [OFF.tolist()])
    emb = RNG.normal(size=(v, 4 * d)).astype("float32")    # table @ WeightX + gate bias
    wh = RNG.normal(size=(d, 4 * d)).astype("float32") * 0.5
    bias = RNG.normal(size=(1, 7 * d)).astype("float32")
    no_gate_bias = bias.copy()
    no_gate_bias[0, :4 * d] = 0
    zeros = np.zeros((3, d))
    hs, cs = ref_lstm(emb[ids._array.reshape(-1)], zeros, zeros, wh, no_gate_bias, True, False)
    check_output("fused_embedding_fc_lstm", {"Ids": ids, "Embeddings": emb, "WeightH": wh,
                                             "Bias": bias},
                 {"Hidden": hs, "Cell": cs}, atol=1e-5, rtol=1e-4)


def ref_attention_lstm(x, c0, h0, aw, ab, scalar, sbias, w, b):
    m, d = x.shape[1], b.shape[1] // 4
    hs, cs = np.zeros((len(x), d)), np.zeros((len(x), d))
    for i in range(len(LENS)):
        xi = x[OFF[i]:OFF[i + 1]].astype(float)
        c, h = c0[i].astype(float), (None if h0 is None else h0[i].astype(float))
        for t in range(OFF[i], OFF[i + 1]):
            feats = np.hstack([xi, np.tile(c, (len(xi), 1))])
            score = np.maximum(feats @ aw[:, 0] + ab, 0)
            if scalar is not None:
                score = np.maximum(score * scalar + sbias, 0)
            a = np.exp(score - score.max())
            pooled = (a / a.sum()) @ xi
            z = np.hstack([np.zeros(d) if h is None else h, pooled]) @ w + b[0]
            f, ig, o, cand = sig(z[:d]), sig(z[d:2 * d]), sig(z[2 * d:3 * d]), np.tanh(z[3 * d:])
            c = f * c + ig * cand
            h = o * np.tanh(c)
            hs[t], cs[t] = h, c
    return hs, cs


@pytest.mark.parametrize("full", [True, False])
def test_attention_lstm(full):
    m, d = 3, 2
    x = _seq(OFF[-1], m)
    c0, h0 = (RNG.normal(size=(3, d)).astype("float32") for _ in range(2))
    aw = RNG.normal(size=(m + d, 1)).astype("float32")
    ab, sc, sb = (RNG.normal(size=(1, 1)).astype("float32") for _ in range(3))
    w = RNG.normal(size=(m + d, 4 * d)).astype("float32")
    b = RNG.normal(size=(1, 4 * d)).astype("float32")
    hs, cs = ref_attention_lstm(x._array, c0, h0 if full else None, aw, ab[0, 0],
                                sc[0, 0] if full else None, sb[0, 0] if full else 0, w, b)
    inputs = {"X": x, "C0": c0, "H0": h0 if full else None, "AttentionWeight": aw,
              "AttentionBias": ab, "AttentionScalar": sc if full else None,
              "AttentionScalarBias": sb if full else None, "LSTMWeight": w, "LSTMBias": b}
    check_output("attention_lstm", inputs, {"Hidden": hs, "Cell": cs}, atol=1e-5, rtol=1e-4)


def test_errors_name_the_op_and_input():
    m, d = 3, 4
    x = _seq(OFF[-1], m)
    wx = np.ones((m, 3 * d), "float32")
    wh = np.ones((d, 3 * d), "float32")
    with pytest.raises(FluidityError, match=r"fusion_gru.*H0 must be \[3, 4\]"):
        run_op("fusion_gru", {"X": x, "WeightX": wx, "WeightH": wh,
                              "H0": np.zeros((2, d), "float32")}, outputs=["Hidden"])
    with pytest.raises(FluidityError, match=r"fusion_gru.*WeightH must be \[D, 3D\]"):
        run_op("fusion_gru", {"X": x, "WeightX": wx, "WeightH": np.ones((d, 2 * d), "float32")},
               outputs=["Hidden"])
    with pytest.raises(FluidityError, match=r"fusion_lstm.*X has no LoD"):
        run_op("fusion_lstm", {"X": x._array, "WeightX": np.ones((m, 4 * d), "float32"),
                               "WeightH": np.ones((d, 4 * d), "float32"),
                               "Bias": np.ones((1, 7 * d), "float32")},
               outputs=["Hidden", "Cell"])


def test_saved_inference_model_with_fusion_gru_runs_after_loading(tmp_path):
    """What Paddle's inference passes leave in a model: a fusion_gru over a sequence input
    with its weights as parameters; saved, loaded and run as a user would."""
    import fluidity as fluid
    m, d = 3, 4
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [m], lod_level=1)
        wx = fluid.layers.create_parameter([m, 3 * d], "float32", name="gru_wx")
        wh = fluid.layers.create_parameter([d, 3 * d], "float32", name="gru_wh")
        bias = fluid.layers.create_parameter([1, 3 * d], "float32", name="gru_b")
        block = main.global_block()
        hidden = block.create_var(name="hidden", dtype="float32")
        block.append_op("fusion_gru", inputs={"X": x, "WeightX": wx, "WeightH": wh,
                                              "Bias": bias},
                        outputs={"Hidden": hidden}, attrs={"use_seq": False})
    assert hidden.shape == (-1, d) and hidden.lod_level == 1
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    feed = {"x": _seq(OFF[-1], m)}
    want, = exe.run(main, feed=feed, fetch_list=[hidden], scope=scope)
    with fluid.scope_guard(scope):
        fluid.io.save_inference_model(str(tmp_path), ["x"], [hidden], exe, main)
    loaded_scope = fluid.Scope()
    with fluid.scope_guard(loaded_scope):
        prog, feeds, fetches = fluid.io.load_inference_model(str(tmp_path), exe)
        got, = exe.run(prog, feed=feed, fetch_list=fetches)
    np.testing.assert_array_equal(got, want)
    params = {n: np.asarray(scope.find_var(n).get_tensor()) for n in ("gru_wx", "gru_wh",
                                                                          "gru_b")}
    xg = feed["x"]._array @ params["gru_wx"] + params["gru_b"]
    np.testing.assert_allclose(got, ref_gru(xg, np.zeros((3, d)), params["gru_wh"], False),
                               rtol=1e-4, atol=1e-5)


def test_weights_that_do_not_fit_are_refused_at_run_time():
    """A loaded program skips build-time checks: the kernel still names op and shapes."""
    import fluidity as fluid
    from tests.op_test import build_op
    m, d = 3, 4
    inputs = {"X": _seq(OFF[-1], m), "WeightX": np.ones((m, 3 * d), "float32"),
              "WeightH": np.ones((d, 3 * d), "float32")}
    main, _, feed, outs, _ = build_op("fusion_gru", inputs, outputs=["Hidden"])
    feed["weightx_in"] = np.ones((m + 1, 3 * d), "float32")
    with pytest.raises(FluidityError, match=r"fusion_gru: X \[7, 3\], WeightX \[4, 12\]"):
        fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=outs["Hidden"])
