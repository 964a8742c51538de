"""fluid.contrib.layers.basic_lstm / basic_gru and their units: multi-layer, bidirectional
runs over padded batches against a numpy loop written from Fluid's formulas (the padded
steps keep the states; the backward direction runs over the reversed padded batch), Fluid's
parameter names (with and without named ParamAttrs), given initial states, dropout, and
gradients against finite differences."""
import numpy as np
import pytest
import rnn_numpy as ref
from test_control_flow import check_grads

import fluidity as fluid
from fluidity.contrib.layers import BasicGRUUnit, BasicLSTMUnit, basic_gru, basic_lstm

L = fluid.layers
RNG = np.random.default_rng(11)
T, B, D, H = 5, 3, 4, 3


def _unit_step(kind, p, prefix):
    if kind == "lstm":
        w, b = p[f"{prefix}/BasicLSTMUnit_0.w_0"], p[f"{prefix}/BasicLSTMUnit_0.b_0"]
        return lambda x, s: list(ref.lstm_step(x, s[0], s[1], w, b))
    g = [p[f"{prefix}/BasicGRUUnit_0.{n}"] for n in ("w_0", "b_0", "w_1", "b_1")]
    return lambda x, s: [ref.gru_step(x, s[0], *g)]


def _direction(kind, p, name, xs, lens, layers, init, reverse):
    """One direction of basic_<kind> (time-major xs): (top outputs, last states per layer)."""
    n_states = 2 if kind == "lstm" else 1
    steps = [_unit_step(kind, p, f"{name}_{'reverse_' if reverse else ''}layers_{i}")
             for i in range(layers)]
    states = [[s.copy() for s in init[i]] for i in range(layers)]
    order = range(T - 1, -1, -1) if reverse else range(T)
    mask = (np.arange(T)[:, None] < lens[None, :]).astype("float32")
    outs = [None] * T
    for t in order:
        x = xs[t]
        for i in range(layers):
            new = steps[i](x, states[i])
            m = mask[t][:, None]
            new = [nv * m + ov * (1 - m) for nv, ov in zip(new, states[i])]
            states[i] = new
            x = new[0]
        outs[t] = x
    last = [np.stack([states[i][k] for i in range(layers)]) for k in range(n_states)]
    return np.stack(outs), last


def _reference(kind, p, name, xs, lens, layers, bidirectional, init):
    fw, fw_last = _direction(kind, p, name, xs, lens, layers, init[0], False)
    if not bidirectional:
        return fw, fw_last
    bw, bw_last = _direction(kind, p, name, xs, lens, layers, init[1], True)
    last = [np.stack([a, b], 1).reshape(layers * 2, B, H) for a, b in zip(fw_last, bw_last)]
    return np.concatenate([fw, bw], 2), last


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("bidirectional,batch_first,given_init",
                         [(True, False, False), (False, True, True), (True, True, True)])
def test_basic_layers_match_a_numpy_loop(kind, bidirectional, batch_first, given_init):
    layers, dirs = 2, 2 if bidirectional else 1
    n_states = 2 if kind == "lstm" else 1
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, T, D] if batch_first else [T, None, D], "float32")
        lens = fluid.data("lens", [None], "int64")
        inits = [fluid.data(f"init{k}", [layers * dirs, None, H], "float32")
                 for k in range(n_states)] if given_init else [None] * n_states
        if kind == "lstm":
            out, *last = basic_lstm(x, inits[0], inits[1], H, num_layers=layers,
                                    sequence_length=lens, bidirectional=bidirectional,
                                    batch_first=batch_first, forget_bias=1.0)
        else:
            out, *last = basic_gru(x, inits[0], H, num_layers=layers, sequence_length=lens,
                                   bidirectional=bidirectional, batch_first=batch_first)
    # one recurrent op per direction
    assert [op.type for op in main.global_block().ops].count("recurrent") == dirs
    xs = RNG.uniform(-1, 1, (T, B, D)).astype("float32")
    lv = np.array([T, 2, 4], "int64")
    init_v = [RNG.uniform(-1, 1, (layers * dirs, B, H)).astype("float32")
              for _ in range(n_states)] if given_init else \
        [np.zeros((layers * dirs, B, H), "float32")] * n_states
    feed = {"x": xs.transpose(1, 0, 2) if batch_first else xs, "lens": lv}
    if given_init:
        feed.update({f"init{k}": v for k, v in enumerate(init_v)})
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    p = {}
    for prm in main.global_block().all_parameters():
        p[prm.name] = RNG.uniform(-0.5, 0.5, prm.shape).astype("float32")
        scope.find_var(prm.name).get_tensor().set(p[prm.name], fluid.CPUPlace())
    got = exe.run(main, feed=feed, fetch_list=[out, *last], scope=scope)
    # init [layers * dirs] is layer-major: layer i's direction d is row i * dirs + d
    per = [[[init_v[k][i * dirs + d] for k in range(n_states)] for i in range(layers)]
           for d in range(dirs)]
    want, want_last = _reference(kind, p, f"basic_{kind}", xs, lv, layers, bidirectional,
                                 per)
    if batch_first:
        want = want.transpose(1, 0, 2)
    np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-6)
    for g, w in zip(got[1:], want_last):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_named_param_attrs_give_fluids_names():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [T, None, D], "float32")
        basic_gru(x, None, H, num_layers=1, bidirectional=True, batch_first=False,
                  param_attr=fluid.ParamAttr(name="g"), bias_attr=fluid.ParamAttr(name="g"))
        basic_lstm(x, None, None, H, num_layers=2, bidirectional=True, batch_first=False,
                   param_attr=fluid.ParamAttr(name="l"), bias_attr=fluid.ParamAttr(name="l"))
        basic_lstm(x, None, None, H, name="plain")
    names = {p.name for p in fluid.io.get_program_parameter(main)}
    gru = {f"g_{d}_{wb}_0_{part}" for d in ("fw", "bw") for wb in "wb"
           for part in ("gate", "candidate")}
    lstm = {f"l_{d}_{wb}_{i}" for d in ("fw", "bw") for wb in "wb" for i in (0, 1)}
    plain = {"plain_layers_0/BasicLSTMUnit_0.w_0", "plain_layers_0/BasicLSTMUnit_0.b_0"}
    assert names == gru | lstm | plain


def test_dropout_applies_between_layers_only_in_training():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, T, D], "float32")
        out, _, _ = basic_lstm(x, None, None, H, num_layers=2, dropout_prob=0.5)
        test = main.clone(for_test=True)
    assert [op.type for op in main.block(1).ops].count("dropout") == 2
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    xv = RNG.uniform(-1, 1, (B, T, D)).astype("float32")
    a, = exe.run(test, feed={"x": xv}, fetch_list=[out.name], scope=scope)
    b, = exe.run(test, feed={"x": xv}, fetch_list=[out.name], scope=scope)
    np.testing.assert_array_equal(a, b)                  # no dropout at test time
    c, = exe.run(main, feed={"x": xv}, fetch_list=[out], scope=scope)
    assert (c == 0).mean() > 0.2                         # upscale_in_train zeros ~half


def test_basic_gru_gradients_match_finite_differences():
    feed = {"x": RNG.normal(size=(2, 3, 2)), "lens": np.array([3, 2], "int64")}

    def build():
        x = fluid.data("x", [None, 3, 2], "float64")
        x.stop_gradient = False
        ln = fluid.data("lens", [None], "int64")
        out, last = basic_gru(x, None, 2, sequence_length=ln, bidirectional=True,
                              dtype="float64", name="g")
        return L.reduce_sum(out * out) + L.reduce_sum(last)
    check_grads(build, feed, ["x", "g_layers_0/BasicGRUUnit_0.w_0",
                              "g_reverse_layers_0/BasicGRUUnit_0.b_1"], rtol=1e-4, atol=1e-7)


def test_units_and_layers_reject_bad_input():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [None, D], "float32")
        h = fluid.data("h", [None, H], "float32")
        unit = BasicLSTMUnit("u", H)
        hv, cv = unit(x, h, h)
        assert [p.name for p in unit.parameters()] == ["u/BasicLSTMUnit_0.w_0",
                                                       "u/BasicLSTMUnit_0.b_0"]
        assert BasicGRUUnit("v", H).full_name() == "v/BasicGRUUnit_0"
        seq = fluid.data("seq", [None, T, D], "float32")
        with pytest.raises(fluid.errors.ShapeError, match="must be 3-D"):
            basic_gru(x, None, H)
        with pytest.raises(ValueError, match="num_layers must be a positive int"):
            basic_gru(seq, None, H, num_layers=0)
        with pytest.raises(ValueError, match="dropout_prob must be in"):
            basic_lstm(seq, None, None, H, dropout_prob=1.5)
        with pytest.raises(ValueError, match="all of the initial states or none"):
            basic_lstm(seq, fluid.data("i", [1, None, H], "float32"), None, H)
        with pytest.raises(TypeError, match="input must be a Variable"):
            basic_lstm(np.zeros((2, 2, 2)), None, None, H)
