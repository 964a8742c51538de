"""recurrent and recurrent_grad compiled (StaticRNN, issue 29): the time steps as one loop
in one native segment, the gradient block run per kept step, last first. Checked against
the interpreter (forward programs with one and two memories, reversed, an outside value
read at every step; training steps with SGD), against central differences, and for the
forms refused or run interpreted."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.codegen.lower import Lowering

from compiled_runs import central_differences, param_differences, step_both, train_both

L = fluid.layers
B, D, H = 3, 2, 4
PARAMS = ["wx", "wh", "b"]


def build(memories=1, reverse=False, outside=False, train=True, loss_of=L.mean,
          grads_of_data=False):
    """A StaticRNN over x [T, B, D] (T and B known at run time) with `memories` memories
    (h from h0; c from a fill_constant_batch_size_like over the step input), `outside`: a
    value from outside the step block (y [B, H]) added at every step."""
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 7
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = L.data("x", [-1, -1, D], dtype="float32", append_batch_size=False)
        h0 = L.data("h0", [-1, H], dtype="float32", append_batch_size=False)
        y = L.data("y", [-1, H], dtype="float32", append_batch_size=False)
        if grads_of_data:
            x.stop_gradient = h0.stop_gradient = False
        rnn = L.StaticRNN()
        with rnn.step():
            xt = rnn.step_input(x)
            h = rnn.memory(init=h0)
            z = L.fc(xt, H, param_attr="wx", bias_attr="b") + \
                L.fc(h, H, param_attr="wh", bias_attr=False)
            if outside:
                z = z + y
            if memories == 2:
                c = rnn.memory(shape=[-1, H], batch_ref=xt, init_value=0.5)
                c2 = L.sigmoid(z) * c + L.tanh(z)
                rnn.update_memory(c, c2)
                hn = L.tanh(c2)
            else:
                hn = L.tanh(z)
            rnn.update_memory(h, hn)
            rnn.step_output(hn)
        rnn_op = main.global_block().ops[-1]
        rnn_op._set_attr("reverse", reverse)
        out = rnn()
        loss = loss_of(out)
        if train:
            fluid.backward.append_backward(loss)
    fetch = [loss.name, out.name]
    if train:
        fetch += [p + "@GRAD" for p in PARAMS]
    if grads_of_data:
        fetch += ["x@GRAD", "h0@GRAD"]
    return main, startup, fetch


def feed(steps=5, batch=B, seed=0, h0_batch=None):
    r = np.random.default_rng(seed)
    return {"x": r.uniform(-1, 1, (steps, batch, D)).astype("float32"),
            "h0": r.uniform(-1, 1, (h0_batch or batch, H)).astype("float32"),
            "y": r.uniform(-1, 1, (batch, H)).astype("float32")}


def where(main, keep):
    rows = Lowering(main, 0, keep=keep).explain()
    return {w for _, _, w, _ in rows if w != "python"}, \
        [(t, why) for _, t, w, why in rows if w == "python"]


# float32: tanh and sigmoid within an ulp or two of numpy's (6e-8 at these magnitudes),
# each step's error carried through the memory (damped by the gates' slopes below 1) and
# the gradients summed over the steps and the batch: a few ulp times the length
def tol(steps):
    return 8 * 6e-8 * steps * B


FORMS = {"one memory": {}, "two memories": {"memories": 2}, "reverse": {"reverse": True},
         "an outside value": {"outside": True},
         "two memories, reversed, outside": {"memories": 2, "reverse": True, "outside": True}}


@pytest.mark.parametrize("form", FORMS.values(), ids=FORMS.keys())
def test_a_static_rnn_forward_compiles_whole_with_the_interpreters_values(form, caplog):
    main, startup, fetch = build(train=False, **form)
    segs, python = where(main, fetch)
    assert len(segs) == 1 and not python, python
    want, got = step_both(main, startup, fetch, feed(), caplog)
    for name, w, g in zip(fetch, want, got):
        assert g.shape == w.shape, name
        np.testing.assert_allclose(g, w, rtol=0, atol=tol(5), err_msg=name)


@pytest.mark.parametrize("form", FORMS.values(), ids=FORMS.keys())
@pytest.mark.parametrize("steps", [1, 6])
def test_the_gradients_of_a_static_rnn_compile_whole_with_the_interpreters_values(
        form, steps, caplog):
    main, startup, fetch = build(grads_of_data=True, **form)
    segs, python = where(main, fetch)
    assert len(segs) == 1 and not python, python
    want, got = step_both(main, startup, fetch, feed(steps, seed=steps), caplog)
    for name, w, g in zip(fetch, want, got):
        assert g.shape == w.shape, name
        np.testing.assert_allclose(g, w, rtol=0, atol=tol(steps), err_msg=name)


def test_training_with_sgd_through_the_compiled_rnn_updates_as_the_interpreter(caplog):
    """StaticRNN + fc + mean + SGD, four steps: one segment, nothing interpreted, the
    losses and the parameters after each agree."""
    main, startup, fetch = build(memories=2,
                                 loss_of=lambda o: L.mean(L.fc(o, 1, num_flatten_dims=2)))
    with fluid.program_guard(main, startup):
        fluid.optimizer.SGD(0.5).minimize(main.global_block().var(fetch[0]))
    segs, python = where(main, fetch[:1])
    assert len(segs) == 1 and not python, python
    feeds = [feed(4, seed=s) for s in range(4)]
    want, got = train_both(main, startup, fetch[:1], feeds, caplog)
    for w, g in zip(want.outs, got.outs):
        np.testing.assert_allclose(g[0], w[0], rtol=0, atol=1e-6)
    for p in want.params:
        np.testing.assert_allclose(got.params[p], want.params[p], rtol=0, atol=1e-5,
                                   err_msg=p)


def test_the_compiled_gradients_match_central_differences():
    """d loss / d (parameters, x, h0) of the compiled run against (f(v + e) - f(v - e)) / 2e
    of the interpreter's loss in float32 (a mean over 36 values, below 1): at e = 3e-3 the
    difference's rounding is a few ulp of the loss over 2e (~3e-5) and its truncation
    (f''' e^2 / 6) was measured at 2e-5 (3e-4 at e = 1e-2, shrinking as e^2)."""
    main, startup, fetch = build(memories=2, grads_of_data=True,
                                 loss_of=lambda o: L.mean(o * o))
    data = feed(3, seed=3)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    got = dict(zip(fetch, exe.run(fluid.CompiledProgram(main).with_native_code(), feed=data,
                                  fetch_list=fetch, scope=scope)))
    test = main.clone(for_test=True)._prune([fetch[0]])

    def loss(d):
        d = {k: d[k] for k in ("x", "h0")}       # y is not read (outside=False)
        return float(exe.run(test, feed=d, fetch_list=[fetch[0]], scope=scope)[0]
                     .reshape(-1)[0])

    eps = 3e-3
    for name in PARAMS:
        numeric = param_differences(scope, name, lambda: loss(data), eps)
        np.testing.assert_allclose(got[name + "@GRAD"], numeric, rtol=0, atol=1e-4,
                                   err_msg=name)
    for name in ("x", "h0"):
        numeric = central_differences(lambda v, name=name: loss({**data, name: v}),
                                      data[name], eps)
        np.testing.assert_allclose(got[name + "@GRAD"], numeric, rtol=0, atol=1e-4,
                                   err_msg=name)


def run_compiled(main, startup, fetch, data):
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    return exe.run(fluid.CompiledProgram(main).with_native_code(), feed=data,
                   fetch_list=fetch, scope=scope)


@pytest.mark.parametrize("bad", [dict(h0_batch=2), dict(steps=0)],
                         ids=["a memory of another batch than its state", "no time steps"])
def test_a_run_the_segment_cannot_take_runs_interpreted_and_fails_as_the_interpreter(bad):
    """h0 of 2 rows against the step's state of 3, or no time steps: checked before the
    segment runs, so the ops run interpreted and raise the interpreter's error."""
    main, startup, fetch = build(train=False)
    with pytest.raises(Exception) as want:
        exe, scope = fluid.Executor(), fluid.Scope()
        exe.run(startup, scope=scope)
        exe.run(main, feed=feed(**bad), fetch_list=fetch, scope=scope)
    with pytest.raises(type(want.value)) as got:
        run_compiled(main, startup, fetch, feed(**bad))
    assert str(got.value) == str(want.value)


def test_other_targets_refuse_it_with_the_reason():
    main, _, fetch = build(train=False)
    rows = Lowering(main, 0, keep=fetch, target="c").explain()
    (why,) = [why for _, t, w, why in rows if t == "recurrent"]
    assert "compiles for C++ only" in why


def test_a_step_block_that_writes_an_outer_variable_is_refused():
    """The interpreter's step scope would write the outer variable: not compiled."""
    main, _, fetch = build(train=False)
    sub = main.block(1)
    sub.ops[0]._rename_output(sub.ops[0].output_arg_names[0], "y")
    rows = Lowering(main, 0, keep=fetch).explain()
    (why,) = [why for _, t, w, why in rows if t == "recurrent"]
    assert "writes 'y' that it does not declare" in why


def test_an_interpreted_gradient_leaves_the_forward_interpreted_too():
    """A recurrent_grad that cannot compile (here: refused on the C target) needs the step
    scopes only the interpreter keeps."""
    main, _, fetch = build()
    rows = Lowering(main, 0, keep=fetch, target="c").explain()
    assert {t for _, t, w, _ in rows if w == "python"} >= {"recurrent", "recurrent_grad"}


def test_an_lstm_cell_through_layers_rnn_trains_compiled_as_the_interpreter(caplog):
    """`layers.rnn(LSTMCell)` time-major, as the seq2seq example's cell API builds it
    (concat, matmul, split and the gates in the step block; concat_grad and sums of the
    gradients in the gradient block; the final states sliced from the stacked outputs):
    one segment, three SGD steps, losses and parameters as the interpreter's."""
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 3
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, None, D], "float32")
        out, (h, c) = L.rnn(L.LSTMCell(H, name="enc"), x, time_major=True)
        loss = L.mean(out) + L.mean(c * c)
        fluid.optimizer.SGD(0.5).minimize(loss)
    segs, python = where(main, [loss.name])
    assert len(segs) == 1 and not python, python
    feeds = [{"x": feed(steps, seed=steps)["x"]} for steps in (4, 1, 6)]
    want, got = train_both(main, startup, [loss.name, h.name], feeds, caplog)
    for w, g in zip(want.outs, got.outs):
        for a, b in zip(w, g):
            np.testing.assert_allclose(b, a, rtol=0, atol=tol(6))
    for p in want.params:
        np.testing.assert_allclose(got.params[p], want.params[p], rtol=0, atol=tol(6),
                                   err_msg=p)


@pytest.mark.parametrize("names", [[], ["s1", "s2"]], ids=["none", "two"])
def test_a_desc_with_other_than_one_step_scopes_name_is_refused_not_a_crash(names):
    """A model file is data: a recurrent whose step_scopes slot names no variable or
    several is refused with the reason (it runs interpreted, which judges it)."""
    main, _, fetch = build(train=False)
    block = main.global_block()
    for n in names:
        block.create_var(name=n, type=fluid.core.VarDesc.VarType.STEP_SCOPES)
    rnn_op = [o for o in block.ops if o.type == "recurrent"][0]
    rnn_op.set_output("step_scopes", names)
    rows = Lowering(main, 0, keep=fetch).explain()
    (why,) = [why for _, t, w, why in rows if t == "recurrent"]
    assert f"step_scopes names {len(names)} variables, not one" in why


def test_an_output_gradient_nobody_computed_reads_as_zeros_as_in_the_interpreter(caplog):
    """Two step outputs, the loss on the first: the second's gradient (its
    fill_zeros_like dropped, the slot @EMPTY@) is zeros at every step in both paths."""
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 3
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = L.data("x", [-1, -1, D], dtype="float32", append_batch_size=False)
        h0 = L.data("h0", [-1, H], dtype="float32", append_batch_size=False)
        rnn = L.StaticRNN()
        with rnn.step():
            xt = rnn.step_input(x)
            h = rnn.memory(init=h0)
            hn = L.tanh(L.fc(xt, H, param_attr="wx", bias_attr="b") +
                        L.fc(h, H, param_attr="wh", bias_attr=False))
            rnn.update_memory(h, hn)
            rnn.step_output(hn)
            rnn.step_output(L.sigmoid(hn))
        first, _ = rnn()
        loss = L.mean(first)
        fluid.backward.append_backward(loss)
    block = main.global_block()
    grad_op = [o for o in block.ops if o.type == "recurrent_grad"][0]
    zeros = [j for j, o in enumerate(block.ops) if o.type == "fill_zeros_like"]
    assert len(zeros) == 1
    block._remove_op(zeros[0])
    grad_op.set_input("outputs@GRAD", [grad_op.input("outputs@GRAD")[0], "@EMPTY@"])
    fetch = [loss.name] + [p + "@GRAD" for p in PARAMS]
    segs, python = where(main, fetch)
    assert len(segs) == 1 and not python, python
    data = {k: v for k, v in feed(4, seed=4).items() if k != "y"}
    want, got = step_both(main, startup, fetch, data, caplog)
    for name, w, g in zip(fetch, want, got):
        np.testing.assert_allclose(g, w, rtol=0, atol=tol(4), err_msg=name)
