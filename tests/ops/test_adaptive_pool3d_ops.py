"""pool3d's adaptive mode and max_pool3d_with_index (adaptive_pool3d) against loop references
of the adaptive cells [floor(i n / o), ceil((i + 1) n / o)), their numeric gradients, the
mask's indices, and the layer as Fluid builds it."""
import math

import numpy as np
import pytest

import fluidity as fluid
from op_test import check_grad, check_output

rng = np.random.default_rng(17)


def cells(n, o):
    return [(i * n // o, math.ceil((i + 1) * n / o)) for i in range(o)]


def adaptive_ref(x, size, kind):
    n, c = x.shape[:2]
    out = np.zeros((n, c) + tuple(size))
    mask = np.zeros(out.shape, np.int32)
    d, h, w = x.shape[2:]
    for a, (d0, d1) in enumerate(cells(d, size[0])):
        for b, (h0, h1) in enumerate(cells(h, size[1])):
            for e, (w0, w1) in enumerate(cells(w, size[2])):
                block = x[:, :, d0:d1, h0:h1, w0:w1]
                if kind == "avg":
                    out[:, :, a, b, e] = block.mean(axis=(2, 3, 4))
                    continue
                flat = block.reshape(n, c, -1)
                k = flat.argmax(-1)
                out[:, :, a, b, e] = flat.max(-1)
                kd, rest = np.divmod(k, (h1 - h0) * (w1 - w0))
                kh, kw = np.divmod(rest, w1 - w0)
                mask[:, :, a, b, e] = ((d0 + kd) * h + h0 + kh) * w + w0 + kw
    return out, mask


@pytest.mark.parametrize("size", [[2, 3, 2], [1, 1, 1], [3, 4, 5]])
def test_adaptive_avg_and_max(size):
    x = rng.normal(size=(2, 2, 3, 5, 4))
    avg, _ = adaptive_ref(x, size, "avg")
    mx, mask = adaptive_ref(x, size, "max")
    check_output("pool3d", {"X": x}, {"Out": avg},
                 {"pooling_type": "avg", "ksize": size, "adaptive": True})
    check_output("max_pool3d_with_index", {"X": x}, {"Out": mx, "Mask": mask},
                 {"ksize": size, "adaptive": True})
    check_grad("pool3d", {"X": x}, ["X"], {"pooling_type": "avg", "ksize": size,
                                           "adaptive": True})
    check_grad("max_pool3d_with_index", {"X": x}, ["X"], {"ksize": size, "adaptive": True})


def test_pool3d_channel_last():
    x = rng.normal(size=(2, 3, 4, 5, 3))       # NCDHW
    attrs = {"pooling_type": "avg", "ksize": [2, 2, 2], "adaptive": True,
             "data_format": "NDHWC"}
    want = np.moveaxis(adaptive_ref(x, [2, 2, 2], "avg")[0], 1, -1)
    xl = np.ascontiguousarray(np.moveaxis(x, 1, -1))
    check_output("pool3d", {"X": xl}, {"Out": want}, attrs)
    check_grad("pool3d", {"X": xl}, ["X"], attrs)
    check_grad("pool3d", {"X": xl}, ["X"], dict(attrs, pooling_type="max", adaptive=False,
                                               strides=[2, 2, 2]))


def test_max_pool3d_with_index_sliding_windows():
    x = rng.normal(size=(1, 2, 4, 4, 4))
    attrs = {"ksize": [2, 2, 2], "strides": [2, 2, 2], "paddings": [0, 0, 0]}
    mx, mask = adaptive_ref(x, [2, 2, 2], "max")     # 2x2x2 windows are its cells here
    check_output("max_pool3d_with_index", {"X": x}, {"Out": mx, "Mask": mask}, attrs)


def test_adaptive_pool3d_layer():
    x = rng.normal(size=(2, 3, 4, 5, 6)).astype(np.float32)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        v = fluid.layers.data("x", [3, 4, 5, 6])
        avg = fluid.layers.adaptive_pool3d(v, [2, 2, 3], pool_type="avg")
        mx, mask = fluid.layers.adaptive_pool3d(v, 2, require_index=True)
        plain = fluid.layers.adaptive_pool3d(v, [1, 2, 2])
        with pytest.raises(ValueError, match="require_index"):
            fluid.layers.adaptive_pool3d(v, 2, pool_type="avg", require_index=True)
        with pytest.raises(ValueError, match="pool_type"):
            fluid.layers.adaptive_pool3d(v, 2, pool_type="min")
    types = [op.type for op in main.global_block().ops]
    assert types == ["pool3d", "max_pool3d_with_index", "max_pool3d_with_index"]
    got = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": x},
                                               fetch_list=[avg, mx, mask, plain])
    np.testing.assert_allclose(got[0], adaptive_ref(x, [2, 2, 3], "avg")[0], rtol=1e-5)
    want_mx, want_mask = adaptive_ref(x, [2, 2, 2], "max")
    np.testing.assert_allclose(got[1], want_mx, rtol=1e-6)
    np.testing.assert_array_equal(got[2], want_mask)
    assert got[3].shape == (2, 3, 1, 2, 2)
