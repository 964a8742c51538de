"""fused_elemwise_activation: forward against numpy for both compositions and both broadcast
directions, its gradient against finite differences, and the contrib layer end to end."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.errors import FluidityError
from tests.op_test import check_grad, check_output, run_op

RNG = np.random.default_rng(5)
UNARY = {"scale": lambda v: 0.3 * v, "relu": lambda v: np.maximum(v, 0), "tanh": np.tanh,
         "sigmoid": lambda v: 1 / (1 + np.exp(-v))}
BINARY = {"elementwise_add": np.add, "elementwise_mul": np.multiply}


def _away_from_kink(v):
    """Values at least 0.05 from relu's kink, so finite differences see one side."""
    return np.where(np.abs(v) < 0.05, 0.3, v)


@pytest.mark.parametrize("functors", [["elementwise_add", "scale"], ["elementwise_mul", "tanh"],
                                      ["relu", "elementwise_add"],
                                      ["sigmoid", "elementwise_mul"]])
@pytest.mark.parametrize("x_shape,y_shape,axis,y_view", [
    ((2, 3, 4), (3,), 1, (1, 3, 1)),        # Y broadcast onto X
    ((3,), (2, 3, 4), 1, (1, 3, 1)),        # X broadcast onto Y: Out takes Y's shape
])
def test_forward_and_grad(functors, x_shape, y_shape, axis, y_view):
    x = _away_from_kink(RNG.uniform(-1, 1, size=x_shape))
    y = _away_from_kink(RNG.uniform(-1, 1, size=y_shape))
    small = x if x.ndim < y.ndim else y
    xb = x.reshape(y_view) if x is small else x
    yb = y.reshape(y_view) if y is small else y
    if functors[0] in BINARY:
        inter = UNARY[functors[1]](y)
        inter_b = inter.reshape(y_view) if y is small else inter
        out = BINARY[functors[0]](xb, inter_b)
    else:
        inter = BINARY[functors[1]](xb, yb)
        out = UNARY[functors[0]](inter)
    if functors[0] == "relu":
        x = _away_from_kink(x)
    attrs = {"functor_list": functors, "axis": axis, "scale": 0.3,
             "save_intermediate_out": True}
    inputs = {"X": x.astype("float32"), "Y": y.astype("float32")}
    check_output("fused_elemwise_activation", inputs, {"Out": out, "IntermediateOut": inter},
                 attrs, atol=1e-5, rtol=1e-5)
    for save in (True, False):
        attrs["save_intermediate_out"] = save
        check_grad("fused_elemwise_activation", {"X": x, "Y": y}, ["X", "Y"], attrs,
                   outputs=["Out", "IntermediateOut"] if save else ["Out"],
                   output_slots=["Out"])


def test_grad_op_is_fluids():
    """The backward op is Fluid's: fused_elemwise_activation_grad with `_grad` functors."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [2, 3], "float32")
        y = fluid.data("y", [2, 3], "float32")
        x.stop_gradient = y.stop_gradient = False
        out = fluid.contrib.layers.fused_elemwise_activation(x, y, ["elementwise_add", "relu"])
        fluid.backward.append_backward(fluid.layers.mean(out))
    grad = [op for op in main.global_block().ops if op.type.startswith("fused_elemwise")][-1]
    assert grad.type == "fused_elemwise_activation_grad"
    assert grad.attr("functor_list") == ["elementwise_add_grad", "relu_grad"]


def test_layer_end_to_end():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 3], "float32")
        y = fluid.data("y", [3], "float32")
        out = fluid.contrib.layers.fused_elemwise_activation(
            x, y, "elementwise_mul,scale", scale=2.0)
    xv = RNG.normal(size=(4, 3)).astype("float32")
    yv = RNG.normal(size=(3,)).astype("float32")
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv, "y": yv},
                                                 fetch_list=[out])
    np.testing.assert_allclose(got, xv * (2 * yv), rtol=1e-6)
    with pytest.raises(ValueError, match="functor_list"):
        with fluid.program_guard(fluid.Program(), fluid.Program()):
            fluid.contrib.layers.fused_elemwise_activation(x, y, ["relu"])


def test_unsupported_functors_are_refused_naming_the_op():
    with pytest.raises(FluidityError, match="fused_elemwise_activation.*functor_list"):
        run_op("fused_elemwise_activation", {"X": np.ones(3, "float32"),
                                             "Y": np.ones(3, "float32")},
               {"functor_list": ["elementwise_sub", "relu"]}, outputs=["Out"])


def test_out_keeps_the_lod_of_the_larger_input():
    from fluidity.core.tensor import LoDTensor
    x = LoDTensor(RNG.normal(size=(5, 3)).astype("float32"), [[0, 2, 5]])
    y = np.ones(3, "float32")
    for inputs in ({"X": x, "Y": y}, {"X": y, "Y": x}):
        got = run_op("fused_elemwise_activation", inputs,
                     {"functor_list": ["tanh", "elementwise_add"], "save_intermediate_out": True},
                     outputs=["Out", "IntermediateOut"], return_lod=True)
        for slot in ("Out", "IntermediateOut"):
            assert got[slot].recursive_sequence_lengths() == [[2, 3]]
        np.testing.assert_allclose(np.asarray(got["Out"]), np.tanh(x._array + 1), rtol=1e-6)
