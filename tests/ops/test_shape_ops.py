"""Shape ops (fluidity/ops/shape_ops.py): forward against numpy, gradients against finite
differences, shape errors, and XShape; flatten (v1) with its LoD."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.core.tensor import LoDTensor
from fluidity.errors import FluidityError, ShapeError
from op_test import check_grad, check_output, run_op
from test_tensor_ops import build_fails, r


# --- shape-only ops (XShape) --------------------------------------------------------------
def _check_xshape(op, x, attrs, want):
    got = run_op(op, {"X": x}, attrs, outputs=["Out", "XShape"])
    np.testing.assert_array_equal(got["Out"], want)
    # XShape holds no elements ([0] + X's dims, declared); fetched, an empty tensor is [0], as
    # Fluid 1.8's fetch op resizes it
    assert got["XShape"].shape == (0,)


@pytest.mark.parametrize("shape,want", [([3, 8], (3, 8)), ([0, -1], (2, 12)),
                                        ([-1, 2, 0], (3, 2, 4)), ([24], (24,)),
                                        ([2, 3, 4, 1], (2, 3, 4, 1)), ([1, -1], (1, 24))])
def test_reshape2(shape, want):
    x = r(2, 3, 4)
    _check_xshape("reshape2", x, {"shape": shape}, x.reshape(want))


def test_reshape2_shape_tensors():
    x = r(2, 3, 4)
    got = run_op("reshape2", {"X": x, "Shape": np.array([4, -1], np.int32)}, {"shape": [0, -1]})
    np.testing.assert_array_equal(got["Out"], x.reshape(4, 6))
    got = run_op("reshape2", {"X": x, "ShapeTensor": [("s0", np.array([0], np.int32)),
                                                      ("s1", np.array([-1], np.int32))]},
                 {"shape": [-1, -1]})
    np.testing.assert_array_equal(got["Out"], x.reshape(2, 12))


def test_reshape2_grad_and_errors():
    x = r(2, 3, 2)
    check_grad("reshape2", {"X": x}, ["X"], {"shape": [3, -1]})
    msg = build_fails("reshape2", {"X": x}, {"shape": [5, -1]})
    assert "[2, 3, 2]" in msg and "[5, -1]" in msg
    msg = build_fails("reshape2", {"X": x}, {"shape": [7, 2]})
    assert "12 elements" in msg
    build_fails("reshape2", {"X": x}, {"shape": [-1, -1]})


@pytest.mark.parametrize("shape", [[-1, -1, 3], [2, 3, 0, 0], [3, -2, 2]])
def test_a_reshape_shape_fluid_asserts_on_is_an_assertion_error(shape):
    """Fluid's reshape asserts these (two -1s, a 0 past X's rank, a negative dim); the
    ShapeError naming the op is an AssertionError too."""
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data("x", [2, 3, 2], append_batch_size=False)
        with pytest.raises(AssertionError, match="reshape2"):
            fluid.layers.reshape(x, shape)


def test_reshape2_runtime_mismatch_names_op():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xv = fluid.layers.data("x", [-1, 3], append_batch_size=False)
        out = fluid.layers.reshape(xv, [4, -1])
    with pytest.raises(FluidityError) as e:
        fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": r(3, 3)}, fetch_list=[out])
    assert "reshape2" in str(e.value) and "[3, 3]" in str(e.value)


@pytest.mark.parametrize("axis", [[1, 0, 2], [2, 0, 1], [-1, 0, 1], [0, 1, 2]])
def test_transpose2(axis):
    x = r(2, 3, 4)
    _check_xshape("transpose2", x, {"axis": axis}, x.transpose(axis))
    check_grad("transpose2", {"X": x}, ["X"], {"axis": axis})


def test_transpose2_bad_perm_fails():
    build_fails("transpose2", {"X": r(2, 3)}, {"axis": [0, 0]})
    build_fails("transpose2", {"X": r(2, 3)}, {"axis": [0, 1, 2]})


@pytest.mark.parametrize("axes,want", [([], (3, 2)), ([0], (3, 1, 2)), ([-2], (1, 3, 2)),
                                       ([0, 2], (3, 2)), ([1], (1, 3, 1, 2))])
def test_squeeze2(axes, want):
    x = r(1, 3, 1, 2)
    _check_xshape("squeeze2", x, {"axes": axes}, x.reshape(want))
    check_grad("squeeze2", {"X": x}, ["X"], {"axes": axes})


def test_squeeze2_axis_out_of_range_fails():
    build_fails("squeeze2", {"X": r(1, 3)}, {"axes": [2]})


@pytest.mark.parametrize("axes,want", [([0], (1, 3, 2)), ([-1], (3, 2, 1)),
                                       ([0, 2], (1, 3, 1, 2)), ([1, 1], (3, 1, 1, 2)),
                                       ([0, -1], (1, 3, 2, 1))])
def test_unsqueeze2(axes, want):
    x = r(3, 2)
    _check_xshape("unsqueeze2", x, {"axes": axes}, x.reshape(want))
    check_grad("unsqueeze2", {"X": x}, ["X"], {"axes": axes})


def test_unsqueeze2_axes_tensor():
    x = r(3, 2)
    got = run_op("unsqueeze2", {"X": x, "AxesTensor": np.array([1], np.int32)})
    assert got["Out"].shape == (3, 1, 2)


@pytest.mark.parametrize("axis,want", [(0, (1, 24)), (1, (2, 12)), (2, (6, 4)), (3, (24, 1))])
def test_flatten2(axis, want):
    x = r(2, 3, 4)
    _check_xshape("flatten2", x, {"axis": axis}, x.reshape(want))
    check_grad("flatten2", {"X": x[:, :2, :2]}, ["X"], {"axis": axis})


@pytest.mark.parametrize("start,stop,want", [(1, 2, (2, 12)), (0, -1, (24,)), (0, 1, (6, 4)),
                                             (-2, -1, (2, 12)), (1, 1, (2, 3, 4))])
def test_flatten_contiguous_range(start, stop, want):
    x = r(2, 3, 4)
    attrs = {"start_axis": start, "stop_axis": stop}
    _check_xshape("flatten_contiguous_range", x, attrs, x.reshape(want))
    check_grad("flatten_contiguous_range", {"X": r(2, 2, 3)}, ["X"], attrs)


def test_shape_ops_keep_lod_only_when_rows_kept():
    from fluidity.core.tensor import LoDTensor
    x = LoDTensor(r(5, 4), [[0, 2, 5]])
    got = run_op("reshape2", {"X": x}, {"shape": [0, 2, 2]}, return_lod=True)
    assert got["Out"].lod() == [[0, 2, 5]]
    got = run_op("reshape2", {"X": x}, {"shape": [4, 5]}, return_lod=True)
    assert got["Out"].lod() == []


def test_shape_op_output_is_not_a_view_of_a_parameter():
    # sgd updates the parameter in place after the reshape ran; the fetched reshape must
    # still show the value the parameter had then
    import fluidity.optimizer  # noqa: F401
    L = fluid.layers
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [2, 3], append_batch_size=False)
        loss = L.mean(L.fc(x, 4, bias_attr=False))
        w = main.global_block().all_parameters()[0]
        flat = L.reshape(w, [-1])
        fluid.optimizer.SGD(0.5).minimize(loss)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    before = scope.find_var(w.name).value._array.copy()
    got, = exe.run(main, feed={"x": np.ones((2, 3), np.float32)}, fetch_list=[flat],
                   scope=scope)
    assert not np.allclose(scope.find_var(w.name).value._array, before)  # it was updated
    np.testing.assert_array_equal(got, before.reshape(-1))


# --- shape -------------------------------------------------------------------------------
def test_shape():
    check_output("shape", {"Input": r(2, 1, 3)}, {"Out": np.array([2, 1, 3], np.int32)})


def test_flatten_shapes_lod_and_grad():
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, (3, 2, 4)).astype(np.float32)
    for axis, shape in ((0, (1, 24)), (1, (3, 8)), (2, (6, 4)), (3, (24, 1))):
        check_output("flatten", {"X": x}, {"Out": x.reshape(shape)}, {"axis": axis})
    check_grad("flatten", {"X": x}, ["X"], {"axis": 2})
    # dim 0 kept: the LoD goes along; changed: it does not
    t = LoDTensor(x, [[0, 1, 3]])
    kept = run_op("flatten", {"X": t}, {"axis": 1}, return_lod=True)["Out"]
    assert kept.lod() == [[0, 1, 3]]
    dropped = run_op("flatten", {"X": t}, {"axis": 2}, return_lod=True)["Out"]
    assert dropped.lod() == []
    with pytest.raises(ShapeError, match="axis 4"):
        run_op("flatten", {"X": x}, {"axis": 4})
