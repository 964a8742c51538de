"""sequence_erase (fluidity/ops/sequence_erase.py) against a per-sequence numpy reference, and
edit_distance(ignored_tokens=...) built on it."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.core.tensor import LoDTensor
from fluidity.errors import FluidityError
from op_test import run_op


def erase_reference(seqs, tokens):
    kept = [[v for v in s if v not in tokens] for s in seqs]
    lod = np.concatenate([[0], np.cumsum([len(k) for k in kept])]).tolist()
    return [v for k in kept for v in k], lod


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_sequence_erase_matches_reference(dtype):
    seqs = [[2, 2, 6], [1, 3, 9], [6, 1, 0, 1], [3, 5]]
    flat = np.array([v for s in seqs for v in s], dtype).reshape(-1, 1)
    lod = np.concatenate([[0], np.cumsum([len(s) for s in seqs])]).tolist()
    got = run_op("sequence_erase", {"X": LoDTensor(flat, [lod])}, {"tokens": [2, 3, 5]},
                 return_lod=True)["Out"]
    want, want_lod = erase_reference(seqs, {2, 3, 5})
    assert np.asarray(got).reshape(-1).tolist() == want
    assert np.asarray(got).dtype == dtype
    assert got.lod() == [want_lod]          # the last sequence is now empty


def test_sequence_erase_needs_lod():
    with pytest.raises(FluidityError, match="LoD"):
        run_op("sequence_erase", {"X": np.array([[1], [2]], np.int64)}, {"tokens": [1]})


def test_edit_distance_ignores_tokens():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        hyp = fluid.layers.data("hyp", [1], dtype="int64", lod_level=1)
        ref = fluid.layers.data("ref", [1], dtype="int64", lod_level=1)
        dist, num = fluid.layers.edit_distance(hyp, ref, normalized=False,
                                               ignored_tokens=[0, 1])
    # after erasing 0 and 1: [5, 6] vs [5, 7] -> 1;  [] vs [4] -> 1
    feed = {"hyp": LoDTensor(np.array([[0], [5], [1], [6], [1]], np.int64), [[0, 4, 5]]),
            "ref": LoDTensor(np.array([[5], [7], [0], [4]], np.int64), [[0, 2, 4]])}
    d, n = fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=[dist, num])
    np.testing.assert_allclose(np.asarray(d).reshape(-1), [1, 1])
    assert int(n) == 2
