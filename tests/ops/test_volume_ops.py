"""conv3d, conv3d_transpose, pool3d, unfold (fluidity/ops/volume.py): forward against direct
numpy loops, gradients against finite differences."""
import itertools

import numpy as np
import pytest

from op_test import check_grad, check_output, run_op

rng = np.random.default_rng(9)


def r(*shape):
    return rng.uniform(-1, 1, size=shape).astype(np.float32)


def conv3d_ref(x, w, stride, pad, groups=1):
    n, c, *s = x.shape
    f, cg, *k = w.shape
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(p, p) for p in pad])
    outs = [(s[i] + 2 * pad[i] - k[i]) // stride[i] + 1 for i in range(3)]
    out = np.zeros([n, f] + outs)
    fg = f // groups
    for fo in range(f):
        g = fo // fg
        for o in itertools.product(*[range(v) for v in outs]):
            sl = tuple(slice(o[i] * stride[i], o[i] * stride[i] + k[i]) for i in range(3))
            out[(slice(None), fo) + o] = (xp[(slice(None), slice(g * cg, (g + 1) * cg)) + sl]
                                          * w[fo]).sum(axis=(1, 2, 3, 4))
    return out


@pytest.mark.parametrize("groups", [1, 2])
def test_conv3d(groups):
    x, w = r(2, 2, 4, 3, 4), r(4, 2 // groups, 2, 2, 3)
    attrs = {"strides": [1, 2, 1], "paddings": [1, 0, 1], "groups": groups}
    check_output("conv3d", {"Input": x, "Filter": w},
                 {"Output": conv3d_ref(x, w, [1, 2, 1], [1, 0, 1], groups)}, attrs, atol=1e-4)
    check_grad("conv3d", {"Input": x, "Filter": w}, ["Input", "Filter"], attrs)


def test_conv3d_transpose_is_conv3ds_adjoint():
    x, w = r(1, 2, 2, 3, 2), r(2, 3, 2, 2, 2)          # Filter [C_in, F, k...]
    attrs = {"strides": [2, 1, 2], "paddings": [0, 1, 0]}
    y = np.asarray(run_op("conv3d_transpose", {"Input": x, "Filter": w}, attrs)["Output"])
    # <conv3d_transpose(x), v> = <x, conv3d(v)> for the conv3d with the same geometry
    v = r(*y.shape)
    conv_v = conv3d_ref(v, w, [2, 1, 2], [0, 1, 0])
    np.testing.assert_allclose((y * v).sum(), (x * conv_v).sum(), rtol=1e-4)
    check_grad("conv3d_transpose", {"Input": x, "Filter": w}, ["Input", "Filter"], attrs)


@pytest.mark.parametrize("kind,exclusive", [("max", True), ("avg", True), ("avg", False)])
def test_pool3d(kind, exclusive):
    x = r(1, 2, 4, 4, 3)
    attrs = {"pooling_type": kind, "ksize": [2, 2, 2], "strides": [2, 2, 1],
             "paddings": [0, 1, 0], "exclusive": exclusive}
    xp = np.pad(x, [(0, 0), (0, 0), (0, 0), (1, 1), (0, 0)], constant_values=np.nan)
    out = np.zeros((1, 2, 2, 3, 2))
    for o in itertools.product(range(2), range(3), range(2)):
        win = xp[:, :, o[0] * 2:o[0] * 2 + 2, o[1] * 2:o[1] * 2 + 2, o[2]:o[2] + 2]
        win = win.reshape(1, 2, -1)
        if kind == "max":
            out[(slice(None), slice(None)) + o] = np.nanmax(win, -1)
        else:
            denom = (~np.isnan(win)).sum(-1) if exclusive else 8
            out[(slice(None), slice(None)) + o] = np.nansum(win, -1) / denom
    check_output("pool3d", {"X": x}, {"Out": out}, attrs)
    check_grad("pool3d", {"X": x}, ["X"], attrs)
    check_output("pool3d", {"X": x}, {"Out": x.max(axis=(2, 3, 4), keepdims=True)},
                 {"pooling_type": "max", "global_pooling": True, "ksize": [1, 1, 1]})
    # windows wider than the input by less than the stride: one output per axis over the
    # input (Paddle's truncating division), averaged over the taps inside (exclusive) or ksize
    wide = {"pooling_type": kind, "ksize": [5, 6, 4], "strides": [5, 6, 4],
            "exclusive": exclusive}
    want = (x.max(axis=(2, 3, 4), keepdims=True) if kind == "max" else
            x.sum(axis=(2, 3, 4), keepdims=True) / (48 if exclusive else 120))
    check_output("pool3d", {"X": x}, {"Out": want}, wide)
    check_grad("pool3d", {"X": x}, ["X"], wide)


def test_unfold():
    x = r(2, 2, 4, 5)
    attrs = {"kernel_sizes": [2, 3], "strides": [1, 2], "paddings": [1, 0, 0, 1],
             "dilations": [1, 1]}
    xp = np.pad(x, [(0, 0), (0, 0), (1, 0), (0, 1)])
    cols = []
    for i in range(4):
        for j in range(2):
            cols.append(xp[:, :, i:i + 2, j * 2:j * 2 + 3].reshape(2, -1))
    check_output("unfold", {"X": x}, {"Y": np.stack(cols, axis=-1)}, attrs)
    check_grad("unfold", {"X": x}, ["X"], attrs)


def test_conv3d_same_valid_and_asymmetric_paddings():
    x, w = r(1, 2, 5, 4, 3), r(3, 2, 3, 2, 2)
    strides = [2, 1, 2]
    # SAME: out = ceil(in / stride); total padding (out - 1) * s + k - in, the odd one after
    want = conv3d_ref(np.pad(x, [(0, 0), (0, 0), (1, 1), (0, 1), (0, 1)]), w, strides, [0] * 3)
    check_output("conv3d", {"Input": x, "Filter": w}, {"Output": want},
                 {"strides": strides, "padding_algorithm": "SAME", "paddings": [9, 9, 9],
                  "dilations": [1, 1, 1]}, atol=1e-4)
    check_output("conv3d", {"Input": x, "Filter": w},
                 {"Output": conv3d_ref(x, w, strides, [0] * 3)},
                 {"strides": strides, "padding_algorithm": "VALID", "paddings": [1, 1, 1]},
                 atol=1e-4)
    six = [1, 0, 0, 1, 1, 0]          # (front, back, top, bottom, left, right)
    want = conv3d_ref(np.pad(x, [(0, 0), (0, 0), (1, 0), (0, 1), (1, 0)]), w, strides, [0] * 3)
    attrs = {"strides": strides, "paddings": six}
    check_output("conv3d", {"Input": x, "Filter": w}, {"Output": want}, attrs, atol=1e-4)
    check_grad("conv3d", {"Input": x, "Filter": w}, ["Input", "Filter"], attrs)


def test_conv3d_channel_last_is_a_transpose_of_channel_first():
    x, w = r(1, 4, 3, 4, 2), r(2, 2, 2, 2, 2)          # NDHWC input, groups 1 over C = 2
    want = conv3d_ref(np.moveaxis(x, -1, 1), w, [1, 1, 1], [1, 0, 1])
    attrs = {"paddings": [1, 0, 1], "data_format": "NDHWC"}
    check_output("conv3d", {"Input": x, "Filter": w}, {"Output": np.moveaxis(want, 1, -1)},
                 attrs, atol=1e-4)
    check_grad("conv3d", {"Input": x, "Filter": w}, ["Input", "Filter"], attrs)
    # conv3d_transpose in NDHWC: the same numbers as NCDHW, moved
    xt, wt = r(1, 2, 3, 2, 2), r(2, 3, 2, 2, 2)
    ta = {"strides": [2, 1, 1], "paddings": [0, 1, 0]}
    first = np.asarray(run_op("conv3d_transpose", {"Input": xt, "Filter": wt}, ta)["Output"])
    last = run_op("conv3d_transpose", {"Input": np.moveaxis(xt, 1, -1), "Filter": wt},
                  dict(ta, data_format="NDHWC"))["Output"]
    np.testing.assert_allclose(np.asarray(last), np.moveaxis(first, 1, -1), rtol=1e-5)
    check_grad("conv3d_transpose", {"Input": np.ascontiguousarray(np.moveaxis(xt, 1, -1)),
                                    "Filter": wt},
               ["Input", "Filter"], dict(ta, data_format="NDHWC"))


def test_pool3d_ceil_mode_keeps_the_partial_last_window():
    x = r(1, 1, 5, 3, 4)
    attrs = {"pooling_type": "avg", "ksize": [2, 2, 2], "strides": [2, 2, 2],
             "paddings": [0, 0, 0], "ceil_mode": True, "exclusive": True}
    out = np.zeros((1, 1, 3, 2, 2))
    for o in itertools.product(range(3), range(2), range(2)):
        win = x[:, :, o[0] * 2:o[0] * 2 + 2, o[1] * 2:o[1] * 2 + 2, o[2] * 2:o[2] * 2 + 2]
        out[(slice(None), slice(None)) + o] = win.mean(axis=(2, 3, 4))
    check_output("pool3d", {"X": x}, {"Out": out}, attrs)
    check_grad("pool3d", {"X": x}, ["X"], attrs)
    # max, and avg that counts the padding (exclusive=False divides by the full window)
    mx = run_op("pool3d", {"X": x}, dict(attrs, pooling_type="max"))["Out"]
    assert np.asarray(mx).shape == (1, 1, 3, 2, 2)
    np.testing.assert_allclose(np.asarray(mx)[0, 0, 2, 1, 1], x[0, 0, 4, 2, 2:4].max())
    inc = run_op("pool3d", {"X": x}, dict(attrs, exclusive=False))["Out"]
    np.testing.assert_allclose(np.asarray(inc)[0, 0, 2, 1, 1], x[0, 0, 4, 2, 2:4].sum() / 8,
                               rtol=1e-6)


def test_3d_ops_refuse_an_unknown_layout():
    import fluidity as fluid
    from fluidity.errors import ShapeError
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [1, 2, 3, 3, 3], "float32")
        w = fluid.data("w", [2, 2, 1, 1, 1], "float32")
        out = fluid.default_main_program().global_block().create_var(name="o", dtype="float32")
        with pytest.raises(ShapeError, match="conv3d.*data_format"):
            fluid.default_main_program().global_block().append_op(
                "conv3d", {"Input": x, "Filter": w}, {"Output": out}, {"data_format": "NCWDH"})
