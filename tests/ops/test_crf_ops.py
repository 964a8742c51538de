"""linear_chain_crf, crf_decoding and chunk_eval against brute-force numpy references (every
tag path enumerated), numeric gradients, padded (Length) and LoD forms."""
import itertools

import numpy as np
import pytest

from fluidity.core.tensor import LoDTensor
from fluidity.errors import ExecutionError
from fluidity.ops.crf import chunk_segments
from op_test import check_grad, run_op

rng = np.random.default_rng(3)
D = 3


def lod_t(x, lens):
    t = LoDTensor(np.asarray(x))
    t.set_recursive_sequence_lengths([list(lens)])
    return t


def path_score(x, w, y):
    s = w[0, y[0]] + w[1, y[-1]] + sum(x[t, y[t]] for t in range(len(y)))
    return s + sum(w[2 + y[t - 1], y[t]] for t in range(1, len(y)))


def brute_nll(x, w, y):
    scores = [path_score(x, w, p) for p in itertools.product(range(x.shape[1]),
                                                             repeat=len(x))]
    m = max(scores)
    return m + np.log(np.sum(np.exp(np.array(scores) - m))) - path_score(x, w, y)


def brute_best(x, w):
    paths = list(itertools.product(range(x.shape[1]), repeat=len(x)))
    return np.array(max(paths, key=lambda p: path_score(x, w, p)))


def data(lens):
    x = rng.normal(size=(sum(lens), D))
    w = rng.normal(size=(D + 2, D))
    y = rng.integers(0, D, size=(sum(lens), 1)).astype(np.int64)
    return x, w, y


@pytest.mark.parametrize("lens", [[3, 1, 2], [4]])
def test_linear_chain_crf_forward_and_grad(lens):
    x, w, y = data(lens)
    inputs = {"Emission": lod_t(x, lens), "Transition": w, "Label": lod_t(y, lens)}
    out = run_op("linear_chain_crf", inputs)
    off = np.cumsum([0] + lens)
    want = [brute_nll(x[a:b], w, y[a:b, 0]) for a, b in zip(off[:-1], off[1:])]
    np.testing.assert_allclose(np.asarray(out["LogLikelihood"]).ravel(), want, rtol=1e-5)
    alpha = np.asarray(out["Alpha"])
    np.testing.assert_allclose(alpha.sum(1), 1.0, rtol=1e-5)   # normalized per step
    np.testing.assert_allclose(np.asarray(out["TransitionExps"]), np.exp(w), rtol=1e-6)
    check_grad("linear_chain_crf", inputs, ["Emission", "Transition"])


def test_linear_chain_crf_padded_with_length():
    lens = [2, 3]
    x, w, y = data(lens)
    xp, yp = np.zeros((2, 3, D)), np.zeros((2, 3), np.int64)
    xp[0, :2], xp[1] = x[:2], x[2:]
    yp[0, :2], yp[1] = y[:2, 0], y[2:, 0]
    inputs = {"Emission": xp, "Transition": w, "Label": yp,
              "Length": np.array(lens, np.int64)}
    out = run_op("linear_chain_crf", inputs)
    want = [brute_nll(x[:2], w, y[:2, 0]), brute_nll(x[2:], w, y[2:, 0])]
    np.testing.assert_allclose(np.asarray(out["LogLikelihood"]).ravel(), want, rtol=1e-5)
    check_grad("linear_chain_crf", inputs, ["Emission", "Transition"])


def test_linear_chain_crf_errors():
    x, w, y = data([2])
    with pytest.raises(ExecutionError, match="Transition must be"):
        run_op("linear_chain_crf", {"Emission": lod_t(x, [2]), "Transition": w[:3],
                                    "Label": lod_t(y, [2])})
    with pytest.raises(ExecutionError, match="no LoD"):
        run_op("linear_chain_crf", {"Emission": x, "Transition": w, "Label": y})
    with pytest.raises(ExecutionError, match="out of range"):
        run_op("linear_chain_crf", {"Emission": lod_t(x, [2]), "Transition": w,
                                    "Label": lod_t(y + D, [2])})


def test_crf_decoding_viterbi_and_label_compare():
    lens = [3, 1, 4]
    x, w, y = data(lens)
    off = np.cumsum([0] + lens)
    want = np.concatenate([brute_best(x[a:b], w, ) for a, b in zip(off[:-1], off[1:])])
    out = run_op("crf_decoding", {"Emission": lod_t(x, lens), "Transition": w},
                 return_lod=True)["ViterbiPath"]
    np.testing.assert_array_equal(np.asarray(out).ravel(), want)
    assert out.recursive_sequence_lengths() == [lens]
    lab = want.copy()
    lab[1] = (lab[1] + 1) % D
    hit = run_op("crf_decoding", {"Emission": lod_t(x, lens), "Transition": w,
                                  "Label": lod_t(lab.reshape(-1, 1), lens)})["ViterbiPath"]
    np.testing.assert_array_equal(np.asarray(hit).ravel(), (lab == want).astype(np.int64))


def test_crf_decoding_padded():
    lens = [2, 3]
    x, w, _ = data(lens)
    xp = np.zeros((2, 3, D))
    xp[0, :2], xp[1] = x[:2], x[2:]
    out = run_op("crf_decoding", {"Emission": xp, "Transition": w,
                                  "Length": np.array(lens, np.int64)})["ViterbiPath"]
    assert np.asarray(out).shape == (2, 3)
    np.testing.assert_array_equal(np.asarray(out)[0, :2], brute_best(x[:2], w))
    np.testing.assert_array_equal(np.asarray(out)[1], brute_best(x[2:], w))


@pytest.mark.parametrize("scheme,labels,chunks", [
    # IOB, 2 types: B-0=0 I-0=1 B-1=2 I-1=3 O=4
    ("IOB", [0, 1, 4, 2, 3, 3, 0, 2], [(0, 1, 0), (3, 5, 1), (6, 6, 0), (7, 7, 1)]),
    ("IOB", [1, 1, 4, 3], [(0, 1, 0), (3, 3, 1)]),
    # IOE: I-0=0 E-0=1 I-1=2 E-1=3 O=4
    ("IOE", [0, 1, 2, 2, 3, 4, 1], [(0, 1, 0), (2, 4, 1), (6, 6, 0)]),
    # IOBES: B=0 I=1 E=2 S=3 per type, O=8
    ("IOBES", [0, 1, 2, 3, 8, 4, 6, 7], [(0, 2, 0), (3, 3, 0), (5, 6, 1), (7, 7, 1)]),
    ("plain", [0, 0, 1, 2, 1], [(0, 1, 0), (2, 2, 1), (4, 4, 1)]),
])
def test_chunk_segments(scheme, labels, chunks):
    assert chunk_segments(labels, 2, scheme) == chunks


def test_chunk_eval_counts_and_scores():
    lens = [5, 4]
    label = np.array([0, 1, 4, 2, 3, 2, 4, 0, 1], np.int64).reshape(-1, 1)
    infer = np.array([0, 1, 4, 2, 4, 2, 4, 0, 4], np.int64).reshape(-1, 1)
    # label chunks: (0,1,0) (3,4,1) | (0,0,1) (2,3,0); inferred: (0,1,0) (3,3,1) | (0,0,1) (2,2,0)
    out = run_op("chunk_eval", {"Inference": lod_t(infer, lens), "Label": lod_t(label, lens)},
                 {"num_chunk_types": 2, "chunk_scheme": "IOB"})
    assert [int(np.asarray(out[k]).reshape(-1)[0]) for k in
            ("NumInferChunks", "NumLabelChunks", "NumCorrectChunks")] == [4, 4, 2]
    np.testing.assert_allclose([np.asarray(out[k]).reshape(-1)[0] for k in
                                ("Precision", "Recall", "F1-Score")], [0.5, 0.5, 0.5])
    ex = run_op("chunk_eval", {"Inference": lod_t(infer, lens), "Label": lod_t(label, lens)},
                {"num_chunk_types": 2, "chunk_scheme": "IOB", "excluded_chunk_types": [1]})
    assert int(np.asarray(ex["NumCorrectChunks"]).reshape(-1)[0]) == 1
    assert int(np.asarray(ex["NumLabelChunks"]).reshape(-1)[0]) == 2
    padded = run_op("chunk_eval", {"Inference": np.array([[0, 1, 4], [2, 3, 4]], np.int64),
                                   "Label": np.array([[0, 1, 4], [2, 2, 4]], np.int64),
                                   "SeqLength": np.array([3, 2], np.int64)},
                    {"num_chunk_types": 2, "chunk_scheme": "IOB"})
    assert int(np.asarray(padded["NumCorrectChunks"]).reshape(-1)[0]) == 1
    assert int(np.asarray(padded["NumLabelChunks"]).reshape(-1)[0]) == 3
    with pytest.raises(ExecutionError, match="out of range"):
        run_op("chunk_eval", {"Inference": lod_t(infer + 9, lens),
                              "Label": lod_t(label, lens)},
               {"num_chunk_types": 2, "chunk_scheme": "IOB"})
