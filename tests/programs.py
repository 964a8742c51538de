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
