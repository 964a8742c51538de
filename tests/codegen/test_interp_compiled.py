"""Fluid 1.x's resize ops compiled (codegen/emit/cpu/interp.py): a small upsampling net
trains compiled in one segment as the interpreter trains it; an output size from a tensor
whose values the segment knows (fill_constant) compiles, one from a feed runs the op
interpreted with the same result."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.codegen.lower import Lowering

from compiled_runs import train_both


def _resize(x, op_type, ins=None, **attrs):
    """Append Fluid 1.x resize `op_type` over x (as Paddle 1.8's layers wrote it)."""
    block = fluid.default_main_program().global_block()
    out = block.create_var(name=fluid.unique_name.generate(op_type), dtype="float32")
    block.append_op(op_type, {"X": [x], **(ins or {})}, {"Out": [out]},
                    {"interp_method": op_type.split("_")[0], **attrs})
    return out


def _upsampler():
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 5
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [2, 4, 4])
        y = fluid.layers.data("y", [1, 8, 8])
        h = fluid.layers.conv2d(x, 4, 3, padding=1, act="relu")
        h = _resize(h, "bilinear_interp", out_h=8, out_w=8, align_corners=False,
                    align_mode=0)
        p = fluid.layers.conv2d(h, 1, 3, padding=1)
        loss = fluid.layers.mean(fluid.layers.square(p - y))
        fluid.optimizer.SGD(0.05).minimize(loss)
    return main, startup, loss


def _feeds(steps=8):
    r = np.random.default_rng(1)
    feeds = []
    for _ in range(steps):
        n = int(r.integers(1, 4))
        feeds.append({"x": r.normal(size=(n, 2, 4, 4)).astype("float32"),
                      "y": r.normal(size=(n, 1, 8, 8)).astype("float32")})
    return feeds


def test_an_upsampling_net_trains_compiled_in_one_segment_as_interpreted():
    main, startup, loss = _upsampler()
    rows = Lowering(main, 0).explain()
    assert {w for _, _, w, _ in rows} == {"segment 0"}, "the whole step is one native call"
    assert {"bilinear_interp", "bilinear_interp_grad"} <= {t for _, t, _, _ in rows}
    want, got = train_both(main, startup, [loss], _feeds())
    want_l, want_p = np.array([o[0] for o in want.outs]).ravel(), want.params
    got_l, got_p = np.array([o[0] for o in got.outs]).ravel(), got.params
    np.testing.assert_allclose(got_l, want_l, rtol=1e-5, atol=1e-6)
    for name in want_p:
        np.testing.assert_allclose(got_p[name], want_p[name], rtol=1e-4, atol=1e-6,
                                   err_msg=name)


def _sized(how):
    """A nearest_interp whose size comes from a tensor: `how` says which and from where."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [3, 4, 5], append_batch_size=False)
        x = fluid.layers.reshape(x, [1, 3, 4, 5])
        fc = fluid.layers.fill_constant
        ins = {
            "OutSize constant": lambda: {"OutSize": [fc([2], "int32", 7)]},
            "SizeTensor constants": lambda: {"SizeTensor": [fc([1], "int32", 6),
                                                            fc([1], "int32", 9)]},
            "Scale constant": lambda: {"Scale": [fc([1], "float32", 1.5)]},
            "OutSize fed": lambda: {"OutSize": [fluid.layers.data(
                "size", [2], dtype="int32", append_batch_size=False)]},
        }[how]()
        out = _resize(x, "nearest_interp", ins, align_corners=False)
    return main, out


@pytest.mark.parametrize("how", ["OutSize constant", "SizeTensor constants",
                                 "Scale constant", "OutSize fed"])
def test_an_output_size_from_a_tensor_compiles_when_its_values_are_known(how):
    main, out = _sized(how)
    where = {t: w for _, t, w, _ in Lowering(main, 0).explain()}
    fed = how.endswith("fed")
    assert (where["nearest_interp"] == "python") == fed, where
    feed = {"x": np.random.default_rng(2).normal(size=(3, 4, 5)).astype("float32")}
    if fed:
        feed["size"] = np.array([7, 3], np.int32)
    exe = fluid.Executor()
    want = exe.run(main, feed=feed, fetch_list=[out], scope=fluid.Scope())[0]
    got = exe.run(fluid.CompiledProgram(main).with_native_code(), feed=feed,
                  fetch_list=[out], scope=fluid.Scope())[0]
    np.testing.assert_array_equal(got, want)


def test_an_output_size_past_the_tables_bound_runs_interpreted():
    """A model's huge out_w would make the generated tables as large: refused."""
    from fluidity.codegen.emit.cpu.interp import MAX_OUT
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        x = fluid.layers.data("x", [1, 1, 2, 2], append_batch_size=False)
        _resize(x, "bilinear_interp", out_h=1, out_w=MAX_OUT + 1)
    where = {t: w for _, t, w, _ in Lowering(main, 0).explain()}
    assert where["bilinear_interp"] == "python"
