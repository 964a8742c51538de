"""Compiled values with two LoD levels (beam search's: sources -> prefixes -> rows): a fed
2-level input enters a segment with both levels (abi.packed_lod), ops that share its LoD
hand both back as the interpreter does, an emitter that reads one level refuses a 2-level
value (the op runs interpreted, the answer the same), 3 levels are refused, and a LoD whose
levels disagree fails as the interpreter's feed check says."""
import logging

import numpy as np
import pytest

import fluidity as fluid
from fluidity import layers as pd
from fluidity.codegen import abi
from fluidity.errors import FeedError
from tests.compiled_runs import step_both


def program(lod_level, pool=False):
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        x = pd.data(name="x", shape=[2], dtype="float32", lod_level=lod_level)
        y = pd.scale(pd.relu(x), scale=2.0, bias=1.0)
        out = pd.sequence_pool(y, "sum") if pool else y
    return main, start, out


def fed(levels, rows=5, seed=0):
    x = np.random.default_rng(seed).normal(size=(rows, 2)).astype(np.float32)
    return fluid.create_lod_tensor(x, levels, fluid.CPUPlace())


def explain(main, out):
    return fluid.CompiledProgram(main).with_native_code(["x"], [out]).explain()


def test_a_two_level_input_keeps_both_levels_through_compiled_ops(caplog):
    main, start, out = program(2)
    assert "1 native segment(s), 0 as Python steps" in explain(main, out)
    for lens in ([[2, 1], [1, 3, 1]], [[1], [5]], [[3], [0, 5, 0]]):   # empty sequences too
        want, got = step_both(main, start, [out], {"x": fed(lens)}, caplog,
                              return_numpy=False)
        assert got[0].lod() == want[0].lod() == fed(lens).lod()
        np.testing.assert_array_equal(np.array(got[0]), np.array(want[0]))


def test_an_emitter_that_reads_one_level_refuses_two(caplog):
    main, start, out = program(2, pool=True)
    text = explain(main, out)
    assert "has 2 LoD levels" in text and "sequence_pool" in text
    want, got = step_both(main, start, [out], {"x": fed([[2, 1], [1, 3, 1]])},
                          return_numpy=False)
    assert got[0].lod() == want[0].lod()
    np.testing.assert_array_equal(np.array(got[0]), np.array(want[0]))


def test_three_levels_are_refused():
    main, start, out = program(3)
    assert "3 LoD levels" in explain(main, out)
    lens = [[1, 1], [1, 2], [2, 1, 2]]
    want, got = step_both(main, start, [out], {"x": fed(lens)}, return_numpy=False)
    assert got[0].lod() == want[0].lod()
    np.testing.assert_array_equal(np.array(got[0]), np.array(want[0]))


def test_levels_that_disagree_fail_as_the_interpreters_feed_check():
    main, start, out = program(2)
    bad = fluid.LoDTensor()
    bad.set(np.zeros((5, 2), np.float32), fluid.CPUPlace())
    bad._lod = [[0, 4], [0, 2, 5]]       # level 0 names 4 prefixes of 2 (set_lod refuses it)
    for prog in (main, fluid.CompiledProgram(main).with_native_code()):
        exe, scope = fluid.Executor(), fluid.Scope()
        exe.run(start, scope=scope)
        with pytest.raises(FeedError, match="feed 'x'"):
            exe.run(prog, feed={"x": bad}, fetch_list=[out], scope=scope)


def test_packed_lod_lays_the_levels_out_as_the_segment_reads_them():
    lod = [[0, 2, 3], [0, 1, 4, 5]]
    packed, count = abi.packed_lod(lod, 2, 5)
    assert packed.tolist() == [0, 2, 3, 0, 1, 4, 5] and count == 3
    packed, count = abi.packed_lod(lod, 1, 5)            # one level: the finest
    assert packed.tolist() == [0, 1, 4, 5] and count == 4
    assert "2 LoD levels, compiled for 3" in abi.packed_lod(lod, 3, 5)
    assert "not offsets of its rows" in abi.packed_lod(lod, 2, 6)
    assert "level 0 is not offsets" in abi.packed_lod([[0, 4], [0, 1, 4, 5]], 2, 5)
