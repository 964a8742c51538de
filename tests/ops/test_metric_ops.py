import numpy as np
import pytest

import fluidity as fluid
from fluidity.errors import ExecutionError, ShapeError
from op_test import build_op, check_grad, check_output, run_op

rng = np.random.default_rng(0)


def np_topk(x, k, axis=-1, largest=True):
    idx = np.take(np.argsort(-x if largest else x, axis=axis, kind="stable"), np.arange(k),
                  axis=axis)
    return np.take_along_axis(x, idx, axis), idx.astype(np.int64)


def roc_auc(scores, labels):
    """ROC AUC by sorting (Mann-Whitney U; tied scores count one half)."""
    pos = np.asarray(labels).reshape(-1) != 0
    _, inv, cnt = np.unique(np.asarray(scores).reshape(-1), return_inverse=True,
                            return_counts=True)
    ranks = (np.cumsum(cnt) - (cnt - 1) / 2.0)[inv]   # 1-based, ties averaged
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return (ranks[pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)


# --- top_k -----------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,k", [((4, 6), 1), ((4, 6), 3), ((4, 6), 6), ((2, 3, 5), 2),
                                     ((7,), 4)])
def test_top_k(shape, k):
    x = rng.permutation(np.prod(shape)).reshape(shape).astype(np.float32)  # no ties
    out, idx = np_topk(x, k)
    check_output("top_k", {"X": x}, {"Out": out, "Indices": idx}, {"k": k})
    check_grad("top_k", {"X": x}, ["X"], {"k": k}, output_slots=["Out"])


def test_top_k_ties_keep_lower_index_first():
    x = np.array([[1.0, 3.0, 3.0, 2.0, 3.0]], np.float32)
    check_output("top_k", {"X": x}, {"Out": [[3.0, 3.0, 3.0, 2.0]],
                                     "Indices": np.array([[1, 2, 4, 3]], np.int64)}, {"k": 4})


def test_top_k_k_from_tensor():
    x = rng.normal(size=(3, 5)).astype(np.float32)
    out, idx = np_topk(x, 2)
    got = check_output("top_k", {"X": x, "K": np.array([2], np.int32)},
                       {"Out": out, "Indices": idx}, {"k": 4})
    assert got["Out"].shape == (3, 2)


@pytest.mark.parametrize("axis,largest,k", [(0, True, 2), (1, False, 3), (-1, True, 4),
                                            (1, True, 1)])
def test_top_k_v2(axis, largest, k):
    x = rng.permutation(60).reshape(3, 4, 5).astype(np.float32)
    out, idx = np_topk(x, k, axis, largest)
    attrs = {"k": k, "axis": axis, "largest": largest}
    check_output("top_k_v2", {"X": x}, {"Out": out, "Indices": idx}, attrs)
    check_grad("top_k_v2", {"X": x}, ["X"], attrs, output_slots=["Out"])


def test_top_k_bad_k():
    x = rng.normal(size=(3, 5)).astype(np.float32)
    with pytest.raises(ShapeError, match="'top_k'.*k=6"):
        build_op("top_k", {"X": x}, {"k": 6})
    with pytest.raises(ShapeError, match="'top_k_v2'.*axis 2"):
        build_op("top_k_v2", {"X": x}, {"k": 1, "axis": 2})
    with pytest.raises(ExecutionError, match="'top_k'.*k=9"):
        run_op("top_k", {"X": x, "K": np.array([9], np.int32)})


# --- accuracy --------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [1, 2, 5])
def test_accuracy(k):
    n, c = 10, 5
    scores = rng.normal(size=(n, c)).astype(np.float32)
    label = rng.integers(0, c, size=(n, 1)).astype(np.int64)
    out, idx = np_topk(scores, k)
    correct = int((idx == label).any(axis=1).sum())
    check_output("accuracy", {"Out": out, "Indices": idx, "Label": label},
                 {"Accuracy": np.array([correct / n], np.float32),     # [1], as Fluid 1.x
                  "Correct": np.array([correct], np.int32),
                  "Total": np.array([n], np.int32)})
    if k == c:
        assert correct == n


def test_accuracy_bad_label():
    idx = np.zeros((4, 2), np.int64)
    with pytest.raises(ShapeError, match="'accuracy'.*rows"):
        build_op("accuracy", {"Out": idx.astype(np.float32), "Indices": idx,
                              "Label": np.zeros((3, 1), np.int64)})
    with pytest.raises(ShapeError, match="'accuracy'.*Label must be"):
        build_op("accuracy", {"Out": idx.astype(np.float32), "Indices": idx,
                              "Label": np.zeros((4, 2), np.int64)})


# --- auc -------------------------------------------------------------------------------------
def _auc_inputs(n, nt, steps, width=2):
    p = rng.uniform(0, 1, size=n)
    label = (rng.uniform(0, 1, size=n) < 0.3 + 0.4 * p).astype(np.int64).reshape(n, 1)
    predict = (np.stack([1 - p, p], 1) if width == 2 else p.reshape(n, 1)).astype(np.float32)
    size = [(1 + steps) * (nt + 1) + 1] if steps else [1, nt + 1]
    zeros = np.zeros(size, np.int64)
    return {"Predict": predict, "Label": label, "StatPos": zeros, "StatNeg": zeros.copy()}


@pytest.mark.parametrize("width", [1, 2])
@pytest.mark.parametrize("steps", [0, 1, 3])
def test_auc_one_batch(width, steps):
    nt = 63
    ins = _auc_inputs(50, nt, steps, width)
    got = run_op("auc", ins, {"num_thresholds": nt, "slide_steps": steps})
    p = ins["Predict"][:, -1]
    bins = (p * np.float32(nt)).astype(np.int64)
    # the trapezoidal bucketed AUC is exactly the rank AUC of the bucket ids
    assert got["AUC"].dtype == np.float64 and got["AUC"].shape == (1,)
    np.testing.assert_allclose(got["AUC"], roc_auc(bins, ins["Label"]), rtol=1e-12)
    pos = np.bincount(bins[ins["Label"][:, 0] != 0], minlength=nt + 1)
    stat = got["StatPosOut"].reshape(-1)
    np.testing.assert_array_equal(stat[steps * (nt + 1):(steps + 1) * (nt + 1)], pos)
    if steps:
        assert stat[-1] == 1   # batch counter


def test_auc_degenerate():
    nt = 15
    ins = _auc_inputs(6, nt, 0)
    ins["Label"][:] = 1
    assert run_op("auc", ins, {"num_thresholds": nt, "slide_steps": 0})["AUC"] == 0.0
    ins = _auc_inputs(0, nt, 0)
    assert run_op("auc", ins, {"num_thresholds": nt, "slide_steps": 0})["AUC"] == 0.0


def test_auc_bad_input():
    ins = _auc_inputs(4, 15, 1)
    with pytest.raises(ShapeError, match="'auc'.*binary"):
        build_op("auc", {**ins, "Predict": np.zeros((4, 3), np.float32)},
                 {"num_thresholds": 15})
    with pytest.raises(ExecutionError, match="'auc'.*StatPos has"):
        run_op("auc", ins, {"num_thresholds": 31})
    ins["Predict"][0, 1] = 1.5
    with pytest.raises(ExecutionError, match="'auc'.*in \\[0, 1\\]"):
        run_op("auc", ins, {"num_thresholds": 15})


def test_streaming_auc_layer_over_batches():
    """Global AUC over all batches so far and sliding AUC over the last `slide_steps`
    batches, against a sort-based ROC AUC of the same data."""
    steps, nt = 2, 2 ** 12 - 1
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        predict = fluid.layers.data("predict", [2])
        label = fluid.layers.data("label", [1], dtype="int64")
        auc, batch_auc, states = fluid.layers.auc(predict, label, slide_steps=steps)
    assert all(s.persistable for s in states)
    assert [list(s.shape) for s in states] == [[(1 + steps) * (nt + 1) + 1]] * 2 + \
        [[1, nt + 1]] * 2
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    batches = [_auc_inputs(n, nt, 0) for n in (200, 150, 300, 250)]
    for i, b in enumerate(batches):
        g, s = exe.run(main, feed={"predict": b["Predict"], "label": b["Label"]},
                       fetch_list=[auc, batch_auc], scope=scope)
        seen = batches[:i + 1]
        window = batches[max(0, i + 1 - steps):i + 1]
        for got, bs in ((g, seen), (s, window)):
            scores = np.concatenate([x["Predict"][:, 1] for x in bs])
            labels = np.concatenate([x["Label"] for x in bs])
            assert got.shape == (1,) and abs(got[0] - roc_auc(scores, labels)) < 1e-3
    # re-running the startup program resets the state
    exe.run(startup, scope=scope)
    b = batches[0]
    g, = exe.run(main, feed={"predict": b["Predict"], "label": b["Label"]}, fetch_list=[auc],
                 scope=scope)
    assert abs(g - roc_auc(b["Predict"][:, 1], b["Label"])) < 1e-3


def test_accuracy_and_topk_layers():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [6])
        label = fluid.layers.data("label", [1], dtype="int64")
        prob = fluid.layers.softmax(fluid.layers.fc(x, 4))
        values, indices = fluid.layers.topk(prob, k=2)
        acc1 = fluid.layers.accuracy(prob, label)
        acc2 = fluid.layers.accuracy(prob, label, k=2)
    assert values.shape == (-1, 2) and acc1.shape == (1,)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    xv = rng.normal(size=(12, 6)).astype(np.float32)
    lv = rng.integers(0, 4, size=(12, 1)).astype(np.int64)
    p, v, i, a1, a2 = exe.run(main, feed={"x": xv, "label": lv},
                              fetch_list=[prob, values, indices, acc1, acc2], scope=scope)
    want_v, want_i = np_topk(p, 2)
    np.testing.assert_array_equal(i, want_i)
    np.testing.assert_allclose(v, want_v)
    np.testing.assert_allclose(a1, (want_i[:, :1] == lv).any(1).mean(), rtol=1e-6)
    np.testing.assert_allclose(a2, (want_i == lv).any(1).mean(), rtol=1e-6)
    assert a1.shape == a2.shape == (1,)
    # a batch whose label count disagrees with the predictions fails, naming the op
    with pytest.raises(ExecutionError, match="'accuracy'"):
        exe.run(main, feed={"x": xv, "label": lv[:5]}, fetch_list=[acc1], scope=scope)


def test_mean_iou():
    pred = np.array([0, 1, 1, 2, 2, 2], np.int32)
    label = np.array([0, 1, 2, 2, 2, 0], np.int32)
    got = run_op("mean_iou", {"Predictions": pred, "Labels": label}, {"num_classes": 3})
    assert got["OutCorrect"].tolist() == [1, 1, 2]
    assert got["OutWrong"].tolist() == [1, 1, 2]
    np.testing.assert_allclose(got["OutMeanIou"], [(1 / 2 + 1 / 2 + 2 / 4) / 3], rtol=1e-6)
