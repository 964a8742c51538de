"""runtime/beam.h, the compiled twins of ops/beam.py's kernels, against the interpreter's
kernels on the same inputs: ids, parents and LoD bit for bit, scores to the bit (the same
float64 arithmetic rounded once; a log of a different libm may move the last float64 bit,
which float32 rounding hides). Steps: beam_search with ended prefixes, pruned sources, ties,
a batch of one, both levels of a 2-level LoD; beam_search_decode over selections made by the
interpreter's beam_search step after step (sentences that end early included); bad LoD
refused with a message."""
import ctypes

import numpy as np
import pytest

from fluidity.codegen import build
from fluidity.core.tensor import LoDTensor
from fluidity.errors import ExecutionError
from fluidity.ops.beam import BeamSearch, BeamSearchDecode, _abs_lod

SOURCE = r'''
#include "fluidity.h"
#include "beam.h"
#include <vector>

extern "C" int abs_lvl(const int64_t* l0, int64_t n0, const int64_t* l1, int64_t n1,
                       int64_t rows, int64_t* out, char* err) {
    return fl::abs_level(l0, n0, l1, n1, rows, out, "scores", err, 0);
}

extern "C" int bs(const int64_t* pre_ids, const float* pre_scores, const int64_t* ids,
                  const float* scores, int64_t n, int64_t width, const int64_t* high,
                  int64_t n_high, int64_t beam, int64_t end_id, int acc, int64_t* sel_ids,
                  float* sel_scores, int32_t* parent, int64_t* low, int64_t* n_sel,
                  char* err) {
    return fl::beam_search(pre_ids, pre_scores, ids, scores, n, width, high, n_high, beam,
                           end_id, acc != 0, sel_ids, sel_scores, parent, low, n_sel, err, 0);
}

extern "C" int64_t bound(int64_t n, int64_t width, int64_t n_src, int64_t beam) {
    return fl::beam_search_bound(n, width, n_src, beam);
}

// steps flattened: rows[t] (-1: never written), ids/scores back to back, src/sent offsets
// back to back with their counts; outputs into buffers of `cap` words and `cap_lod` offsets
extern "C" int bsd(int64_t n_steps, const int64_t* rows, const int64_t* ids,
                   const float* scores, const int64_t* n_src, const int64_t* src,
                   const int64_t* n_sent, const int64_t* sent, int64_t end_id,
                   int64_t* words, float* word_scores, int64_t* src_lod, int64_t* sent_lod,
                   int64_t* sizes, int64_t cap, char* err) {
    std::vector<fl::BeamStep<int64_t, float>> st;
    for (int64_t t = 0; t < n_steps; ++t) {
        st.push_back({ids, scores, rows[t], src, n_src[t], sent, n_sent[t]});
        if (rows[t] > 0) { ids += rows[t]; scores += rows[t]; }
        src += n_src[t];
        sent += n_sent[t];
    }
    std::vector<int64_t> w, sl{0}, tl{0};
    std::vector<float> s;
    if (int rc = fl::beam_search_decode(st.data(), n_steps, end_id, w, s, sl, tl, err, 0))
        return rc;
    if ((int64_t)w.size() > cap || (int64_t)sl.size() > cap || (int64_t)tl.size() > cap)
        return 99;
    std::copy(w.begin(), w.end(), words);
    std::copy(s.begin(), s.end(), word_scores);
    std::copy(sl.begin(), sl.end(), src_lod);
    std::copy(tl.begin(), tl.end(), sent_lod);
    sizes[0] = w.size(); sizes[1] = sl.size(); sizes[2] = tl.size();
    return 0;
}
'''


@pytest.fixture(scope="module")
def lib():
    return build.load(build.compile_cached(SOURCE, name="beam_runtime_test"))


_ALIVE = []     # the arrays passed in the current call (ctypes keeps no reference)


def ptr(a):
    if a is None:
        return None
    _ALIVE.append(a)
    del _ALIVE[:-64]
    return ctypes.c_void_p(a.ctypes.data)


def i64(x):
    return np.ascontiguousarray(x, np.int64)


def compiled_search(lib, pre_ids, pre_scores, ids, scores, lod, level, beam, end_id, acc):
    n, width = scores.shape
    high = np.zeros(len(lod[level]), np.int64)
    err = ctypes.create_string_buffer(512)
    if level == 0 and len(lod) == 2:
        rc = lib.abs_lvl(ptr(i64(lod[0])), ctypes.c_int64(len(lod[0])), ptr(i64(lod[1])),
                         ctypes.c_int64(len(lod[1])), ctypes.c_int64(n), ptr(high), err)
        if rc:
            raise ExecutionError(err.value.decode())
    else:
        high[:] = lod[level]
    cap = lib.bound(ctypes.c_int64(n), ctypes.c_int64(width),
                    ctypes.c_int64(len(high) - 1), ctypes.c_int64(beam))
    sel_ids, sel_sc = np.full(cap, -7, np.int64), np.full(cap, np.nan, np.float32)
    parent, low = np.full(cap, -7, np.int32), np.full(high[-1] + 1, -7, np.int64)
    n_sel = np.zeros(1, np.int64)
    rc = lib.bs(ptr(i64(pre_ids)), ptr(np.ascontiguousarray(pre_scores, np.float32)),
                ptr(None if ids is None else i64(ids)), ptr(np.ascontiguousarray(scores)),
                ctypes.c_int64(n), ctypes.c_int64(width), ptr(high),
                ctypes.c_int64(len(high)), ctypes.c_int64(beam), ctypes.c_int64(end_id),
                ctypes.c_int(acc), ptr(sel_ids), ptr(sel_sc), ptr(parent), ptr(low),
                ptr(n_sel), err)
    if rc:
        raise ExecutionError(err.value.decode())
    m = int(n_sel[0])
    assert m <= cap
    return sel_ids[:m], sel_sc[:m], parent[:m], [high.tolist(), low.tolist()]


def interpreted_search(pre_ids, pre_scores, ids, scores, lod, level, beam, end_id, acc):
    kernel = BeamSearch.prepare({"level": level, "beam_size": beam, "end_id": end_id,
                                 "is_accumulated": acc}, None)
    out = kernel(LoDTensor(pre_ids.reshape(-1, 1), lod),
                 LoDTensor(pre_scores.reshape(-1, 1), lod),
                 None if ids is None else LoDTensor(ids, lod), LoDTensor(scores, lod))
    return out


def assert_same_search(lib, *args):
    sel_ids, sel_sc, parent, lod = compiled_search(lib, *args)
    ref_ids, ref_sc, ref_parent = interpreted_search(*args)
    assert lod == [list(map(int, level)) for level in ref_ids._lod]
    np.testing.assert_array_equal(sel_ids, ref_ids._array.reshape(-1))
    np.testing.assert_array_equal(parent, ref_parent._array)
    np.testing.assert_array_equal(sel_sc.view(np.int32), ref_sc._array.reshape(-1).view(np.int32))
    return lod, sel_ids


def two_level(rows_per_source):
    """A 2-level LoD of one row per prefix: sources of the given prefix counts."""
    l0 = np.cumsum([0] + list(rows_per_source)).tolist()
    return [l0, list(range(l0[-1] + 1))]


@pytest.mark.parametrize("acc", [True, False])
def test_beam_search_matches_the_interpreter(lib, acc):
    rng = np.random.default_rng(3 if acc else 4)
    end_id = 2
    for case in range(40):
        per_src = rng.integers(1, 4, size=rng.integers(1, 4))      # a batch of one included
        lod = two_level(per_src)
        n, width = int(sum(per_src)), int(rng.integers(1, 5))
        beam = int(rng.integers(1, 4))
        pre_ids = rng.integers(0, 4, n)                  # end_id 2: some prefixes ended
        pre_scores = rng.normal(size=n).astype(np.float32)
        # quantized: ties between rows and between candidates of a row
        if acc:
            scores = (np.round(rng.normal(size=(n, width)) * 2) / 2).astype(np.float32)
        else:
            scores = rng.choice([0.125, 0.25, 0.5, 1.0], size=(n, width)).astype(np.float32)
        ids = None if case % 5 == 4 else rng.integers(0, 4, size=(n, width))
        level = 1 if case % 7 == 6 else 0
        assert_same_search(lib, pre_ids, pre_scores, ids, scores, lod, level, beam, end_id, acc)


def test_a_source_whose_beams_all_ended_is_pruned(lib):
    end_id = 0
    lod = two_level([2, 2])
    pre_ids = np.array([0, 0, 5, 0])            # source 0: both ended; source 1: one lives
    pre_scores = np.array([-1.0, -2.0, -0.5, -3.0], np.float32)
    scores = np.full((4, 2), -9.0, np.float32)
    ids = np.array([[1, 2]] * 4)
    out_lod, sel = assert_same_search(lib, pre_ids, pre_scores, ids, scores, lod, 0, 2,
                                      end_id, True)
    assert out_lod[1][:3] == [0, 0, 0]          # source 0 keeps nothing
    assert len(sel) == 2


def test_beam_search_refuses_a_bad_lod(lib):
    scores = np.zeros((3, 2), np.float32)
    pre = np.zeros(3, np.int64)
    pre_sc = np.zeros(3, np.float32)
    for lod in ([[0, 2], [0, 1, 5]],        # level 1 past the rows
                [[0, 3], [0, 1, 3]],        # level 0 past level 1's entries
                [[0, 2], [0, 2, 1]]):       # decreasing
        with pytest.raises(ExecutionError, match="scores: its LoD"):
            compiled_search(lib, pre, pre_sc, None, scores, lod, 0, 2, 0, True)


def decode_steps(rng, n_src, beam, width, steps, end_id):
    """The ids and scores arrays of a decode: beam_search step after step (interpreted)."""
    lod = [list(range(n_src + 1)), list(range(n_src + 1))]
    ids = LoDTensor(np.ones((n_src, 1), np.int64), lod)
    scores = LoDTensor(np.zeros((n_src, 1), np.float32), lod)
    out_ids, out_scores = [ids], [scores]
    for t in range(steps):
        n = ids._array.shape[0]
        if n == 0:
            break
        cand = rng.integers(0, 6, size=(n, width))
        cand[:, 0] = np.where(rng.random(n) < 0.3, end_id, cand[:, 0])   # some end early
        p = rng.choice([0.5, 0.25, 0.125], size=(n, width))
        acc = (np.log(p) + scores._array.reshape(-1, 1)).astype(np.float32)
        kernel = BeamSearch.prepare({"level": 0, "beam_size": beam, "end_id": end_id,
                                     "is_accumulated": True}, None)
        # the outputs' LoD groups the selected rows by source through the prefixes: the
        # next step's level 0 (as the decoder's loop reads them back from its arrays)
        ids, scores, _ = kernel(ids, scores, LoDTensor(cand, ids._lod),
                                LoDTensor(acc, ids._lod))
        out_ids.append(ids)
        out_scores.append(scores)
    return out_ids, out_scores


def compiled_decode(lib, ids, scores, end_id, unwritten=()):
    rows, flat_ids, flat_sc, n_src, src, n_sent, sent = [], [], [], [], [], [], []
    for t, (i, s) in enumerate(zip(ids, scores)):
        if t in unwritten:
            rows.append(-1)
            n_src.append(0)
            n_sent.append(0)
            continue
        rows.append(i._array.shape[0])
        flat_ids += i._array.reshape(-1).tolist()
        flat_sc += s._array.reshape(-1).tolist()
        n_src.append(len(i._lod[0]))
        src += list(i._lod[0])
        n_sent.append(len(i._lod[1]))
        sent += list(i._lod[1])
    cap = 4 * (sum(max(r, 0) for r in rows) * len(rows) + len(rows) + 8)
    words, wsc = np.zeros(cap, np.int64), np.zeros(cap, np.float32)
    src_lod, sent_lod, sizes = np.zeros(cap, np.int64), np.zeros(cap, np.int64), \
        np.zeros(3, np.int64)
    err = ctypes.create_string_buffer(512)
    rc = lib.bsd(ctypes.c_int64(len(rows)), ptr(i64(rows)), ptr(i64(flat_ids + [0])),
                 ptr(np.array(flat_sc + [0], np.float32)), ptr(i64(n_src)),
                 ptr(i64(src + [0])), ptr(i64(n_sent)), ptr(i64(sent + [0])),
                 ctypes.c_int64(end_id), ptr(words), ptr(wsc), ptr(src_lod), ptr(sent_lod),
                 ptr(sizes), ctypes.c_int64(cap), err)
    if rc:
        raise ExecutionError(err.value.decode())
    a, b, c = map(int, sizes)
    return words[:a], wsc[:a], [src_lod[:b].tolist(), sent_lod[:c].tolist()]


@pytest.mark.parametrize("n_src,beam,width,steps", [(1, 2, 3, 4), (3, 2, 2, 5), (2, 3, 3, 6)])
def test_beam_search_decode_matches_the_interpreter(lib, n_src, beam, width, steps):
    end_id = 0
    rng = np.random.default_rng(n_src * 10 + beam)
    for trial in range(6):
        ids, scores = decode_steps(rng, n_src, beam, width, steps, end_id)
        kernel = BeamSearchDecode.prepare({"beam_size": beam, "end_id": end_id}, None)
        ref_ids, ref_sc = kernel(ids, scores)
        words, wsc, lod = compiled_decode(lib, ids, scores, end_id)
        assert lod == [list(map(int, level)) for level in ref_ids._lod]
        np.testing.assert_array_equal(words, ref_ids._array)
        np.testing.assert_array_equal(wsc.view(np.int32), ref_sc._array.view(np.int32))


def test_decode_skips_entries_never_written_and_refuses_a_bad_lod(lib):
    rng = np.random.default_rng(5)
    ids, scores = decode_steps(rng, 2, 2, 2, 3, 0)
    ref = BeamSearchDecode.prepare({"beam_size": 2, "end_id": 0}, None)(
        [None] + ids, [None] + scores)
    words, _, lod = compiled_decode(lib, [None] + ids, [None] + scores, 0, unwritten=(0,))
    np.testing.assert_array_equal(words, ref[0]._array)
    assert lod == [list(map(int, level)) for level in ref[0]._lod]
    with pytest.raises(ExecutionError, match="non-empty"):
        compiled_decode(lib, [None], [None], 0, unwritten=(0,))
    bad = LoDTensor(ids[1]._array, [ids[1]._lod[0], [0] + [99] * (len(ids[1]._lod[1]) - 1)])
    with pytest.raises(ExecutionError, match="past its"):
        compiled_decode(lib, [ids[0], bad], scores[:2], 0)
