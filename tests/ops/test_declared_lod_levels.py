"""Ops whose output keeps an input's LoD declare that input's LoD level at build time (what
Fluid's OpTest compares with the fetched value's)."""
import numpy as np

import fluidity as fluid


def test_cvm_output_declares_the_lod_level_it_gets():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", [5], lod_level=1)
        cvm = fluid.layers.data("cvm", [2])
        block = main.global_block()
        y = block.create_var(name="y", dtype="float32")
        block.append_op(type="cvm", inputs={"X": x, "CVM": cvm}, outputs={"Y": y})
    assert y.lod_level == 1
    t = fluid.create_lod_tensor(np.abs(np.random.RandomState(0).rand(3, 5)).astype("float32"),
                                [[1, 2]], fluid.CPUPlace())
    (out,) = fluid.Executor(fluid.CPUPlace()).run(
        main, feed={"x": t, "cvm": np.ones((3, 2), "float32")}, fetch_list=[y],
        return_numpy=False)
    assert out.recursive_sequence_lengths() == [[1, 2]]


def _run_lod(build, rows=5):
    """Run `build(x)` over a LoD input x [rows, 4] with sequence lengths [2, rows - 2]; the
    fetched LoDTensors of its outputs."""
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [None, 4], "float32", lod_level=1)
        outs = build(x)
    t = fluid.create_lod_tensor(np.arange(rows * 4, dtype="float32").reshape(rows, 4),
                                [[2, rows - 2]], fluid.CPUPlace())
    got = fluid.Executor().run(main, feed={"x": t}, fetch_list=outs, return_numpy=False,
                               scope=fluid.Scope())
    return outs, got


def test_expand_keeps_the_lod_when_it_keeps_the_rows():
    """Fluid 1.8's expand shares X's LoD when Out's first dim is X's (GRU4Rec's
    expand -> sequence_reshape); expanding the rows drops it."""
    outs, (cols, rows) = _run_lod(lambda x: [fluid.layers.expand(x, [1, 3]),
                                             fluid.layers.expand(x, [2, 1])])
    # at build time the rows are unknown (-1 either way): both declare X's level, as Fluid's
    assert outs[0].lod_level == 1 and outs[1].lod_level == 1
    assert cols.recursive_sequence_lengths() == [[2, 3]]
    np.testing.assert_array_equal(np.asarray(cols), np.tile(np.arange(20.).reshape(5, 4), [1, 3]))
    assert rows.recursive_sequence_lengths() == [] and np.asarray(rows).shape == (10, 4)


def test_a_reduction_keeps_the_lod_unless_it_reduces_dim_0():
    """Fluid 1.8's ReduceOp shares X's LoD when dim 0 is not reduced."""
    outs, got = _run_lod(lambda x: [fluid.layers.reduce_sum(x, dim=1, keep_dim=True),
                                    fluid.layers.reduce_max(x, dim=-1),
                                    fluid.layers.reduce_mean(x, dim=0),
                                    fluid.layers.reduce_sum(x)])
    assert [o.lod_level for o in outs] == [1, 1, 0, 0]
    assert [g.recursive_sequence_lengths() for g in got] == [[[2, 3]], [[2, 3]], [], []]
    x = np.arange(20.).reshape(5, 4)
    np.testing.assert_array_equal(np.asarray(got[0]), x.sum(1, keepdims=True))
    np.testing.assert_array_equal(np.asarray(got[1]), x.max(-1))
    # and the compiled path attaches the same LoD
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        xv = fluid.data("x", [None, 4], "float32", lod_level=1)
        y = fluid.layers.sequence_pool(fluid.layers.reduce_sum(xv, dim=1, keep_dim=True), "sum")
    t = fluid.create_lod_tensor(x.astype("float32"), [[2, 3]], fluid.CPUPlace())
    want = np.array([[x[:2].sum()], [x[2:].sum()]], "float32")
    for prog in (main, fluid.CompiledProgram(main).with_native_code()):
        (out,) = fluid.Executor().run(prog, feed={"x": t}, fetch_list=[y], scope=fluid.Scope())
        np.testing.assert_allclose(out, want, rtol=1e-6)
