"""Forward checks against numpy of the sparse distributed ops: split_selected_rows,
split_ids, merge_ids, lookup_sparse_table, fake_init, and scale over a SelectedRows. (None of
them has a gradient: they move gradients and looked-up rows between trainers and servers.)"""
import numpy as np
import pytest

import fluidity as fluid
import fluidity.distributed  # noqa: F401  (the sparse_table service lookup_sparse_table uses)
from fluidity.core.tensor import LoDTensor, SelectedRows
from fluidity.distributed.sparse_table import initial_rows

SR = fluid.core.VarDesc.VarType.SELECTED_ROWS
LT = fluid.core.VarDesc.VarType.LOD_TENSOR


def run_op(op_type, inputs, outputs, attrs=None):
    """Run one op: inputs {slot: [(name, value, var type, dtype, shape)]}, outputs {slot:
    [(name, var type, dtype, shape)]}; returns {output name: value}."""
    main = fluid.Program()
    block = main.global_block()
    scope = fluid.Scope()
    ins, outs = {}, {}
    for slot, items in inputs.items():
        ins[slot] = []
        for name, value, vtype, dtype, shape in items:
            ins[slot].append(block.create_var(name=name, type=vtype, dtype=dtype, shape=shape,
                                              persistable=True))
            scope.var(name).value = value
    for slot, items in outputs.items():
        outs[slot] = [block.create_var(name=n, type=t, dtype=d, shape=s, persistable=True)
                      for n, t, d, s in items]
    block.append_op(type=op_type, inputs=ins, outputs=outs, attrs=attrs or {})
    fluid.Executor(fluid.CPUPlace()).run(main, scope=scope)
    return {v.name: scope.find_var(v.name).value for vs in outs.values() for v in vs}


def test_split_selected_rows_renumbers_rows_by_height_sections():
    rows = np.array([0, 5, 3, 9, 5, 4], "int64")
    value = np.arange(12, dtype="float32").reshape(6, 2)
    got = run_op("split_selected_rows",
                 {"X": [("g", SelectedRows(rows, 10, value), SR, "float32", [10, 2])]},
                 {"Out": [("g0", SR, "float32", [4, 2]), ("g1", SR, "float32", [6, 2])]},
                 {"height_sections": [4, 6]})
    for name, lo, hi in (("g0", 0, 4), ("g1", 4, 10)):
        sel = (rows >= lo) & (rows < hi)
        out = got[name]
        assert out.height == hi - lo
        np.testing.assert_array_equal(out.rows, rows[sel] - lo)
        np.testing.assert_array_equal(out.value, value[sel])
        dense = np.zeros((hi - lo, 2), "float32")          # the block of the dense gradient
        np.add.at(dense, out.rows, out.value)
        whole = SelectedRows(rows, 10, value).to_dense()
        np.testing.assert_array_equal(dense, whole[lo:hi])


def test_split_selected_rows_refuses_bad_sections():
    # the sections need not add up to the height (Fluid 1.8's own test cuts 21 rows into
    # [5, 5, 5, 5, 3]), but every row must fall in one
    g = ("g", SelectedRows([1, 8], 10, np.ones((2, 2), "float32")), SR, "float32", [10, 2])
    with pytest.raises(fluid.errors.ExecutionError, match="row 8 is outside"):
        run_op("split_selected_rows", {"X": [g]},
               {"Out": [("a", SR, "float32", [4, 2]), ("b", SR, "float32", [4, 2])]},
               {"height_sections": [4, 4]})


def test_split_ids_shards_unique_ids_by_modulo():
    a, b = np.array([[7], [2], [7], [4]], "int64"), np.array([[3], [2]], "int64")
    got = run_op("split_ids", {"Ids": [("a", LoDTensor(a), LT, "int64", [-1, 1]),
                                       ("b", LoDTensor(b), LT, "int64", [-1, 1])]},
                 {"Out": [(f"s{k}", LT, "int64", [-1, 1]) for k in range(3)]})
    every = np.unique(np.concatenate([a.ravel(), b.ravel()]))
    for k in range(3):
        np.testing.assert_array_equal(np.array(got[f"s{k}"]).ravel(), every[every % 3 == k])


def test_split_ids_of_a_gradient_sums_duplicates_and_keeps_ids():
    rows = np.array([5, 2, 5, 8], "int64")
    value = np.arange(8, dtype="float32").reshape(4, 2)
    got = run_op("split_ids", {"Ids": [("g", SelectedRows(rows, 10, value), SR, "float32",
                                        [10, 2])]},
                 {"Out": [("g0", SR, "float32", [10, 2]), ("g1", SR, "float32", [10, 2])]})
    dense = SelectedRows(rows, 10, value).to_dense()
    for k in (0, 1):
        out = got[f"g{k}"]
        assert out.height == 10 and len(set(out.rows.tolist())) == len(out.rows)
        assert all(r % 2 == k for r in out.rows)
        np.testing.assert_array_equal(out.value, dense[out.rows])
    assert sorted(got["g0"].rows.tolist() + got["g1"].rows.tolist()) == [2, 5, 8]
    # in X's order, as Fluid 1.8 keeps them (5 before 2, 2 before 8)
    assert got["g0"].rows.tolist() == [2, 8] and got["g1"].rows.tolist() == [5]
    got = run_op("split_ids", {"Ids": [("h", SelectedRows([7, 0, 4, 3], 10, value), SR,
                                        "float32", [10, 2])]},
                 {"Out": [("h0", SR, "float32", [10, 2]), ("h1", SR, "float32", [10, 2])]})
    assert got["h1"].rows.tolist() == [7, 3]
    np.testing.assert_array_equal(got["h1"].value, value[[0, 3]])


def test_sum_of_gradients_merges_repeated_rows_as_fluid():
    """Fluid 1.8's sum of SelectedRows: concatenated when no row repeats, else each row
    once, ascending, summed."""
    a = ("a", SelectedRows([0, 5], 10, np.ones((2, 2), "float32")), SR, "float32", [10, 2])
    b = ("b", SelectedRows([2, 0], 10, np.full((2, 2), 3.0, "float32")), SR, "float32", [10, 2])
    c = ("c", SelectedRows([9], 10, np.full((1, 2), 5.0, "float32")), SR, "float32", [10, 2])
    out = [("o", SR, "float32", [10, 2])]
    got = run_op("sum", {"X": [a, b]}, {"Out": out})["o"]
    assert got.rows.tolist() == [0, 2, 5] and got.height == 10
    np.testing.assert_array_equal(got.value[:, 0], [4.0, 3.0, 1.0])
    got = run_op("sum", {"X": [a, c]}, {"Out": out})["o"]
    assert got.rows.tolist() == [0, 5, 9]
    np.testing.assert_array_equal(got.value[:, 1], [1.0, 1.0, 5.0])


def test_merge_ids_restores_each_ids_order_and_lod():
    ids = LoDTensor(np.array([[4], [1], [4], [6]], "int64"), [[0, 3, 4]])
    table = np.arange(20, dtype="float32").reshape(10, 2)
    shard0, shard1 = np.array([[4], [6]], "int64"), np.array([[1]], "int64")
    got = run_op("merge_ids",
                 {"Ids": [("ids", ids, LT, "int64", [-1, 1])],
                  "Rows": [("r0", LoDTensor(shard0), LT, "int64", [-1, 1]),
                           ("r1", LoDTensor(shard1), LT, "int64", [-1, 1])],
                  "X": [("x0", LoDTensor(table[shard0.ravel()]), LT, "float32", [-1, 2]),
                        ("x1", LoDTensor(table[shard1.ravel()]), LT, "float32", [-1, 2])]},
                 {"Out": [("out", LT, "float32", [-1, 2])]})
    np.testing.assert_array_equal(np.array(got["out"]), table[[4, 1, 4, 6]])
    assert got["out"].lod() == [[0, 3, 4]]


def test_merge_ids_names_an_id_that_was_not_fetched():
    with pytest.raises(fluid.errors.ExecutionError, match="id 9 of Ids\\[0\\] was not"):
        run_op("merge_ids",
               {"Ids": [("ids", LoDTensor(np.array([[9]], "int64")), LT, "int64", [-1, 1])],
                "Rows": [("r0", LoDTensor(np.array([[1]], "int64")), LT, "int64", [-1, 1])],
                "X": [("x0", LoDTensor(np.ones((1, 2), "float32")), LT, "float32", [-1, 2])]},
               {"Out": [("out", LT, "float32", [-1, 2])]})


@pytest.mark.parametrize("init", [
    {"init_type": "uniform_random", "min": -0.5, "max": 0.5, "seed": 3},
    {"init_type": "gaussian_random", "mean": 1.0, "std": 0.1, "seed": 4},
    {"init_type": "fill_constant", "value": 0.25}])
def test_lookup_sparse_table_grows_rows_from_the_initializer(init):
    ids = LoDTensor(np.array([[8], [3], [8]], "int64"))
    got = run_op("lookup_sparse_table",
                 {"W": [("w", None, SR, "float32", [100, 4])],
                  "Ids": [("ids", ids, LT, "int64", [-1, 1])]},
                 {"Out": [("out", LT, "float32", [-1, 4])]}, init)
    spec = {"type": init["init_type"], **{k: v for k, v in init.items() if k != "init_type"}}
    want = initial_rows({"min": -1.0, "max": 1.0, "mean": 0.0, "std": 1.0, "value": 0.0,
                         "seed": 0, **spec}, [8, 3, 8], 4)
    np.testing.assert_array_equal(np.array(got["out"]), want)


def test_lookup_sparse_table_is_test_and_padding():
    ids = LoDTensor(np.array([[8], [0], [5]], "int64"))
    table = SelectedRows([5], 100, np.full((1, 4), 2.0, "float32"))   # a loaded shard
    got = run_op("lookup_sparse_table",
                 {"W": [("w", table, SR, "float32", [100, 4])],
                  "Ids": [("ids", ids, LT, "int64", [-1, 1])]},
                 {"Out": [("out", LT, "float32", [-1, 4])]},
                 {"is_test": True, "padding_idx": 0, "init_type": "fill_constant",
                  "value": 1.0})
    np.testing.assert_array_equal(np.array(got["out"]),
                                  [[0.0] * 4, [0.0] * 4, [2.0] * 4])   # unseen, padding, seen


def test_fake_init_takes_no_memory():
    got = run_op("fake_init", {}, {"Out": [("t", LT, "float32", [100000, 64])]},
                 {"shape": [100000, 64]})
    a = np.array(got["t"], copy=False)
    assert a.shape == (100000, 64) and a.strides == (0, 0) and not a.any()


def test_scale_of_selected_rows():
    sr = SelectedRows([3, 1, 3], 5, np.arange(6, dtype="float32").reshape(3, 2))
    got = run_op("scale", {"X": [("g", sr, SR, "float32", [5, 2])]},
                 {"Out": [("o", SR, "float32", [5, 2])]}, {"scale": 0.5, "bias": 1.0})
    np.testing.assert_array_equal(got["o"].rows, [3, 1, 3])
    np.testing.assert_array_equal(got["o"].value, sr.value * 0.5 + 1.0)
    assert got["o"].height == 5
