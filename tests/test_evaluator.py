"""fluid.evaluator (fluidity/evaluator.py): Fluid 1.x's in-program evaluators accumulate in
persistable states over mini-batches; reset zeroes them; eval gives the pass's figures."""
import warnings

import numpy as np
import pytest

import fluidity as fluid
from fluidity.core.tensor import LoDTensor


def _ids(seqs):
    flat = np.array([v for s in seqs for v in s], np.int64).reshape(-1, 1)
    return LoDTensor(flat, [np.concatenate([[0], np.cumsum([len(s) for s in seqs])]).tolist()])


def _edit_distance(a, b):
    d = np.arange(len(b) + 1, dtype=float)
    for i, x in enumerate(a, 1):
        prev, d[0] = d.copy(), i
        for j, y in enumerate(b, 1):
            d[j] = min(prev[j] + 1, d[j - 1] + 1, prev[j - 1] + (x != y))
    return d[-1]


def test_edit_distance_evaluator_accumulates_over_batches():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        hyp = fluid.layers.data("hyp", [1], dtype="int64", lod_level=1)
        ref = fluid.layers.data("ref", [1], dtype="int64", lod_level=1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ev = fluid.evaluator.EditDistance(input=hyp, label=ref)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    batches = [([[1, 2], [3]], [[1, 2], [4, 4]]), ([[5, 6, 7]], [[5, 7]])]
    with fluid.scope_guard(scope):
        exe.run(startup)
        for _ in range(2):          # a second pass: reset must forget the first
            ev.reset(exe)
            for hyps, refs in batches:
                dist, wrong = exe.run(main, feed={"hyp": _ids(hyps), "ref": _ids(refs)},
                                      fetch_list=ev.metrics)
                want = [_edit_distance(h, r) / len(r) for h, r in zip(hyps, refs)]
                np.testing.assert_allclose(np.asarray(dist).reshape(-1), [sum(want)],
                                           rtol=1e-6)
                assert np.asarray(wrong).reshape(-1).tolist() == [sum(w > 0 for w in want)]
            avg_distance, avg_error = ev.eval(exe)
    per_seq = [_edit_distance(h, r) / len(r) for hs, rs in batches for h, r in zip(hs, rs)]
    np.testing.assert_allclose(avg_distance.reshape(-1), [np.mean(per_seq)], rtol=1e-6)
    np.testing.assert_allclose(avg_error.reshape(-1), [2 / 3], rtol=1e-6)
    assert avg_distance.shape == (1,)


def test_chunk_evaluator_precision_recall_f1():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        pred = fluid.layers.data("pred", [1], dtype="int64", lod_level=1)
        label = fluid.layers.data("label", [1], dtype="int64", lod_level=1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ev = fluid.evaluator.ChunkEvaluator(pred, label, chunk_scheme="IOB",
                                                num_chunk_types=2)
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        ev.reset(exe)
        # IOB with 2 types: B-0=0 I-0=1 B-1=2 I-1=3 O=4. label chunks: (0:0-1), (1:3);
        # predicted chunks: (0:0-1), (0:3) -> 1 correct of 2 predicted, 2 labelled
        exe.run(main, feed={"pred": _ids([[0, 1, 4, 0]]), "label": _ids([[0, 1, 4, 2]])})
        precision, recall, f1 = ev.eval(exe)
    np.testing.assert_allclose([precision[0], recall[0], f1[0]], [0.5, 0.5, 0.5])


def test_evaluator_refuses_a_sub_block():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        hyp = fluid.layers.data("hyp", [1], dtype="int64", lod_level=1)
        main._create_block()
        with pytest.raises(ValueError, match="root block"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fluid.evaluator.EditDistance(input=hyp, label=hyp)
