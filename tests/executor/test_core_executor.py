"""fluid.core.Executor: a block of a ProgramDesc run in a scope, with Fluid 1.8's eager
deletion of temporaries when the run keeps its variables in the caller's scope."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity import core


@pytest.fixture
def eager_deletion():
    before = fluid.get_flags(["FLAGS_eager_delete_tensor_gb"])
    yield
    fluid.set_flags(before)


def _net():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [3])
        h = fluid.layers.fc(x, 4, act="tanh")
        loss = fluid.layers.mean(h)
        fluid.optimizer.SGD(0.5).minimize(loss)
    return main, startup, loss


def _run(create_local_scope, keep):
    main, startup, loss = _net()
    scope = fluid.Scope()
    fluid.Executor().run(startup, scope=scope)
    w0 = np.array(scope.find_var("fc_0.w_0").get_tensor())
    scope.var("x").get_tensor().set(np.ones((2, 3), "float32"), fluid.CPUPlace())
    place = core.Place()
    place.set_place(fluid.CPUPlace())
    core.Executor(place).run(main.desc, scope, 0, create_local_scope, True, keep)
    return main, scope, loss, w0


def test_run_trains_and_frees_the_temporaries_it_kept_in_the_scope(eager_deletion):
    core._set_eager_deletion_mode(0.0, 1.0, True)
    main, scope, loss, w0 = _run(False, [])
    w1 = np.array(scope.find_var("fc_0.w_0").get_tensor())
    # SGD on mean(tanh(x W + b)) with x = ones: dW[i, j] = mean over the batch of
    # (1 - h^2) / 4, the same for every row i
    h = np.tanh(np.ones((2, 3), "float32") @ w0 + 0.0)
    np.testing.assert_allclose(w1, w0 - 0.5 * np.tile(((1 - h * h) / 4).sum(0) / 2, (3, 1)),
                               rtol=1e-5, atol=1e-6)
    for name, var in main.global_block().vars.items():
        held = scope.find_var(name)
        assert held is not None, name           # create_vars: every variable exists
        assert held.get_tensor()._is_initialized() == var.persistable, name


def test_fetch_vars_are_kept_and_collection_can_be_turned_off(eager_deletion):
    core._set_eager_deletion_mode(0.0, 1.0, True)
    _, scope, loss, _ = _run(False, ["mean_0.tmp_0"])
    assert loss.name == "mean_0.tmp_0"
    assert scope.find_var(loss.name).get_tensor()._is_initialized()
    assert not scope.find_var("fc_0.tmp_2").get_tensor()._is_initialized()
    core._set_eager_deletion_mode(-1, -1, False)
    assert fluid.get_flags(["FLAGS_eager_delete_tensor_gb"]) == \
        {"FLAGS_eager_delete_tensor_gb": -1.0}
    _, scope, _, _ = _run(False, [])
    assert scope.find_var("fc_0.tmp_2").get_tensor()._is_initialized()


def test_local_scope_takes_the_temporaries_and_bad_input_is_refused():
    main, startup, _ = _net()
    scope = fluid.Scope()
    core.Executor(fluid.CPUPlace()).run(startup.desc, scope, 0, True, True, [])
    assert np.array(scope.find_var("fc_0.w_0").get_tensor()).shape == (3, 4)
    assert scope.find_var("fc_0.tmp_2") is None and not scope.kids()
    with pytest.raises(TypeError, match="expected a place"):
        core.Executor("cpu")
    with pytest.raises(IndexError, match="block_id 3"):
        core.Executor(fluid.CPUPlace()).run(main.desc, scope, 3, True, True, [])


def test_compiled_program_local_scopes_as_fluid():
    main, _, loss = _net()
    prog = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
    assert prog._local_scopes == []
