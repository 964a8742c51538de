"""Random inputs for every op with a compiled form: `SAMPLES[op_type]()` returns
(inputs, attrs, wrt[, outputs]) as tests/op_test.build_op takes them (wrt: the inputs its
gradient is checked for, None for none; outputs: the slots to make, when not all), `EXTRA`
more forms of those ops. Each area's samples may live in its own codegen_samples_*.py module
(SAMPLES and EXTRA dicts); `all_samples()` merges them."""
import glob
import importlib
import os

import numpy as np

from fluidity.core.tensor import LoDTensor
from fluidity.ops.activation import ACTIVATIONS

rng = np.random.default_rng(7)


def f32(*shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def dims():
    return int(rng.integers(1, 6)), int(rng.integers(2, 7))


def unary(lo=-2.0, hi=2.0):
    def sample():
        n, m = dims()
        return {"X": f32(n, m, lo=lo, hi=hi)}, {}, ["X"]
    return sample


def binary(y_shape=None, lo=-2.0, hi=2.0):
    def sample():
        n, m = dims()
        return ({"X": f32(n, m, lo=lo, hi=hi), "Y": f32(*(y_shape(n, m) if y_shape else (n, m)),
                                                        lo=lo, hi=hi)}, {}, ["X", "Y"])
    return sample


def matmul(tx, ty, names):
    def sample():
        m, k = dims()
        n = int(rng.integers(1, 5))
        x = f32(k, m) if tx else f32(m, k)
        y = f32(n, k) if ty else f32(k, n)
        return {"X": x, "Y": y}, {names[0]: tx, names[1]: ty}, ["X", "Y"]
    return sample


def swce():
    n, c = dims()
    return ({"Logits": f32(n, c), "Label": rng.integers(0, c, (n, 1)).astype(np.int64)}, {},
            ["Logits"])


def update(states, attrs=None, extra=None):
    def sample():
        n, m = dims()
        ins = {"Param": f32(n, m), "Grad": f32(n, m),
               "LearningRate": np.array([0.1], np.float32)}
        ins.update({s: f32(n, m, lo=0.0, hi=1.0) for s in states})
        ins.update(extra() if extra else {})
        return ins, dict(attrs or {}), None
    return sample


def adam_extra():
    return {"Beta1Pow": np.array([0.9 ** 3], np.float32),
            "Beta2Pow": np.array([0.999 ** 3], np.float32)}


def lod_ids(height, lens):
    t = LoDTensor(rng.integers(0, height, (sum(lens), 1)).astype(np.int64))
    t.set_recursive_sequence_lengths([lens])
    return t


def random_lens():
    return [int(n) for n in rng.integers(0, 4, int(rng.integers(1, 5)))]


def lookup():
    h, d = int(rng.integers(3, 9)), int(rng.integers(1, 5))
    return ({"W": f32(h, d), "Ids": rng.integers(0, h, (int(rng.integers(1, 7)), 1))},
            {"padding_idx": 1}, ["W"])


def pooled(multi):
    def sample():
        h, d, lens = int(rng.integers(3, 9)), int(rng.integers(1, 5)), random_lens()
        ids = [(f"ids{k}", lod_ids(h, lens)) for k in range(3)] if multi else lod_ids(h, lens)
        return {"W": f32(h, d), "Ids": ids}, {"padding_idx": 0}, ["W"]
    return sample


def seq_pool(ptype):
    def sample():
        lens = random_lens() + [0]
        x = LoDTensor(f32(sum(lens), 3))
        x.set_recursive_sequence_lengths([lens])
        return {"X": x}, {"pooltype": ptype, "pad_value": 0.5}, ["X"]
    return sample


def xent():
    n, c = dims()
    p = rng.uniform(0.05, 1.0, (n, c)).astype(np.float32)
    return ({"X": p / p.sum(1, keepdims=True), "Label": rng.integers(0, c, (n, 1))}, {},
            ["X"])


def conv(groups=1):
    def sample():
        n, c, m = int(rng.integers(1, 3)), 2 * groups, 2 * groups
        return ({"Input": f32(n, c, 6, 5), "Filter": f32(m, c // groups, 3, 2)},
                {"strides": [2, 1], "paddings": [1, 0], "groups": groups, "dilations": [1, 2]},
                ["Input", "Filter"])
    return sample


def pool(ptype, **attrs):
    def sample():
        return ({"X": f32(int(rng.integers(1, 3)), 2, 5, 6)},
                {"pooling_type": ptype, "ksize": [3, 2], "strides": [2, 2], "paddings": [1, 0],
                 **attrs}, ["X"])
    return sample


def batch_norm(is_test):
    def sample():
        n, c = int(rng.integers(2, 4)), 3
        return ({"X": f32(n, c, 2, 3), "Scale": f32(c, lo=0.5), "Bias": f32(c),
                 "Mean": f32(c), "Variance": f32(c, lo=0.5, hi=1.5)},
                {"is_test": is_test, "epsilon": 1e-4}, None if is_test else ["X", "Scale", "Bias"],
                ["Y", "MeanOut", "VarianceOut", "SavedMean", "SavedVariance"])
    return sample


def shape_op(**attrs):
    def sample():
        return {"X": f32(int(rng.integers(1, 4)), 3, 1, 4)}, attrs, ["X"]
    return sample


SAMPLES = {
    "scale": lambda: ({"X": f32(*dims())}, {"scale": 1.5, "bias": -0.25}, ["X"]),
    "elementwise_add": binary(), "elementwise_sub": binary(),
    "elementwise_mul": binary(lambda n, m: (m,)), "elementwise_div": binary(lo=0.5, hi=2.0),
    "elementwise_max": binary(), "elementwise_min": binary(),
    "elementwise_pow": binary(lo=0.5, hi=1.5),
    "leaky_relu": unary(), "pow": unary(0.5, 2.0), "softplus": unary(),
    "softmax": unary(),
    "mul": lambda: (lambda m, k, n: ({"X": f32(m, k), "Y": f32(k, n)}, {}, ["X", "Y"]))(
        *dims(), int(rng.integers(1, 5))),
    "matmul": matmul(False, True, ("transpose_X", "transpose_Y")),
    "matmul_v2": matmul(True, False, ("trans_x", "trans_y")),
    "fc": lambda: (lambda m, k, n: ({"Input": f32(m, k), "W": f32(k, n), "Bias": f32(n)},
                                    {"activation_type": "relu"}, ["Input", "W", "Bias"]))(
        *dims(), int(rng.integers(1, 5))),
    "sum": lambda: (lambda s: ({"X": [("s0", f32(*s)), ("s1", f32(*s)), ("s2", f32(*s))]}, {},
                               [("X", 0), ("X", 2)]))(dims()),
    "mean": unary(),
    "fill_constant": lambda: ({}, {"shape": list(dims()), "value": 2.5, "dtype": 5}, None),
    "softmax_with_cross_entropy": swce,
    "sgd": update(()),
    "momentum": update(("Velocity",), {"mu": 0.9, "use_nesterov": True}),
    "adagrad": update(("Moment",)),
    "adam": update(("Moment1", "Moment2"), extra=adam_extra),
    "lookup_table": lookup, "lookup_table_v2": lookup,
    "fused_embedding_seq_pool": pooled(False), "fused_embedding_seq_pool_concat": pooled(True),
    "sequence_pool": seq_pool("SUM"),
    "concat": lambda: (lambda n, m: ({"X": [("c0", f32(n, m)), ("c1", f32(n, 2)),
                                             ("c2", f32(n, 1))]}, {"axis": 1},
                                      [("X", 0), ("X", 1)]))(*dims()),
    "cross_entropy": xent, "cross_entropy2": xent,
    "conv2d": conv(), "depthwise_conv2d": conv(groups=2),
    "pool2d": pool("max"), "batch_norm": batch_norm(False),
    "dropout": lambda: ({"X": f32(*dims())}, {"is_test": True, "dropout_prob": 0.25}, None,
                        ["Out"]),
    "reshape2": shape_op(shape=[0, -1]), "transpose2": shape_op(axis=[2, 0, 3, 1]),
    "squeeze2": shape_op(axes=[2]), "unsqueeze2": shape_op(axes=[0]),
    "flatten2": shape_op(axis=2), "flatten_contiguous_range": shape_op(start_axis=1, stop_axis=2),
}


def ints(*shape, hi=4):
    return rng.integers(-hi, hi, size=shape).astype(np.int64)


def compare(make):
    """X and Y from `make(*shape)` with some elements equal (comparisons' edge)."""
    def sample():
        n, m = dims()
        x, y = make(n, m), make(n, m)
        y.reshape(-1)[::3] = x.reshape(-1)[::3]
        return {"X": x, "Y": y}, {}, None
    return sample


def bools(*shape):
    return rng.integers(0, 2, size=shape).astype(bool)


SAMPLES.update({
    **{t: compare(ints) for t in ("less_than", "less_equal", "greater_than", "greater_equal",
                                  "equal", "not_equal")},
    **{t: compare(bools) for t in ("logical_and", "logical_or", "logical_xor")},
    "logical_not": lambda: ({"X": bools(*dims())}, {}, None),
    "cast": lambda: ({"X": f32(*dims(), lo=-9, hi=9)}, {"in_dtype": 5, "out_dtype": 3}, None),
    "assign": lambda: ({"X": ints(*dims())}, {}, None),
    "increment": lambda: ({"X": ints(1)}, {"step": 3.0}, None),
    "sigmoid_cross_entropy_with_logits": lambda: sigmoid_xent({}),
    "fill_zeros_like": lambda: ({"X": f32(*dims())}, {}, None),
    "group_norm": lambda: ({"X": f32(int(rng.integers(1, 4)), 6, 3, 4), "Scale": f32(6),
                            "Bias": f32(6)}, {"groups": 3, "epsilon": 1e-5}, None,
                           ["Y", "Mean", "Variance"]),
    "instance_norm": lambda: ({"X": f32(int(rng.integers(1, 4)), 3, 5, 4), "Scale": f32(3),
                               "Bias": f32(3)}, {"epsilon": 1e-5}, None,
                              ["Y", "SavedMean", "SavedVariance"]),
    "one_hot": lambda: ({"X": rng.integers(0, 5, (int(rng.integers(1, 7)), 1))},
                        {"depth": 5}, None),
    "one_hot_v2": lambda: ({"X": rng.integers(-2, 6, (3, 4)).astype(np.int32)},
                           {"depth": 5, "allow_out_of_range": True, "dtype": 3}, None),
    "top_k": lambda: (lambda n, m: ({"X": ties(n, m)}, {"k": int(rng.integers(1, m + 1))},
                                    ["X"], ["Out", "Indices"]))(*dims()),
    "top_k_v2": lambda: ({"X": ties(3, 5, 4)}, {"k": 2, "axis": 1, "largest": False}, ["X"],
                         ["Out", "Indices"]),
    "accuracy": lambda: (lambda n: ({"Out": f32(n, 2), "Indices": ints(n, 2, hi=3),
                                     "Label": ints(n, 1, hi=3)}, {}, None,
                                    ["Accuracy", "Correct", "Total"]))(int(rng.integers(1, 9))),
})


def ties(*shape):
    """Values with ties, +-0 and a NaN: top_k's order among equals is by index, NaN last."""
    x = rng.integers(-3, 3, shape).astype(np.float32)
    x.reshape(-1)[0] = -0.0
    if x.size > 3:
        x.reshape(-1)[3] = np.nan
    return x


def sigmoid_xent(attrs):
    """Logits (some large) and labels in [0, 1], a few of them ignore_index (-100 or the
    attribute's), the others counted."""
    n, m = dims()
    label = rng.uniform(0, 1, (n, m)).astype(np.float32)
    label[rng.random((n, m)) < 0.3] = attrs.get("ignore_index", -100)
    return {"X": f32(n, m, lo=-30, hi=30), "Label": label}, attrs, ["X"]
# select_input is compiled only where its inputs are made in the same compiled code (the two
# branches of a cond): tests/codegen/test_compiled_blocks.py
ELSEWHERE = {"select_input", "auc"}   # auc: tests/codegen/test_metrics_compiled.py
EXTRA = {   # more forms of ops above: each compiled vs the kernel too
    "adam written by Paddle 2.1+ (scaled epsilon)": ("adam", update(
        ("Moment1", "Moment2"), {"use_global_beta_pow": False}, extra=adam_extra)),
    "group_norm without scale and bias, 3-D": ("group_norm", lambda: (
        {"X": f32(2, 4, 7)}, {"groups": 2}, None, ["Y", "Mean", "Variance"])),
    "instance_norm without scale": ("instance_norm", lambda: (
        {"X": f32(2, 3, 6), "Bias": f32(3)}, {}, None, ["Y", "SavedMean", "SavedVariance"])),
    "fill_zeros_like int64": ("fill_zeros_like", lambda: ({"X": ints(*dims())}, {}, None)),
    "top_k_v2 largest over the last axis": ("top_k_v2", lambda: (
        {"X": f32(4, 7)}, {"k": 3}, ["X"], ["Out", "Indices"])),
    "top_k_v2 axis 0, k = n": ("top_k_v2", lambda: (
        {"X": ties(4, 3)}, {"k": 4, "axis": 0}, ["X"], ["Out", "Indices"])),
    "sigmoid_cross_entropy_with_logits normalized": ("sigmoid_cross_entropy_with_logits",
                                                     lambda: sigmoid_xent({"normalize": True})),
    "sigmoid_cross_entropy_with_logits ignore_index 1": (
        "sigmoid_cross_entropy_with_logits", lambda: sigmoid_xent({"ignore_index": 1})),
    "less_than float": ("less_than", compare(f32)),
    "equal broadcast": ("equal", lambda: (lambda x: ({"X": x, "Y": x[0].copy()}, {"axis": 1},
                                                     None))(ints(3, 4))),
    "cast to bool": ("cast", lambda: ({"X": f32(*dims()).round()},
                                      {"in_dtype": 5, "out_dtype": 0}, None)),
    "cast int to float64": ("cast", lambda: ({"X": ints(*dims(), hi=1 << 40)},
                                             {"in_dtype": 3, "out_dtype": 6}, None)),
    "increment float": ("increment", lambda: ({"X": f32(1)}, {"step": -0.5}, None)),
    "elementwise_add int64": ("elementwise_add", compare(ints)),
    "elementwise_mul int32 broadcast": ("elementwise_mul", lambda: (lambda x: (
        {"X": x, "Y": x[:, :1].reshape(-1).copy()}, {"axis": 0}, None))(
            ints(3, 4).astype(np.int32))),
    # Y one value a channel of an NCHW X (a conv's bias): dY sums runs of H*W elements,
    # 19 here (two full lanes of 8 and a tail of 3)
    "elementwise_add channel": ("elementwise_add", lambda: (
        {"X": f32(2, 3, 1, 19), "Y": f32(3)}, {"axis": 1}, ["X", "Y"])),
    "elementwise_mul channel": ("elementwise_mul", lambda: (
        {"X": f32(3, 2, 19), "Y": f32(2)}, {"axis": 1}, ["X", "Y"])),
    "elementwise_sub channel": ("elementwise_sub", lambda: (
        {"X": f32(2, 4, 5), "Y": f32(4)}, {"axis": 1}, ["X", "Y"])),
    "scale int64": ("scale", lambda: ({"X": ints(*dims(), hi=100)},
                                      {"scale": -1.7, "bias": 2.5}, None)),
    "scale float64 bias first": ("scale", lambda: (
        {"X": rng.uniform(-2, 2, dims())}, {"scale": 0.3, "bias": 0.1,
                                             "bias_after_scale": False}, None)),
    "pool2d avg": ("pool2d", pool("avg", exclusive=False)),
    "pool2d avg exclusive ceil": ("pool2d", pool("avg", ceil_mode=True)),
    "pool2d global max": ("pool2d", pool("max", global_pooling=True)),
    "batch_norm test": ("batch_norm", batch_norm(True)),
    "conv2d bias": ("conv2d", lambda: (lambda i, a, w: (
        {**i, "Bias": f32(i["Filter"].shape[0])}, a, w + ["Bias"]))(*conv()())),
    "dropout upscale": ("dropout", lambda: ({"X": f32(*dims())},
                                            {"is_test": True, "dropout_implementation":
                                             "upscale_in_train"}, None, ["Out"])),
}
SEQUENCE_POOLS = ["SUM", "AVERAGE", "SQRT", "MAX", "MIN", "FIRST", "LAST"]
for _t in ACTIVATIONS:
    SAMPLES.setdefault(_t, unary(0.2, 2.0) if _t in ("log", "sqrt", "rsqrt") else unary())


def all_samples():
    """(SAMPLES, EXTRA, ELSEWHERE: ops whose compiled form is tested in a whole program) of
    this module and every codegen_samples_*.py beside it."""
    samples, extra, elsewhere = dict(SAMPLES), dict(EXTRA), set(ELSEWHERE)
    here = os.path.dirname(os.path.abspath(__file__))
    for path in sorted(glob.glob(os.path.join(here, "codegen_samples_*.py"))):
        mod = importlib.import_module(os.path.basename(path)[:-3])
        clash = (set(mod.SAMPLES) & set(samples)) | (set(getattr(mod, "EXTRA", {})) & set(extra))
        assert not clash, f"{path}: samples defined twice: {sorted(clash)}"
        samples.update(mod.SAMPLES)
        extra.update(getattr(mod, "EXTRA", {}))
        elsewhere.update(getattr(mod, "ELSEWHERE", ()))
    return samples, extra, elsewhere
