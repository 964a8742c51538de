"""Python operators on Variables build the ops Fluid builds: arithmetic (scale for a number
on the right), floor division, modulo, reversed power, and comparisons giving bool
Variables; == stays identity (Variables are dict keys)."""
import numpy as np

import fluidity as fluid


def run(fn, feed):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [3], dtype="float32")
        y = fluid.layers.data("y", [3], dtype="float32")
        outs = fn(x, y)
    got = fluid.Executor().run(main, feed=feed, fetch_list=outs, scope=fluid.Scope())
    return outs, got


def test_operators_build_the_ops_numpy_agrees_with():
    a = np.array([[1.0, -2.0, 3.0], [4.0, 5.5, -6.0]], "float32")
    b = np.array([[2.0, -2.0, 1.0], [-4.0, 5.0, 7.0]], "float32")
    outs, got = run(lambda x, y: [x + y, x - 1.0, 2.0 - x, x * y, x / y, x // y, x % y,
                                  2.0 ** x, x < y, x <= y, x > y, x >= y, x > 0.5],
                    {"x": a, "y": b})
    want = [a + b, a - 1, 2 - a, a * b, a / b, a // b, a % b, 2.0 ** a, a < b, a <= b, a > b,
            a >= b, a > 0.5]
    for o, g, w in zip(outs, got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, err_msg=o.name)
    assert [str(o.dtype) for o in outs[-5:]] == [str(outs[-1].dtype)] * 5
    assert got[-1].dtype == np.bool_


def test_equality_is_identity():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data("x", [3], dtype="float32")
        assert x == x and {x: 1}[x] == 1
