"""while_grad compiled (issue 29 point 4): training through a DynamicRNN in one native
segment. The forward `while` keeps what the gradient block reads of each pass (tapes the
segment owns); the gradient loop runs the gradient block over them last pass first, the
memories' gradients passed through arrays, the parameters' summed over the passes. Checked
against the interpreter's gradients on ragged LoD batches, a batch of one and an empty
sequence, and against central differences on a tiny DynamicRNN."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.codegen.lower import Lowering

from compiled_runs import param_differences, step_both, train_both

L = fluid.layers
HID = 3
PARAMS = ["fc_x.w", "fc_x.b", "fc_h.w", "fc_c.w", "fc_c.b"]


def build(loss_of=lambda last: L.mean(last)):
    """A DynamicRNN with two memories (an LSTM-like cell) trained on its last steps; the
    loss and every parameter's gradient fetched."""
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 11
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = L.data("x", [HID], dtype="float32", lod_level=1)
        rnn = L.DynamicRNN()
        with rnn.block():
            w = rnn.step_input(x)
            h = rnn.memory(value=0.0, shape=[HID])
            c = rnn.memory(value=0.5, shape=[HID])
            g = L.sigmoid(L.fc(w, HID, param_attr="fc_x.w", bias_attr="fc_x.b") +
                          L.fc(h, HID, param_attr="fc_h.w", bias_attr=False))
            c2 = g * c + L.tanh(L.fc(w, HID, param_attr="fc_c.w", bias_attr="fc_c.b"))
            h2 = g * L.tanh(c2)
            rnn.update_memory(h, h2)
            rnn.update_memory(c, c2)
            rnn.output(h2)
        loss = loss_of(L.sequence_pool(rnn(), "last"))
        fluid.backward.append_backward(loss)
    return main, startup, [loss] + [p + "@GRAD" for p in PARAMS]


def python_steps(main, keep):
    rows = Lowering(main, 0, keep=keep).explain()
    return {w for _, _, w, _ in rows if w != "python"}, \
        [(t, why) for _, t, w, why in rows if w == "python"]


def lod_feed(lengths, seed=0):
    r = np.random.default_rng(seed)
    x = r.uniform(-1, 1, (sum(lengths), HID)).astype("float32")
    return {"x": fluid.create_lod_tensor(x, [list(lengths)], fluid.CPUPlace())}


@pytest.mark.parametrize("lengths", [[3, 1, 4, 2], [5], [2, 0, 3], [1, 1, 1],
                                     [4, 4, 2, 4, 1, 3, 3]],
                         ids=["ragged", "one", "an empty sequence", "all one step", "ties"])
def test_the_gradients_of_a_dynamic_rnn_compile_whole_with_the_interpreters_values(
        lengths, caplog):
    main, startup, outs = build()
    segs, python = python_steps(main, outs)
    assert len(segs) == 1 and not python, python
    feed = lod_feed(lengths)
    want, got = step_both(main, startup, outs, feed, caplog)
    # the compiled sigmoid and tanh may round an ulp (6e-8 at these magnitudes) away from
    # numpy's; the gradient of each of max(len) steps goes through about thirty roundings
    # whose errors the gates (below 1) damp, and sums over the steps and rows (a few units)
    tol = 30 * 6e-8 * max(lengths) * len(lengths)
    for name, g, w in zip(["loss"] + PARAMS, got, want):
        assert g.shape == w.shape, name
        np.testing.assert_allclose(g, w, rtol=0, atol=tol, err_msg=name)


def test_the_compiled_gradients_match_central_differences():
    """d loss / d parameter of the compiled run against (f(p + e) - f(p - e)) / 2e of the
    interpreter's loss, in float32: e = 1e-2 keeps the difference's rounding (loss ~ 1,
    eps 6e-8 / 2e ~ 3e-6) and its truncation (f''' e^2 / 6, f''' of order one) near 1e-4."""
    main, startup, outs = build(lambda last: L.reduce_sum(last * last))
    feed = lod_feed([3, 1, 2], seed=3)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    got = exe.run(fluid.CompiledProgram(main).with_native_code(), feed=feed,
                  fetch_list=outs, scope=scope)
    test = main.clone(for_test=True)._prune([outs[0]])
    eps = 1e-2
    for name, grad in zip(PARAMS, got[1:]):
        numeric = param_differences(
            scope, name, lambda: float(exe.run(test, feed=feed, fetch_list=[outs[0]],
                                               scope=scope)[0].reshape(-1)[0]), eps)
        np.testing.assert_allclose(grad, numeric, rtol=0, atol=5e-4, err_msg=name)


def test_a_training_step_of_the_compiled_loop_updates_as_the_interpreter(caplog):
    """SGD through the loop, two steps: the parameters after each agree."""
    main, startup, outs = build()
    with fluid.program_guard(main, startup):
        block = main.global_block()
        fluid.optimizer.SGD(0.5).apply_gradients(
            [(block.var(p), block.var(p + "@GRAD")) for p in PARAMS])
    assert len(python_steps(main, outs[:1])[0]) == 1
    feed = lod_feed([2, 3, 1], seed=1)
    want, got = train_both(main, startup, outs[:1], [feed, feed], caplog)
    for p in PARAMS:
        np.testing.assert_allclose(got.params[p], want.params[p], rtol=0, atol=1e-6,
                                   err_msg=p)


def plain_loop(body):
    """A While of 3 passes over h (a copy of x, which wants a gradient), trained through:
    the loss is mean(h); `body(h)` is one pass."""
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 5
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = L.data("x", [2, HID], dtype="float32", append_batch_size=False)
        x.stop_gradient = False
        h = L.assign(x)
        i = L.fill_constant([1], "int64", 0)
        n = L.fill_constant([1], "int64", 3)
        cond = L.less_than(i, n)
        loop = L.While(cond)
        with loop.block():
            body(h)
            L.increment(i, in_place=True)
            L.less_than(i, n, cond=cond)
        loss = L.mean(h)
        fluid.backward.append_backward(loss)
    return main, startup, [loss.name, "w@GRAD", "x@GRAD"]


PLAIN_FEED = {"x": np.linspace(-1, 1, 2 * HID).reshape(2, HID).astype("float32")}


def test_a_while_carrying_a_tensor_trains_compiled_as_interpreted(caplog):
    """h = tanh(h @ w) three times: the gradient reads h as each pass found it (kept per
    pass) and carries h's gradient from pass to pass in a buffer of its own; x's gradient
    (through the carried h) and w's (summed over the passes) match the interpreter's."""
    main, startup, outs = plain_loop(
        lambda h: L.assign(L.tanh(L.fc(h, HID, param_attr="w", bias_attr=False)), h))
    segs, python = python_steps(main, outs)
    assert len(segs) == 1 and not python, python
    want, got = step_both(main, startup, outs, PLAIN_FEED, caplog)
    # tanh an ulp (6e-8) apart per pass, through three passes and their gradients
    for name, g, w in zip(outs, got, want):
        np.testing.assert_allclose(g, w, rtol=0, atol=3 * 30 * 6e-8 * np.abs(w).max(),
                                   err_msg=name)


def test_a_trained_loop_with_a_branch_inside_runs_interpreted_with_its_gradient():
    """A branch (conditional_block) inside a trained loop: nested blocks are not taped, so
    the loop and its while_grad run interpreted (the interpreter's step scopes), and the
    compiled program's gradients are the interpreter's."""
    def body(h):
        w = L.create_parameter([HID, HID], "float32", name="w")
        y = L.tanh(L.matmul(h, w))
        big = L.reduce_sum(y) > L.fill_constant([1], "float32", 100.0)
        L.assign(L.cond(big, lambda: y * 0.5, lambda: y), h)
    main, startup, outs = plain_loop(body)
    rows = {t: (w, why) for _, t, w, why in Lowering(main, 0, keep=outs).explain()}
    assert rows["while"][0] == "python" and rows["while_grad"][0] == "python"
    assert "nested blocks" in rows["while"][1], rows["while"][1]
    want, got = step_both(main, startup, outs, PLAIN_FEED)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_the_lod_seq2seq_example_trains_compiled_as_interpreted(caplog):
    """examples/seq2seq.py --api lod's training program (two DynamicRNNs, the decoder's
    memory an encoder state put in rank order, Adam) in one native segment: three steps
    leave the parameters where the interpreter's leave them."""
    import sys
    from paths import EXAMPLES
    sys.path.insert(0, EXAMPLES)
    import seq2seq
    with fluid.unique_name.guard():
        main, startup, loss = seq2seq.build_train()
    segs, python = python_steps(main, [loss.name])
    assert len(segs) == 1 and not python, python
    rng = np.random.default_rng(4)
    batches = [seq2seq.make_batch(rng, 5)[:3] for _ in range(3)]
    feeds = [dict(zip(["src", "dec_in", "label"], b)) for b in batches]
    want, got = train_both(main, startup, [loss], feeds, caplog)
    # sigmoid/tanh an ulp apart per step; Adam's first steps move each weight by about lr
    # (1e-2) whatever the gradient's size, so a gradient an ulp off moves a weight at most
    # by a few ulps of lr
    np.testing.assert_allclose(np.ravel(got.outs), np.ravel(want.outs), rtol=1e-5)
    for name, w in want.params.items():
        np.testing.assert_allclose(got.params[name], w, rtol=0, atol=1e-5, err_msg=name)


def test_the_sentiment_chapters_dyn_rnn_lstm_trains_compiled_as_interpreted(caplog):
    """understand_sentiment's dyn_rnn_lstm training step (the chapter's own function,
    Adagrad) in one native segment: the cost and every parameter's gradient are the
    interpreter's (compared before Adagrad, whose first step moves a weight by about
    lr * sign(g) and so turns an ulp of a near-zero gradient into a visible change)."""
    import os
    import sys
    from paths import TESTS
    sys.path.insert(0, os.path.join(TESTS, "fluid_book"))
    import test_understand_sentiment as sentiment
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 3
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        words = L.data("words", [1], dtype="int64", lod_level=1)
        label = L.data("label", [1], dtype="int64")
        cost = sentiment.dyn_rnn_lstm(words, label, input_dim=sentiment.DICT_DIM)[0]
        fluid.optimizer.Adagrad(0.1).minimize(cost)
    segs, python = python_steps(main, [cost.name])
    assert len(segs) == 1 and not python, python
    samples = list(sentiment.imdb(8, 7)())
    flat = np.array([t for w, _ in samples for t in w], np.int64).reshape(-1, 1)
    feed = {"words": fluid.create_lod_tensor(flat, [[len(w) for w, _ in samples]],
                                             fluid.CPUPlace()),
            "label": np.array([[y] for _, y in samples], np.int64)}
    params = [p.name for p in main.global_block().all_parameters()]
    fetch = [cost.name] + [p + "@GRAD" for p in params]
    want, got = step_both(main, startup, fetch, feed, caplog)
    # an ulp of sigmoid/tanh (6e-8, relative) per gate of up to 8 steps, through about
    # thirty roundings a step, summed over 8 sentences: relative to the gradient's size
    for name, g, w in zip(fetch, got, want):
        tol = 30 * 6e-8 * 8 * 8 * float(np.abs(w).max())
        np.testing.assert_allclose(g, w, rtol=0, atol=tol, err_msg=name)


def test_a_python_step_between_the_loop_and_its_gradient_keeps_both_interpreted():
    """A Print between the DynamicRNN and its while_grad cuts the segment: the loop is then
    segmented again refused (its gradient needs the interpreter's step scopes) and the
    gradients are the interpreter's, bit for bit."""
    main, startup, outs = build(lambda last: L.mean(
        L.Print(last, message="last", summarize=1, print_phase="forward")))
    rows = {t: w for _, t, w, _ in Lowering(main, 0, keep=outs).explain()}
    assert rows["while"] == rows["while_grad"] == "python"
    feed = lod_feed([3, 1, 2])
    want, got = step_both(main, startup, outs, feed)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
