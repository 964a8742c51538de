"""Fluid 1.x ops added for the fluid.layers names: the activations with attributes of
Fluid 1.x (atan, asin, acos, tanh_shrink, softshrink, hard_shrink, thresholded_relu, stanh,
soft_relu), eye, diag, reverse, isinf/isnan/isfinite, sampling_id and the *_batch_size_like
random ops — forward against numpy, gradients against finite differences."""
import numpy as np
import pytest

from op_test import check_grad, check_output, run_op

rng = np.random.default_rng(3)


def r(*shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def _sig(v):
    return 1 / (1 + np.exp(-v))


# op: (attrs, numpy reference, input range)
ACTS = {
    "atan": ({}, np.arctan, (-2, 2)),
    "asin": ({}, np.arcsin, (-0.9, 0.9)),
    "acos": ({}, np.arccos, (-0.9, 0.9)),
    "tanh_shrink": ({}, lambda x: x - np.tanh(x), (-2, 2)),
    "softshrink": ({"lambda": 0.3},
                   lambda x: np.where(x > 0.3, x - 0.3, np.where(x < -0.3, x + 0.3, 0)), (-1, 1)),
    "hard_shrink": ({"threshold": 0.4}, lambda x: np.where(np.abs(x) > 0.4, x, 0), (-1, 1)),
    "thresholded_relu": ({"threshold": 0.2}, lambda x: np.where(x > 0.2, x, 0), (-1, 1)),
    "stanh": ({"scale_a": 0.5, "scale_b": 2.0}, lambda x: 2.0 * np.tanh(0.5 * x), (-2, 2)),
    "soft_relu": ({"threshold": 1.5}, lambda x: np.log1p(np.exp(np.clip(x, -1.5, 1.5))),
                  (-3, 3)),
}


@pytest.mark.parametrize("op", sorted(ACTS))
def test_fluid1_activation(op):
    attrs, ref, (lo, hi) = ACTS[op]
    x = r(3, 5, lo=lo, hi=hi)
    # keep finite differences away from the kinks
    for k in ("lambda", "threshold"):
        if k in attrs:
            t = attrs[k]
            x[np.abs(np.abs(x) - t) < 0.05] += 0.1
    check_output(op, {"X": x}, {"Out": ref(x.astype(np.float64))}, attrs)
    check_grad(op, {"X": x}, ["X"], attrs)


def test_eye_and_diag():
    check_output("eye", {}, {"Out": np.eye(3, 4, dtype=np.float32)},
                 {"num_rows": 3, "num_columns": 4})
    check_output("eye", {}, {"Out": np.eye(2, dtype=np.float32)}, {"num_rows": 2})
    d = r(4)
    check_output("diag", {"Diagonal": d}, {"Out": np.diag(d)})


def test_reverse():
    x = r(2, 3, 4)
    check_output("reverse", {"X": x}, {"Out": x[::-1, :, ::-1]}, {"axis": [0, 2]})
    check_grad("reverse", {"X": x}, ["X"], {"axis": [1]})


def test_whole_tensor_checks():
    x = r(3, 3)
    for op, want in (("isinf", False), ("isnan", False), ("isfinite", True)):
        check_output(op, {"X": x}, {"Out": np.array([want])})
    x[1, 2] = np.inf
    check_output("isinf", {"X": x}, {"Out": np.array([True])})
    check_output("isfinite", {"X": x}, {"Out": np.array([False])})
    x[0, 0] = np.nan
    check_output("isnan", {"X": x}, {"Out": np.array([True])})


def test_sampling_id_draws_from_each_rows_distribution():
    probs = np.array([[0, 1, 0, 0], [0, 0, 0, 1], [0.5, 0.5, 0, 0]], np.float32)
    got = run_op("sampling_id", {"X": probs}, {"seed": 7})["Out"]
    assert got.dtype == np.int64 and got.shape == (3,)
    assert got[0] == 1 and got[1] == 3 and got[2] in (0, 1)
    again = run_op("sampling_id", {"X": probs}, {"seed": 7})["Out"]
    np.testing.assert_array_equal(got, again)
    many = np.tile(np.array([[0.25, 0.75]], np.float32), (4000, 1))
    frac = run_op("sampling_id", {"X": many}, {"seed": 1})["Out"].mean()
    assert abs(frac - 0.75) < 0.03


@pytest.mark.parametrize("op,attrs,check", [
    ("uniform_random_batch_size_like", {"min": 2.0, "max": 3.0},
     lambda o: o.min() >= 2.0 and o.max() < 3.0),
    ("gaussian_random_batch_size_like", {"mean": 5.0, "std": 0.1},
     lambda o: abs(o.mean() - 5.0) < 0.1),
])
def test_random_batch_size_like(op, attrs, check):
    x = r(6, 2)
    out = run_op(op, {"Input": x}, {"shape": [-1, 7], "seed": 3, **attrs})["Out"]
    assert out.shape == (6, 7) and out.dtype == np.float32 and check(out)
    out = run_op(op, {"Input": x}, {"shape": [4, 1, -1], "input_dim_idx": 1,
                                    "output_dim_idx": 2, **attrs})["Out"]
    assert out.shape == (4, 1, 2)
