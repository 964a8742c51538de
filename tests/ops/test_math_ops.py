import numpy as np
import pytest

from op_test import check_grad, check_output, run_op

rng = np.random.default_rng(0)


def r(*shape):
    return rng.uniform(0.5, 2.0, size=shape).astype(np.float32)


@pytest.mark.parametrize("after", [True, False])
def test_scale(after):
    x = r(3, 4)
    want = x * 2.0 + 1.0 if after else (x + 1.0) * 2.0
    check_output("scale", {"X": x}, {"Out": want},
                 {"scale": 2.0, "bias": 1.0, "bias_after_scale": after})
    check_grad("scale", {"X": x}, ["X"], {"scale": 2.0, "bias": 1.0})


def test_scale_by_a_scale_tensor_scales_its_gradient_too():
    # the run-time ScaleTensor (-2.3) overrides the attribute (1.0) in forward and backward
    x, k = r(3, 4), np.array([-2.3], np.float32)
    check_output("scale", {"X": x, "ScaleTensor": k}, {"Out": x * k[0] + 0.5},
                 {"bias": 0.5})
    check_grad("scale", {"X": x, "ScaleTensor": k}, ["X"], {"bias": 0.5})


ELEMENTWISE = {
    "elementwise_add": np.add, "elementwise_sub": np.subtract,
    "elementwise_mul": np.multiply, "elementwise_div": np.divide,
    "elementwise_max": np.maximum, "elementwise_min": np.minimum,
    "elementwise_pow": np.power,
}
# (x shape, y shape, axis, y reshaped for numpy)
BROADCASTS = [
    ((2, 3, 4), (2, 3, 4), -1, None),
    ((2, 3, 4), (4,), -1, (4,)),
    ((2, 3, 4), (3,), 1, (1, 3, 1)),
    ((2, 3, 4), (2, 3), 0, (2, 3, 1)),
    ((2, 3, 4), (1, 3, 1), -1, None),
    ((5,), (1,), -1, None),
]


@pytest.mark.parametrize("op", list(ELEMENTWISE))
@pytest.mark.parametrize("xs,ys,axis,yr", BROADCASTS)
def test_elementwise(op, xs, ys, axis, yr):
    x, y = r(*xs), r(*ys)
    want = ELEMENTWISE[op](x, y.reshape(yr) if yr else y)
    check_output(op, {"X": x, "Y": y}, {"Out": want}, {"axis": axis}, rtol=1e-5)
    if op in ("elementwise_max", "elementwise_min"):
        y = y + 0.05  # keep ties away from the finite-difference step
    check_grad(op, {"X": x, "Y": y}, ["X", "Y"], {"axis": axis})


def test_mul_flattens():
    x, y = r(2, 3, 4), r(12, 5)
    check_output("mul", {"X": x, "Y": y}, {"Out": x.reshape(2, 12) @ y},
                 {"x_num_col_dims": 1})
    x2, y2 = r(2, 3, 4), r(4, 5)
    check_output("mul", {"X": x2, "Y": y2}, {"Out": (x2.reshape(6, 4) @ y2).reshape(2, 3, 5)},
                 {"x_num_col_dims": 2})
    check_grad("mul", {"X": x, "Y": y}, ["X", "Y"])
    check_grad("mul", {"X": x2, "Y": y2}, ["X", "Y"], {"x_num_col_dims": 2})


@pytest.mark.parametrize("xs,ys,tx,ty", [((3, 4), (4, 5), False, False),
                                         ((4, 3), (4, 5), True, False),
                                         ((3, 4), (5, 4), False, True),
                                         ((2, 3, 4), (4, 5), False, False),
                                         ((2, 3, 4), (2, 4, 5), False, False),
                                         ((4,), (4, 5), False, False),
                                         ((3, 4), (4,), False, False)])
@pytest.mark.parametrize("op", ["matmul", "matmul_v2"])
def test_matmul(op, xs, ys, tx, ty):
    x, y = r(*xs), r(*ys)
    a = x.swapaxes(-1, -2) if tx else x
    b = y.swapaxes(-1, -2) if ty else y
    names = ("transpose_X", "transpose_Y") if op == "matmul" else ("trans_x", "trans_y")
    attrs = {names[0]: tx, names[1]: ty}
    check_output(op, {"X": x, "Y": y}, {"Out": np.matmul(a, b)}, attrs, rtol=1e-5)
    check_grad(op, {"X": x, "Y": y}, ["X", "Y"], attrs)


def test_matmul_alpha():
    x, y = r(3, 4), r(4, 2)
    check_output("matmul", {"X": x, "Y": y}, {"Out": 0.5 * x @ y}, {"alpha": 0.5})
    check_grad("matmul", {"X": x, "Y": y}, ["X", "Y"], {"alpha": 0.5})


def test_sum_and_mean():
    a, b, c = r(2, 3), r(2, 3), r(2, 3)
    check_output("sum", {"X": [("a", a), ("b", b), ("c", c)]}, {"Out": a + b + c})
    check_grad("sum", {"X": [("a", a), ("b", b)]}, [("X", 0), ("X", 1)])
    check_output("mean", {"X": a}, {"Out": np.array([a.mean()], np.float32)})   # [1], Fluid 1.x
    check_grad("mean", {"X": a}, ["X"])


ACTIVATIONS = {
    "relu": lambda x: np.maximum(x, 0), "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "tanh": np.tanh, "exp": np.exp, "log": np.log, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x), "square": np.square, "abs": np.abs,
    "reciprocal": lambda x: 1 / x, "sin": np.sin, "cos": np.cos,
    "softsign": lambda x: x / (1 + np.abs(x)), "softplus": lambda x: np.log1p(np.exp(x)),
    "logsigmoid": lambda x: -np.log1p(np.exp(-x)), "silu": lambda x: x / (1 + np.exp(-x)),
    "floor": np.floor, "ceil": np.ceil, "round": np.round, "sign": np.sign,
}
SMOOTH = {"relu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "square", "abs",
          "reciprocal", "sin", "cos", "softsign", "softplus", "logsigmoid", "silu"}


@pytest.mark.parametrize("op", list(ACTIVATIONS))
def test_activation(op):
    x = rng.uniform(0.2, 2.0, size=(3, 5)).astype(np.float32)
    if op in ("relu", "abs", "sign", "sin", "cos", "softsign", "tanh", "sigmoid"):
        x = x * np.where(rng.random(x.shape) < 0.5, -1, 1).astype(np.float32)
    check_output(op, {"X": x}, {"Out": ACTIVATIONS[op](x).astype(np.float32)}, rtol=1e-5,
                 atol=1e-6)
    if op in SMOOTH:
        check_grad(op, {"X": x}, ["X"])


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax(axis):
    x = r(3, 4, 5)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    check_output("softmax", {"X": x}, {"Out": e / e.sum(axis=axis, keepdims=True)},
                 {"axis": axis})
    check_grad("softmax", {"X": x}, ["X"], {"axis": axis})


def test_softmax_clips_shifted_logits_at_minus_64_as_fluid():
    """Fluid clips X - max(X) at -64, so a logit 100 below the row's largest still gets
    exp(-64) / sum, not 0 (compiled and interpreted alike: run_op compares both)."""
    x = np.array([[0.0, -100.0, -10.0], [50.0, 50.0, -30.0]], np.float32)
    got = run_op("softmax", {"X": x})["Out"]
    e = np.exp(np.maximum(x - x.max(axis=1, keepdims=True), -64.0))
    np.testing.assert_allclose(got, e / e.sum(axis=1, keepdims=True), rtol=1e-6)
    assert got[0, 1] > 0 and np.isfinite(np.log(got)).all()


def test_leaky_relu_pow_gelu():
    x = rng.uniform(-2, 2, size=(4, 3)).astype(np.float32)
    x[np.abs(x) < 0.05] = 0.3
    check_output("leaky_relu", {"X": x}, {"Out": np.where(x > 0, x, 0.1 * x)}, {"alpha": 0.1})
    check_grad("leaky_relu", {"X": x}, ["X"], {"alpha": 0.1})
    xp = np.abs(x) + 0.5
    check_output("pow", {"X": xp}, {"Out": xp ** 2.5}, {"factor": 2.5}, rtol=1e-5)
    check_grad("pow", {"X": xp}, ["X"], {"factor": 2.5})
    from math import erf
    want = 0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2)))
    check_output("gelu", {"X": x}, {"Out": want.astype(np.float32)}, rtol=1e-5, atol=1e-6)
    for approx in (False, True):
        check_grad("gelu", {"X": x}, ["X"], {"approximate": approx})


def test_creation_ops():
    from op_test import run_op
    out = run_op("fill_constant", {}, {"shape": [2, 3], "value": 1.5, "dtype": 6})
    np.testing.assert_array_equal(out["Out"], np.full((2, 3), 1.5))
    assert out["Out"].dtype == np.float64
    u = run_op("uniform_random", {}, {"shape": [1000], "min": -2.0, "max": 3.0, "seed": 5})["Out"]
    assert u.min() >= -2 and u.max() < 3 and abs(u.mean() - 0.5) < 0.2
    u2 = run_op("uniform_random", {}, {"shape": [1000], "min": -2.0, "max": 3.0, "seed": 5})
    np.testing.assert_array_equal(u, u2["Out"])  # seeded: reproducible
    g = run_op("gaussian_random", {}, {"shape": [4000], "mean": 1.0, "std": 2.0, "seed": 3})
    assert abs(g["Out"].mean() - 1.0) < 0.15 and abs(g["Out"].std() - 2.0) < 0.15
    t = run_op("truncated_gaussian_random", {}, {"shape": [4000], "std": 1.0, "seed": 3})["Out"]
    assert np.abs(t).max() <= 2.0
    x = r(2, 3)
    check_output("assign", {"X": x}, {"Out": x})
    check_output("fill_zeros_like", {"X": x}, {"Out": np.zeros_like(x)})
    check_output("fill_any_like", {"X": x}, {"Out": np.full_like(x, 7.0)}, {"value": 7.0})
    av = run_op("assign_value", {}, {"shape": [2, 2], "dtype": 5,
                                      "fp32_values": [1.0, 2.0, 3.0, 4.0]})["Out"]
    np.testing.assert_array_equal(av, [[1, 2], [3, 4]])


def test_lookup_table_forward_and_grad():
    w = r(6, 3)
    ids = np.array([[1], [4], [1]], np.int64)
    check_output("lookup_table", {"W": w, "Ids": ids}, {"Out": w[[1, 4, 1]]})
    check_output("lookup_table", {"W": w, "Ids": ids}, {"Out": w[[1, 4, 1]] * [[1], [0], [1]]},
                 {"padding_idx": 4})
    check_grad("lookup_table", {"W": w, "Ids": ids}, ["W"])
    ids2 = np.array([[1, 2], [5, 1]], np.int64)
    check_output("lookup_table_v2", {"W": w, "Ids": ids2}, {"Out": w[ids2]})
    check_grad("lookup_table_v2", {"W": w, "Ids": ids2}, ["W"])
    from fluidity.errors import ExecutionError
    with pytest.raises(ExecutionError, match="id 9 is out of range for a table of 6 rows"):
        check_output("lookup_table", {"W": w, "Ids": np.array([[9]], np.int64)}, {"Out": w[:1]})


# --- fc (mul + bias + relu) and its Fluidity grad -------------------------------------------
@pytest.mark.parametrize("act", ["", "relu"])
def test_fc_forward_and_grad(act):
    r = np.random.default_rng(5)
    x = r.normal(size=(5, 4)).astype(np.float32)
    w = r.normal(size=(4, 3)).astype(np.float32)
    b = r.normal(size=(3,)).astype(np.float32)
    want = x @ w + b
    if act:
        want = np.maximum(want, 0)
    attrs = {"activation_type": act}
    check_output("fc", {"Input": x, "W": w, "Bias": b}, {"Out": want}, attrs)
    check_grad("fc", {"Input": x, "W": w, "Bias": b}, ["Input", "W", "Bias"], attrs)
    check_output("fc", {"Input": x, "W": w}, {"Out": want - b if not act else
                                              np.maximum(x @ w, 0)}, attrs)
    check_grad("fc", {"Input": x, "W": w}, ["Input", "W"], attrs)


def test_fc_flattens_leading_dims_and_pads_weights_as_paddle():
    r = np.random.default_rng(6)
    x = r.normal(size=(2, 3, 4)).astype(np.float32)
    w = r.normal(size=(4, 5)).astype(np.float32)
    b = r.normal(size=(5,)).astype(np.float32)
    check_output("fc", {"Input": x, "W": w, "Bias": b}, {"Out": x @ w + b},
                 {"in_num_col_dims": 2})
    check_grad("fc", {"Input": x, "W": w, "Bias": b}, ["Input", "W", "Bias"],
               {"in_num_col_dims": 2, "activation_type": "relu"})
    padded = np.zeros((8, 9), np.float32)  # padding_weights: W stored with 4 extra rows/cols
    padded[:4, :5] = w
    check_output("fc", {"Input": x.reshape(6, 4), "W": padded, "Bias": b},
                 {"Out": x.reshape(6, 4) @ w + b}, {"padding_weights": True})
    check_grad("fc", {"Input": x.reshape(6, 4), "W": padded, "Bias": b}, ["W"],
               {"padding_weights": True})
    with pytest.raises(Exception, match="activation_type must be '' or 'relu'"):
        run_op("fc", {"Input": x, "W": w}, {"activation_type": "tanh"})
    with pytest.raises(Exception, match="has 4 columns but W has 3 rows"):
        run_op("fc", {"Input": x.reshape(6, 4), "W": w[:3]})


@pytest.mark.parametrize("op", ["uniform_random", "gaussian_random"])
def test_a_seeded_random_op_gives_the_same_values_every_run_as_paddles(op):
    """Paddle reseeds its engine per run when `seed` is set: a startup program with
    random_seed initializes the same parameters each time it runs; seed 0 differs per run."""
    import fluidity as fluid
    runs = {}
    for seed in (5, 0):
        main = fluid.Program()
        block = main.global_block()
        out = block.create_var(name="out", dtype="float32", shape=[4, 3])
        block.append_op(type=op, outputs={"Out": [out]},
                        attrs={"shape": [4, 3], "dtype": 5, "seed": seed})
        exe = fluid.Executor()
        runs[seed] = [exe.run(main, fetch_list=[out])[0] for _ in range(2)]
    np.testing.assert_array_equal(runs[5][0], runs[5][1])
    assert not np.array_equal(runs[0][0], runs[0][1])


def test_matmul_v2_ignores_transpose_flags_of_a_1d_operand():
    """A 1-D operand is a vector whatever trans_x / trans_y say (Paddle's kernel): shape
    inference agrees with the kernel instead of refusing the program."""
    from op_test import run_op
    x, y = rng.normal(size=4).astype(np.float32), rng.normal(size=(2, 4, 5)).astype(np.float32)
    got = run_op("matmul_v2", {"X": x, "Y": y}, {"trans_x": True}, ["Out"])["Out"]
    np.testing.assert_allclose(got, np.matmul(x, y), rtol=1e-5)
    v = rng.normal(size=5).astype(np.float32)
    got = run_op("matmul_v2", {"X": y, "Y": v}, {"trans_y": True}, ["Out"])["Out"]
    np.testing.assert_allclose(got, np.matmul(y, v), rtol=1e-5)
