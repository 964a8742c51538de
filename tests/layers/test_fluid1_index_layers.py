"""Fluid 1.x indexing layers (gather_nd, scatter, scatter_nd_add, scatter_nd, unique,
unique_with_counts, shard_index, expand_as, strided_slice, rank, size, reduce_all,
reduce_any): built as Fluid programs call them, run, trained through where differentiable."""
import numpy as np
import pytest

import fluidity as fluid
from layer_programs import run_built

L = fluid.layers


_run = run_built


def test_index_layers_forward():
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    ids = np.array([3, 1], np.int64)

    def build():
        xv = L.data("x", [4, 6], append_batch_size=False)
        iv = L.data("ids", [2], dtype="int64", append_batch_size=False)
        nd = L.assign(np.array([[0, 1], [3, 5]], np.int64))
        upd = L.fill_constant([2, 6], "float32", 1.0)
        u, idx, cnt = L.unique_with_counts(L.assign(np.array([4, 4, 2], np.int64)))
        return [L.gather_nd(xv, nd), L.scatter(xv, iv, upd),
                L.scatter_nd_add(xv, nd, L.fill_constant([2], "float32", 10.0)),
                L.scatter_nd(nd, L.fill_constant([2], "float32", 2.0), [4, 6]),
                u, idx, cnt, L.shard_index(L.assign(np.array([[3], [7]], np.int64)), 8, 2, 1),
                L.expand_as(L.assign(np.ones((1, 3), np.float32)),
                            L.fill_constant([2, 3], "float32", 0.0)),
                L.strided_slice(xv, axes=[0, 1], starts=[3, 0], ends=[0, 6], strides=[-2, 3]),
                L.rank(xv), L.size(xv),
                L.reduce_all(L.greater_than(xv, L.fill_constant([1], "float32", -1.0))),
                L.reduce_any(L.greater_than(xv, L.fill_constant([1], "float32", 30.0)), dim=1)]
    (gnd, sc, sna, snd, u, idx, cnt, sh, ea, ss, rk, sz, ra, rany) = _run(
        build, {"x": x, "ids": ids})
    np.testing.assert_array_equal(gnd, [1, 23])
    want = x.copy()
    want[[3, 1]] = 1
    np.testing.assert_array_equal(sc, want)
    want = x.copy()
    want[0, 1] += 10
    want[3, 5] += 10
    np.testing.assert_array_equal(sna, want)
    assert snd[0, 1] == 2 and snd[3, 5] == 2 and snd.sum() == 4
    assert u.tolist() == [4, 2] and idx.tolist() == [0, 0, 1] and cnt.tolist() == [2, 1]
    assert sh.reshape(-1).tolist() == [-1, 3]
    np.testing.assert_array_equal(ea, np.ones((2, 3)))
    np.testing.assert_array_equal(ss, x[3:0:-2, 0:6:3])
    assert int(np.asarray(rk).reshape(-1)[0]) == 2 and int(np.asarray(sz).reshape(-1)[0]) == 24
    assert bool(np.asarray(ra).reshape(-1)[0]) and not rany.any()


def test_scatter_trains_through_updates():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [3, 4], append_batch_size=False)
        w = L.create_parameter([2, 4], "float32")
        out = L.scatter(x, L.assign(np.array([0, 2], np.int64)), w)
        loss = L.reduce_sum(L.square(out))
        fluid.optimizer.SGD(0.1).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    x = np.ones((3, 4), np.float32)
    first = float(np.asarray(exe.run(main, feed={"x": x}, fetch_list=[loss])[0]).reshape(-1)[0])
    for _ in range(20):
        last = float(np.asarray(exe.run(main, feed={"x": x}, fetch_list=[loss])[0]).reshape(-1)[0])
    assert last < first and abs(last - 4.0) < 0.1     # the untouched row stays


def test_index_layers_refuse_bad_arguments():
    with pytest.raises(TypeError, match="gather_nd: 'index' must be a Variable"):
        _run(lambda: [L.gather_nd(L.zeros([2], "float32"), [0])], {})
    with pytest.raises(ValueError, match="shard_index: shard_id=3"):
        _run(lambda: [L.shard_index(L.zeros([2, 1], "int64"), 8, 2, 3)], {})


def test_a_variable_step_slices_by_its_value():
    # x[a:b:s] with s a [1] int tensor (Fluid 1.8 builds strided_slice with StridesTensorList)
    x = np.arange(24, dtype="float32").reshape(4, 6)
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        xv = L.data("x", [4, 6], append_batch_size=False)
        minus_1 = L.fill_constant([1], "int32", -1)
        two = L.fill_constant([1], "int32", 2)
        out = xv[0:4:two, 5:1:minus_1]
        with pytest.raises(ValueError, match="nonzero int or a Variable"):
            xv[0:4:0]
    assert [op.type for op in main.global_block().ops].count("strided_slice") == 1
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": x}, fetch_list=[out])
    np.testing.assert_array_equal(got, x[0:4:2, 5:1:-1])


def test_a_tensor_index_of_minus_one_is_the_last_element():
    """x[i] with a tensor i = -1: Fluid builds end = i + 1 = 0, and its slice and
    strided_slice kernels read start -1, end 0 on a decreased axis as the last element."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [3, 4, 5], "float64")
        minus_1 = fluid.layers.fill_constant([1], "int32", -1)
        one = fluid.layers.fill_constant([1], "int32", 1)
        outs = [x[minus_1], x[minus_1, 1:3, 0:5:2], x[one, :, minus_1]]
    a = np.random.default_rng(0).standard_normal((3, 4, 5))
    got = fluid.Executor().run(main, feed={"x": a}, fetch_list=outs)
    for g, want in zip(got, (a[-1], a[-1, 1:3, 0:5:2], a[1, :, -1])):
        np.testing.assert_array_equal(g, want)
