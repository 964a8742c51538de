"""Fluid 1.8's argument checks of the layers (layers/arg_checks.py): a wrong argument type or
dtype is a TypeError naming the layer, the argument and what it got, raised before anything
is built; what Fluid accepts passes."""
import inspect

import numpy as np
import pytest

import fluidity as fluid
from fluidity.layers.arg_checks import CHECKS
from fluidity.layers.declined import DECLINED

L = fluid.layers


def test_every_checked_argument_is_an_argument_of_its_layer():
    for name, checks in CHECKS.items():
        if name in DECLINED:
            continue                              # not built: says why when called
        params = inspect.signature(getattr(L, name)).parameters
        for _kind, arg, _spec in checks:
            assert arg in params, (name, arg)


@pytest.mark.parametrize("call, words", [
    (lambda v: L.concat([v["u8"], v["u8"]]), r"'input\[0\]' in concat"),
    (lambda v: L.concat([v["f"]], axis=1.5), "'axis' in fluid.layers.concat"),
    (lambda v: L.mean(v["lod"]), "'x' in fluid.layers.mean"),
    (lambda v: L.sigmoid(v["i32"]), "'x' in fluid.layers.sigmoid"),
    (lambda v: L.reduce_all(v["f"]), "'input' in fluid.layers.reduce_all"),
    (lambda v: L.logical_and(v["f"], v["b"]), "'x' in fluid.layers.logical_and"),
    (lambda v: L.elementwise_add(v["f"], np.ones(3, "f4")), "'y' in fluid.layers.elementwise_add"),
    (lambda v: L.one_hot(v["f"], 3), "'input' in fluid.layers.one_hot"),
    (lambda v: fluid.embedding(v["i32"], [4, 2]), "'input' in fluid.embedding"),
    (lambda v: L.one_hot(v["i32"], 4.1), "'depth' in fluid.layers.one_hot"),
    (lambda v: L.one_hot(v["i32"], np.array([4])), "'depth' in fluid.layers.one_hot"),
    (lambda v: L.assign(v["u8"]), "'input' in fluid.layers.assign"),
    (lambda v: L.sign(v["i32"]), "'x' in fluid.layers.sign"),
    (lambda v: L.sign(np.ones(3, "int32")), "'x' in fluid.layers.sign"),
    (lambda v: L.crop_tensor(v["f"], shape=[2, 2.0]), "each int of 'shape'"),
    (lambda v: L.crop_tensor(v["f"], shape=[2, 2], offsets=[0, 1.0]), "each int of 'offsets'"),
    (lambda v: L.get_tensor_from_selected_rows(v["f"]), "SELECTED_ROWS"),
    (lambda v: fluid.nets.scaled_dot_product_attention(
        L.data("q", [2, 3], dtype="float64"), v["f3"], v["f3"]), "one dtype"),
    (lambda v: fluid.nets.scaled_dot_product_attention(v["f3"], v["f3"], np.ones((2, 2, 3))),
     "'values' in scaled_dot_product_attention"),
])
def test_a_wrong_argument_is_a_type_error_and_builds_nothing(call, words):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        v = {"f": L.data("f", [3]), "i32": L.data("i32", [1], dtype="int32"),
             "u8": L.data("u8", [3], dtype="uint8"), "b": L.data("b", [3], dtype="bool"),
             "lod": fluid.create_lod_tensor(np.ones((2, 1), "f4"), [[2]], fluid.CPUPlace()),
             "f3": L.data("f3", [2, 3])}
        before = len(main.global_block().ops)
        with pytest.raises(TypeError, match=words):
            call(v)
    assert len(main.global_block().ops) == before


def test_what_fluid_accepts_passes_the_checks():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        f = L.data("f", [3])
        i = L.data("i", [3], dtype="int32")
        L.concat(f)                              # one Variable: a list of it, as Fluid
        L.abs(i)                                 # abs, exp and square take ints
        L.reduce_all(L.cast(f, "bool"))
        L.logical_not(L.cast(f, "bool"))
        L.mean(f)
        L.fc(f, 2, param_attr=None)


def test_crop_tensor_sizes_and_offsets_out_of_range_are_value_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = L.data("x", [2, 3, 6, 6], append_batch_size=False)
        dim = L.data("dim", [1], dtype="int32", append_batch_size=False)
        for shape, offsets in (([2, -2, dim, 3], None), ([2, 0, dim, 3], None),
                               ([2, 2, 3, 3], [0, -1, dim, 0])):
            with pytest.raises(ValueError, match="crop_tensor"):
                L.crop_tensor(x, shape=shape, offsets=offsets)
        assert L.crop_tensor(x, shape=[2, -1, dim, 3]).shape[0] == 2   # -1: to the end


def test_sign_of_an_array_and_one_hot_of_a_wide_declared_input_build():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        s = L.sign(np.array([1.5, -2.0, 0.0], "float32"))
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        ids = L.data("ids", [3], dtype="int64")        # [-1, 3]: Fluid 1.8 builds it too
        assert L.one_hot(ids, 4).shape == (-1, 4)
    got, = fluid.Executor(fluid.CPUPlace()).run(main, fetch_list=[s])
    np.testing.assert_array_equal(got, [1.0, -1.0, 0.0])


def test_expand_of_a_bool_that_needs_no_gradient_is_fluids_value_error():
    """Fluid 1.8's expand refuses a bool x with stop_gradient set (its own check), builds
    one whose stop_gradient is False, and checks expand_times' type."""
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        b = L.data("b", [4], dtype="bool")
        b.stop_gradient = True
        with pytest.raises(ValueError, match="stop_gradient"):
            L.expand(b, [2, 2])
        b.stop_gradient = False
        assert L.expand(b, [2, 2]) is not None
        with pytest.raises(TypeError, match="expand_times"):
            L.expand(L.data("f", [4]), 2)
