"""seed and shuffle_batch (fluidity/ops/seeded.py) and contrib.layers.shuffle_batch: the
permutation is a permutation, reproducible from its seed, routed back by the gradient."""
import numpy as np
import pytest

import fluidity as fluid
from op_test import check_grad, run_op


def test_seed():
    assert run_op("seed", {}, {"seed": 123})["Out"].tolist() == [123]
    out = run_op("seed", {}, {"seed": 0})["Out"]
    assert out.dtype == np.int32 and out.shape == (1,)


def test_shuffle_batch_permutes_rows():
    x = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    seed = np.array([7], np.int64)
    got = run_op("shuffle_batch", {"X": x, "Seed": seed})
    rows, idx = x.reshape(6, 4), got["ShuffleIdx"]
    assert sorted(idx.tolist()) == list(range(6))
    np.testing.assert_array_equal(got["Out"].reshape(6, 4)[idx], rows)
    assert got["Out"].shape == x.shape and got["SeedOut"].shape == (1,)
    again = run_op("shuffle_batch", {"X": x, "Seed": seed})
    np.testing.assert_array_equal(again["ShuffleIdx"], idx)
    check_grad("shuffle_batch", {"X": x, "Seed": seed}, ["X"], output_slots=["Out"])


def test_contrib_shuffle_batch_advances_its_seed():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 2], "float32")
        out = fluid.contrib.layers.shuffle_batch(x, seed=5)
    exe = fluid.Executor()
    exe.run(startup)
    xv = np.arange(40, dtype=np.float32).reshape(20, 2)
    a, = exe.run(main, feed={"x": xv}, fetch_list=[out])
    b, = exe.run(main, feed={"x": xv}, fetch_list=[out])
    for v in (a, b):
        assert sorted(v[:, 0].tolist()) == xv[:, 0].tolist()
        np.testing.assert_array_equal(v[:, 1], v[:, 0] + 1)
    assert not np.array_equal(a, b)     # the stored seed moved on
    with pytest.raises(TypeError, match="seed"):
        with fluid.program_guard(main, startup):
            fluid.contrib.layers.shuffle_batch(x, seed="5")
