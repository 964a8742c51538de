"""`fluid.gradients` / `calc_gradient` as Fluid 1.8's: right for repeated calls on one
program (a later pass never overwrites an earlier gradient: it renames its own) and for
higher orders (a second-order gradient includes the first gradient's dependence on x),
checked against central finite differences in float64; the argument checks (TypeError),
and an error naming the op where a higher-order gradient would need a rule that is not
built (never a gradient that silently leaves that path out)."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.backward import calc_gradient

L = fluid.layers
EPS = 1e-6


def _program():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 7
    return main, startup


def _x(shape=(3, 4), seed=0):
    return np.random.default_rng(seed).uniform(-1.0, 1.0, shape)


def _run(main, startup, x, fetch):
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    return exe.run(main, feed={"x": x}, fetch_list=fetch, scope=scope)


def _numeric(f, x):
    """Central differences of scalar f at x, element by element (error O(EPS^2 f''') plus
    rounding O(1e-16 |f| / EPS), both far below the 1e-6 the tests allow)."""
    g = np.zeros_like(x)
    for i in np.ndindex(*x.shape):
        hi, lo = x.copy(), x.copy()
        hi[i] += EPS
        lo[i] -= EPS
        g[i] = (f(hi) - f(lo)) / (2 * EPS)
    return g


def _net(x, w, c):
    """A scalar built from ops with first and second-order gradients:
    mean(square(relu(x @ w + 0.5) * c)) + reduce_sum(x * x)."""
    h = L.relu(L.elementwise_add(L.mul(x, w), L.fill_constant([1], "float64", 0.5)))
    return L.mean(L.square(L.elementwise_mul(h, c))) + L.reduce_sum(x * x)


def _build(order):
    main, startup = _program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [3, 4], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        w = L.create_parameter([4, 5], "float64", name="w",
                               default_initializer=fluid.initializer.Uniform(-1, 1, seed=3))
        c = L.create_parameter([5], "float64", name="c",
                               default_initializer=fluid.initializer.Uniform(0.5, 1.5,
                                                                              seed=4))
        f = _net(x, w, c)
        g, = fluid.gradients(f, x)
        outs = [f, g]
        if order == 2:
            k = L.create_parameter([3, 4], "float64", name="k",
                                   default_initializer=fluid.initializer.Uniform(-1, 1,
                                                                                  seed=5))
            s = L.reduce_sum(L.elementwise_mul(g, g) * k)     # s(x) = sum(k * g(x)^2)
            h, = fluid.gradients(s, x)
            outs += [s, h]
    return main, startup, outs


def test_first_order_gradient_matches_finite_differences():
    main, startup, (f, g) = _build(1)
    x = _x()
    got = _run(main, startup, x, [g])[0]
    want = _numeric(lambda v: float(_run(main, startup, v, [f])[0]), x)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_second_order_gradient_matches_finite_differences_of_the_first():
    main, startup, (f, g, s, h) = _build(2)
    assert h.name != g.name and g.name == "x@GRAD"      # the second pass renamed its own
    x = _x()
    got_g, got_h = _run(main, startup, x, [g, h])
    want_g = _numeric(lambda v: float(_run(main, startup, v, [f])[0]), x)
    np.testing.assert_allclose(got_g, want_g, rtol=1e-6, atol=1e-7)   # not overwritten
    want_h = _numeric(lambda v: float(_run(main, startup, v, [s])[0]), x)
    np.testing.assert_allclose(got_h, want_h, rtol=1e-6, atol=1e-7)


def test_repeated_calls_keep_each_gradient():
    main, startup = _program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [3], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        y1 = L.reduce_sum(x * x)                 # dy1/dx = 2x
        y2 = L.reduce_sum(x * 3.0)               # dy2/dx = 3
        g1 = calc_gradient(y1, x)                # one input: the gradient itself
        g2 = calc_gradient(y2, x)
        g3, = fluid.gradients([y1, y2], [x])     # of the sum: 2x + 3
    assert len({g1.name, g2.name, g3.name}) == 3
    xv = np.array([1.0, -2.0, 0.5])
    a, b, c = _run(main, startup, xv, [g1, g2, g3])
    np.testing.assert_allclose(a, 2 * xv)
    np.testing.assert_allclose(b, [3.0, 3.0, 3.0])
    np.testing.assert_allclose(c, 2 * xv + 3)


@pytest.mark.parametrize("start, want_g, want_h", [(3.0, 6.0, 6.0), (1.0, 2.0, 12.0)])
def test_a_gradient_of_an_expression_holding_a_gradient(start, want_g, want_h):
    """x = start; g = d(x*x)/dx = 2x; h = d((x - g)^2)/dx = 2x (at 3: 6), or
    h = d(g*g + (x*x)^2)/dx = 8x + 4x^3 (at 1: 12)."""
    main, startup = _program()
    with fluid.program_guard(main, startup):
        x = L.create_parameter([1], "float32", name="x",
                               default_initializer=fluid.initializer.Constant(start))
        y = x * x
        g, = fluid.gradients(y, x)
        z = (x - g) * (x - g) if start == 3.0 else g * g + y * y
        h, = fluid.gradients(z, x)
    exe = fluid.Executor()
    exe.run(startup)
    got_g, got_h = exe.run(main, fetch_list=[g, h])
    assert float(got_g) == want_g and float(got_h) == want_h


def test_a_gradient_through_a_grad_op_without_a_rule_is_an_error():
    main, startup = _program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [3], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        g, = fluid.gradients(L.reduce_sum(L.tanh(x)), x)
        with pytest.raises(fluid.core.EnforceNotMet, match="'tanh_grad'") as e:
            fluid.gradients(L.reduce_sum(g), x)
    assert isinstance(e.value, NotImplementedError)
    # the first gradient is still right
    xv = np.array([0.1, -0.4, 2.0])
    np.testing.assert_allclose(_run(main, startup, xv, [g])[0], 1 - np.tanh(xv) ** 2)


def test_a_batch_sized_target_is_seeded_with_its_fed_shape():
    main, startup = _program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [4], dtype="float64")        # [-1, 4]
        x.stop_gradient = False
        y = x * x
        g, = fluid.gradients(y, x)                   # seed: ones shaped as y at run time
    xv = _x((5, 4))
    np.testing.assert_allclose(_run(main, startup, xv, [g])[0], 2 * xv)


def test_argument_types_are_checked():
    main, startup = _program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [4], dtype="float32")
        x.stop_gradient = False
        y = L.relu(x)
        for bad in (dict(targets=y.name, inputs=x), dict(targets=y, inputs=x.name),
                    dict(targets=[y], inputs=[x], target_gradients=x.name),
                    dict(targets=[y], inputs=x, no_grad_set=y)):
            with pytest.raises(TypeError):
                fluid.gradients(**bad)
        with pytest.raises(ValueError, match="shapes of target and grad"):
            fluid.gradients([y], [x], target_gradients=[L.fill_constant([2], "float32", 1)])
        with pytest.raises(TypeError):
            fluid.backward.append_backward(y.name)
        with pytest.raises(TypeError):
            fluid.backward.append_backward(L.mean(y), parameter_list="w")
        with pytest.raises(TypeError):
            fluid.backward.append_backward(L.mean(y), callbacks=lambda *a: None)


@pytest.mark.parametrize("rearrange", [
    lambda v: L.reshape(v, [4, 3]),
    lambda v: L.reshape(v, [-1, 3], actual_shape=L.assign(np.array([4, 3], "int32"))),
    lambda v: L.slice(v, axes=[0, 1], starts=[1, 0], ends=[3, 3]),
    lambda v: L.transpose(v, [1, 0]),
    lambda v: L.unsqueeze(v, [0]),
])
def test_second_order_through_reshape_slice_and_other_rearrangements(rearrange):
    """g = d/dx sum(c * r(x)^3) is 3 c r(x)^2 carried back through r's grad op; the second
    pass differentiates that grad op (linear in its Out@GRAD: the forward op applied to
    ddX), checked against finite differences of the first gradient."""
    main, startup = _program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [3, 4], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        r = rearrange(x)
        c = L.create_parameter(r.shape, "float64", name="c",
                               default_initializer=fluid.initializer.Uniform(0.5, 1.5, seed=4))
        f = L.reduce_sum(L.elementwise_mul(L.elementwise_mul(L.square(r), r), c))
        g, = fluid.gradients(f, x)
        k = L.create_parameter([3, 4], "float64", name="k",
                               default_initializer=fluid.initializer.Uniform(-1, 1, seed=5))
        s = L.reduce_sum(L.elementwise_mul(g, k))
        h, = fluid.gradients(s, x)
    x0 = _x()
    got = _run(main, startup, x0, [h])[0]
    want = _numeric(lambda v: float(_run(main, startup, v, [s])[0]), x0)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("act, positive", [(lambda v: L.sqrt(v), True),
                                           (lambda v: L.elu(v, alpha=0.7), False)])
def test_second_order_through_sqrt_and_elu(act, positive):
    """sqrt_grad_grad and elu_grad_grad (Paddle's double-grad ops) against finite
    differences of the first gradient; x spans both sides of elu's kink (sqrt of x^2+0.5)."""
    main, startup = _program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [3, 4], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        u = L.elementwise_add(L.square(x), L.fill_constant([1], "float64", 0.5)) \
            if positive else x
        c = L.create_parameter([3, 4], "float64", name="c",
                               default_initializer=fluid.initializer.Uniform(0.5, 1.5, seed=4))
        f = L.reduce_sum(L.elementwise_mul(L.square(act(u)), c))
        g, = fluid.gradients(f, x)
        k = L.create_parameter([3, 4], "float64", name="k",
                               default_initializer=fluid.initializer.Uniform(-1, 1, seed=5))
        s = L.reduce_sum(L.elementwise_mul(g, k))
        h, = fluid.gradients(s, x)
    x0 = _x()
    got = _run(main, startup, x0, [h])[0]
    want = _numeric(lambda v: float(_run(main, startup, v, [s])[0]), x0)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("y_shape", [(3, 4), (4,)])
def test_second_order_through_elementwise_div(y_shape):
    """elementwise_div_grad_grad (Paddle's) against finite differences of the first
    gradient, with respect to X and to Y, Y full-sized or broadcast along X's rows."""
    main, startup = _program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [3, 4], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        y = L.create_parameter(list(y_shape), "float64", name="y",
                               default_initializer=fluid.initializer.Uniform(1.0, 2.0, seed=6))
        q = L.elementwise_div(x, y)
        f = L.reduce_sum(L.elementwise_mul(L.square(q), q))
        gx, gy = fluid.gradients(f, [x, y])
        k = L.create_parameter([3, 4], "float64", name="k",
                               default_initializer=fluid.initializer.Uniform(-1, 1, seed=5))
        s = L.reduce_sum(L.elementwise_mul(gx, k)) + L.reduce_sum(gy)
        h, = fluid.gradients(s, x)
    x0 = _x()
    got = _run(main, startup, x0, [h])[0]
    want = _numeric(lambda v: float(_run(main, startup, v, [s])[0]), x0)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_second_order_through_conv2d():
    """conv2d's grad op is bilinear in Input and Filter (Paddle's conv2d_grad_grad): the
    second gradient of sum(k * dF/dx) for F = sum(conv(x, w)^2), against finite differences."""
    main, startup = _program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [1, 2, 4, 4], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        y = L.conv2d(x, 3, 3, stride=1, padding=1, bias_attr=False,
                     param_attr=fluid.ParamAttr(
                         initializer=fluid.initializer.Uniform(-1, 1, seed=3)))
        f = L.reduce_sum(L.square(y))
        g, = fluid.gradients(f, x)
        k = L.create_parameter([1, 2, 4, 4], "float64", name="k",
                               default_initializer=fluid.initializer.Uniform(-1, 1, seed=5))
        s = L.reduce_sum(L.elementwise_mul(g, k))
        h, = fluid.gradients(s, x)
    x0 = _x((1, 2, 4, 4))
    got = _run(main, startup, x0, [h])[0]
    want = _numeric(lambda v: float(_run(main, startup, v, [s])[0]), x0)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
