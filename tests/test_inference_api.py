"""Paddle's Python inference API (fluid.core.PaddleTensor / PaddleBuf / NativeConfig) run as
Fluid 1.8's book chapters run it: a saved inference model, a CompiledProgram made for
inference, a list of PaddleTensors fed, PaddleTensors fetched."""
import numpy as np
import pytest

import fluidity as fluid


@pytest.fixture
def saved(tmp_path):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        ids = fluid.data("ids", [-1, 1], "int64", lod_level=1)
        x = fluid.data("x", [-1, 3], "float32")
        emb = fluid.layers.embedding(ids, size=[10, 3])
        pooled = fluid.layers.sequence_pool(emb, "sum")
        y = fluid.layers.fc(fluid.layers.concat([pooled, x], axis=1), 2)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    with fluid.scope_guard(scope):
        fluid.io.save_inference_model(str(tmp_path), ["ids", "x"], [y], exe, main)
    return str(tmp_path)


def test_a_predictor_run_equals_the_executors(saved):
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    with fluid.scope_guard(scope):
        program, feeds, fetches = fluid.io.load_inference_model(saved, exe)
        ids = fluid.create_lod_tensor(np.array([[1], [4], [2]], "int64"), [[2, 1]],
                                      fluid.CPUPlace())
        x = np.arange(6, dtype="float32").reshape(2, 3)
        want = exe.run(program, feed={"ids": ids, "x": x}, fetch_list=fetches,
                       return_numpy=False)
        t_ids = fluid.core.PaddleTensor()
        t_ids.lod = ids.lod()
        t_ids.data = fluid.core.PaddleBuf(np.array(ids))
        t_ids.shape = ids.shape()
        t_ids.dtype = fluid.core.PaddleDType.INT64
        t_x = fluid.core.PaddleTensor(x)
        config = fluid.core.NativeConfig()
        config.model_dir = saved
        compiled = fluid.compiler.CompiledProgram(program)
        compiled._with_inference_optimize(config)
        assert compiled._is_inference is True
        (out,) = exe.run(compiled, feed=[t_ids, t_x])
    assert isinstance(out, fluid.core.PaddleTensor) and out.shape == [2, 2]
    assert out.dtype == fluid.core.PaddleDType.FLOAT32
    np.testing.assert_array_equal(np.array(out.data.float_data(), "float32"),
                                  np.array(want[0]).ravel())
    np.testing.assert_array_equal(out.as_ndarray(), np.array(want[0]))


def test_a_predictor_names_what_it_was_given_wrong(saved):
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    with fluid.scope_guard(scope):
        program, _, _ = fluid.io.load_inference_model(saved, exe)
        compiled = fluid.compiler.CompiledProgram(program)._with_inference_optimize(
            fluid.core.AnalysisConfig(saved))
        with pytest.raises(fluid.errors.FeedError, match=r"2 feed target\(s\) \['ids', 'x'\], "
                                                         r"given 1 PaddleTensor"):
            exe.run(compiled, feed=[fluid.core.PaddleTensor(np.zeros((1, 3), "float32"))])
        bad = fluid.core.PaddleTensor(np.zeros((2, 3), "float32"), name="x")
        bad.shape = [1 << 40, 1 << 40]          # a shape the data does not hold
        with pytest.raises(fluid.errors.FeedError, match=r"PaddleTensor 'x': shape "):
            exe.run(compiled, feed=[fluid.core.PaddleTensor(np.array([[1]], "int64"),
                                                            lod=[[0, 1]]), bad])
        with pytest.raises(TypeError, match="list of fluid.core.PaddleTensor"):
            exe.run(compiled, feed=[np.zeros((1, 3), "float32"), 1])
