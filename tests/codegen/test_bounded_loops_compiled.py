"""Loops whose passes are bounded on entry (codegen/trip_bound.py; issue 29: "the seq2seq
beam search decodes in one native call per batch"). The cell API's decoders
(`dynamic_decode`: `Condition = not all finished and step <= max_step_num`) stack their
step arrays after the loop; with the bound, tensor_array_to_tensor writes arena values and
gather_tree, transpose2 and the fetch run in the same segment: one native call, the
interpreter's ids and shapes, for batches that finish early and batches that reach the
maximum. The analysis finds no bound for any other shape (a counter written twice or in a
nested block, a step of 0 or less, a limit written in the loop, a disjunction, a limit too
large), which keeps the HeldBuf path (two segments) with the same results."""
import logging
import os
import sys

import numpy as np
import pytest

import fluidity as fluid
from fluidity.codegen import control
from fluidity.codegen.trip_bound import LoopBound, loop_bound
from fluidity.errors import ExecutionError

from paths import ROOT
from test_arrays_compiled import build, segments

sys.path.insert(0, os.path.join(ROOT, "examples"))
import seq2seq  # noqa: E402

L = fluid.layers


# --- a counted loop, in each shape the analysis must tell apart ---------------------------
def counted(form="and", init=0, limit=4, step=1.0, cmp="less_equal"):
    """h = 2 h + 1 written to an array at the counter each pass while `steps` (fed) and
    the counter allow; the array stacked after the loop and read by a later op."""
    def prog():
        x = L.data("x", [-1, 3], dtype="float32", append_batch_size=False)
        steps = L.data("steps", [1], dtype="int64", append_batch_size=False)
        i = L.fill_constant([1], "int64", init)
        n = L.fill_constant([1], "int64", limit)
        h = L.scale(x, 1.0)
        cond = L.less_than(i, steps)
        arr = L.create_array("float32")
        loop = L.While(cond)
        with loop.block():
            h2 = L.scale(h, 2.0, bias=1.0)
            L.assign(h2, h)
            if form == "write in a branch":
                branch = L.ConditionalBlock([L.less_than(i, steps)], is_scalar_condition=True)
                with branch.block():
                    L.array_write(h2, i, array=arr)
            else:
                L.array_write(h2, i, array=arr)
            if form == "nested":
                branch = L.ConditionalBlock([L.less_than(i, steps)], is_scalar_condition=True)
                with branch.block():
                    L.increment(i, step, in_place=True)
            else:
                L.increment(i, step, in_place=True)
            if form == "twice":
                L.increment(i, step, in_place=True)
            if form == "limit written":
                L.increment(n, 1.0, in_place=True)
            bounded = getattr(L, cmp)(i, n)
            joined = L.logical_or if form == "or" else L.logical_and
            joined(L.less_than(i, steps), bounded, out=cond)
        out, index = L.tensor_array_to_tensor(arr, axis=0, use_stack=True)
        return [L.scale(out, 1.0), index]
    return prog


def bound_of(main):
    block = main.global_block()
    (i,) = [k for k, op in enumerate(block.ops) if op.type == "while"]
    return loop_bound(main, block, i)


def feed(steps, rows=2):
    x = np.random.default_rng(rows).uniform(-1, 1, (rows, 3)).astype("float32")
    return {"x": x, "steps": np.array([steps], "int64")}


def run_both(main, feed, fetch, caplog=None):
    """(interpreted, compiled) fetches of one run from a fresh scope each."""
    exe, out = fluid.Executor(fluid.CPUPlace()), []
    for prog in (main, fluid.CompiledProgram(main).with_native_code()):
        if caplog is not None:
            with caplog.at_level(logging.WARNING):
                out.append(exe.run(prog, feed=feed, fetch_list=fetch, scope=fluid.Scope()))
        else:
            out.append(exe.run(prog, feed=feed, fetch_list=fetch, scope=fluid.Scope()))
    if caplog is not None:
        assert "run interpreted" not in caplog.text
    return out


@pytest.mark.parametrize("cmp,init,limit,step,passes", [
    ("less_equal", 0, 4, 1.0, 5), ("less_than", 0, 4, 1.0, 4), ("less_equal", 2, 9, 3.0, 3),
    ("less_than", 0, 0, 1.0, 1)],
    ids=["<=", "<", "from 2 by 3", "< 0: one pass"])
def test_the_bound_is_the_passes_the_interpreter_runs_at_most(cmp, init, limit, step,
                                                              passes):
    main, _, fetch = build(counted(init=init, limit=limit, step=step, cmp=cmp))
    bound = bound_of(main)
    (arr,) = bound.entries
    assert bound.passes == passes and bound.entries[arr] == init + (passes - 1) * step + 1
    # as many entries as the bound when only the counter stops the loop: it is tight
    want, = fluid.Executor().run(main, feed=feed(100), fetch_list=fetch[:1],
                                 scope=fluid.Scope())
    assert want.shape[0] == passes


def test_the_decoders_loops_are_bounded_by_max_step_num():
    for beam in (None, 4):
        with fluid.unique_name.guard():
            main, _ = seq2seq.CellSeq2Seq().build_decode(beam_size=beam, max_len=7)
        bound = bound_of(main)
        assert bound.passes == 8 and set(bound.entries.values()) == {8}
        assert len(bound.entries) == (2 if beam is None else 3)


@pytest.mark.parametrize("form,kw", [
    ("twice", {}), ("nested", {}), ("and", {"step": 0.0}), ("and", {"step": -1.0}),
    ("and", {"step": 0.5}), ("limit written", {}), ("or", {}),
    ("and", {"limit": 10 ** 18}), ("and", {"limit": 2 ** 63 - 1}), ("and", {"init": -1})],
    ids=["counter written twice", "incremented in a branch", "step 0", "step -1",
         "step 0.5", "limit written in the loop", "a disjunction", "limit 1e18",
         "limit int64 max", "negative start"])
def test_no_bound_for_any_other_shape(form, kw):
    main, _, _ = build(counted(form, **kw))
    assert bound_of(main) is None


def test_a_write_in_a_nested_block_bounds_the_passes_not_the_entries():
    main, _, _ = build(counted("write in a branch"))
    bound = bound_of(main)
    assert bound.passes == 5 and bound.entries == {}


def test_a_block_that_names_itself_again_ends_the_analysis():
    """A hostile file whose branch in the loop body runs the body again: the walk over
    nested blocks visits each once (no bound for the counter the cycle writes twice)."""
    main, _, _ = build(counted("nested"))
    block = main.global_block()
    (loop,) = [op for op in block.ops if op.type == "while"]
    body = main.block(loop.sub_block_ids()[0])
    (branch,) = [op for op in body.ops if op.type == "conditional_block"]
    branch._set_attr("sub_block", body)
    assert bound_of(main) is None


@pytest.mark.parametrize("attrs", [
    {"str_value": "", "value": float("nan")}, {"str_value": "", "value": 4.5},
    {"str_value": "four"}, {"str_value": "", "value": 1e300}, {"dtype": 2},
    {"shape": [2]}],
    ids=["nan", "fractional", "not a number", "1e300", "int32 made, int64 declared",
         "two elements"])
def test_a_hostile_limit_constant_gives_no_bound(attrs):
    """The limit's fill_constant as a model file may hold it: its value is used only when
    it is one integral number in range of the declared dtype."""
    main, _, _ = build(counted())
    (limit,) = [op for op in main.global_block().ops if op.type == "fill_constant"
                and op.attr("str_value") == "4"]
    for name, value in attrs.items():
        limit._set_attr(name, value)
    assert bound_of(main) is None


@pytest.mark.parametrize("steps", [0, 2, 5, 9], ids=["no pass", "early", "max", "past max"])
def test_a_bounded_join_runs_in_the_loops_segment_as_the_interpreter(steps, caplog):
    main, _, fetch = build(counted())
    segs, python = segments(main)
    assert len(segs) == 1 and not python, python
    if steps == 0:              # the first pass runs anyway: Condition starts as i < steps
        steps = 1
    want, got = run_both(main, feed(steps), fetch, caplog)
    for w, g in zip(want, got):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
    assert want[0].shape[0] == min(steps, 5)


@pytest.mark.parametrize("kw", [{"limit": 10 ** 18}, {"limit": 2 ** 63 - 1}],
                         ids=["1e18", "int64 max"])
def test_a_hostile_limit_reserves_nothing_and_keeps_the_unbounded_path(kw, caplog):
    main, _, fetch = build(counted(**kw))
    segs, python = segments(main)
    assert len(segs) == 2 and not python, python     # the HeldBuf path: no reservation
    want, got = run_both(main, feed(3), fetch, caplog)
    for w, g in zip(want, got):
        assert g.shape == w.shape
        np.testing.assert_array_equal(g, w)


def test_an_array_past_its_bound_stops_the_run_with_an_error(monkeypatch):
    """Should a bound be wrong, the compiled code refuses to join more entries than it
    reserved (an error, never a write past the arena)."""
    real = control.loop_bound

    def too_small(program, block, i):
        b = real(program, block, i)
        return LoopBound(b.counter, 2, {n: 2 for n in b.entries})
    monkeypatch.setattr(control, "loop_bound", too_small)
    main, _, fetch = build(counted())
    compiled = fluid.CompiledProgram(main).with_native_code()
    with pytest.raises(ExecutionError, match="3 entries, more than the 2 its loop's bound"):
        fluid.Executor().run(compiled, feed=feed(3), fetch_list=fetch, scope=fluid.Scope())


# --- the cell API's decoders ----------------------------------------------------------------
def decoder(beam, seed):
    """(decode program, ids, executor, scope) with random parameters from `seed` that make
    sequences end (</s>) at different steps."""
    with fluid.unique_name.guard():
        model = seq2seq.CellSeq2Seq()
        main, ids = model.build_decode(beam_size=beam)
        _, startup, _ = model.build_train()
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    r = np.random.default_rng(seed)
    for name in ("out_w", "trg_emb", "decoder/BasicLSTMUnit_0.w_0"):
        t = scope.find_var(name).get_tensor()
        t._array[...] = r.normal(0, 1.0, t._array.shape).astype("float32")
    return main, ids, exe, scope


@pytest.mark.parametrize("beam", [None, 4], ids=["greedy", "beam 4"])
def test_the_cell_decoders_decode_in_one_native_call_as_the_interpreter(beam, caplog):
    main, ids, exe, scope = decoder(beam, seed=2)
    segs, python = segments(main)
    assert len(segs) == 1 and not python, python
    compiled = fluid.CompiledProgram(main).with_native_code(feed=["src", "src_len"],
                                                            fetch_list=[ids])
    srcs = seq2seq.random_sources(np.random.default_rng(1), 8)
    bias = scope.find_var("out_b").get_tensor()._array
    lengths = set()
    for end_bias in (0.0, 2.0):        # a favoured </s> ends every beam before max_len
        bias[seq2seq.END] = end_bias
        for rows in (slice(0, 8), slice(0, 2), slice(3, 4), slice(6, 8)):
            f = seq2seq.padded_batch(srcs[rows])
            f = {"src": f["src"], "src_len": f["src_len"]}
            want, = exe.run(main, feed=f, fetch_list=[ids], scope=scope)
            with caplog.at_level(logging.WARNING):
                got, = exe.run(compiled, feed=f, fetch_list=[ids], scope=scope)
            assert "run interpreted" not in caplog.text
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
            lengths.add(want.shape[1])
    assert 11 in lengths and min(lengths) < 11, lengths    # max_len reached, and not


@pytest.mark.parametrize("beam", [None, 4], ids=["greedy", "beam 4"])
def test_one_feed_decoded_to_other_lengths_run_after_run(beam):
    """The joined dims are set per run: the same feed shape whose decoding ends at other
    steps (parameters changed in place between runs) fetches each run's own shape."""
    main, ids, exe, scope = decoder(beam, seed=2)
    compiled = fluid.CompiledProgram(main).with_native_code(feed=["src", "src_len"],
                                                            fetch_list=[ids])
    bias = scope.find_var("out_b").get_tensor()._array
    f = seq2seq.padded_batch(seq2seq.random_sources(np.random.default_rng(1), 2))
    f = {"src": f["src"], "src_len": f["src_len"]}
    shapes = set()
    for end_bias in (0.0, 0.0, 8.0, 8.0, 2.0, 0.0):
        bias[seq2seq.END] = end_bias
        want, = exe.run(main, feed=f, fetch_list=[ids], scope=scope)
        got, = exe.run(compiled, feed=f, fetch_list=[ids], scope=scope)
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        shapes.add(want.shape)
    assert len(shapes) > 1
