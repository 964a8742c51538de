"""fill, fill_zeros_like2 (fluidity/ops/creation.py): values, shapes and dtypes against numpy,
too few values refused by name."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.errors import ExecutionError, ShapeError
from op_test import run_op


def test_fill_and_fill_zeros_like2():
    rng = np.random.default_rng(7)
    vals = rng.uniform(-5, 5, 6)
    for dtype, np_t in ((fluid.core.VarDesc.VarType.FP64, np.float64),
                        (fluid.core.VarDesc.VarType.INT32, np.int32)):
        got = run_op("fill", {}, {"value": vals.tolist(), "shape": [2, 3], "dtype": dtype})
        want = vals.astype(np.float32).astype(np_t).reshape(2, 3)   # the values are floats
        np.testing.assert_array_equal(got["Out"], want)
        assert got["Out"].dtype == np_t
    with pytest.raises((ShapeError, ExecutionError), match="needs 6 values"):
        run_op("fill", {}, {"value": [1.0, 2.0], "shape": [2, 3]})
    x = rng.uniform(size=(2, 5)).astype(np.float32)
    got = run_op("fill_zeros_like2", {"X": x},
                 {"dtype": fluid.core.VarDesc.VarType.INT64})["Out"]
    assert got.dtype == np.int64 and got.shape == (2, 5) and not got.any()


def test_seeded_uniform_random_is_philox_under_key_seed():
    """seed 13: U[-1, 3) from key (13, 0), run 0 (an independent scalar Philox)."""
    from philox_reference import uniform
    got = run_op("uniform_random", {}, {"shape": [2, 5], "min": -1.0, "max": 3.0, "seed": 13})
    np.testing.assert_array_equal(got["Out"].reshape(-1),
                                  np.float32(uniform(10, -1.0, 3.0, 13)))
