"""Every op with a compiled form, compiled vs its numpy kernel on random shapes: the forward
op's outputs, and its gradient op's outputs (float32) where it has one. An op that gains an
emitter needs a sample here (the first test says which are missing)."""
import numpy as np
import pytest
from op_test import check_compiled_grads, compiled_ops, compare_compiled, build_op

import fluidity as fluid
from fluidity.codegen.emitters import rule_for
from fluidity.core.tensor import LoDTensor, SelectedRows
from fluidity.ops import registry
from fluidity.ops.activation import ACTIVATIONS

rng = np.random.default_rng(7)


def f32(*shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def dims():
    return int(rng.integers(1, 6)), int(rng.integers(2, 7))


def _unary(lo=-2.0, hi=2.0):
    def sample():
        n, m = dims()
        return {"X": f32(n, m, lo=lo, hi=hi)}, {}, ["X"]
    return sample


def _binary(y_shape=None, lo=-2.0, hi=2.0):
    def sample():
        n, m = dims()
        return ({"X": f32(n, m, lo=lo, hi=hi), "Y": f32(*(y_shape(n, m) if y_shape else (n, m)),
                                                        lo=lo, hi=hi)}, {}, ["X", "Y"])
    return sample


def _matmul(tx, ty, names):
    def sample():
        m, k = dims()
        n = int(rng.integers(1, 5))
        x = f32(k, m) if tx else f32(m, k)
        y = f32(n, k) if ty else f32(k, n)
        return {"X": x, "Y": y}, {names[0]: tx, names[1]: ty}, ["X", "Y"]
    return sample


def _swce():
    n, c = dims()
    return ({"Logits": f32(n, c), "Label": rng.integers(0, c, (n, 1)).astype(np.int64)}, {},
            ["Logits"])


def _update(states, attrs=None, extra=None):
    def sample():
        n, m = dims()
        ins = {"Param": f32(n, m), "Grad": f32(n, m),
               "LearningRate": np.array([0.1], np.float32)}
        ins.update({s: f32(n, m, lo=0.0, hi=1.0) for s in states})
        ins.update(extra() if extra else {})
        return ins, dict(attrs or {}), None
    return sample


def _adam_extra():
    return {"Beta1Pow": np.array([0.9 ** 3], np.float32),
            "Beta2Pow": np.array([0.999 ** 3], np.float32)}


def _lod_ids(height, lens):
    t = LoDTensor(rng.integers(0, height, (sum(lens), 1)).astype(np.int64))
    t.set_recursive_sequence_lengths([lens])
    return t


def _lens():
    return [int(n) for n in rng.integers(0, 4, int(rng.integers(1, 5)))]


def _lookup():
    h, d = int(rng.integers(3, 9)), int(rng.integers(1, 5))
    return ({"W": f32(h, d), "Ids": rng.integers(0, h, (int(rng.integers(1, 7)), 1))},
            {"padding_idx": 1}, ["W"])


def _pooled(multi):
    def sample():
        h, d, lens = int(rng.integers(3, 9)), int(rng.integers(1, 5)), _lens()
        ids = [(f"ids{k}", _lod_ids(h, lens)) for k in range(3)] if multi else _lod_ids(h, lens)
        return {"W": f32(h, d), "Ids": ids}, {"padding_idx": 0}, ["W"]
    return sample


def _seq_pool(ptype):
    def sample():
        lens = _lens() + [0]
        x = LoDTensor(f32(sum(lens), 3))
        x.set_recursive_sequence_lengths([lens])
        return {"X": x}, {"pooltype": ptype, "pad_value": 0.5}, ["X"]
    return sample


def _xent():
    n, c = dims()
    p = rng.uniform(0.05, 1.0, (n, c)).astype(np.float32)
    return ({"X": p / p.sum(1, keepdims=True), "Label": rng.integers(0, c, (n, 1))}, {},
            ["X"])


def _conv(groups=1):
    def sample():
        n, c, m = int(rng.integers(1, 3)), 2 * groups, 2 * groups
        return ({"Input": f32(n, c, 6, 5), "Filter": f32(m, c // groups, 3, 2)},
                {"strides": [2, 1], "paddings": [1, 0], "groups": groups, "dilations": [1, 2]},
                ["Input", "Filter"])
    return sample


def _pool(ptype, **attrs):
    def sample():
        return ({"X": f32(int(rng.integers(1, 3)), 2, 5, 6)},
                {"pooling_type": ptype, "ksize": [3, 2], "strides": [2, 2], "paddings": [1, 0],
                 **attrs}, ["X"])
    return sample


def _bn(is_test):
    def sample():
        n, c = int(rng.integers(2, 4)), 3
        return ({"X": f32(n, c, 2, 3), "Scale": f32(c, lo=0.5), "Bias": f32(c),
                 "Mean": f32(c), "Variance": f32(c, lo=0.5, hi=1.5)},
                {"is_test": is_test, "epsilon": 1e-4}, None if is_test else ["X", "Scale", "Bias"],
                ["Y", "MeanOut", "VarianceOut", "SavedMean", "SavedVariance"])
    return sample


def _shape(**attrs):
    def sample():
        return {"X": f32(int(rng.integers(1, 4)), 3, 1, 4)}, attrs, ["X"]
    return sample


SAMPLES = {
    "scale": lambda: ({"X": f32(*dims())}, {"scale": 1.5, "bias": -0.25}, ["X"]),
    "elementwise_add": _binary(), "elementwise_sub": _binary(),
    "elementwise_mul": _binary(lambda n, m: (m,)), "elementwise_div": _binary(lo=0.5, hi=2.0),
    "elementwise_max": _binary(), "elementwise_min": _binary(),
    "elementwise_pow": _binary(lo=0.5, hi=1.5),
    "leaky_relu": _unary(), "pow": _unary(0.5, 2.0), "softplus": _unary(),
    "softmax": _unary(),
    "mul": lambda: (lambda m, k, n: ({"X": f32(m, k), "Y": f32(k, n)}, {}, ["X", "Y"]))(
        *dims(), int(rng.integers(1, 5))),
    "matmul": _matmul(False, True, ("transpose_X", "transpose_Y")),
    "matmul_v2": _matmul(True, False, ("trans_x", "trans_y")),
    "fc": lambda: (lambda m, k, n: ({"Input": f32(m, k), "W": f32(k, n), "Bias": f32(n)},
                                    {"activation_type": "relu"}, ["Input", "W", "Bias"]))(
        *dims(), int(rng.integers(1, 5))),
    "sum": lambda: (lambda s: ({"X": [("s0", f32(*s)), ("s1", f32(*s)), ("s2", f32(*s))]}, {},
                               [("X", 0), ("X", 2)]))(dims()),
    "mean": _unary(),
    "fill_constant": lambda: ({}, {"shape": list(dims()), "value": 2.5, "dtype": 5}, None),
    "softmax_with_cross_entropy": _swce,
    "sgd": _update(()),
    "momentum": _update(("Velocity",), {"mu": 0.9, "use_nesterov": True}),
    "adagrad": _update(("Moment",)),
    "adam": _update(("Moment1", "Moment2"), extra=_adam_extra),
    "lookup_table": _lookup, "lookup_table_v2": _lookup,
    "fused_embedding_seq_pool": _pooled(False), "fused_embedding_seq_pool_concat": _pooled(True),
    "sequence_pool": _seq_pool("SUM"),
    "concat": lambda: (lambda n, m: ({"X": [("c0", f32(n, m)), ("c1", f32(n, 2)),
                                             ("c2", f32(n, 1))]}, {"axis": 1},
                                      [("X", 0), ("X", 1)]))(*dims()),
    "cross_entropy": _xent, "cross_entropy2": _xent,
    "conv2d": _conv(), "depthwise_conv2d": _conv(groups=2),
    "pool2d": _pool("max"), "batch_norm": _bn(False),
    "dropout": lambda: ({"X": f32(*dims())}, {"is_test": True, "dropout_prob": 0.25}, None,
                        ["Out"]),
    "reshape2": _shape(shape=[0, -1]), "transpose2": _shape(axis=[2, 0, 3, 1]),
    "squeeze2": _shape(axes=[2]), "unsqueeze2": _shape(axes=[0]),
    "flatten2": _shape(axis=2), "flatten_contiguous_range": _shape(start_axis=1, stop_axis=2),
}
EXTRA = {   # more forms of ops above: each compiled vs the kernel too
    "pool2d avg": ("pool2d", _pool("avg", exclusive=False)),
    "pool2d avg exclusive ceil": ("pool2d", _pool("avg", ceil_mode=True)),
    "pool2d global max": ("pool2d", _pool("max", global_pooling=True)),
    "batch_norm test": ("batch_norm", _bn(True)),
    "conv2d bias": ("conv2d", lambda: (lambda i, a, w: (
        {**i, "Bias": f32(i["Filter"].shape[0])}, a, w + ["Bias"]))(*_conv()())),
    "dropout upscale": ("dropout", lambda: ({"X": f32(*dims())},
                                            {"is_test": True, "dropout_implementation":
                                             "upscale_in_train"}, None, ["Out"])),
}
SEQUENCE_POOLS = ["SUM", "AVERAGE", "SQRT", "MAX", "MIN", "FIRST", "LAST"]
for _t in ACTIVATIONS:
    SAMPLES.setdefault(_t, _unary(0.2, 2.0) if _t in ("log", "sqrt", "rsqrt") else _unary())


def _emitter_ops():
    return sorted(t for t, d in registry.all_ops().items() if rule_for(d) is not None)


def _forward_of(op_type):
    if op_type == "cross_entropy_grad2":       # Paddle's name, not cross_entropy2_grad
        return "cross_entropy2"
    return op_type[:-len("_grad")] if op_type.endswith("_grad") else op_type


def test_every_op_with_an_emitter_has_a_sample():
    missing = sorted({_forward_of(t) for t in _emitter_ops()} - set(SAMPLES))
    assert missing == []


def test_every_grad_op_with_an_emitter_belongs_to_a_forward_op_that_has_a_sample():
    grads = [t for t in _emitter_ops() if t.endswith(("_grad", "_grad2"))]
    assert grads and all(_forward_of(t) in SAMPLES for t in grads)


UPDATES = ("sgd", "momentum", "adam", "adagrad")


def _update_program(op_type, inputs, attrs):
    """An update op as optimizers append it: persistable Param and states updated in place
    (each Out the input it updates); returns (program, {name: initial value})."""
    opdef = registry.get(op_type)
    main = fluid.Program()
    block = main.global_block()
    for slot, value in inputs.items():
        block.create_var(name=slot, shape=value.shape, dtype=value.dtype, persistable=True)
    outs = {o: [src] for o, src in opdef.out_of.items() if src in inputs}
    block.append_op(op_type, {k: [k] for k in inputs}, outs, attrs)
    return main, inputs


def _run_update(program, values, compiled):
    scope = fluid.Scope()
    for name, v in values.items():
        scope.var(name).get_tensor().set(v)
    prog = fluid.CompiledProgram(program).with_native_code() if compiled else program
    fluid.Executor().run(prog, scope=scope)
    return {n: np.array(scope.find_var(n).get_tensor()) for n in values}


@pytest.mark.parametrize("case", sorted(SAMPLES) + sorted(EXTRA))
def test_compiled_matches_the_numpy_kernel(case):
    op_type, sample = EXTRA.get(case, (case, SAMPLES.get(case)))
    inputs, attrs, wrt, *outputs = sample()    # outputs: the slots to make, when not all
    if op_type in UPDATES:
        main, values = _update_program(op_type, inputs, attrs)
        assert op_type in compiled_ops(main), f"{op_type} did not compile"
        want, got = _run_update(main, values, False), _run_update(main, values, True)
        for n in values:           # the same arithmetic in the same order: the same bits
            np.testing.assert_array_equal(got[n], want[n], err_msg=n)
        return
    main, startup, feed, out_vars, _ = build_op(op_type, inputs, attrs, *outputs)
    fetch = [v for vs in out_vars.values() for v in vs]
    assert op_type in compiled_ops(main), f"{op_type} did not compile"
    exe, scope = fluid.Executor(), fluid.Scope()
    want = exe.run(main, feed=feed, fetch_list=fetch, scope=scope)
    assert compare_compiled(main, feed, fetch, want, scope, op_type)
    if wrt:
        done = check_compiled_grads(op_type, inputs, wrt, attrs, outputs=(outputs or [None])[0],
                                    seed=3)
        grad = "cross_entropy_grad2" if op_type == "cross_entropy2" else op_type + "_grad"
        if registry.has(grad) and rule_for(registry.get(grad)):
            assert grad in done, f"{grad} did not compile"


@pytest.mark.parametrize("ptype", SEQUENCE_POOLS)
def test_every_sequence_pool_type_compiles_as_the_kernel(ptype):
    inputs, attrs, wrt = _seq_pool(ptype)()
    outputs = ["Out", "MaxIndex"] if ptype in ("MAX", "MIN") else ["Out"]
    main, startup, feed, out_vars, _ = build_op("sequence_pool", inputs, attrs, outputs)
    fetch = [v for vs in out_vars.values() for v in vs]
    want = fluid.Executor().run(main, feed=feed, fetch_list=fetch, scope=fluid.Scope())
    assert compare_compiled(main, feed, fetch, want, fluid.Scope(), ptype)
    done = check_compiled_grads("sequence_pool", inputs, wrt, attrs, output_slots=["Out"],
                                seed=3)
    assert "sequence_pool_grad" in done


@pytest.mark.parametrize("op_type,states,attrs", [
    ("sgd", (), {}), ("adagrad", ("Moment",), {}),
    ("adam", ("Moment1", "Moment2"), {"lazy_mode": True})])
def test_sparse_updates_compile_bit_for_bit(op_type, states, attrs):
    """A SelectedRows Grad with duplicate rows: sgd adds row by row, adam and adagrad
    merge the duplicates first (the kernels' semantics, and their bits)."""
    h, d = 6, 3
    rows = np.array([4, 1, 4, 0, 4], np.int64)
    values = {"Param": f32(h, d), "LearningRate": np.array([0.1], np.float32)}
    values.update({s: f32(h, d, lo=0.0, hi=1.0) for s in states})
    if op_type == "adam":
        values.update(_adam_extra())
    opdef = registry.get(op_type)
    main = fluid.Program()
    block = main.global_block()
    for n, v in values.items():
        block.create_var(name=n, shape=v.shape, dtype=v.dtype, persistable=True)
    g = block.create_var(name="Grad", shape=[h, d], dtype="float32", persistable=True,
                         type=fluid.core.VarType.SELECTED_ROWS)   # set in the scope below
    outs = {o: [src] for o, src in opdef.out_of.items() if src in values}
    block.append_op(op_type, {**{k: [k] for k in values}, "Grad": [g]}, outs, attrs)
    grad = SelectedRows(rows, h, f32(len(rows), d))
    assert op_type in compiled_ops(main)
    got = []
    for compiled in (False, True):
        scope = fluid.Scope()
        for n, v in values.items():
            scope.var(n).get_tensor().set(v)
        scope.var("Grad").value = grad
        prog = fluid.CompiledProgram(main).with_native_code() if compiled else main
        fluid.Executor().run(prog, scope=scope)
        got.append({n: np.array(scope.find_var(n).get_tensor()) for n in values})
    for n in values:
        np.testing.assert_array_equal(got[1][n], got[0][n], err_msg=n)
