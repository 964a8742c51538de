"""target="c": a target is a folder of emitters (codegen/emit/c/) and a registry entry
(codegen/targets.py). Its source is plain C99 (built with $CC -std=c99), called through the
same argument records as the C++ target's, and computes what the numpy kernels compute."""
import ctypes

import numpy as np
import pytest

import fluidity as fluid
from fluidity.codegen import abi, emit
from fluidity.codegen.lower import Lowering
from fluidity.codegen.segment import PythonOp
from fluidity.codegen.targets import target

# float32 sums of at most K = 16 products of values in [-1, 1]: each add rounds by at most
# one ulp of the running sum, so the C loops and numpy's BLAS / pairwise sums differ by at
# most ~K * 2^-24 relative to the sum of magnitudes; softmax and tanh add a few ulps more
RTOL, ATOL = 16 * 2.0 ** -23, 1e-6


def _program():
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 5
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [16])
        h = fluid.layers.fc(x, 8, act="relu")                 # mul, elementwise_add, relu
        h = fluid.layers.elementwise_mul(fluid.layers.tanh(h), fluid.layers.sigmoid(h))
        probs = fluid.layers.softmax(fluid.layers.scale(h, 0.5, bias=0.25))
        loss = fluid.layers.mean(probs)
    return main, startup, probs, loss


def _call(low, values):
    """Run the lowering's one segment through the C library: inputs packed into the
    argument records (codegen.abi), outputs read back as numpy views of the arena."""
    (seg,) = low.segments
    fn = getattr(target("c").load(low.source), seg.name)
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]
    fn.restype = ctypes.c_int
    args, err = abi.Args(len(seg.inputs), len(seg.outputs)), ctypes.create_string_buffer(512)
    arrays = [np.ascontiguousarray(values[b.var]) for b in seg.inputs]
    for rec, a in zip(args.inputs, arrays):
        abi.put_tensor(rec, a.ctypes.data, a.shape)
    arena = np.empty(64, np.uint8)
    rc = fn(args.address, arena.ctypes.data, arena.size, err)
    if rc == 1:
        arena = np.empty(args.need, np.uint8)
        rc = fn(args.address, arena.ctypes.data, arena.size, err)
    assert rc == 0, err.value
    out = {}
    for b, rec in zip(seg.outputs, args.outputs):
        shape = abi.output_shape(rec, b.ndim)
        off, n = abi.output_offset(rec), int(np.prod(shape, dtype=np.int64)) * 4
        out[b.var] = arena[off:off + n].view(np.float32).reshape(shape).copy()
    return out


def test_the_c_target_writes_plain_c():
    main, _, probs, loss = _program()
    low = Lowering(main, 0, keep=[probs.name, loss.name], target="c")
    assert len(low.segments) == 1
    assert [p.i for p in low.parts if isinstance(p, PythonOp)] == []
    src = low.source
    assert '#include "c_rt.h"' in src and "fl_matmul(" in src and "tanhf(" in src
    for cpp in ("std::", "fl::", 'extern "C"', "__restrict__", "#include <algorithm>"):
        assert cpp not in src, cpp


def test_the_c_target_computes_what_the_kernels_compute():
    main, startup, probs, loss = _program()
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    x = np.random.default_rng(0).uniform(-1, 1, (5, 16)).astype(np.float32)
    want_p, want_l = exe.run(main, feed={"x": x}, fetch_list=[probs, loss], scope=scope)
    low = Lowering(main, 0, keep=[probs.name, loss.name], target="c")
    values = {"x": x}
    values.update({n: np.array(scope.find_var(n).get_tensor())
                   for n in ("fc_0.w_0", "fc_0.b_0")})
    got = _call(low, values)
    np.testing.assert_allclose(got[probs.name], want_p, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(got[loss.name].reshape(np.shape(want_l)), want_l, rtol=RTOL,
                               atol=ATOL)


def test_an_op_without_a_c_form_stays_a_python_step_saying_so():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [4])
        y = fluid.layers.cumsum(fluid.layers.relu(x), axis=1)
    rows = Lowering(main, 0, keep=[y.name], target="c").explain()
    assert ("cumsum", "python") in [(t, w) for _, t, w, _ in rows]
    assert any("has no C emitter" in why for _, t, _, why in rows if t == "cumsum")
    assert emit.lookup("gelu", "c") is None        # its row calls fl::gelu: no C spelling


@pytest.mark.parametrize("op_type", ["relu", "mul", "softmax", "elementwise_add"])
def test_fluidity_ops_lists_the_c_target(op_type):
    assert "c" in emit.targets_of(op_type)
