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
