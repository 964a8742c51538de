"""split compiled (the gates of the seq2seq example's GRU decoder) against numpy's split:
equal parts, sections with a -1, a middle axis, rows, LoD kept."""
import numpy as np
import pytest
from op_test import build_op, compiled_ops

import fluidity as fluid


def run(x, attrs, n_out, lod=None):
    main, startup, feed, outs, _ = build_op("split", {"X": x}, attrs,
                                            {"Out": n_out})
    if lod is not None:
        feed = {k: fluid.create_lod_tensor(v, lod, fluid.CPUPlace()) for k, v in feed.items()}
    assert "split" in compiled_ops(main)
    prog = fluid.CompiledProgram(main).with_native_code()
    return fluid.Executor().run(prog, feed=feed, fetch_list=outs["Out"], scope=fluid.Scope(),
                                return_numpy=False)


@pytest.mark.parametrize("shape, attrs, cuts", [
    ((4, 6), {"axis": 1, "num": 3}, [2, 4]),
    ((4, 6), {"axis": -1, "sections": [1, -1, 2]}, [1, 4]),
    ((2, 5, 3), {"axis": 1, "sections": [2, 3]}, [2]),
    ((6, 2), {"axis": 0, "num": 2}, [3]),
], ids=["num", "sections with -1", "middle axis", "rows"])
def test_split_compiled_matches_numpy(shape, attrs, cuts):
    x = np.arange(np.prod(shape), dtype="float32").reshape(shape)
    got = run(x, attrs, len(cuts) + 1)
    want = np.split(x, cuts, axis=attrs["axis"])
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), w)


def test_split_keeps_the_lod_of_x():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [4], dtype="float32", lod_level=1)
        outs = fluid.layers.split(x, 2, dim=1)
    assert "split" in compiled_ops(main)
    data = np.arange(12, dtype="float32").reshape(3, 4)
    feed = {"x": fluid.create_lod_tensor(data, [[2, 1]], fluid.CPUPlace())}
    got = fluid.Executor().run(fluid.CompiledProgram(main).with_native_code(), feed=feed,
                               fetch_list=outs, scope=fluid.Scope(), return_numpy=False)
    assert [g.lod() for g in got] == [[[0, 2, 3]]] * 2
    np.testing.assert_array_equal(np.asarray(got[1]), data[:, 2:])
