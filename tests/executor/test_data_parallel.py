"""Data parallelism over CPU places as Fluid 1.x runs it (CompiledProgram.with_data_parallel,
ParallelExecutor): numbers against one place, fetched shapes, feed splitting, the
strategies, replicas' own batch-norm statistics, threads at once, failures, _dry_run and
_compile."""
import threading

import numpy as np
import pytest

import fluidity as fluid
from fluidity import layers
from fluidity.errors import ExecutionError, FeedError, FetchError

# float64 programs: a data-parallel step sums each half's contributions and then the halves,
# one place sums the whole batch; the results differ by the rounding of re-associated sums
# of 16 terms, |error| <= 16 * eps64 * sum|terms| ~ 4e-15 relative; a few steps compound it
# a little. 1e-11 leaves three orders of magnitude.
RTOL = 1e-11


def mlp(dtype="float64", lr=0.1, bn=False, seed=3):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        x = layers.data(name="x", shape=[4], dtype=dtype)
        y = layers.data(name="y", shape=[1], dtype=dtype)
        h = layers.fc(input=x, size=5, act="tanh")
        if bn:
            h = layers.batch_norm(h)
        pred = layers.fc(input=h, size=1)
        loss = layers.mean(layers.square_error_cost(input=pred, label=y))
        fluid.optimizer.Momentum(learning_rate=lr, momentum=0.9).minimize(loss)
    return main, startup, loss, pred


def batch(n=16, seed=0, dtype="float64"):
    rng = np.random.RandomState(seed)
    return rng.rand(n, 4).astype(dtype), rng.rand(n, 1).astype(dtype)


def params(scope, program):
    return {p.name: np.array(scope.find_var(p.name).get_tensor())
            for p in program.global_block().all_parameters()}


def train(program, startup, loss, feeds, places=None, build=None, exec_strategy=None,
          fetch=None, **run_kw):
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        prog = program
        if places is not None:
            prog = fluid.CompiledProgram(program).with_data_parallel(
                loss_name=loss.name, places=places, build_strategy=build,
                exec_strategy=exec_strategy)
        out = [exe.run(prog, feed=f, fetch_list=fetch or [loss], **run_kw) for f in feeds]
    return out, params(scope, program), scope


def test_two_places_train_as_one_place_on_the_whole_batch():
    main, startup, loss, _ = mlp()
    xs, ys = batch(16)
    feeds = [{"x": xs, "y": ys}] * 3
    one, p_one, _ = train(main, startup, loss, feeds)
    two, p_two, _ = train(main, startup, loss, feeds, places=fluid.cpu_places(2))
    for name in p_one:
        np.testing.assert_allclose(p_two[name], p_one[name], rtol=RTOL, atol=1e-14)
    # each place's loss is the mean over its half; their mean is the whole batch's
    for (l1,), (l2,) in zip(one, two):
        assert np.shape(l2) == (2,)
        np.testing.assert_allclose(np.mean(l2), np.ravel(l1)[0], rtol=RTOL)
    # the same with Fluid's per-place feed list
    halves = [{"x": xs[:8], "y": ys[:8]}, {"x": xs[8:], "y": ys[8:]}]
    _, p_list, _ = train(main, startup, loss, [halves] * 3, places=fluid.cpu_places(2))
    for name in p_one:
        np.testing.assert_allclose(p_list[name], p_one[name], rtol=RTOL, atol=1e-14)


def test_fetches_merge_along_the_batch_axis_or_come_per_place():
    main, startup, loss, pred = mlp()
    xs, ys = batch(6)
    (merged,), _, _ = train(main, startup, loss, [{"x": xs, "y": ys}],
                            places=fluid.cpu_places(3), fetch=[loss, pred])
    l, p = merged
    assert l.shape == (3,) and p.shape == (6, 1)
    (per_place,), _, _ = train(main, startup, loss, [{"x": xs, "y": ys}],
                               places=fluid.cpu_places(3), fetch=[loss, pred],
                               return_merged=False)
    l_pp, p_pp = per_place
    assert len(l_pp) == 3 and len(p_pp) == 3
    assert [a.shape for a in p_pp] == [(2, 1)] * 3
    np.testing.assert_array_equal(np.concatenate(p_pp), p)
    # a batch of 5 on 2 places: Fluid's split gives ceil(5/2) = 3 and 2
    xs5, ys5 = batch(5)
    (per_place,), _, _ = train(main, startup, loss, [{"x": xs5, "y": ys5}],
                               places=fluid.cpu_places(2), fetch=[pred],
                               return_merged=False)
    assert [a.shape for a in per_place[0]] == [(3, 1), (2, 1)]


def test_return_numpy_false_gives_merged_lod_tensors():
    main, startup, loss, pred = mlp()
    xs, ys = batch(4)
    (out,), _, _ = train(main, startup, loss, [{"x": xs, "y": ys}],
                         places=fluid.cpu_places(2), fetch=[pred], return_numpy=False)
    assert isinstance(out[0], fluid.LoDTensor) and np.array(out[0]).shape == (4, 1)


def test_a_batch_too_small_for_the_places_is_refused_for_training():
    main, startup, loss, _ = mlp()
    xs, ys = batch(1)
    with pytest.raises(FeedError, match="1 of the 2 places"):
        train(main, startup, loss, [{"x": xs, "y": ys}], places=fluid.cpu_places(2))
    with pytest.raises(FeedError, match="1 feed dicts for 2 places"):
        train(main, startup, loss, [[{"x": xs, "y": ys}]], places=fluid.cpu_places(2))
    with pytest.raises(FeedError, match="3 feed dicts for 2 places"):
        train(main, startup, loss, [[{"x": xs, "y": ys}] * 3], places=fluid.cpu_places(2))
    with pytest.raises(FeedError, match="place 1 is fed"):
        train(main, startup, loss, [[{"x": xs, "y": ys}, {"x": xs}]],
              places=fluid.cpu_places(2))
    with pytest.raises(TypeError, match="must be a dict"):
        train(main, startup, loss, [[{"x": xs, "y": ys}, [xs, ys]]],
              places=fluid.cpu_places(2))


def test_inference_programs_take_partial_feeds():
    main, startup, loss, pred = mlp()
    infer = main.clone(for_test=True)
    xs, ys = batch(3)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        (want,) = exe.run(infer, feed={"x": xs[:1], "y": ys[:1]}, fetch_list=[pred.name])
        cp = fluid.CompiledProgram(infer).with_data_parallel(places=fluid.cpu_places(4))
        # one example for four places: one place runs, the others sit the run out
        (got,) = exe.run(cp, feed={"x": xs[:1], "y": ys[:1]}, fetch_list=[pred.name])
        np.testing.assert_array_equal(got, want)
        (got,) = exe.run(cp, feed=[{"x": xs[:2], "y": ys[:2]}, {"x": xs[2:], "y": ys[2:]}],
                         fetch_list=[pred.name])
        assert got.shape == (3, 1)


def test_lod_feeds_split_by_sequences_and_merge_back():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        words = layers.data(name="w", shape=[1], dtype="int64", lod_level=1)
        emb = layers.embedding(words, size=[20, 3])
        pooled = layers.sequence_pool(emb, "sum")
    lens = [2, 1, 3, 2]
    ids = np.arange(sum(lens)).reshape(-1, 1).astype("int64")
    t = fluid.create_lod_tensor(ids, [lens], fluid.CPUPlace())
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        (want_e, want_p) = exe.run(main, feed={"w": t}, fetch_list=[emb, pooled],
                                   return_numpy=False)
        cp = fluid.CompiledProgram(main).with_data_parallel(places=fluid.cpu_places(2))
        got_e, got_p = exe.run(cp, feed={"w": t}, fetch_list=[emb, pooled],
                               return_numpy=False)
        per = exe.run(cp, feed={"w": t}, fetch_list=[emb], return_merged=False,
                      return_numpy=False)[0]
    assert got_e.lod() == want_e.lod() == [[0, 2, 3, 6, 8]]
    np.testing.assert_array_equal(np.array(got_e), np.array(want_e))
    np.testing.assert_array_equal(np.array(got_p), np.array(want_p))
    assert [p.recursive_sequence_lengths() for p in per] == [[[2, 1]], [[3, 2]]]


def test_gradient_scale_and_reduce_strategies():
    main, startup, loss, _ = mlp(lr=0.1)
    xs, ys = batch(8)
    feeds = [{"x": xs, "y": ys}]
    init = params(train(main, startup, loss, [])[2], main)
    _, coeff, _ = train(main, startup, loss, feeds, places=fluid.cpu_places(2))
    one_build = fluid.BuildStrategy()
    one_build.gradient_scale_strategy = fluid.BuildStrategy.GradientScaleStrategy.One
    _, one, _ = train(main, startup, loss, feeds, places=fluid.cpu_places(2),
                      build=one_build)
    reduce_build = fluid.BuildStrategy()
    reduce_build.reduce_strategy = fluid.BuildStrategy.ReduceStrategy.Reduce
    _, reduced, _ = train(main, startup, loss, feeds, places=fluid.cpu_places(2),
                          build=reduce_build)
    for name in init:
        # One sums the places' gradients where CoeffNumDevice averages them: one momentum
        # step from zero velocity moves twice as far
        np.testing.assert_allclose(one[name] - init[name], 2 * (coeff[name] - init[name]),
                                   rtol=1e-12, atol=1e-15)
        np.testing.assert_array_equal(reduced[name], coeff[name])
    # Customized: the program is fed the loss gradient, one value a place
    custom = fluid.BuildStrategy()
    custom.gradient_scale_strategy = fluid.BuildStrategy.GradientScaleStrategy.Customized
    grad = np.full([2], 0.5)   # each place's value of loss@GRAD: CoeffNumDevice's 1/2
    _, cust, _ = train(main, startup, loss,
                       [{"x": xs, "y": ys, loss.name + "@GRAD": grad.reshape(
                           (2,) + tuple(1 for _ in loss.shape))}],
                       places=fluid.cpu_places(2), build=custom)
    for name in init:
        np.testing.assert_allclose(cust[name], coeff[name], rtol=1e-13)


def test_each_place_keeps_its_own_batch_norm_statistics():
    main, startup, loss, _ = mlp(bn=True)
    bn = [op for op in main.global_block().ops if op.type == "batch_norm"][0]
    stats = bn.output("MeanOut") + bn.output("VarianceOut")
    xs, ys = batch(8)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    cp = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name,
                                                        places=fluid.cpu_places(2))
    exe.run(cp, feed={"x": xs, "y": ys}, scope=scope)
    place_scopes = cp._executor.local_scopes()
    assert place_scopes[0] is scope
    # one step from the same parameters: place k's statistics are those of its half alone
    # (the user's scope holds place 0's, as Fluid's scope holds device 0's)
    for k, (lo, hi) in enumerate([(0, 4), (4, 8)]):
        _, _, alone = train(main, startup, loss, [{"x": xs[lo:hi], "y": ys[lo:hi]}])
        for name in stats:
            held = place_scopes[k].find_local_var(name)
            assert held is not None
            np.testing.assert_allclose(np.array(held.get_tensor()),
                                       np.array(alone.find_var(name).get_tensor()),
                                       rtol=1e-12)


def test_sparse_embedding_gradients_are_gathered():
    def build():
        main, startup = fluid.Program(), fluid.Program()
        main.random_seed = startup.random_seed = 5
        with fluid.unique_name.guard(), fluid.program_guard(main, startup):
            ids = layers.data(name="ids", shape=[1], dtype="int64")
            y = layers.data(name="y", shape=[1], dtype="float64")
            emb = layers.embedding(ids, size=[10, 3], is_sparse=True, dtype="float64")
            pred = layers.fc(emb, size=1)
            loss = layers.mean(layers.square_error_cost(pred, y))
            fluid.optimizer.SGD(0.5).minimize(loss)
        return main, startup, loss
    main, startup, loss = build()
    ids = np.array([[1], [3], [3], [7], [1], [2]], "int64")
    ys = np.linspace(0, 1, 6).reshape(-1, 1)
    feeds = [{"ids": ids, "y": ys}] * 2
    _, one, _ = train(main, startup, loss, feeds)
    _, two, _ = train(main, startup, loss, feeds, places=fluid.cpu_places(2))
    for name in one:
        np.testing.assert_allclose(two[name], one[name], rtol=RTOL, atol=1e-14)


def test_replicas_run_at_the_same_time():
    """Each replica's forward waits at one barrier for the other: replicas run one after the
    other would time the barrier out."""
    met = threading.Barrier(2, timeout=30)
    seen = []

    def meet(x):
        met.wait()
        seen.append(threading.get_ident())
        return np.array(x)

    main, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        x = layers.data(name="x", shape=[2], dtype="float32")
        out = main.global_block().create_var(name="met", shape=[-1, 2], dtype="float32")
        layers.py_func(meet, x, out)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    cp = fluid.CompiledProgram(main).with_data_parallel(places=fluid.cpu_places(2))
    (got,) = exe.run(cp, feed={"x": np.ones((4, 2), "float32")}, fetch_list=["met"])
    assert got.shape == (4, 2) and len(set(seen)) == 2


def test_a_failing_replica_fails_the_run_without_hanging():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        ids = layers.data(name="ids", shape=[1], dtype="int64")
        emb = layers.embedding(ids, size=[4, 2])
        loss = layers.mean(emb)
        fluid.optimizer.SGD(0.1).minimize(loss)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        before = params(scope, main)
        cp = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name,
                                                            places=fluid.cpu_places(2))
        bad = [{"ids": np.array([[0], [1]], "int64")}, {"ids": np.array([[2], [9]], "int64")}]
        with pytest.raises(ExecutionError, match="lookup_table"):
            exe.run(cp, feed=bad, fetch_list=[loss])
        for name, value in params(scope, main).items():   # no optimizer step was taken
            np.testing.assert_array_equal(value, before[name])
        good = [{"ids": np.array([[0], [1]], "int64")}, {"ids": np.array([[2], [3]], "int64")}]
        (l,) = exe.run(cp, feed=good, fetch_list=[loss])     # the runner still works
        assert l.shape == (2,)


def test_dry_run_schedules_without_running_kernels():
    main, startup, loss, _ = mlp()
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        before = params(scope, main)
        strategy = fluid.ExecutionStrategy()
        strategy._dry_run = True
        cp = fluid.CompiledProgram(main).with_data_parallel(
            loss_name=loss.name, exec_strategy=strategy, places=fluid.cpu_places(2))
        for _ in range(3):
            assert exe.run(cp) == []     # nothing fed: no kernel runs, so none misses it
        assert exe.run(cp, fetch_list=[loss]) == [None]
        for name, value in params(scope, main).items():
            np.testing.assert_array_equal(value, before[name])


def test_compile_binds_a_scope_and_a_place_as_fluid_does():
    main, startup, loss, _ = mlp()
    xs, ys = batch(4)
    cp = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name,
                                                        places=fluid.cpu_places(2))
    scope = fluid.Scope()
    assert cp._compile(scope, fluid.CPUPlace()) is cp
    assert cp._compile(scope, fluid.CPUPlace()) is cp
    with pytest.raises(ValueError, match="different scope"):
        cp._compile(fluid.Scope(), fluid.CPUPlace())
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    exe.run(cp, feed={"x": xs, "y": ys}, scope=scope)
    with pytest.raises(ValueError, match="different scope"):
        exe.run(cp, feed={"x": xs, "y": ys}, scope=fluid.Scope())
    assert cp._executor.device_count() == 2 and len(cp._executor.local_scopes()) == 2
    # share_vars_from: a data-parallel program, compiled (run) first
    plain = fluid.CompiledProgram(main)
    plain._compile(scope, fluid.CPUPlace())
    test = main.clone(for_test=True)
    with pytest.raises(ValueError, match="not data parallel"):
        fluid.CompiledProgram(test).with_data_parallel(share_vars_from=plain)._compile(
            scope, fluid.CPUPlace())
    fresh = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
    with pytest.raises(ValueError, match="not compiled and executed"):
        fluid.CompiledProgram(test).with_data_parallel(share_vars_from=fresh)._compile(
            scope, fluid.CPUPlace())
    shared = fluid.CompiledProgram(test).with_data_parallel(share_vars_from=cp)
    shared._compile(fluid.Scope(), fluid.CPUPlace())    # its scope is cp's, the given one ignored
    assert shared._executor.local_scopes() == cp._executor.local_scopes()
    with pytest.raises(ValueError, match="loss_name"):
        fluid.CompiledProgram(main).with_data_parallel()
    with pytest.raises(TypeError):
        fluid.CompiledProgram("main")


def test_places_default_to_cpu_num(monkeypatch):
    monkeypatch.delenv("CPU_NUM", raising=False)
    assert fluid.cpu_places() == [fluid.CPUPlace()]      # Fluid: CPU_NUM unset is 1
    import os
    assert os.environ["CPU_NUM"] == "1"
    monkeypatch.setenv("CPU_NUM", "3")
    main, startup, loss, _ = mlp()
    xs, ys = batch(6)
    (out,), _, _ = train(main, startup, loss, [{"x": xs, "y": ys}], places=None)
    exe = fluid.Executor(fluid.CPUPlace())
    cp = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    (l,) = exe.run(cp, feed={"x": xs, "y": ys}, fetch_list=[loss], scope=scope)
    assert l.shape == (3,)
    monkeypatch.setenv("CPU_NUM", "two")
    with pytest.raises(ValueError, match="CPU_NUM"):
        fluid.cpu_places()


def test_fetch_of_unjoinable_shapes_asks_for_return_merged_false():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        x = layers.data(name="x", shape=[-1, -1], dtype="float32", append_batch_size=False)
        y = layers.scale(x, 2.0)
    exe = fluid.Executor(fluid.CPUPlace())
    cp = fluid.CompiledProgram(main).with_data_parallel(places=fluid.cpu_places(2))
    feed = [{"x": np.ones((1, 2), "float32")}, {"x": np.ones((1, 3), "float32")}]
    with pytest.raises(FetchError, match="return_merged=False"):
        exe.run(cp, feed=feed, fetch_list=[y])
    a, b = exe.run(cp, feed=feed, fetch_list=[y], return_merged=False)[0]
    assert a.shape == (1, 2) and b.shape == (1, 3)


def test_collective_ops_outside_a_data_parallel_run_say_so():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = layers.data(name="x", shape=[2], dtype="float32")
        out = main.global_block().create_var(name="s", shape=[-1, 2], dtype="float32")
        main.global_block().append_op(type="c_allreduce_sum", inputs={"X": [x]},
                                      outputs={"Out": [out]})
    with pytest.raises(ExecutionError, match="data-parallel run"):
        fluid.Executor().run(main, feed={"x": np.ones((2, 2), "float32")}, fetch_list=[out])


def test_parallel_executor_on_cpu_num_places(monkeypatch):
    monkeypatch.setenv("CPU_NUM", "2")
    main, startup, loss, _ = mlp()
    xs, ys = batch(8)
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.Executor(fluid.CPUPlace()).run(startup)
        pe = fluid.ParallelExecutor(use_cuda=False, loss_name=loss.name, main_program=main)
        assert pe.device_count == 2 and not pe._need_create_local_exe_scopes()
        for _ in range(2):
            (l,) = pe.run(fetch_list=[loss.name], feed={"x": xs, "y": ys})
            assert l.shape == (2,)
        pe.drop_local_exe_scopes()
        assert pe._need_create_local_exe_scopes()          # as Fluid's flag says after a drop
        pe.run(fetch_list=[loss.name], feed={"x": xs[:2], "y": ys[:2]})
        assert not pe._need_create_local_exe_scopes()
        assert pe.run(fetch_list=[], feed={"x": xs, "y": ys}) == []
    _, want, _ = train(main, startup, loss, [{"x": xs, "y": ys}] * 2 +
                       [{"x": xs[:2], "y": ys[:2]}, {"x": xs, "y": ys}])
    for name, value in params(scope, main).items():
        np.testing.assert_allclose(value, want[name], rtol=RTOL, atol=1e-14)


def test_a_python_scalar_fed_to_a_data_parallel_program_is_one_element():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        lr = fluid.data("lr", [1], "float32")
        x = fluid.data("x", [None, 1], "float32")
        loss = fluid.layers.mean(fluid.layers.fc(x, 1))
        fluid.optimizer.Adam(learning_rate=lr).minimize(loss)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    prog = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name,
                                                          places=fluid.cpu_places(1))
    got, = exe.run(prog, feed={"x": np.ones([4, 1], "float32"), "lr": 0.01},
                   fetch_list=[lr], scope=scope)
    assert np.asarray(got).dtype == np.float32 and np.asarray(got).shape == (1,)
    np.testing.assert_allclose(np.asarray(got), [0.01])


def test_a_persistable_feed_of_one_value_is_every_places_and_runs_no_place():
    """Fluid: a persistable variable fed one value gives every place a copy; the places
    that run are those the (non-persistable) batch reaches."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 3], "float32")
        lr = fluid.data("lr", [1], "float32")
        lr.persistable = True
        out = layers.relu(x) * lr
        lr_out = layers.relu(lr)
    exe, scope = fluid.Executor(), fluid.Scope()
    cp = fluid.CompiledProgram(main).with_data_parallel(places=fluid.cpu_places(3))
    xs = np.arange(-3, 3, dtype="float32").reshape(2, 3)
    got, got_lr = exe.run(cp, feed={"x": xs, "lr": np.array([2.0], "float32")},
                          fetch_list=[out, lr_out], scope=scope)
    np.testing.assert_array_equal(got, np.maximum(xs, 0) * 2)      # two places ran
    assert got_lr.tolist() == [2.0, 2.0]
    # fewer persistable values than places the batch reaches: Fluid refuses it too
    with pytest.raises(FeedError, match="every place that runs must be fed"):
        exe.run(cp, feed={"x": np.ones((3, 3), "float32"),
                          "lr": np.array([2.0, 3.0], "float32")}, fetch_list=[out],
                scope=scope)


@pytest.mark.parametrize("drop_last,steps,examples", [(False, 3, 7), (True, 2, 6)])
def test_a_loader_in_the_program_ends_a_pass_on_the_places_that_read(drop_last, steps,
                                                                       examples):
    """An inference program over a non-iterable DataLoader on 3 places, 7 batches: with
    drop_last=False the last step runs the one place that read a batch (Fluid's partial
    feed); with drop_last=True that batch is dropped."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.scope_guard(fluid.Scope()):     # the loader's queue lives in global_scope()
        with fluid.program_guard(main, startup):
            x = fluid.data("x", [None, 1], "float32")
            loader = fluid.io.DataLoader.from_generator(feed_list=[x], capacity=4,
                                                        iterable=False, drop_last=drop_last)
            y = x * 2.0
        loader.set_batch_generator(
            lambda: ((np.full((1, 1), i, "float32"),) for i in range(7)))
        exe = fluid.Executor()
        cp = fluid.CompiledProgram(main).with_data_parallel(places=fluid.cpu_places(3))
        exe.run(startup)
        loader.start()
        got = []
        try:
            while True:
                got.append(exe.run(cp, fetch_list=[y])[0].ravel().tolist())
        except fluid.core.EOFException:
            loader.reset()
    assert len(got) == steps and sum(len(g) for g in got) == examples
    assert [v for g in got for v in g] == [2.0 * i for i in range(examples)]
