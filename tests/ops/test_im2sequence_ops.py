"""im2sequence with the images' real sizes (input Y, attribute out_stride; Fluid's
im2sequence(input_image_size=...)): each image gives the top-left patches covering its real
size, against a loop reference, with its numeric gradient; a batch of one ignores Y as
Paddle does; and the layer builds and runs so."""
import numpy as np

import fluidity as fluid
from op_test import check_grad, run_op

rng = np.random.default_rng(16)


def patches_ref(img, rows, cols, k, s, p):
    c, h, w = img.shape
    out = []
    for r in range(rows):
        for q in range(cols):
            patch = np.zeros((c, k[0], k[1]))
            for a in range(k[0]):
                for b in range(k[1]):
                    y, x = r * s[0] - p[0] + a, q * s[1] - p[1] + b
                    if 0 <= y < h and 0 <= x < w:
                        patch[:, a, b] = img[:, y, x]
            out.append(patch.reshape(-1))
    return np.array(out).reshape(rows * cols, -1)


def test_real_sizes_select_each_images_patches():
    x = rng.normal(size=(3, 2, 5, 6))
    y = np.array([[5, 6], [3, 4], [4, 7]], np.float32)
    k, s, p, o = [2, 3], [1, 2], [1, 0, 1, 1], [2, 1]
    attrs = {"kernels": k, "strides": s, "paddings": p, "out_stride": o}
    want, lod = [], [0]
    for img, (h, w) in zip(x, y):
        h, w = -(-int(h) // o[0]), -(-int(w) // o[1])
        rows = (h + p[0] + p[2] - k[0]) // s[0] + 1
        cols = (w + p[1] + p[3] - k[1]) // s[1] + 1
        want.append(patches_ref(img, rows, cols, k, s, p))
        lod.append(lod[-1] + rows * cols)
    got = run_op("im2sequence", {"X": x, "Y": y}, attrs, return_lod=True)
    np.testing.assert_array_equal(got["Out"]._array, np.concatenate(want))
    assert got["Out"]._lod == [lod]
    check_grad("im2sequence", {"X": x, "Y": y}, ["X"], attrs)


def test_a_batch_of_one_ignores_real_sizes():
    x = rng.normal(size=(1, 1, 4, 4))
    attrs = {"kernels": [2, 2], "strides": [2, 2], "paddings": [0, 0, 0, 0], "out_stride": [2, 2]}
    with_y = run_op("im2sequence", {"X": x, "Y": np.array([[2.0, 2.0]])}, attrs)
    without = run_op("im2sequence", {"X": x}, attrs)
    np.testing.assert_array_equal(with_y["Out"], without["Out"])


def test_layer_with_input_image_size():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        img = fluid.layers.data("img", [1, 4, 4])
        size = fluid.layers.data("size", [2])
        out = fluid.layers.im2sequence(img, filter_size=2, stride=2, input_image_size=size,
                                       out_stride=1)
    x = rng.normal(size=(2, 1, 4, 4)).astype(np.float32)
    (got,) = fluid.Executor(fluid.CPUPlace()).run(
        main, feed={"img": x, "size": np.array([[4, 4], [2, 4]], np.float32)},
        fetch_list=[out], return_numpy=False)
    assert got.lod() == [[0, 4, 6]]
    np.testing.assert_array_equal(np.asarray(got)[4:], patches_ref(x[1], 1, 2, [2, 2], [2, 2],
                                                                  [0, 0]))
