"""fluid.dygraph's Layer classes in a static program, as Fluid 1.8 builds them: parameters
(names, shapes, initializers), the ops a call appends, the numbers they compute (against
numpy), training through them, and Fluid's argument checks."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.ops.sampled import alias_tables
from fluidity import dygraph

RNG = np.random.default_rng(0)


def _run(build, feed):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        outs, layers = build()
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    got = exe.run(main, feed=feed, fetch_list=outs, scope=scope)
    params = {p.name: np.asarray(scope.find_var(p.name).get_tensor())
              for l in layers for p in l.parameters()}
    return main, got, params


def test_linear_conv_bn_pool_layernorm_compute_as_numpy():
    x = RNG.standard_normal((2, 3, 6, 6)).astype("float32")
    v = RNG.standard_normal((2, 4, 5)).astype("float32")

    def build():
        conv = dygraph.Conv2D(3, 4, 3, padding=1, act="relu")
        pool = dygraph.Pool2D(2, "avg", 2)
        lin = dygraph.Linear(5, 3, act="tanh")          # over the last dim of a 3-D input
        ln = fluid.LayerNorm([4, 3])
        xv = fluid.data("x", [-1, 3, 6, 6], "float32")
        vv = fluid.data("v", [-1, 4, 5], "float32")
        c = conv(xv)
        return [c, pool(c), lin(vv), ln(lin(vv))], [conv, lin, ln]
    main, (c, p, l, n), params = _run(build, {"x": x, "v": v})
    w, b = params["conv2d_0.w_0"], params["conv2d_0.b_0"]
    assert w.shape == (4, 3, 3, 3) and b.shape == (4,) and not b.any()   # bias starts at 0
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros((2, 4, 6, 6), np.float32)
    for i in range(6):
        for j in range(6):
            want[:, :, i, j] = np.einsum("nchw,mchw->nm", xp[:, :, i:i + 3, j:j + 3], w)
    np.testing.assert_allclose(c, np.maximum(want + b[None, :, None, None], 0), atol=1e-5)
    np.testing.assert_allclose(p, c.reshape(2, 4, 3, 2, 3, 2).mean((3, 5)), atol=1e-6)
    wl, bl = params["linear_0.w_0"], params["linear_0.b_0"]
    np.testing.assert_allclose(l, np.tanh(v @ wl + bl), atol=1e-5)
    flat = l.reshape(2, -1)
    norm = (flat - flat.mean(1, keepdims=True)) / np.sqrt(flat.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(n, norm.reshape(l.shape), atol=1e-4)
    ops = [op.type for op in main.global_block().ops]
    assert ops[:5] == ["conv2d", "elementwise_add", "relu", "pool2d", "matmul"]
    assert "layer_norm" in ops


def test_parameters_are_named_and_registered_as_fluids():
    with fluid.program_guard(fluid.Program(), fluid.Program()), fluid.unique_name.guard():
        bn = dygraph.BatchNorm(8, moving_mean_name="mm")
        emb = dygraph.Embedding([10, 4], padding_idx=-1)
        nobias = dygraph.Linear(3, 2, bias_attr=False)
        assert nobias.bias is None and [p.name for p in nobias.parameters()] == ["linear_0.w_0"]
        assert list(bn.state_dict()) == ["weight", "bias", "_mean", "_variance"]
        assert bn._mean.name == "mm" and bn._mean.stop_gradient
        assert emb._attrs["padding_idx"] == 9
        startup = fluid.default_startup_program().global_block()
        assert {op.type for op in startup.ops} >= {"fill_constant", "uniform_random"}

        class Net(fluid.Layer):
            def __init__(self):
                super().__init__()
                self.blocks = dygraph.LayerList([dygraph.Linear(4, 4) for _ in range(2)])
                self.head = dygraph.Sequential(("fc", dygraph.Linear(4, 1)))
                self.extra = dygraph.ParameterList([self.create_parameter([2])])

            def forward(self, x):
                for blk in self.blocks:
                    x = blk(x)
                return self.head(x)
        net = Net()
        assert net.full_name() == "net_0"
        assert list(net.state_dict()) == ["blocks.0.weight", "blocks.0.bias", "blocks.1.weight",
                                          "blocks.1.bias", "head.fc.weight", "head.fc.bias",
                                          "extra.0"]
        assert len(net.parameters()) == 7 and len(net.sublayers()) == 6
        out = net(fluid.data("x", [-1, 4], "float32"))
        assert list(out.shape) == [-1, 1]
        with pytest.raises(TypeError, match="should be of type Layer"):
            net.extra = 3            # a registered sublayer is not replaced by an int
        with pytest.raises(TypeError, match="should be of type Parameter"):
            nobias.weight = 3
        del net.head
        assert "head" not in net._sub_layers


def test_a_model_of_layers_trains():
    x = RNG.standard_normal((32, 4)).astype("float32")
    y = (x @ np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32) + 0.3).astype("float32")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        lin = dygraph.Linear(4, 1)
        xv, yv = fluid.data("x", [-1, 4], "float32"), fluid.data("y", [-1, 1], "float32")
        loss = fluid.layers.mean(fluid.layers.square_error_cost(lin(xv), yv))
        fluid.optimizer.SGD(0.1).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    losses = [float(exe.run(main, feed={"x": x, "y": y}, fetch_list=[loss], scope=scope)[0])
              for _ in range(200)]
    assert losses[-1] < 1e-3 * losses[0]


def test_nce_and_custom_dist_alias_table():
    alias, probs = alias_tables([0.1, 0.2, 0.3, 0.4])
    # Walker's table reproduces the distribution: column i keeps probs[i]/n of its own
    # mass and gives the rest to alias[i]
    n, mass = 4, np.zeros(4)
    for i in range(n):
        mass[i] += probs[i] / n
        if alias[i] >= 0:
            mass[alias[i]] += (1 - probs[i]) / n
    np.testing.assert_allclose(mass, [0.1, 0.2, 0.3, 0.4], atol=1e-12)
    with fluid.program_guard(fluid.Program(), fluid.Program()), fluid.unique_name.guard():
        nce = dygraph.NCE(6, 4, num_neg_samples=3, sampler="custom_dist",
                          custom_dist=[0.1, 0.1, 0.2, 0.2, 0.2, 0.2], bias_attr=True)
        cost = nce(fluid.data("x", [-1, 4], "float32"), fluid.data("y", [-1, 1], "int64"))
        ops = [op.type for op in fluid.default_main_program().global_block().ops]
        assert ops == ["nce", "scale"] and list(cost.shape) == [-1, 1]


@pytest.mark.parametrize("call, error", [
    (lambda: dygraph.Linear(3, 2)(np.ones((2, 3), np.float32)), TypeError),
    (lambda: dygraph.Linear(3, 2)(fluid.data("i", [-1, 3], "int32")), TypeError),
    (lambda: dygraph.Embedding([5, 2])(fluid.data("f", [-1, 1], "float32")), TypeError),
    (lambda: dygraph.Conv2D(3, 4, 3, use_cudnn=1), ValueError),
    (lambda: dygraph.Conv2D(3, 4, 3, groups=2), ValueError),
    (lambda: dygraph.Pool2D(pool_type="min", pool_size=2), ValueError),
    (lambda: dygraph.Pool2D(), ValueError),
    (lambda: fluid.LayerNorm([4])(fluid.data("l", [-1, 3], "float32")), ValueError),
    (lambda: dygraph.PRelu("rows"), ValueError),
    (lambda: dygraph.NCE(5, 2, sampler="zipf"), Exception),
])
def test_bad_arguments_raise_fluids_errors(call, error):
    with fluid.program_guard(fluid.Program(), fluid.Program()), fluid.unique_name.guard():
        with pytest.raises(error):
            call()


def test_a_layer_in_the_eager_mode_is_refused_clearly():
    with fluid.dygraph.guard():
        with pytest.raises(NotImplementedError, match="eager mode .* not built"):
            dygraph.Linear(3, 2)
