"""partial_concat and partial_sum (fluidity/ops/partial.py) and their contrib layers:
forward against numpy, gradients against finite differences, window errors."""
import numpy as np
import pytest

import fluidity as fluid
from op_test import check_grad, check_output, run_op
from fluidity.errors import ShapeError

rng = np.random.default_rng(5)
xs = [rng.uniform(-1, 1, size=(2, 5)) for _ in range(3)]
ins = {"X": [(f"x{i}", x) for i, x in enumerate(xs)]}


@pytest.mark.parametrize("start,length,cols", [(1, 2, slice(1, 3)), (-2, -1, slice(3, 5)),
                                               (0, -1, slice(0, 5))])
def test_partial_concat(start, length, cols):
    attrs = {"start_index": start, "length": length}
    check_output("partial_concat", ins, {"Out": np.concatenate([x[:, cols] for x in xs], 1)},
                 attrs)
    check_grad("partial_concat", ins, [("X", 0), ("X", 2)], attrs)


@pytest.mark.parametrize("start,length,cols", [(1, 3, slice(1, 4)), (4, -1, slice(4, 5))])
def test_partial_sum(start, length, cols):
    attrs = {"start_index": start, "length": length}
    check_output("partial_sum", ins, {"Out": sum(x[:, cols] for x in xs)}, attrs)
    check_grad("partial_sum", ins, [("X", 1)], attrs)


def test_window_out_of_range():
    with pytest.raises(ShapeError, match="partial_sum"):
        run_op("partial_sum", ins, {"start_index": 3, "length": 4})
    with pytest.raises(ShapeError, match="partial_concat"):
        run_op("partial_concat", ins, {"start_index": 5})


def test_contrib_layers():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        a = fluid.data("a", [None, 5], "float32")
        b = fluid.data("b", [None, 5], "float32")
        c = fluid.contrib.layers.partial_concat([a, b], start_index=1, length=2)
        s = fluid.contrib.layers.partial_sum([a, b], start_index=2)
    assert list(c.shape) == [-1, 4] and list(s.shape) == [-1, 3]
    av, bv = xs[0].astype("float32"), xs[1].astype("float32")
    cv, sv = fluid.Executor().run(main, feed={"a": av, "b": bv}, fetch_list=[c, s])
    np.testing.assert_allclose(cv, np.concatenate([av[:, 1:3], bv[:, 1:3]], 1))
    np.testing.assert_allclose(sv, av[:, 2:] + bv[:, 2:], rtol=1e-6)
