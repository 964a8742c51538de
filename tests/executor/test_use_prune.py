"""`Executor.run(use_prune=True)` and optimizer ops in the fetch list, as Fluid 1.8: only
what the fetches (and the named optimizer) need runs, the pruned program is cached per
signature, and fed names the pruned program lacks are dropped with a warning. Also
`fluid.executor._fetch_var` / `global_scope`."""
import warnings

import numpy as np
import pytest

import fluidity as fluid
from fluidity import executor

L = fluid.layers


def _two_losses(opt_per_loss):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x1 = L.data("x1", [2])
        x2 = L.data("x2", [2])
        label = L.data("label", [1], dtype="int64")
        losses, trains = [], []
        for i, x in enumerate((x1, x2)):
            y = L.fc(x, 2, act="softmax", param_attr=fluid.ParamAttr(
                name=f"w{i}", initializer=fluid.initializer.Constant(1.0)))
            loss = L.mean(L.cross_entropy(y, label))
            loss.persistable = True
            losses.append(loss)
        if opt_per_loss:
            trains = [fluid.optimizer.SGD(0.5).minimize(loss) for loss in losses]
    feed = {"x1": np.random.RandomState(0).rand(4, 2).astype("f4"),
            "x2": np.random.RandomState(1).rand(4, 2).astype("f4"),
            "label": np.array([[0], [1], [1], [0]], "int64")}
    return main, startup, losses, trains, feed


def test_use_prune_runs_only_what_the_fetch_needs():
    main, startup, (loss1, loss2), _, feed = _two_losses(False)
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        out, = exe.run(main, feed=feed, fetch_list=[loss1], use_prune=True)
        assert scope.find_var(loss1.name) is not None
        assert scope.find_var(loss2.name) is None           # pruned away
        full = exe.run(main, feed=feed, fetch_list=[loss1])[0]
        np.testing.assert_array_equal(out, full)
        assert scope.find_var(loss2.name) is not None       # without pruning, all runs


def test_an_optimizer_op_in_the_fetch_list_picks_that_optimizer():
    main, startup, (loss1, _), (train1, train2), feed = _two_losses(True)
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        exe.run(main, feed=feed, fetch_list=[loss1.name, train1])   # use_prune implied
        w0 = np.array(scope.find_var("w0").get_tensor())
        w1 = np.array(scope.find_var("w1").get_tensor())
    assert not np.allclose(w0, 1.0)          # loss1's optimizer ran
    np.testing.assert_array_equal(w1, np.ones_like(w1))   # loss2's did not
    with pytest.raises(TypeError, match="not an optimize_op"):
        exe.run(main, feed=feed, fetch_list=[loss1, [main.global_block().ops[0]]])


def test_pruned_program_is_cached_per_signature(monkeypatch):
    main, startup, (loss1, loss2), (train1, train2), feed = _two_losses(True)
    calls = []
    real = fluid.Executor._prune_program

    def counting(self, program, feed=None, fetch_list=None, optimize_ops=None):
        calls.append(1)
        return real(self, program, feed, fetch_list, optimize_ops)
    monkeypatch.setattr(fluid.Executor, "_prune_program", counting)
    with fluid.scope_guard(fluid.Scope()):
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        for i in range(4):
            exe.run(main, feed=feed, fetch_list=[loss1, loss2, train1 if i % 2 else train2])
        assert len(calls) == 2


def test_fed_names_the_pruned_program_lacks_are_dropped_with_a_warning():
    main, startup, (loss1, _), _, feed = _two_losses(False)
    with fluid.scope_guard(fluid.Scope()):
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            exe.run(main, feed=feed, fetch_list=[loss1], use_prune=True)
    assert any("x2 is not found in program" in str(m.message) for m in w)


def test_fetch_var_reads_a_persistable_after_a_run():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.create_tensor(dtype="int32", persistable=True, name="kept")
        L.assign(np.array([1, 3, 5], "int32"), output=x)
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        assert executor.global_scope() is scope is fluid.global_scope()
        fluid.Executor(fluid.CPUPlace()).run(main)
        got = executor._fetch_var("kept")
        assert got.dtype == np.int32 and got.tolist() == [1, 3, 5]
        assert isinstance(executor._fetch_var(x, return_numpy=False), fluid.LoDTensor)
        with pytest.raises(AssertionError, match="persistable"):
            executor._fetch_var("missing")
