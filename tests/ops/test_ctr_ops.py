"""hash (XXH64), filter_by_instag and data_norm (fluidity/ops/ctr.py) and their layers:
forward against numpy references written here, XXH64 against its published test vectors,
gradients against finite differences, data_norm's summary update over training steps."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.core.tensor import LoDTensor
from fluidity.errors import ExecutionError, ShapeError
from fluidity.ops.xxhash64 import xxh64_rows
from op_test import check_grad, check_output, run_op


def _xxh(b, seed=0):
    return int(xxh64_rows(np.frombuffer(b, np.uint8).reshape(1, len(b)), seed)[0])


def test_xxh64_published_vectors():
    assert _xxh(b"") == 0xEF46DB3751D8E999
    assert _xxh(b"a") == 0xD24EC4F1A98C6E5B
    assert _xxh(b"abc") == 0x44BC2CF5AD770999
    # 39 bytes: the 32-byte stripe loop, an 8-byte lane, then single bytes
    assert _xxh(b"Nobody inspects the spammish repetition") == 0xFBCEA83C8A378BF1
    # every row of a matrix hashed alone gives the same numbers
    rows = np.arange(3 * 45, dtype=np.uint8).reshape(3, 45)
    got = xxh64_rows(rows, 7)
    assert [int(v) for v in got] == [_xxh(r.tobytes(), 7) for r in rows]


def test_hash_op():
    x = np.array([[1], [2 ** 32 + 1]], np.int64)
    # Paddle 1.8's own numbers for these ids (its test_hash_op)
    got = check_output("hash", {"X": x},
                       {"Out": np.array([1269, 9609, 3868, 7268]).reshape(2, 2, 1)},
                       {"num_hash": 2, "mod_by": 10000})["Out"]
    assert got.dtype == np.int64
    t = LoDTensor(np.array([[3], [5], [3]], np.int32), [[0, 1, 3]])
    out = run_op("hash", {"X": t}, {"num_hash": 3, "mod_by": 2 ** 32}, return_lod=True)["Out"]
    assert out.lod() == [[0, 1, 3]]
    a = np.asarray(out)
    np.testing.assert_array_equal(a[0], a[2])                 # same row, same hashes
    want = [_xxh(np.int32(3).tobytes(), k) % 2 ** 32 for k in range(3)]
    np.testing.assert_array_equal(a[0, :, 0], np.array(want, np.uint64).astype(np.int32))
    with pytest.raises(ShapeError, match="2-D"):
        run_op("hash", {"X": np.zeros((2, 2, 2), np.int64)})


def test_filter_by_instag_forward_and_grad():
    x = np.arange(12, dtype=np.float64).reshape(6, 2)
    ins = LoDTensor(x, [[0, 1, 3, 6]])                     # instances of 1, 2 and 3 rows
    tags = LoDTensor(np.array([[1], [2], [3], [2], [5]], np.int64), [[0, 1, 3, 5]])
    filt = np.array([2], np.int64)
    got = run_op("filter_by_instag", {"Ins": ins, "Ins_tag": tags, "Filter_tag": filt},
                 {"is_lod": True}, return_lod=True)
    out, imap, lw = got["Out"], got["IndexMap"], got["LossWeight"]
    np.testing.assert_array_equal(np.asarray(out), x[1:6])
    assert out.lod() == [[0, 2, 5]]
    np.testing.assert_array_equal(np.asarray(imap), [[0, 1, 2], [2, 3, 3]])
    np.testing.assert_array_equal(np.asarray(lw), [[1], [1]])
    check_grad("filter_by_instag", {"Ins": ins, "Ins_tag": tags, "Filter_tag": filt}, ["Ins"],
               {"is_lod": True}, output_slots=["Out"])
    # nothing kept: one row of out_val_if_empty, loss weight 0, and a zero gradient
    none = run_op("filter_by_instag",
                  {"Ins": ins, "Ins_tag": tags, "Filter_tag": np.array([9], np.int64)},
                  {"is_lod": True, "out_val_if_empty": 7})
    np.testing.assert_array_equal(none["Out"], [[7, 7]])
    np.testing.assert_array_equal(none["LossWeight"], [[0]])
    # rows as instances (is_lod False)
    rows = run_op("filter_by_instag",
                  {"Ins": x[:3], "Ins_tag": LoDTensor(np.array([[4], [2], [2]], np.int64),
                                                      [[0, 1, 2, 3]]),
                   "Filter_tag": filt}, {"is_lod": False})
    np.testing.assert_array_equal(rows["Out"], x[1:3])


def _dn_ref(x, size, total, square, slot_dim=-1, w=None, b=None):
    mean, scale = total / size, np.sqrt(size / square)
    y = (x - mean) * scale
    if w is not None:
        y = y * w + b
    if slot_dim > 0:
        for i in range(x.shape[0]):
            for j in range(0, x.shape[1], slot_dim):
                if abs(x[i, j]) < 1e-7:
                    y[i, j:j + slot_dim] = 0
    return y


@pytest.fixture
def dn_inputs():
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, (5, 4))
    x[1, 0] = x[3, 2] = 0.0
    return {"X": x, "BatchSize": np.full(4, 3.0), "BatchSum": rng.uniform(-1, 1, 4),
            "BatchSquareSum": rng.uniform(1, 2, 4)}


@pytest.mark.parametrize("slot_dim", [-1, 2])
def test_data_norm_forward(dn_inputs, slot_dim):
    d = dn_inputs
    want = _dn_ref(d["X"], d["BatchSize"], d["BatchSum"], d["BatchSquareSum"], slot_dim)
    check_output("data_norm", d, {"Y": want, "Means": d["BatchSum"] / d["BatchSize"]},
                 {"slot_dim": slot_dim})
    w, b = np.array([1.0, 2.0, 0.5, -1.0]), np.array([0.1, 0.0, -0.2, 0.3])
    want = _dn_ref(d["X"], d["BatchSize"], d["BatchSum"], d["BatchSquareSum"], slot_dim, w, b)
    check_output("data_norm", {**d, "scale_w": w, "bias": b}, {"Y": want},
                 {"slot_dim": slot_dim, "enable_scale_and_shift": True})


def test_data_norm_gradients(dn_inputs):
    d = dn_inputs
    check_grad("data_norm", d, ["X"], output_slots=["Y"])
    w, b = np.array([1.0, 2.0, 0.5, -1.0]), np.array([0.1, 0.0, -0.2, 0.3])
    check_grad("data_norm", {**d, "scale_w": w, "bias": b}, ["X", "scale_w", "bias"],
               {"enable_scale_and_shift": True}, output_slots=["Y"])
    with pytest.raises(ShapeError, match="scale_w and bias"):
        run_op("data_norm", d, {"enable_scale_and_shift": True})


def test_data_norm_layer_summary_update():
    """Two training steps: the statistics follow stat = decay * stat + batch statistic, the
    other parameters train with the optimizer."""
    main, startup = fluid.Program(), fluid.Program()
    decay, eps = 0.5, 1e-4
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [3])
        h = fluid.layers.fc(x, 3)
        y = fluid.layers.data_norm(h, name="dn", epsilon=eps, summary_decay_rate=decay,
                                   param_attr={"batch_size": 10.0, "batch_square": 10.0})
        loss = fluid.layers.mean(y)
        params = [p.name for p in main.global_block().all_parameters()
                  if not p.name.startswith("dn.")]
        fluid.optimizer.SGD(0.1).minimize(loss, parameter_list=params)
    assert {"dn.batch_size", "dn.batch_sum", "dn.batch_square_sum"} <= \
        {p.name for p in main.global_block().all_parameters()}
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    size, total, square = np.full(3, 10.0), np.zeros(3), np.full(3, 10.0)
    rng = np.random.default_rng(0)
    for _ in range(2):
        xv = rng.uniform(-1, 1, (4, 3)).astype(np.float32)
        hv, = exe.run(main, feed={"x": xv}, fetch_list=[h], scope=scope)
        mean = total / size
        size, total, square = (size * decay + 4, total * decay + hv.sum(0),
                               square * decay + ((hv - mean) ** 2).sum(0) + 4 * eps)
        got = [np.asarray(scope.find_var(n).get_tensor())
               for n in ("dn.batch_size", "dn.batch_sum", "dn.batch_square_sum")]
        np.testing.assert_allclose(got[0], size, rtol=1e-6)
        np.testing.assert_allclose(got[1], total, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got[2], square, rtol=1e-5)


def test_ctr_layers_build_paddles_ops():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        ids = fluid.layers.data("ids", [1], dtype="int64", lod_level=1)
        hashed = fluid.layers.hash(ids, hash_size=1000, num_hash=4)
        ins = fluid.layers.data("ins", [8], dtype="float32", lod_level=1)
        tag = fluid.layers.data("tag", [1], dtype="int64", lod_level=1)
        filt = fluid.layers.data("filt", [1], dtype="int64")
        out, weight = fluid.layers.filter_by_instag(ins, tag, filt, True)
    ops = [op.type for op in main.global_block().ops]
    assert ops == ["hash", "filter_by_instag"]
    assert list(hashed.shape) == [-1, 4, 1]
    exe = fluid.Executor(fluid.CPUPlace())
    idv = LoDTensor(np.array([[3], [9], [3]], np.int64), [[0, 2, 3]])
    h, = exe.run(main, feed={"ids": idv, "ins": LoDTensor(np.ones((2, 8), np.float32),
                                                          [[0, 1, 2]]),
                             "tag": LoDTensor(np.array([[1], [2]], np.int64), [[0, 1, 2]]),
                             "filt": np.array([[2]], np.int64)}, fetch_list=[hashed])
    assert h.shape == (3, 4, 1) and (h >= 0).all() and (h < 1000).all()
    np.testing.assert_array_equal(h[0], h[2])
    with pytest.raises(ExecutionError, match="Ins_tag needs a LoD"):
        run_op("filter_by_instag", {"Ins": np.ones((2, 2)), "Ins_tag": np.ones((2, 1),
                                                                                np.int64),
                                    "Filter_tag": np.ones(1, np.int64)})


def test_cvm():
    rng = np.random.default_rng(12)

    def r(*shape):
        return rng.uniform(-1, 1, size=shape).astype(np.float32)

    x = np.abs(r(3, 5))
    cvm = np.abs(r(3, 2))
    want = x.copy()
    want[:, 0] = np.log(x[:, 0] + 1)
    want[:, 1] = np.log(x[:, 1] + 1) - want[:, 0]
    check_output("cvm", {"X": x, "CVM": cvm}, {"Y": want})
    check_output("cvm", {"X": x, "CVM": cvm}, {"Y": x[:, 2:]}, {"use_cvm": False})
    from fluidity.ops import registry
    dy = r(3, 5)
    dx = registry.get("cvm_grad").kernel_for(
        {**registry.get("cvm_grad").defaults(), "use_cvm": True}, None)(x, cvm, dy)
    np.testing.assert_array_equal(dx[:, 2:], dy[:, 2:])
    np.testing.assert_array_equal(dx[:, :2], cvm)
