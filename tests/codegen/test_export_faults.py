"""Out of memory while a segment hands values back whole (runtime/arrays.h's Exports:
tensor arrays, beam_search_decode's held sentences, beam_search's computed LoD): the blocks
made before the failing one are freed, the run fails with the op's clear error, and the
next run gives the interpreter's results. Likewise when the Python side runs out copying a
block: every block of the call is still freed. The library is built with FL_EXPORT_FAULTS,
the runtime's test hook (fail the Nth block made; count the blocks alive), which the
library a program runs with never has."""
import ctypes

import numpy as np
import pytest

import fluidity as fluid
from fluidity import layers as pd
from fluidity.codegen import abi, build
from fluidity.errors import ExecutionError
from fluidity.executor.native import NativePlan

END = 0
WIDTH, BEAM = 3, 2
LENS = [[2, 1], [1, 1, 1]]


def decoder():
    """One beam_search step between the init beams and the decode: the selections (a LoD
    the segment computes), the decoded sentences (held values) and an array fetched. (An
    array of LoD entries is not handed back: the fetched one holds constants.)"""
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start), fluid.unique_name.guard():
        init_ids = pd.data(name="pre_ids", shape=[1], dtype="int64", lod_level=2)
        init_scores = pd.data(name="pre_scores", shape=[1], dtype="float32", lod_level=2)
        ids = pd.data(name="ids", shape=[WIDTH], dtype="int64", lod_level=2)
        scores = pd.data(name="scores", shape=[WIDTH], dtype="float32", lod_level=2)
        i, j = pd.fill_constant([1], "int64", 0), pd.fill_constant([1], "int64", 1)
        ids_array, scores_array = pd.create_array("int64"), pd.create_array("float32")
        pd.array_write(init_ids, i, array=ids_array)
        pd.array_write(init_scores, i, array=scores_array)
        sel_ids, sel_scores = pd.beam_search(init_ids, init_scores, ids, scores, BEAM,
                                             end_id=END)
        pd.array_write(sel_ids, j, array=ids_array)
        pd.array_write(sel_scores, j, array=scores_array)
        sent_ids, sent_scores = pd.beam_search_decode(ids_array, scores_array, BEAM, END)
        kept, one = pd.create_array("float32"), pd.fill_constant([2], "float32", 1.5)
        pd.array_write(one, i, array=kept)
        pd.array_write(pd.scale(one, 2.0), j, array=kept)
    return main, start, [sel_ids, sel_scores, sent_ids, sent_scores, kept]


def feed(seed):
    rng, place = np.random.default_rng(seed), fluid.CPUPlace()
    n = sum(LENS[-1])
    scores = (np.round(rng.normal(size=(n, WIDTH)) * 2) / 2).astype(np.float32)
    return {"pre_ids": fluid.create_lod_tensor(rng.integers(1, 5, (n, 1)), LENS, place),
            "pre_scores": fluid.create_lod_tensor(rng.normal(size=(n, 1)).astype(np.float32),
                                                  LENS, place),
            "ids": fluid.create_lod_tensor(rng.integers(1, 6, (n, WIDTH)), LENS, place),
            "scores": fluid.create_lod_tensor(scores, LENS, place)}


@pytest.fixture
def faulty(monkeypatch):
    """Plans load the library built with the test hook; returns its (fail_at, live)."""
    libs = []

    def load(low):
        lib = build.load(build.compile_cached("#define FL_EXPORT_FAULTS 1\n" + low.source))
        libs.append(lib)
        return lib
    monkeypatch.setattr(NativePlan, "load", staticmethod(load))

    def fail_at(n):
        libs[-1].fl_export_fail_at.argtypes = [ctypes.c_int64]
        libs[-1].fl_export_fail_at(n)

    def live():
        libs[-1].fl_export_live.restype = ctypes.c_int64
        return libs[-1].fl_export_live()
    return fail_at, live


def flat(values):
    """Each fetched value as (array, LoD) pairs (an array's entries in turn)."""
    out = []
    for v in values:
        for t in (v if isinstance(v, list) else [v]):
            out.append((None if t._array is None else np.array(t), t.lod()))
    return out


def assert_same(want, got):
    assert len(want) == len(got)
    for (a, la), (b, lb) in zip(flat(want), flat(got)):
        assert la == lb and (a is None) == (b is None)
        if a is not None:
            np.testing.assert_array_equal(a, b)


def runner():
    main, start, fetch = decoder()
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(start, scope=scope)
    want = exe.run(main, feed=feed(1), fetch_list=fetch, scope=scope, return_numpy=False)
    prog = fluid.CompiledProgram(main).with_native_code()

    def run():
        return exe.run(prog, feed=feed(1), fetch_list=fetch, scope=scope, return_numpy=False)
    return run, want


def test_the_decoder_hands_back_every_kind_of_block_in_one_segment(faulty):
    main, _, fetch = decoder()
    text = fluid.CompiledProgram(main).with_native_code(
        ["pre_ids", "pre_scores", "ids", "scores"], fetch).explain()
    assert "1 native segment(s), 0 as Python steps" in text
    run, want = runner()
    assert_same(want, run())
    _, live = faulty
    assert live() == 0


# the blocks the segment makes: 2 LoD, 2 held values, 1 array
@pytest.mark.parametrize("nth", range(1, 6))
def test_a_block_that_cannot_be_made_frees_those_made_before_it(faulty, nth):
    fail_at, live = faulty
    run, want = runner()
    run()                                    # built, loaded, the arena grown
    fail_at(nth)
    with pytest.raises(ExecutionError, match="out of memory handing a .* back"):
        run()
    assert live() == 0
    assert_same(want, run())
    assert live() == 0


def test_running_out_copying_a_block_frees_every_block_of_the_call(faulty, monkeypatch):
    _, live = faulty
    run, want = runner()
    run()
    calls = []

    def held_of_block(addr, dtype):   # the second held value cannot be copied
        calls.append(addr)
        if len(calls) == 2:
            raise MemoryError
        return real(addr, dtype)
    real = abi.held_of_block
    monkeypatch.setattr(abi, "held_of_block", held_of_block)
    with pytest.raises(ExecutionError, match="MemoryError"):
        run()
    assert live() == 0
    monkeypatch.setattr(abi, "held_of_block", real)
    assert_same(want, run())
    assert live() == 0
