"""Reductions (fluidity/ops/reduce.py): forward against numpy, gradients, shape rules."""
import numpy as np
import pytest

from fluidity.core.dtypes import VarType
from fluidity.errors import FluidityError
from op_test import build_op, check_grad, check_output, run_op

rng = np.random.default_rng(0)

NUMPY = {"reduce_sum": np.sum, "reduce_mean": np.mean, "reduce_max": np.max,
         "reduce_min": np.min, "reduce_prod": np.prod}
# dim, keep_dim, reduce_all, numpy axis
CASES = [([0], False, False, (0,)), ([1], True, False, (1,)), ([-1], False, False, (2,)),
         ([0, 2], False, False, (0, 2)), ([0, -1], True, False, (0, 2)),
         ([], False, False, None), ([1], False, True, None), ([0], True, True, None),
         ([0, 1, 2], False, False, None)]


def r(*shape):
    return rng.uniform(0.5, 1.5, size=shape).astype(np.float32)


@pytest.mark.parametrize("op", list(NUMPY))
@pytest.mark.parametrize("dim,keep,all_,axis", CASES)
def test_reduce(op, dim, keep, all_, axis):
    x = r(2, 3, 4)
    want = np.asarray(NUMPY[op](x, axis=axis, keepdims=keep), np.float32)
    want = want.reshape(want.shape or (1,))     # a full reduction is [1], as in Fluid 1.x
    attrs = {"dim": dim, "keep_dim": keep, "reduce_all": all_}
    check_output(op, {"X": x}, {"Out": want}, attrs)
    check_grad(op, {"X": r(2, 2, 3)}, ["X"], attrs)


def test_build_time_shapes():
    _, _, _, outs, _ = build_op("reduce_sum", {"X": r(2, 3, 4)}, {"dim": [1]})
    assert list(outs["Out"][0].shape) == [2, 4]
    _, _, _, outs, _ = build_op("reduce_mean", {"X": r(2, 3)}, {"reduce_all": True})
    assert list(outs["Out"][0].shape) == [1]          # Fluid 1.x's InferShape
    _, _, _, outs, _ = build_op("reduce_sum", {"X": r(2, 3)}, {"dim": [0, 1]})
    assert list(outs["Out"][0].shape) == [1]
    _, _, _, outs, _ = build_op("reduce_sum", {"X": r(2, 3)}, {"reduce_all": True,
                                                               "keep_dim": True})
    assert list(outs["Out"][0].shape) == [1, 1]
    _, _, _, outs, _ = build_op("reduce_max", {"X": r(2, 3)}, {"dim": [0], "keep_dim": True})
    assert list(outs["Out"][0].shape) == [1, 3]


def test_size_one_dims_and_1d():
    x = r(1, 3, 1)
    check_output("reduce_sum", {"X": x}, {"Out": x.sum(axis=(0, 2))}, {"dim": [0, 2]})
    v = r(5)
    check_output("reduce_prod", {"X": v}, {"Out": np.array([v.prod()], np.float32)},
                 {"dim": [0]})
    check_grad("reduce_prod", {"X": v}, ["X"], {"dim": [0]})


def test_max_min_ties_and_prod_zeros():
    x = np.array([[1.0, 3.0, 3.0], [2.0, 0.0, 2.0]])
    got = run_op("reduce_max", {"X": x}, {"dim": [1]})
    np.testing.assert_array_equal(got["Out"], [3.0, 2.0])
    # prod's gradient stays exact (no 0/0) when the group holds a zero
    check_grad("reduce_prod", {"X": np.array([[0.0, 2.0, 3.0], [1.5, 0.5, 2.0]])}, ["X"],
               {"dim": [1]})


def test_out_dtype_and_ints():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    check_output("reduce_sum", {"X": x}, {"Out": x.sum(axis=1)}, {"dim": [1]})
    check_output("reduce_sum", {"X": x}, {"Out": x.sum(axis=0).astype(np.float64)},
                 {"dim": [0], "out_dtype": VarType.FP64, "in_dtype": VarType.INT32})
    check_output("reduce_max", {"X": x}, {"Out": x.max(axis=0)}, {"dim": [0]})


def test_bad_dim_fails():
    with pytest.raises(FluidityError) as e:
        build_op("reduce_sum", {"X": r(2, 3)}, {"dim": [2]})
    assert "'reduce_sum'" in str(e.value) and "[2, 3]" in str(e.value)


def test_layers_build_and_run():
    import fluidity as fluid
    L = fluid.layers
    x_np = r(2, 3, 4)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [2, 3, 4], append_batch_size=False)
        outs, want = [], []
        for op, f in NUMPY.items():
            layer = getattr(L, op)
            outs += [layer(x), layer(x, dim=1), layer(x, dim=[0, -1], keep_dim=True)]
            want += [np.asarray(f(x_np)).reshape(1), f(x_np, axis=1),
                     f(x_np, axis=(0, 2), keepdims=True)]
    assert list(outs[0].shape) == [1] and list(outs[2].shape) == [1, 3, 1]
    got = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": x_np}, fetch_list=outs)
    for g, w, v in zip(got, want, outs):
        assert g.shape == np.shape(w), v.name
        np.testing.assert_allclose(g, w, rtol=1e-5, err_msg=v.name)
