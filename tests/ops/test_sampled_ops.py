"""nce and hierarchical_sigmoid against numpy references, numeric gradients, the samplers'
distributions, and the sparse (SelectedRows) table gradients."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.errors import ExecutionError
from fluidity.ops.sampled import alias_tables
from op_test import check_grad, check_output, run_op

rng = np.random.default_rng(5)
N, D, C = 4, 3, 6


def sig(z):
    return 1 / (1 + np.exp(-z))


def nce_ref(x, lab, w, b, negs, prob, k):
    cost = np.zeros((len(x), 1))
    for i in range(len(x)):
        labels = list(lab[i]) + list(negs)
        for j, l in enumerate(labels):
            o = sig(x[i] @ w[l] + b[l, 0])
            q = prob[l] * k
            cost[i] += -np.log(o / (o + q)) if j < lab.shape[1] else -np.log(q / (o + q))
    return cost


def nce_inputs():
    return {"Input": rng.normal(size=(N, D)), "Label": rng.integers(0, C, (N, 1)),
            "Weight": rng.normal(size=(C, D)), "Bias": rng.normal(size=(C, 1))}


def test_nce_custom_neg_classes_uniform():
    ins = nce_inputs()
    attrs = {"num_total_classes": C, "num_neg_samples": 2, "custom_neg_classes": [1, 4]}
    want = nce_ref(ins["Input"], ins["Label"], ins["Weight"], ins["Bias"], [1, 4],
                   np.full(C, 1.0 / C), 2)
    out = check_output("nce", ins, {"Cost": want}, attrs,
                       outputs=["Cost", "SampleLogits", "SampleLabels"])
    np.testing.assert_array_equal(np.asarray(out["SampleLabels"])[:, 1:], [[1, 4]] * N)
    check_grad("nce", ins, ["Input", "Weight", "Bias"], attrs)


def test_nce_log_uniform_and_sample_weight():
    ins = nce_inputs()
    ins["SampleWeight"] = rng.uniform(0.5, 2, size=(N, 1))
    attrs = {"num_total_classes": C, "num_neg_samples": 3, "custom_neg_classes": [0, 2, 5],
             "sampler": 1}
    k = np.arange(C)
    prob = np.log((k + 2) / (k + 1)) / np.log(C)   # Fluid's: ln n over [0, n - 1)
    want = nce_ref(ins["Input"], ins["Label"], ins["Weight"], ins["Bias"], [0, 2, 5], prob,
                   3) * ins["SampleWeight"]
    check_output("nce", ins, {"Cost": want}, attrs)
    check_grad("nce", ins, ["Input", "Weight"], attrs)


def test_nce_sampled_negatives_repeat_with_a_seed_and_cover_the_classes():
    ins = nce_inputs()
    attrs = {"num_total_classes": C, "num_neg_samples": 50, "seed": 7}
    a = np.asarray(run_op("nce", ins, attrs, ["Cost", "SampleLabels"])["SampleLabels"])
    b = np.asarray(run_op("nce", ins, attrs, ["Cost", "SampleLabels"])["SampleLabels"])
    np.testing.assert_array_equal(a, b)
    assert set(a[:, 1:].ravel()) == set(range(C))
    check_grad("nce", ins, ["Input", "Weight", "Bias"], attrs)


def test_nce_custom_dist_sampler():
    probs = np.array([0.5, 0.0, 0.1, 0.1, 0.3, 0.0])
    alias, alias_p = alias_tables(probs)
    ins = nce_inputs()
    ins.update({"CustomDistProbs": probs.astype(np.float32),
                "CustomDistAlias": alias, "CustomDistAliasProbs": alias_p.astype(np.float32)})
    attrs = {"num_total_classes": C, "num_neg_samples": 400, "sampler": 2, "seed": 3}
    labels = np.asarray(run_op("nce", ins, attrs, ["Cost", "SampleLabels"])["SampleLabels"])
    freq = np.bincount(labels[:, 1:].ravel(), minlength=C) / labels[:, 1:].size
    np.testing.assert_allclose(freq, probs, atol=0.05)
    assert freq[1] == 0 and freq[5] == 0


def test_nce_errors():
    ins = nce_inputs()
    with pytest.raises(ExecutionError, match="custom_neg_classes"):
        run_op("nce", ins, {"num_total_classes": C, "num_neg_samples": 3,
                            "custom_neg_classes": [1]})
    ins["Label"] = ins["Label"] + C
    with pytest.raises(ExecutionError, match="out of range"):
        run_op("nce", ins, {"num_total_classes": C, "custom_neg_classes": [0] * 10})


# --- hierarchical_sigmoid ------------------------------------------------------------------
def default_path(label, num_classes):
    c = label + num_classes
    idx, bits = [], []
    while c > 1:
        idx.append(c // 2 - 1)
        bits.append(c & 1)
        c //= 2
    return idx, bits


def hsig_ref(x, w, b, paths, width):
    out = np.zeros((len(x), 1))
    for i, (idx, bits) in enumerate(paths):
        z = np.array([x[i] @ w[j] + b[j, 0] for j in idx])
        out[i] = np.sum(np.log1p(np.exp(z)) - np.array(bits) * z) + \
            (width - len(idx)) * np.log(2.0)
    return out


@pytest.mark.parametrize("num_classes", [6, 8])
def test_hsigmoid_default_tree(num_classes):
    x, lab = rng.normal(size=(N, D)), rng.integers(0, num_classes, (N, 1))
    w, b = rng.normal(size=(num_classes - 1, D)), rng.normal(size=(num_classes - 1, 1))
    ins = {"X": x, "W": w, "Label": lab, "Bias": b}
    paths = [default_path(int(v), num_classes) for v in lab[:, 0]]
    width = (num_classes - 1).bit_length()
    attrs = {"num_classes": num_classes}
    check_output("hierarchical_sigmoid", ins, {"Out": hsig_ref(x, w, b, paths, width)}, attrs)
    check_grad("hierarchical_sigmoid", ins, ["X", "W", "Bias"], attrs)


def test_hsigmoid_custom_tree():
    x, lab = rng.normal(size=(N, D)), rng.integers(0, C, (N, 1))
    w, b = rng.normal(size=(C, D)), rng.normal(size=(C, 1))
    table = np.array([[0, 2, -1], [1, 3, 5], [0, -1, -1], [4, 2, 1]], np.int64)
    code = np.array([[1, 0, 0], [0, 1, 1], [1, 0, 0], [0, 0, 1]], np.int64)
    ins = {"X": x, "W": w, "Label": lab, "PathTable": table, "PathCode": code, "Bias": b}
    paths = []
    for t, c in zip(table, code):
        n = int(np.argmax(t < 0)) if (t < 0).any() else len(t)
        paths.append((list(t[:n]), list(c[:n])))
    attrs = {"num_classes": C}
    check_output("hierarchical_sigmoid", ins, {"Out": hsig_ref(x, w, b, paths, 3)}, attrs)
    check_grad("hierarchical_sigmoid", ins, ["X", "W", "Bias"], attrs)


def _table_grads(layer_fn, is_sparse, feed):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [D])
        lab = fluid.layers.data("lab", [1], dtype="int64")
        loss = fluid.layers.mean(layer_fn(x, lab, is_sparse))
        w = [p for p in main.global_block().all_parameters() if p.name.endswith(".w_0")][0]
        g, = fluid.gradients([loss], [w])
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    return exe.run(main, feed=feed, fetch_list=[g], scope=scope, return_numpy=False)[0]


@pytest.mark.parametrize("layer_fn", [
    lambda x, lab, s: fluid.layers.nce(x, lab, C, num_neg_samples=3, seed=2, is_sparse=s),
    lambda x, lab, s: fluid.layers.hsigmoid(x, lab, C, is_sparse=s),
])
def test_sparse_table_gradient_matches_dense(layer_fn):
    feed = {"x": rng.normal(size=(N, D)).astype(np.float32),
            "lab": rng.integers(0, C, (N, 1)).astype(np.int64)}
    dense = np.asarray(_table_grads(layer_fn, False, feed))
    sparse = _table_grads(layer_fn, True, feed)
    assert isinstance(sparse, fluid.SelectedRows)
    np.testing.assert_allclose(sparse.to_dense(), dense, rtol=1e-5, atol=1e-6)


# --- nce's arithmetic as Fluid 1.8's kernel does it ------------------------------------------
def _fluid_nce_cost(x, w, b, sw, labels, nt, q32):
    """One scalar at a time in x's dtype, as Fluid's loop: o = float(sigmoid in double of
    float(b + x.w)); cost_i += w_i * -log(...), q a float32 even for a float64 op."""
    dt = x.dtype.type
    out = np.zeros((len(x), 1), x.dtype)
    for i in range(len(x)):
        for j, l in enumerate(labels[i]):
            z = dt(b[l, 0] + dt(np.dot(x[i], w[l])))
            o = dt(1.0 / (1.0 + np.exp(-np.float64(z))))
            q = dt(q32[j])
            r = dt(o / dt(o + q)) if j < nt else dt(q / dt(o + q))
            out[i, 0] = dt(out[i, 0] + dt(dt(sw[i]) * dt(-np.log(r))))
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nce_cost_rounds_as_fluids_kernel(dtype):
    """float32: the cost summed label by label in float32 (a float64 sum rounded once differs
    in the last bits, enough to move a float32 finite-difference check by percents); float64:
    k P(l) is Fluid's float32 (k / n in double would differ by ~1e-9 relative)."""
    n, k, negs = 100, 5, [0, 1, 2, 3, 4]
    # one input column: each logit is one product and one sum, the same in any order
    x, w = rng.normal(size=(40, 1)).astype(dtype), rng.normal(size=(n, 1)).astype(dtype)
    b, sw = rng.normal(size=(n, 1)).astype(dtype), rng.normal(size=(40, 1)).astype(dtype)
    lab = rng.integers(0, n, (40, 2))
    ins = {"Input": x, "Label": lab, "Weight": w, "Bias": b, "SampleWeight": sw}
    attrs = {"num_total_classes": n, "num_neg_samples": k, "custom_neg_classes": negs}
    got = np.asarray(run_op("nce", ins, attrs, ["Cost", "SampleLogits", "SampleLabels"])["Cost"])
    labels = np.concatenate([lab, np.tile(negs, (40, 1))], 1)
    q32 = np.full(labels.shape[1], np.float32(1.0 / n) * np.float32(k), np.float32)
    want = _fluid_nce_cost(x, w, b, sw.reshape(-1), labels, 2, q32)
    # Fluid's order gives the loop's numbers bit for bit (a float64 sum rounded once differs
    # in ~40% of them); a libm's exp or log may round a rare one an ulp the other way
    np.testing.assert_array_max_ulp(got, want, maxulp=1)
    assert (got != want).mean() <= 0.05
    tol = 2 * np.finfo(dtype).eps * np.abs(want).max()
    if dtype == np.float64:
        q64 = np.full(labels.shape[1], k / n)
        other = _fluid_nce_cost(x, w, b, sw.reshape(-1), labels, 2, q64)
        assert np.abs(other - want).max() > 100 * tol


def test_nce_log_uniform_sampler_is_fluids():
    """Fluid's log-uniform sampler: classes in [0, n - 1) (floor(exp(u ln n)) - 1 mod n - 1),
    drawn with P(v) = ln((v + 2) / (v + 1)) / ln n, which sums to 1 over them."""
    n = 8
    ins = nce_inputs()
    ins["Label"] = rng.integers(0, n, (N, 1))
    ins["Weight"], ins["Bias"] = rng.normal(size=(n, D)), rng.normal(size=(n, 1))
    attrs = {"num_total_classes": n, "num_neg_samples": 2000, "sampler": 1, "seed": 11}
    lab = np.asarray(run_op("nce", ins, attrs, ["Cost", "SampleLabels"])["SampleLabels"])
    v = np.arange(n - 1)
    p = np.log((v + 2.0) / (v + 1.0)) / np.log(n)
    assert abs(p.sum() - 1) < 1e-12 and lab[:, 1:].max() < n - 1
    freq = np.bincount(lab[:, 1:].ravel(), minlength=n - 1) / lab[:, 1:].size
    np.testing.assert_allclose(freq, p, atol=0.02)   # 8000 draws: 4 standard errors


def test_nce_custom_dist_alias_minus_one_keeps_the_class():
    """An alias of -1 means the class itself (Fluid's CustomSampler), whatever the draw."""
    alias = np.array([-1, -1, 0], np.int32)
    alias_p = np.array([0.0, 0.0, 0.0], np.float32)   # every draw past the alias probability
    ins = nce_inputs()
    ins.update({"Label": rng.integers(0, 3, (N, 1)), "Weight": rng.normal(size=(3, D)),
                "Bias": rng.normal(size=(3, 1)),
                "CustomDistProbs": np.full(3, 1 / 3, np.float32), "CustomDistAlias": alias,
                "CustomDistAliasProbs": alias_p})
    attrs = {"num_total_classes": 3, "num_neg_samples": 300, "sampler": 2, "seed": 3}
    lab = np.asarray(run_op("nce", ins, attrs, ["Cost", "SampleLabels"])["SampleLabels"])
    assert set(lab[:, 1:].ravel()) == {0, 1}    # class 2 always goes to its alias 0
    ins["CustomDistAlias"] = np.array([-1, 5, 0], np.int32)
    with pytest.raises(ExecutionError, match="CustomDistAlias holds 5"):
        run_op("nce", ins, attrs, ["Cost", "SampleLabels"])
