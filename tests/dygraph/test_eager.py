"""The eager mode (fluid.dygraph.guard): ops run as they are appended, and backward() gives
the gradients the static program's backward gives."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.backward import append_backward
from fluidity.errors import FluidityError

RNG = np.random.RandomState(7)
X = RNG.uniform(-1, 1, (3, 4))
Y = RNG.uniform(-1, 1, (4, 5))
B = RNG.uniform(-1, 1, (5,))


def _eager():
    """mean(tanh(X @ Y + B)) built op by op in the eager mode: values and gradients."""
    with fluid.dygraph.guard(fluid.CPUPlace()):
        assert fluid.in_dygraph_mode() and fluid.dygraph.enabled()
        block = fluid.default_main_program().global_block()
        x, y, b = (fluid.dygraph.to_variable(v) for v in (X, Y, B))
        for v in (x, y, b):
            v.stop_gradient = False
        mm = block.create_var(dtype="float64", stop_gradient=False)
        block.append_op(type="mul", inputs={"X": [x], "Y": [y]}, outputs={"Out": [mm]})
        assert mm.shape == (3, 5)            # the value's shape, at once
        s = block.create_var(dtype="float64", stop_gradient=False)
        block.append_op(type="elementwise_add", inputs={"X": mm, "Y": b},
                        outputs={"Out": s}, attrs={"axis": 1})
        t = block.create_var(dtype="float64", stop_gradient=False)
        block.append_op(type="tanh", inputs={"X": s}, outputs={"Out": t})
        loss = block.create_var(dtype="float64", shape=[1], stop_gradient=False)
        block.append_op(type="mean", inputs={"X": t}, outputs={"Out": loss})
        out = t.numpy()
        loss.backward()
        return out, float(loss.numpy()), [v.gradient() for v in (x, y, b)], (x, y, b, loss)
    assert not fluid.in_dygraph_mode()


def _static():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        vs = [fluid.layers.data(n, list(a.shape), dtype="float64", append_batch_size=False)
              for n, a in (("x", X), ("y", Y), ("b", B))]
        for v in vs:
            v.stop_gradient = False
        t = fluid.layers.tanh(fluid.layers.elementwise_add(fluid.layers.mul(vs[0], vs[1]),
                                                            vs[2], axis=1))
        loss = fluid.layers.mean(t)
        grads = [g for _, g in append_backward(loss, parameter_list=[v.name for v in vs])]
    exe = fluid.Executor(fluid.CPUPlace())
    return exe.run(main, feed={"x": X, "y": Y, "b": B}, fetch_list=[t, loss] + grads)


def test_forward_and_gradients_equal_the_static_programs():
    out, loss, grads, _ = _eager()
    t, sloss, *sgrads = _static()
    np.testing.assert_array_equal(out, t)
    np.testing.assert_array_equal(np.reshape(loss, -1), np.reshape(sloss, -1))
    for g, sg in zip(grads, sgrads):
        np.testing.assert_array_equal(g, sg)
    np.testing.assert_allclose(out, np.tanh(X @ Y + B))
    # d mean(tanh(z)) / dB = mean over rows of (1 - tanh^2) / n
    np.testing.assert_allclose(grads[2], ((1 - out ** 2) / out.size).sum(0))


def test_gradients_accumulate_over_backward_calls_until_cleared():
    with fluid.dygraph.guard():
        block = fluid.default_main_program().global_block()
        x = fluid.dygraph.to_variable(X)
        x.stop_gradient = False
        for _ in range(2):
            sq = block.create_var(dtype="float64", stop_gradient=False)
            block.append_op(type="square", inputs={"X": x}, outputs={"Out": sq})
            loss = block.create_var(dtype="float64", stop_gradient=False)
            block.append_op(type="mean", inputs={"X": sq}, outputs={"Out": loss})
            loss.backward()
        np.testing.assert_allclose(x.gradient(), 2 * (2 * X / X.size))
        x.clear_gradient()
        np.testing.assert_array_equal(x.gradient(), np.zeros_like(X))


def test_lod_values_and_their_levels_reach_the_op():
    with fluid.dygraph.guard():
        block = fluid.default_main_program().global_block()
        x = fluid.dygraph.to_variable(np.arange(10, dtype="float32").reshape(5, 2))
        x.value().get_tensor().set_recursive_sequence_lengths([[2, 3]])
        out = block.create_var(dtype="float32")
        block.append_op(type="sequence_pool", inputs={"X": x},
                        outputs={"Out": out, "MaxIndex": block.create_var(dtype="int32")},
                        attrs={"pooltype": "SUM"})
        np.testing.assert_array_equal(out.numpy(), [[2, 4], [18, 21]])


def test_values_are_shared_or_copied_as_asked_and_names_start_afresh():
    a = np.zeros((2,), "float32")
    with fluid.dygraph.guard():
        shared = fluid.dygraph.to_variable(a, zero_copy=True)
        copied = fluid.dygraph.to_variable(a)
        name = shared.name
        a[0] = 5
        assert shared.numpy()[0] == 5 and copied.numpy()[0] == 0
        assert shared.stop_gradient and fluid.dygraph.to_variable(shared) is shared
    with fluid.dygraph.guard():
        assert fluid.dygraph.to_variable(a).name == name


def test_misuse_raises_clear_errors():
    with pytest.raises(FluidityError, match="dygraph mode"):
        fluid.dygraph.to_variable(np.ones(2))
    with fluid.dygraph.guard():
        with pytest.raises(TypeError, match="numpy.ndarray"):
            fluid.dygraph.to_variable([1, 2])
        x = fluid.dygraph.to_variable(np.ones((2, 2)))
        with pytest.raises(FluidityError, match="stop_gradient"):
            x.backward()
        x.stop_gradient = False
        with pytest.raises(FluidityError, match="one value"):
            x.backward()
        empty = fluid.default_main_program().global_block().create_var(dtype="float32")
        with pytest.raises(FluidityError, match="holds no value"):
            empty.numpy()
    with pytest.raises(FluidityError, match="CPU"):
        with fluid.dygraph.guard(fluid.CUDAPlace(0)):
            pass


def test_the_dygraph_framework_is_declined_by_name():
    with pytest.raises(NotImplementedError, match="dygraph.NoamDecay is not built"):
        fluid.dygraph.NoamDecay(16, 100)
    with pytest.raises(NotImplementedError, match="not built"):
        fluid.dygraph.no_grad()
