"""Every op with a compiled form, compiled vs its numpy kernel on random shapes: the forward
op's outputs, and its gradient op's outputs (float32) where it has one. An op that gains an
emitter needs a sample here (the first test says which are missing)."""
import numpy as np
import pytest
from op_test import check_compiled_grads, compiled_ops, compare_compiled, build_op

import fluidity as fluid
from fluidity.codegen.emitters import rule_for
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
}
for _t in ACTIVATIONS:
    SAMPLES.setdefault(_t, _unary(0.2, 2.0) if _t in ("log", "sqrt", "rsqrt") else _unary())


def _emitter_ops():
    return sorted(t for t, d in registry.all_ops().items() if rule_for(d) is not None)


def _forward_of(op_type):
    return op_type[:-len("_grad")] if op_type.endswith("_grad") else op_type


def test_every_op_with_an_emitter_has_a_sample():
    missing = sorted({_forward_of(t) for t in _emitter_ops()} - set(SAMPLES))
    assert missing == []


def test_every_grad_op_with_an_emitter_belongs_to_a_forward_op_that_has_a_sample():
    grads = [t for t in _emitter_ops() if t.endswith("_grad")]
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


@pytest.mark.parametrize("op_type", sorted(SAMPLES))
def test_compiled_matches_the_numpy_kernel(op_type):
    inputs, attrs, wrt = SAMPLES[op_type]()
    if op_type in UPDATES:
        main, values = _update_program(op_type, inputs, attrs)
        assert op_type in compiled_ops(main), f"{op_type} did not compile"
        want, got = _run_update(main, values, False), _run_update(main, values, True)
        for n in values:           # the same arithmetic in the same order: the same bits
            np.testing.assert_array_equal(got[n], want[n], err_msg=n)
        return
    main, startup, feed, out_vars, _ = build_op(op_type, inputs, attrs)
    fetch = [v for vs in out_vars.values() for v in vs]
    assert op_type in compiled_ops(main), f"{op_type} did not compile"
    exe, scope = fluid.Executor(), fluid.Scope()
    want = exe.run(main, feed=feed, fetch_list=fetch, scope=scope)
    assert compare_compiled(main, feed, fetch, want, scope, op_type)
    if wrt:
        done = check_compiled_grads(op_type, inputs, wrt, attrs, seed=3)
        grad = op_type + "_grad"
        if registry.has(grad) and rule_for(registry.get(grad)):
            assert grad in done, f"{grad} did not compile"
