"""Ops that take shapes, bounds and ranges from tensors compile where those tensors hold
values the compiled code knows (fluidity/ops/compiled.py): a `shape` op's dims, a slice of
them, `fill_constant` constants. The pattern of Paddle's RNN layers (the batch size read
with shape + slice, initial states made by fill_constant from it) and of a transformer's
position ids (range over constants) compile whole and give the interpreter's results for
every batch size; a tensor whose values only run time knows leaves its reader interpreted
(explain() says so) with the same results."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.codegen.lower import Lowering

F32, I32, I64 = 5, 2, 3


class Prog:
    """A program built op by op (each output a new variable the op's shape rule types)."""

    def __init__(self):
        self.main = fluid.Program()
        self.block = self.main.global_block()
        self.n = 0

    def data(self, name, shape, dtype="float32"):
        return self.block.create_var(name=name, shape=shape, dtype=dtype)

    def op(self, op_type, ins, attrs=None, out="Out"):
        self.n += 1
        v = self.block.create_var(name=f"{op_type}_{self.n}")
        self.block.append_op(op_type, {k: (x if isinstance(x, list) else [x])
                                       for k, x in ins.items()}, {out: [v]}, attrs or {})
        return v

    def const(self, value, dtype=I64, shape=(1,)):
        return self.op("fill_constant", {}, {"shape": list(shape), "dtype": dtype,
                                             "value": float(value)})

    def explain(self):
        return {(t, w if w == "python" else "native", why if w == "python" else "")
                for _, t, w, why in Lowering(self.main, 0).explain()}

    def run_both(self, feed, fetch):
        got = []
        for compiled in (False, True):
            prog = fluid.CompiledProgram(self.main).with_native_code() if compiled else self.main
            got.append(fluid.Executor().run(prog, feed=feed, fetch_list=fetch,
                                            scope=fluid.Scope()))
        return got


def assert_same(got, want):
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_initial_states_sized_by_the_batch_compile_with_the_interpreters_results():
    """shape -> slice (decrease_axis) -> fill_constant(ShapeTensorList): Paddle's RNN."""
    p = Prog()
    x = p.data("x", [-1, 4, 6])
    s = p.op("shape", {"Input": x})
    batch = p.op("slice", {"Input": s}, {"axes": [0], "starts": [0], "ends": [1],
                                         "decrease_axis": [0]})
    h0 = p.op("fill_constant", {"ShapeTensorList": [p.const(2, I32), batch,
                                                    p.const(5, I32)]},
              {"shape": [2, -1, 5], "dtype": F32, "value": 0.5})
    assert {w for _, w, _ in p.explain()} == {"native"}
    for n in (1, 3):
        want, got = p.run_both({"x": np.ones((n, 4, 6), np.float32)}, [h0, s, batch])
        assert got[0].shape == (2, n, 5)
        assert_same(got, want)


def test_a_shape_tensor_and_a_size_give_dims():
    p = Prog()
    x = p.data("x", [-1, 3])
    like = p.op("fill_constant", {"ShapeTensor": p.op("shape", {"Input": x})},
                {"shape": [-1, 3], "dtype": I64, "value": 7.0})
    n = p.op("size", {"Input": x})
    flat = p.op("fill_constant", {"ShapeTensorList": [n]}, {"shape": [-1], "dtype": F32,
                                                            "value": -1.0})
    assert {w for _, w, _ in p.explain()} == {"native"}
    want, got = p.run_both({"x": np.zeros((5, 3), np.float32)}, [like, flat])
    assert got[0].shape == (5, 3) and got[1].shape == (15,)
    assert_same(got, want)


@pytest.mark.parametrize("dtype,bounds", [(I64, (0, 6, 1)), (I64, (7, -3, -2)),
                                          (I32, (5, 5, 1)), (F32, (0.5, 3.0, 0.75)),
                                          (F32, (1.0, -1.0, -0.3))])
def test_range_over_constants_compiles_to_the_kernels_values(dtype, bounds):
    p = Prog()
    out = p.op("range", {k: p.const(v, dtype) for k, v in zip(("Start", "End", "Step"),
                                                                bounds)})
    assert {w for _, w, _ in p.explain()} == {"native"}
    want, got = p.run_both({}, [out])
    assert_same(got, want)


def test_range_to_a_dim_and_a_slice_of_it_with_bounds_from_tensors():
    """range(0, seq_len) with seq_len a dim known at run time; then slice and strided_slice
    with StartsTensor / EndsTensorList holding constants."""
    p = Prog()
    x = p.data("x", [2, -1])
    seq = p.op("slice", {"Input": p.op("shape", {"Input": x})},
               {"axes": [0], "starts": [1], "ends": [2]})
    pos = p.op("range", {"Start": p.const(0, I32), "End": seq, "Step": p.const(1, I32)})
    tail = p.op("slice", {"Input": x, "StartsTensor": p.const(-2),
                          "EndsTensorList": [p.const(100)]},
                {"axes": [1], "starts": [0], "ends": [1], "infer_flags": [-1]})
    back = p.op("strided_slice", {"Input": x, "StartsTensorList": [p.const(-1)],
                                  "EndsTensor": p.const(-100),
                                  "StridesTensorList": [p.const(-2)]},
                {"axes": [1], "starts": [0], "ends": [1], "strides": [1],
                 "infer_flags": [-1]})
    assert {w for _, w, _ in p.explain()} == {"native"}
    for n in (1, 5, 6):
        x_val = np.arange(2 * n, dtype=np.float32).reshape(2, n)
        want, got = p.run_both({"x": x_val}, [pos, tail, back])
        assert got[0].tolist() == list(range(n))
        assert_same(got, want)


def test_a_shape_from_a_fed_tensor_stays_interpreted():
    p = Prog()
    n = p.data("n", [1], "int64")
    out = p.op("fill_constant", {"ShapeTensorList": [n]}, {"shape": [-1], "dtype": F32,
                                                           "value": 1.0})
    rows = [r for r in p.explain() if r[0] == "fill_constant"]
    assert rows == [("fill_constant", "python", "'fill_constant': ShapeTensorList 'n' holds "
                     "values known only at run time")]
    want, got = p.run_both({"n": np.array([4], np.int64)}, [out])
    assert_same(got, want)


def test_the_value_of_a_variable_written_again_is_not_the_constant_it_held():
    """Known values belong to the value an op made: after `assign` writes the variable
    again (here from a fed tensor), its reader uses what run time holds."""
    p = Prog()
    k = p.const(3)
    p.block.append_op("assign", {"X": [p.data("m", [1], "int64")]}, {"Out": [k]})
    out = p.op("fill_constant", {"ShapeTensorList": [k]}, {"shape": [-1], "dtype": F32})
    assert ("fill_constant", "python", "'fill_constant': ShapeTensorList 'fill_constant_1' "
            "holds values known only at run time") in p.explain()
    want, got = p.run_both({"m": np.array([5], np.int64)}, [out])
    assert got[0].shape == (5,)
    assert_same(got, want)
