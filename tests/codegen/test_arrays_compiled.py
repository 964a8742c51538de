"""Tensor arrays and DynamicRNN compiled (issue 29 point 4): write_to_array, read_from_array,
lod_array_length, lod_rank_table, max_sequence_len, lod_tensor_to_array,
array_to_lod_tensor and shrink_rnn_memory in the same native segment as the `while` around
them, against the interpreter on ragged LoD batches, a batch of one and an empty sequence;
a read past the array's end or of an entry never written fails from the compiled code with
the interpreter's message."""
import logging

import numpy as np
import pytest

import fluidity as fluid
from fluidity.codegen.lower import Lowering
from fluidity.errors import ExecutionError

from compiled_runs import step_both

L = fluid.layers
HID = 4


def build(fn):
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 7           # both runs start from the same parameters
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        outs = fn()
    return main, startup, outs


def segments(main):
    """(the native segments of block 0, the ops that run as Python steps)."""
    rows = Lowering(main, 0).explain()
    return ({w for _, _, w, _ in rows if w != "python"},
            [(t, why) for _, t, w, why in rows if w == "python"])


def lod_feed(lengths, seed=0):
    r = np.random.default_rng(seed)
    x = r.uniform(-1, 1, (sum(lengths), HID)).astype("float32")
    return {"x": fluid.create_lod_tensor(x, [list(lengths)], fluid.CPUPlace())}


def dyn_rnn():
    """A DynamicRNN with two memories (an LSTM-like cell), its output back to sequences and
    their last steps."""
    x = L.data("x", [HID], dtype="float32", lod_level=1)
    rnn = L.DynamicRNN()
    with rnn.block():
        w = rnn.step_input(x)
        h = rnn.memory(value=0.0, shape=[HID])
        c = rnn.memory(value=0.5, shape=[HID])
        g = L.sigmoid(L.fc(w, HID) + L.fc(h, HID, bias_attr=False))
        c2 = g * c + L.tanh(L.fc(w, HID))
        h2 = g * L.tanh(c2)
        rnn.update_memory(h, h2)
        rnn.update_memory(c, c2)
        rnn.output(h2)
    out = rnn()
    return [out, L.sequence_pool(out, "last")]


@pytest.mark.parametrize("lengths", [
    [3, 1, 4, 2], [5], [2, 0, 3], [1, 1, 1],
    np.random.default_rng(5).integers(0, 6, 30).tolist()],
    ids=["ragged", "one", "an empty sequence", "all one step", "30 with ties"])
def test_dynamic_rnn_compiles_whole_with_the_interpreters_results(lengths, caplog):
    main, startup, outs = build(dyn_rnn)
    segs, python = segments(main)
    assert len(segs) == 1 and not python, python
    want, got = step_both(main, startup, outs, lod_feed(lengths), caplog, return_numpy=False)
    # the compiled sigmoid and tanh may round an ulp (6e-8 at these magnitudes) away from
    # numpy's; about ten roundings a step, each damped by a gate below 1, for max(len) steps
    tol = 10 * 6e-8 * max(lengths)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=0, atol=tol)
        assert g.lod() == w.lod()


def test_a_batch_of_another_lod_reuses_the_build(caplog):
    """One build for every LoD; runs of one signature back to back (the prepared compiled
    run, executor/direct.py) with the same rows and other LoDs."""
    main, startup, outs = build(dyn_rnn)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    batches = [[2, 3], [3, 2], [1, 4], [6, 1, 1, 2, 4]]      # same rows, other LoDs too
    feeds = [lod_feed(lengths, seed=len(lengths)) for lengths in batches]
    want = [exe.run(main, feed=f, fetch_list=outs[1:], scope=scope)[0] for f in feeds]
    prog = fluid.CompiledProgram(main).with_native_code(feed=["x"], fetch_list=outs[1:])
    with caplog.at_level(logging.WARNING):
        got = [exe.run(prog, feed=f, fetch_list=outs[1:], scope=scope)[0] for f in feeds]
    for g, w, lengths in zip(got, want, batches):
        np.testing.assert_allclose(g, w, rtol=0, atol=10 * 6e-8 * max(lengths))
    assert "run interpreted" not in caplog.text


def array_program(read_at, write_at=(0, 1), length=False):
    def fn():
        x = L.data("x", [3], dtype="float32", append_batch_size=False)
        arr = L.create_array("float32")
        for k in write_at:
            L.array_write(x * float(k + 1), L.fill_constant([1], "int64", k), array=arr)
        out = [L.array_read(arr, L.fill_constant([1], "int64", read_at))]
        if length:
            out.append(L.array_length(arr))
        return out
    return build(fn)


def test_array_write_read_and_length_compile(caplog):
    main, startup, outs = array_program(2, write_at=(0, 2, 1), length=True)
    assert len(segments(main)[0]) == 1
    feed = {"x": np.arange(3, dtype="float32")}
    want, got = step_both(main, startup, outs, feed, caplog, return_numpy=False)
    np.testing.assert_array_equal(np.asarray(got[0]), np.arange(3) * 3.0)
    assert np.asarray(got[1]).tolist() == [3] == np.asarray(want[1]).tolist()


@pytest.mark.parametrize("read_at, write_at, message", [
    (5, (0, 1), "read_from_array: index 5 is out of range; the array has 2 entries"),
    (1, (0, 2), "read_from_array: index 1 is out of range; the array has 3 entries"),
], ids=["past the end", "never written"])
def test_a_bad_read_fails_from_the_compiled_code_with_the_interpreters_message(
        read_at, write_at, message):
    main, startup, outs = array_program(read_at, write_at)
    assert len(segments(main)[0]) == 1
    feed = {"x": np.ones(3, "float32")}
    for prog in (main, fluid.CompiledProgram(main).with_native_code()):
        exe, scope = fluid.Executor(), fluid.Scope()
        exe.run(startup, scope=scope)
        with pytest.raises(ExecutionError, match="read_from_array: index"):
            exe.run(prog, feed=feed, fetch_list=outs, scope=scope)
    with pytest.raises(ExecutionError) as info:
        exe.run(prog, feed=feed, fetch_list=outs, scope=scope)
    assert message in str(info.value)


def test_an_array_a_fetch_takes_is_handed_back_by_the_compiled_code(caplog):
    """An array the caller keeps leaves the segment whole (its entries copied out of the
    block the segment hands back): the same entries as the interpreter's, a gap where an
    index was never written, and a fetch of it after a run with fewer entries."""
    main, startup, outs = array_program(0, write_at=(0, 2))
    arr = main.global_block().ops[2].output("Out")[0]
    rows = Lowering(main, 0, keep=[arr]).explain()
    assert not [t for _, t, w, _ in rows if w == "python"]
    feed = {"x": np.arange(3, dtype="float32")}
    want, got = step_both(main, startup, [arr], feed, caplog, return_numpy=False)
    assert len(got[0]) == len(want[0]) == 3
    for g, w in zip(got[0], want[0]):
        assert (g._array is None) == (w._array is None)
        if w._array is not None:
            np.testing.assert_array_equal(g._array, w._array)
    assert got[0][1]._array is None                    # never written


def test_the_lod_seq2seq_greedy_decoder_runs_in_one_native_call(caplog):
    """examples/seq2seq.py --api lod's decoding While loop writes the tokens of each step
    into an array the caller fetches: encoder, loop and array in one segment; the tokens
    and the number of steps are the interpreter's, for batches of several and of one."""
    import sys
    from paths import EXAMPLES
    sys.path.insert(0, EXAMPLES)
    import seq2seq
    with fluid.unique_name.guard():
        _, startup, _ = seq2seq.build_train()
        dec, tokens = seq2seq.build_decode(max_len=5)
    rows = Lowering(dec, 0, keep=[tokens.name]).explain()
    assert not [t for _, t, w, _ in rows if w == "python"]
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    native = fluid.CompiledProgram(dec).with_native_code()
    rng = np.random.default_rng(3)
    for n in (4, 1):
        src = seq2seq.make_batch(rng, n)[0]
        with caplog.at_level(logging.WARNING):
            got = seq2seq.decode(exe, native, tokens, src, scope)
        assert got == seq2seq.decode(exe, dec, tokens, src, scope)
    assert "run interpreted" not in caplog.text


def test_reorder_by_rank_and_its_gradient_compile_with_the_kernels_results(caplog):
    """An encoder's last state put in rank order (as a DynamicRNN decoder's initial memory),
    trained through: reorder_lod_tensor_by_rank forward and backward."""
    def fn():
        x = L.data("x", [HID], dtype="float32", lod_level=1)
        h = L.fc(x, HID, param_attr=fluid.ParamAttr(name="fc_w"))
        ordered = L.reorder_lod_tensor_by_rank(L.sequence_pool(h, "last"), L.lod_rank_table(x))
        w = L.create_parameter([HID], "float32", name="w",
                               default_initializer=fluid.initializer.Uniform(-1, 1, seed=2))
        loss = L.reduce_sum(L.elementwise_mul(ordered, w, axis=1))
        fluid.backward.append_backward(loss)
        return [ordered, loss, "fc_w@GRAD", "w@GRAD"]
    main, startup, outs = build(fn)
    types = {t for _, t, w, _ in Lowering(main, 0, keep=outs[2:]).explain() if w != "python"}
    assert {"reorder_lod_tensor_by_rank", "reorder_lod_tensor_by_rank_grad"} <= types
    want, got = step_both(main, startup, outs, lod_feed([2, 4, 1, 3]), caplog,
                          return_numpy=False)
    for g, w in zip(got, want):     # the same sgemm shapes and sums in the same order
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_the_sentiment_chapters_dyn_rnn_lstm_classifies_compiled_as_interpreted(caplog):
    """understand_sentiment's dyn_rnn_lstm (the book chapter's own function), forward only:
    embedding, a DynamicRNN LSTM, the last steps and a softmax, in one native segment."""
    import os
    import sys
    from paths import TESTS
    sys.path.insert(0, os.path.join(TESTS, "fluid_book"))
    import test_understand_sentiment as sentiment

    def fn():
        words = L.data("words", [1], dtype="int64", lod_level=1)
        label = L.data("label", [1], dtype="int64")
        return [sentiment.dyn_rnn_lstm(words, label, input_dim=sentiment.DICT_DIM)[2]]
    main, startup, outs = build(fn)
    main = main.clone(for_test=True)._prune(outs)
    assert len(segments(main)[0]) == 1 and not segments(main)[1]
    samples = list(sentiment.imdb(12, 7)())
    flat = np.array([t for w, _ in samples for t in w], np.int64).reshape(-1, 1)
    feed = {"words": fluid.create_lod_tensor(flat, [[len(w) for w, _ in samples]],
                                             fluid.CPUPlace())}
    want, got = step_both(main, startup, outs, feed, caplog, return_numpy=False)
    # up to 8 steps of about ten float32 roundings (an ulp of sigmoid/tanh apart), softmax'd
    np.testing.assert_allclose(np.asarray(got[0]), np.asarray(want[0]), rtol=0, atol=1e-5)


def test_a_dynamic_rnn_model_runs_standalone_with_the_interpreters_outputs(tmp_path):
    """`fluidity compile` of a saved DynamicRNN inference model: the executable over .npy
    files and a LoD on the command line."""
    import subprocess
    from fluidity.compiler import compile_inference_model
    main, startup, outs = build(dyn_rnn)
    exe, scope = fluid.Executor(), fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        fluid.io.save_inference_model(str(tmp_path / "m"), ["x"], outs[1:], exe, main)
    lengths = [3, 1, 4, 2]
    feed = lod_feed(lengths)
    want = exe.run(main, feed=feed, fetch_list=outs[1:], scope=scope)[0]
    compile_inference_model(str(tmp_path / "m"), str(tmp_path / "out"))
    np.save(tmp_path / "x.npy", np.asarray(feed["x"]))
    lod = ",".join(map(str, np.cumsum([0] + lengths)))
    r = subprocess.run([str(tmp_path / "out" / "model_run"), "--lod", f"x={lod}",
                        f"x={tmp_path}/x.npy", "-o", str(tmp_path / "o")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    [got] = [np.load(p) for p in sorted((tmp_path / "o").glob("*.npy"))]
    np.testing.assert_allclose(got, want, rtol=0, atol=10 * 6e-8 * max(lengths))


@pytest.mark.parametrize("k, message", [(-1, "array index I is negative"),
                                        (2 ** 41, "array index I is too large")],
                         ids=["negative", "past any memory"])
def test_a_bad_write_index_fails_from_the_compiled_code(k, message):
    def fn():
        x = L.data("x", [3], dtype="float32", append_batch_size=False)
        k = L.data("k", [1], dtype="int64", append_batch_size=False)
        arr = L.create_array("float32")
        L.array_write(x, k, array=arr)
        return [L.array_read(arr, L.fill_constant([1], "int64", 0))]
    main, startup, outs = build(fn)
    assert len(segments(main)[0]) == 1
    exe = fluid.Executor()
    feed = {"x": np.ones(3, "float32"), "k": np.array([k], np.int64)}
    with pytest.raises(ExecutionError, match=message):
        exe.run(fluid.CompiledProgram(main).with_native_code(), feed=feed, fetch_list=outs,
                scope=fluid.Scope())


def test_an_op_without_an_array_form_does_not_take_a_compiled_array():
    """assign copies a tensor array in Fluid; its emitter copies tensors: it runs
    interpreted, and so does the array it reads (made by the interpreter then)."""
    def fn():
        x = L.data("x", [3], dtype="float32", append_batch_size=False)
        arr = L.create_array("float32")
        L.array_write(x, L.fill_constant([1], "int64", 0), array=arr)
        copy = L.assign(arr)
        return [L.array_read(copy, L.fill_constant([1], "int64", 0))]
    main, startup, outs = build(fn)
    rows = {t: w for _, t, w, _ in Lowering(main, 0).explain()}
    assert rows["assign"] == "python"
    got = fluid.Executor().run(fluid.CompiledProgram(main).with_native_code(),
                               feed={"x": np.arange(3, dtype="float32")}, fetch_list=outs,
                               scope=fluid.Scope())
    np.testing.assert_array_equal(got[0], np.arange(3))


def test_a_dim_known_per_pass_reserves_its_bound():
    from fluidity.codegen.cir import NotCompilable
    from fluidity.codegen.dim import Dim, bounded
    v, n = Dim.sym("v0_3"), Dim.sym("in0_nlod") - 1
    bounds = {"v0_3": n}
    assert str(bounded(v * 16, bounds)) == str(n * 16)
    assert str(bounded((v + 2) // 2, bounds)) == str((n + 2) // 2)
    assert bounded(Dim.sym("in1_d0") * 4, bounds) == Dim.sym("in1_d0") * 4
    with pytest.raises(NotCompilable, match="no bound"):
        bounded(Dim.sym("in1_d0") - v, bounds)


def test_an_array_written_in_a_branch_inside_a_loop(caplog):
    """A Switch case (conditional_block) inside a While appends to an array on some passes
    only: the branch carries the array in place."""
    def fn():
        x = L.data("x", [2, 3], dtype="float32", append_batch_size=False)
        arr = L.create_array("float32")
        i, j = L.fill_constant([1], "int64", 0), L.fill_constant([1], "int64", 0)
        n, two = L.fill_constant([1], "int64", 5), L.fill_constant([1], "int64", 2)
        cond = L.less_than(i, n)
        loop = L.While(cond, is_test=True)
        with loop.block():
            with L.Switch() as switch:
                with switch.case(L.less_than(two, i)):
                    L.array_write(x * L.cast(i, "float32"), j, array=arr)
                    L.increment(j, in_place=True)
            L.increment(i, in_place=True)
            L.less_than(i, n, cond=cond)
        return [L.array_read(arr, L.fill_constant([1], "int64", 1)), L.array_length(arr)]
    main, startup, outs = build(fn)
    assert len(segments(main)[0]) == 1 and not segments(main)[1]
    feed = {"x": np.arange(6, dtype="float32").reshape(2, 3)}
    want, got = step_both(main, startup, outs, feed, caplog, return_numpy=False)
    np.testing.assert_array_equal(np.asarray(got[0]), np.arange(6).reshape(2, 3) * 4.0)
    assert np.asarray(got[1]).tolist() == [2] == np.asarray(want[1]).tolist()


def xw_read_program():
    """read_from_array's gradient form (X_W, as backward writes it): entry k of an array
    written at 0 only, zeros shaped like X_W where there is none."""
    def fn():
        x = L.data("x", [2, 3], dtype="float32", append_batch_size=False)
        w = L.data("w", [4, 3], dtype="float32", append_batch_size=False)
        k = L.data("k", [1], dtype="int64", append_batch_size=False)
        arr = L.create_array("float32")
        L.array_write(x, L.fill_constant([1], "int64", 0), array=arr)
        block = fluid.default_main_program().current_block()
        out = block.create_var(name="read_or_zeros", dtype="float32")
        block.append_op(type="read_from_array", inputs={"X": [arr], "I": [k], "X_W": [w]},
                        outputs={"Out": [out]})
        return [out]
    return build(fn)


@pytest.mark.parametrize("k, rows", [(0, 2), (3, 4)], ids=["written", "missing: zeros"])
def test_the_gradient_form_of_read_from_array_compiles(k, rows, caplog):
    main, startup, outs = xw_read_program()
    assert len(segments(main)[0]) == 1 and not segments(main)[1]
    feed = {"x": np.ones((2, 3), "float32"), "w": np.ones((4, 3), "float32"),
            "k": np.array([k], np.int64)}
    want, got = step_both(main, startup, outs, feed, caplog, return_numpy=False)
    assert np.asarray(got[0]).shape == (rows, 3)
    np.testing.assert_array_equal(np.asarray(got[0]), np.asarray(want[0]))


def test_a_negative_index_of_the_gradient_form_fails_from_the_compiled_code():
    main, startup, outs = xw_read_program()
    feed = {"x": np.ones((2, 3), "float32"), "w": np.ones((4, 3), "float32"),
            "k": np.array([-1], np.int64)}
    for prog in (main, fluid.CompiledProgram(main).with_native_code()):
        with pytest.raises(ExecutionError, match="array index I is negative"):
            fluid.Executor().run(prog, feed=feed, fetch_list=outs, scope=fluid.Scope())
