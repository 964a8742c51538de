"""sample_logits (the sampler of sampled_softmax_with_cross_entropy): with customized samples
against a numpy reference and its numeric gradient; drawn samples (unique, log-uniform,
probabilities adjusted for unique sampling, repeatable with a seed); accidental hits."""
import numpy as np
import pytest

from fluidity.errors import ExecutionError
from op_test import check_grad, check_output, run_op

rng = np.random.default_rng(15)
OUTS = ["Samples", "Probabilities", "LogitsDim", "LabelsDim", "SampledLogits", "SampledLabels"]


def test_customized_samples_forward_and_gradient():
    n, k, nt, s = 3, 7, 2, 3
    logits = rng.normal(size=(n, k))
    labels = np.array([[0, 3], [1, 2], [6, 5]], np.int64)
    negs = np.array([[4, 3, 5], [0, 1, 6], [2, 3, 4]], np.int64)   # row 0 hits label 3, row 1 hits 1
    samples = np.concatenate([labels, negs], axis=1)
    probs = rng.uniform(0.1, 0.9, size=(n, nt + s))
    attrs = {"num_samples": s, "use_customized_samples": True}
    want = np.take_along_axis(logits, samples, axis=1) - np.log(probs)
    for i in range(n):
        for j in range(nt, nt + s):
            if samples[i, j] in samples[i, :nt]:
                want[i, j] -= 1e20
    ins = {"Logits": logits, "Labels": labels, "CustomizedSamples": samples,
           "CustomizedProbabilities": probs}
    got = check_output("sample_logits", ins, {"SampledLogits": want, "Samples": samples,
                                              "Probabilities": probs,
                                              "SampledLabels": np.tile([0, 1], (n, 1))},
                       attrs, outputs=OUTS)
    assert got["SampledLogits"][0, 3] < -1e19
    check_grad("sample_logits", ins, ["Logits"], dict(attrs, remove_accidental_hits=False),
               output_slots=["SampledLogits"])


def test_drawn_samples_are_unique_log_uniform_and_repeatable():
    n, k, s = 2, 50, 20
    logits = rng.normal(size=(n, k))
    labels = np.array([[3], [7]], np.int64)
    attrs = {"num_samples": s, "seed": 7}
    a = run_op("sample_logits", {"Logits": logits, "Labels": labels}, attrs, outputs=OUTS)
    b = run_op("sample_logits", {"Logits": logits, "Labels": labels}, attrs, outputs=OUTS)
    np.testing.assert_array_equal(a["Samples"], b["Samples"])        # seeded: the same draw
    smp = a["Samples"]
    assert smp.shape == (n, 1 + s) and (smp[:, 0] == labels[:, 0]).all()
    assert len(set(smp[0, 1:])) == s and (smp[0, 1:] == smp[1, 1:]).all()   # shared, unique
    p = np.log((smp + 2.0) / (smp + 1.0)) / np.log(k + 1.0)
    q = a["Probabilities"]
    # unique sampling: q = 1 - (1 - p)^tries for the number of draws it took (p * s had
    # the first s draws been distinct; 20 of 50 log-uniform classes never are)
    tries = np.log1p(-q) / np.log1p(-p)
    np.testing.assert_allclose(tries, tries[0, 0], rtol=1e-6)
    assert tries[0, 0] > s and abs(tries[0, 0] - round(tries[0, 0])) < 1e-6
    hit = (smp[:, 1:, None] == smp[:, None, :1]).any(2)
    want = np.take_along_axis(logits, smp, axis=1) - np.log(q)
    want[:, 1:][hit] -= 1e20
    np.testing.assert_allclose(a["SampledLogits"], want, rtol=1e-12)


def test_log_uniform_frequencies():
    k, s, trials = 20, 1, 4000
    attrs = {"num_samples": s, "uniq": False, "remove_accidental_hits": False}
    logits, labels = np.zeros((1, k)), np.zeros((1, 1), np.int64)
    counts = np.zeros(k)
    out = run_op("sample_logits", {"Logits": logits, "Labels": labels},
                 dict(attrs, num_samples=trials), outputs=OUTS)
    np.add.at(counts, out["Samples"][0, 1:], 1)
    p = np.log((np.arange(k) + 2.0) / (np.arange(k) + 1.0)) / np.log(k + 1.0)
    # binomial standard error per class; 5 sigma
    assert (np.abs(counts / trials - p) < 5 * np.sqrt(p * (1 - p) / trials)).all()


def test_bad_input():
    logits, labels = rng.normal(size=(2, 5)), np.array([[1], [9]], np.int64)
    with pytest.raises(ExecutionError, match="outside"):
        run_op("sample_logits", {"Logits": logits, "Labels": labels}, {"num_samples": 2},
               outputs=OUTS)
    with pytest.raises(ExecutionError, match="distinct"):
        run_op("sample_logits", {"Logits": logits, "Labels": labels[:, :1] * 0},
               {"num_samples": 9}, outputs=OUTS)
