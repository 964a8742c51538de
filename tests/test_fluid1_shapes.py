"""Fluid 1.x shapes: a program built with `fluidity.layers` declares and yields `[1]` where
Fluid 1.8's InferShape does (mean, reduce_* over every axis, accuracy, auc, size, kldiv_loss
with a reduction, a slice dropping every dim, the losses built on them, the loss@GRAD seed,
the learning rate), on every plan kind and compiled; and what `exe.run` fetches does what
Fluid programs do with it under numpy 2: `v[0]`, `float(v)`, `int(v)`, `"%f" % v`,
`v.shape == (1,)`, numpy arithmetic, `np.array(v)`, `v.tolist()`, pickling."""
import pickle

import numpy as np
import pytest

import fluidity as fluid
from fluidity.core.tensor import FetchedArray

L = fluid.layers


def _reductions():
    """(main, startup, {name: variable}) of every full reduction Fluid 1.x makes [1]."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 5
    with fluid.program_guard(main, startup):
        x = L.data("x", [4])
        lab = L.data("lab", [1], dtype="int64")
        prob = L.fc(x, 2, act="softmax")
        v = {"mean": L.mean(x), "accuracy": L.accuracy(prob, lab),
             "auc": L.auc(prob, lab)[0], "size": L.size(x),
             "kldiv": L.kldiv_loss(L.log(prob), prob, reduction="batchmean"),
             "mse": L.mse_loss(x, x * 2.0), "reduce_all": L.reduce_all(L.cast(x, "bool")),
             "sums": L.sums([L.mean(x), L.reduce_max(x)]),
             "slice": L.reshape(x, [-1])[1]}
        for op in ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"):
            v[op] = getattr(L, op)(x)
            v[op + "_every_dim"] = getattr(L, op)(x, dim=[0, 1])
    return main, startup, v


def _feed(n=3, seed=0):
    r = np.random.default_rng(seed)
    return {"x": r.uniform(0.5, 1.5, (n, 4)).astype("float32"),
            "lab": r.integers(0, 2, (n, 1)).astype("int64")}


def test_full_reductions_declare_and_fetch_shape_1():
    main, startup, v = _reductions()
    assert {k: tuple(var.shape) for k, var in v.items()} == {k: (1,) for k in v}
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    feed = _feed()
    got = dict(zip(v, exe.run(main, feed=feed, fetch_list=list(v.values()), scope=scope)))
    assert {k: g.shape for k, g in got.items()} == {k: (1,) for k in v}
    x = feed["x"]
    np.testing.assert_allclose(got["mean"], [x.mean()], rtol=1e-6)
    np.testing.assert_allclose(got["reduce_sum_every_dim"], [x.sum()], rtol=1e-6)
    np.testing.assert_allclose(got["reduce_prod"], [x.prod()], rtol=1e-5)
    np.testing.assert_allclose(got["sums"], [x.mean() + x.max()], rtol=1e-6)
    assert got["size"].dtype == np.int64 and got["size"][0] == x.size
    np.testing.assert_allclose(got["slice"], x.reshape(-1)[1:2])


def test_fetched_one_element_values_behave_as_fluid_programs_use_them():
    main, startup, v = _reductions()
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    loss, acc, size = exe.run(main, feed=_feed(), fetch_list=[v["mean"], v["accuracy"],
                                                              v["size"]], scope=scope)
    assert isinstance(loss, np.ndarray) and isinstance(loss, FetchedArray)
    assert loss.shape == (1,) and loss.dtype == np.float32
    f = float(loss)
    assert isinstance(f, float) and f == loss[0] == loss.item() == loss.tolist()[0]
    assert int(size) == size[0] == 12 and isinstance(int(size), int)
    assert complex(loss) == complex(f)
    assert "%.6f" % loss == "%.6f" % f and f"{float(acc):.2f}" == f"{acc[0]:.2f}"
    assert f"{loss:.4f}" == f"{f:.4f}" and "{:>10.3e}".format(loss) == f"{f:>10.3e}"
    assert f"{loss}" == str(loss)          # no spec: numpy's own text
    # numpy arithmetic, conversions, round trips
    np.testing.assert_allclose(loss * 2 + 1, [2 * f + 1], rtol=1e-6)
    assert float(np.mean([loss, loss])) == pytest.approx(f)
    assert type(np.array(loss)) is np.ndarray and np.array(loss).shape == (1,)
    back = pickle.loads(pickle.dumps(loss))
    assert type(back) is np.ndarray and back.shape == (1,) and back[0] == loss[0]
    # a value of several elements is a plain ndarray, and float() of it fails as numpy's does
    pred, = exe.run(main, feed=_feed(), fetch_list=["x"], scope=scope)
    assert type(pred) is np.ndarray
    with pytest.raises(TypeError):
        float(pred)


def test_lodtensor_of_a_fetched_loss_has_shape_1():
    main, startup, v = _reductions()
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    t, = exe.run(main, feed=_feed(), fetch_list=[v["mean"]], scope=scope, return_numpy=False)
    assert t.shape() == [1] and np.array(t).shape == (1,)


def _trained(opt, kind=None, compiled=False, steps=8):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3
    with fluid.program_guard(main, startup):
        x = L.data("x", [4])
        y = L.data("y", [1])
        loss = L.mean(L.square_error_cost(L.fc(x, 1), y))
        opt.minimize(loss)
    exe = fluid.Executor(strategy=kind)
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    prog = fluid.CompiledProgram(main).with_native_code() if compiled else main
    r = np.random.default_rng(4)
    w = r.normal(size=(4, 1)).astype("float32")
    out = []
    for _ in range(steps):
        xv = r.normal(size=(6, 4)).astype("float32")
        out.append(exe.run(prog, feed={"x": xv, "y": xv @ w}, fetch_list=[loss],
                           scope=scope)[0])
    return main, out


def test_the_seed_and_learning_rate_are_shape_1_as_fluid_builds_them():
    main, losses = _trained(fluid.optimizer.SGD(0.1))
    block = main.global_block()
    seed = [op for op in block.ops if op.type == "fill_constant"
            and op.output_arg_names[0].endswith("@GRAD")]
    assert len(seed) == 1 and seed[0].attr("shape") == [1]
    assert block.var(seed[0].output_arg_names[0]).shape == (1,)
    lr = [v for v in main.list_vars() if v.name.startswith("learning_rate")]
    assert lr and all(v.shape == (1,) for v in lr)
    assert all(lv.shape == (1,) for lv in losses) and losses[-1][0] < losses[0][0]


@pytest.mark.parametrize("kind", ["linear", "dataflow", "parallel"])
def test_every_plan_kind_fetches_the_interpreters_shape_1(kind):
    _, want = _trained(fluid.optimizer.Adam(0.05))
    _, got = _trained(fluid.optimizer.Adam(0.05), kind=kind)
    for a, b in zip(want, got):
        assert type(a) is type(b) is FetchedArray and a.shape == b.shape == (1,)
        assert a[0] == b[0]


def test_compiled_code_fetches_shape_1():
    _, want = _trained(fluid.optimizer.SGD(0.1))
    _, got = _trained(fluid.optimizer.SGD(0.1), compiled=True)
    for a, b in zip(want, got):
        assert a.shape == b.shape == (1,) and isinstance(float(b), float)
        np.testing.assert_allclose(a, b, rtol=1e-5)


def test_compiled_full_reductions_fetch_shape_1():
    main, startup, v = _reductions()
    names = ["mean", "reduce_sum", "reduce_max_every_dim", "accuracy", "size"]
    outs = {}
    for compiled in (False, True):
        exe, scope = fluid.Executor(), fluid.Scope()
        exe.run(startup, scope=scope)
        prog = fluid.CompiledProgram(main).with_native_code() if compiled else main
        outs[compiled] = exe.run(prog, feed=_feed(), fetch_list=[v[n] for n in names],
                                 scope=scope)
    for n, a, b in zip(names, outs[False], outs[True]):
        assert a.shape == b.shape == (1,), n
        np.testing.assert_allclose(a, b, rtol=1e-6, err_msg=n)
