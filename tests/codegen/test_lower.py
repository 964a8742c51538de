"""Lowering a block: which ops compile, segments cut by Python ops, symbolic batch dims,
sgd fused into its gradient's maker, and the errors that name what is wrong."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.codegen.lower import Lowering
from fluidity.errors import ExecutionError


def _mlp(act="relu", optimizer=None):
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 3
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [6])
        label = fluid.layers.data("label", [1], dtype="int64")
        h = fluid.layers.fc(x, 8, act=act)
        logits = fluid.layers.fc(h, 3)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        if optimizer is not None:
            optimizer.minimize(loss)
    return main, startup, loss


def _batch(n, seed=0):
    r = np.random.default_rng(seed)
    return {"x": r.normal(size=(n, 6)).astype("float32"),
            "label": r.integers(0, 3, (n, 1)).astype("int64")}


def test_explain_says_where_each_op_runs_and_why():
    main, _, loss = _mlp("tanh")
    text = fluid.CompiledProgram(main).with_native_code(["x", "label"], [loss]).explain()
    assert "1 native segment(s)" in text
    assert "'feed' acts on the run itself" in text
    assert all(f" {t} " in text for t in ("mul", "tanh", "softmax_with_cross_entropy", "mean"))


def test_an_op_without_a_compiled_form_cuts_the_segment_and_runs_in_python(monkeypatch):
    from fluidity.codegen import emit
    lookup = emit.lookup                                 # gelu without its emitter
    monkeypatch.setattr(emit, "lookup", lambda t, target: None if t == "gelu" else
                        lookup(t, target))
    main, startup, loss = _mlp("gelu")
    rows = Lowering(main, 0).explain()
    assert [w for _, t, w, _ in rows if t == "gelu"] == ["python"]
    assert len({w for _, _, w, _ in rows if w.startswith("segment")}) == 2
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    feed = _batch(4)
    (want,) = exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    (got,) = exe.run(fluid.CompiledProgram(main).with_native_code(), feed=feed,
                     fetch_list=[loss], scope=scope)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_one_build_serves_every_batch_size():
    main, startup, loss = _mlp()
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    compiled = fluid.CompiledProgram(main).with_native_code()
    for n in (1, 5, 64, 3):
        feed = _batch(n, n)
        (want,) = exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
        (got,) = exe.run(compiled, feed=feed, fetch_list=[loss], scope=scope)
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=f"batch {n}")
    native = [p.plan for p in exe._cache[main].values() if hasattr(p.plan, "lowering")]
    assert len(native) == 1               # one plan and one library for all four batch sizes


def test_sgd_is_applied_where_its_gradient_is_made():
    main, startup, loss = _mlp(optimizer=fluid.optimizer.SGD(0.1))
    rows = Lowering(main, 0).explain()
    fused = [(i, why) for i, t, w, why in rows if t == "sgd" and why.startswith("fused into")]
    assert len(fused) == 2 and all("mul_grad" in why or "fc_grad" in why for _, why in fused)


def test_a_label_out_of_range_stops_the_run_naming_the_op():
    main, startup, loss = _mlp()
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    feed = _batch(4)
    feed["label"][2, 0] = 7
    with pytest.raises(ExecutionError, match=r"softmax_with_cross_entropy.*\(compiled\).*"
                                             r"label 7 is out of range \[0, 3\)"):
        exe.run(fluid.CompiledProgram(main).with_native_code(), feed=feed, fetch_list=[loss],
                scope=scope)


def test_inputs_of_the_wrong_dtype_or_shape_name_the_variable():
    main, startup, loss = _mlp()
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    compiled = fluid.CompiledProgram(main).with_native_code()
    feed = _batch(4)
    feed["label"] = feed["label"].astype("int32")
    with pytest.raises(fluid.FluidityError, match="label"):
        exe.run(compiled, feed=feed, fetch_list=[loss], scope=scope)
    # a parameter replaced by one of another shape than the program declares: the segment
    # built for the declared shape runs interpreted, and the kernel names what is wrong
    scope.find_var("fc_0.w_0").get_tensor().set(np.zeros((7, 8), "float32"))
    with pytest.raises(ExecutionError, match=r"(?s)op #\d+ '(mul|fc)'.*'fc_0\.w_0' = float32\[7, 8\]"):
        exe.run(compiled, feed=_batch(4), fetch_list=[loss], scope=scope)


def test_inputs_of_shapes_the_desc_does_not_declare_run_interpreted_with_a_warning(caplog):
    """A fed value whose shape differs from its variable's declared one (Fluid feeds [6]
    into a data layer of shape [1]): the segment's code was built for the declared shape,
    so that call runs its ops interpreted, with the same results, and says so once."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [3], append_batch_size=False)
        y = fluid.layers.scale(fluid.layers.relu(x), 2.0)
    main.global_block().var("x").desc.need_check_feed = False    # let [5] through the feed
    compiled = fluid.CompiledProgram(main).with_native_code()
    exe = fluid.Executor()
    (a,) = exe.run(compiled, feed={"x": np.array([-1, 2, 3], "float32")}, fetch_list=[y])
    np.testing.assert_array_equal(a, [0, 4, 6])
    with caplog.at_level("WARNING", logger="fluidity"):
        (b,) = exe.run(compiled, feed={"x": np.arange(5, dtype="float32") - 2}, fetch_list=[y])
        exe.run(compiled, feed={"x": np.arange(5, dtype="float32")}, fetch_list=[y])
    np.testing.assert_array_equal(b, [0, 0, 0, 2, 4])
    warnings = [r for r in caplog.records if "run interpreted" in r.getMessage()]
    assert len(warnings) == 1 and "x: dim 0 is not 3" in warnings[0].getMessage()


def test_an_uninitialized_parameter_is_named():
    main, _, loss = _mlp()
    with pytest.raises(ExecutionError, match="has no value"):
        fluid.Executor().run(fluid.CompiledProgram(main).with_native_code(), feed=_batch(2),
                             fetch_list=[loss], scope=fluid.Scope())


def test_the_program_is_not_changed_and_fetched_values_are_the_callers():
    main, startup, loss = _mlp(optimizer=fluid.optimizer.SGD(0.1))
    before = main.desc.SerializeToString()
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    compiled = fluid.CompiledProgram(main).with_native_code()
    (a,) = exe.run(compiled, feed=_batch(4), fetch_list=[loss], scope=scope)
    keep = a.copy()
    exe.run(compiled, feed=_batch(4, 1), fetch_list=[loss], scope=scope)
    np.testing.assert_array_equal(a, keep)     # not a view the next run overwrote
    assert main.desc.SerializeToString() == before
