"""match_matrix_tensor and var_conv_2d (fluidity/ops/text_matching.py) and their contrib
layers: forward against loops written from the definitions, gradients against finite
differences, LoD errors."""
import numpy as np
import pytest

import fluidity as fluid
from op_test import check_grad, run_op
from fluidity.core.tensor import LoDTensor
from fluidity.errors import ExecutionError, ShapeError

rng = np.random.default_rng(6)


def lod(lengths):
    return [np.concatenate([[0], np.cumsum(lengths)]).tolist()]


def test_match_matrix_tensor():
    h, t = 3, 2
    x = LoDTensor(rng.uniform(-1, 1, (3, h)), lod([1, 2]))
    y = LoDTensor(rng.uniform(-1, 1, (5, h)), lod([3, 2]))
    w = rng.uniform(-1, 1, (h, t, h))
    got = run_op("match_matrix_tensor", {"X": x, "Y": y, "W": w}, {"dim_t": t},
                 return_lod=True)
    want = []
    for (x0, x1), (y0, y1) in (((0, 1), (0, 3)), ((1, 3), (3, 5))):
        for k in range(t):
            for i in range(x0, x1):
                for j in range(y0, y1):
                    want.append(sum(x._array[i, a] * w[a, k, c] * y._array[j, c]
                                    for a in range(h) for c in range(h)))
    out = got["Out"]
    np.testing.assert_allclose(np.asarray(out).reshape(-1), want, rtol=1e-10)
    assert out.lod() == [[0, 6, 14]]
    check_grad("match_matrix_tensor", {"X": x, "Y": y, "W": w}, ["X", "Y", "W"],
               {"dim_t": t}, output_slots=["Out"])


def test_match_matrix_tensor_needs_paired_sequences():
    x = LoDTensor(rng.uniform(-1, 1, (3, 2)), lod([1, 2]))
    y = LoDTensor(rng.uniform(-1, 1, (3, 2)), lod([3]))
    with pytest.raises(ExecutionError, match="they must pair up"):
        run_op("match_matrix_tensor", {"X": x, "Y": y, "W": np.ones((2, 1, 2))})


def var_conv_ref(images, w, k, s):
    """Direct convolution, zero padding k // 2 before, output at every s-th position."""
    outs = []
    for img in images:
        c, h, wd = img.shape
        oh, ow = (h - 1) // s[0] + 1, (wd - 1) // s[1] + 1
        out = np.zeros((w.shape[0], oh, ow))
        wk = w.reshape(w.shape[0], c, k[0], k[1])
        for o in range(w.shape[0]):
            for a in range(oh):
                for b in range(ow):
                    for z in range(c):
                        for ky in range(k[0]):
                            for kx in range(k[1]):
                                yy = a * s[0] + ky - k[0] // 2
                                xx = b * s[1] + kx - k[1] // 2
                                if 0 <= yy < h and 0 <= xx < wd:
                                    out[o, a, b] += wk[o, z, ky, kx] * img[z, yy, xx]
        outs.append(out.reshape(-1))
    return np.concatenate(outs)


@pytest.mark.parametrize("k,s", [((2, 3), (1, 1)), ((3, 3), (2, 2))])
def test_var_conv_2d(k, s):
    cin, cout, rows, cols = 2, 3, [3, 2], [2, 4]
    images = [rng.uniform(-1, 1, (cin, r, c)) for r, c in zip(rows, cols)]
    x = LoDTensor(np.concatenate([i.reshape(-1) for i in images]).reshape(-1, 1),
                  lod([i.size for i in images]))
    row = LoDTensor(np.zeros((sum(rows), 1)), lod(rows))
    col = LoDTensor(np.zeros((sum(cols), 1)), lod(cols))
    w = rng.uniform(-1, 1, (cout, cin * k[0] * k[1]))
    attrs = {"InputChannel": cin, "OutputChannel": cout, "KernelH": k[0], "KernelW": k[1],
             "StrideH": s[0], "StrideW": s[1]}
    ins = {"X": x, "ROW": row, "COLUMN": col, "W": w}
    got = run_op("var_conv_2d", ins, attrs)
    np.testing.assert_allclose(got["Out"].reshape(-1), var_conv_ref(images, w, k, s),
                               rtol=1e-10)
    check_grad("var_conv_2d", ins, ["X", "W"], attrs, output_slots=["Out"])


def test_contrib_layers_train():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 9
    with fluid.program_guard(main, startup):
        q = fluid.data("q", [None, 4], "float32", lod_level=1)
        t = fluid.data("t", [None, 4], "float32", lod_level=1)
        mm, tmp = fluid.contrib.match_matrix_tensor(q, t, channel_num=2)
        conv = fluid.contrib.layers.var_conv_2d(mm, q, t, input_channel=2, output_channel=3,
                                                filter_size=3, stride=1)
        loss = fluid.layers.reduce_mean(conv)
        fluid.optimizer.SGD(0.1).minimize(loss)
    exe = fluid.Executor()
    exe.run(startup)
    place = fluid.CPUPlace()
    feed = {"q": fluid.create_lod_tensor(rng.random((5, 4)).astype("float32"), [[2, 3]], place),
            "t": fluid.create_lod_tensor(rng.random((7, 4)).astype("float32"), [[3, 4]], place)}
    first, = exe.run(main, feed=feed, fetch_list=[loss])
    for _ in range(3):
        last, = exe.run(main, feed=feed, fetch_list=[loss])
    # the loss is bilinear in the two weights: small SGD steps lower it
    assert np.isfinite(last).all() and float(last) < float(first)


def test_var_conv_2d_refuses_a_filter_of_another_shape():
    x = LoDTensor(np.zeros((4, 1)), lod([4]))
    row = LoDTensor(np.zeros((2, 1)), lod([2]))
    col = LoDTensor(np.zeros((2, 1)), lod([2]))
    # refused when the program is built, naming the op and every input's shape
    with pytest.raises(ShapeError, match=r"op 'var_conv_2d' .*W must be \[OutputChannel, "
                                         r"InputChannel \* KernelH \* KernelW\] = \[2, 9\]"):
        run_op("var_conv_2d", {"X": x, "ROW": row, "COLUMN": col, "W": np.zeros((2, 4))},
               {"OutputChannel": 2, "KernelH": 3, "KernelW": 3})


def test_var_conv_2d_warns_on_a_lod_that_does_not_fit():
    x = LoDTensor(np.arange(6.0).reshape(-1, 1), lod([6]))
    row = LoDTensor(np.zeros((2, 1)), lod([2]))
    col = LoDTensor(np.zeros((2, 1)), lod([2]))
    with pytest.warns(RuntimeWarning, match="sample 0 holds 6 values for an image of 1 \\* 2 "
                                            "\\* 2"):
        got = run_op("var_conv_2d", {"X": x, "ROW": row, "COLUMN": col, "W": np.ones((1, 1))})
    np.testing.assert_array_equal(got["Out"].reshape(-1), [0, 1, 2, 3])
