"""The fake quantize / dequantize ops and the int8 dequantizers (fluidity/ops/quantize.py)
against numpy written here from Paddle 1.8's formulas; the stateful ones (range_abs_max's
window, the moving averages) over several steps of a program, as a QAT program runs them."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.errors import ExecutionError, ShapeError
from fluidity.ops.quantize import round_half_away
from op_test import check_output, run_op


def q_ref(x, scale, bits):
    r = (1 << (bits - 1)) - 1
    v = np.clip(x, -scale, scale) / scale * r
    return np.sign(v) * np.floor(np.abs(v) + 0.5)      # std::round


@pytest.fixture
def x():
    return ((np.random.default_rng(5).random((4, 3, 5)) - 0.5) * 10).astype(np.float32)


def test_round_half_away():
    v = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997, 2.4], np.float32)
    np.testing.assert_array_equal(round_half_away(v), [1, 2, 3, -1, -3, 0, 2])


def test_abs_max_and_channel_wise(x):
    s = np.abs(x).max()
    for bits in (8, 5):
        check_output("fake_quantize_abs_max", {"X": x},
                     {"Out": q_ref(x, s, bits), "OutScale": np.array([s])},
                     {"bit_length": bits})
    zeros = np.zeros((3, 2), np.float32)      # scale 0: zeros, not NaN
    check_output("fake_quantize_abs_max", {"X": zeros}, {"Out": zeros})
    sc = np.abs(x).reshape(4, -1).max(1)
    check_output("fake_channel_wise_quantize_abs_max", {"X": x},
                 {"Out": q_ref(x, sc[:, None, None], 8), "OutScale": sc})
    with pytest.raises(ShapeError, match="bit_length"):
        run_op("fake_quantize_abs_max", {"X": x}, {"bit_length": 17})


def test_dequantizers(x):
    q = q_ref(x, 4.0, 8)
    check_output("fake_dequantize_max_abs", {"X": q, "Scale": np.array([4.0], np.float32)},
                 {"Out": 4.0 * q / 127}, {"max_range": 127.0})
    sc = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    check_output("fake_channel_wise_dequantize_max_abs", {"X": q, "Scales": [("s0", sc)]},
                 {"Out": q * sc[:, None, None] / 127})
    sc1 = np.array([1.0, 2.0, 3.0], np.float32)
    check_output("fake_channel_wise_dequantize_max_abs",
                 {"X": q, "Scales": [("s0", sc1), ("s1", np.array([0.5], np.float32))]},
                 {"Out": q * sc1[None, :, None] * 0.5 / (127 * 7)}, {"quant_bits": [8, 4]})
    with pytest.raises(ExecutionError, match="dim 0"):
        run_op("fake_channel_wise_dequantize_max_abs", {"X": q, "Scales": [("s0", sc1)]})
    i8 = np.array([[-3, 0, 127]], np.int8)
    got = run_op("dequantize_abs_max", {"X": i8, "Scale": np.array([2.0], np.float32)},
                 {"max_range": 127.0})["Out"]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, 2.0 * i8 / 127, rtol=1e-6)
    table = np.linspace(-2, 2, 128).astype(np.float32)
    i8 = np.array([[-128, -1, 0, 5]], np.int8)
    want = np.array([[-2 ** table[0], -2 ** table[127], 2 ** table[0], 2 ** table[5]]])
    check_output("dequantize_log", {"X": i8, "Dict": table}, {"Out": want.astype(np.float32)})


def _stateful_program(op_type, attrs, window=None):
    """A program running `op_type` over a fed X with its state in persistable variables the
    op reads and writes (as Paddle's QuantizationTransformPass wires them)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        block = main.global_block()
        xv = fluid.layers.data("x", [3, 5], append_batch_size=True)
        st = {n: fluid.layers.create_global_var([1], v, "float32", persistable=True, name=n)
              for n, v in (("scale", 0.0), ("accum", 1.0), ("state", 1.0))}
        out = block.create_var(name="q", dtype="float32")
        if op_type == "fake_quantize_range_abs_max":
            it = fluid.layers.create_global_var([1], 0, "int64", persistable=True, name="it")
            win = fluid.layers.create_global_var([window], 0.0, "float32", persistable=True,
                                                 name="win")
            block.append_op(op_type, {"X": xv, "InScale": st["scale"], "Iter": it},
                            {"Out": out, "OutScale": st["scale"], "OutScales": win}, attrs)
            block.append_op("increment", {"X": it}, {"Out": it}, {"step": 1.0})
        else:
            block.append_op(op_type, {"X": xv, "InScale": st["scale"], "InAccum": st["accum"],
                                      "InState": st["state"]},
                            {"Out": out, "OutScale": st["scale"], "OutAccum": st["accum"],
                             "OutState": st["state"]}, attrs)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    return lambda xs: exe.run(main, feed={"x": xs}, fetch_list=[out, st["scale"]], scope=scope)


def test_range_abs_max_window(x):
    step = _stateful_program("fake_quantize_range_abs_max", {"window_size": 2, "bit_length": 8},
                             window=2)
    maxes = []
    for k, m in enumerate([3.0, 1.0, 0.5, 2.0]):
        xs = x / np.abs(x).max() * m
        maxes.append(np.float32(np.abs(xs).max()))
        q, s = step(xs)
        # the largest max|X| of the window of the last two steps, the current one included
        want = max(maxes[-2:])
        assert float(s[0]) == pytest.approx(float(want), rel=1e-6), k
        np.testing.assert_array_equal(q, q_ref(xs, want, 8))


@pytest.mark.parametrize("op_type", ["fake_quantize_moving_average_abs_max",
                                     "fake_quantize_dequantize_moving_average_abs_max"])
def test_moving_average(x, op_type):
    step = _stateful_program(op_type, {"moving_rate": 0.9})
    accum = state = 1.0
    for m in (2.0, 3.0):
        xs = x / np.abs(x).max() * m
        state, accum = 0.9 * state + 1, 0.9 * accum + np.abs(xs).max()
        scale = accum / state
        q, s = step(xs)
        assert float(s[0]) == pytest.approx(scale, rel=1e-6)
        want = q_ref(xs, scale, 8)
        if "dequantize" in op_type:
            want = want * scale / 127
        np.testing.assert_allclose(q, want, rtol=1e-5, atol=1e-6)
    # inference: quantized by the scale given, nothing updated
    got = run_op(op_type, {"X": x, "InScale": np.array([2.0], np.float32)},
                 {"is_test": True}, outputs=["Out"])["Out"]
    want = q_ref(x, 2.0, 8)
    np.testing.assert_allclose(got, want * 2.0 / 127 if "dequantize" in op_type else want,
                               rtol=1e-5, atol=1e-6)


def test_moving_average_abs_max_scale(x):
    acc, st = np.array([1.0], np.float32), np.array([2.0], np.float32)
    got = check_output("moving_average_abs_max_scale",
                       {"X": x, "InAccum": acc, "InState": st}, {"Out": x})
    st2, acc2 = 0.9 * 2 + 1, 0.9 * 1 + np.abs(x).max()
    full = run_op("moving_average_abs_max_scale", {"X": x, "InAccum": acc, "InState": st})
    np.testing.assert_allclose(full["OutScale"], [acc2 / st2], rtol=1e-6)
    np.testing.assert_allclose(full["OutState"], [st2], rtol=1e-6)
    assert got["Out"] is not None
