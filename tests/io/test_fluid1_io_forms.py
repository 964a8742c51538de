"""fluid.io as Fluid 1.8 accepts it: parameters saved to and loaded from memory
(`save_persistables(exe, None, program)` returns bytes; `load_inference_model(None, exe,
model_bytes, params_bytes)`), `save_inference_model` given a CompiledProgram or
`export_for_deployment=False` with no feeds or targets, the auc-state warning,
`get_parameter_value(_by_name)`, and Fluid's TypeErrors for a wrong program argument."""
import os
import warnings

import numpy as np
import pytest

import fluidity as fluid

L = fluid.layers


def _model():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 11
    with fluid.program_guard(main, startup):
        x = L.data("x", [2])
        y = L.data("y", [1])
        pred = L.fc(x, 1)
        loss = L.mean(L.square_error_cost(pred, y))
    return main, startup, pred, loss


def _feed():
    return {"x": np.array([[1, 1], [1, 2], [3, 4]], "f4"), "y": np.array([[-2], [-3], [-7]], "f4")}


def test_parameters_and_a_model_round_trip_through_memory(tmp_path):
    main, startup, pred, loss = _model()
    exe, scope = fluid.Executor(), fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        want, = exe.run(main, feed=_feed(), fetch_list=[loss])
        fluid.io.save_inference_model(str(tmp_path / "m"), ["x", "y"], [loss], exe, main,
                                      model_filename="model", params_filename="params")
        pruned = main.clone()._prune_with_input(["x", "y"], [loss])
        params = fluid.io.save_persistables(exe, None, pruned)
    assert isinstance(params, bytes) and params == (tmp_path / "m" / "params").read_bytes()
    model = (tmp_path / "m" / "model").read_bytes()
    other = fluid.Scope()
    with fluid.scope_guard(other):
        prog, feeds, fetches = fluid.io.load_inference_model(None, exe, model, params)
        got, = exe.run(prog, feed=_feed(), fetch_list=fetches)
    assert feeds == ["x", "y"] and float(got) == float(want)
    with pytest.raises(ValueError, match="params cannot be None"):
        fluid.io.load_inference_model(None, exe, model, None)
    # load_vars from memory, checked against the variables
    third = fluid.Scope()
    with fluid.scope_guard(third):
        fluid.io.load_persistables(exe, None, pruned, filename=params)
        for p in pruned.all_parameters():
            np.testing.assert_array_equal(np.asarray(third.find_var(p.name).get_tensor()),
                                          np.asarray(scope.find_var(p.name).get_tensor()))
    with pytest.raises(fluid.core.EnforceNotMet):          # a truncated record
        fluid.io.load_persistables(exe, None, pruned, filename=params[:-3])


def test_save_inference_model_takes_what_fluid_takes(tmp_path):
    main, startup, pred, loss = _model()
    exe, scope = fluid.Executor(), fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        compiled = fluid.CompiledProgram(main)
        names = fluid.io.save_inference_model(str(tmp_path / "c"), ["x"], [pred], exe,
                                              compiled)
        prog, feeds, fetches = fluid.io.load_inference_model(str(tmp_path / "c"), exe)
        assert feeds == ["x"] and [v.name for v in fetches] == names
        fluid.io.save_inference_model(str(tmp_path / "whole"), [], [], exe, main,
                                      export_for_deployment=False)
    assert os.path.isfile(tmp_path / "whole" / "__model__.main_program")
    with pytest.raises(TypeError):
        fluid.io.save_inference_model([str(tmp_path), ["x"], [pred], [], compiled])


def test_saving_a_program_with_auc_warns_about_its_states(tmp_path):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [2])
        y = L.data("y", [1], dtype="int64")
        prob = L.fc(x, 2, act="softmax")
        L.auc(prob, y)
        loss = L.mean(L.cross_entropy(prob, y))
    exe, scope = fluid.Executor(), fluid.Scope()
    with fluid.scope_guard(scope), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        exe.run(startup)
        fluid.io.save_inference_model(str(tmp_path / "m"), ["x", "y"], [loss], exe, main)
    assert any("auc states to zeros" in str(m.message) for m in w)


def test_get_parameter_value_and_program_type_errors():
    main, startup, pred, loss = _model()
    exe, scope = fluid.Executor(), fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        name = [p.name for p in main.all_parameters() if p.shape == (2, 1)][0]
        w = fluid.io.get_parameter_value_by_name(name, exe, main)
        assert w.shape == (2, 1)
        np.testing.assert_array_equal(
            w, fluid.io.get_parameter_value(main.global_block().var(name), exe))
    for bad in ("program", fluid.CompiledProgram(main).__class__.__new__(
            fluid.CompiledProgram)):
        if isinstance(bad, fluid.CompiledProgram):
            bad._program = None
        with pytest.raises(TypeError):
            fluid.io._get_valid_program(bad)
    with pytest.raises(TypeError):
        fluid.io.load_vars(exe, "./nowhere", main_program="program")
    with pytest.raises(TypeError):
        fluid.io.load_vars(exe, "./nowhere", main_program="program", vars="vars")
