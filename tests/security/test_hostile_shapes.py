"""Sizes a model file chooses are checked before memory is taken for them: a fill_constant
whose byte size overflows an int64 once wrapped the arena size and its loop wrote past it
(SIGSEGV); one_hot(depth=2**31-1) was killed by the OOM killer. Now a size that does not fit
is refused - by the code generator (a literal product over 2**62), by the generated code
(the arena's sizes computed with runtime/sizes.h's overflow-checked fl_mul_checked and
fl_add_checked: the segment runs interpreted) or by the native
plan (an arena larger than the machine can give) - and the interpreter's kernels refuse a
tensor larger than the machine can give before they allocate (core/limits.py). Compiled or
not, the same error."""
import numpy as np
import pytest
from hostile import set_raw_attr

import fluidity as fluid
from fluidity.codegen.lower import Lowering
from fluidity.core.limits import AllocationTooLarge
from fluidity.proto import framework_pb2 as pb

AttrType = pb.AttrType
GIB = 1 << 30


@pytest.fixture(autouse=True)
def bound(monkeypatch):
    monkeypatch.setenv("FLUIDITY_MAX_TENSOR_BYTES", str(GIB))     # the same on any machine


def _errors(main, feed, fetch):
    """(interpreter's error, compiled run's error): both must raise."""
    out = []
    for prog in (main, fluid.CompiledProgram(main).with_native_code()):
        with pytest.raises(Exception) as e:
            fluid.Executor().run(prog, feed=feed, fetch_list=fetch, scope=fluid.Scope())
        out.append(e.value)
    return out


def _same(errors, what="would take"):
    want, got = errors
    assert type(got) is type(want), (got, want)
    assert what in str(want) and what in str(got), (want, got)
    cause = want.__cause__ or want
    assert isinstance(cause, AllocationTooLarge) or "AllocationTooLarge" in str(want)


def _op(main, op_type):
    return next(op for op in main.global_block().ops if op.type == op_type)


def test_fill_constant_whose_bytes_overflow_int64(monkeypatch):
    main = fluid.Program()
    with fluid.program_guard(main):
        out = fluid.layers.fill_constant([2, 3], "float32", 1.0)
    set_raw_attr(_op(main, "fill_constant").desc, "shape", AttrType.LONGS, [1 << 40, 1 << 40])
    low = Lowering(main, 0, keep=[out.name])
    assert [w for _, t, w, _ in low.explain() if t == "fill_constant"] == ["python"]
    _same(_errors(main, {}, [out.name]))


def test_batch_size_like_overflow_at_run_time():
    """The batch is known only at run time: the arena's checked size overflows, the segment
    refuses its arena before it writes, the interpreter says how large."""
    main = fluid.Program()
    with fluid.program_guard(main):
        x = fluid.data("x", [-1, 2], "float32")
        out = fluid.layers.fill_constant_batch_size_like(x, [-1, 2 ** 31 - 1, 2 ** 31 - 1],
                                                         "float32", 0.5)
        y = fluid.layers.scale(out, 2.0)
    low = Lowering(main, 0, keep=[y.name])
    assert "fl_mul_checked(" in low.source and "fl_align_checked(" in low.source
    assert [w for _, t, w, _ in low.explain() if t == "fill_constant_batch_size_like"] != \
        ["python"]
    _same(_errors(main, {"x": np.zeros((8, 2), np.float32)}, [y.name]))


def test_one_hot_of_depth_2_31_is_refused_before_it_allocates():
    main = fluid.Program()
    with fluid.program_guard(main):
        ids = fluid.data("ids", [-1, 1], "int64")
        out = fluid.layers.one_hot(ids, 2 ** 31 - 1)
    _same(_errors(main, {"ids": np.array([[1], [2], [3], [4]], np.int64)}, [out.name]))


def test_expand_by_huge_times():
    main = fluid.Program()
    with fluid.program_guard(main):
        x = fluid.data("x", [2, 2], "float32")
        out = fluid.layers.expand(x, [2 ** 31 - 1, 2 ** 31 - 1])
    _same(_errors(main, {"x": np.ones((2, 2), np.float32)}, [out.name]))


def test_a_size_that_fits_still_runs_compiled():
    main = fluid.Program()
    with fluid.program_guard(main):
        x = fluid.data("x", [-1, 2], "float32")
        out = fluid.layers.fill_constant_batch_size_like(x, [-1, 3], "float32", 0.5)
        y = fluid.layers.scale(out, 2.0)
    feed = {"x": np.zeros((4, 2), np.float32)}
    want = fluid.Executor().run(main, feed=feed, fetch_list=[y], scope=fluid.Scope())[0]
    got = fluid.Executor().run(fluid.CompiledProgram(main).with_native_code(), feed=feed,
                               fetch_list=[y], scope=fluid.Scope())[0]
    np.testing.assert_array_equal(got, want)
    assert got.shape == (4, 3) and (got == 1.0).all()


def test_generated_sizes_are_checked_products():
    from fluidity.codegen.cir import NotCompilable, mul
    assert mul(3, 4) == "12" and mul("a", 1) == "a" and mul("a", "b") == "(a * b)"
    assert mul("a", "b").checked("ok") == "fl_mul_checked(a, b, &ok)"    # where it sizes memory
    with pytest.raises(NotCompilable, match="does not fit an int64"):
        mul(1 << 40, 1 << 40)
