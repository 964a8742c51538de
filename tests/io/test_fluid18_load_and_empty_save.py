"""Fluid 1.8's `layers.load` into a variable declared without dims (it takes the file's
shape; a variable declared with dims must still match), and `save_inference_model` of a
model without parameters (Fluid's warning, no parameter file)."""
import os
import warnings

import numpy as np
import pytest

import fluidity as fluid

L = fluid.layers


def _save_w(tmp_path):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 4])
        L.fc(x, 4, param_attr=fluid.ParamAttr(
            name="w", initializer=fluid.initializer.NumpyArrayInitializer(
                np.arange(16, dtype="f4").reshape(4, 4))))
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    fluid.io.save_persistables(exe, str(tmp_path), main_program=main)
    return os.path.join(str(tmp_path), "w")


def test_load_gives_an_undimensioned_variable_the_file_shape(tmp_path):
    with fluid.scope_guard(fluid.Scope()):
        path = _save_w(tmp_path)
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup):
            var = L.create_tensor(dtype="float32")
            L.load(var, file_path=path)
        out, = fluid.Executor(fluid.CPUPlace()).run(main, fetch_list=[var.name])
    np.testing.assert_array_equal(out, np.arange(16, dtype="f4").reshape(4, 4))


def test_load_into_declared_dims_still_checks_them(tmp_path):
    with fluid.scope_guard(fluid.Scope()):
        path = _save_w(tmp_path)
        main = fluid.Program()
        with fluid.program_guard(main, fluid.Program()):
            var = main.global_block().create_var(name="v", shape=[2, 8], dtype="float32")
            L.load(var, file_path=path)
        with pytest.raises(fluid.errors.ExecutionError, match="file holds float32\\[4, 4\\]"):
            fluid.Executor(fluid.CPUPlace()).run(main, fetch_list=[var.name])


def test_saving_a_model_without_parameters_warns(tmp_path):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        data = L.data("data", [-1, 1], append_batch_size=False)
        plus = data + 1
    exe = fluid.Executor(fluid.CPUPlace())
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        fluid.io.save_inference_model(str(tmp_path), ["data"], [plus], exe, main_program=main,
                                      model_filename="model", params_filename="params")
    assert [str(m.message) for m in w] == [
        "no variable in your model, please ensure there are any variables in your model "
        "to save"]
    assert os.path.exists(tmp_path / "model") and not os.path.exists(tmp_path / "params")
