"""Fluid 1.6's cells and rnn(): LSTMCell / GRUCell against numpy steps written from Fluid's
formulas, with Fluid's parameter names and shapes; get_initial_states; rnn() over padded
batches (sequence_length, is_reverse, time_major, kwargs to the cell) against a numpy loop,
its gradients against finite differences; parameters shared by name between programs; and
the errors of bad input."""
import numpy as np
import pytest
import rnn_numpy as ref
from test_control_flow import check_grads

import fluidity as fluid
from fluidity.errors import ShapeError
from fluidity.layers.rnn import GRUCell, LSTMCell, RNNCell

L = fluid.layers
RNG = np.random.default_rng(3)
B, T, D, H = 3, 5, 4, 6


def _set(scope, name, value):
    scope.find_var(name).get_tensor().set(value, fluid.CPUPlace())


def _param(scope, name):
    return np.array(scope.find_var(name).get_tensor())


def _randomize(scope, program, scale=0.5):
    """Random values for every parameter (biases too), returned by name."""
    values = {}
    for p in program.global_block().all_parameters():
        v = RNG.uniform(-scale, scale, p.shape).astype("float32")
        _set(scope, p.name, v)
        values[p.name] = v
    return values


def _run(main, startup, feed, fetch):
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    params = _randomize(scope, main)
    return exe.run(main, feed=feed, fetch_list=fetch, scope=scope), params, scope


# --- one step ------------------------------------------------------------------------------
def test_lstm_cell_step_names_and_math():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, D], "float32")
        h = fluid.data("h", [None, H], "float32")
        c = fluid.data("c", [None, H], "float32")
        cell = LSTMCell(H, forget_bias=0.7)
        out, (h2, c2) = cell(x, [h, c])
    assert out.name == h2.name
    params = {p.name: list(p.shape) for p in main.global_block().all_parameters()}
    assert params == {"LSTMCell/BasicLSTMUnit_0.w_0": [D + H, 4 * H],
                      "LSTMCell/BasicLSTMUnit_0.b_0": [4 * H]}
    assert cell.state_shape == [[H], [H]]
    feed = {k: RNG.normal(size=(B, n)).astype("float32") for k, n in (("x", D), ("h", H),
                                                                        ("c", H))}
    (got_h, got_c), p, _ = _run(main, startup, feed, [h2, c2])
    want_h, want_c = ref.lstm_step(feed["x"], feed["h"], feed["c"],
                                   p["LSTMCell/BasicLSTMUnit_0.w_0"],
                                   p["LSTMCell/BasicLSTMUnit_0.b_0"], forget_bias=0.7)
    np.testing.assert_allclose(got_h, want_h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_c, want_c, rtol=1e-5, atol=1e-6)


def test_gru_cell_step_names_and_math():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, D], "float32")
        h = fluid.data("h", [None, H], "float32")
        cell = GRUCell(H, name="dec")
        out, new = cell(x, h)
    assert out.name == new.name and cell.state_shape == [H]
    params = {p.name: list(p.shape) for p in main.global_block().all_parameters()}
    pre = "dec/BasicGRUUnit_0"
    assert params == {f"{pre}.w_0": [D + H, 2 * H], f"{pre}.w_1": [D + H, H],
                      f"{pre}.b_0": [2 * H], f"{pre}.b_1": [H]}
    feed = {"x": RNG.normal(size=(B, D)).astype("float32"),
            "h": RNG.normal(size=(B, H)).astype("float32")}
    (got,), p, _ = _run(main, startup, feed, [out])
    want = ref.gru_step(feed["x"], feed["h"], p[f"{pre}.w_0"], p[f"{pre}.b_0"],
                        p[f"{pre}.w_1"], p[f"{pre}.b_1"])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_cells_take_activations_and_param_attrs():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, D], "float32")
        h = fluid.data("h", [None, H], "float32")
        gru = GRUCell(H, param_attr=fluid.ParamAttr(name="g"), bias_attr="gb",
                      gate_activation=L.hard_sigmoid, activation="relu")
        out, _ = gru(x, h)
    names = sorted(p.name for p in main.global_block().all_parameters())
    assert names == ["g_candidate", "g_gate", "gb_candidate", "gb_gate"]
    types = [op.type for op in main.global_block().ops]
    assert "hard_sigmoid" in types and "relu" in types and "sigmoid" not in types
    feed = {"x": RNG.normal(size=(B, D)).astype("float32"),
            "h": RNG.normal(size=(B, H)).astype("float32")}
    (got,), p, _ = _run(main, startup, feed, [out])
    xh = np.concatenate([feed["x"], feed["h"]], 1)
    r, u = np.split(np.clip(0.2 * (xh @ p["g_gate"] + p["gb_gate"]) + 0.5, 0, 1), 2, 1)
    m = np.maximum(np.concatenate([feed["x"], r * feed["h"]], 1) @ p["g_candidate"]
                   + p["gb_candidate"], 0)
    np.testing.assert_allclose(got, u * feed["h"] + (1 - u) * m, rtol=1e-5, atol=1e-6)


# --- initial states ------------------------------------------------------------------------
class PairCell(RNNCell):
    """A cell with nested states of two dtypes: {"h": [H], "n": [2, 3]}."""

    @property
    def state_shape(self):
        return {"h": [H], "n": [-1, 2, 3]}

    @property
    def state_dtype(self):
        return {"h": "float32", "n": "int64"}

    def call(self, inputs, states):
        return inputs, states


def test_get_initial_states_shapes_dtypes_and_batch_dim():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [T, None, D], "float32")      # batch in dim 1
        states = PairCell().get_initial_states(x, batch_dim_idx=1, init_value=2)
        lstm = LSTMCell(H, dtype="float64").get_initial_states(
            [x], shape=[[4], [H]], init_value=-1.0, batch_dim_idx=1)
    assert list(states["h"].shape) == [-1, H] and list(states["n"].shape) == [-1, 2, 3]
    xv = np.zeros((T, B, D), "float32")
    h, n, a, b = fluid.Executor().run(main, feed={"x": xv},
                                      fetch_list=[states["h"], states["n"], *lstm])
    assert h.shape == (B, H) and h.dtype == np.float32 and (h == 2).all()
    assert n.shape == (B, 2, 3) and n.dtype == np.int64 and (n == 2).all()
    assert a.shape == (B, 4) and b.shape == (B, H) and a.dtype == np.float64 and (a == -1).all()


@pytest.fixture
def fresh():
    """Build into new programs (not the process's default ones)."""
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        yield


def test_initial_states_need_a_shape(fresh):
    class Bare(RNNCell):
        def call(self, inputs, states):
            return inputs, states
    x = fluid.data("x", [None, D], "float32")
    with pytest.raises(NotImplementedError, match="state_shape"):
        Bare().get_initial_states(x)
    with pytest.raises(NotImplementedError, match="must implent the call"):
        RNNCell()(x, x)
    with pytest.raises(TypeError, match="batch_ref must be a Variable"):
        LSTMCell(H).get_initial_states(3)


# --- rnn() ---------------------------------------------------------------------------------
def _lstm_rnn_program(time_major=False, is_reverse=False, with_length=True, dtype="float32"):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        shape = [None, None, D] if not time_major else [None, None, D]
        x = fluid.data("x", shape, dtype)
        lens = fluid.data("lens", [None], "int64") if with_length else None
        cell = LSTMCell(H, dtype=dtype, name="enc")
        outs, (h, c) = L.rnn(cell, x, sequence_length=lens, time_major=time_major,
                             is_reverse=is_reverse)
    return main, startup, outs, h, c


@pytest.mark.parametrize("time_major", [False, True])
@pytest.mark.parametrize("is_reverse", [False, True])
def test_rnn_matches_a_numpy_loop(time_major, is_reverse):
    main, startup, outs, h, c = _lstm_rnn_program(time_major, is_reverse)
    assert [op.type for op in main.global_block().ops].count("recurrent") == 1
    xv = RNG.normal(size=(B, T, D)).astype("float32")
    lens = np.array([T, 2, 4], "int64")
    feed_x = xv.transpose(1, 0, 2) if time_major else xv
    (o, hv, cv), p, _ = _run(main, startup, {"x": feed_x, "lens": lens}, [outs, h, c])
    w, b = p["enc/BasicLSTMUnit_0.w_0"], p["enc/BasicLSTMUnit_0.b_0"]

    def step(x_t, states):
        nh, nc = ref.lstm_step(x_t, states[0], states[1], w, b)
        return nh, [nh, nc]
    zeros = np.zeros((B, H), "float32")
    want_o, (want_h, want_c) = ref.run_rnn(step, xv, [zeros, zeros], lens, is_reverse)
    if time_major:
        want_o = want_o.transpose(1, 0, 2)
    np.testing.assert_allclose(o, want_o, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(hv, want_h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(cv, want_c, rtol=1e-5, atol=1e-6)
    if not is_reverse:   # the final states are each sequence's last real step's
        for k, n in enumerate(lens):
            np.testing.assert_allclose(hv[k], (o[n - 1, k] if time_major else o[k, n - 1]),
                                       rtol=1e-6)


class AttendCell(RNNCell):
    """A GRU whose input is concatenated with a context vector passed as a keyword."""

    def __init__(self):
        self.gru = GRUCell(H, name="att")

    def call(self, inputs, states, context=None):
        return self.gru(L.concat([inputs, context], 1), states)

    @property
    def state_shape(self):
        return [H]


def test_rnn_passes_kwargs_and_initial_states_to_the_cell():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, T, D], "float32")
        ctx = fluid.data("ctx", [None, 2], "float32")
        h0 = fluid.data("h0", [None, H], "float32")
        outs, last = L.rnn(AttendCell(), x, initial_states=h0, context=ctx)
    feed = {"x": RNG.normal(size=(B, T, D)).astype("float32"),
            "ctx": RNG.normal(size=(B, 2)).astype("float32"),
            "h0": RNG.normal(size=(B, H)).astype("float32")}
    (o, lv), p, _ = _run(main, startup, feed, [outs, last])
    pre = "att/BasicGRUUnit_0"

    def step(x_t, states):
        nh = ref.gru_step(np.concatenate([x_t, feed["ctx"]], 1), states[0], p[f"{pre}.w_0"],
                          p[f"{pre}.b_0"], p[f"{pre}.w_1"], p[f"{pre}.b_1"])
        return nh, [nh]
    want_o, (want_l,) = ref.run_rnn(step, feed["x"], [feed["h0"]])
    np.testing.assert_allclose(o, want_o, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lv, want_l, rtol=1e-5, atol=1e-6)


def test_rnn_gradients_match_finite_differences():
    lens = np.array([3, 1], "int64")
    feed = {"x": RNG.normal(size=(2, 3, 2)), "lens": lens}

    def build():
        x = fluid.data("x", [None, 3, 2], "float64")
        x.stop_gradient = False
        ln = fluid.data("lens", [None], "int64")
        outs, (h, c) = L.rnn(LSTMCell(3, dtype="float64", name="g"), x, sequence_length=ln)
        return L.reduce_sum(outs * outs) + L.reduce_sum(h * c)
    check_grads(build, feed, ["x", "g/BasicLSTMUnit_0.w_0", "g/BasicLSTMUnit_0.b_0"],
                rtol=1e-4, atol=1e-7)


def test_a_cell_used_in_two_programs_shares_its_parameters_by_name():
    cell = LSTMCell(H, name="shared")
    progs = []
    for _ in range(2):
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup):
            x = fluid.data("x", [None, T, D], "float32")
            outs, _ = L.rnn(cell, x)
        progs.append((main, startup, outs))
    names = [sorted(p.name for p in m.global_block().all_parameters()) for m, _, _ in progs]
    assert names[0] == names[1] == ["shared/BasicLSTMUnit_0.b_0", "shared/BasicLSTMUnit_0.w_0"]
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(progs[0][1], scope=scope)
    _randomize(scope, progs[0][0])
    xv = RNG.normal(size=(B, T, D)).astype("float32")
    a, = exe.run(progs[0][0], feed={"x": xv}, fetch_list=[progs[0][2]], scope=scope)
    b, = exe.run(progs[1][0], feed={"x": xv}, fetch_list=[progs[1][2]], scope=scope)
    np.testing.assert_array_equal(a, b)


def test_rnn_and_cells_reject_bad_input(fresh):
    x = fluid.data("x", [None, T, D], "float32")
    with pytest.raises(TypeError, match="must be an RNNCell"):
        L.rnn(object(), x)
    with pytest.raises(TypeError, match="inputs must be a Variable"):
        L.rnn(LSTMCell(H), [1, 2])
    with pytest.raises(ValueError, match="batch and a time dim"):
        L.rnn(LSTMCell(H), fluid.data("flat", [None], "float32"))
    with pytest.raises(ValueError, match="hidden_size must be a positive int"):
        LSTMCell(0)
    cell = GRUCell(H)
    h = fluid.data("h", [None, H], "float32")
    with pytest.raises(ShapeError, match="last dim of input 'u' must be known"):
        cell(fluid.data("u", [None, None], "float32"), h)
    cell(fluid.data("v", [None, D], "float32"), h)
    with pytest.raises(ShapeError, match="has 7 features, but the unit was built for 4"):
        cell(fluid.data("w", [None, 7], "float32"), h)
    with pytest.raises(ShapeError, match="pre_hidden 'h3' has 3 features"):
        GRUCell(H)(fluid.data("v2", [None, D], "float32"), fluid.data("h3", [None, 3],
                                                                       "float32"))
    with pytest.raises(TypeError, match="states must be \\[hidden, cell\\]"):
        LSTMCell(H)(fluid.data("v3", [None, D], "float32"), h)
    with pytest.raises(TypeError, match="gate_activation must be a layer function"):
        LSTMCell(H, gate_activation=3)


def test_cells_without_biases():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, D], "float32")
        h = fluid.data("h", [None, H], "float32")
        out, (h2, c2) = LSTMCell(H, bias_attr=False)(x, [h, h])
    assert [p.name for p in main.global_block().all_parameters()] == \
        ["LSTMCell/BasicLSTMUnit_0.w_0"]
    feed = {"x": RNG.normal(size=(B, D)).astype("float32"),
            "h": RNG.normal(size=(B, H)).astype("float32")}
    (got,), p, _ = _run(main, startup, feed, [c2])
    _, want = ref.lstm_step(feed["x"], feed["h"], feed["h"], p["LSTMCell/BasicLSTMUnit_0.w_0"],
                            np.zeros(4 * H, "float32"))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
