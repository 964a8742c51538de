"""Comparison/logical ops, increment, where, clip, arg_max/arg_min, allclose
(fluidity/ops/logic.py)."""
import numpy as np
import pytest

from fluidity.errors import FluidityError
from op_test import build_op, check_grad, check_output, run_op

rng = np.random.default_rng(0)


def r(*shape):
    return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)


def build_fails(op_type, inputs, attrs=None):
    with pytest.raises(FluidityError) as e:
        build_op(op_type, inputs, attrs)
    assert f"'{op_type}'" in str(e.value)
    return str(e.value)


COMPARE = {"less_than": np.less, "less_equal": np.less_equal, "greater_than": np.greater,
           "greater_equal": np.greater_equal, "equal": np.equal, "not_equal": np.not_equal}


@pytest.mark.parametrize("op", list(COMPARE))
@pytest.mark.parametrize("xs,ys,axis,yr", [((2, 3), (2, 3), -1, None), ((2, 3), (3,), -1, None),
                                           ((2, 3, 4), (3,), 1, (1, 3, 1)),
                                           ((1,), (1,), -1, None)])
def test_compare(op, xs, ys, axis, yr):
    x = rng.integers(0, 3, size=xs).astype(np.float32)   # ties happen
    y = rng.integers(0, 3, size=ys).astype(np.float32)
    want = COMPARE[op](x, y.reshape(yr) if yr else y)
    got = check_output(op, {"X": x, "Y": y}, {"Out": want}, {"axis": axis})
    assert got["Out"].dtype == np.bool_


def test_compare_int64_and_mismatch():
    i, n = np.array([3], np.int64), np.array([5], np.int64)
    check_output("less_than", {"X": i, "Y": n}, {"Out": np.array([True])})
    msg = build_fails("less_than", {"X": r(2, 3), "Y": r(4)})
    assert "[2, 3]" in msg and "[4]" in msg


LOGICAL = {"logical_and": np.logical_and, "logical_or": np.logical_or,
           "logical_xor": np.logical_xor}


@pytest.mark.parametrize("op", list(LOGICAL))
def test_logical(op):
    x = np.array([[True, False, True], [False, False, True]])
    y = np.array([True, False, False])
    check_output(op, {"X": x, "Y": y}, {"Out": LOGICAL[op](x, y)})
    check_output(op, {"X": x, "Y": x}, {"Out": LOGICAL[op](x, x)})


def test_logical_not():
    x = np.array([True, False])
    check_output("logical_not", {"X": x}, {"Out": ~x})


def test_increment():
    check_output("increment", {"X": np.array([3], np.int64)}, {"Out": np.array([5], np.int64)},
                 {"step": 2.0})
    check_output("increment", {"X": np.array([0.5], np.float32)},
                 {"Out": np.array([1.5], np.float32)})
    build_fails("increment", {"X": r(2)})


def test_where():
    c = np.array([[True, False, True], [False, True, False]])
    x, y = r(2, 3), r(2, 3)
    check_output("where", {"Condition": c, "X": x, "Y": y}, {"Out": np.where(c, x, y)})
    check_grad("where", {"Condition": c, "X": x, "Y": y}, ["X", "Y"])
    msg = build_fails("where", {"Condition": c, "X": x, "Y": r(3, 2)})
    assert "[2, 3]" in msg and "[3, 2]" in msg


def test_where_index():
    c = np.array([[True, False], [False, True], [True, True]])
    check_output("where_index", {"Condition": c}, {"Out": np.argwhere(c).astype(np.int64)})


def test_clip():
    x = np.linspace(-1, 1, 12).reshape(3, 4).astype(np.float32) + 0.01  # no value on a bound
    check_output("clip", {"X": x}, {"Out": np.clip(x, -0.5, 0.3)}, {"min": -0.5, "max": 0.3})
    check_grad("clip", {"X": x}, ["X"], {"min": -0.5, "max": 0.3})
    got = run_op("clip", {"X": x, "Min": np.array([0.0], np.float32)}, {"min": -9.0, "max": 0.5})
    np.testing.assert_allclose(got["Out"], np.clip(x, 0.0, 0.5))
    build_fails("clip", {"X": x}, {"min": 1.0, "max": 0.0})


@pytest.mark.parametrize("op,f", [("arg_max", np.argmax), ("arg_min", np.argmin)])
@pytest.mark.parametrize("axis,keep", [(0, False), (1, True), (-1, False), (-3, True)])
def test_arg_min_max(op, f, axis, keep):
    x = r(2, 3, 4)
    want = f(x, axis=axis)
    if keep:
        want = np.expand_dims(want, axis)
    got = check_output(op, {"X": x}, {"Out": want.astype(np.int64)},
                       {"axis": axis, "keepdims": keep})
    assert got["Out"].dtype == np.int64


def test_arg_max_flatten_dtype_and_1d():
    x = r(3, 4)
    check_output("arg_max", {"X": x}, {"Out": np.array(x.argmax(), np.int64)},   # 0-D
                 {"flatten": True})
    check_output("arg_max", {"X": x}, {"Out": np.array([[x.argmax()]], np.int64)},
                 {"flatten": True, "keepdims": True})
    check_output("arg_min", {"X": x}, {"Out": x.argmin(axis=1).astype(np.int32)},
                 {"axis": 1, "dtype": 2})
    check_output("arg_max", {"X": x[0]}, {"Out": np.array(x[0].argmax(), np.int64)},
                 {"axis": 0})
    build_fails("arg_max", {"X": x}, {"axis": 2})


def test_layers_build_and_run():
    import fluidity as fluid
    L = fluid.layers
    x_np, y_np = r(2, 3), r(2, 3)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [2, 3], append_batch_size=False)
        y = L.data("y", [2, 3], append_batch_size=False)
        outs = {op: getattr(L, op)(x, y) for op in COMPARE}
        a, b = outs["less_than"], outs["greater_equal"]
        outs.update({op: getattr(L, op)(a, b) for op in LOGICAL})
        outs["logical_not"] = L.logical_not(a)
        cond = L.create_tensor("bool")
        L.less_than(x, y, cond=cond)
        outs["cond"] = cond
        i = L.fill_constant([1], "int64", 3)
        L.increment(i, 2)                       # in place
        outs["i"] = i
        outs["i2"] = L.increment(i, value=1.0, in_place=False)
        outs["argmax"] = L.argmax(x, axis=1)
        outs["argmin"] = L.argmin(x, axis=0)
        outs["clip"] = L.clip(x, -0.5, 0.5)
        outs["where"] = L.where(a, x, y)
        outs["where_index"] = L.where(a)
    got = dict(zip(outs, fluid.Executor(fluid.CPUPlace()).run(
        main, feed={"x": x_np, "y": y_np}, fetch_list=list(outs.values()))))
    lt, ge = x_np < y_np, x_np >= y_np
    want = {op: f(x_np, y_np) for op, f in COMPARE.items()}
    want.update({op: f(lt, ge) for op, f in LOGICAL.items()})
    want.update({"logical_not": ~lt, "cond": lt, "i": [5], "i2": [6],
                 "argmax": x_np.argmax(1), "argmin": x_np.argmin(0),
                 "clip": np.clip(x_np, -0.5, 0.5), "where": np.where(lt, x_np, y_np),
                 "where_index": np.argwhere(lt)})
    for k, w in want.items():
        np.testing.assert_allclose(got[k], np.asarray(w), rtol=1e-6, err_msg=k)
    assert got["argmax"].dtype == np.int64 and got["less_than"].dtype == np.bool_


def test_where_layer_grad():
    import fluidity as fluid
    from fluidity.backward import gradients
    L = fluid.layers
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [4], append_batch_size=False, stop_gradient=False)
        y = L.data("y", [4], append_batch_size=False, stop_gradient=False)
        out = L.reduce_sum(L.where(L.greater_than(x, y), x, L.clip(y, -0.5, 0.5)))
        gx, gy = gradients([out], [x, y])
    x_np = np.array([1.0, -1.0, 0.2, 0.0], np.float32)
    y_np = np.array([0.0, 0.9, 0.3, -0.9], np.float32)
    got_x, got_y = fluid.Executor(fluid.CPUPlace()).run(
        main, feed={"x": x_np, "y": y_np}, fetch_list=[gx, gy])
    np.testing.assert_array_equal(got_x, [1, 0, 0, 1])
    np.testing.assert_array_equal(got_y, [0, 0, 1, 0])   # clipped where |y| > 0.5


@pytest.mark.parametrize("a,b,kw,want", [
    ([10000., 1e-07], [10000.1, 1e-08], {}, False),
    ([10000., 1e-08], [10000.1, 1e-09], {}, True),
    ([1.0, np.nan], [1.0, np.nan], {}, False),
    ([1.0, np.nan], [1.0, np.nan], {"equal_nan": True}, True),
    ([1.0, np.nan], [1.0, 2.0], {"equal_nan": True}, False),
    ([1.0, 1.1], [1.0, 1.0], {"rtol": 0.2}, True),
])
def test_allclose(a, b, kw, want):
    got = run_op("allclose", {"Input": np.array(a, np.float32),
                              "Other": np.array(b, np.float32)}, kw)["Out"]
    assert got.shape == (1,) and got.dtype == np.bool_ and bool(got[0]) is want
