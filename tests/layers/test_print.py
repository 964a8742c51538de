"""fluid.layers.Print: the print op shows a tensor from inside a run, forward and backward."""
import numpy as np

import fluidity as fluid


def test_print_shows_name_lod_shape_values_and_the_gradient(capfd):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [2], lod_level=1, stop_gradient=False)
        shown = fluid.layers.Print(x, message="the input", summarize=3, first_n=2)
        w = fluid.layers.fc(shown, 1)
        loss = fluid.layers.mean(w)
        fluid.backward.append_backward(loss)
    exe = fluid.Executor()
    exe.run(startup)
    t = fluid.create_lod_tensor(np.arange(6, dtype=np.float32).reshape(3, 2), [[2, 1]])
    for _ in range(3):
        (out,) = exe.run(main, feed={"x": t}, fetch_list=[shown], return_numpy=False)
    err = capfd.readouterr().err
    np.testing.assert_array_equal(np.asarray(out), np.asarray(t))
    assert err.count("the input") == 4                # first_n=2: forward + backward, twice
    assert "Variable: x\n" in err and "  - lod: {{0, 2, 3}}" in err
    assert "  - shape: [3, 2]" in err and "  - dtype: float32" in err
    assert "  - data: [0.0 1.0 2.0 ...]" in err
    assert "Variable: " + shown.name + "@GRAD" in err


def test_print_phase_forward_only(capfd):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [2], stop_gradient=False)
        shown = fluid.layers.Print(x, print_phase="forward", print_tensor_lod=False,
                                   summarize=-1)
        loss = fluid.layers.mean(fluid.layers.fc(shown, 1))
        fluid.backward.append_backward(loss)
    exe = fluid.Executor()
    exe.run(startup)
    exe.run(main, feed={"x": np.ones((2, 2), np.float32)}, fetch_list=[loss])
    err = capfd.readouterr().err
    assert err.count("Variable:") == 1 and "lod" not in err
    assert "  - data: [1.0 1.0 1.0 1.0]" in err
