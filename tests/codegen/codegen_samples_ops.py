"""Samples of the compiled forms of reductions (ops/reduce.py), creation and shape ops
(fill_any_like, fill_constant from tensors, shape, size, range), slicing (slice,
strided_slice), the Paddle 2.x activations and Fluid 1.x's (atan, asin, acos, tanh_shrink,
hard_shrink, thresholded_relu, stanh, soft_relu), gelu, log_softmax, layer_norm and clip: each op
compiled vs its numpy kernel by test_emitters.py, forward and gradient. Edge forms: negative
axes, keep_dim, reduce_all, empty dims, NaN for max/min, integer and bool dtypes, slices
with out-of-range and negative bounds and decrease_axis."""
import numpy as np
from codegen_samples import bools, dims, f32, ints, rng

F32, F64, I32, I64, BOOL = 5, 6, 2, 3, 0    # VarType codes


# --- reductions ------------------------------------------------------------------------------
def reduce(shape, wrt=True, make=f32, **attrs):
    """X of `shape` (a callable for random dims) reduced with `attrs`."""
    def sample():
        s = shape() if callable(shape) else shape
        return {"X": make(*s)}, attrs, ["X"] if wrt else None
    return sample


def three():
    return int(rng.integers(1, 4)), int(rng.integers(2, 5)), int(rng.integers(2, 6))


def with_nan(*shape):
    x = f32(*shape)
    x.reshape(-1)[::5] = np.nan
    return x


def with_zeros(shape, at):
    """Floats of `shape` with zeros at the flat positions `at`."""
    x = f32(*shape)
    x.reshape(-1)[at] = 0.0
    return x


def ties(*shape):
    """Floats with repeated extremes (every element equal to the max gets the gradient)."""
    return rng.integers(-2, 3, size=shape).astype(np.float32)


def i32(*shape):
    return ints(*shape, hi=1 << 30).astype(np.int32)


SAMPLES = {
    "reduce_sum": reduce(three, dim=[1]),
    "reduce_mean": reduce(three, dim=[-1], keep_dim=True),
    "reduce_max": reduce(three, make=ties, dim=[0, 2]),
    "reduce_min": reduce(three, make=ties, dim=[-2]),
    "reduce_prod": reduce(three, dim=[1, 2]),
    "reduce_all": reduce(three, False, bools, dim=[1]),
    "reduce_any": reduce(three, False, bools, dim=[0], keep_dim=True),
}

EXTRA = {
    "reduce_sum reduce_all": ("reduce_sum", reduce(three, reduce_all=True)),
    "reduce_sum dim [] (every dim), keep_dim": ("reduce_sum", reduce(three, dim=[],
                                                                     keep_dim=True)),
    "reduce_sum long rows (pairwise)": ("reduce_sum", reduce((3, 300), dim=[1])),
    "reduce_sum long columns (row by row)": ("reduce_sum", reduce((300, 3), dim=[0])),
    "reduce_sum axes 0 and 2 of 4": ("reduce_sum", reduce((3, 4, 150, 2), dim=[0, 2])),
    "reduce_sum size-1 dims between": ("reduce_sum", reduce((4, 1, 70, 1), dim=[1, 2])),
    "reduce_sum empty dim": ("reduce_sum", reduce((3, 0, 2), dim=[1])),
    "reduce_sum int64": ("reduce_sum", reduce(three, False, ints, dim=[0, 2])),
    "reduce_sum int32 wraps": ("reduce_sum", reduce((4, 9), False, i32, dim=[1])),
    "reduce_sum bool": ("reduce_sum", reduce(three, False, bools, dim=[1])),
    "reduce_sum float64": ("reduce_sum", reduce(three, False, lambda *s: rng.uniform(
        -1, 1, s), dim=[-1])),
    "reduce_sum float to int64 (out_dtype)": ("reduce_sum", reduce(
        three, False, lambda *s: f32(*s, lo=-9, hi=9), dim=[1], out_dtype=I64)),
    "reduce_sum float to float64 (out_dtype)": ("reduce_sum", reduce(
        (2, 200), False, dim=[1], out_dtype=F64)),
    "reduce_mean reduce_all": ("reduce_mean", reduce(three, reduce_all=True)),
    "reduce_mean middle axis": ("reduce_mean", reduce(three, dim=[1])),
    "reduce_mean empty (NaN)": ("reduce_mean", reduce((2, 0), False, dim=[1])),
    "reduce_mean int64": ("reduce_mean", reduce((3, 40), False, lambda *s: ints(
        *s, hi=1 << 40), dim=[1])),
    "reduce_mean int64 long rows (cast buffers)": ("reduce_mean", reduce(
        (2, 20000), False, lambda *s: ints(*s, hi=1 << 62), dim=[1])),
    "reduce_max NaN": ("reduce_max", reduce(three, False, with_nan, dim=[-1])),
    "reduce_min NaN, keep_dim": ("reduce_min", reduce(three, False, with_nan, dim=[0],
                                                      keep_dim=True)),
    "reduce_max reduce_all": ("reduce_max", reduce(three, make=ties, reduce_all=True)),
    "reduce_max int32": ("reduce_max", reduce(three, False, i32, dim=[1])),
    "reduce_min int64 all": ("reduce_min", reduce(three, False, ints, reduce_all=True)),
    "reduce_max bool": ("reduce_max", reduce(three, False, bools, dim=[2])),
    "reduce_prod int64 wraps": ("reduce_prod", reduce((3, 30), False, lambda *s: ints(
        *s, hi=1000), dim=[1])),
    "reduce_prod empty dim": ("reduce_prod", reduce((0, 3), False, dim=[0])),
    # the gradient over non-adjacent dims, groups holding one zero and two
    "reduce_prod dims 0 and 2 with zeros, keep_dim": ("reduce_prod", reduce(
        (3, 2, 4), make=lambda *s: with_zeros(s, [0, 5, 7]), dim=[0, 2], keep_dim=True)),
    "reduce_all reduce_all": ("reduce_all", reduce(three, False, bools, reduce_all=True)),
    "reduce_any negative dim": ("reduce_any", reduce(three, False, bools, dim=[-1, -3])),
}


# --- creation and shape ops --------------------------------------------------------------------
def fill_any_like(make, **attrs):
    def sample():
        return {"X": make(*dims())}, attrs, None
    return sample


SAMPLES.update({
    "fill_any_like": fill_any_like(f32, value=2.5, dtype=-1),
    "shape": lambda: ({"Input": f32(*three())}, {}, None),
    "size": lambda: ({"Input": f32(*three())}, {}, None),
})
EXTRA.update({
    "fill_any_like int64 to float64": ("fill_any_like", fill_any_like(ints, value=-1.5,
                                                                       dtype=F64)),
    "fill_any_like to int32 (truncated)": ("fill_any_like", fill_any_like(f32, value=-3.75,
                                                                          dtype=I32)),
    "fill_any_like to bool": ("fill_any_like", fill_any_like(f32, value=0.5, dtype=BOOL)),
    "fill_any_like -inf": ("fill_any_like", fill_any_like(f32, value=float("-inf"))),
    "fill_constant from ValueTensor": ("fill_constant", lambda: (
        {"ValueTensor": f32(1)}, {"shape": [2, 3], "dtype": I64}, None)),
    "fill_constant str_value inf": ("fill_constant", lambda: (
        {}, {"shape": [3], "dtype": F32, "str_value": "-inf"}, None)),
    "shape of a 1-D tensor": ("shape", lambda: ({"Input": ints(5)}, {}, None)),
})


# --- slice, strided_slice ----------------------------------------------------------------------
def sliced(op, shape, wrt=True, make=f32, **attrs):
    def sample():
        return {"Input": make(*shape)}, attrs, ["Input"] if wrt else None
    return sample


SAMPLES.update({
    "slice": sliced("slice", (4, 5, 6), axes=[0, 2], starts=[1, -4], ends=[3, 100]),
    "strided_slice": sliced("strided_slice", (5, 6, 7), axes=[0, 2], starts=[0, -1],
                            ends=[5, 0], strides=[2, -2]),
})
EXTRA.update({
    "slice decrease_axis": ("slice", sliced("slice", (3, 4, 5), axes=[1], starts=[-1],
                                            ends=[2147483647], decrease_axis=[1])),
    "slice every axis decreased": ("slice", sliced("slice", (2, 3), axes=[0, 1],
                                                   starts=[1, 0], ends=[2, 1],
                                                   decrease_axis=[0, 1])),
    "slice empty (start past end)": ("slice", sliced("slice", (4, 5), False, axes=[1],
                                                     starts=[3], ends=[1])),
    "slice out of range both ways, negative axis": ("slice", sliced(
        "slice", (4, 5), axes=[-1], starts=[-100], ends=[-2])),
    "slice int64": ("slice", sliced("slice", (6, 3), False, ints, axes=[0], starts=[2],
                                    ends=[-1])),
    "slice bool": ("slice", sliced("slice", (6, 3), False, bools, axes=[1], starts=[1],
                                   ends=[3])),
    "strided_slice negative stride past both ends": ("strided_slice", sliced(
        "strided_slice", (6, 4), axes=[0], starts=[100], ends=[-100], strides=[-1])),
    "strided_slice decrease_axis": ("strided_slice", sliced(
        "strided_slice", (5, 4), axes=[0, 1], starts=[2, 0], ends=[3, 4], strides=[1, 3],
        decrease_axis=[0])),
    "strided_slice empty": ("strided_slice", sliced(
        "strided_slice", (5, 4), False, axes=[1], starts=[1], ends=[1], strides=[1])),
})


# --- activations, log_softmax, layer_norm, clip --------------------------------------------------
def act(lo=-4.0, hi=4.0, **attrs):
    def sample():
        return {"X": f32(*dims(), lo=lo, hi=hi)}, attrs, ["X"]
    return sample


def special(*values):
    """Edge inputs for an activation: its kinks and NaN, then random ones."""
    def sample():
        x = f32(3, 8, lo=-8, hi=8)
        x.reshape(-1)[:len(values)] = values
        return {"X": x}, {}, None
    return sample


def _own_draws(lo, hi, lam, values=()):
    """softshrink's sample, from a generator of its own (a sample added later must not move
    the other samples' draws: compiled outputs are compared with earlier runs bit for bit)."""
    x = np.random.default_rng(11).uniform(lo, hi, size=(4, 6)).astype(np.float32)
    x.reshape(-1)[:len(values)] = values
    return {"X": x}, {"lambda": lam}, ["X"] if not values else None


SAMPLES.update({
    "gelu": act(),
    "mish": act(-30, 30, threshold=20.0),
    "relu6": act(-2, 8),
    "brelu": act(-3, 30, t_min=-1.0, t_max=20.0),
    "hard_sigmoid": act(-4, 4),
    "hard_swish": act(-5, 5),
    "swish": act(beta=1.5),
    "elu": act(alpha=0.7),
    "selu": act(),
    "log1p": act(-0.9, 4),
    "erf": act(-3, 3),
    "softshrink": lambda: _own_draws(-2, 2, 0.5),
    "log_softmax": act(axis=1),
    "layer_norm": lambda: (lambda n, m: (
        {"X": f32(n, 2, m), "Scale": f32(2 * m), "Bias": f32(2 * m)},
        {"begin_norm_axis": 1, "epsilon": 1e-5}, ["X", "Scale", "Bias"]))(*dims()),
    "clip": lambda: ({"X": f32(*dims())}, {"min": -0.5, "max": 1.25}, ["X"]),
    # sqrt's gradient op, whose own gradient is sqrt_grad_grad
    "sqrt_grad": lambda: (lambda s: ({"Out": f32(*s, lo=0.5, hi=2.0), "Out@GRAD": f32(*s)},
                                     {}, ["Out", "Out@GRAD"]))(dims()),
    # Fluid 1.x's activations
    "atan": act(-3, 3),
    "asin": act(-0.95, 0.95),
    "acos": act(-0.95, 0.95),
    "tanh_shrink": act(),
    "hard_shrink": act(threshold=0.7),
    "thresholded_relu": act(threshold=0.5),
    "stanh": act(scale_a=0.5, scale_b=1.5),
    "soft_relu": act(-30, 30, threshold=20.0),
})
EXTRA.update({
    "gelu approximate": ("gelu", act(approximate=True)),
    "relu6 kinks and NaN": ("relu6", special(0.0, 6.0, -0.0, np.nan, np.inf, -np.inf)),
    "hard_swish kinks and NaN": ("hard_swish", special(-3.0, 3.0, 0.0, np.nan)),
    "hard_sigmoid other slope": ("hard_sigmoid", act(slope=0.1666667, offset=0.5)),
    "elu NaN and infinities": ("elu", special(np.nan, np.inf, -np.inf, 0.0, -0.0)),
    "hard_shrink kinks and NaN": ("hard_shrink", special(0.5, -0.5, 0.0, np.nan, np.inf)),
    "soft_relu at its threshold, NaN": ("soft_relu", special(40.0, -40.0, 0.0, np.nan)),
    "softshrink kinks and NaN": ("softshrink", lambda: _own_draws(
        -8, 8, 0.5, (0.5, -0.5, 0.0, -0.0, np.nan, np.inf))),
    "log_softmax last axis, long rows": ("log_softmax", lambda: (
        {"X": f32(3, 200)}, {"axis": -1}, ["X"])),
    "log_softmax first axis of 3": ("log_softmax", lambda: (
        {"X": f32(4, 3, 5)}, {"axis": 0}, ["X"])),
    "layer_norm no scale, bias, 3-D rows": ("layer_norm", lambda: (
        {"X": f32(2, 3, 4, 5)}, {"begin_norm_axis": 2}, ["X"])),
    "layer_norm one column, scale only": ("layer_norm", lambda: (
        {"X": f32(20, 1), "Scale": f32(1)}, {"begin_norm_axis": 1}, ["X", "Scale"])),
    "layer_norm long rows": ("layer_norm", lambda: (
        {"X": f32(3, 300), "Scale": f32(300), "Bias": f32(300)}, {"begin_norm_axis": 1},
        ["X", "Scale", "Bias"])),
    "clip NaN and the bounds themselves": ("clip", lambda: (
        {"X": np.array([[np.nan, -0.5, 1.25, 3.0, -7.0, 0.0]], np.float32)},
        {"min": -0.5, "max": 1.25}, ["X"])),
    "clip Min and Max tensors": ("clip", lambda: (
        {"X": f32(*dims()), "Min": np.array([-0.25], np.float32),
         "Max": np.array([0.5], np.float32)}, {}, ["X"])),
    "clip float64": ("clip", lambda: ({"X": rng.uniform(-2, 2, dims())},
                                      {"min": 0.1, "max": 0.3}, None)),
    "clip one-sided (max float32's largest)": ("clip", lambda: (
        {"X": f32(*dims())}, {"min": 1.0, "max": 3.4028234663852886e+38}, ["X"])),
})

# range compiles only where its bounds are values the compiled code makes (constants, dims):
# tests/codegen/test_known_values.py, with the ops that take shapes and bounds from tensors
ELSEWHERE = {"range"}
