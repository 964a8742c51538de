import numpy as np
import pytest

import fluidity as fluid
from fluidity.backward import append_backward
from fluidity.errors import ExecutionError, FluidityError, ShapeError
from op_test import build_op, check_grad, check_output, run_op

rng = np.random.default_rng(0)
IGNORE = -100


def probs(*shape):
    """Rows of probabilities kept away from 0 and 1."""
    p = rng.uniform(0.5, 2.0, size=shape)
    return (p / p.sum(-1, keepdims=True)).astype(np.float32)


def ids(n, depth, ignore_row=None):
    lab = rng.integers(0, depth, size=(n, 1)).astype(np.int64)
    if ignore_row is not None:
        lab[ignore_row] = IGNORE
    return lab


def np_log_softmax(x, axis=-1):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def np_hard_ce(logp, label, axis=-1, ignore=IGNORE):
    safe = np.where(label == ignore, 0, label)
    return np.where(label == ignore, 0, -np.take_along_axis(logp, safe, axis))


# --- cross_entropy / cross_entropy2 ---------------------------------------------------------
def test_cross_entropy_hard_with_ignore():
    x, lab = probs(5, 4), ids(5, 4, ignore_row=2)
    want = np_hard_ce(np.log(x), lab)
    check_output("cross_entropy", {"X": x, "Label": lab}, {"Y": want})
    check_grad("cross_entropy", {"X": x, "Label": lab}, ["X"])


def test_cross_entropy_soft():
    x, lab = probs(4, 6), probs(4, 6)
    want = -(lab * np.log(x)).sum(-1, keepdims=True)
    check_output("cross_entropy", {"X": x, "Label": lab}, {"Y": want}, {"soft_label": True})
    check_grad("cross_entropy", {"X": x, "Label": lab}, ["X"], {"soft_label": True})


def test_cross_entropy_rank3_and_zero_prob():
    x = probs(2, 3, 4)
    lab = rng.integers(0, 4, size=(2, 3, 1)).astype(np.int64)
    check_output("cross_entropy", {"X": x, "Label": lab},
                 {"Y": np_hard_ce(np.log(x), lab)})
    # log(0) is Paddle's tolerable -1e20, not inf
    y = run_op("cross_entropy", {"X": np.array([[0.0, 1.0]], np.float32),
                                 "Label": np.array([[0]], np.int64)})["Y"]
    assert np.isfinite(y).all() and y[0, 0] == pytest.approx(1e20, rel=1e-6)


def test_cross_entropy2():
    x, lab = probs(6, 5), ids(6, 5, ignore_row=0)
    out = check_output("cross_entropy2", {"X": x, "Label": lab},
                       {"Y": np_hard_ce(np.log(x), lab)})
    assert "MatchX" not in out
    got = run_op("cross_entropy2", {"X": x, "Label": lab})
    np.testing.assert_allclose(got["MatchX"][1:], np.take_along_axis(x[1:], lab[1:], -1))
    assert got["XShape"].shape == (0,)    # empty: fetched as [0] (Fluid 1.8)
    check_grad("cross_entropy2", {"X": x, "Label": lab}, ["X"], output_slots=["Y"])


# --- softmax_with_cross_entropy -------------------------------------------------------------
@pytest.mark.parametrize("stable", [True, False])
def test_softmax_with_cross_entropy_hard(stable):
    x, lab = rng.normal(size=(6, 5)).astype(np.float32), ids(6, 5, ignore_row=3)
    logp = np_log_softmax(x)
    check_output("softmax_with_cross_entropy", {"Logits": x, "Label": lab},
                 {"Softmax": np.exp(logp), "Loss": np_hard_ce(logp, lab)},
                 {"numeric_stable_mode": stable})
    check_grad("softmax_with_cross_entropy", {"Logits": x, "Label": lab}, ["Logits"])


def test_softmax_with_cross_entropy_soft():
    x, lab = rng.normal(size=(4, 7)).astype(np.float32), probs(4, 7)
    want = -(lab * np_log_softmax(x)).sum(-1, keepdims=True)
    attrs = {"soft_label": True}
    check_output("softmax_with_cross_entropy", {"Logits": x, "Label": lab}, {"Loss": want},
                 attrs)
    check_grad("softmax_with_cross_entropy", {"Logits": x, "Label": lab}, ["Logits"], attrs)


def test_softmax_with_cross_entropy_axis():
    x = rng.normal(size=(2, 4, 3)).astype(np.float32)
    lab = rng.integers(0, 4, size=(2, 1, 3)).astype(np.int64)
    lab[1, 0, 2] = IGNORE
    logp = np_log_softmax(x, 1)
    attrs = {"axis": 1}
    check_output("softmax_with_cross_entropy", {"Logits": x, "Label": lab},
                 {"Softmax": np.exp(logp), "Loss": np_hard_ce(logp, lab, 1)}, attrs)
    check_grad("softmax_with_cross_entropy", {"Logits": x, "Label": lab}, ["Logits"], attrs)
    soft = probs(2, 3, 4).transpose(0, 2, 1)
    check_grad("softmax_with_cross_entropy", {"Logits": x, "Label": soft}, ["Logits"],
               {"axis": 1, "soft_label": True})


def test_softmax_with_cross_entropy_large_logits_are_stable():
    x = np.array([[1000.0, 0.0, -1000.0], [-5000.0, 5000.0, 0.0]], np.float32)
    lab = np.array([[0], [0]], np.int64)
    got = run_op("softmax_with_cross_entropy", {"Logits": x, "Label": lab})
    np.testing.assert_allclose(got["Loss"], [[0.0], [10000.0]], rtol=1e-6)
    np.testing.assert_allclose(got["Softmax"], [[1, 0, 0], [0, 1, 0]], atol=1e-6)


def test_softmax_with_cross_entropy_on_probabilities():
    p, lab = probs(4, 3), ids(4, 3, ignore_row=1)
    attrs = {"use_softmax": False}
    check_output("softmax_with_cross_entropy", {"Logits": p, "Label": lab},
                 {"Softmax": p, "Loss": np_hard_ce(np.log(p), lab)}, attrs)
    check_grad("softmax_with_cross_entropy", {"Logits": p, "Label": lab}, ["Logits"], attrs)


# --- sigmoid_cross_entropy_with_logits ------------------------------------------------------
@pytest.mark.parametrize("normalize", [False, True])
def test_sigmoid_cross_entropy_with_logits(normalize):
    x = rng.normal(scale=3, size=(4, 5)).astype(np.float32)
    lab = rng.uniform(0.1, 0.9, size=(4, 5)).astype(np.float32)
    lab[0, 1] = lab[2, 3] = IGNORE
    sig = 1 / (1 + np.exp(-x.astype(np.float64)))
    want = -(lab * np.log(sig) + (1 - lab) * np.log(1 - sig))
    want[lab == IGNORE] = 0
    if normalize:
        want /= (lab != IGNORE).sum()
    attrs = {"normalize": normalize}
    check_output("sigmoid_cross_entropy_with_logits", {"X": x, "Label": lab}, {"Out": want},
                 attrs)
    check_grad("sigmoid_cross_entropy_with_logits", {"X": x, "Label": lab}, ["X"], attrs)


def test_sigmoid_cross_entropy_with_logits_extreme():
    x = np.array([[-200.0, 200.0, 0.0]], np.float32)
    lab = np.array([[0.0, 1.0, 1.0]], np.float32)
    out = run_op("sigmoid_cross_entropy_with_logits", {"X": x, "Label": lab})["Out"]
    np.testing.assert_allclose(out, [[0.0, 0.0, np.log(2)]], atol=1e-6)


# --- regression losses ----------------------------------------------------------------------
def test_huber_loss():
    x = rng.normal(size=(6, 1)).astype(np.float32)
    r = np.array([0.1, -0.3, 1.7, -2.2, 0.95, -1.3], np.float32).reshape(6, 1)
    y = x + r
    delta = 1.0
    want = np.where(np.abs(r) <= delta, 0.5 * r * r, delta * (np.abs(r) - 0.5 * delta))
    check_output("huber_loss", {"X": x, "Y": y}, {"Out": want, "Residual": r},
                 {"delta": delta})
    check_grad("huber_loss", {"X": x, "Y": y}, ["X", "Y"], {"delta": delta})


@pytest.mark.parametrize("weights", [False, True])
def test_smooth_l1_loss(weights):
    x = rng.normal(size=(4, 3, 2)).astype(np.float32)
    y = rng.normal(size=(4, 3, 2)).astype(np.float32)
    sigma = 2.0
    ins = {"X": x, "Y": y}
    d = x - y
    if weights:
        iw = rng.uniform(0.5, 1.5, size=x.shape).astype(np.float32)
        ow = rng.uniform(0.5, 1.5, size=x.shape).astype(np.float32)
        ins.update(InsideWeight=iw, OutsideWeight=ow)
        d = d * iw
    s2 = sigma * sigma
    val = np.where(np.abs(d) < 1 / s2, 0.5 * s2 * d * d, np.abs(d) - 0.5 / s2)
    if weights:
        val = val * ow
    want = val.reshape(4, -1).sum(1, keepdims=True)
    check_output("smooth_l1_loss", ins, {"Out": want, "Diff": d}, {"sigma": sigma})
    check_grad("smooth_l1_loss", ins, ["X", "Y"], {"sigma": sigma})


def test_log_loss():
    p = rng.uniform(0.1, 0.9, size=(5, 1)).astype(np.float32)
    lab = rng.integers(0, 2, size=(5, 1)).astype(np.float32)
    eps = 1e-4
    want = -lab * np.log(p + eps) - (1 - lab) * np.log(1 - p + eps)
    check_output("log_loss", {"Predicted": p, "Labels": lab}, {"Loss": want},
                 {"epsilon": eps})
    check_grad("log_loss", {"Predicted": p, "Labels": lab}, ["Predicted"], {"epsilon": eps})


def test_bce_loss():
    x = rng.uniform(0.1, 0.9, size=(3, 4)).astype(np.float32)
    lab = rng.uniform(0, 1, size=(3, 4)).astype(np.float32)
    want = -(lab * np.log(x) + (1 - lab) * np.log(1 - x))
    check_output("bce_loss", {"X": x, "Label": lab}, {"Out": want})
    check_grad("bce_loss", {"X": x, "Label": lab}, ["X"])
    edge = run_op("bce_loss", {"X": np.array([[0.0, 1.0]], np.float32),
                               "Label": np.array([[1.0, 0.0]], np.float32)})["Out"]
    np.testing.assert_allclose(edge, [[100.0, 100.0]])


# --- bad input ------------------------------------------------------------------------------
@pytest.mark.parametrize("op,inputs,attrs", [
    ("cross_entropy", {"X": probs(4, 3), "Label": ids(5, 3)[:, :1].reshape(5)}, {}),
    ("cross_entropy", {"X": probs(4, 3), "Label": ids(4, 3).repeat(2, 1)}, {}),
    ("cross_entropy", {"X": probs(4, 3), "Label": probs(4, 2)}, {"soft_label": True}),
    ("softmax_with_cross_entropy", {"Logits": probs(4, 3), "Label": ids(3, 3)}, {}),
    ("softmax_with_cross_entropy", {"Logits": probs(4, 3), "Label": ids(4, 3)},
     {"axis": 2}),
    ("softmax_with_cross_entropy", {"Logits": probs(4, 3, 2), "Label": ids(4, 2)[:, None]},
     {"axis": 1, "numeric_stable_mode": False}),
    ("sigmoid_cross_entropy_with_logits", {"X": probs(4, 3), "Label": probs(4, 2)}, {}),
    ("huber_loss", {"X": probs(4, 1), "Y": probs(3, 1)}, {}),
    ("log_loss", {"Predicted": probs(4, 2), "Labels": probs(4, 2)}, {}),
])
def test_bad_shapes_fail_at_build_time(op, inputs, attrs):
    with pytest.raises(ShapeError, match=f"'{op}'"):
        build_op(op, inputs, attrs)


@pytest.mark.parametrize("op,slot", [("cross_entropy", "X"), ("cross_entropy2", "X"),
                                     ("softmax_with_cross_entropy", "Logits")])
def test_float_hard_labels_build_and_fail_at_run_time(op, slot):
    """Fluid builds a program with float hard labels (a program saved for inference only
    has them) and fails when the op runs: so does this, saying why."""
    inputs = {slot: probs(4, 3), "Label": probs(4, 1)}
    build_op(op, inputs, {})
    with pytest.raises(ExecutionError, match="integer class ids"):
        run_op(op, inputs)


@pytest.mark.parametrize("op,slot", [("cross_entropy", "X"), ("cross_entropy2", "X"),
                                     ("softmax_with_cross_entropy", "Logits")])
@pytest.mark.parametrize("bad", [3, -1])
def test_label_out_of_range_fails_at_run_time(op, slot, bad):
    lab = np.array([[0], [bad]], np.int64)
    with pytest.raises(ExecutionError, match=f"'{op}'.*label {bad} is out of range") as e:
        run_op(op, {slot: probs(2, 3), "Label": lab})
    assert isinstance(e.value, FluidityError) and e.value.op_type == op


def test_label_batch_mismatch_fails_at_run_time():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        logits = fluid.layers.data("logits", [3])
        label = fluid.layers.data("label", [1], dtype="int64")
        loss = fluid.layers.softmax_with_cross_entropy(logits, label)
    exe = fluid.Executor(fluid.CPUPlace())
    with pytest.raises(ExecutionError, match="'softmax_with_cross_entropy'.*Label has shape"):
        exe.run(main, feed={"logits": probs(4, 3), "label": ids(3, 3)}, fetch_list=[loss],
                scope=fluid.Scope())


# --- layers end to end ----------------------------------------------------------------------
def test_loss_layers_end_to_end():
    layers = fluid.layers
    main, startup = fluid.Program(), fluid.Program()
    n, d, c = 8, 5, 3
    with fluid.program_guard(main, startup):
        x = layers.data("x", [d])
        label = layers.data("label", [1], dtype="int64")
        target = layers.data("target", [1])
        logits = layers.fc(x, c)
        ce, sm = layers.softmax_with_cross_entropy(logits, label, return_softmax=True)
        ce2 = layers.cross_entropy(sm, label)
        soft = layers.cross_entropy(sm, sm, soft_label=True)
        pred = layers.fc(x, 1, act="sigmoid")
        sig = layers.sigmoid_cross_entropy_with_logits(logits, layers.softmax(logits))
        sq = layers.square_error_cost(pred, target)
        hub = layers.huber_loss(pred, target, delta=0.5)
        sl1 = layers.smooth_l1(pred, target)
        ll = layers.log_loss(pred, target)
        parts = [layers.mean(v) for v in (ce, sig, sq, hub, sl1, ll)]
        loss = parts[0]
        for p in parts[1:]:
            loss = layers.elementwise_add(loss, p)
        grads = append_backward(loss)
    assert ce.shape == (-1, 1) and sm.shape == (-1, c) and sl1.shape == (-1, 1)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    xv = rng.normal(size=(n, d)).astype(np.float32)
    lv = rng.integers(0, c, size=(n, 1)).astype(np.int64)
    tv = rng.uniform(0.1, 0.9, size=(n, 1)).astype(np.float32)
    fetch = [ce, sm, ce2, soft, sq, pred, loss] + [g for _, g in grads]
    res = exe.run(main, feed={"x": xv, "label": lv, "target": tv}, fetch_list=fetch,
                  scope=scope)
    ce_v, sm_v, ce2_v, soft_v, sq_v, pred_v, loss_v = res[:7]
    np.testing.assert_allclose(ce_v, np_hard_ce(np.log(sm_v), lv), rtol=1e-5)
    np.testing.assert_allclose(ce2_v, ce_v, rtol=1e-5)
    np.testing.assert_allclose(soft_v, -(sm_v * np.log(sm_v)).sum(-1, keepdims=True),
                               rtol=1e-5)
    np.testing.assert_allclose(sq_v, (pred_v - tv) ** 2, rtol=1e-5)
    assert np.isfinite(loss_v).all()
    assert len(grads) == 4 and all(np.isfinite(g).all() for g in res[7:])


def test_hinge_loss():
    rng = np.random.default_rng(7)
    x = rng.uniform(-2, 2, (8, 1))
    y = rng.integers(0, 2, (8, 1)).astype(np.float64)
    x[0, 0], y[0, 0] = 0.5, 1.0      # on the slope
    check_output("hinge_loss", {"Logits": x, "Labels": y},
                 {"Loss": np.maximum(0, 1 - x * (2 * y - 1))})
    x[np.abs(np.abs(x) - 1) < 1e-3] = 0.3   # no point at the kink for finite differences
    check_grad("hinge_loss", {"Logits": x, "Labels": y}, ["Logits"])
    with pytest.raises(ShapeError, match="batch_size, 1"):
        run_op("hinge_loss", {"Logits": np.zeros((2, 2)), "Labels": np.zeros((2, 2))})
