"""Ops whose behaviour now follows Paddle 1.8's definition (what its own op tests check):
concat's LoD, add_position_encoding on sequences, linear_chain_crf's declared LoD levels,
lamb's update, the concat layer's checks. References are numpy written here."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.core.tensor import LoDTensor
from fluidity.errors import ExecutionError, ShapeError
from op_test import check_grad, check_output, run_op


@pytest.fixture
def rng():
    return np.random.default_rng(11)


def test_concat_joins_lods_along_axis_0(rng):
    a, b = rng.uniform(size=(3, 2)), rng.uniform(size=(4, 2))
    ta, tb = LoDTensor(a, [[0, 1, 3]]), LoDTensor(b, [[0, 4]])
    out = run_op("concat", {"X": [("a", ta), ("b", tb)]}, {"axis": 0}, return_lod=True)["Out"]
    np.testing.assert_array_equal(np.asarray(out), np.concatenate([a, b]))
    assert out.lod() == [[0, 1, 3, 7]]
    # two levels
    t2 = LoDTensor(a, [[0, 1, 2], [0, 2, 3]])
    out = run_op("concat", {"X": [("a", t2), ("b", t2)]}, {"axis": 0}, return_lod=True)["Out"]
    assert out.lod() == [[0, 1, 2, 3, 4], [0, 2, 3, 5, 6]]
    # along another axis: X[0]'s LoD
    out = run_op("concat", {"X": [("a", ta), ("b", LoDTensor(a, [[0, 3]]))]}, {"axis": 1},
                 return_lod=True)["Out"]
    assert out.lod() == [[0, 1, 3]]
    # an input without LoD: none
    out = run_op("concat", {"X": [("a", ta), ("b", b)]}, {"axis": 0}, return_lod=True)["Out"]
    assert out.lod() == []
    with pytest.raises(ExecutionError, match="LoD levels differ"):
        run_op("concat", {"X": [("a", ta), ("b", t2)]}, {"axis": 0})
    check_grad("concat", {"X": [("a", ta), ("b", tb)]}, [("X", 0), ("X", 1)], {"axis": 0})


def test_concat_layer_checks_and_arrays():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data("x", [4], dtype="int32")
        with pytest.warns(UserWarning, match="should be list"):
            fluid.layers.concat(x)
        with pytest.raises(TypeError, match="input\\[0\\]"):
            fluid.layers.concat([np.ones((1, 1))])
        u8 = fluid.layers.data("u8", [4], dtype="uint8")
        with pytest.raises(TypeError, match="uint8"):
            fluid.layers.concat([u8, u8])
        with pytest.raises(TypeError, match="axis"):
            fluid.layers.concat([x, x], 3.2)
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        v = fluid.layers.assign(np.arange(6, dtype=np.float32).reshape(2, 3))
        arr = fluid.layers.create_array("float32")
        for i in range(2):
            fluid.layers.array_write(v, fluid.layers.fill_constant([1], "int64", i), arr)
        out = fluid.layers.concat(arr, axis=1)
    assert list(out.shape) == [2, -1]
    got, = fluid.Executor(fluid.CPUPlace()).run(main, fetch_list=[out])
    np.testing.assert_array_equal(got, np.tile(np.arange(6).reshape(2, 3), (1, 2)))


def _pe(t, d):
    half = d // 2
    out = np.zeros((t, d))
    for j in range(t):
        for k in range(half):
            v = j / 10000.0 ** (k / (half - 1)) if half > 1 else j / 10000.0
            out[j, k], out[j, half + k] = np.sin(v), np.cos(v)
    return out


def test_add_position_encoding_on_sequences(rng):
    x = rng.uniform(size=(6, 4))
    t = LoDTensor(x, [[0, 2, 6]])
    want = 0.5 * x + 2.0 * np.concatenate([_pe(2, 4), _pe(4, 4)])
    got = run_op("add_position_encoding", {"X": t}, {"alpha": 0.5, "beta": 2.0},
                 return_lod=True)["Out"]
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
    assert got.lod() == [[0, 2, 6]]
    x3 = rng.uniform(size=(2, 3, 2))               # D/2 = 1: angle j / 10000
    check_output("add_position_encoding", {"X": x3}, {"Out": x3 + _pe(3, 2)[None]})
    check_grad("add_position_encoding", {"X": t}, ["X"], {"alpha": 0.5, "beta": 2.0})
    with pytest.raises(ShapeError, match="must be even"):
        run_op("add_position_encoding", {"X": LoDTensor(rng.uniform(size=(3, 3)),
                                                        [[0, 3]])})


def test_linear_chain_crf_declares_alpha_lod():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        em = fluid.layers.data("em", [5], lod_level=1)
        lab = fluid.layers.data("lab", [1], dtype="int64", lod_level=1)
        fluid.layers.linear_chain_crf(em, lab)
    op = main.global_block().ops[-1]
    assert op.type == "linear_chain_crf"
    for slot in ("Alpha", "EmissionExps"):
        assert main.global_block().var(op.output(slot)[0]).lod_level == 1


def test_lamb_is_paddle_18s_rule(rng):
    p, g = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    m1, m2 = rng.uniform(size=(3, 4)), rng.uniform(size=(3, 4))
    lr = np.array([0.1])
    n1, n2 = 0.9 * m1 + 0.1 * g, 0.999 * m2 + 0.001 * g * g
    r = n1 / (np.sqrt(n2) + 1e-6) + 0.01 * p
    want = p - 0.1 * np.linalg.norm(p) / np.linalg.norm(r) * r
    check_output("lamb", {"Param": p, "Grad": g, "LearningRate": lr, "Moment1": m1,
                          "Moment2": m2, "Beta1Pow": np.array([0.9 ** 10]),
                          "Beta2Pow": np.array([0.999 ** 10])},
                 {"ParamOut": want, "Moment1Out": n1, "Moment2Out": n2},
                 {"weight_decay": 0.01})


def _heads_ref(a, b, h):
    """Paddle 1.8's MatMulWithHead, head by head."""
    ka, kb = a.shape[-1], b.shape[-2]
    outs = []
    for i in range(h):
        ai = a[..., i * ka // h:(i + 1) * ka // h]
        if kb == ka:
            bi = b[..., i * kb // h:(i + 1) * kb // h, :]
        else:
            n = b.shape[-1] // h
            bi = b[..., :, i * n:(i + 1) * n]
        outs.append(ai @ bi)
    return np.concatenate(outs, axis=-1)


@pytest.mark.parametrize("xs,ys,tx,ty", [
    ((3, 8), (8, 5), False, False),      # Y's rows cut too: Out [3, 4 * 5]
    ((2, 3, 8), (8, 5), False, False),
    ((8, 3), (5, 8), True, True),
    ((3, 8), (2, 12), False, False),     # Y's height = X's head width: Y's columns cut
])
def test_matmul_head_number(rng, xs, ys, tx, ty):
    x, y = rng.uniform(-1, 1, xs), rng.uniform(-1, 1, ys)
    a = np.swapaxes(x, -1, -2) if tx else x
    b = np.swapaxes(y, -1, -2) if ty else y
    attrs = {"head_number": 4, "transpose_X": tx, "transpose_Y": ty, "alpha": 0.5}
    check_output("matmul", {"X": x, "Y": y}, {"Out": 0.5 * _heads_ref(a, b, 4)}, attrs)
    check_grad("matmul", {"X": x, "Y": y}, ["X", "Y"], attrs)
    with pytest.raises(ShapeError, match="head_number 3"):
        run_op("matmul", {"X": x, "Y": y}, {**attrs, "head_number": 3})


@pytest.mark.parametrize("xs,ys,tx,ty,want", [
    ((3,), (4,), True, True, (3, 4)),     # a transposed 1-D X is a column: the outer product
    ((3,), (3,), False, False, (1,)),     # a dot product is [1]
    ((3,), (3, 4), False, False, (4,)),
    ((1, 3), (4,), True, True, (3, 4)),   # a transposed 1-D Y is a row
    ((2, 5, 3), (3,), False, False, (2, 5)),
])
def test_matmul_vectors_as_fluid18(rng, xs, ys, tx, ty, want):
    x, y = rng.uniform(-1, 1, xs), rng.uniform(-1, 1, ys)
    a = x[None, :] if x.ndim == 1 else x
    b = y[:, None] if y.ndim == 1 else y
    a = np.swapaxes(a, -1, -2) if tx else a
    b = np.swapaxes(b, -1, -2) if ty else b
    ref = (a @ b).reshape(want)
    attrs = {"transpose_X": tx, "transpose_Y": ty}
    check_output("matmul", {"X": x, "Y": y}, {"Out": ref}, attrs)
    check_grad("matmul", {"X": x, "Y": y}, ["X", "Y"], attrs)
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        out = fluid.layers.matmul(fluid.data("x", list(xs), "float32"),
                                  fluid.data("y", list(ys), "float32"), tx, ty)
    assert tuple(out.shape) == want
    with pytest.raises(TypeError, match=r"'x' in fluid.layers.matmul must be \['float16', "
                                        r"'float32', 'float64'\], but received int32"):
        with fluid.program_guard(fluid.Program(), fluid.Program()):
            i = fluid.data("i", [2, 2], "int32")
            fluid.layers.matmul(i, i)


@pytest.mark.parametrize("shape,axis", [((4, 6), 1), ((2, 6, 3), 1), ((2, 3, 2, 6), 3),
                                        ((2, 6, 2, 2), 1)])
def test_maxout_any_rank_and_axis(rng, shape, axis):
    x = rng.uniform(-1, 1, shape)
    moved = np.moveaxis(x, axis, -1)
    want = np.moveaxis(moved.reshape(moved.shape[:-1] + (moved.shape[-1] // 2, 2)).max(-1),
                       -1, axis)
    check_output("maxout", {"X": x}, {"Out": want}, {"groups": 2, "axis": axis})
    check_grad("maxout", {"X": x}, ["X"], {"groups": 2, "axis": axis})


def test_maxout_layer_axis_and_dtype():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        out = fluid.layers.maxout(fluid.data("x", [3, 2, 2, 6], "float32"), groups=2, axis=-1)
        assert main.global_block().ops[-1].attr("axis") == 3
        assert list(out.shape) == [3, 2, 2, 3]
        with pytest.raises(ValueError, match="axis"):
            fluid.layers.maxout(fluid.data("y", [2, 4, 6, 6], "float32"), groups=2, axis=2)
        with pytest.raises(TypeError, match="int32"):
            fluid.layers.maxout(fluid.data("z", [12, 10], "int32"), 2)


@pytest.mark.parametrize("op", ["cross_entropy", "cross_entropy2"])
def test_cross_entropy_hard_labels_without_class_dim(rng, op):
    x = rng.uniform(0.1, 1.0, (6, 5))
    label = np.array([0, 4, -100, 2, 2, 1], np.int64)
    take = x[np.arange(6), np.where(label < 0, 0, label)]
    y = np.where(label < 0, 0, -np.log(take))
    got = check_output(op, {"X": x, "Label": label}, {"Y": y})
    assert got["Y"].shape == (6,)
    if op == "cross_entropy2":
        match = run_op(op, {"X": x, "Label": label})["MatchX"]
        # MatchX keeps the class dim and is 0 where the label is ignored
        np.testing.assert_allclose(match, np.where(label < 0, 0, take)[:, None])
    check_grad(op, {"X": x, "Label": label}, ["X"], output_slots=["Y"])
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        out = fluid.layers.cross_entropy(fluid.data("p", [6, 5], "float32"),
                                         fluid.data("l", [6], "int64"))
    assert list(out.shape) == [6]
    with pytest.raises(TypeError, match="int32"):
        with fluid.program_guard(fluid.Program(), fluid.Program()):
            fluid.layers.cross_entropy(fluid.data("q", [6, 5], "int32"),
                                       fluid.data("m", [6], "int64"))


def test_lookup_table_in_a_selected_rows_table():
    """W a SelectedRows (Paddle's is_sparse table path): ids are looked up among its rows."""
    from fluidity.core.tensor import SelectedRows
    from fluidity.op import Operator
    scope = fluid.Scope()
    value = np.arange(4 * 3, dtype=np.float32).reshape(4, 3)
    w = scope.var("W").get_selected_rows()
    w.set_height(100)
    w.set_rows([40, 7, 12, 3])
    w.get_tensor().set(value, fluid.CPUPlace())
    scope.var("Ids").get_tensor().set(np.array([[12], [3], [40], [12]], np.int64),
                                      fluid.CPUPlace())
    Operator("lookup_table", W="W", Ids="Ids", Out="Out").run(scope, fluid.CPUPlace())
    np.testing.assert_array_equal(np.array(scope.find_var("Out").get_tensor()),
                                  value[[2, 3, 0, 2]])
    scope.var("Ids").get_tensor().set(np.array([[5]], np.int64), fluid.CPUPlace())
    with pytest.raises(ExecutionError, match="id 5 is not among the rows"):
        Operator("lookup_table", W="W", Ids="Ids", Out="Out").run(scope, fluid.CPUPlace())
    # padding ids give zeros without being looked up
    scope.var("Ids").get_tensor().set(np.array([[5], [7]], np.int64), fluid.CPUPlace())
    Operator("lookup_table", W="W", Ids="Ids", Out="Out", padding_idx=5).run(
        scope, fluid.CPUPlace())
    np.testing.assert_array_equal(np.array(scope.find_var("Out").get_tensor()),
                                  [[0, 0, 0], value[1]])
    assert isinstance(scope.find_var("W").get_selected_rows(), SelectedRows)


def test_embedding_layers_check_their_input():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        for layer in (fluid.layers.embedding, fluid.embedding):
            with pytest.raises(TypeError, match="'input' in .*embedding must be Variable"):
                layer(input=np.zeros((4, 1), np.int64), size=(10, 4))
            with pytest.raises(TypeError, match=r"'input' in .*embedding must be \['int64'\]"):
                layer(input=fluid.data("f", [4, 1], "float32"), size=(10, 4))
            with pytest.raises(TypeError, match="dtype"):
                layer(input=fluid.data("i", [4, 1], "int64"), size=(10, 4), dtype="int64")
