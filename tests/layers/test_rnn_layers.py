"""StaticRNN (op recurrent) and DynamicRNN (while over rank-sorted LoD sequences): outputs
against a numpy loop over the same (variable-length) sequences, gradients against finite
differences, and a DynamicRNN classifier that trains."""
import numpy as np
import pytest

import fluidity as fluid
from test_control_flow import check_grads, weights

L = fluid.layers
RNG = np.random.default_rng(0)


def _params(scope, *names):
    return [np.asarray(scope.find_var(n).value._array) for n in names]


def _run(main, startup, feed, fetch):
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    return exe.run(main, feed=feed, fetch_list=fetch, scope=scope, return_numpy=False), scope


# ---------------------------------------------------------------------------------------
# StaticRNN
# ---------------------------------------------------------------------------------------
T, B, D, H = 4, 3, 2, 5


def _static_rnn(x, h0=None, dtype="float32"):
    rnn = L.StaticRNN()
    with rnn.step():
        x_t = rnn.step_input(x)
        prev = rnn.memory(init=h0) if h0 is not None else \
            rnn.memory(shape=[-1, H], batch_ref=x_t, init_value=0.5)
        h = L.fc([x_t, prev], H, act="tanh", param_attr=["wx", "wh"], bias_attr="b")
        rnn.update_memory(prev, h)
        rnn.step_output(h)
        rnn.step_output(L.reduce_sum(h, dim=1, keep_dim=True))
    return rnn()


@pytest.mark.parametrize("boot", ["init", "shape"])
def test_static_rnn_matches_a_numpy_loop(boot):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [T, B, D], append_batch_size=False)
        h0 = L.data("h0", [B, H], append_batch_size=False) if boot == "init" else None
        out, sums = _static_rnn(x, h0)
    xv = RNG.normal(size=(T, B, D)).astype("float32")
    h0v = RNG.normal(size=(B, H)).astype("float32")
    feed = {"x": xv, "h0": h0v} if boot == "init" else {"x": xv}
    (o, s), scope = _run(main, startup, feed, [out, sums])
    wx, wh, b = _params(scope, "wx", "wh", "b")
    h = h0v if boot == "init" else np.full((B, H), 0.5, "float32")
    want = []
    for t in range(T):
        h = np.tanh(xv[t] @ wx + h @ wh + b)
        want.append(h)
    np.testing.assert_allclose(np.asarray(o), np.stack(want), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(s), np.stack(want).sum(-1, keepdims=True), rtol=1e-5)


def test_static_rnn_gradients():
    def build():
        x = L.data("x", [3, 2, D], append_batch_size=False, dtype="float64")
        h0 = L.data("h0", [2, H], append_batch_size=False, dtype="float64")
        out, sums = _static_rnn(x, h0, "float64")
        return L.mean(out * weights((3, 2, H))) + L.mean(sums) * 0.1
    check_grads(build, {"x": RNG.normal(size=(3, 2, D)), "h0": RNG.normal(size=(2, H))},
                ["x", "h0", "wx", "wh", "b"])


def test_static_rnn_misuse():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = L.data("x", [T, B, D], append_batch_size=False)
        rnn = L.StaticRNN()
        with pytest.raises(ValueError, match="inside"):
            rnn.step_input(x)
        with pytest.raises(ValueError, match="never updated"):
            with rnn.step():
                rnn.memory(shape=[-1, H], batch_ref=rnn.step_input(x))


# ---------------------------------------------------------------------------------------
# DynamicRNN
# ---------------------------------------------------------------------------------------
LENS = [3, 1, 5, 3]          # unsorted, with a tie and a length-1 sequence


def _seqs(lens=LENS, dim=D, dtype="float32"):
    x = RNG.normal(size=(sum(lens), dim)).astype(dtype)
    return x, fluid.create_lod_tensor(x, [lens])


def _numpy_rnn(x, lens, wx, wh, b, h0=None, static=None, ws=None):
    outs, off = [], 0
    for k, n in enumerate(lens):
        h = np.zeros(wh.shape[0]) if h0 is None else h0[k]
        for t in range(n):
            pre = x[off + t] @ wx + h @ wh + b
            if static is not None:
                pre = pre + static[k] @ ws
            h = np.tanh(pre)
            outs.append(h)
        off += n
    return np.stack(outs)


def _dynamic_rnn(x, h0=None, static=None):
    drnn = L.DynamicRNN()
    with drnn.block():
        x_t = drnn.step_input(x)
        prev = drnn.memory(init=h0, need_reorder=True) if h0 is not None else \
            drnn.memory(shape=[H], dtype=fluid.core.dtypes.name(x.dtype))
        inputs, attrs = [x_t, prev], ["wx", "wh"]
        if static is not None:
            inputs.append(drnn.static_input(static))
            attrs.append("ws")
        h = L.fc(inputs, H, act="tanh", param_attr=attrs, bias_attr="b")
        drnn.update_memory(prev, h)
        drnn.output(h, L.reduce_sum(h, dim=1, keep_dim=True))
    return drnn()


def test_dynamic_rnn_matches_a_numpy_loop_over_variable_length_sequences():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [D], lod_level=1)
        out, sums = _dynamic_rnn(x)
    xv, feed = _seqs()
    (o, s), scope = _run(main, startup, {"x": feed}, [out, sums])
    want = _numpy_rnn(xv, LENS, *_params(scope, "wx", "wh", "b"))
    np.testing.assert_allclose(np.asarray(o), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(s), want.sum(1, keepdims=True), rtol=1e-5,
                               atol=1e-5)
    assert o.recursive_sequence_lengths() == [LENS]


def test_dynamic_rnn_with_boot_memory_and_static_input():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [D], lod_level=1)
        h0 = L.data("h0", [H])
        st = L.data("st", [3])
        out, _ = _dynamic_rnn(x, h0, st)
    xv, feed = _seqs()
    h0v = RNG.normal(size=(len(LENS), H)).astype("float32")
    stv = RNG.normal(size=(len(LENS), 3)).astype("float32")
    (o, _), scope = _run(main, startup, {"x": feed, "h0": h0v, "st": stv}, [out, _])
    wx, wh, b, ws = _params(scope, "wx", "wh", "b", "ws")
    want = _numpy_rnn(xv, LENS, wx, wh, b, h0=h0v, static=stv, ws=ws)
    np.testing.assert_allclose(np.asarray(o), want, rtol=1e-5, atol=1e-6)


def test_dynamic_rnn_gradients():
    lens = [2, 1, 3]
    xv = RNG.normal(size=(sum(lens), D))

    def build():
        x = L.data("x", [D], lod_level=1, dtype="float64")
        h0 = L.data("h0", [H], dtype="float64")
        out, sums = _dynamic_rnn(x, h0)
        return L.mean(out * weights((sum(lens), H))) + L.mean(sums) * 0.1
    check_grads(build, {"x": fluid.create_lod_tensor(xv, [lens]),
                        "h0": RNG.normal(size=(len(lens), H))},
                ["x", "h0", "wx", "wh", "b"])


@pytest.mark.parametrize("pool", ["last", "sum"])
def test_dynamic_rnn_gradients_with_a_zero_memory(pool):
    """memory(shape=...) sizes its zero start from the input array's step 0 (a
    read_from_array that carries no gradient): every step's input gradient, step 0's
    included, matches finite differences (a zero entry once overwrote step 0's)."""
    lens = [2, 1, 3]
    xv = RNG.normal(size=(sum(lens), D))

    def build():
        x = L.data("x", [D], lod_level=1, dtype="float64")
        out, _ = _dynamic_rnn(x)
        return L.mean(L.sequence_pool(out, pool))
    check_grads(build, {"x": fluid.create_lod_tensor(xv, [lens])}, ["x", "wx", "wh"])


def test_dynamic_rnn_misuse():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = L.data("x", [D], lod_level=1)
        drnn = L.DynamicRNN()
        with pytest.raises(ValueError, match="inside"):
            drnn.step_input(x)
        with pytest.raises(ValueError, match="step_input"):
            with drnn.block():
                drnn.memory(shape=[H])


def test_dynamic_rnn_sequence_classifier_trains():
    """Is the sum of a sequence's values positive? Sequences of lengths 1..6, no padding."""
    rng = np.random.default_rng(4)

    def batch(n=32):
        lens = rng.integers(1, 7, n).tolist()
        x = rng.normal(size=(sum(lens), 1)).astype("float32")
        offs = np.cumsum([0] + lens)
        y = np.array([[x[a:b].sum() > 0] for a, b in zip(offs[:-1], offs[1:])], "int64")
        return {"x": fluid.create_lod_tensor(x, [lens]), "y": y}
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3
    with fluid.program_guard(main, startup):
        x = L.data("x", [1], lod_level=1)
        y = L.data("y", [1], dtype="int64")
        drnn = L.DynamicRNN()
        with drnn.block():
            x_t = drnn.step_input(x)
            prev = drnn.memory(shape=[8])
            h = L.fc([x_t, prev], 8, act="tanh")
            drnn.update_memory(prev, h)
            drnn.output(h)
        last = L.sequence_last_step(drnn())
        logits = L.fc(last, 2)
        loss = L.mean(L.softmax_with_cross_entropy(logits, y))
        acc = L.accuracy(L.softmax(logits), y)
        test = main.clone(for_test=True)
        fluid.optimizer.Adam(0.02).minimize(loss)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    first = None
    for _ in range(150):
        l, a = exe.run(main, feed=batch(), fetch_list=[loss, acc], scope=scope)
        first = first if first is not None else float(l)
    l, a = exe.run(test, feed=batch(400), fetch_list=[loss, acc], scope=scope)
    assert float(l) < 0.5 * first and float(a) > 0.85, (first, float(l), float(a))
