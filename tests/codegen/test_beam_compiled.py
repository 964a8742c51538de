"""beam_search compiled (codegen/emit/cpu/beam.py) against the interpreter on the same
feeds, as a user's program runs it: selected ids, parent rows and the 2-level LoD it
computes bit for bit, scores to the bit (the same float64 arithmetic rounded once);
prefixes that ended (end_id), a source pruned because all its beams ended, a batch of one,
scores not accumulated (the log taken here), no ids, one LoD level; nothing runs
interpreted. A LoD that does not reach the rows fails with a message."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity import layers as pd
from fluidity.codegen.lower import Lowering
from fluidity.errors import ExecutionError, FluidityError
from tests.compiled_runs import step_both

END = 0


def program(width, beam, lod_level=2, accumulated=True, with_ids=True, level=0):
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        pre_ids = pd.data(name="pre_ids", shape=[1], dtype="int64", lod_level=lod_level)
        pre_scores = pd.data(name="pre_scores", shape=[1], dtype="float32",
                             lod_level=lod_level)
        ids = pd.data(name="ids", shape=[width], dtype="int64", lod_level=lod_level) \
            if with_ids else None
        scores = pd.data(name="scores", shape=[width], dtype="float32", lod_level=lod_level)
        sel_ids, sel_scores, parent = pd.beam_search(
            pre_ids, pre_scores, ids, scores, beam, end_id=END, level=level,
            is_accumulated=accumulated, return_parent_idx=True)
    return main, start, [sel_ids, sel_scores, parent]


def feed(rng, lens, width, accumulated=True, with_ids=True, ended=0.3):
    place = fluid.CPUPlace()
    n = sum(lens[-1])
    pre_ids = rng.integers(1, 5, (n, 1))
    pre_ids[rng.random(n) < ended] = END
    if accumulated:     # quantized: ties between rows and between a row's candidates
        scores = (np.round(rng.normal(size=(n, width)) * 2) / 2).astype(np.float32)
    else:
        scores = rng.choice([0.125, 0.25, 0.5], size=(n, width)).astype(np.float32)
    out = {"pre_ids": fluid.create_lod_tensor(pre_ids, lens, place),
           "pre_scores": fluid.create_lod_tensor(
               rng.normal(size=(n, 1)).astype(np.float32), lens, place),
           "scores": fluid.create_lod_tensor(scores, lens, place)}
    if with_ids:
        out["ids"] = fluid.create_lod_tensor(rng.integers(0, 6, (n, width)), lens, place)
    return out


def assert_same(want, got):
    for w, g in zip(want, got):
        assert g.lod() == w.lod()
        a, b = np.array(w), np.array(g)
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(b.view(np.uint8), a.view(np.uint8))


@pytest.mark.parametrize("accumulated,with_ids", [(True, True), (False, True), (True, False)])
def test_beam_search_compiled_matches_the_interpreter(caplog, accumulated, with_ids):
    rng = np.random.default_rng(7 + accumulated + 2 * with_ids)
    width, beam = 3, 2
    main, start, fetch = program(width, beam, accumulated=accumulated, with_ids=with_ids)
    fed = ["pre_ids", "pre_scores", "scores"] + (["ids"] if with_ids else [])
    text = fluid.CompiledProgram(main).with_native_code(fed, fetch).explain()
    assert "0 as Python steps" in text
    for lens in ([[1], [1]],                      # a batch of one, its first step
                 [[2, 1], [1, 1, 1]], [[1, 3], [2, 1, 1, 1]], [[2, 2], [1, 1, 1, 1]]):
        want, got = step_both(main, start, fetch, feed(rng, lens, width, accumulated,
                                                       with_ids), caplog, return_numpy=False)
        assert_same(want, got)


def test_a_source_whose_beams_all_ended_keeps_no_rows(caplog):
    main, start, fetch = program(2, 2)
    place = fluid.CPUPlace()
    lens = [[2, 2], [1, 1, 1, 1]]
    f = {"pre_ids": fluid.create_lod_tensor(np.array([[END], [END], [5], [END]]), lens, place),
         "pre_scores": fluid.create_lod_tensor(np.array([[-1], [-2], [-.5], [-3]],
                                                        np.float32), lens, place),
         "ids": fluid.create_lod_tensor(np.array([[1, 2]] * 4), lens, place),
         "scores": fluid.create_lod_tensor(np.full((4, 2), -9, np.float32), lens, place)}
    want, got = step_both(main, start, fetch, f, caplog, return_numpy=False)
    assert_same(want, got)
    assert got[0].lod()[1][:3] == [0, 0, 0] and np.array(got[0]).shape == (2, 1)


def test_one_lod_level_and_the_finer_level(caplog):
    rng = np.random.default_rng(11)
    main, start, fetch = program(3, 2, lod_level=1)
    want, got = step_both(main, start, fetch, feed(rng, [[2, 1, 2]], 3), caplog,
                          return_numpy=False)
    assert_same(want, got)
    main, start, fetch = program(3, 2, level=1)
    want, got = step_both(main, start, fetch, feed(rng, [[2, 1], [1, 2, 1]], 3), caplog,
                          return_numpy=False)
    assert_same(want, got)


def test_a_lod_short_of_the_rows_fails_with_a_message():
    main, start, fetch = program(2, 2, lod_level=1)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(start, scope=scope)
    prog = fluid.CompiledProgram(main).with_native_code()
    f = feed(np.random.default_rng(0), [[1, 2]], 2)
    bad = fluid.LoDTensor()
    bad.set(np.zeros((3, 2), np.float32), fluid.CPUPlace())
    bad._lod = [[0, 1, 2]]              # one row no source holds (set_lod refuses it)
    f["scores"] = bad
    with pytest.raises(FluidityError):
        exe.run(prog, feed=f, fetch_list=fetch, scope=scope)


def arrays_program(width, beam):
    """A decoder's two steps unrolled: the 2-level init beams written to arrays, read back,
    one beam_search step, its selections written and read back (their LoD kept)."""
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        init_ids = pd.data(name="pre_ids", shape=[1], dtype="int64", lod_level=2)
        init_scores = pd.data(name="pre_scores", shape=[1], dtype="float32", lod_level=2)
        ids = pd.data(name="ids", shape=[width], dtype="int64", lod_level=2)
        scores = pd.data(name="scores", shape=[width], dtype="float32", lod_level=2)
        i, j = pd.fill_constant([1], "int64", 0), pd.fill_constant([1], "int64", 1)
        ids_array, scores_array = pd.create_array("int64"), pd.create_array("float32")
        pd.array_write(init_ids, i, array=ids_array)
        pd.array_write(init_scores, i, array=scores_array)
        pre_ids, pre_scores = pd.array_read(ids_array, i), pd.array_read(scores_array, i)
        sel_ids, sel_scores = pd.beam_search(pre_ids, pre_scores, ids, scores, beam,
                                             end_id=END)
        pd.array_write(sel_ids, j, array=ids_array)     # more rows than the first entry
        pd.array_write(sel_scores, j, array=scores_array)
        back = pd.array_read(ids_array, j)
        out = pd.scale(pd.cast(back, "float32"), scale=2.0)
        back_scores = pd.array_read(scores_array, j)
    return main, start, [out, back_scores, pre_ids]


def test_array_entries_keep_their_lod(caplog):
    rng = np.random.default_rng(5)
    main, start, fetch = arrays_program(3, 3)
    text = fluid.CompiledProgram(main).with_native_code(
        ["pre_ids", "pre_scores", "ids", "scores"], fetch).explain()
    assert "1 native segment(s), 0 as Python steps" in text
    for lens in ([[1], [1]], [[1, 1, 1], [1, 1, 1]], [[2, 1], [1, 1, 1]]):
        want, got = step_both(main, start, fetch, feed(rng, lens, 3, ended=0.2), caplog,
                              return_numpy=False)
        assert_same(want, got)
        assert len(got[0].lod()) == 2


def chapter(monkeypatch):
    """tests/fluid_book/test_machine_translation.py, the chapter's program as written."""
    import importlib.util
    import os
    book = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "fluid_book")
    monkeypatch.syspath_prepend(book)                 # its book_util
    spec = importlib.util.spec_from_file_location(
        "machine_translation_chapter", os.path.join(book, "test_machine_translation.py"))
    mt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mt)
    return mt


def test_the_chapters_decoder_compiles_whole(caplog, monkeypatch):
    """machine_translation's beam-search decoder (While over tensor arrays, beam_search,
    beam_search_decode) is one native segment with no Python step, and decodes as the
    interpreter does: sentence ids and LoD bit for bit (sentences that end early at end_id
    among them), scores within the float32 rounding of the softmax and log before."""
    import fluidity
    mt = chapter(monkeypatch)
    main, start = fluid.Program(), fluid.Program()
    start.random_seed = main.random_seed = 7
    with fluid.program_guard(main, start), fluid.unique_name.guard():
        ids, scores = mt.decoder_decode(mt.encoder(False), False)
    fed = ["src_word_id", "init_ids", "init_scores"]
    text = fluid.CompiledProgram(main).with_native_code(fed, [ids, scores]).explain()
    assert "1 native segment(s), 0 as Python steps" in text
    place = fluid.CPUPlace()
    feeder = fluid.DataFeeder([main.global_block().var("src_word_id")], place)
    ended = False
    for n in (3, 1):                                  # a batch of one too
        data = next(fluidity.batch(mt.wmt14(n, 3), batch_size=n)())
        f = feeder.feed([[x[0]] for x in data])
        f["init_ids"], f["init_scores"] = mt.init_beams(n, place)
        want, got = step_both(main, start, [ids, scores], f, caplog, return_numpy=False)
        assert got[0].lod() == want[0].lod() == got[1].lod() == want[1].lod()
        np.testing.assert_array_equal(np.array(got[0]), np.array(want[0]))
        np.testing.assert_allclose(np.array(got[1]), np.array(want[1]), rtol=1e-6,
                                   atol=1e-5)
        ended = ended or mt.END in np.array(want[0]).tolist()
    assert ended


def test_an_op_reading_the_decoded_sentences_starts_the_next_segment(monkeypatch):
    """The decoder's outputs are handed back whole (their size is known only when they are
    made): an op after it that reads them runs in the next segment, which reads them as
    inputs (no Python step), with the same result."""
    import fluidity
    mt = chapter(monkeypatch)
    main, start = fluid.Program(), fluid.Program()
    start.random_seed = main.random_seed = 3
    with fluid.program_guard(main, start), fluid.unique_name.guard():
        ids, scores = mt.decoder_decode(mt.encoder(False), False)
        doubled = pd.scale(scores, scale=2.0)
    text = fluid.CompiledProgram(main).with_native_code(
        ["src_word_id", "init_ids", "init_scores"], [ids, doubled]).explain()
    assert "0 as Python steps" in text and "2 native segment(s)" in text, text
    rows = [line for line in text.splitlines() if " scale " in line]
    assert len(rows) == 1 and "segment 1" in rows[0], rows
    place = fluid.CPUPlace()
    feeder = fluid.DataFeeder([main.global_block().var("src_word_id")], place)
    data = next(fluidity.batch(mt.wmt14(2, 5), batch_size=2)())
    f = feeder.feed([[x[0]] for x in data])
    f["init_ids"], f["init_scores"] = mt.init_beams(2, place)
    want, got = step_both(main, start, [ids, doubled], f, return_numpy=False)
    assert got[1].lod() == want[1].lod()
    np.testing.assert_array_equal(np.array(got[0]), np.array(want[0]))
    np.testing.assert_allclose(np.array(got[1]), np.array(want[1]), rtol=1e-6, atol=1e-5)


def test_a_decode_over_rows_of_no_values_runs_interpreted():
    """beam_search_decode reads value r of an entry for its row r: Ids entries of shape
    [rows, 0] (a hostile program's) would be read past their end by the compiled walk, so
    the op runs interpreted and fails as the interpreter does."""
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start), fluid.unique_name.guard():
        ids = pd.data(name="ids", shape=[0], dtype="int64", lod_level=2)
        scores = pd.data(name="scores", shape=[1], dtype="float32", lod_level=2)
        i = pd.fill_constant([1], "int64", 0)
        ids_array, scores_array = pd.create_array("int64"), pd.create_array("float32")
        pd.array_write(ids, i, array=ids_array)
        pd.array_write(scores, i, array=scores_array)
        fetch = pd.beam_search_decode(ids_array, scores_array, 2, END)
    rows = Lowering(main, 0, keep=[v.name for v in fetch]).explain()
    assert [w for _, t, w, _ in rows if t == "beam_search_decode"] == ["python"]
    place, lens = fluid.CPUPlace(), [[1], [3]]
    f = {"ids": fluid.create_lod_tensor(np.zeros((3, 0), np.int64), lens, place),
         "scores": fluid.create_lod_tensor(np.ones((3, 1), np.float32), lens, place)}
    exe = fluid.Executor()
    for prog in (main, fluid.CompiledProgram(main).with_native_code()):
        with pytest.raises(ExecutionError, match="beam_search_decode"):
            exe.run(prog, feed=f, fetch_list=fetch, scope=fluid.Scope())
