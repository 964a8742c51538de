"""Regularization and gradient clipping against numpy: a linear model whose gradients are
known in closed form (loss = mean(x @ w + b): dw = mean(x, 0), db = 1), sparse embeddings,
and the clipping ops themselves."""
import os
import sys

import numpy as np
import pytest

import fluidity as fluid
from fluidity import clip, layers, optimizer, regularizer
from fluidity.core.tensor import SelectedRows
from fluidity.errors import FluidityError
from fluidity.initializer import NumpyArrayInitializer

sys.path.insert(0, os.path.dirname(__file__))
from op_test import check_grad, check_output  # noqa: E402
from test_optimizers import OneOp  # noqa: E402

rng = np.random.default_rng(3)
X = rng.uniform(1.0, 3.0, size=(8, 4)).astype(np.float32)
GW = X.mean(0).reshape(4, 1).astype(np.float64)   # d loss / d w
GB = np.ones(1)                                     # d loss / d b
W0 = np.array([[0.5], [-1.0], [0.0], [2.0]], np.float32)  # a zero entry: sign(0) = 0
B0 = np.array([0.25], np.float32)
LR = 0.1


def linear_step(opt, w_attr=None, b_attr=None, before_minimize=None):
    """One SGD-family step on loss = mean(x @ w + b); returns (w, b)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = layers.data("x", [4])
        w_attr = w_attr or {}
        b_attr = b_attr or {}
        pred = layers.fc(x, 1, param_attr=fluid.ParamAttr(
            name="w", initializer=NumpyArrayInitializer(W0), **w_attr),
            bias_attr=fluid.ParamAttr(name="b", initializer=NumpyArrayInitializer(B0),
                                      **b_attr))
        loss = layers.mean(pred)
        if before_minimize:
            before_minimize(main)
        opt.minimize(loss)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    exe.run(main, feed={"x": X}, scope=scope)
    return np.array(scope.find_var("w").value), np.array(scope.find_var("b").value)


def assert_step(got, gw, gb):
    np.testing.assert_allclose(got[0], W0 - LR * gw, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], B0 - LR * gb, rtol=1e-5, atol=1e-6)


# --- regularization ---------------------------------------------------------------------
def test_l2_decay():
    got = linear_step(optimizer.SGD(LR, regularization=regularizer.L2Decay(0.5)))
    assert_step(got, GW + 0.5 * W0, GB + 0.5 * B0)


def test_l1_decay():
    got = linear_step(optimizer.SGD(LR, regularization=regularizer.L1DecayRegularizer(0.5)))
    assert_step(got, GW + 0.5 * np.sign(W0), GB + 0.5 * np.sign(B0))


def test_param_regularizer_overrides_optimizer():
    got = linear_step(optimizer.SGD(LR, regularization=regularizer.L2Decay(0.5)),
                      w_attr={"regularizer": regularizer.L1Decay(0.25)})
    assert_step(got, GW + 0.25 * np.sign(W0), GB + 0.5 * B0)


def test_param_regularizer_alone_and_with_momentum():
    got = linear_step(optimizer.Momentum(LR, 0.9),
                      b_attr={"regularizer": regularizer.L2DecayRegularizer(2.0)})
    assert_step(got, GW, GB + 2.0 * B0)   # first momentum step = plain SGD


def _sparse_table_step(is_sparse, reg=None, grad_clip=None, steps=1, opt=None):
    table = np.arange(24, dtype=np.float32).reshape(6, 4) / 10 - 1
    ids = np.array([[1], [4], [1], [1]], np.int64)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        i = layers.data("ids", [1], dtype="int64")
        emb = layers.embedding(i, [6, 4], is_sparse=is_sparse, param_attr=fluid.ParamAttr(
            name="emb", initializer=NumpyArrayInitializer(table)))
        loss = layers.mean(layers.square(emb))
        (opt or optimizer.SGD(LR, regularization=reg, grad_clip=grad_clip)).minimize(loss)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    for _ in range(steps):
        exe.run(main, feed={"ids": ids}, scope=scope)
    return table, np.array(scope.find_var("emb").value)


@pytest.mark.parametrize("reg", [regularizer.L2Decay(0.5), regularizer.L1Decay(0.5)],
                         ids=["l2", "l1"])
def test_sparse_decay_decays_the_whole_table_as_fluid(reg):
    """Fluid 1.x's default: the decay of every row joins the sparse gradient (a dense
    `emb@GRAD@NEWGRAD@` the update reads): the same step as with a dense gradient."""
    table, got = _sparse_table_step(True, reg)
    _, dense = _sparse_table_step(False, reg)
    np.testing.assert_allclose(got, dense, rtol=1e-6, atol=1e-7)
    counts = np.bincount([1, 4, 1, 1], minlength=6)[:, None]
    g = 2 * table * counts / 16                       # d mean(emb^2) / d table
    decay = 0.5 * (table if reg.method == "l2_decay" else np.sign(table))
    np.testing.assert_allclose(got, table - LR * (g + decay), rtol=1e-5, atol=1e-6)
    assert not np.allclose(got[0], table[0])          # an untouched row decays too


def test_sparse_decay_program_is_fluids():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        i = layers.data("ids", [1], dtype="int64")
        emb = layers.embedding(i, [6, 4], is_sparse=True, param_attr=fluid.ParamAttr(
            name="emb"))
        optimizer.SGD(LR, regularization=regularizer.L2Decay(0.5)).minimize(
            layers.mean(emb))
    ops = main.global_block().ops
    sgd = [op for op in ops if op.type == "sgd"][0]
    assert sgd.input("Grad") == ["emb@GRAD@NEWGRAD@"]
    new = main.global_block().var("emb@GRAD@NEWGRAD@")
    assert new.type == fluid.core.VarDesc.VarType.LOD_TENSOR and new.shape == (6, 4)
    reg = [op for op in ops if "regularization" in op.attr("op_namescope")]
    assert [op.type for op in reg] == ["scale", "sum"]
    assert all(op.attr("op_role_var") == ["emb", "emb@GRAD"] for op in reg)


@pytest.mark.parametrize("reg", [regularizer.L2Decay(0.5, lazy_mode=True),
                                 regularizer.L1Decay(0.5, lazy_mode=True)], ids=["l2", "l1"])
def test_lazy_sparse_decay_decays_only_touched_rows_once(reg):
    """lazy_mode=True (Fluidity's option): only the rows in the gradient decay, each once
    however often it occurs, and the gradient stays sparse."""
    table, got = _sparse_table_step(True, reg)
    counts = np.bincount([1, 4, 1, 1], minlength=6)[:, None]
    g = 2 * table * counts / 16
    decay = 0.5 * (table if reg.method == "l2_decay" else np.sign(table))
    want = table - LR * (g + decay * (counts > 0))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got[0], table[0])


# --- clipping ---------------------------------------------------------------------------
def test_clip_by_value():
    got = linear_step(optimizer.SGD(LR, grad_clip=clip.ClipGradByValue(1.5, -0.5)))
    assert_step(got, np.clip(GW, -0.5, 1.5), np.clip(GB, -0.5, 1.5))
    got = linear_step(optimizer.SGD(LR, grad_clip=clip.GradientClipByValue(0.9)))
    assert_step(got, np.clip(GW, -0.9, 0.9), np.clip(GB, -0.9, 0.9))


def test_clip_by_norm():
    got = linear_step(optimizer.SGD(LR, grad_clip=clip.ClipGradByNorm(2.0)))
    nw = np.linalg.norm(GW)
    assert nw > 2.0
    assert_step(got, GW * 2.0 / nw, GB)    # ||GB|| = 1 < 2: unchanged


def test_clip_by_global_norm():
    got = linear_step(optimizer.SGD(LR, grad_clip=clip.ClipGradByGlobalNorm(1.5)))
    gn = np.sqrt(np.sum(GW ** 2) + np.sum(GB ** 2))
    assert_step(got, GW * 1.5 / gn, GB * 1.5 / gn)
    got = linear_step(optimizer.SGD(LR, grad_clip=clip.ClipGradByGlobalNorm(100.0)))
    assert_step(got, GW, GB)


def test_set_gradient_clip_fluid_1x():
    got = linear_step(optimizer.SGD(LR), before_minimize=lambda main: clip.set_gradient_clip(
        clip.GradientClipByValue(0.5), param_list=["w"], program=main))
    assert_step(got, np.clip(GW, -0.5, 0.5), GB)
    got = linear_step(optimizer.SGD(LR), before_minimize=lambda main: clip.set_gradient_clip(
        clip.GradientClipByGlobalNorm(1.5), program=main))
    gn = np.sqrt(np.sum(GW ** 2) + np.sum(GB ** 2))
    assert_step(got, GW * 1.5 / gn, GB * 1.5 / gn)


def test_optimizer_grad_clip_wins_over_set_gradient_clip():
    got = linear_step(optimizer.SGD(LR, grad_clip=clip.ClipGradByValue(0.5)),
                      before_minimize=lambda main: clip.set_gradient_clip(
                          clip.ClipGradByValue(0.1), program=main))
    assert_step(got, np.clip(GW, -0.5, 0.5), np.clip(GB, -0.5, 0.5))


def test_clip_then_regularize():
    got = linear_step(optimizer.SGD(LR, regularization=regularizer.L2Decay(0.5),
                                    grad_clip=clip.ClipGradByValue(0.5)))
    assert_step(got, np.clip(GW, -0.5, 0.5) + 0.5 * W0, np.clip(GB, -0.5, 0.5) + 0.5 * B0)


@pytest.mark.parametrize("c", [clip.ClipGradByValue(0.01), clip.ClipGradByNorm(0.05),
                               clip.ClipGradByGlobalNorm(0.05)],
                         ids=["value", "norm", "global_norm"])
def test_sparse_clip_matches_dense(c):
    _, dense = _sparse_table_step(False, grad_clip=c, steps=2)
    table, sparse = _sparse_table_step(True, grad_clip=c, steps=2)
    np.testing.assert_allclose(sparse, dense, rtol=1e-5, atol=1e-7)
    assert not np.allclose(sparse, table)


def test_bad_arguments():
    with pytest.raises(FluidityError, match="max must be > 0"):
        clip.ClipGradByValue(-1.0)
    with pytest.raises(FluidityError, match="min"):
        clip.ClipGradByValue(1.0, 2.0)
    with pytest.raises(FluidityError, match="clip_norm must be a number"):
        clip.ClipGradByNorm("1")
    with pytest.raises(FluidityError, match="clip must be"):
        clip.set_gradient_clip(5.0)
    with pytest.raises(FluidityError, match="regularization_coeff"):
        regularizer.L2Decay("0.1")
    with pytest.raises(FluidityError, match="same clip_norm"):
        def mixed(main):
            clip.set_gradient_clip(clip.ClipGradByGlobalNorm(1.0), ["w"], main)
            clip.set_gradient_clip(clip.ClipGradByGlobalNorm(2.0), ["b"], main)
        linear_step(optimizer.SGD(LR), before_minimize=mixed)
    with pytest.raises(FluidityError, match="not a Parameter"):
        main = fluid.Program()
        with fluid.program_guard(main):
            v = layers.data("v", [1])
        clip.set_gradient_clip(clip.ClipGradByNorm(1.0), [v], main)


# --- the ops ------------------------------------------------------------------------------
def test_clip_ops_dense():
    x = rng.normal(size=(3, 4)).astype(np.float32)
    n = np.linalg.norm(x)
    check_output("squared_l2_norm", {"X": x}, {"Out": np.array([n * n])}, rtol=1e-5)
    check_grad("squared_l2_norm", {"X": x.astype(np.float64)}, ["X"])
    check_output("clip_by_norm", {"X": x}, {"Out": x * (0.5 / n)}, {"max_norm": 0.5})
    check_output("clip_by_norm", {"X": x}, {"Out": x}, {"max_norm": float(n) + 1})


def test_selected_rows_ops():
    sr = SelectedRows([2, 0, 2], 4, np.array([[1.0, 2.0], [3.0, -4.0], [1.0, 2.0]]))
    merged = np.array([[3.0, -4.0], [2.0, 4.0]])            # rows [0, 2]
    cases = {
        "merge_selected_rows": ({}, merged),
        "clip_by_norm": ({"max_norm": 1.0}, merged / np.linalg.norm(merged)),
        "selected_rows_clip": ({"min": -1.0, "max": 3.5}, np.clip(merged, -1, 3.5)),
    }
    for op_type, (attrs, want) in cases.items():
        o = OneOp(op_type, {"X": sr}, attrs)
        o.run()
        res = o["Out"]
        assert isinstance(res, SelectedRows), op_type
        np.testing.assert_array_equal(res.rows, [0, 2])
        np.testing.assert_allclose(res.value, want, rtol=1e-12, err_msg=op_type)
    o = OneOp("squared_l2_norm", {"X": sr})
    o.run()
    np.testing.assert_allclose(o["Out"], [np.sum(merged ** 2)])
    o = OneOp("get_tensor_from_selected_rows", {"X": sr})
    o.run()
    np.testing.assert_array_equal(o["Out"], sr.value)
    o = OneOp("selected_rows_scale", {"X": sr, "Scale": np.array([0.5])})
    o.run()
    np.testing.assert_array_equal(o["Out"].rows, sr.rows)
    np.testing.assert_allclose(o["Out"].value, sr.value * 0.5)


def test_selected_rows_weight_decay_op():
    p = np.arange(8.0).reshape(4, 2) - 3
    for method, f in (("l1_decay", np.sign), ("l2_decay", lambda a: a)):
        o = OneOp("selected_rows_weight_decay",
                  {"Param": p, "Grad": SelectedRows([3, 1, 3], 4, np.ones((3, 2)))},
                  {"regularization_method": method, "regularization_coeff": 0.5})
        o.run()
        np.testing.assert_array_equal(o["Out"].rows, [1, 3])
        np.testing.assert_allclose(o["Out"].value, [[1, 1], [2, 2]] + 0.5 * f(p[[1, 3]]))
