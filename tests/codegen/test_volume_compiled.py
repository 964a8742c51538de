"""The 3-D sliding-window ops compiled (codegen/emit/cpu/volume.py): a small 3-D conv net
(conv3d -> pool3d -> fc, softmax cross-entropy, SGD) trains compiled in one segment as the
interpreter trains it; so does one through conv3d_transpose, trilinear_interp and adaptive max
pooling (max_pool3d_with_index); a hostile Mask fed to max_pool3d_with_index_grad stops the
compiled run naming the entry; NDHWC runs interpreted."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.codegen.lower import Lowering
from fluidity.errors import ExecutionError

from compiled_runs import train_both
from op_test import build_op, compiled_ops


def _net(head):
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 3
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [2, 6, 5, 6])
        y = fluid.layers.data("y", [1], dtype="int64")
        h = head(x)
        logits = fluid.layers.fc(h, 3)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
        fluid.optimizer.SGD(0.05).minimize(loss)
    return main, startup, loss


def _conv_pool(x):
    h = fluid.layers.conv3d(x, 4, 3, padding=1, act="relu")
    return fluid.layers.pool3d(h, 2, "max", pool_stride=2)


def _adaptive_transpose(x):
    h = fluid.layers.conv3d(x, 3, [2, 3, 2], stride=[1, 2, 1], groups=1, act="relu")
    h = fluid.layers.conv3d_transpose(h, 2, filter_size=2, stride=1)
    h = fluid.layers.resize_trilinear(h, [5, 4, 6], align_corners=False, align_mode=0)
    h = fluid.layers.adaptive_pool3d(h, [2, 2, 3], "max")
    return fluid.layers.pool3d(h, 2, "avg", pool_stride=1, pool_padding=1, exclusive=False)


def _feeds(steps=6):
    r = np.random.default_rng(2)
    out = []
    for _ in range(steps):
        n = int(r.integers(1, 5))
        out.append({"x": r.normal(size=(n, 2, 6, 5, 6)).astype("float32"),
                    "y": r.integers(0, 3, (n, 1)).astype("int64")})
    return out


@pytest.mark.parametrize("head,ops", [
    (_conv_pool, {"conv3d", "conv3d_grad", "pool3d", "pool3d_grad"}),
    (_adaptive_transpose, {"conv3d_transpose", "conv3d_transpose_grad", "trilinear_interp",
                           "trilinear_interp_grad",
                           "max_pool3d_with_index", "max_pool3d_with_index_grad",
                           "pool3d", "pool3d_grad"})])
def test_a_3d_conv_net_trains_compiled_in_one_segment_as_interpreted(head, ops, caplog):
    main, startup, loss = _net(head)
    rows = Lowering(main, 0).explain()
    assert {w for _, _, w, _ in rows} == {"segment 0"}, "the whole step is one native call"
    assert ops <= {t for _, t, _, _ in rows}
    want, got = train_both(main, startup, [loss], _feeds(), caplog)
    np.testing.assert_allclose(np.ravel([o[0] for o in got.outs]),
                               np.ravel([o[0] for o in want.outs]), rtol=1e-5, atol=1e-6)
    for name in want.params:
        np.testing.assert_allclose(got.params[name], want.params[name], rtol=1e-4, atol=1e-6,
                                   err_msg=name)


def test_a_mask_entry_outside_the_volume_stops_the_compiled_gradient_naming_it():
    x = np.random.default_rng(0).normal(size=(1, 2, 2, 2, 2)).astype("float32")
    mask = np.zeros((1, 2, 1, 1, 1), np.int32)
    mask[0, 1] = 8                      # the volume holds 8 elements
    main, _, feed, out_vars, _ = build_op(
        "max_pool3d_with_index_grad",
        {"X": x, "Mask": mask, "Out@GRAD": np.ones((1, 2, 1, 1, 1), np.float32)},
        {"ksize": [2, 2, 2], "strides": [2, 2, 2], "paddings": [0, 0, 0]}, ["X@GRAD"])
    assert "max_pool3d_with_index_grad" in compiled_ops(main)
    fetch = [v for vs in out_vars.values() for v in vs]
    compiled = fluid.CompiledProgram(main).with_native_code()
    with pytest.raises(ExecutionError, match=r"Mask entry 8 is outside \[0, 8\)"):
        fluid.Executor().run(compiled, feed=feed, fetch_list=fetch, scope=fluid.Scope())


def test_ndhwc_runs_interpreted():
    main, _, _, _, _ = build_op(
        "pool3d", {"X": np.zeros((1, 3, 4, 4, 2), np.float32)},
        {"pooling_type": "max", "ksize": [2, 2, 2], "strides": [1, 1, 1],
         "paddings": [0, 0, 0], "data_format": "NDHWC"}, ["Out"])
    assert "pool3d" not in compiled_ops(main)


@pytest.mark.parametrize("op_type,inputs,attrs", [
    ("conv3d", {"Input": np.zeros((1, 1, 2, 2, 2), np.float32),
                "Filter": np.zeros((1, 1, 1, 1, 1), np.float32)},
     {"paddings": [3000, 3000, 3000]}),
    ("pool3d", {"X": np.zeros((1, 1, 2, 2, 2), np.float32)},
     {"pooling_type": "avg", "ksize": [2, 2, 2], "strides": [1, 1, 1],
      "paddings": [70000, 0, 0]}),
    ("pool3d", {"X": np.zeros((1, 1, 200, 200, 200), np.float32)},
     {"pooling_type": "avg", "ksize": [1, 1, 1], "global_pooling": True}),
])
def test_sizes_from_hostile_attributes_are_refused_before_any_table_is_made(op_type, inputs,
                                                                           attrs):
    main, _, _, _, _ = build_op(op_type, inputs, attrs, ["Output" if op_type == "conv3d"
                                                         else "Out"])
    assert op_type not in compiled_ops(main)
