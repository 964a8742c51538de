"""Sequence ops beyond sequence_pool: forward against plain numpy loops over the sequences,
gradients against finite differences, LoD of the outputs, and errors that name the op."""
import numpy as np
import pytest

from fluidity.core.tensor import LoDTensor
from fluidity.errors import ExecutionError, FeedError
from op_test import check_grad, run_op

rng = np.random.default_rng(1)


def lod_t(x, *lens):
    t = LoDTensor(np.asarray(x))
    t.set_recursive_sequence_lengths([list(level) for level in lens])
    return t


def seqs(x, lens):
    """Split rows of x into a list of sequences."""
    return np.split(x, np.cumsum(lens)[:-1])


def run(op, inputs, attrs=None, outputs=None):
    """Run one op; returns {slot: LoDTensor}."""
    return run_op(op, inputs, attrs, outputs, return_lod=True)


def lengths(t):
    return t.recursive_sequence_lengths()


# --- sequence_softmax -----------------------------------------------------------------------
@pytest.mark.parametrize("lens", [[3, 1, 4], [2, 0, 3]])
@pytest.mark.parametrize("shape", [(1,), ()])
def test_sequence_softmax(lens, shape):
    x = rng.normal(size=(sum(lens),) + shape).astype(np.float32)
    out = run("sequence_softmax", {"X": lod_t(x, lens)})["Out"]
    want = np.concatenate([np.exp(s) / np.exp(s).sum() for s in seqs(x, lens)])
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-5)
    assert lengths(out) == [lens]
    check_grad("sequence_softmax", {"X": lod_t(x, lens)}, ["X"])


def test_sequence_softmax_two_levels_uses_last():
    x = rng.normal(size=(5, 1)).astype(np.float32)
    out = run("sequence_softmax", {"X": lod_t(x, [1, 1], [2, 3])})["Out"]
    want = np.concatenate([np.exp(s) / np.exp(s).sum() for s in seqs(x, [2, 3])])
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-5)
    assert lengths(out) == [[1, 1], [2, 3]]


# --- sequence_expand / expand_as -------------------------------------------------------------
def test_sequence_expand_x_with_lod():
    """Paddle's doc case 1: x.lod [[2, 2]], y.lod [[2, 2], [3, 3, 1, 1]], ref_level 0."""
    x = np.arange(4, dtype=np.float32).reshape(4, 1)
    y = lod_t(np.zeros((8, 1), np.float32), [2, 2], [3, 3, 1, 1])
    out = run("sequence_expand", {"X": lod_t(x, [2, 2]), "Y": y}, {"ref_level": 0})["Out"]
    np.testing.assert_array_equal(np.asarray(out).ravel(), [0, 1, 0, 1, 2, 3, 2, 3])
    assert lengths(out) == [[2, 2, 2, 2]]
    # ref_level -1 (last): x sequences of 1 row repeated 3, 3, 1, 1 times
    x4 = lod_t(x, [1, 1, 1, 1])
    out = run("sequence_expand", {"X": x4, "Y": y}, {"ref_level": -1})["Out"]
    np.testing.assert_array_equal(np.asarray(out).ravel(), [0, 0, 0, 1, 1, 1, 2, 3])
    check_grad("sequence_expand", {"X": lod_t(rng.normal(size=(4, 2)), [2, 2]), "Y": y}, ["X"],
               {"ref_level": 0})


def test_sequence_expand_plain_x():
    """Paddle's doc case 2: rows of a plain X repeated by Y's lengths [2, 0, 3]; no LoD out."""
    x = rng.normal(size=(3, 2))
    y = lod_t(np.zeros((5, 1)), [2, 0, 3])
    out = run("sequence_expand", {"X": x, "Y": y})["Out"]
    np.testing.assert_allclose(np.asarray(out), x[[0, 0, 2, 2, 2]])
    assert lengths(out) == []
    check_grad("sequence_expand", {"X": x, "Y": y}, ["X"])


def test_sequence_expand_as():
    x = rng.normal(size=(3, 2))
    y = lod_t(np.zeros((5, 1)), [2, 0, 3])
    out = run("sequence_expand_as", {"X": x, "Y": y})["Out"]
    np.testing.assert_allclose(np.asarray(out), np.repeat(x, [2, 0, 3], axis=0))
    assert lengths(out) == [[2, 0, 3]]
    check_grad("sequence_expand_as", {"X": x, "Y": y}, ["X"])


# --- sequence_concat ------------------------------------------------------------------------
def test_sequence_concat():
    a, b = rng.normal(size=(3, 2)), rng.normal(size=(4, 2))
    ins = {"X": [("a", lod_t(a, [1, 2])), ("b", lod_t(b, [3, 1]))]}
    out = run("sequence_concat", ins)["Out"]
    want = np.concatenate([a[:1], b[:3], a[1:], b[3:]])
    np.testing.assert_allclose(np.asarray(out), want)
    assert lengths(out) == [[4, 3]]
    check_grad("sequence_concat", ins, [("X", 0), ("X", 1)])


def test_sequence_concat_mismatched_counts():
    ins = {"X": [("a", lod_t(np.ones((3, 1)), [1, 2])), ("b", lod_t(np.ones((3, 1)), [3]))]}
    with pytest.raises(ExecutionError, match="sequence_concat"):
        run("sequence_concat", ins)


# --- sequence_reshape -----------------------------------------------------------------------
def test_sequence_reshape():
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    out = run("sequence_reshape", {"X": lod_t(x, [2, 4])}, {"new_dim": 4})["Out"]
    np.testing.assert_array_equal(np.asarray(out), x.reshape(3, 4))
    assert lengths(out) == [[1, 2]]
    out = run("sequence_reshape", {"X": lod_t(x, [2, 4])}, {"new_dim": 1})["Out"]
    assert lengths(out) == [[4, 8]]
    check_grad("sequence_reshape", {"X": lod_t(rng.normal(size=(6, 2)), [2, 4])}, ["X"],
               {"new_dim": 4})
    with pytest.raises(ExecutionError, match="sequence_reshape"):
        run("sequence_reshape", {"X": lod_t(x, [1, 5])}, {"new_dim": 4})


# --- sequence_slice -------------------------------------------------------------------------
def test_sequence_slice():
    lens = [3, 4, 2]
    x = rng.normal(size=(9, 2))
    offset = np.array([[0], [1], [2]], np.int64)
    length = np.array([[2], [3], [0]], np.int64)
    ins = {"X": lod_t(x, lens), "Offset": offset, "Length": length}
    out = run("sequence_slice", ins)["Out"]
    want = np.concatenate([s[o:o + n] for s, o, n in zip(seqs(x, lens), offset.ravel(),
                                                          length.ravel())])
    np.testing.assert_allclose(np.asarray(out), want)
    assert lengths(out) == [[2, 3, 0]]
    check_grad("sequence_slice", ins, ["X"])
    bad = dict(ins, Length=np.array([[4], [1], [1]], np.int64))
    with pytest.raises(ExecutionError, match="sequence_slice: slices"):
        run("sequence_slice", bad)


# --- sequence_reverse -----------------------------------------------------------------------
def test_sequence_reverse():
    lens = [3, 0, 1, 4]
    x = rng.normal(size=(8, 3))
    out = run("sequence_reverse", {"X": lod_t(x, lens)})["Y"]
    np.testing.assert_allclose(np.asarray(out),
                               np.concatenate([s[::-1] for s in seqs(x, lens)]))
    assert lengths(out) == [lens]
    check_grad("sequence_reverse", {"X": lod_t(x, lens)}, ["X"])


# --- sequence_pad / unpad -------------------------------------------------------------------
@pytest.mark.parametrize("padded_length", [-1, 5])
@pytest.mark.parametrize("pad_row", [False, True])
def test_sequence_pad(padded_length, pad_row):
    lens = [2, 0, 4]
    x = rng.normal(size=(6, 3))
    pv = rng.normal(size=(3,)) if pad_row else np.array([-1.0])
    got = run("sequence_pad", {"X": lod_t(x, lens), "PadValue": pv},
              {"padded_length": padded_length})
    width = max(lens) if padded_length == -1 else padded_length
    want = np.empty((3, width, 3))
    want[...] = pv
    for i, s in enumerate(seqs(x, lens)):
        want[i, :len(s)] = s
    np.testing.assert_allclose(np.asarray(got["Out"]), want)
    np.testing.assert_array_equal(np.asarray(got["Length"]), lens)
    assert np.asarray(got["Length"]).dtype == np.int64
    check_grad("sequence_pad", {"X": lod_t(x, lens), "PadValue": pv}, ["X"],
               {"padded_length": padded_length}, output_slots=["Out"])


def test_sequence_pad_too_short():
    with pytest.raises(ExecutionError, match="sequence_pad: padded_length 2"):
        run("sequence_pad", {"X": lod_t(np.ones((4, 1)), [1, 3]), "PadValue": np.zeros(1)},
            {"padded_length": 2})


def test_sequence_unpad_roundtrip():
    x = rng.normal(size=(3, 4, 2))
    n = np.array([2, 4, 0], np.int64)
    out = run("sequence_unpad", {"X": x, "Length": n})["Out"]
    np.testing.assert_allclose(np.asarray(out), np.concatenate([x[0, :2], x[1, :4]]))
    assert lengths(out) == [[2, 4, 0]]
    check_grad("sequence_unpad", {"X": x, "Length": n}, ["X"])
    back = run("sequence_pad", {"X": out, "PadValue": np.zeros(1)}, {"padded_length": 4})
    np.testing.assert_allclose(np.asarray(back["Out"])[1], x[1])


# --- sequence_mask / enumerate --------------------------------------------------------------
def test_sequence_mask():
    x = np.array([[1, 3], [0, 2]], np.int64)
    y = np.asarray(run("sequence_mask", {"X": x}, {"maxlen": -1, "out_dtype": 5})["Y"])
    assert y.dtype == np.float32 and y.shape == (2, 2, 3)
    np.testing.assert_array_equal(y, np.arange(3) < x[..., None])
    y = np.asarray(run("sequence_mask", {"X": np.array([1, 3, 0], np.int32)},
                       {"maxlen": 4})["Y"])
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, [[1, 0, 0, 0], [1, 1, 1, 0], [0, 0, 0, 0]])


def test_sequence_enumerate():
    x = lod_t(np.array([[1], [2], [3], [4], [5]], np.int64), [2, 3])
    out = run("sequence_enumerate", {"X": x}, {"win_size": 2, "pad_value": 0})["Out"]
    np.testing.assert_array_equal(np.asarray(out), [[1, 2], [2, 0], [3, 4], [4, 5], [5, 0]])
    assert lengths(out) == [[2, 3]]


# --- lod_reset ------------------------------------------------------------------------------
def test_lod_reset():
    x = rng.normal(size=(5, 1))
    t = lod_t(x, [2, 3])
    out = run("lod_reset", {"X": t}, {"target_lod": [0, 1, 5]})["Out"]
    np.testing.assert_allclose(np.asarray(out), x)
    assert lengths(out) == [[1, 4]]
    out = run("lod_reset", {"X": t}, {"target_lod": [0, 1, 5], "append": True})["Out"]
    assert lengths(out) == [[2, 3], [1, 4]]
    out = run("lod_reset", {"X": t, "Y": np.array([0, 4, 5], np.int32)})["Out"]
    assert lengths(out) == [[4, 1]]
    out = run("lod_reset", {"X": t, "Y": lod_t(np.zeros((5, 1)), [1, 1], [1, 4])})["Out"]
    assert lengths(out) == [[1, 1], [1, 4]]
    check_grad("lod_reset", {"X": t}, ["X"], {"target_lod": [0, 1, 5]})
    with pytest.raises(ExecutionError, match="lod_reset: target LoD"):
        run("lod_reset", {"X": t}, {"target_lod": [0, 1, 4]})


# --- sequence_conv --------------------------------------------------------------------------
def conv_ref(x, lens, filt, k, start, pad=None):
    """A loop over sequences and rows: the context window, zeros or padding rows outside."""
    m = x.shape[1]
    up = max(0, -start)
    rows = []
    for s in seqs(x, lens):
        n = len(s)
        for r in range(n):
            ctx = []
            for j in range(k):
                p = r + start + j
                if 0 <= p < n:
                    ctx.append(s[p])
                elif pad is None:
                    ctx.append(np.zeros(m))
                else:
                    ctx.append(pad[up + p] if p < 0 else pad[up + p - n])
            rows.append(np.concatenate(ctx))
    return np.array(rows) @ filt


@pytest.mark.parametrize("k,start", [(3, -1), (4, -2), (3, 2), (3, -5), (1, 0)])
@pytest.mark.parametrize("trainable", [False, True])
def test_sequence_conv(k, start, trainable):
    lens, m, n = [2, 1, 3, 0], 2, 3
    x = rng.normal(size=(sum(lens), m))
    filt = rng.normal(size=(k * m, n))
    attrs = {"contextLength": k, "contextStart": start, "contextStride": 1,
             "paddingTrainable": trainable}
    ins = {"X": lod_t(x, lens), "Filter": filt}
    pad = None
    if trainable:
        pad = rng.normal(size=(max(0, -start) + max(0, start + k - 1), m))
        if not len(pad):
            pytest.skip("no padding rows in this window")
        ins["PaddingData"] = pad
    out = run("sequence_conv", ins, attrs)["Out"]
    np.testing.assert_allclose(np.asarray(out), conv_ref(x, lens, filt, k, start, pad),
                               rtol=1e-6, atol=1e-9)
    assert lengths(out) == [lens]
    check_grad("sequence_conv", ins, ["X", "Filter"] + (["PaddingData"] if trainable else []),
               attrs)


def test_sequence_conv_matches_paddle_padding_rows():
    """Values Paddle 2.6 computes for contextLength 4, contextStart -2 with trainable padding
    (identity filter, so Out shows the context rows)."""
    x = np.arange(10, dtype=np.float32).reshape(5, 2)
    pad = -1 - np.arange(6, dtype=np.float32).reshape(3, 2)
    out = run("sequence_conv", {"X": lod_t(x, [2, 3]), "PaddingData": pad,
                                "Filter": np.eye(8, dtype=np.float32)},
              {"contextLength": 4, "contextStart": -2, "paddingTrainable": True})["Out"]
    np.testing.assert_array_equal(np.asarray(out), [
        [-1, -2, -3, -4, 0, 1, 2, 3], [-3, -4, 0, 1, 2, 3, -5, -6],
        [-1, -2, -3, -4, 4, 5, 6, 7], [-3, -4, 4, 5, 6, 7, 8, 9],
        [4, 5, 6, 7, 8, 9, -5, -6]])


# --- inputs without LoD ---------------------------------------------------------------------
@pytest.mark.parametrize("op,inputs,attrs,out", [
    ("sequence_softmax", {"X": np.ones((3, 1))}, {}, "Out"),
    ("sequence_reverse", {"X": np.ones((3, 1))}, {}, "Y"),
    ("sequence_reshape", {"X": np.ones((3, 2))}, {"new_dim": 1}, "Out"),
    ("sequence_pad", {"X": np.ones((3, 2)), "PadValue": np.zeros(1)}, {}, "Out"),
    ("sequence_conv", {"X": np.ones((3, 2)), "Filter": np.ones((6, 1))}, {}, "Out"),
    ("sequence_enumerate", {"X": np.ones((3, 1), np.int64)}, {}, "Out"),
    ("sequence_expand_as", {"X": np.ones((3, 2)), "Y": np.ones((3, 1))}, {}, "Out"),
    ("sequence_slice", {"X": np.ones((3, 2)), "Offset": np.zeros((1, 1), np.int64),
                        "Length": np.ones((1, 1), np.int64)}, {}, "Out"),
])
def test_needs_lod(op, inputs, attrs, out):
    with pytest.raises(ExecutionError, match=f"{op}: input [XY] has no LoD"):
        run(op, inputs, attrs, outputs=[out] + (["Length"] if op == "sequence_pad" else []))


def test_lod_that_does_not_cover_rows():
    """A fed LoD is checked before any op reads it: the feed is refused, naming it."""
    t = LoDTensor(np.ones((4, 1)), [[0, 1, 3]])
    with pytest.raises(FeedError, match="feed 'x_in': LoD level 0 ends at 3 but the tensor "
                                        "has 4 rows"):
        run("sequence_reverse", {"X": t})


# --- layers ---------------------------------------------------------------------------------
def test_sequence_layers_build_and_train():
    """The sequence layers chain in one program (shapes and LoD flow through), and a model
    using sequence_conv + sequence_softmax attention trains."""
    import fluidity as fluid
    L = fluid.layers
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [3], lod_level=1)
        y = L.data("y", [1])
        conv = L.sequence_conv(x, 4, filter_size=3, act="tanh")
        assert list(conv.shape) == [-1, 4] and conv.lod_level == 1
        att = L.sequence_softmax(L.fc(conv, 1))
        weighted = L.elementwise_mul(conv, att, axis=0)
        pooled = L.sequence_pool(L.sequence_reverse(weighted), "sum")
        padded, length = L.sequence_pad(conv, L.fill_constant([1], "float32", 0.0))
        mask = L.sequence_mask(length, dtype="float32")
        back = L.sequence_unpad(padded, length)
        twice = L.sequence_concat([back, L.lod_reset(conv, y=x)])
        extra = L.sequence_pool(L.sequence_reshape(twice, 2), "average")
        pred = L.fc(pooled, 1) + L.reduce_sum(extra, dim=1, keep_dim=True) * 0.0
        loss = L.mean(L.square_error_cost(pred, y))
        fluid.optimizer.Adam(0.05).minimize(loss)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    lens = [3, 1, 4, 2]
    xv = lod_t(rng.normal(size=(10, 3)).astype(np.float32), lens)
    yv = np.array([[1.0], [-1.0], [0.5], [0.0]], np.float32)
    m, = exe.run(main, feed={"x": xv, "y": yv}, fetch_list=[mask], scope=scope)
    np.testing.assert_array_equal(m, np.arange(4) < np.array(lens)[:, None])
    losses = [float(exe.run(main, feed={"x": xv, "y": yv}, fetch_list=[loss],
                            scope=scope)[0]) for _ in range(40)]
    assert losses[-1] < 0.1 * losses[0]


def test_two_level_lod_ops_use_the_last_level():
    """With lod [[2, 1], [2, 0, 3]] the row-level ops work on the 3 inner sequences and keep
    the outer level."""
    x = rng.normal(size=(5, 2))
    t = lod_t(x, [2, 1], [2, 0, 3])
    rev = run("sequence_reverse", {"X": t})["Y"]
    np.testing.assert_allclose(np.asarray(rev), x[[1, 0, 4, 3, 2]])
    assert lengths(rev) == [[2, 1], [2, 0, 3]]
    conv = run("sequence_conv", {"X": t, "Filter": rng.normal(size=(6, 1))},
               {"contextStart": -1})["Out"]
    assert lengths(conv) == [[2, 1], [2, 0, 3]]
    sl = run("sequence_slice", {"X": t, "Offset": np.zeros((3, 1), np.int64),
                                "Length": np.array([[1], [0], [2]], np.int64)})["Out"]
    assert lengths(sl) == [[2, 1], [1, 0, 2]]


@pytest.mark.parametrize("op,inputs,attrs,out", [
    ("sequence_conv", {"Filter": np.ones((6, 3))}, {"contextStart": -1}, "Out"),
    ("sequence_softmax", {}, {}, "Out"),
    ("sequence_reverse", {}, {}, "Y"),
])
def test_empty_batch(op, inputs, attrs, out):
    width = 1 if op == "sequence_softmax" else 2
    t = LoDTensor(np.zeros((0, width)), [[0, 0, 0]])
    got = run(op, dict(inputs, X=t), attrs)[out]
    assert np.asarray(got).shape[0] == 0 and lengths(got) == [[0, 0]]


# --- sequence_scatter / lod_append ------------------------------------------------------------
def test_sequence_scatter():
    """Paddle's doc case: X zeros [3, 6], Ids lod [[3, 1, 2]]."""
    x = rng.normal(size=(3, 6))
    ids = np.array([[0], [1], [2], [5], [4], [1]], np.int64)
    upd = rng.normal(size=(6, 1))
    out = run("sequence_scatter", {"X": x, "Ids": lod_t(ids, [3, 1, 2]),
                                   "Updates": lod_t(upd, [3, 1, 2])})["Out"]
    want = x.copy()
    for r, c, u in zip([0, 0, 0, 1, 2, 2], ids.ravel(), upd.ravel()):
        want[r, c] += u
    np.testing.assert_allclose(np.asarray(out), want)
    check_grad("sequence_scatter", {"X": x, "Ids": lod_t(ids, [3, 1, 2]),
                                    "Updates": lod_t(upd, [3, 1, 2])}, ["X", "Updates"])
    with pytest.raises(ExecutionError, match="one sequence per row"):
        run("sequence_scatter", {"X": x, "Ids": lod_t(ids, [5, 1]),
                                 "Updates": lod_t(upd, [5, 1])})


def test_lod_append_layer():
    import fluidity as fluid
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", [1], lod_level=1)
        out = fluid.layers.lod_append(x, [0, 1, 2, 4, 6])
        with pytest.raises(ValueError, match="level must be"):
            fluid.layers.lod_append(x, 3)
    t = np.arange(6, dtype=np.float32).reshape(6, 1)   # dense: gets its first level
    r, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": t}, fetch_list=[out],
                                              return_numpy=False)
    assert r.recursive_sequence_lengths() == [[1, 1, 2, 2]]
    lvl2 = lod_t(np.arange(4, dtype=np.float32).reshape(4, 1), [2, 2])
    main2 = fluid.Program()
    with fluid.program_guard(main2, fluid.Program()):
        x = fluid.layers.data("x", [1], lod_level=1)
        out = fluid.layers.lod_append(x, [0, 1, 2, 3, 4])
    r, = fluid.Executor(fluid.CPUPlace()).run(main2, feed={"x": lvl2}, fetch_list=[out],
                                              return_numpy=False)
    assert r.recursive_sequence_lengths() == [[2, 2], [1, 1, 1, 1]]
