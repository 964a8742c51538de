"""warpctc (fluidity/ops/ctc.py): the CTC loss against a brute-force sum over alignments,
LoD and padded inputs, and the gradient against finite differences."""
import itertools

import numpy as np
import pytest

import fluidity as fluid

from fluidity.core.tensor import LoDTensor
from fluidity.errors import FluidityError
from op_test import check_grad, run_op

rng = np.random.default_rng(21)


def brute_ctc(logits, label, blank=0):
    y = np.exp(logits - logits.max(1, keepdims=True))
    y /= y.sum(1, keepdims=True)
    total = 0.0
    for path in itertools.product(range(logits.shape[1]), repeat=len(logits)):
        collapsed = [k for i, k in enumerate(path) if i == 0 or k != path[i - 1]]
        if [k for k in collapsed if k != blank] == list(label):
            total += np.prod([y[t, k] for t, k in enumerate(path)])
    return -np.log(total)


def test_warpctc_matches_the_sum_over_alignments():
    z = rng.normal(size=(7, 3)).astype(np.float32)
    label = np.array([[1], [2], [1], [1]], np.int32)
    ins = {"Logits": LoDTensor(z, [[0, 4, 7]]), "Label": LoDTensor(label, [[0, 2, 4]])}
    loss = run_op("warpctc", ins, outputs=["WarpCTCGrad", "Loss"])["Loss"]
    want = [brute_ctc(z[:4].astype(np.float64), [1, 2]), brute_ctc(z[4:].astype(np.float64),
                                                                    [1, 1])]
    np.testing.assert_allclose(loss.reshape(-1), want, rtol=1e-5)
    check_grad("warpctc", ins, ["Logits"], output_slots=["Loss"],
               outputs=["WarpCTCGrad", "Loss"])


def test_a_sequence_no_alignment_fits_has_loss_and_gradient_zero():
    # 2 frames cannot carry labels [1, 1] (a blank must separate the repeat): Fluid 1.8
    # (warp-ctc) gives that sequence loss 0 and no gradient; the other is unaffected
    z = rng.normal(size=(5, 3)).astype(np.float32)
    label = np.array([[1], [1], [2]], np.int32)
    ins = {"Logits": LoDTensor(z, [[0, 2, 5]]), "Label": LoDTensor(label, [[0, 2, 3]])}
    got = run_op("warpctc", ins, outputs=["WarpCTCGrad", "Loss"])
    np.testing.assert_allclose(got["Loss"].reshape(-1),
                               [0.0, brute_ctc(z[2:].astype(np.float64), [2])], rtol=1e-5)
    check_grad("warpctc", ins, ["Logits"], output_slots=["Loss"],
               outputs=["WarpCTCGrad", "Loss"])


def test_warpctc_padded_and_bad_labels():
    z = rng.normal(size=(4, 2, 3)).astype(np.float32)           # [T, B, K]
    label = np.array([[2, 0], [1, 2]], np.int32)
    got = run_op("warpctc", {"Logits": z, "Label": label,
                             "LogitsLength": np.array([3, 4], np.int64),
                             "LabelLength": np.array([1, 2], np.int64)},
                 {"blank": 0}, outputs=["WarpCTCGrad", "Loss"])["Loss"]
    want = [brute_ctc(z[:3, 0].astype(np.float64), [2]),
            brute_ctc(z[:, 1].astype(np.float64), [1, 2])]
    np.testing.assert_allclose(got.reshape(-1), want, rtol=1e-5)
    with pytest.raises(FluidityError, match="blank"):
        run_op("warpctc", {"Logits": LoDTensor(z[:, 0], [[0, 4]]),
                           "Label": LoDTensor(np.array([[0]], np.int32), [[0, 1]])},
               outputs=["WarpCTCGrad", "Loss"])


def test_ctc_align():
    ids = np.array([[0], [1], [1], [0], [2], [2], [0], [0], [3], [3]], np.int64)
    got = run_op("ctc_align", {"Input": LoDTensor(ids, [[0, 7, 8, 10]])}, {"blank": 0},
                 outputs=["Output"])
    np.testing.assert_array_equal(np.asarray(got["Output"]).reshape(-1), [1, 2, 3])
    padded = np.array([[1, 1, 0, 2, 2], [0, 0, 0, 0, 0]], np.int64)
    got = run_op("ctc_align", {"Input": padded, "InputLength": np.array([[5], [3]], np.int64)},
                 {"blank": 0, "padding_value": -9}, outputs=["Output", "OutputLength"])
    np.testing.assert_array_equal(got["Output"], [[1, 2, -9, -9, -9], [-9] * 5])
    np.testing.assert_array_equal(got["OutputLength"], [[2], [0]])


def test_ctc_align_all_empty_keeps_one_sequence_per_input():
    # Fluid 1.8: when every sequence decodes to nothing the data is a lone -1, but the LoD
    # still counts each input sequence (edit_distance downstream compares n against n)
    ids = np.array([[0], [0], [0], [0], [0]], np.int64)
    got = run_op("ctc_align", {"Input": LoDTensor(ids, [[0, 2, 3, 5]])}, {"blank": 0},
                 outputs=["Output"], return_lod=True)["Output"]
    assert np.asarray(got).tolist() == [[-1]]
    assert got.lod() == [[0, 0, 0, 0]]
    # in one program, as ctc_greedy_decoder feeds edit_distance in PaddleCV's OCR model
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [1], dtype="int64", lod_level=1)
        ref = fluid.layers.data("ref", [1], dtype="int64", lod_level=1)
        out = main.global_block().create_var(name="aligned", dtype="int64", lod_level=1)
        main.global_block().append_op(type="ctc_align", inputs={"Input": [x]},
                                      outputs={"Output": [out]}, attrs={"blank": 0})
        dist, num = fluid.layers.edit_distance(out, ref, normalized=False)
    d, n = fluid.Executor(fluid.CPUPlace()).run(
        main, feed={"x": LoDTensor(ids, [[0, 2, 3, 5]]),
                    "ref": LoDTensor(np.array([[1], [2], [3]], np.int64), [[0, 1, 1, 3]])},
        fetch_list=[dist, num])
    np.testing.assert_allclose(np.asarray(d).reshape(-1), [1, 0, 2])
    assert np.asarray(n).reshape(-1).tolist() == [3]


def test_edit_distance():
    hyps = np.array([[1], [2], [3], [4], [5]], np.int64)
    refs = np.array([[1], [3], [3], [4], [6], [7]], np.int64)
    got = run_op("edit_distance", {"Hyps": LoDTensor(hyps, [[0, 3, 5]]),
                                   "Refs": LoDTensor(refs, [[0, 2, 6]])}, {"normalized": True})
    np.testing.assert_allclose(got["Out"].reshape(-1), [1 / 2, 3 / 4])
    assert got["SequenceNum"].tolist() == [2]
    got = run_op("edit_distance", {"Hyps": np.array([[1, 2, 0]], np.int64),
                                   "Refs": np.array([[1, 0, 0]], np.int64),
                                   "HypsLength": np.array([2], np.int64),
                                   "RefsLength": np.array([1], np.int64)})
    assert got["Out"].reshape(-1).tolist() == [1.0]
