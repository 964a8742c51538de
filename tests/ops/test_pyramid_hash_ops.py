"""pyramid_hash (fluidity/ops/pyramid_hash.py) with XXH32 (ops/xxhash32.py) and Paddle's
bloom filter (ops/bloomfilter.py): hash vectors of the published specifications, the
embedding rows against a reference written from the definition, dropout, filters, the
in-place table update of the backward op, and contrib.layers.search_pyramid_hash."""
import struct

import numpy as np
import pytest

import fluidity as fluid
from op_test import run_op
from fluidity.core.tensor import LoDTensor
from fluidity.errors import ExecutionError
from fluidity.ops import bloomfilter
from fluidity.ops.pyramid_hash import rand_r
from fluidity.ops.xxhash32 import xxh32_rows


@pytest.mark.parametrize("data,seed,want", [
    (b"", 0, 0x02CC5D05), (b"a", 0, 0x550D7456), (b"abc", 0, 0x32D153FF),
    (b"Nobody inspects the spammish repetition", 0, 0xE2293B2F)])
def test_xxh32_vectors(data, seed, want):
    assert int(xxh32_rows(np.frombuffer(data, np.uint8).reshape(1, -1), seed)[0]) == want


def test_murmur3_vectors():
    # MurmurHash3_x64_128 reference values (seed 0)
    assert bloomfilter.murmur3_x64_128(b"", 0) == (0, 0)
    assert bloomfilter.murmur3_x64_128(b"hello", 0) == (0xCBD8A7B341BD9B02,
                                                        0x5B1E906A48AE1D19)
    assert bloomfilter.murmur3_x64_128(b"The quick brown fox jumps over the lazy dog", 0) == (
        0xE34BBC7BBC071B6C, 0x7A433CA9C49A9347)


def test_rand_r_is_glibcs_recurrence():
    state = 1
    seen = set()
    for _ in range(100):
        r, state = rand_r(state)
        assert 0 <= r <= 2147483647
        seen.add(r)
    assert len(seen) == 100


SPACE, RAND, EMB = 50, 2, 4
TABLE = np.arange(SPACE + RAND, dtype=np.float32).reshape(-1, 1) / 10


def ref_rows(ids, layers):
    """Embeddings of every n-gram of one sequence, in Fluid's order."""
    rows = []
    for n in range(2, layers + 1):
        for s in range(len(ids) - n + 1):
            key = struct.pack(f"<{n}f", *ids[s:s + n])
            row = []
            for j in range(0, EMB, RAND):
                p = int(xxh32_rows(np.frombuffer(key, np.uint8)[None, :], j)[0]) % SPACE
                row += TABLE[p:p + RAND, 0].tolist()
            rows.append(row)
    return rows


ATTRS = {"num_emb": EMB, "space_len": SPACE, "rand_len": RAND, "pyramid_layer": 3,
         "use_filter": False, "is_training": 1, "drop_out_percent": 0.0}


def run(x, attrs, **extra):
    ins = {"X": x, "W": TABLE.copy(), **extra}
    return run_op("pyramid_hash", ins, attrs, outputs=["Out", "DropPos"], return_lod=True)


def test_forward_rows_and_lod():
    seqs = [[3, 7, 1], [5], [2, 9]]
    x = LoDTensor(np.array(sum(seqs, []), np.int32).reshape(-1, 1), [[0, 3, 4, 6]])
    got = run(x, ATTRS)
    out = np.asarray(got["Out"])
    want = ref_rows(seqs[0], 3) + [[0.0] * EMB] + ref_rows(seqs[2], 3)
    np.testing.assert_allclose(out, np.array(want, np.float32))
    assert got["Out"].lod() == [[0, 3, 4, 5]]
    # not training: Fluid scales the embeddings by drop_out_percent
    got = run(x, {**ATTRS, "is_training": 0, "drop_out_percent": 0.5})
    np.testing.assert_allclose(np.asarray(got["Out"]), np.array(want, np.float32) * 0.5)


def test_dropout_is_seeded():
    x = LoDTensor(np.arange(12, dtype=np.int32).reshape(-1, 1), [[0, 12]])
    attrs = {**ATTRS, "drop_out_percent": 0.5, "seed": 3}
    a, b = run(x, attrs), run(x, attrs)
    flags = np.asarray(a["DropPos"]).reshape(-1)
    assert flags.size == 11 + 10 and 0 < flags.sum() < flags.size
    np.testing.assert_array_equal(np.asarray(b["DropPos"]).reshape(-1), flags)
    kept = [r for r, f in zip(ref_rows(list(range(12)), 3), flags) if f]
    np.testing.assert_allclose(np.asarray(a["Out"]), np.array(kept, np.float32))


def test_white_and_black_lists():
    seq = [4, 8, 15]
    x = LoDTensor(np.array(seq, np.int32).reshape(-1, 1), [[0, 3]])
    key = struct.pack("<2f", 4, 8)                        # the bigram (4, 8)
    white = bloomfilter.build([key], m=256, k=3)
    got = run(x, {**ATTRS, "use_filter": True, "white_list_len": white.shape[0]},
              WhiteList=white)
    assert np.asarray(got["DropPos"]).reshape(-1).tolist() == [1, 0, 0]
    black = bloomfilter.build([key], m=256, k=3)
    got = run(x, {**ATTRS, "use_filter": True, "black_list_len": black.shape[0]},
              BlackList=black)
    assert np.asarray(got["DropPos"]).reshape(-1).tolist() == [0, 1, 1]
    bogus = np.zeros((16, 1), np.float32)
    with pytest.raises(ExecutionError, match="does not hold a bloom filter"):
        run(x, {**ATTRS, "use_filter": True, "white_list_len": 16}, WhiteList=bogus)


def test_backward_moves_the_table():
    seq = [3, 7]
    x = LoDTensor(np.array(seq, np.int32).reshape(-1, 1), [[0, 2]])
    fwd = run(x, ATTRS)
    dout = np.full((1, EMB), 2.0, np.float32)
    # W is updated in place: run the grad op in a program and read W back from the scope
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        block = main.global_block()
        names = {"X": x, "W": TABLE.copy(), "DropPos": fwd["DropPos"],
                 "X_Temp_Out": np.array([[3], [7]], np.float32), "Out@GRAD": dout}
        vs = {k: block.create_var(name=k.lower().replace("@", "_"), shape=np.asarray(v).shape,
                                  dtype="int32" if k in ("X", "DropPos") else "float32",
                                  lod_level=1 if k in ("X", "DropPos") else 0,
                                  persistable=k == "W")
              for k, v in names.items()}
        dx = block.create_var(name="dx", dtype="float32")
        block.append_op("pyramid_hash_grad", {k: [v] for k, v in vs.items()},
                        {"X@GRAD": [dx]}, {**ATTRS, "lr": 0.5})
    scope = fluid.Scope()
    exe = fluid.Executor()
    scope.var("w").get_tensor().set(TABLE.copy(), fluid.CPUPlace())
    feed = {vs[k].name: (v if isinstance(v, LoDTensor) else np.asarray(v))
            for k, v in names.items() if k != "W"}
    exe.run(main, feed=feed, fetch_list=[dx], scope=scope)
    moved = np.asarray(scope.find_var("w").get_tensor())
    want = TABLE.copy().reshape(-1)
    key = struct.pack("<2f", 3, 7)
    for j in range(0, EMB, RAND):
        p = int(xxh32_rows(np.frombuffer(key, np.uint8)[None, :], j)[0]) % SPACE
        want[p:p + RAND] -= 0.5 * 2.0
    np.testing.assert_allclose(moved.reshape(-1), want, rtol=1e-6)


def test_contrib_layer():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 1], "int32", lod_level=1)
        emb = fluid.contrib.layers.search_pyramid_hash(
            x, num_emb=8, space_len=100, pyramid_layer=3, rand_len=4, drop_out_percent=0.0,
            is_training=False, use_filter=False, white_list_len=0, black_list_len=0, seed=1,
            lr=0.01, param_attr=fluid.ParamAttr(name="ph_w"),
            distribute_update_vars=["ph_w"])
        with pytest.raises(ValueError, match="didn't have parameter nope"):
            fluid.contrib.search_pyramid_hash(
                x, 8, 100, 3, 4, 0.0, False, False, 0, 0, 1, 0.01,
                param_attr=fluid.ParamAttr(name="ph_w2"), distribute_update_vars=["nope"])
    assert list(emb.shape) == [-1, 8]
    op = [o for o in main.global_block().ops if o.type == "pyramid_hash"][0]
    assert op.attr("distribute_update_vars") == "ph_w" and op.attr("is_training") == 0
    exe = fluid.Executor()
    exe.run(startup)
    v, = exe.run(main, feed={"x": fluid.create_lod_tensor(
        np.array([[1], [2], [3]], np.int32), [[3]], fluid.CPUPlace())}, fetch_list=[emb],
        return_numpy=False)
    assert np.asarray(v).shape == (3, 8) and v.lod() == [[0, 3]]


def test_geo_fleet_sends_the_table_a_pyramid_hash_updates():
    """Fluid's transpilers treat the parameters named in distribute_update_vars as trained
    (sent and received as they are); fleet takes a DistributeTranspilerConfig as strategy."""
    import fluidity.incubate.fleet.base.role_maker as role_maker
    from fluidity.incubate.fleet.parameter_server.distribute_transpiler import fleet
    from fluidity.transpiler.distribute_transpiler import DistributeTranspilerConfig
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 1], "int32", lod_level=1)
        emb = fluid.contrib.layers.search_pyramid_hash(
            x, num_emb=8, space_len=10000, pyramid_layer=3, rand_len=4, drop_out_percent=0.0,
            is_training=True, use_filter=False, white_list_len=0, black_list_len=0, seed=1,
            lr=0.01, param_attr=fluid.ParamAttr(name="ph_table", learning_rate=0),
            distribute_update_vars=["ph_table"])
        cost = fluid.layers.reduce_sum(emb)
        fleet.init(role_maker.UserDefinedRoleMaker(
            current_id=0, role=role_maker.Role.SERVER, worker_num=2,
            server_endpoints=["127.0.0.1:36111", "127.0.0.1:36112"]))
        config = DistributeTranspilerConfig()
        config.sync_mode = False
        config.geo_sgd_mode = True
        config.geo_sgd_need_push_nums = 5
        fleet.distributed_optimizer(fluid.optimizer.SGD(0.1), config).minimize(cost)
    serv = [o for o in fleet.main_program.global_block().ops if o.type == "listen_and_serv"]
    assert len(serv) == 1
    assert any("ph_table" in n for n in fleet.main_program.global_block().vars)


def test_sequences_without_ngrams_give_one_zero_row_each():
    x = LoDTensor(np.array([[4], [9]], np.int32), [[0, 1, 2]])
    got = run(x, ATTRS)
    np.testing.assert_array_equal(np.asarray(got["Out"]), np.zeros((2, EMB), np.float32))
    assert got["Out"].lod() == [[0, 1, 2]] and np.asarray(got["DropPos"]).size == 0
