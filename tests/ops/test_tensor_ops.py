"""Tensor manipulation ops (fluidity/ops/tensor.py): forward against numpy, gradients against
finite differences, shape errors; and the layer functions that build them and the shape and
indexing ops."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.core.dtypes import VarType
from fluidity.errors import FluidityError, ShapeError
from fluidity.backward import gradients
from op_test import build_op, check_grad, check_output, run_op

rng = np.random.default_rng(0)


def r(*shape):
    return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)


def build_fails(op_type, inputs, attrs=None, outputs=None):
    """Building the op raises a FluidityError naming the op; returns the message."""
    with pytest.raises(FluidityError) as e:
        build_op(op_type, inputs, attrs, outputs)
    assert f"'{op_type}'" in str(e.value)
    return str(e.value)


# --- cast --------------------------------------------------------------------------------
def test_cast():
    x = r(2, 3) * 4
    check_output("cast", {"X": x}, {"Out": x.astype(np.int32)},
                 {"in_dtype": VarType.FP32, "out_dtype": VarType.INT32})
    check_output("cast", {"X": x}, {"Out": x.astype(np.float64)},
                 {"in_dtype": VarType.FP32, "out_dtype": VarType.FP64})
    check_grad("cast", {"X": x}, ["X"], {"in_dtype": VarType.FP64, "out_dtype": VarType.FP64})


# --- concat / split / stack --------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(axis):
    shapes = {0: [(1, 3), (2, 3), (3, 3)], 1: [(2, 1), (2, 2), (2, 3)],
              -1: [(2, 1), (2, 2), (2, 3)]}[axis]
    xs = [(f"x{i}", r(*s)) for i, s in enumerate(shapes)]
    want = np.concatenate([v for _, v in xs], axis=axis)
    check_output("concat", {"X": xs}, {"Out": want}, {"axis": axis})
    check_grad("concat", {"X": xs}, [("X", 0), ("X", 1), ("X", 2)], {"axis": axis})


def test_concat_grad_skips_inputs_without_grad():
    # the middle input needs no gradient: concat_grad's X@GRAD holds @EMPTY@ there
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        a = fluid.layers.data("a", [2, 3], append_batch_size=False, stop_gradient=False)
        b = fluid.layers.data("b", [1, 3], append_batch_size=False)
        c = fluid.layers.data("c", [3, 3], append_batch_size=False, stop_gradient=False)
        out = fluid.layers.concat([a, b, c], axis=0)
        ga, gc = fluid.backward.gradients([out], [a, c])
    vals = {"a": r(2, 3), "b": r(1, 3), "c": r(3, 3)}
    exe = fluid.Executor(fluid.CPUPlace())
    got_a, got_c = exe.run(main, feed=vals, fetch_list=[ga, gc])
    np.testing.assert_array_equal(got_a, np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(got_c, np.ones((3, 3), np.float32))


def test_concat_axis_tensor():
    a, b = r(2, 2), r(2, 3)
    got = run_op("concat", {"X": [("a", a), ("b", b)], "AxisTensor": np.array([1], np.int32)})
    np.testing.assert_array_equal(got["Out"], np.concatenate([a, b], 1))


def test_concat_input_with_trailing_unit_dims_joins_as_x0s_rank():
    # Fluid 1.8 reads each input to X[0]'s rank: [N, 4] joined with [N, 1, 1, 1] on axis 1
    # is [N, 5] (PaddleCV's CGAN generator), and the gradient keeps [N, 1, 1, 1]
    a, b = r(3, 4), r(3, 1, 1, 1)
    want = np.concatenate([a, b.reshape(3, 1)], axis=1)
    check_output("concat", {"X": [("a", a), ("b", b)]}, {"Out": want}, {"axis": 1})
    check_grad("concat", {"X": [("a", a), ("b", b)]}, [("X", 0), ("X", 1)], {"axis": 1})
    # other rank mismatches are still refused
    build_fails("concat", {"X": [("a", r(3, 4)), ("b", r(3, 1, 2))]}, {"axis": 1})


def test_concat_mismatch_fails():
    msg = build_fails("concat", {"X": [("a", r(2, 3)), ("b", r(2, 4))]}, {"axis": 0})
    assert "[2, 3]" in msg and "[2, 4]" in msg
    build_fails("concat", {"X": [("a", r(2, 3)), ("b", r(2, 3))]}, {"axis": 2})


@pytest.mark.parametrize("attrs,n,cuts", [({"num": 3, "axis": 1}, 3, [2, 4]),
                                          ({"sections": [1, -1, 2], "axis": -1}, 3, [1, 4]),
                                          ({"sections": [2, 4], "axis": 1}, 2, [2])])
def test_split(attrs, n, cuts):
    x = r(2, 6)
    want = np.split(x, cuts, axis=1)
    check_output("split", {"X": x}, {"Out": want}, attrs, outputs={"Out": n})
    check_grad("split", {"X": x}, ["X"], attrs, outputs={"Out": n})


def test_split_tensor_args():
    x = r(2, 6)
    got = run_op("split", {"X": x, "AxisTensor": np.array([1], np.int32)}, {"num": 2},
                 outputs={"Out": 2})
    for a, b in zip(got["Out"], np.split(x, 2, axis=1)):
        np.testing.assert_array_equal(a, b)
    got = run_op("split", {"X": x, "SectionsTensorList": [("s0", np.array([1], np.int32)),
                                                          ("s1", np.array([-1], np.int32))]},
                 {"sections": [-1, -1], "axis": 1}, outputs={"Out": 2})
    assert [o.shape for o in got["Out"]] == [(2, 1), (2, 5)]


def test_expand_tensor_args():
    x = r(1, 2)
    got = run_op("expand", {"X": x, "ExpandTimes": np.array([3, 1], np.int32)})
    np.testing.assert_array_equal(got["Out"], np.tile(x, [3, 1]))
    got = run_op("expand_v2", {"X": x, "Shape": np.array([2, 3, -1], np.int32)})
    np.testing.assert_array_equal(got["Out"], np.broadcast_to(x, (2, 3, 2)))


def test_split_unused_output_gets_zero_grad():
    x = r(4, 2)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xv = fluid.layers.data("x", [4, 2], append_batch_size=False, stop_gradient=False)
        first, _ = fluid.layers.split(xv, 2, dim=0)
        gx, = fluid.backward.gradients([first], [xv])
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": x}, fetch_list=[gx])
    np.testing.assert_array_equal(got, np.array([[1, 1], [1, 1], [0, 0], [0, 0]], np.float32))


def test_split_bad_sizes_fail():
    msg = build_fails("split", {"X": r(2, 5)}, {"num": 2, "axis": 1}, outputs={"Out": 2})
    assert "5" in msg
    build_fails("split", {"X": r(2, 5)}, {"sections": [2, 2], "axis": 1}, outputs={"Out": 2})


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_stack(axis):
    xs = [(f"x{i}", r(2, 3)) for i in range(3)]
    want = np.stack([v for _, v in xs], axis=axis)
    check_output("stack", {"X": xs}, {"Y": want}, {"axis": axis})
    check_grad("stack", {"X": xs}, [("X", 0), ("X", 2)], {"axis": axis})


def test_stack_mismatch_fails():
    build_fails("stack", {"X": [("a", r(2, 3)), ("b", r(3, 2))]})


# --- expand / expand_v2 ----------------------------------------------------------------------
@pytest.mark.parametrize("xs,times", [((2, 3), [2, 1]), ((1, 3), [3, 2]), ((2, 1, 2), [1, 3, 2])])
def test_expand(xs, times):
    x = r(*xs)
    check_output("expand", {"X": x}, {"Out": np.tile(x, times)}, {"expand_times": times})
    check_grad("expand", {"X": x}, ["X"], {"expand_times": times})


def test_expand_bad_times_fails():
    build_fails("expand", {"X": r(2, 3)}, {"expand_times": [2]})


@pytest.mark.parametrize("xs,shape,want", [((1, 3), [4, 3], (4, 3)), ((3,), [2, 3], (2, 3)),
                                           ((2, 1), [-1, 4], (2, 4)),
                                           ((2, 1), [2, 2, -1], (2, 2, 1))])
def test_expand_v2(xs, shape, want):
    x = r(*xs)
    check_output("expand_v2", {"X": x}, {"Out": np.broadcast_to(x, want)}, {"shape": shape})
    check_grad("expand_v2", {"X": x}, ["X"], {"shape": shape})


def test_expand_v2_bad_shape_fails():
    msg = build_fails("expand_v2", {"X": r(2, 3)}, {"shape": [2, 4]})
    assert "[2, 3]" in msg


# --- one_hot, range ----------------------------------------------------------------------
def test_one_hot():
    ids = np.array([[1], [0], [3]], np.int64)
    want = np.eye(4, dtype=np.float32)[[1, 0, 3]]
    check_output("one_hot", {"X": ids}, {"Out": want}, {"depth": 4})
    check_output("one_hot_v2", {"X": ids[:, 0]}, {"Out": want}, {"depth": 4})
    check_output("one_hot_v2", {"X": ids}, {"Out": want[:, None, :]}, {"depth": 4})
    check_output("one_hot", {"X": ids, "depth_tensor": np.array([5], np.int32)},
                 {"Out": np.eye(5, dtype=np.float32)[[1, 0, 3]]})
    with pytest.raises(FluidityError, match="outside"):
        run_op("one_hot", {"X": ids}, {"depth": 3})
    got = run_op("one_hot", {"X": ids}, {"depth": 3, "allow_out_of_range": True})
    np.testing.assert_array_equal(got["Out"][2], np.zeros(3, np.float32))
    # a [3, 2] X builds (Fluid 1.8's build-time check is last dim >= 1), fails when run
    with pytest.raises(FluidityError, match=r"\[\.\.\., 1\] ids"):
        run_op("one_hot", {"X": np.zeros((3, 2), np.int64)}, {"depth": 3})


def test_range():
    check_output("range", {"Start": np.array([1.0], np.float32),
                           "End": np.array([2.0], np.float32),
                           "Step": np.array([0.25], np.float32)},
                 {"Out": np.arange(1.0, 2.0, 0.25, dtype=np.float32)})
    check_output("range", {"Start": np.array([5], np.int64), "End": np.array([0], np.int64),
                           "Step": np.array([-2], np.int64)},
                 {"Out": np.array([5, 3, 1], np.int64)})


def test_errors_are_fluidity_errors():
    assert issubclass(ShapeError, FluidityError)


# --- layer functions ---------------------------------------------------------------------
def test_layers_build_and_run():
    L = fluid.layers
    x_np, y_np = r(2, 3, 4), r(2, 3, 4)
    ids_np = np.array([[1], [0]], np.int64)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [2, 3, 4], append_batch_size=False)
        y = L.data("y", [2, 3, 4], append_batch_size=False)
        ids = L.data("ids", [2, 1], dtype="int64", append_batch_size=False)
        n = L.fill_constant([1], "int32", 6)
        outs = {
            "concat": L.concat([x, y], axis=1),
            "split": L.split(x, [1, -1], dim=1)[1],
            "split_num": L.split(x, 2, dim=-1)[0],
            "reshape": L.reshape(x, [0, -1]),
            "reshape_t": L.reshape(x, [n, -1]),
            "transpose": L.transpose(x, [2, 0, 1]),
            "squeeze": L.squeeze(L.unsqueeze(x, [0, 3]), [0]),
            "flatten": L.flatten(x, axis=2),
            "slice": L.slice(x, axes=[1, 2], starts=[1, -3], ends=[100, -1]),
            "gather": L.gather(x, ids),
            "stack": L.stack([x, y], axis=1),
            "expand": L.expand(x, [1, 2, 1]),
            "cast": L.cast(x, "float64"),
            "shape": L.shape(x),
            "one_hot": L.one_hot(ids, 4),
        }
    assert list(outs["concat"].shape) == [2, 6, 4]
    assert list(outs["reshape"].shape) == [2, 12]
    assert list(outs["slice"].shape) == [2, 2, 2]
    assert outs["cast"].dtype == VarType.FP64
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    got = dict(zip(outs, exe.run(main, feed={"x": x_np, "y": y_np, "ids": ids_np},
                                 fetch_list=list(outs.values()))))
    want = {
        "concat": np.concatenate([x_np, y_np], 1), "split": x_np[:, 1:],
        "split_num": x_np[..., :2], "reshape": x_np.reshape(2, 12),
        "reshape_t": x_np.reshape(6, 4), "transpose": x_np.transpose(2, 0, 1),
        "squeeze": x_np[:, :, None, :], "flatten": x_np.reshape(6, 4),
        "slice": x_np[:, 1:, 1:3], "gather": x_np[[1, 0]],
        "stack": np.stack([x_np, y_np], 1), "expand": np.tile(x_np, [1, 2, 1]),
        "cast": x_np.astype(np.float64), "shape": np.array([2, 3, 4], np.int32),
        "one_hot": np.eye(4, dtype=np.float32)[[1, 0]],
    }
    for k in want:
        np.testing.assert_allclose(got[k], want[k], err_msg=k)


def test_layers_backward_through_shape_ops():
    L = fluid.layers
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [2, 3], append_batch_size=False, stop_gradient=False)
        h = L.transpose(L.reshape(x, [3, 2]), [1, 0])
        h = L.concat([L.squeeze(L.unsqueeze(h, [1]), [1]), x], axis=0)
        loss = fluid.layers.mean(L.slice(h, axes=[0], starts=[1], ends=[3]))
        gx, = gradients([loss], [x])
    x_np = r(2, 3)
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": x_np}, fetch_list=[gx])
    # rows 1..2 of [x.reshape(3,2).T; x]: row 1 of the transposed part and row 0 of x
    want = np.zeros((3, 2), np.float32)
    want[:, 1] = 1 / 6
    want = want.reshape(2, 3)
    want[0] += 1 / 6
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_untile_sums_the_tiles_in_douts_dtype():
    """ops.common.untile: the one gradient of expand, tile and expand_as."""
    from fluidity.ops.common import untile
    rng = np.random.default_rng(3)
    dout = rng.integers(0, 9, (4, 9)).astype(np.int32)
    want = sum(dout[i * 2:(i + 1) * 2, j * 3:(j + 1) * 3] for i in range(2) for j in range(3))
    got = untile(dout, (2, 3), (2, 3))
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.int32


# --- unbind ----------------------------------------------------------------------------------
def test_unbind_forward_and_gradient():
    rng = np.random.default_rng(18)
    x = rng.normal(size=(2, 3, 4))
    got = run_op("unbind", {"X": x}, {"axis": 1}, outputs={"Out": 3})
    for i in range(3):
        np.testing.assert_array_equal(got["Out"][i], x[:, i])
    check_grad("unbind", {"X": x}, ["X"], {"axis": -1}, outputs={"Out": 4})


def test_unbind_layer_builds_and_runs():
    x = np.random.default_rng(18).normal(size=(4, 3, 2, 2)).astype(np.float32)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        v = fluid.layers.data("x", [3, 2, 2])
        parts = fluid.layers.unbind(v, axis=1)
        with pytest.raises(TypeError, match="axis"):
            fluid.layers.unbind(v, axis=1.5)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    got = exe.run(main, feed={"x": x}, fetch_list=parts)
    assert len(parts) == 3 and got[0].shape == (4, 2, 2)
    np.testing.assert_array_equal(got[2], x[:, 2])
