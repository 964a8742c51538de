"""What the cell API stands on: `fluid.layers.utils`' nested structures, Variable indexing
(`var[i]`, `var[:, t]`, `var[::-1]`) as Fluid 1.8 builds it, `tensor_array_to_tensor`'s shape
and gradient, and cross_entropy's hard labels without the trailing 1 (Paddle's [N, T] labels
for [N, T, C] probabilities)."""
import collections

import numpy as np
import pytest
from op_test import check_grad, check_output
from test_control_flow import check_grads, weights

import fluidity as fluid
from fluidity.layers import utils

L = fluid.layers
RNG = np.random.default_rng(7)


# --- layers.utils ------------------------------------------------------------------------
Pair = collections.namedtuple("Pair", "a b")


def test_nest_flatten_pack_and_map_keep_the_structure():
    nest = {"z": [1, (2, 3)], "a": Pair(4, {"y": 5, "x": 6})}
    # dicts by sorted key, depth first
    assert utils.flatten(nest) == [4, 6, 5, 1, 2, 3]
    assert utils.flatten(7) == [7]
    packed = utils.pack_sequence_as(nest, list("abcdef"))
    assert packed == {"z": ["d", ("e", "f")], "a": Pair("a", {"y": "c", "x": "b"})}
    assert type(packed["a"]) is Pair
    doubled = utils.map_structure(lambda u, v: u + v, nest, nest)
    assert doubled == {"z": [2, (4, 6)], "a": Pair(8, {"y": 10, "x": 12})}
    assert utils.pack_sequence_as(1, ["only"]) == "only"
    copy = utils.copy_mutable_vars([1, [2]])
    assert copy == [1, [2]] and utils.hold_mutable_vars([1, [2]])
    assert not utils.hold_mutable_vars([1, 2])


def test_nest_errors_name_the_mismatch():
    with pytest.raises(ValueError, match="same number of elements"):
        utils.assert_same_structure([1, 2], [1])
    with pytest.raises(TypeError, match="same sequence type"):
        utils.assert_same_structure([1, 2], (1, 2))
    utils.assert_same_structure([1, 2], (1, 2), check_types=False)
    with pytest.raises(ValueError, match="same set of keys"):
        utils.assert_same_structure({"a": 1}, {"b": 1})
    with pytest.raises(ValueError, match="Structure had 2 elements"):
        utils.pack_sequence_as([1, 2], [1, 2, 3])
    with pytest.raises(TypeError, match="must be a sequence"):
        utils.pack_sequence_as([1], 5)
    assert utils.convert_to_list(3, 2, "stride") == [3, 3]
    assert utils.convert_to_list((1, 2), 2, "stride") == [1, 2]
    with pytest.raises(ValueError, match="stride's length must be 2"):
        utils.convert_to_list((1, 2, 3), 2, "stride")


# --- Variable indexing -------------------------------------------------------------------
def _index_program():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 5, 4], "float32")
        t = L.fill_constant([1], "int64", 3)
        outs = [x[0], x[:, 1], x[:, t], x[::-1], x[:, 1:4:2], x[-1], x[1:, -2:],
                L.shape(x)[1], x[:, t, 1:]]
    return main, outs


def test_indexing_builds_fluids_ops_and_computes_numpys_values():
    main, outs = _index_program()
    types = [op.type for op in main.global_block().ops]
    assert "slice" in types and "strided_slice" in types and "reverse" in types
    slice_ops = [op for op in main.global_block().ops if op.type == "slice"]
    assert slice_ops[0].attr("decrease_axis") == [0]
    # a Variable index: its bounds come from tensors (StartsTensorList), infer flag -1
    by_var = [op for op in slice_ops if op.input("StartsTensorList")]
    assert by_var and by_var[0].attr("infer_flags") == [-1]
    xv = RNG.normal(size=(3, 5, 4)).astype("float32")
    got = fluid.Executor().run(main, feed={"x": xv}, fetch_list=outs)
    want = [xv[0], xv[:, 1], xv[:, 3], xv[::-1], xv[:, 1:4:2], xv[-1], xv[1:, -2:],
            np.array(5), xv[:, 3, 1:]]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g).reshape(w.shape), w)
    assert list(outs[0].shape) == [5, 4] and list(outs[4].shape) == [-1, 2, 4]


def test_indexing_a_loop_counter_slices_at_each_step():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [4, 3], "float32")
        i = L.fill_constant([1], "int64", 0)
        n = L.fill_constant([1], "int64", 4)
        acc = L.fill_constant([3], "float32", 0.0)
        cond = L.less_than(i, n)
        loop = L.While(cond)
        with loop.block():
            L.assign(acc + x[i] * 2.0, acc)    # x[i] is sliced inside the body
            L.increment(i, in_place=True)
            L.less_than(i, n, cond=cond)
    xv = RNG.normal(size=(4, 3)).astype("float32")
    got, = fluid.Executor().run(main, feed={"x": xv}, fetch_list=[acc])
    np.testing.assert_allclose(got, 2 * xv.sum(0), rtol=1e-6)


def test_indexing_gradient_reaches_the_indexed_variable():
    feed = {"x": RNG.normal(size=(3, 4))}

    def build():
        x = fluid.data("x", [3, 4], "float64")
        x.stop_gradient = False
        return L.reduce_sum(x[1, 1:] * x[:, 2] + x[::-1][0, :3])
    check_grads(build, feed, ["x"])


def test_bad_indices_raise_clear_errors():
    x = fluid.data("x", [None, 5], "float32")
    with pytest.raises(IndexError, match="index 5 is out of range for dim 1 of 'x'"):
        x[:, 5]
    with pytest.raises(IndexError, match="too many indices for 'x'"):
        x[0, 1, 2]
    with pytest.raises(IndexError, match="got str"):
        x["a"]
    with pytest.raises(ValueError, match="step must be a nonzero int"):
        x[::0]
    with pytest.raises(TypeError, match="not iterable"):
        list(x)


# --- tensor_array_to_tensor --------------------------------------------------------------
@pytest.mark.parametrize("use_stack,axis", [(True, 0), (True, 1), (False, 0), (False, 1)])
def test_tensor_array_to_tensor_shape_and_gradient(use_stack, axis):
    xs = [RNG.normal(size=(2, 3)) for _ in range(3)]
    feed = {f"x{k}": v for k, v in enumerate(xs)}

    def build():
        vs = [fluid.data(f"x{k}", [2, 3], "float64") for k in range(3)]
        arr = None
        for k, v in enumerate(vs):
            v.stop_gradient = False
            arr = L.array_write(v * float(k + 1), L.fill_constant([1], "int64", k), arr)
        out, _ = L.tensor_array_to_tensor(arr, axis=axis, use_stack=use_stack)
        want = [2, 3]
        if use_stack:
            want.insert(axis, -1)
        else:
            want[axis] = -1
        assert list(out.shape) == want
        w = weights((3, 2, 3) if use_stack and axis == 0 else (2, 3, 3) if use_stack else
                    (6, 3) if axis == 0 else (2, 9))
        return L.reduce_sum(out * w)
    check_grads(build, feed, list(feed))


# --- cross_entropy with a squeezed hard label --------------------------------------------
def _probs(shape):
    p = RNG.uniform(0.1, 1.0, shape)
    return p / p.sum(-1, keepdims=True)


def test_cross_entropy2_takes_labels_without_the_class_dim():
    x = _probs((2, 3, 5))
    label = RNG.integers(0, 5, (2, 3)).astype("int64")
    want = -np.log(np.take_along_axis(x, label[..., None], -1))[..., 0]
    check_output("cross_entropy2", {"X": x, "Label": label}, {"Y": want},
                 outputs=["Y", "XShape", "MatchX"])
    check_output("cross_entropy", {"X": x, "Label": label}, {"Y": want})
    check_grad("cross_entropy2", {"X": x, "Label": label}, ["X"], output_slots=["Y"],
               outputs=["Y", "XShape", "MatchX"])
    check_grad("cross_entropy", {"X": x, "Label": label}, ["X"])


def test_cross_entropy_layer_gives_the_labels_shape():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 3, 5], "float32")
        lab = fluid.data("lab", [None, 3], "int64")
        y = L.cross_entropy(x, lab)
        assert list(y.shape) == [-1, 3]
        bad = fluid.data("bad", [None, 4], "int64")
        with pytest.raises(fluid.errors.ShapeError, match="differ in dim 1"):
            L.cross_entropy(x, bad)
