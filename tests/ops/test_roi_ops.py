"""roi_pool, roi_align, psroi_pool and prroi_pool against loop-by-loop numpy references of
Paddle 1.8's definitions, their numeric gradients, the three ways of saying which image a box
belongs to (ROIs' LoD, RoisLod, BatchRoINums), and bad input."""
import math

import numpy as np
import pytest

from fluidity.core.tensor import LoDTensor
from fluidity.errors import ExecutionError, ShapeError
from op_test import check_grad, check_output, run_op

rng = np.random.default_rng(26)


def c_round(v):
    return math.floor(v + 0.5) if v >= 0 else -math.floor(-v + 0.5)


def make_rois(counts, height, width, scale, min_side=2, seed=0):
    """Boxes in image coordinates (x1, y1, x2, y2), `counts[i]` for image i."""
    g = np.random.default_rng(seed)
    boxes = []
    for n in counts:
        for _ in range(n):
            x1 = g.uniform(0, width / scale - min_side)
            y1 = g.uniform(0, height / scale - min_side)
            boxes.append([x1, y1, g.uniform(x1 + min_side, width / scale),
                          g.uniform(y1 + min_side, height / scale)])
    return np.array(boxes)


# --- roi_pool -------------------------------------------------------------------------------
def roi_pool_ref(x, rois, ids, ph, pw, scale):
    n, c, h, w = x.shape
    out = np.zeros((len(rois), c, ph, pw))
    arg = np.full(out.shape, -1, np.int64)
    for r, roi in enumerate(rois):
        xs, ys, xe, ye = (c_round(v * scale) for v in roi)
        rh, rw = max(ye - ys + 1, 1), max(xe - xs + 1, 1)
        for ch in range(c):
            for i in range(ph):
                for j in range(pw):
                    hs = min(max(math.floor(i * rh / ph) + ys, 0), h)
                    he = min(max(math.ceil((i + 1) * rh / ph) + ys, 0), h)
                    ws = min(max(math.floor(j * rw / pw) + xs, 0), w)
                    we = min(max(math.ceil((j + 1) * rw / pw) + xs, 0), w)
                    if he <= hs or we <= ws:
                        continue
                    best = -np.inf
                    for yy in range(hs, he):
                        for xx in range(ws, we):
                            if x[ids[r], ch, yy, xx] > best:
                                best = x[ids[r], ch, yy, xx]
                                arg[r, ch, i, j] = yy * w + xx
                    out[r, ch, i, j] = best
    return out, arg


def test_roi_pool_forward_backward_with_lod():
    x = rng.normal(size=(3, 2, 6, 5))
    counts = [1, 2, 1]
    rois = make_rois(counts, 6, 5, 0.5)
    rois = np.round(rois)   # integer boxes: rounding of x.5 after scaling is exercised
    ids = np.repeat(np.arange(3), counts)
    attrs = {"pooled_height": 2, "pooled_width": 3, "spatial_scale": 0.5}
    out, arg = roi_pool_ref(x, rois, ids, 2, 3, 0.5)
    ins = {"X": x, "ROIs": LoDTensor(rois, [[0, 1, 3, 4]])}
    check_output("roi_pool", ins, {"Out": out, "Argmax": arg}, attrs)
    check_grad("roi_pool", ins, ["X"], attrs)


def test_roi_pool_rois_lod_input_and_empty_bins():
    x = rng.normal(size=(2, 1, 4, 4))
    # a box mostly outside the map: its outer bins are empty and give 0 / -1
    rois = np.array([[0, 0, 3, 3], [2.0, 2.0, 9.0, 9.0]])
    attrs = {"pooled_height": 3, "pooled_width": 3, "spatial_scale": 1.0}
    out, arg = roi_pool_ref(x, rois, [0, 1], 3, 3, 1.0)
    assert (arg == -1).any()
    check_output("roi_pool", {"X": x, "ROIs": rois, "RoisLod": np.array([0, 1, 2])},
                 {"Out": out, "Argmax": arg}, attrs)


# --- roi_align ------------------------------------------------------------------------------
def bilinear(plane, y, x):
    h, w = plane.shape
    if y < -1.0 or y > h or x < -1.0 or x > w:
        return 0.0
    y, x = max(y, 0.0), max(x, 0.0)
    y0, x0 = int(y), int(x)
    if y0 >= h - 1:
        y0 = y1 = h - 1
        y = float(y0)
    else:
        y1 = y0 + 1
    if x0 >= w - 1:
        x0 = x1 = w - 1
        x = float(x0)
    else:
        x1 = x0 + 1
    ly, lx = y - y0, x - x0
    return ((1 - ly) * (1 - lx) * plane[y0, x0] + (1 - ly) * lx * plane[y0, x1]
            + ly * (1 - lx) * plane[y1, x0] + ly * lx * plane[y1, x1])


def roi_align_ref(x, rois, ids, ph, pw, scale, ratio):
    c = x.shape[1]
    out = np.zeros((len(rois), c, ph, pw))
    for r, roi in enumerate(rois):
        xs, ys, xe, ye = (v * scale for v in roi)
        rw, rh = max(xe - xs, 1.0), max(ye - ys, 1.0)
        bh, bw = rh / ph, rw / pw
        gh = ratio if ratio > 0 else math.ceil(rh / ph)
        gw = ratio if ratio > 0 else math.ceil(rw / pw)
        for ch in range(c):
            for i in range(ph):
                for j in range(pw):
                    acc = 0.0
                    for a in range(gh):
                        for b in range(gw):
                            acc += bilinear(x[ids[r], ch], ys + i * bh + (a + .5) * bh / gh,
                                            xs + j * bw + (b + .5) * bw / gw)
                    out[r, ch, i, j] = acc / (gh * gw)
    return out


@pytest.mark.parametrize("ratio", [-1, 2])
def test_roi_align_forward_backward(ratio):
    x = rng.normal(size=(2, 2, 5, 6))
    rois = make_rois([2, 1], 5, 6, 0.5, seed=ratio + 3)
    rois[0] = [-3.0, -2.5, 4.0, 20.0]   # samples beyond the map's edges
    attrs = {"pooled_height": 2, "pooled_width": 2, "spatial_scale": 0.5,
             "sampling_ratio": ratio}
    want = roi_align_ref(x, rois, [0, 0, 1], 2, 2, 0.5, ratio)
    ins = {"X": x, "ROIs": LoDTensor(rois, [[0, 2, 3]])}
    check_output("roi_align", ins, {"Out": want}, attrs, atol=1e-10)
    check_grad("roi_align", ins, ["X"], attrs)
    got = run_op("roi_align", {"X": x, "ROIs": rois, "RoisLod": np.array([0, 2, 3])}, attrs)
    np.testing.assert_allclose(got["Out"], want, atol=1e-10)


# --- psroi_pool -----------------------------------------------------------------------------
def psroi_ref(x, rois, ids, oc, ph, pw, scale):
    h, w = x.shape[2:]
    out = np.zeros((len(rois), oc, ph, pw))
    for r, roi in enumerate(rois):
        xs, ys = c_round(roi[0]) * scale, c_round(roi[1]) * scale
        xe, ye = (c_round(roi[2]) + 1) * scale, (c_round(roi[3]) + 1) * scale
        bh, bw = max(ye - ys, 0.1) / ph, max(xe - xs, 0.1) / pw
        for c in range(oc):
            for i in range(ph):
                for j in range(pw):
                    hs = min(max(math.floor(i * bh + ys), 0), h)
                    he = min(max(math.ceil((i + 1) * bh + ys), 0), h)
                    ws = min(max(math.floor(j * bw + xs), 0), w)
                    we = min(max(math.ceil((j + 1) * bw + xs), 0), w)
                    if he > hs and we > ws:
                        out[r, c, i, j] = x[ids[r], (c * ph + i) * pw + j, hs:he, ws:we].mean()
    return out


def test_psroi_pool_forward_backward():
    oc, ph, pw = 2, 2, 2
    x = rng.normal(size=(2, oc * ph * pw, 6, 6))
    rois = make_rois([1, 2], 6, 6, 0.5, min_side=3, seed=9)
    attrs = {"output_channels": oc, "pooled_height": ph, "pooled_width": pw,
             "spatial_scale": 0.5}
    want = psroi_ref(x, rois, [0, 1, 1], oc, ph, pw, 0.5)
    ins = {"X": x, "ROIs": LoDTensor(rois, [[0, 1, 3]])}
    check_output("psroi_pool", ins, {"Out": want}, attrs, atol=1e-10)
    check_grad("psroi_pool", ins, ["X"], attrs)


def test_psroi_pool_channel_mismatch_is_a_shape_error():
    with pytest.raises(ShapeError, match="output_channels"):
        run_op("psroi_pool", {"X": rng.normal(size=(1, 5, 4, 4)),
                              "ROIs": LoDTensor(np.array([[0., 0, 2, 2]]), [[0, 1]])},
               {"output_channels": 2, "pooled_height": 2, "pooled_width": 1})


# --- prroi_pool -----------------------------------------------------------------------------
def prroi_ref(x, rois, ids, ph, pw, scale, steps=400):
    """Midpoint-rule integral of the bilinear surface over each bin."""
    h, w = x.shape[2:]
    c = x.shape[1]
    out = np.zeros((len(rois), c, ph, pw))

    def surface(plane, ys, xs):
        def tent_weights(pts, n):
            return np.maximum(0, 1 - np.abs(pts[:, None] - np.arange(n)[None, :]))
        return tent_weights(ys, h) @ plane @ tent_weights(xs, w).T

    for r, roi in enumerate(rois):
        xs, ys, xe, ye = (v * scale for v in roi)
        bh, bw = max(ye - ys, 0) / ph, max(xe - xs, 0) / pw
        for i in range(ph):
            for j in range(pw):
                if bh * bw <= 0:
                    continue
                yy = ys + i * bh + (np.arange(steps) + 0.5) * bh / steps
                xx = xs + j * bw + (np.arange(steps) + 0.5) * bw / steps
                for ch in range(c):
                    out[r, ch, i, j] = surface(x[ids[r], ch], yy, xx).mean()
    return out


def test_prroi_pool_forward_and_gradients_in_x_and_rois():
    x = rng.normal(size=(2, 2, 5, 5))
    rois = make_rois([1, 2], 5, 5, 0.5, seed=4)
    rois[1] = [-1.3, 1.1, 11.2, 7.9]     # past the map's edges: zeros outside X
    attrs = {"pooled_height": 2, "pooled_width": 3, "spatial_scale": 0.5}
    want = prroi_ref(x, rois, [0, 1, 1], 2, 3, 0.5)
    ins = {"X": x, "ROIs": LoDTensor(rois, [[0, 1, 3]])}
    # the midpoint rule's error: h^2/24 * |f''| per unit area, f'' concentrated at the kinks
    check_output("prroi_pool", ins, {"Out": want}, attrs, atol=1e-4)
    check_grad("prroi_pool", ins, ["X", "ROIs"], attrs)
    counts = {"X": x, "ROIs": rois, "BatchRoINums": np.array([1, 2], np.int64)}
    np.testing.assert_allclose(run_op("prroi_pool", counts, attrs)["Out"],
                               run_op("prroi_pool", ins, attrs)["Out"])
    check_grad("prroi_pool", counts, ["ROIs"], attrs)


def test_prroi_pool_empty_box_gives_zero():
    x = rng.normal(size=(1, 1, 4, 4))
    rois = LoDTensor(np.array([[2.0, 2.0, 1.0, 3.0]]), [[0, 1]])   # x2 < x1
    out = run_op("prroi_pool", {"X": x, "ROIs": rois}, {"pooled_height": 1, "pooled_width": 1})
    np.testing.assert_array_equal(out["Out"], np.zeros((1, 1, 1, 1)))


# --- which image a box belongs to -----------------------------------------------------------
@pytest.mark.parametrize("op", ["roi_pool", "roi_align", "psroi_pool", "prroi_pool"])
def test_boxes_without_images_are_refused(op):
    x = rng.normal(size=(2, 4, 4, 4))
    rois = np.array([[0.0, 0, 2, 2]])
    attrs = {"output_channels": 4} if op == "psroi_pool" else {}
    with pytest.raises(ExecutionError, match="LoD|BatchRoINums"):
        run_op(op, {"X": x, "ROIs": rois}, attrs)
    with pytest.raises(ExecutionError, match="images"):
        run_op(op, {"X": x, "ROIs": LoDTensor(rois, [[0, 1]])}, attrs)


def test_rois_lod_must_cover_the_boxes():
    x = rng.normal(size=(2, 1, 4, 4))
    with pytest.raises(ExecutionError, match="RoisLod"):
        run_op("roi_align", {"X": x, "ROIs": np.zeros((3, 4)), "RoisLod": np.array([0, 1, 2])})


def test_bad_shapes_and_attributes_fail_when_built():
    with pytest.raises(ShapeError, match="ROIs must be a 2-D"):
        run_op("roi_pool", {"X": np.zeros((1, 1, 2, 2)), "ROIs": np.zeros((2, 5))})
    with pytest.raises(ShapeError, match="pooled_height"):
        run_op("roi_align", {"X": np.zeros((1, 1, 2, 2)), "ROIs": np.zeros((2, 4))},
               {"pooled_height": 0})
    with pytest.raises(ShapeError, match="4-D"):
        run_op("prroi_pool", {"X": np.zeros((1, 2, 2)), "ROIs": np.zeros((2, 4))})


# --- roi_perspective_transform --------------------------------------------------------------
def homography(src, dst):
    """The 3 x 3 matrix taking the 4 points src to dst (solved, h33 = 1)."""
    a, b = [], []
    for (u, v), (x, y) in zip(src, dst):
        a.append([u, v, 1, 0, 0, 0, -u * x, -v * x])
        a.append([0, 0, 0, u, v, 1, -u * y, -v * y])
        b += [x, y]
    return np.append(np.linalg.solve(np.array(a, float), np.array(b, float)), 1).reshape(3, 3)


def test_roi_perspective_transform_matrix_samples_and_gradient():
    th, tw, scale = 3, 4, 0.5
    x = rng.normal(size=(2, 2, 8, 9))
    rois = np.array([[2.0, 2.0, 14.0, 3.0, 13.0, 11.0, 1.0, 10.0],     # a skewed quad
                     [4.0, 4.0, 12.0, 4.0, 12.0, 8.0, 4.0, 8.0]])      # a rectangle
    attrs = {"transformed_height": th, "transformed_width": tw, "spatial_scale": scale}
    ins = {"X": x, "ROIs": LoDTensor(rois, [[0, 1, 2]])}
    got = run_op("roi_perspective_transform", ins, attrs,
                 outputs=["Out", "Mask", "TransformMatrix", "Out2InIdx", "Out2InWeights"])
    for r, b in ((0, 0), (1, 1)):
        q = rois[r].reshape(4, 2) * scale
        sides = np.linalg.norm(q - np.roll(q, -1, axis=0), axis=1)
        nw = max(2, min(int(np.floor(((sides[0] + sides[2]) / 2) * (th - 1) /
                                     ((sides[1] + sides[3]) / 2) + 0.5)) + 1, tw))
        hm = homography([(0, 0), (nw - 1, 0), (nw - 1, th - 1), (0, th - 1)], q)
        np.testing.assert_allclose(got["TransformMatrix"][r].reshape(3, 3) / 1.0, hm,
                                   rtol=1e-3, atol=1e-4)     # Paddle's 1e-5 in the divisor
        for oh in range(th):
            for ow in range(tw):
                u, v, z = hm @ [ow, oh, 1]
                sx, sy = u / z, v / z
                if got["Mask"][r, 0, oh, ow]:
                    want = [bilinear(x[b, c], sy, sx) for c in range(2)]
                    np.testing.assert_allclose(got["Out"][r, :, oh, ow], want, atol=1e-3)
                else:
                    assert (got["Out"][r, :, oh, ow] == 0).all()
    assert got["Mask"].sum() > 0
    check_grad("roi_perspective_transform", ins, ["X"], attrs, output_slots=["Out"])
