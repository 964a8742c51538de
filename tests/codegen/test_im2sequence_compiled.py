"""im2sequence compiled: its rows and the LoD it computes (one sequence of L patches per
image) are the interpreter's, for any batch; with Y (real image sizes) it runs interpreted."""
import numpy as np

import fluidity as fluid

from op_test import build_op, compiled_ops


def test_im2sequence_rows_and_lod_are_the_interpreters():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [2, 5, 4])
        out = fluid.layers.im2sequence(x, filter_size=[2, 3], stride=[2, 1], padding=[1, 0])
    assert "im2sequence" in compiled_ops(main)
    exe = fluid.Executor()
    compiled = fluid.CompiledProgram(main).with_native_code()
    for n in (1, 3):
        feed = {"x": np.random.default_rng(n).normal(size=(n, 2, 5, 4)).astype("float32")}
        want, = exe.run(main, feed=feed, fetch_list=[out], return_numpy=False,
                        scope=fluid.Scope())
        got, = exe.run(compiled, feed=feed, fetch_list=[out], return_numpy=False,
                       scope=fluid.Scope())
        np.testing.assert_array_equal(np.array(got), np.array(want))
        assert got.lod() == want.lod()


def test_im2sequence_with_real_sizes_runs_interpreted():
    main, _, _, _, _ = build_op(
        "im2sequence", {"X": np.zeros((2, 1, 4, 4), np.float32),
                        "Y": np.array([[4, 4], [2, 3]], np.int32)},
        {"kernels": [2, 2], "strides": [1, 1]}, ["Out"])
    assert "im2sequence" not in compiled_ops(main)
