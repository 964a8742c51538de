"""Slicing and gathering ops (fluidity/ops/indexing.py): forward against numpy, gradients
against finite differences, shape errors."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.errors import ExecutionError, FluidityError
from op_test import check_grad, check_output, run_op
from test_tensor_ops import build_fails, r

L = fluid.layers


# --- slice ---------------------------------------------------------------------------------
SLICES = [  # axes, starts, ends, decrease_axis, numpy index
    ([0], [1], [3], [], np.s_[1:3]),
    ([1, 2], [-2, 0], [10000, -1], [], np.s_[:, -2:, 0:-1]),
    ([0, 2], [-100, 2], [1, 3], [0, 2], np.s_[0, :, 2]),
    ([1], [3], [1], [], np.s_[:, 3:1]),            # empty range -> 0-size dim
    ([2], [-1], [100], [], np.s_[:, :, -1:]),
]


@pytest.mark.parametrize("axes,starts,ends,dec,idx", SLICES)
def test_slice(axes, starts, ends, dec, idx):
    x = r(3, 4, 5)
    attrs = {"axes": axes, "starts": starts, "ends": ends, "decrease_axis": dec,
             "infer_flags": [1] * len(axes)}
    check_output("slice", {"Input": x}, {"Out": x[idx]}, attrs)
    if x[idx].size:
        check_grad("slice", {"Input": r(3, 4, 3)}, ["Input"],
                   {**attrs, "ends": [min(e, 3) if a == 2 else e for a, e in zip(axes, ends)]})


def test_slice_all_decreased_is_shape_1_and_tensors():
    x = r(3, 4)
    attrs = {"axes": [0, 1], "starts": [1, 2], "ends": [2, 3], "decrease_axis": [0, 1]}
    check_output("slice", {"Input": x}, {"Out": x[1, 2:3]}, attrs)   # [1], as Fluid 1.x
    check_grad("slice", {"Input": x}, ["Input"], attrs)
    check_output("strided_slice", {"Input": x}, {"Out": x[1, 2:3]}, {**attrs, "strides": [1, 1]})
    got = run_op("slice", {"Input": x, "StartsTensor": np.array([1], np.int64),
                           "EndsTensorList": [("e0", np.array([3], np.int32))]},
                 {"axes": [1], "starts": [-1], "ends": [-1], "infer_flags": [-1]})
    np.testing.assert_array_equal(got["Out"], x[:, 1:3])


def test_slice_bad_decrease_fails():
    msg = build_fails("slice", {"Input": r(3, 4)},
                      {"axes": [0], "starts": [0], "ends": [2], "decrease_axis": [0]})
    assert "[3, 4]" in msg


# --- gather ------------------------------------------------------------------------------
# --- slice of a LoDTensorArray (Fluid 1.8: entries of the array, or one with decrease_axis) --
def _array_slice_program(key, weights):
    """x0..x3 written into an array, sliced by `key` (arr[key] as a Fluid program writes
    it), stacked if still an array, and loss = sum(out * weights)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xs = [fluid.data(f"x{i}", [2, 3], "float64") for i in range(4)]
        arr = L.create_array("float64")
        for x in xs:
            x.stop_gradient = False
            L.array_write(x, L.array_length(arr), array=arr)
        sliced = arr[key]
        out = sliced
        if sliced.type == fluid.core.VarDesc.VarType.LOD_TENSOR_ARRAY:
            out, _ = L.tensor_array_to_tensor(sliced, axis=0, use_stack=True)
        w = fluid.data("w", list(weights.shape), "float64")
        loss = L.reduce_sum(L.elementwise_mul(out, w))
        grads = fluid.gradients(loss, xs)
    return main, sliced, out, loss, grads


@pytest.mark.parametrize("key, entries, decreased", [
    (1, [1], True), (-1, [3], True), (slice(1, 3), [1, 2], False),
    (slice(-3, 100), [1, 2, 3], False), (slice(None, 2), [0, 1], False)])
def test_slice_of_a_tensor_array_and_its_gradient(key, entries, decreased):
    rng = np.random.default_rng(4)
    vals = [rng.normal(size=(2, 3)) for _ in range(4)]
    shape = (2, 3) if decreased else (len(entries), 2, 3)
    weights = rng.normal(size=shape)
    main, sliced, out, loss, grads = _array_slice_program(key, weights)
    VT = fluid.core.VarDesc.VarType
    assert sliced.type == (VT.LOD_TENSOR if decreased else VT.LOD_TENSOR_ARRAY)
    assert tuple(sliced.shape) == (2, 3)            # Fluid declares the entries' shape
    exe = fluid.Executor()
    feed = {f"x{i}": v for i, v in enumerate(vals)}
    feed["w"] = weights
    got = exe.run(main, feed=feed, fetch_list=[out] + grads)
    want = vals[entries[0]] if decreased else np.stack([vals[e] for e in entries])
    np.testing.assert_array_equal(got[0], want)
    # the loss is linear in each x: its gradient is the weight of the entry x landed in,
    # zeros for the entries the slice left out; checked by finite differences too
    for i, g in enumerate(got[1:]):
        w_i = (weights if decreased else weights[entries.index(i)]) if i in entries \
            else np.zeros((2, 3))
        np.testing.assert_allclose(g, w_i, rtol=1e-12, atol=0)
    f0 = float(exe.run(main, feed=feed, fetch_list=[loss])[0])
    bumped = dict(feed, **{f"x{entries[0]}": vals[entries[0]] + 1e-3})
    f1 = float(exe.run(main, feed=bumped, fetch_list=[loss])[0])
    np.testing.assert_allclose((f1 - f0) / 1e-3, got[1 + entries[0]].sum(), rtol=1e-9)


def test_slice_of_a_tensor_array_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        arr = L.create_array("float32")
        L.array_write(fluid.data("x", [2], "float32"), L.zeros([1], "int64"), array=arr)
        out = fluid.default_main_program().global_block().create_var(name="o")
        with pytest.raises(ValueError, match="one axis"):
            fluid.default_main_program().global_block().append_op(
                "slice", {"Input": arr}, {"Out": out},
                {"axes": [0, 1], "starts": [0, 0], "ends": [1, 1]})
        empty = arr[2:5]
        with pytest.raises(ExecutionError, match="greater than starts"):
            fluid.Executor().run(feed={"x": np.ones(2, np.float32)}, fetch_list=[
                L.tensor_array_to_tensor(empty, axis=0)[0]])


@pytest.mark.parametrize("axis,index", [(0, [2, 0, 2]), (1, [[1], [0]]), (-1, [3, 3, 0])])
def test_gather(axis, index):
    x = r(3, 2, 4)
    idx = np.array(index, np.int64)
    want = np.take(x, idx.reshape(-1), axis=axis)
    check_output("gather", {"X": x, "Index": idx}, {"Out": want}, {"axis": axis})
    check_grad("gather", {"X": x, "Index": idx}, ["X"], {"axis": axis})


def test_gather_errors():
    build_fails("gather", {"X": r(3, 2), "Index": np.zeros((2, 2), np.int64)})
    with pytest.raises(FluidityError, match="out of range"):
        run_op("gather", {"X": r(3, 2), "Index": np.array([3], np.int64)})


# --- index_sample ----------------------------------------------------------------------------
def test_index_sample():
    rng = np.random.default_rng(7)
    x = rng.uniform(size=(4, 6))
    idx = np.array([[0, 5, 5], [1, 1, 2], [3, 0, 4], [2, 2, 2]], np.int64)
    want = np.array([[x[i, j] for j in row] for i, row in enumerate(idx)])
    check_output("index_sample", {"X": x, "Index": idx.astype(np.int32)}, {"Out": want})
    check_grad("index_sample", {"X": x, "Index": idx}, ["X"])
    with pytest.raises(ExecutionError, match="outside \\[0, 6\\)"):
        run_op("index_sample", {"X": x, "Index": idx + 1})
    with pytest.raises(ExecutionError, match="same number of rows"):
        run_op("index_sample", {"X": x, "Index": idx[:2]})


# --- multiplex -------------------------------------------------------------------------------
def test_multiplex():
    rng = np.random.default_rng(12)
    a, b, c = (rng.uniform(-1, 1, size=(4, 3)).astype(np.float32) for _ in range(3))
    ids = np.array([[2], [0], [1], [2]], np.int32)
    want = np.stack([c[0], a[1], b[2], c[3]])
    ins = {"Ids": ids, "X": [("a", a), ("b", b), ("c", c)]}
    check_output("multiplex", ins, {"Out": want})
    check_grad("multiplex", ins, [("X", 0), ("X", 2)])


def test_contrib_index_sample_layer_end_to_end():
    # fluid.contrib.layers.index_sample (Paddle 1.8; PaddleRec's TDM infer network) picks
    # each row's entries by the indices topk gives, and trains through x
    import fluidity as fluid
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 5], "float32")
        x.stop_gradient = False
        _, top = fluid.layers.topk(x, k=2)
        got = fluid.contrib.layers.index_sample(x, top)
        gx = fluid.backward.gradients([fluid.layers.reduce_sum(got)], [x])[0]
    xv = np.random.default_rng(3).normal(size=(3, 5)).astype(np.float32)
    out, g = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv}, fetch_list=[got, gx])
    want = -np.sort(-xv, axis=1)[:, :2]
    np.testing.assert_allclose(out, want)
    np.testing.assert_array_equal(g.sum(axis=1), [2, 2, 2])
    with pytest.raises(TypeError):
        fluid.contrib.layers.index_sample(x, fluid.data("f", [None, 2], "float32"))
