"""Optimizer update ops against numpy implementations of their published rules (dense and
SelectedRows gradients with duplicate rows), and the Optimizer classes end to end."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity import layers, optimizer
from fluidity.core.dtypes import VarType
from fluidity.core.tensor import LoDTensor, SelectedRows
from fluidity.errors import FluidityError
from fluidity.framework import OpRole
from fluidity.initializer import NumpyArrayInitializer
from fluidity.ops import registry

rng = np.random.default_rng(0)
SHAPE = (5, 3)
ROWS = np.array([1, 3, 1, 0, 3, 3])  # duplicates; rows 2 and 4 untouched


class OneOp:
    """One op on persistable variables named after its slots; an update op's outputs are
    written back to its input variables (in place, as Optimizer builds it)."""

    def __init__(self, op_type, values, attrs=None):
        opdef = registry.get(op_type)
        self.main, self.scope, self.exe = fluid.Program(), fluid.Scope(), fluid.Executor()
        block = self.main.global_block()
        ins = {}
        for slot, v in values.items():
            sparse = isinstance(v, SelectedRows)
            arr = v.value if sparse else np.asarray(v)
            shape = (v.height,) + arr.shape[1:] if sparse else arr.shape
            ins[slot] = block.create_var(name=slot, shape=shape, dtype=arr.dtype,
                                         persistable=True,
                                         type=VarType.SELECTED_ROWS if sparse else
                                         VarType.LOD_TENSOR)
            self.set(slot, v)
        if hasattr(opdef, "out_of"):
            outs = {o: ins[src] for o, src in opdef.out_of.items() if src in ins}
        else:  # not an update op: outputs to new persistable vars named after their slots
            outs = {s.name: block.create_var(name=s.name, persistable=True)
                    for s in opdef.outputs}
        block.append_op(op_type, ins, outs, attrs or {})

    def set(self, slot, v):
        self.scope.var(slot).value = v if isinstance(v, SelectedRows) else \
            LoDTensor(np.array(v))

    def run(self, **values):
        for k, v in values.items():
            self.set(k, v)
        self.exe.run(self.main, scope=self.scope)

    def __getitem__(self, slot):
        v = self.scope.var(slot).value
        return v if isinstance(v, SelectedRows) else v._array


def sparse_grads(steps, width=SHAPE[1], dtype=np.float64):
    return [SelectedRows(ROWS, SHAPE[0], rng.normal(size=(len(ROWS), width)).astype(dtype))
            for _ in range(steps)]


def dense_of(g):
    return g.to_dense() if isinstance(g, SelectedRows) else g


def lazy_ref(rule, g, p, *states):
    """Apply a per-element rule only to the rows present in sparse gradient g."""
    rows = np.unique(g.rows)
    d = g.to_dense()[rows]
    new = rule(d, p[rows], *[s[rows] for s in states])
    outs = [a.copy() for a in (p,) + states]
    for o, n in zip(outs, new):
        o[rows] = n
    return outs


# --- numpy references (textbook forms) ------------------------------------------------------
def ref_sgd(lr):
    return lambda g, p: (p - lr * g,)


def ref_momentum(lr, mu, nesterov):
    def f(g, p, v):
        v = mu * v + g
        return (p - lr * (g + mu * v) if nesterov else p - lr * v), v
    return f


def ref_adam(lr, b1, b2, eps, t, decay=0.0, paddle2=False):
    """Step t of Adam. Fluid 1.8's form (adam_op.h at the 1.8 branch point): the step size
    lr sqrt(1 - b2^t) / (1 - b1^t) times m / (sqrt(v) + eps). `paddle2`: Paddle 2.1+'s, which
    is the paper's bias-corrected form mhat / (sqrt(vhat) + eps)."""
    def f(g, p, m, v):
        p = p - lr * decay * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        if paddle2:
            mhat, vhat = m / (1 - b1 ** t), v / (1 - b2 ** t)
            return p - lr * mhat / (np.sqrt(vhat) + eps), m, v
        lr_t = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        return p - lr_t * m / (np.sqrt(v) + eps), m, v
    return f


def ref_adagrad(lr, eps):
    def f(g, p, m):
        m = m + g * g
        return p - lr * g / (np.sqrt(m) + eps), m
    return f


def ref_rmsprop(lr, rho, eps, momentum, centered):
    def f(g, p, ms, mom, mg):
        ms = rho * ms + (1 - rho) * g ** 2
        mg = rho * mg + (1 - rho) * g if centered else mg
        var = ms - mg ** 2 if centered else ms
        mom = momentum * mom + lr * g / np.sqrt(var + eps)
        return p - mom, ms, mom, mg
    return f


def ref_ftrl(lr, l1, l2, power):
    l1, l2 = l1 + 1e-10, l2 + 1e-10

    def f(g, p, n, z):
        n_new = n + g * g
        sigma = (n_new ** -power - n ** -power) / lr
        z = z + g - sigma * p
        p = np.where(np.abs(z) > l1, (np.sign(z) * l1 - z) / (n_new ** -power / lr + 2 * l2), 0)
        return p, n_new, z
    return f


# --- op-level tests -----------------------------------------------------------------------
P0 = rng.normal(size=SHAPE)


def _dense_grads(steps):
    return [rng.normal(size=SHAPE) for _ in range(steps)]


@pytest.mark.parametrize("sparse", [False, True])
def test_sgd(sparse):
    grads = sparse_grads(3) if sparse else _dense_grads(3)
    op = OneOp("sgd", {"Param": P0, "Grad": grads[0], "LearningRate": np.array([0.1])})
    p = P0.copy()
    for g in grads:
        op.run(Grad=g)
        p = lazy_ref(ref_sgd(0.1), g, p)[0] if sparse else ref_sgd(0.1)(g, p)[0]
    np.testing.assert_allclose(op["Param"], p, rtol=1e-10)
    if sparse:
        np.testing.assert_array_equal(op["Param"][[2, 4]], P0[[2, 4]])


@pytest.mark.parametrize("nesterov", [False, True])
@pytest.mark.parametrize("sparse", [False, True])
def test_momentum(sparse, nesterov):
    grads = sparse_grads(3) if sparse else _dense_grads(3)
    op = OneOp("momentum", {"Param": P0, "Grad": grads[0], "Velocity": np.zeros(SHAPE),
                            "LearningRate": np.array([0.1])},
               {"mu": 0.875, "use_nesterov": nesterov})
    p, v = P0.copy(), np.zeros(SHAPE)
    for g in grads:
        op.run(Grad=g)
        p, v = ref_momentum(0.1, 0.875, nesterov)(dense_of(g), p, v)  # every row (Paddle)
    np.testing.assert_allclose(op["Param"], p, rtol=1e-10)
    np.testing.assert_allclose(op["Velocity"], v, rtol=1e-10)


def test_momentum_l2_decay_attr():
    g = rng.normal(size=SHAPE)
    op = OneOp("momentum", {"Param": P0, "Grad": g, "Velocity": np.zeros(SHAPE),
                            "LearningRate": np.array([0.1])},
               {"mu": 0.875, "regularization_method": "l2_decay", "regularization_coeff": 0.125})
    op.run()
    np.testing.assert_allclose(op["Param"], P0 - 0.1 * (g + 0.125 * P0), rtol=1e-10)


def _adam_case(op_type, sparse, lazy, attrs, decay=0.0, paddle2=False):
    grads = sparse_grads(4) if sparse else _dense_grads(4)
    # eps near sqrt(Moment2) of the absent rows (which decay) and a coarse beta2, so the two
    # forms of epsilon differ by far more than the tolerance
    b1, b2, eps, lr = 0.75, 0.9375, 2.0 ** -4, 0.05
    z = np.zeros(SHAPE)
    op = OneOp(op_type, {"Param": P0, "Grad": grads[0], "LearningRate": np.array([lr]),
                         "Moment1": z, "Moment2": z, "Beta1Pow": np.array([b1]),
                         "Beta2Pow": np.array([b2])},
               {"beta1": b1, "beta2": b2, "epsilon": eps, "lazy_mode": lazy, **attrs})
    p, m, v = P0.copy(), z.copy(), z.copy()
    for t, g in enumerate(grads, 1):
        op.run(Grad=g)
        rule = ref_adam(lr, b1, b2, eps, t, decay, paddle2)
        p, m, v = lazy_ref(rule, g, p, m, v) if sparse and lazy else rule(dense_of(g), p, m, v)
    np.testing.assert_allclose(op["Param"], p, rtol=1e-10)
    np.testing.assert_allclose(op["Moment1"], m, rtol=1e-10)
    np.testing.assert_allclose(op["Moment2"], v, rtol=1e-10)
    np.testing.assert_allclose(op["Beta1Pow"], [b1 ** 5])
    np.testing.assert_allclose(op["Beta2Pow"], [b2 ** 5])
    if sparse and lazy:
        np.testing.assert_array_equal(op["Param"][[2, 4]], P0[[2, 4]])
        np.testing.assert_array_equal(op["Moment1"][[2, 4]], 0)


@pytest.mark.parametrize("sparse,lazy", [(False, False), (True, False), (True, True)])
def test_adam(sparse, lazy):
    _adam_case("adam", sparse, lazy, {})


@pytest.mark.parametrize("sparse,lazy", [(False, False), (True, False), (True, True)])
def test_adam_written_by_paddle2_scales_epsilon(sparse, lazy):
    # an adam op carrying use_global_beta_pow was written by Paddle >= 2.1: its epsilon form
    _adam_case("adam", sparse, lazy, {"use_global_beta_pow": False}, paddle2=True)


@pytest.mark.parametrize("sparse,lazy", [(False, False), (True, True)])
def test_adamw(sparse, lazy):
    _adam_case("adamw", sparse, lazy, {"coeff": 0.125, "with_decay": True}, decay=0.125,
               paddle2=True)


def test_adamw_without_decay_is_paddle2_adam():
    _adam_case("adamw", False, False, {"coeff": 0.125, "with_decay": False}, decay=0.0,
               paddle2=True)


@pytest.mark.parametrize("sparse", [False, True])
def test_adagrad(sparse):
    grads = sparse_grads(3) if sparse else _dense_grads(3)
    m0 = np.full(SHAPE, 0.1)
    op = OneOp("adagrad", {"Param": P0, "Grad": grads[0], "Moment": m0,
                           "LearningRate": np.array([0.2])}, {"epsilon": 2.0 ** -20})
    p, m = P0.copy(), m0.copy()
    for g in grads:
        op.run(Grad=g)
        rule = ref_adagrad(0.2, 2.0 ** -20)
        p, m = lazy_ref(rule, g, p, m) if sparse else rule(g, p, m)
    np.testing.assert_allclose(op["Param"], p, rtol=1e-10)
    np.testing.assert_allclose(op["Moment"], m, rtol=1e-10)


@pytest.mark.parametrize("centered", [False, True])
@pytest.mark.parametrize("sparse", [False, True])
def test_rmsprop(sparse, centered):
    grads = sparse_grads(3) if sparse else _dense_grads(3)
    z = np.zeros(SHAPE)
    op = OneOp("rmsprop", {"Param": P0, "Grad": grads[0], "MeanSquare": z, "Moment": z,
                           "MeanGrad": z, "LearningRate": np.array([0.01])},
               {"decay": 0.875, "epsilon": 2.0 ** -20, "momentum": 0.5, "centered": centered})
    p, ms, mom, mg = P0.copy(), z.copy(), z.copy(), z.copy()
    for g in grads:
        op.run(Grad=g)
        p, ms, mom, mg = ref_rmsprop(0.01, 0.875, 2.0 ** -20, 0.5, centered)(dense_of(g), p, ms, mom, mg)
    np.testing.assert_allclose(op["Param"], p, rtol=1e-10)
    np.testing.assert_allclose(op["MeanSquare"], ms, rtol=1e-10)
    np.testing.assert_allclose(op["MeanGrad"], mg, rtol=1e-10)


@pytest.mark.parametrize("power", [-0.5, -0.75])
@pytest.mark.parametrize("sparse", [False, True])
def test_ftrl(sparse, power):
    grads = sparse_grads(3) if sparse else _dense_grads(3)
    n0 = np.full(SHAPE, 0.1)
    op = OneOp("ftrl", {"Param": P0, "Grad": grads[0], "SquaredAccumulator": n0,
                        "LinearAccumulator": np.zeros(SHAPE), "LearningRate": np.array([0.1])},
               {"l1": 0.0625, "l2": 0.015625, "lr_power": power})
    p, n, z = P0.copy(), n0.copy(), np.zeros(SHAPE)
    for g in grads:
        op.run(Grad=g)
        rule = ref_ftrl(0.1, 0.0625, 0.015625, power)
        p, n, z = lazy_ref(rule, g, p, n, z) if sparse else rule(g, p, n, z)
    np.testing.assert_allclose(op["Param"], p, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(op["SquaredAccumulator"], n, rtol=1e-10)
    np.testing.assert_allclose(op["LinearAccumulator"], z, rtol=1e-10)


def test_update_is_in_place_and_keeps_dtype():
    p0 = P0.astype(np.float32)
    op = OneOp("adam", {"Param": p0, "Grad": sparse_grads(1, dtype=np.float32)[0],
                        "LearningRate": np.array([0.1], np.float32),
                        "Moment1": np.zeros(SHAPE, np.float32),
                        "Moment2": np.zeros(SHAPE, np.float32),
                        "Beta1Pow": np.array([0.9], np.float32),
                        "Beta2Pow": np.array([0.999], np.float32)})
    t, m = op.scope.var("Param").value, op.scope.var("Moment1").value
    arr, marr = t._array, m._array
    op.run()
    assert op.scope.var("Param").value is t and t._array is arr and m._array is marr
    assert arr.dtype == np.float32 and not np.allclose(arr, p0)


def test_master_param():
    master = P0.copy()
    g = rng.normal(size=SHAPE).astype(np.float32)
    op = OneOp("sgd", {"Param": P0.astype(np.float32), "Grad": g,
                       "LearningRate": np.array([0.1], np.float32),
                       "MasterParam": master}, {"multi_precision": True})
    op.run()
    np.testing.assert_allclose(op["MasterParam"], P0 - 0.1 * g, rtol=1e-10)
    np.testing.assert_allclose(op["Param"], (P0 - 0.1 * g).astype(np.float32), rtol=1e-10)


def test_op_errors():
    op = OneOp("sgd", {"Param": P0, "Grad": np.ones((2, 3)), "LearningRate": np.array([0.1])})
    with pytest.raises(FluidityError, match="Grad has shape"):
        op.run()
    op = OneOp("sgd", {"Param": P0, "Grad": SelectedRows([7], 8, np.ones((1, 3))),
                       "LearningRate": np.array([0.1])})
    with pytest.raises(FluidityError, match="row 7"):
        op.run()


# --- Optimizer classes ----------------------------------------------------------------------
def _mlp(seed=1):
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = seed
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = layers.data("x", [4])
        y = layers.data("y", [1])
        h = layers.fc(x, 16, act="tanh")
        pred = layers.fc(h, 1)
        loss = layers.mean(layers.square(layers.elementwise_sub(pred, y)))
    return main, startup, loss


_X = rng.normal(size=(32, 4)).astype(np.float32)
_Y = (_X @ np.array([[1.0], [-2.0], [0.5], [1.5]], np.float32)).astype(np.float32)

OPTIMIZERS = {
    "sgd": lambda: optimizer.SGD(0.1),
    "momentum": lambda: optimizer.Momentum(0.05, momentum=0.9),
    "nesterov": lambda: optimizer.MomentumOptimizer(0.05, 0.9, use_nesterov=True),
    "adam": lambda: optimizer.Adam(0.05),
    "adamw": lambda: optimizer.AdamW(0.05, weight_decay=0.01),
    "adagrad": lambda: optimizer.Adagrad(0.2),
    "rmsprop": lambda: optimizer.RMSProp(0.01),
    "rmsprop_centered": lambda: optimizer.RMSProp(0.01, momentum=0.5, centered=True),
    "ftrl": lambda: optimizer.Ftrl(0.5),
}


def _train(main, startup, loss, steps, feed=None):
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    losses = [float(exe.run(main, feed=feed or {"x": _X, "y": _Y}, fetch_list=[loss],
                            scope=scope)[0]) for _ in range(steps)]
    return losses, scope


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_minimize_lowers_loss(name):
    main, startup, loss = _mlp()
    with fluid.program_guard(main, startup):
        ops, pgs = OPTIMIZERS[name]().minimize(loss)
    assert len(ops) == 4 and len(pgs) == 4
    for op in ops:
        assert op.attr("op_role") == OpRole.Optimize
        p, g = op.attr("op_role_var")
        assert op.input("Param") == op.output("ParamOut") == [p] and g == p + "@GRAD"
    losses, _ = _train(main, startup, loss, 30)
    assert losses[-1] < 0.5 * losses[0], losses


def test_accumulators_and_learning_rate_vars():
    main, startup, loss = _mlp()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        optimizer.Adam(0.01).minimize(loss)
    block = main.global_block()
    for n in ["fc_0.w_0_moment1_0", "fc_0.w_0_moment2_0", "fc_0.w_0_beta1_pow_acc_0",
              "fc_1.b_0_beta2_pow_acc_0", "learning_rate_0"]:
        assert block.var(n).persistable, n
    assert block.var("fc_0.w_0_moment1_0").shape == block.var("fc_0.w_0").shape
    assert block.var("fc_0.w_0_beta1_pow_acc_0").shape == (1,)
    fills = {op.output("Out")[0]: op.attr("value") for op in startup.global_block().ops
             if op.type == "fill_constant"}
    assert fills["learning_rate_0"] == pytest.approx(0.01)
    assert fills["fc_0.w_0_beta1_pow_acc_0"] == pytest.approx(0.9)
    assert fills["fc_0.w_0_moment1_0"] == 0.0


def test_startup_program_argument():
    main, startup, loss = _mlp()
    other = fluid.Program()
    with fluid.program_guard(main, startup):
        optimizer.Momentum(0.1, 0.9).minimize(loss, startup_program=other)
    names = {op.output("Out")[0] for op in other.global_block().ops}
    assert any("_velocity_" in n for n in names) and any(
        n.startswith("learning_rate") for n in names)


def test_learning_rate_variable():
    results = []
    for lr_kind in ("float", "variable"):
        main, startup, loss = _mlp()
        with fluid.program_guard(main, startup):
            lr = 0.05 if lr_kind == "float" else layers.fill_constant([1], "float32", 0.05)
            optimizer.SGD(lr).minimize(loss)
        if lr_kind == "variable":
            assert not any(v.name.startswith("learning_rate") for v in main.list_vars())
        results.append(_train(main, startup, loss, 5)[0])
    np.testing.assert_allclose(results[0], results[1], rtol=1e-10)


def test_per_parameter_learning_rate():
    main, startup = fluid.Program(), fluid.Program()
    w0 = rng.normal(size=(4, 1)).astype(np.float32)
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = layers.data("x", [4])
        pred = layers.fc(x, 1, bias_attr=False, param_attr=fluid.ParamAttr(
            name="w", learning_rate=0.5, initializer=NumpyArrayInitializer(w0)))
        loss = layers.mean(pred)
        optimizer.SGD(0.2).minimize(loss)
    scales = [op for op in main.global_block().ops if op.type == "scale"]
    assert len(scales) == 1 and scales[0].attr("scale") == 0.5
    _, scope = _train(main, startup, loss, 1, {"x": _X})
    grad = _X.mean(0).reshape(4, 1)
    np.testing.assert_allclose(np.array(scope.find_var("w").value), w0 - 0.1 * grad,
                               rtol=1e-5)


def _embedding_model(is_sparse, opt, table, w_fc):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ids = layers.data("ids", [1], dtype="int64")
        y = layers.data("y", [1])
        emb = layers.embedding(ids, table.shape, is_sparse=is_sparse,
                               param_attr=fluid.ParamAttr(
                                   name="emb", initializer=NumpyArrayInitializer(table)))
        pred = layers.fc(emb, 1, param_attr=fluid.ParamAttr(
            name="w", initializer=NumpyArrayInitializer(w_fc)))
        loss = layers.mean(layers.square(layers.elementwise_sub(pred, y)))
        opt().minimize(loss)
    grad_type = main.global_block().var("emb@GRAD").type
    assert grad_type == (VarType.SELECTED_ROWS if is_sparse else VarType.LOD_TENSOR)
    return main, startup, loss


@pytest.mark.parametrize("opt", [lambda: optimizer.SGD(0.1), lambda: optimizer.Adam(0.05),
                                 lambda: optimizer.Momentum(0.1, 0.9)],
                         ids=["sgd", "adam", "momentum"])
def test_sparse_embedding_matches_dense(opt):
    table = rng.normal(size=(8, 4)).astype(np.float32)
    w_fc = rng.normal(size=(4, 1)).astype(np.float32)
    ids = np.array([[1], [3], [1], [0], [3], [3], [6]], np.int64)  # duplicates; 2,4,5,7 absent
    feed = {"ids": ids, "y": rng.normal(size=(7, 1)).astype(np.float32)}
    params = []
    for sparse in (False, True):
        main, startup, loss = _embedding_model(sparse, opt, table, w_fc)
        _, scope = _train(main, startup, loss, 4, feed)
        params.append([np.array(scope.find_var(n).value) for n in ("emb", "w", "fc_0.b_0")])
    for dense_p, sparse_p in zip(*params):
        np.testing.assert_allclose(sparse_p, dense_p, rtol=1e-5, atol=1e-6)
    assert not np.allclose(params[0][0][[1, 3]], table[[1, 3]])


def test_lazy_adam_leaves_absent_rows():
    table = rng.normal(size=(8, 4)).astype(np.float32)
    w_fc = rng.normal(size=(4, 1)).astype(np.float32)
    feed = {"ids": np.array([[1], [3], [1]], np.int64), "y": np.ones((3, 1), np.float32)}
    main, startup, loss = _embedding_model(True, lambda: optimizer.Adam(0.05, lazy_mode=True),
                                           table, w_fc)
    _, scope = _train(main, startup, loss, 3, feed)
    emb = np.array(scope.find_var("emb").value)
    np.testing.assert_array_equal(emb[[0, 2, 4, 5, 6, 7]], table[[0, 2, 4, 5, 6, 7]])
    assert not np.allclose(emb[[1, 3]], table[[1, 3]])


def test_bad_arguments():
    main, startup, loss = _mlp()
    with fluid.program_guard(main, startup):
        with pytest.raises(FluidityError, match="loss must be a Variable"):
            optimizer.SGD(0.1).minimize("loss")
        with pytest.raises(FluidityError, match="learning_rate must be a float or a Variable"):
            optimizer.Adam(learning_rate="0.1")
        with pytest.raises(FluidityError, match="learning_rate"):
            optimizer.SGD(None)
        with pytest.raises(FluidityError, match="momentum must be a number"):
            optimizer.Momentum(0.1, momentum="0.9")
        with pytest.raises(FluidityError, match="regularization"):
            optimizer.SGD(0.1, regularization=0.01)
        with pytest.raises(FluidityError, match="grad_clip"):
            optimizer.SGD(0.1, grad_clip=5.0)
        with pytest.raises(FluidityError, match="startup_program must be a Program"):
            optimizer.SGD(0.1).minimize(loss, startup_program="s")
        lr = layers.fill_constant([2], "float32", 0.1)
        with pytest.raises(FluidityError, match="one element"):
            optimizer.SGD(lr).minimize(loss)


def test_minimize_without_startup_run_says_so():
    main, startup, loss = _mlp()
    with fluid.program_guard(main, startup):
        optimizer.Adam(0.01).minimize(loss)
    with pytest.raises(FluidityError, match="startup"):
        fluid.Executor().run(main, feed={"x": _X, "y": _Y}, scope=fluid.Scope())


def test_clone_for_test_drops_training_ops():
    from fluidity import clip, regularizer
    main, startup, loss = _mlp()
    with fluid.program_guard(main, startup):
        lr = layers.exponential_decay(0.1, 10, 0.5)
        optimizer.Adam(lr, regularization=regularizer.L2Decay(1e-3),
                       grad_clip=clip.ClipGradByGlobalNorm(1.0)).minimize(loss)
    test_prog = main.clone(for_test=True)
    types = {op.type for op in test_prog.global_block().ops}
    assert not types & {"adam", "increment", "sum", "squared_l2_norm", "mean_grad"}, types
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    w = np.array(scope.find_var("fc_0.w_0").value).copy()
    l1 = exe.run(test_prog, feed={"x": _X, "y": _Y}, fetch_list=[loss], scope=scope)[0]
    l2 = exe.run(test_prog, feed={"x": _X, "y": _Y}, fetch_list=[loss], scope=scope)[0]
    np.testing.assert_array_equal(l1, l2)
    np.testing.assert_array_equal(np.array(scope.find_var("fc_0.w_0").value), w)
    exe.run(main, feed={"x": _X, "y": _Y}, scope=scope)
    assert not np.allclose(np.array(scope.find_var("fc_0.w_0").value), w)


def _separate_outputs_run(grad, lazy, out_fill):
    """adam with ParamOut, Moment1Out, ... naming their own variables (as Paddle's op tests
    build it), the outputs holding `out_fill` before the run."""
    h, d = 6, 3
    b1, b2, eps, lr = 0.75, 0.9375, 2.0 ** -4, 0.05
    ins = {"Param": rng.normal(size=(h, d)).astype(np.float32), "LearningRate": np.array([lr], np.float32),
           "Moment1": np.full((h, d), 0.25, np.float32),
           "Moment2": np.full((h, d), 0.5, np.float32),
           "Beta1Pow": np.array([b1], np.float32), "Beta2Pow": np.array([b2], np.float32)}
    outs = {"ParamOut": (h, d), "Moment1Out": (h, d), "Moment2Out": (h, d),
            "Beta1PowOut": (1,), "Beta2PowOut": (1,)}
    main = fluid.Program()
    block = main.global_block()
    for n, v in ins.items():
        block.create_var(name=n, shape=v.shape, dtype="float32", persistable=True)
    for n, s in outs.items():
        block.create_var(name=n, shape=s, dtype="float32", persistable=True)
    block.create_var(name="Grad", shape=[h, d], dtype="float32", persistable=True,
                     type=fluid.core.VarType.SELECTED_ROWS if lazy is not None else
                     fluid.core.VarType.LOD_TENSOR)
    block.append_op("adam", {**{n: [n] for n in ins}, "Grad": ["Grad"]},
                    {n: [n] for n in outs},
                    {"beta1": b1, "beta2": b2, "epsilon": eps, "lazy_mode": bool(lazy)})
    scope = fluid.Scope()
    for n, v in ins.items():
        scope.var(n).get_tensor().set(v)
    for n, s in outs.items():
        scope.var(n).get_tensor().set(np.full(s, out_fill, np.float32))
    scope.var("Grad").value = grad
    fluid.Executor().run(main, scope=scope)
    got = {n: np.array(scope.find_var(n).get_tensor()) for n in list(ins) + list(outs)}
    rule = ref_adam(lr, b1, b2, eps, 1)
    return ins, got, rule


@pytest.mark.parametrize("lazy", [None, False, True])
def test_update_with_separate_outputs_leaves_its_inputs(lazy):
    """Outputs naming other variables than the inputs they update: the inputs keep their
    values, the outputs get the update; a lazy update writes only the gradient's rows of
    the outputs, which keep their other rows (Paddle's kernels write into their buffers)."""
    h, d = 6, 3
    rows = np.array([4, 1, 4])
    vals = rng.normal(size=(3, d)).astype(np.float32)
    grad = SelectedRows(rows, h, vals) if lazy is not None else \
        LoDTensor(rng.normal(size=(h, d)).astype(np.float32))
    ins, got, rule = _separate_outputs_run(grad, lazy, out_fill=-7.0)
    for n, v in ins.items():
        np.testing.assert_array_equal(got[n], v, err_msg=n)    # inputs untouched
    g = dense_of(grad) if lazy is not None else np.asarray(grad._array)
    p, m, v = rule(g, ins["Param"].astype(np.float64), ins["Moment1"], ins["Moment2"])
    touched = np.unique(rows) if lazy else np.arange(h)
    for name, want in (("ParamOut", p), ("Moment1Out", m), ("Moment2Out", v)):
        np.testing.assert_allclose(got[name][touched], want[touched], rtol=1e-6,
                                   err_msg=name)
        rest = np.setdiff1d(np.arange(h), touched)
        np.testing.assert_array_equal(got[name][rest], -7.0)
    np.testing.assert_allclose(got["Beta1PowOut"], ins["Beta1Pow"] * 0.75, rtol=1e-7)
