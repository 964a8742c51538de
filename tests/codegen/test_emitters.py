"""Every op with a compiled form, compiled vs its numpy kernel on random shapes: the forward
op's outputs, and its gradient op's outputs (float32) where it has one. An op that gains an
emitter needs a sample in codegen_samples.py or a codegen_samples_*.py module (the first
test says which are missing)."""
import numpy as np
import pytest
from codegen_samples import SEQUENCE_POOLS, adam_extra, all_samples, f32, seq_pool
from op_test import (build_op, check_compiled_grads, compare_compiled, compiled_ops,
                     reset_random_states)

import fluidity as fluid
from fluidity.codegen import emit
from fluidity.core.tensor import SelectedRows
from fluidity.ops import registry
from fluidity.ops.optimizer_ops import UpdateOp

SAMPLES, EXTRA, ELSEWHERE = all_samples()


def _emitter_ops():
    return emit.op_types("cpu")


def _forward_of(op_type):
    if op_type == "cross_entropy_grad2":       # Paddle's name, not cross_entropy2_grad
        return "cross_entropy2"
    return op_type[:-len("_grad")] if op_type.endswith("_grad") else op_type


def test_every_op_with_an_emitter_has_a_sample():
    missing = sorted({_forward_of(t) for t in _emitter_ops()} - set(SAMPLES) - ELSEWHERE)
    assert missing == []


def test_every_grad_op_with_an_emitter_belongs_to_a_forward_op_that_has_a_sample():
    grads = [t for t in _emitter_ops() if t.endswith(("_grad", "_grad2"))]
    assert grads and all(_forward_of(t) in SAMPLES or _forward_of(t) in ELSEWHERE
                         for t in grads)


def _is_update(op_type):
    """Whether `op_type` is an update op (Param and its accumulators updated in place)."""
    opdef = registry.get(op_type)
    return isinstance(opdef, type) and issubclass(opdef, UpdateOp)


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
    if _is_update(op_type):
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
    reset_random_states(main, scope)      # a random op draws what compare_compiled's will
    want = exe.run(main, feed=feed, fetch_list=fetch, scope=scope)
    assert compare_compiled(main, feed, fetch, want, scope, op_type)
    if wrt:
        done = check_compiled_grads(op_type, inputs, wrt, attrs, outputs=(outputs or [None])[0],
                                    seed=3)
        grad = "cross_entropy_grad2" if op_type == "cross_entropy2" else op_type + "_grad"
        if emit.lookup(grad, "cpu"):
            assert grad in done, f"{grad} did not compile"


@pytest.mark.parametrize("ptype", SEQUENCE_POOLS)
def test_every_sequence_pool_type_compiles_as_the_kernel(ptype):
    inputs, attrs, wrt = seq_pool(ptype)()
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
    ("adam", ("Moment1", "Moment2"), {"lazy_mode": True}),
    ("adam", ("Moment1", "Moment2"), {"lazy_mode": False}),
    # an adam op Paddle >= 2.1 wrote (it carries use_global_beta_pow): the scaled epsilon
    ("adam", ("Moment1", "Moment2"), {"lazy_mode": False, "use_global_beta_pow": False}),
    ("adam", ("Moment1", "Moment2"), {"lazy_mode": True, "use_global_beta_pow": False}),
    # the rules stepping only the Grad's rows
    ("ftrl", ("SquaredAccumulator", "LinearAccumulator"), {"l1": 0.1}),
    ("adamax", ("Moment", "InfNorm"), {}), ("decayed_adagrad", ("Moment",), {}),
    ("adadelta", ("AvgSquaredGrad", "AvgSquaredUpdate"), {}),
    # the rules stepping every row
    ("rmsprop", ("MeanSquare", "Moment"), {"momentum": 0.5}),
    ("lamb", ("Moment1", "Moment2"), {}), ("lars_momentum", ("Velocity",), {"mu": 0.9})])
def test_sparse_updates_compile_bit_for_bit(op_type, states, attrs):
    """A SelectedRows Grad with duplicate rows: sgd adds row by row, the others merge the
    duplicates first (the kernels' semantics, and their bits); adam without lazy_mode,
    rmsprop, lamb and lars_momentum step every row, with g = 0 where the Grad has none."""
    h, d = 6, 3
    rows = np.array([4, 1, 4, 0, 4], np.int64)
    values = {"Param": f32(h, d), "LearningRate": np.array([0.1], np.float32)}
    values.update({s: f32(h, d, lo=0.0, hi=1.0) for s in states})
    values.update({"adam": adam_extra, "lamb": adam_extra,
                   "adamax": lambda: {"Beta1Pow": np.array([0.5], np.float32)}}.get(
                       op_type, dict)())
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


def test_a_one_hot_id_out_of_range_stops_the_compiled_run_naming_it():
    from fluidity.errors import ExecutionError
    main, startup, feed, out_vars, _ = build_op(
        "one_hot", {"X": np.array([[1], [7], [2]], np.int64)}, {"depth": 5}, ["Out"])
    fetch = [v for vs in out_vars.values() for v in vs]
    compiled = fluid.CompiledProgram(main).with_native_code()
    with pytest.raises(ExecutionError, match=r"'one_hot'.*id 7 is outside \[0, 5\)"):
        fluid.Executor().run(compiled, feed=feed, fetch_list=fetch, scope=fluid.Scope())
