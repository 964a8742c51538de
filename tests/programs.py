"""Small programs that tests in several folders build the same way."""
import fluidity as fluid


def doubling_while(steps=2, fed_x=True):
    """A `while` loop that doubles x `steps` times (x fed as data [3], or a constant 1.0 [1]);
    returns (main, startup, x)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [3]) if fed_x else \
            fluid.layers.fill_constant([1], "float32", 1.0)
        i = fluid.layers.fill_constant([1], "int64", 0)
        n = fluid.layers.fill_constant([1], "int64", steps)
        cond = fluid.layers.less_than(i, n)
        loop = fluid.layers.While(cond)
        with loop.block():
            fluid.layers.assign(fluid.layers.scale(x, 2.0), x)
            fluid.layers.increment(i, in_place=True)
            fluid.layers.less_than(i, n, cond=cond)
    return main, startup, x


def counting_while(n, body):
    """A counting While (in the current program) running body(i) for i in 0..n-1 (n an int
    or an int64 [1] Variable); returns the counter."""
    L = fluid.layers
    i = L.fill_constant([1], "int64", 0)
    n = n if isinstance(n, fluid.framework.Variable) else L.fill_constant([1], "int64", n)
    c = L.less_than(i, n)
    w = L.While(c)
    with w.block():
        body(i)
        L.increment(i, in_place=True)
        L.less_than(i, n, cond=c)
    return i
