"""Fluid 1.x loss layers (rank_loss, margin_rank_loss, bpr_loss, kldiv_loss,
teacher_student_sigmoid_loss, mse_loss, npair_loss, dice_loss) and label_smooth, cos_sim,
l2_normalize: built as Fluid programs call them, run against numpy, and trained through."""
import numpy as np
import pytest

import fluidity as fluid
from layer_programs import run_built

L = fluid.layers
rng = np.random.default_rng(2)


_run = run_built


def _scalar(v):
    return float(np.asarray(v).reshape(-1)[0])


def test_loss_layers_forward():
    a = rng.normal(size=(4, 3)).astype(np.float32)
    b = rng.normal(size=(4, 3)).astype(np.float32)
    lab = np.array([[1], [0], [2], [1]], np.int64)

    def build():
        av, bv = L.data("a", [3]), L.data("b", [3])
        lv = L.data("lab", [1], dtype="int64")
        left, right = L.slice(av, [1], [0], [1]), \
            L.slice(bv, [1], [0], [1])
        ones = L.fill_constant_batch_size_like(av, [-1, 1], "float32", 1.0)
        prob = L.softmax(av)
        return [L.rank_loss(ones, left, right), L.margin_rank_loss(ones, left, right, 0.2),
                L.bpr_loss(av, lv), L.kldiv_loss(L.log(prob), L.softmax(bv), "batchmean"),
                L.mse_loss(av, bv), L.dice_loss(prob, lv), L.npair_loss(av, bv, lv, 0.01),
                L.label_smooth(L.one_hot(lv, 3), epsilon=0.3), L.cos_sim(av, bv),
                L.l2_normalize(av, axis=1)]
    rk, mr, bpr, kl, mse, dice, npair, ls, cs, l2 = _run(build, {"a": a, "b": b, "lab": lab})
    o = a[:, :1] - b[:, :1]
    np.testing.assert_allclose(rk, np.log1p(np.exp(o)) - o, rtol=1e-5)
    np.testing.assert_allclose(mr, np.maximum(0, -o + 0.2), rtol=1e-5, atol=1e-7)
    assert bpr.shape == (4, 1)
    pa = np.exp(a) / np.exp(a).sum(1, keepdims=True)
    pb = np.exp(b) / np.exp(b).sum(1, keepdims=True)
    np.testing.assert_allclose(_scalar(kl), (pb * (np.log(pb) - np.log(pa))).sum() / 4,
                               rtol=1e-4)
    np.testing.assert_allclose(_scalar(mse), ((a - b) ** 2).mean(), rtol=1e-5)
    oh = np.eye(3)[lab[:, 0]]
    dice_want = np.mean(1 - 2 * (pa * oh).sum(1) / (pa.sum(1) + oh.sum(1) + 1e-5))
    np.testing.assert_allclose(_scalar(dice), dice_want, rtol=1e-5)
    same = (lab == lab.T).astype(np.float64)
    same /= same.sum(1, keepdims=True)
    sim = a @ b.T
    logp = sim - np.log(np.exp(sim).sum(1, keepdims=True))
    ce = -(same * logp).sum(1, keepdims=True)
    want = 0.25 * 0.01 * ((a ** 2).sum(1).mean() + (b ** 2).sum(1).mean()) + \
        (same * ce).sum(0).mean()
    np.testing.assert_allclose(_scalar(npair), want, rtol=1e-4)
    np.testing.assert_allclose(ls, 0.7 * oh + 0.1, rtol=1e-6)
    np.testing.assert_allclose(cs[:, 0], (a * b).sum(1) / np.linalg.norm(a, axis=1) /
                               np.linalg.norm(b, axis=1), rtol=1e-5)
    np.testing.assert_allclose(l2, a / np.linalg.norm(a, axis=1, keepdims=True), rtol=1e-5)


def test_a_loss_layer_trains():
    x = rng.normal(size=(8, 4)).astype(np.float32)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xv = L.data("x", [4])
        left = L.fc(xv, 1)
        right = L.fc(xv, 1)
        ones = L.fill_constant_batch_size_like(xv, [-1, 1], "float32", 1.0)
        loss = L.mean(L.rank_loss(ones, left, right))
        fluid.optimizer.SGD(0.5).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    losses = [_scalar(exe.run(main, feed={"x": x}, fetch_list=[loss])[0]) for _ in range(15)]
    assert losses[-1] < losses[0] * 0.5


def test_loss_layers_refuse_bad_arguments():
    with pytest.raises(ValueError, match="kldiv_loss: 'reduction'"):
        _run(lambda: [L.kldiv_loss(L.zeros([2], "float32"), L.zeros([2], "float32"), "avg")],
             {})
    with pytest.raises(TypeError, match="rank_loss: 'left' must be a Variable"):
        _run(lambda: [L.rank_loss(L.zeros([2], "float32"), 1.0, L.zeros([2], "float32"))], {})
    with pytest.raises(TypeError, match="sampled_softmax_with_cross_entropy: 'logits' must"):
        L.sampled_softmax_with_cross_entropy(None, None, 2)


def test_warpctc_trains_an_image_to_sequence_model():
    img = rng.normal(size=(2, 1, 4, 8)).astype(np.float32)
    label = fluid.create_lod_tensor(np.array([[1], [2], [2]], np.int32), [[2, 1]],
                                    fluid.CPUPlace())
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xv = L.data("img", [1, 4, 8])
        lv = L.data("label", [1], dtype="int32", lod_level=1)
        seq = L.im2sequence(xv, filter_size=[4, 2], stride=[4, 2])   # 4 steps an image
        logits = L.fc(seq, 3)
        loss = L.mean(L.warpctc(logits, lv, blank=0))
        fluid.optimizer.Adam(0.05).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    losses = [_scalar(exe.run(main, feed={"img": img, "label": label}, fetch_list=[loss])[0])
              for _ in range(20)]
    assert losses[-1] < 0.5 * losses[0]


def test_ctc_greedy_decoder():
    probs = np.array([[.1, .8, .1], [.1, .8, .1], [.9, .05, .05], [.1, .1, .8],
                      [.9, .05, .05], [.2, .2, .6]], np.float32)
    x = fluid.create_lod_tensor(probs, [[4, 2]], fluid.CPUPlace())
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xv = L.data("x", [3], lod_level=1)
        out = L.ctc_greedy_decoder(xv, blank=0)
        padded = L.data("p", [2, 3, 3], append_batch_size=False)
        lens = L.data("n", [2, 1], dtype="int64", append_batch_size=False)
        pout, plen = L.ctc_greedy_decoder(padded, 0, input_length=lens, padding_value=-1)
    got = fluid.Executor().run(main, feed={"x": x, "p": probs.reshape(2, 3, 3),
                                           "n": np.array([[3], [2]], np.int64)},
                               fetch_list=[out, pout, plen], return_numpy=False)
    assert np.array(got[0]).reshape(-1).tolist() == [1, 2, 2] and got[0].lod() == [[0, 2, 3]]
    assert np.array(got[1]).tolist() == [[1, -1, -1], [2, -1, -1]]
    assert np.array(got[2]).reshape(-1).tolist() == [1, 1]


def test_edit_distance_layer():
    h = fluid.create_lod_tensor(np.array([[1], [2], [3]], np.int64), [[3]], fluid.CPUPlace())
    r = fluid.create_lod_tensor(np.array([[1], [3]], np.int64), [[2]], fluid.CPUPlace())
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        hv = L.data("h", [1], dtype="int64", lod_level=1)
        rv = L.data("r", [1], dtype="int64", lod_level=1)
        dist, num = L.edit_distance(hv, rv, normalized=False)
    d, n = fluid.Executor().run(main, feed={"h": h, "r": r}, fetch_list=[dist, num])
    assert d.reshape(-1).tolist() == [1.0] and n.tolist() == [1]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_center_loss_moves_centers_and_trains(seed):
    # its own generator and seeds: the module's shared rng depends on which tests ran first
    r = np.random.default_rng(seed)
    x = (r.normal(size=(6, 2)) + np.repeat([[3, 3], [-3, -3]], 3, axis=0)).astype(np.float32)
    lab = np.array([[0]] * 3 + [[1]] * 3, np.int64)
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = main.random_seed = seed + 1   # before building, as in Fluid
    with fluid.program_guard(main, startup):
        xv, lv = L.data("x", [2]), L.data("lab", [1], dtype="int64")
        feat = L.fc(xv, 2)
        loss = L.mean(L.center_loss(feat, lv, 2, 0.5,
                                    param_attr=fluid.ParamAttr(
                                        initializer=fluid.initializer.Constant(0.0))))
        fluid.optimizer.SGD(0.05).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    losses = [_scalar(exe.run(main, feed={"x": x, "lab": lab}, fetch_list=[loss])[0])
              for _ in range(15)]
    assert losses[-1] < 0.2 * losses[0]
