"""nce with remote_prefetch (Fluid 1.x): the sampled labels' rows come from a table split
over two parameter servers by height_sections, each holding its section as rows from 0 of
the variable named in table_names; checked against a numpy reference over the whole table,
and the clear errors of an id outside the table and of a table a server lacks."""
import threading

import numpy as np
import pytest

import fluidity as fluid
from fluidity.distributed.launch import free_ports
from fluidity.errors import ExecutionError

D, SECTIONS = 3, [2, 3]          # a 5-row table: rows 0-1 on server 0, 2-4 on server 1


class _TableServer:
    """A listen_and_serv (no optimize ops) whose scope holds `rows` as variable 'table'."""

    def __init__(self, rows):
        (port,) = free_ports(1)
        self.ep = f"127.0.0.1:{port}"
        prog = fluid.Program()
        block = prog.global_block()
        opt = prog._create_block()
        prog._rollback()
        block.append_op(type="listen_and_serv", inputs={"X": []}, outputs={},
                        attrs={"optimize_blocks": [opt], "endpoint": self.ep, "Fanin": 1,
                               "distributed_mode": 0, "grad_to_block_id": []})
        self.scope = fluid.Scope()
        self.scope.var("table").get_tensor().set(rows, fluid.CPUPlace())
        self.errors = []

        def serve():
            try:
                fluid.Executor().run(prog, scope=self.scope)
            except Exception as e:      # noqa: BLE001 - reported by the test
                self.errors.append(e)
        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()


def _nce_program(epmap, table_names, labels_shape, num_classes):
    main = fluid.Program()
    block = main.global_block()
    v = {n: block.create_var(name=n, shape=s, dtype=t) for n, s, t in (
        ("x", [4, D], "float32"), ("label", labels_shape, "int64"),
        ("w", [num_classes, D], "float32"), ("b", [num_classes, 1], "float32"),
        ("cost", [4, 1], "float32"), ("logits", [4, 3], "float32"),
        ("samples", [4, 3], "int64"))}
    block.append_op(type="nce",
                    inputs={"Input": v["x"], "Label": v["label"], "Weight": v["w"],
                            "Bias": v["b"]},
                    outputs={"Cost": v["cost"], "SampleLogits": v["logits"],
                             "SampleLabels": v["samples"]},
                    attrs={"num_total_classes": num_classes, "num_neg_samples": 2,
                           "custom_neg_classes": [0, 3], "is_sparse": True,
                           "remote_prefetch": True, "epmap": epmap,
                           "table_names": table_names, "height_sections": SECTIONS})
    return main, v


def _reference(x, labels, table, bias, negs, num_classes):
    k = len(negs)
    cost = np.zeros((len(x), 1))
    for i in range(len(x)):
        for j, c in enumerate(list(labels[i]) + negs):
            o = 1 / (1 + np.exp(-(x[i] @ table[c] + bias[c, 0])))
            q = k / num_classes
            cost[i] += -np.log(o / (o + q)) if j == 0 else -np.log(q / (o + q))
    return cost


@pytest.fixture(scope="module")
def servers():
    rng = np.random.default_rng(3)
    table = rng.normal(size=(sum(SECTIONS), D)).astype(np.float32)
    shards = [_TableServer(table[:2]), _TableServer(table[2:])]
    exe = fluid.Executor(fluid.CPUPlace())     # one trainer: its close() ends the servers
    yield table, shards, exe
    exe.close()
    for s in shards:
        s.thread.join(10)
        assert not s.thread.is_alive() and not s.errors, s.errors


def _run(servers_, labels, table_names=("table", "table")):
    table, shards, exe = servers_
    rng = np.random.default_rng(4)
    main, v = _nce_program([s.ep for s in shards], list(table_names), [4, 1], len(table))
    x = rng.uniform(-1, 1, (4, D)).astype(np.float32)
    bias = rng.normal(size=(len(table), 1)).astype(np.float32)
    # the local Weight is zeros: the rows must come from the servers
    feed = {"x": x, "label": labels, "w": np.zeros_like(table), "b": bias}
    got = exe.run(main, feed=feed, fetch_list=[v["cost"], v["samples"]])
    return got, _reference(x, labels, table, bias, [0, 3], len(table))


def test_nce_rows_come_from_each_servers_section(servers):
    labels = np.array([[4], [1], [2], [3]], np.int64)
    (cost, samples), want = _run(servers, labels)
    np.testing.assert_allclose(cost, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(samples, np.c_[labels, [[0, 3]] * 4])


def test_an_id_outside_the_table_is_refused(servers):
    with pytest.raises(ExecutionError, match=r"nce: id 7 of 'SampleLabels' is out of range for a remote table of 5 rows"):
        _nce_program_run_bad_label(servers)


def _nce_program_run_bad_label(servers_):
    table, shards, exe = servers_
    main, v = _nce_program([s.ep for s in shards], ["table", "table"], [4, 1], 8)
    feed = {"x": np.zeros((4, D), np.float32), "label": np.array([[7], [0], [1], [2]]),
            "w": np.zeros((8, D), np.float32), "b": np.zeros((8, 1), np.float32)}
    exe.run(main, feed=feed, fetch_list=[v["cost"]])


def test_a_table_the_server_lacks_is_named(servers):
    with pytest.raises(Exception, match="no table 'emb'"):
        _run(servers, np.array([[4], [1], [2], [3]], np.int64), ("emb", "emb"))


@pytest.mark.parametrize("op_type", ["lookup_table", "lookup_table_v2"])
def test_lookup_rows_come_from_the_servers_keeping_lod_and_padding(servers, op_type):
    table, shards, exe = servers
    main = fluid.Program()
    block = main.global_block()
    ids_shape = [5, 1] if op_type == "lookup_table" else [5]
    ids = block.create_var(name="ids", shape=ids_shape, dtype="int64", lod_level=1)
    w = block.create_var(name="w", shape=list(table.shape), dtype="float32")
    out = block.create_var(name="out", dtype="float32")
    block.append_op(type=op_type, inputs={"Ids": ids, "W": w}, outputs={"Out": out},
                    attrs={"remote_prefetch": True, "epmap": [s.ep for s in shards],
                           "table_names": ["table", "table"], "height_sections": SECTIONS,
                           "padding_idx": 1})
    want_ids = np.array([4, 0, 1, 2, 4], np.int64).reshape(ids_shape)
    fed = fluid.create_lod_tensor(want_ids, [[2, 3]], fluid.CPUPlace())
    (got,) = exe.run(main, feed={"ids": fed, "w": np.zeros_like(table)}, fetch_list=[out],
                     return_numpy=False)
    want = table[want_ids.reshape(-1)]
    want[want_ids.reshape(-1) == 1] = 0            # padding_idx reads zeros
    assert got.lod() == [[0, 2, 5]]
    np.testing.assert_array_equal(np.array(got), want.reshape(5, D))
