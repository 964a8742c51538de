"""Executor semantics: scopes, persistables, feed/fetch ops, block_id, LoD, plan caching."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.core.dtypes import VarType
from fluidity.errors import (ExecutionError, FeedError, FetchError,
                             VariableNotFoundError)


def _net():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [3])
        h = fluid.layers.fc(x, 4, act="relu", param_attr=fluid.ParamAttr(name="w"),
                            bias_attr=fluid.ParamAttr(name="b"))
        y = fluid.layers.mean(h)
    return main, startup, x, h, y


def _np_net(scope, x):
    w = np.asarray(scope.find_var("w").get_tensor())
    b = np.asarray(scope.find_var("b").get_tensor())
    h = np.maximum(x @ w + b, 0)
    return h, h.mean()


def test_run_matches_numpy_and_fetches_several():
    main, startup, x, h, y = _net()
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    xv = np.random.default_rng(0).normal(size=(5, 3)).astype("float32")
    got_h, got_y = exe.run(main, feed={"x": xv}, fetch_list=[h, y.name], scope=scope)
    want_h, want_y = _np_net(scope, xv)
    np.testing.assert_allclose(got_h, want_h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_y, [want_y], rtol=1e-5)


def test_feed_and_fetch_are_real_ops_in_a_cached_copy():
    main, startup, x, h, y = _net()
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    n_ops = len(main.global_block().ops)
    exe.run(main, feed={"x": np.ones((2, 3), "float32")}, fetch_list=[y, h], scope=scope)
    assert len(main.global_block().ops) == n_ops  # the user's program is untouched
    (prep,) = exe._cache[main].values()
    ops = prep.program.global_block().ops
    assert ops[0].type == "feed" and ops[0].attr("col") == 0 and ops[0].input("X") == ["feed"]
    assert [o.type for o in ops[-2:]] == ["fetch", "fetch"]
    assert [o.attr("col") for o in ops[-2:]] == [0, 1]
    assert prep.program.global_block().var("feed").type == VarType.FEED_MINIBATCH
    assert prep.program.global_block().var("fetch").type == VarType.FETCH_LIST
    # the same signature reuses the prepared plan; a changed program re-prepares
    exe.run(main, feed={"x": np.ones((2, 3), "float32")}, fetch_list=[y, h], scope=scope)
    assert list(exe._cache[main].values())[0] is prep
    with fluid.program_guard(main, startup):
        fluid.layers.scale(y, 2.0)
    exe.run(main, feed={"x": np.ones((2, 3), "float32")}, fetch_list=[y, h], scope=scope)
    assert list(exe._cache[main].values())[0] is not prep


def test_local_scope_dropped_or_kept_and_persistables_survive():
    main, startup, x, h, y = _net()
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    w0 = np.asarray(scope.find_var("w").get_tensor()).copy()
    exe.run(main, feed={"x": np.ones((2, 3), "float32")}, fetch_list=[y], scope=scope)
    assert scope.find_var(h.name) is None and not scope.kids()  # temporaries gone
    assert scope.find_var("w") is not None
    np.testing.assert_array_equal(np.asarray(scope.find_var("w").get_tensor()), w0)
    exe.run(main, feed={"x": np.ones((2, 3), "float32")}, fetch_list=[y], scope=scope,
            create_local_scope=False)
    assert scope.find_var(h.name) is not None  # kept when no local scope is made
    assert np.asarray(scope.find_var(h.name).get_tensor()).shape == (2, 4)


def test_global_scope_and_scope_guard():
    main, startup, x, h, y = _net()
    exe = fluid.Executor()
    s = fluid.Scope()
    with fluid.scope_guard(s):
        assert fluid.global_scope() is s
        exe.run(startup)
        exe.run(main, feed={"x": np.ones((1, 3), "float32")}, fetch_list=[y])
    assert s.find_var("w") is not None
    assert fluid.global_scope() is not s


def test_block_id_selects_entrance_block():
    prog = fluid.Program()
    b0 = prog.global_block()
    x = b0.create_var(name="x", shape=[2], dtype="float32")
    b0.append_op("fill_constant", outputs={"Out": x}, attrs={"shape": [2], "value": 1.0})
    b1 = prog._create_block()
    y = b1.create_var(name="y", shape=[2], dtype="float32")
    b1.append_op("fill_constant", outputs={"Out": y}, attrs={"shape": [2], "value": 7.0})
    z = b1.create_var(name="z", shape=[2], dtype="float32")
    b1.append_op("scale", {"X": y}, {"Out": z}, {"scale": 2.0})
    prog._rollback()
    exe = fluid.Executor()
    (zv,) = exe.run(prog, fetch_list=["z"], block_id=1)
    np.testing.assert_array_equal(zv, [14.0, 14.0])
    (xv,) = exe.run(prog, fetch_list=["x"], block_id=0)
    np.testing.assert_array_equal(xv, [1.0, 1.0])


def test_feed_lod_tensor_keeps_lod_through_ops():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        ids = fluid.layers.data("ids", [1], dtype="int64", lod_level=1)
        emb = fluid.layers.embedding(ids, [10, 2], param_attr=fluid.ParamAttr(name="emb"))
        out = fluid.layers.scale(emb, 2.0)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    t = fluid.create_lod_tensor(np.array([[1], [2], [3], [4], [5]], "int64"), [[2, 3]])
    (res,) = exe.run(main, feed={"ids": t}, fetch_list=[out], scope=scope, return_numpy=False)
    assert res.recursive_sequence_lengths() == [[2, 3]] and res.lod() == [[0, 2, 5]]
    table = np.asarray(scope.find_var("emb").get_tensor())
    np.testing.assert_allclose(np.asarray(res), 2 * table[[1, 2, 3, 4, 5]], rtol=1e-6)


def test_feed_errors_are_clear():
    main, startup, x, h, y = _net()
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    # a layers.data feed reaches the ops as given (Fluid 1.x); the first op that reads it
    # names its own check
    with pytest.raises(ExecutionError, match=r"(?s)'mul'.*float32\[2, 5\]"):
        exe.run(main, feed={"x": np.ones((2, 5), "float32")}, fetch_list=[y], scope=scope)
    # a name the program lacks is not fed, with Fluid's warning; what it does need still is
    with pytest.warns(UserWarning, match="nope is not found in program"):
        with pytest.raises(FeedError, match="variable 'x' has no value"):
            exe.run(main, feed={"nope": np.ones((2, 3), "float32")}, fetch_list=[y],
                    scope=scope)
    with pytest.warns(UserWarning, match="nope is not found"):
        (r,) = exe.run(main, feed={"nope": 1, "x": np.ones((2, 3), "float32")},
                       fetch_list=[y], scope=scope)
    assert np.isfinite(r).all()
    with pytest.raises(FetchError, match="'missing'"):
        exe.run(main, feed={"x": np.ones((2, 3), "float32")}, fetch_list=["missing"],
                scope=scope)
    # python lists are converted to the variable's dtype
    (r,) = exe.run(main, feed={"x": [[1, 2, 3]]}, fetch_list=[y], scope=scope)
    assert r.dtype == np.float32


def test_layers_data_takes_the_fed_dtype_fluid_data_checks_it():
    """Fluid checks a feed's dtype and shape only for fluid.data (need_check_feed); a
    layers.data variable takes the array as fed, and its ops compute in that dtype."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        a = fluid.layers.data("a", [1])                    # declared float32
        b = a * 2.0 + 1.0
        c = fluid.data("c", [None, 2], "float32")
        d = c * 2.0
    exe, scope = fluid.Executor(), fluid.Scope()
    a_np = np.arange(6, dtype="float64")                   # rank 1, float64: passed through
    c_ok = np.ones((2, 2), "float32")
    (r,) = exe.run(main, feed={"a": a_np, "c": c_ok}, fetch_list=[b], scope=scope)
    np.testing.assert_array_equal(r, a_np * 2 + 1)
    assert r.dtype == np.float64 and r.shape == (6,)
    with pytest.raises(FeedError, match="The data type of fed Variable 'c' must be "
                                        "'float32', but received 'float64'"):
        exe.run(main, feed={"a": a_np, "c": np.ones((2, 2))}, fetch_list=[d], scope=scope)
    with pytest.raises(FeedError, match="The fed Variable 'c' should have dimensions"):
        exe.run(main, feed={"a": a_np, "c": np.ones((2, 3), "float32")}, fetch_list=[d],
                scope=scope)
    assert isinstance(FeedError("x"), ValueError)       # Fluid raises ValueError


def test_missing_input_value_names_variable_and_op():
    main, startup, x, h, y = _net()
    exe = fluid.Executor()
    with pytest.raises(ExecutionError) as ei:  # parameters never initialized
        exe.run(main, feed={"x": np.ones((2, 3), "float32")}, fetch_list=[y],
                scope=fluid.Scope())
    msg = str(ei.value)
    assert "'mul'" in msg and "'w'" in msg and "startup program" in msg
    assert "test_executor.py" in msg  # where the op was created
    with pytest.raises(FeedError, match="variable 'x' has no value, and op #0 'mul'"):
        s = fluid.Scope()  # data not fed: said before any op runs
        exe.run(startup, scope=s)
        exe.run(main, fetch_list=[y], scope=s)


def test_kernel_error_reports_op_and_shapes():
    prog = fluid.Program()
    b = prog.global_block()
    a = b.create_var(name="a", shape=[-1, 3], dtype="float32")
    w = b.create_var(name="w", shape=[-1, 4], dtype="float32")  # unknown rows: passes build
    o = b.create_var(name="o")
    b.append_op("mul", {"X": a, "Y": w}, {"Out": o})
    exe = fluid.Executor()
    with pytest.raises(ExecutionError) as ei:
        exe.run(prog, feed={"a": np.ones((2, 3), "float32"), "w": np.ones((5, 4), "float32")},
                fetch_list=[o])
    msg = str(ei.value)
    assert "op #0 'mul'" in msg and "float32[2, 3]" in msg and "float32[5, 4]" in msg


def test_fetch_persistable_is_a_copy():
    main, startup, x, h, y = _net()
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    (w,) = exe.run(main, feed={"x": np.ones((1, 3), "float32")}, fetch_list=["w"], scope=scope)
    w[:] = 0
    assert np.abs(np.asarray(scope.find_var("w").get_tensor())).sum() > 0


def test_startup_seed_is_reproducible():
    def init(seed):
        main, startup = fluid.Program(), fluid.Program()
        startup.random_seed = seed
        with fluid.program_guard(main, startup):
            fluid.layers.fc(fluid.layers.data("x", [3]), 4, param_attr=fluid.ParamAttr(name="w"))
        s = fluid.Scope()
        fluid.Executor().run(startup, scope=s)
        return np.asarray(s.find_var("w").get_tensor()).copy()
    np.testing.assert_array_equal(init(7), init(7))
    assert not np.array_equal(init(7), init(8))


def test_duplicable_grad_output_with_empty_names_keeps_positions():
    """concat of a, b (stop_gradient), c: c's gradient must not receive b's slice."""
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        a = fluid.layers.data("a", [2], append_batch_size=False)
        b = fluid.layers.data("b", [3], append_batch_size=False)
        c = fluid.layers.data("c", [4], append_batch_size=False)
        out = fluid.layers.concat([a, b, c], axis=0)
        w = fluid.layers.assign(np.arange(9, dtype="float32"))
        loss = fluid.layers.reduce_sum(out * w)
        ga, gc = fluid.backward.gradients([loss], [a, c])
    feed = {n: np.ones(k, "float32") for n, k in (("a", 2), ("b", 3), ("c", 4))}
    ra, rc = fluid.Executor().run(main, feed=feed, fetch_list=[ga, gc])
    np.testing.assert_array_equal(ra, [0, 1])
    np.testing.assert_array_equal(rc, [5, 6, 7, 8])


def test_program_with_feed_fetch_ops_uses_their_columns():
    """A loaded inference model has feed/fetch ops: values go to each op's col, whatever
    the order of the feed dict and of the fetch list."""
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        a = fluid.layers.data("a", [2])
        b = fluid.layers.data("b", [2])
        s = fluid.layers.elementwise_sub(a, b)
        m = fluid.layers.scale(s, 10.0)
    from fluidity.executor import add_feed_fetch_ops
    with_ops = add_feed_fetch_ops(main, 0, ["a", "b"], [s.name, m.name])
    exe = fluid.Executor()
    av, bv = np.ones((1, 2), "float32"), np.full((1, 2), 3.0, "float32")
    got_m, got_s = exe.run(with_ops, feed={"b": bv, "a": av}, fetch_list=[m.name, s.name])
    np.testing.assert_array_equal(got_s, av - bv)
    np.testing.assert_array_equal(got_m, 10 * (av - bv))
    with pytest.raises(FeedError, match=r"feed ops need \['a', 'b'\]"):
        exe.run(with_ops, feed={"a": av}, fetch_list=[s.name])
    with pytest.raises(FetchError, match="cannot fetch"):
        exe.run(with_ops, feed={"a": av, "b": bv}, fetch_list=["a"])


def test_a_bare_program_desc_runs_and_its_plan_is_reused():
    """The executor's edge takes a ProgramDesc as well as a Program: same results, one
    prepared plan for repeated runs of the same desc object."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [2])
        y = fluid.layers.scale(x, 3.0)
    exe = fluid.Executor()
    xv = np.ones((2, 2), "float32")
    (a,) = exe.run(main, feed={"x": xv}, fetch_list=[y])
    desc = main.desc
    (b,) = exe.run(desc, feed={"x": xv}, fetch_list=[y.name])
    (c,) = exe.run(desc, feed={"x": xv}, fetch_list=[y.name])
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(b, c)
    assert len(exe._raw_views) == 1
    with pytest.raises(TypeError, match="Executor requires Program as its Parameter"):
        exe.run(42)


def test_an_undeclared_name_in_a_dispensable_input_is_absent_elsewhere_an_error():
    """Fluid runs an op whose dispensable input names a variable no block declares (the
    input is null); a required input naming one is an error before anything runs."""
    main = fluid.Program()
    block = main.global_block()
    x = block.create_var(name="x", shape=[2, 3], dtype="float32")
    out = block.create_var(name="out", shape=[2, 3], dtype="float32")
    gx = block.create_var(name="gx", shape=[2, 3], dtype="float32")
    block.append_op("rnn_memory_helper_grad",
                    {"X": x, "Out": out, "Out@GRAD": ["declared_nowhere"]}, {"X@GRAD": gx})
    exe = fluid.Executor()
    feed = {"x": np.ones((2, 3), "float32"), "out": np.ones((2, 3), "float32")}
    (g,) = exe.run(main, feed=feed, fetch_list=[gx], scope=fluid.Scope())
    np.testing.assert_array_equal(g, np.zeros((2, 3), "float32"))   # no gradient reached Out

    bad = fluid.Program()
    b = bad.global_block()
    y = b.create_var(name="y", shape=[2], dtype="float32")
    with pytest.raises(VariableNotFoundError, match="op 'scale': input 'X' names variable "
                                                    "'nowhere', which is not declared"):
        b.append_op("scale", {"X": ["nowhere"]}, {"Out": y})


def test_an_empty_tensor_is_fetched_as_shape_0_with_its_lod():
    """Fluid 1.8's fetch op hands back a tensor with no elements as shape [0], its LoD kept:
    multiclass_nms2 keeping nothing writes [0, 6] and a [0, 1] index."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        boxes = fluid.layers.data("boxes", [2, 3, 4], dtype="float32",
                                  append_batch_size=False)
        scores = fluid.layers.data("scores", [2, 2, 3], dtype="float32",
                                   append_batch_size=False)
        out, index = fluid.layers.multiclass_nms2(boxes, scores, score_threshold=2.0,
                                                  nms_top_k=3, keep_top_k=3,
                                                  return_index=True)
        zeros = fluid.layers.fill_constant([0, 6], "float32", 0.0)
    rng = np.random.default_rng(0)
    feed = {"boxes": rng.random((2, 3, 4), dtype="float32"),
            "scores": rng.random((2, 2, 3), dtype="float32")}
    exe = fluid.Executor(fluid.CPUPlace())
    got_out, got_index, got_zeros = exe.run(main, feed=feed, fetch_list=[out, index, zeros],
                                            return_numpy=False)
    assert got_out.shape() == [0] and got_index.shape() == [0] and got_zeros.shape() == [0]
    assert got_out.recursive_sequence_lengths() == [[0, 0]]
    assert np.array(got_index).dtype == np.int32
    arr, = exe.run(main, feed=feed, fetch_list=[zeros])
    assert arr.shape == (0,) and np.allclose(arr, np.array([]))
