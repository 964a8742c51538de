"""beam_search and beam_search_decode: Paddle's own op-test case, ended prefixes and pruning,
is_accumulated=False, and decoding against a back-trace through parent_idx."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.core.tensor import LoDTensor
from fluidity.errors import ExecutionError
from op_test import run_op


def lod_t(x, *lens):
    t = LoDTensor(np.asarray(x))
    t.set_recursive_sequence_lengths([list(v) for v in lens])
    return t


def step(pre_ids, pre_scores, scores, ids=None, lens=((2, 2), (1, 1, 1, 1)), **attrs):
    ins = {"pre_ids": lod_t(np.array(pre_ids, np.int64).reshape(-1, 1), *lens),
           "pre_scores": lod_t(np.array(pre_scores, np.float32).reshape(-1, 1), *lens),
           "scores": lod_t(np.array(scores, np.float32), *lens)}
    if ids is not None:
        ins["ids"] = lod_t(np.array(ids, np.int64), *lens)
    a = {"beam_size": 2, "end_id": 0, "level": 0, "is_accumulated": True}
    a.update(attrs)
    return run_op("beam_search", ins, a, return_lod=True)


def test_beam_search_paddle_case():
    out = step([1, 2, 3, 4], [0.1, 0.2, 0.3, 0.4],
               [[0.5, 0.3, 0.2], [0.6, 0.3, 0.1], [0.9, 0.5, 0.1], [0.7, 0.5, 0.1]],
               ids=[[4, 2, 5], [2, 1, 3], [3, 5, 2], [8, 2, 1]])
    np.testing.assert_array_equal(np.asarray(out["selected_ids"]).ravel(), [4, 2, 3, 8])
    np.testing.assert_allclose(np.asarray(out["selected_scores"]).ravel(),
                               [0.5, 0.6, 0.9, 0.7])
    assert out["selected_ids"].recursive_sequence_lengths() == [[2, 2], [1, 1, 1, 1]]
    np.testing.assert_array_equal(np.asarray(out["parent_idx"]), [0, 1, 2, 3])


def test_beam_search_ended_prefix_competes_and_all_ended_source_is_pruned():
    # source 0: prefix 0 ended (id 0) with score 0.8, prefix 1 extends with 0.6 / 0.3
    # source 1: both prefixes ended -> the source is pruned
    out = step([0, 2, 0, 0], [0.8, 0.2, 0.5, 0.4],
               [[0.1, 0.9, 0.1], [0.6, 0.3, 0.1], [0.9, 0.5, 0.1], [0.7, 0.5, 0.1]],
               ids=[[4, 2, 5], [7, 1, 3], [3, 5, 2], [8, 2, 1]])
    np.testing.assert_array_equal(np.asarray(out["selected_ids"]).ravel(), [0, 7])
    np.testing.assert_allclose(np.asarray(out["selected_scores"]).ravel(), [0.8, 0.6])
    assert out["selected_ids"].recursive_sequence_lengths() == [[2, 2], [1, 1, 0, 0]]
    np.testing.assert_array_equal(np.asarray(out["parent_idx"]), [0, 1])


def test_beam_search_not_accumulated_without_ids():
    # scores are probabilities over the vocabulary; ids are their columns
    probs = [[0.1, 0.6, 0.3], [0.5, 0.2, 0.3]]
    out = step([1, 2], [-1.0, -0.1], probs, lens=((2,), (1, 1)), is_accumulated=False)
    cand = {(r, c): s + np.log(probs[r][c]) for r, s in enumerate([-1.0, -0.1])
            for c in range(3)}
    best = sorted(cand, key=lambda k: -cand[k])[:2]
    rows = sorted(best)   # grouped by prefix row
    np.testing.assert_array_equal(np.asarray(out["selected_ids"]).ravel(),
                                  [c for _, c in sorted(best, key=lambda k: (k[0], -cand[k]))])
    np.testing.assert_allclose(np.asarray(out["selected_scores"]).ravel(),
                               [cand[k] for k in sorted(best, key=lambda k: (k[0], -cand[k]))],
                               rtol=1e-6)
    assert out["selected_ids"].recursive_sequence_lengths() == \
        [[2], [sum(r == 0 for r, _ in rows), sum(r == 1 for r, _ in rows)]]


def test_beam_search_errors():
    with pytest.raises(ExecutionError, match="must have the same shape"):
        step([1, 2, 3, 4], [0.1, 0.2, 0.3, 0.4], [[0.5, 0.1], [0.6, 0.1], [0.9, 0.1],
                                                  [0.7, 0.1]], ids=[[1], [2], [3], [4]])




def test_beam_search_decode_backtraces_sentences():
    # two sources, beam 2, end_id 0. step 0: one prefix each -> 2 candidates each.
    steps = [
        ([5, 6, 7, 8], [-0.1, -0.5, -0.2, -0.3], ((1, 1), (2, 2))),
        # source 0's rows 0,1 -> picks (row 0: 9, 0), source 1 -> (row 3: 4), (row 2: 0)
        ([9, 0, 0, 4], [-0.4, -0.6, -0.9, -0.7], ((2, 2), (2, 0, 1, 1))),
        # step 2: source 0 rows: 0 (9) -> 3; row 1 ended (0) -> 0; source 1: row 2 ended,
        # row 3 (4) -> 0
        ([3, 0, 0, 0], [-0.8, -0.6, -0.9, -1.0], ((2, 2), (1, 1, 1, 1))),
    ]
    got_ids, got_scores, lod = run_decode(steps)
    # source 0: [5, 9, 3] (-0.8) and [5, 0] (-0.6, ended at step 1); best first
    # source 1: [8, 4, 0] (-1.0) and [7, 0] (-0.9)
    assert lod == [[0, 2, 4], [0, 2, 5, 7, 10]]
    np.testing.assert_array_equal(got_ids, [5, 0, 5, 9, 3, 7, 0, 8, 4, 0])
    np.testing.assert_allclose(got_scores, [-0.1, -0.6, -0.1, -0.4, -0.8, -0.2, -0.9,
                                            -0.3, -0.7, -1.0], rtol=1e-6)


def run_decode(steps):
    """Write every step's (ids, scores) into tensor arrays with array_write, decode them."""
    main, feed = fluid.Program(), {}
    with fluid.program_guard(main, fluid.Program()):
        ids_arr = fluid.layers.create_array("int64")
        scores_arr = fluid.layers.create_array("float32")
        for t, (ids, scores, lens) in enumerate(steps):
            i = fluid.layers.data(f"i{t}", [1], dtype="int64", lod_level=2)
            s = fluid.layers.data(f"s{t}", [1], dtype="float32", lod_level=2)
            at = fluid.layers.fill_constant([1], "int64", t)
            fluid.layers.array_write(i, at, array=ids_arr)
            fluid.layers.array_write(s, at, array=scores_arr)
            feed[f"i{t}"] = lod_t(np.array(ids, np.int64).reshape(-1, 1), *lens)
            feed[f"s{t}"] = lod_t(np.array(scores, np.float32).reshape(-1, 1), *lens)
        out_i, out_s = fluid.layers.beam_search_decode(ids_arr, scores_arr, beam_size=2,
                                                       end_id=0)
    exe = fluid.Executor(fluid.CPUPlace())
    r_i, r_s = exe.run(main, feed=feed, fetch_list=[out_i, out_s], return_numpy=False)
    return np.asarray(r_i), np.asarray(r_s), r_i.lod()


def gather_tree_ref(ids, parents):
    """Paddle's gather_tree, written as its loops."""
    steps, batch, beam = ids.shape
    out = np.zeros_like(ids)
    for b in range(batch):
        for k in range(beam):
            out[-1, b, k] = ids[-1, b, k]
            parent = parents[-1, b, k]
            for t in range(steps - 2, -1, -1):
                out[t, b, k] = ids[t, b, parent]
                parent = parents[t, b, parent]
    return out


def test_gather_tree_op_against_numpy():
    rng = np.random.RandomState(3)
    for dtype in (np.int64, np.int32):
        ids = rng.randint(0, 10, (5, 3, 4)).astype(dtype)
        parents = rng.randint(0, 4, (5, 3, 4)).astype(dtype)
        out = run_op("gather_tree", {"Ids": ids, "Parents": parents})["Out"]
        np.testing.assert_array_equal(np.asarray(out), gather_tree_ref(ids, parents))
    # Paddle's docstring example
    ids = np.array([[[2, 2], [6, 1]], [[3, 9], [6, 1]], [[0, 1], [9, 0]]], np.int64)
    parents = np.array([[[0, 0], [1, 1]], [[1, 0], [1, 0]], [[0, 0], [0, 1]]], np.int64)
    out = run_op("gather_tree", {"Ids": ids, "Parents": parents})["Out"]
    np.testing.assert_array_equal(np.asarray(out), [[[2, 2], [1, 6]], [[3, 3], [6, 1]],
                                                     [[0, 1], [9, 0]]])
    with pytest.raises(ExecutionError, match="beam indices"):
        run_op("gather_tree", {"Ids": ids, "Parents": parents + 2})


def test_gather_tree_layer():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        ids = fluid.data("ids", [None, 2, 3], "int64")
        parents = fluid.data("parents", [None, 2, 3], "int64")
        out = fluid.layers.gather_tree(ids, parents)
        with pytest.raises(TypeError):
            fluid.layers.gather_tree(ids, fluid.data("p32", [None, 2, 3], "float32"))
        with pytest.raises(TypeError):
            fluid.layers.gather_tree(np.zeros((1, 2, 3)), parents)
    rng = np.random.RandomState(0)
    iv = rng.randint(0, 9, (4, 2, 3)).astype(np.int64)
    pv = rng.randint(0, 3, (4, 2, 3)).astype(np.int64)
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"ids": iv, "parents": pv},
                                                fetch_list=[out])
    np.testing.assert_array_equal(got, gather_tree_ref(iv, pv))
