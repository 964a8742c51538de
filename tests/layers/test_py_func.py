"""py_func: a Python function as an op, forward and backward, built as Fluid programs do."""
import numpy as np
import pytest

import fluidity as fluid

L = fluid.layers


def test_py_func_forward_and_backward_train():
    def tanh(x):
        return np.tanh(np.array(x))

    def tanh_grad(y, dy):          # x is skipped: the grad sees Out and Out@GRAD
        return np.array(dy) * (1 - np.square(np.array(y)))

    x = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup):
        xv = L.data("x", [3])
        h = L.fc(xv, 3)
        out = main.current_block().create_var(name="pyout", dtype="float32", shape=h.shape)
        L.py_func(tanh, h, out, backward_func=tanh_grad, skip_vars_in_backward_input=h)
        loss = L.mean(L.square(out))
        fluid.optimizer.SGD(0.5).minimize(loss)
        ref = L.tanh(h)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    got, want = exe.run(main, feed={"x": x}, fetch_list=[out, ref])
    np.testing.assert_allclose(got, want, rtol=1e-6)
    losses = [float(np.asarray(exe.run(main, feed={"x": x}, fetch_list=[loss])[0]).reshape(-1)[0])
              for _ in range(10)]
    assert losses[-1] < losses[0]


def test_py_func_with_no_output_and_bad_arguments():
    seen = []
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xv = L.data("x", [2])
        L.py_func(lambda t: seen.append(np.array(t).sum()), xv, None)
    fluid.Executor().run(main, feed={"x": np.ones((3, 2), np.float32)})
    assert seen == [6.0]
    with pytest.raises(TypeError, match="py_func: 'func' must be callable"):
        L.py_func(None, xv, None)
