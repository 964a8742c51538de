"""The prepared compiled run (executor/direct.py): a program compiled whole runs its later
calls of one signature without the executor's full path, with the full path's results
(bit for bit: the same native code), checks and errors; the signature is prepared once
and prepared again when the program, the scope or the CompiledProgram's setup changes."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.core.scope import get_fetch_variable
from fluidity.errors import ExecutionError, FeedError
from fluidity.executor import direct
from fluidity.executor.executor import Executor


def _net(checked=False, lod=False):
    """A small SGD step compiled whole: fc 6 -> relu fc 3 -> softmax xent -> mean.
    `checked`: x is a fluid.data variable (its shape and dtype checked as fed); `lod`: x is
    a sequence batch, sum-pooled first."""
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 3
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        if checked:
            x = fluid.data("x", [None, 4], "float32")
        else:
            x = fluid.layers.data("x", [4], lod_level=1 if lod else 0)
        label = fluid.layers.data("label", [1], dtype="int64")
        h = fluid.layers.sequence_pool(x, "sum") if lod else x
        h = fluid.layers.fc(h, 6, act="relu")
        logits = fluid.layers.fc(h, 3)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        fluid.optimizer.SGD(0.1).minimize(loss)
    return main, startup, loss


def _batch(rng, n=2):
    return {"x": rng.normal(size=(n, 4)).astype("float32"),
            "label": rng.integers(0, 3, (n, 1)).astype("int64")}


def _start(main, startup):
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    return exe, scope, fluid.CompiledProgram(main).with_native_code()


def _params(main, scope):
    return {p.name: np.array(scope.find_var(p.name).get_tensor())
            for p in main.all_parameters()}


def _both_ways(main, startup, loss, feeds):
    """{way: (the fetched losses, the parameters after)} of `feeds` run prepared ("direct")
    and the full way (create_local_scope=False never takes a prepared run)."""
    out = {}
    for way in ("direct", "full"):
        exe, scope, prog = _start(main, startup)
        losses = [exe.run(prog, feed=f, fetch_list=[loss], scope=scope,
                          create_local_scope=way == "direct")[0] for f in feeds]
        out[way] = (np.concatenate(losses), _params(main, scope))
    return out


def _assert_same(runs):
    np.testing.assert_array_equal(runs["direct"][0], runs["full"][0])
    for name, want in runs["full"][1].items():
        np.testing.assert_array_equal(runs["direct"][1][name], want, err_msg=name)


@pytest.fixture(autouse=True, params=["helper", "python"])
def packing(request, monkeypatch):
    """Every test runs with the fed arrays packed by direct_call.c and, as where it cannot
    be built (no Python headers, FLUIDITY_NATIVE=0), by Python."""
    if request.param == "python":
        monkeypatch.setattr(direct, "_helper", [None])
    elif direct.call_helper() is None:
        pytest.skip("direct_call.c cannot be built here")
    return request.param


class _Counts(dict):
    """The counters; "direct" is the runs that did not take the executor's full path."""

    def __getitem__(self, k):
        if k == "direct":
            return dict.__getitem__(self, "runs") - dict.__getitem__(self, "full")
        return dict.__getitem__(self, k)


@pytest.fixture
def counts(monkeypatch):
    """How often signatures are prepared, how often fed values take the full check, and
    how many runs took a prepared run (not the executor's full path)."""
    n = _Counts(prepare=0, check=0, runs=0, full=0)
    prepare, check = direct.prepare, Executor._check_feed
    run, full = Executor.run, Executor._run_prepared

    def counting_prepare(*a, **k):
        d = prepare(*a, **k)
        n["prepare"] += isinstance(d, direct.DirectRun)   # not a FullPath (the startup's)
        return d

    def counting_check(spec, value):
        n["check"] += 1
        return check(spec, value)

    def counting_run(self, *a, **k):         # the runs with a feed (not a startup's)
        n["runs"] += bool(k.get("feed"))
        return run(self, *a, **k)

    def counting_full(self, prep, scope, feed, *a):
        n["full"] += bool(feed)
        return full(self, prep, scope, feed, *a)
    monkeypatch.setattr(direct, "prepare", counting_prepare)
    monkeypatch.setattr(Executor, "check_feed", staticmethod(counting_check))
    monkeypatch.setattr(Executor, "run", counting_run)
    monkeypatch.setattr(Executor, "_run_prepared", counting_full)
    return n


def test_prepared_runs_train_bit_for_bit_as_the_full_path():
    main, startup, loss = _net()
    rng = np.random.default_rng(0)
    _assert_same(_both_ways(main, startup, loss, [_batch(rng, n=1 + k % 3) for k in range(5)]))


def test_a_signature_is_prepared_once_and_its_values_checked_fast(counts):
    main, startup, loss = _net()
    exe, scope, prog = _start(main, startup)
    rng = np.random.default_rng(1)
    exe.run(prog, feed=_batch(rng), fetch_list=[loss], scope=scope)
    assert counts["prepare"] == 1 and counts["direct"] == 0
    checks = counts["check"]
    for _ in range(3):
        out = exe.run(prog, feed=_batch(rng), fetch_list=[loss], scope=scope)
        assert out[0].shape == (1,) and np.isfinite(float(out[0]))
    assert counts["prepare"] == 1 and counts["direct"] == 3
    # the second run checks each value fully once (its shape is remembered), then none
    assert counts["check"] == checks + 2
    exe.run(prog, feed=_batch(rng, n=5), fetch_list=[loss], scope=scope)   # a new shape
    assert counts["check"] == checks + 4 and counts["prepare"] == 1
    assert counts["direct"] == 4


def test_a_changed_program_scope_or_setup_prepares_again(counts):
    main, startup, loss = _net()
    exe, scope, prog = _start(main, startup)
    rng = np.random.default_rng(2)
    run = lambda p=prog, s=scope: exe.run(p, feed=_batch(rng), fetch_list=[loss], scope=s)
    run(); run()
    assert counts["prepare"] == 1
    with fluid.program_guard(main):                  # the program changes: a new revision
        fluid.layers.scale(loss, 2.0)
    run(); run()
    assert counts["prepare"] == 2
    scope.var("something_new")                       # the scope's names change
    run(); run()
    assert counts["prepare"] == 3
    prog.with_native_code()                          # the CompiledProgram is set up again
    run(); run()
    assert counts["prepare"] == 4
    other = fluid.Scope()                            # another scope: its own signature
    exe.run(startup, scope=other)
    run(s=other); run(s=other)
    assert counts["prepare"] == 5
    kid = scope.new_scope()                          # a kid: the parameters found above it
    run(s=kid); run(s=kid)
    assert counts["prepare"] == 6
    scope.var("shadowed_or_not")                     # its parent's names change
    run(s=kid); run(s=kid)
    assert counts["prepare"] == 7 and counts["direct"] == 7


def test_bad_feeds_still_raise_the_full_paths_errors_after_preparing():
    main, startup, loss = _net(checked=True)
    exe, scope, prog = _start(main, startup)
    rng = np.random.default_rng(3)
    for _ in range(3):
        exe.run(prog, feed=_batch(rng), fetch_list=[loss], scope=scope)
    before = _params(main, scope)
    bad_shape = dict(_batch(rng), x=np.zeros((2, 5), "float32"))
    with pytest.raises(FeedError, match=r"'x'.*\(-1, 4\).*\[2, 5\]"):
        exe.run(prog, feed=bad_shape, fetch_list=[loss], scope=scope)
    bad_dtype = dict(_batch(rng), x=np.zeros((2, 4), "float64"))
    with pytest.raises(FeedError, match=r"'x'.*float32.*float64"):
        exe.run(prog, feed=bad_dtype, fetch_list=[loss], scope=scope)
    bad_rank = dict(_batch(rng), x=np.zeros((2, 4, 1), "float32"))
    with pytest.raises(FeedError, match="'x'"):
        exe.run(prog, feed=bad_rank, fetch_list=[loss], scope=scope)
    for name, want in before.items():        # nothing ran: no parameter moved
        np.testing.assert_array_equal(_params(main, scope)[name], want, err_msg=name)
    # a label out of range fails in the compiled op, named, as on the full path
    with pytest.raises(ExecutionError, match="softmax_with_cross_entropy"):
        exe.run(prog, feed=dict(_batch(rng), label=np.full((2, 1), 7, "int64")),
                fetch_list=[loss], scope=scope)


def test_an_unchecked_variable_fed_another_dtype_is_named_as_compiled():
    main, startup, loss = _net()
    exe, scope, prog = _start(main, startup)
    rng = np.random.default_rng(4)
    for _ in range(2):
        exe.run(prog, feed=_batch(rng), fetch_list=[loss], scope=scope)
    with pytest.raises(ExecutionError, match=r"'x' is float64, compiled for float32"):
        exe.run(prog, feed=dict(_batch(rng), x=np.zeros((2, 4))), fetch_list=[loss],
                scope=scope)


def test_values_that_are_not_plain_arrays_take_the_full_check_and_run():
    main, startup, loss = _net()
    rng = np.random.default_rng(5)
    feeds = []
    for kind in ("array", "array", "strided", "lodtensor", "list", "readonly", "array"):
        feed = _batch(rng)
        if kind == "readonly":           # no writable buffer: its address read by numpy
            feed["x"].flags.writeable = False
        elif kind == "strided":          # not C-contiguous: copied for the native call
            feed["x"] = np.asfortranarray(np.tile(feed["x"], (1, 2))[:, ::2])
        elif kind == "lodtensor":
            t = fluid.LoDTensor()
            t.set(feed["x"], fluid.CPUPlace())
            feed["x"] = t
        elif kind == "list":
            feed["x"] = feed["x"].tolist()
        feeds.append(feed)
    _assert_same(_both_ways(main, startup, loss, feeds))


def test_fetches_holders_and_parameters_as_on_the_full_path():
    main, startup, loss = _net()
    exe, scope, prog = _start(main, startup)
    rng = np.random.default_rng(6)
    w = main.all_parameters()[0].name
    for _ in range(3):
        feed = _batch(rng)
        got_loss, got_w = exe.run(prog, feed=feed, fetch_list=[loss, w], scope=scope)
    # a fetched parameter is a copy: the next update does not change it
    held = got_w.copy()
    exe.run(prog, feed=_batch(rng), fetch_list=[loss, w], scope=scope)
    np.testing.assert_array_equal(got_w, held)
    assert not np.array_equal(np.array(scope.find_var(w).get_tensor()), held)
    # holders: the fed tensors and the fetched ones, as Paddle's core functions read them
    feed = _batch(rng)
    got = exe.run(prog, feed=feed, fetch_list=[loss], scope=scope, return_numpy=False)
    assert isinstance(got[0], fluid.LoDTensor)
    np.testing.assert_array_equal(np.array(get_fetch_variable(scope, "fetch", 0)),
                                  np.array(got[0]))
    fed = scope.find_var("feed").get_feed_list()
    np.testing.assert_array_equal(np.array(fed[0]), feed["x"])
    # temporaries stay out of the scope, as with the full path's dropped kid scope
    assert scope.find_var(loss.name) is None and scope.kids() == []


def test_a_parameter_replaced_between_runs_is_read_again():
    main, startup, loss = _net()
    exe, scope, prog = _start(main, startup)
    rng = np.random.default_rng(7)
    feed = _batch(rng)
    for _ in range(2):
        exe.run(prog, feed=feed, fetch_list=[loss], scope=scope)
    for p in main.all_parameters():
        t = scope.find_var(p.name).get_tensor()
        t.set(np.zeros_like(np.array(t)), fluid.CPUPlace())   # a new array
    got = float(exe.run(prog, feed=feed, fetch_list=[loss], scope=scope)[0])
    assert got == pytest.approx(np.log(3.0), rel=1e-6)     # zero weights: uniform logits


def test_a_sequence_batch_runs_prepared_with_its_lod_checked():
    main, startup, loss = _net(lod=True)
    rng = np.random.default_rng(8)
    feeds = [{"x": fluid.create_lod_tensor(rng.normal(size=(5, 4)).astype("float32"),
                                           [[2, 3]], fluid.CPUPlace()),
              "label": _batch(rng)["label"]} for _ in range(4)]
    _assert_same(_both_ways(main, startup, loss, feeds))
    exe, scope, prog = _start(main, startup)
    for f in feeds:
        exe.run(prog, feed=f, fetch_list=[loss], scope=scope)
    bad = fluid.LoDTensor()
    bad.set(np.zeros((9, 4), "float32"), fluid.CPUPlace())
    bad.set_lod([[0, 2, 9]])
    bad.set(np.zeros((5, 4), "float32"), fluid.CPUPlace())   # now 9 is past its rows
    with pytest.raises(FeedError, match="'x'"):
        exe.run(prog, feed={"x": bad, "label": np.zeros((2, 1), "int64")},
                fetch_list=[loss], scope=scope)


def test_threads_running_one_prepared_signature_each_get_their_own_results():
    import threading
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 5
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [4])
        out = fluid.layers.fc(x, 3, act="tanh")
    exe, scope, prog = _start(main, startup)
    rng = np.random.default_rng(9)
    inputs = [rng.normal(size=(1 + i % 3, 4)).astype("float32") for i in range(8)]
    want = [exe.run(main, feed={"x": a}, fetch_list=[out], scope=scope)[0] for a in inputs]
    got, errors = {}, []

    def worker(k):
        try:
            for _ in range(20):
                for i in range(k, len(inputs), 2):
                    got[i] = exe.run(prog, feed={"x": inputs[i]}, fetch_list=[out],
                                     scope=scope)[0]
                    np.testing.assert_allclose(got[i], want[i], rtol=1e-5, atol=1e-6)
        except Exception as e:     # reported below, from the main thread
            errors.append(e)
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(got) == len(inputs)


def test_a_prepared_run_does_not_keep_its_scope_alive():
    import gc
    import weakref
    main, startup, loss = _net()
    exe = fluid.Executor()
    prog = fluid.CompiledProgram(main).with_native_code()
    rng = np.random.default_rng(10)
    refs = []
    for _ in range(3):                  # a scope per model, as a test suite makes them
        scope = fluid.Scope()
        exe.run(startup, scope=scope)
        for _ in range(3):
            exe.run(prog, feed=_batch(rng), fetch_list=[loss], scope=scope)
        refs.append(weakref.ref(scope))
        del scope
    gc.collect()
    assert [r() for r in refs] == [None, None, None]


def test_an_armed_signature_runs_whole_in_c_and_leaves_it_for_anything_else(packing,
                                                                            monkeypatch):
    """Once a run of a signature went the Python way, the next ones are one call of
    direct_call.c's runner (no Python fetch); a new shape, an arena that must grow, a
    replaced parameter, a holder changed by the user each go back to Python for that run,
    and every result is the full path's, bit for bit."""
    if packing == "python":
        pytest.skip("the runner is direct_call.c's")
    main, startup, loss = _net()
    rng = np.random.default_rng(11)
    feeds = [_batch(rng) for _ in range(4)] + [_batch(rng, n=5000)] + \
        [_batch(rng) for _ in range(3)] + [_batch(rng, n=5000) for _ in range(2)]
    python_fetches = []
    fetched = direct.DirectRun._fetched

    def counting(self, st, tensors):
        python_fetches.append(len(python_fetches))
        return fetched(self, st, tensors)
    monkeypatch.setattr(direct.DirectRun, "_fetched", counting)
    _assert_same(_both_ways(main, startup, loss, feeds))
    # run 1 prepares (the full path), 2 goes the Python way and arms the runner, 3 and 4
    # run in C; each change of shape (5, 6, 9: checked, the arena grown, views of the
    # new arena made) goes the Python way once, then C again
    assert len(python_fetches) == 4

    exe, scope, prog = _start(main, startup)
    for f in feeds[:4]:
        exe.run(prog, feed=f, fetch_list=[loss], scope=scope)
    python_fetches.clear()
    w = main.all_parameters()[0].name
    t = scope.find_var(w).get_tensor()
    t.set(np.array(t), fluid.CPUPlace())                       # the same values, a new array
    scope.find_var("fetch").value = []                         # a holder the user emptied
    for _ in range(2):
        got = exe.run(prog, feed=feeds[1], fetch_list=[loss], scope=scope)[0]
        assert isinstance(got, np.ndarray) and got.shape == (1,) and np.isfinite(float(got))
    assert len(python_fetches) == 1                            # the first in Python, then C
    np.testing.assert_array_equal(np.array(get_fetch_variable(scope, "fetch", 0)), got)
    np.testing.assert_array_equal(np.array(scope.find_var("feed").get_feed_list()[0]),
                                  feeds[1]["x"])


def test_the_last_runs_arguments_are_remembered_and_anything_else_looked_up_again():
    """Executor.run remembers the arguments of its last prepared run (the fetched objects
    themselves) to skip building the signature; runs that alternate fetch lists, feed
    orders, return_numpy and two scopes each train as the full path does, bit for bit."""
    main, startup, loss = _net()
    rng = np.random.default_rng(12)
    feeds = [_batch(rng) for _ in range(8)]
    want = _both_ways(main, startup, loss, feeds)["full"][0]
    exe, scope, prog = _start(main, startup)
    other = fluid.Scope()
    exe.run(startup, scope=other)
    got, got_other = [], []
    for k, f in enumerate(feeds):
        kind = k % 4
        if kind == 0:
            out = exe.run(prog, feed=f, fetch_list=[loss], scope=scope)[0]
        elif kind == 1:
            out = exe.run(prog, feed=f, fetch_list=[loss.name], scope=scope)[0]
        elif kind == 2:                              # the same names, in another order
            out = exe.run(prog, feed={"label": f["label"], "x": f["x"]},
                          fetch_list=[loss], scope=scope)[0]
        else:
            out = np.array(exe.run(prog, feed=f, fetch_list=[loss], scope=scope,
                                   return_numpy=False)[0])
        got.append(out)
        got_other.append(exe.run(prog, feed=f, fetch_list=[loss], scope=other)[0])
    np.testing.assert_array_equal(np.concatenate(got), want)
    np.testing.assert_array_equal(np.concatenate(got_other), want)
