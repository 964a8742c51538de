"""Our distribute transpiler against PaddlePaddle's own (3.3.1's Python DistributeTranspiler,
programs saved by scripts/make_paddle_dist_fixtures.py under tests/fixtures/paddle3_dist/):
for an MLP (a sliced weight) and a CTR-DNN with a distributed table, 2 pservers x 2 trainers,
sync mode, the RPC skeleton of the trainer programs (op types in order, the variables they
move, epmap, sections, height_sections, table names), the pserver programs'
listen_and_serv (grad_to_block_id, optimize blocks and what they run, prefetch blocks) and
the startup programs are Paddle's; and Paddle's saved programs load here.

Departures, each asserted where it shows: our `recv` / `fetch_barrier` carry no control
variables (the executor runs ops in order); the table shard grows on touch, so the pserver
startup has no initializer for it, and its grads are listen_and_serv inputs; the
checkpoint block's attribute keeps Fluid 1.x's spelling (`checkpint_block_id`; Paddle 3
corrected it)."""
import json
import os

import pytest

import fluidity as fluid
from fluidity.ops import registry
from fluidity.proto import framework_pb2 as pb

from paths import FIXTURES  # noqa: E402  (tests/paths.py)

DIR = os.path.join(FIXTURES, "paddle3_dist")
EPS = ["127.0.0.1:6170", "127.0.0.1:6171"]
RPC_ATTRS = {"send": ("epmap",), "split_byref": ("sections",),
             "split_selected_rows": ("height_sections",), "split_ids": (),
             "prefetch": ("epmap",), "merge_ids": (), "send_barrier": ("endpoints",),
             "recv": ("epmap",), "fetch_barrier": ("endpoints",), "concat": ()}
SLOTS = {"send": ("X",), "split_byref": ("X", "Out"), "split_selected_rows": ("X", "Out"),
         "split_ids": ("Ids", "Out"), "prefetch": ("X", "Out"),
         "merge_ids": ("Ids", "Rows", "X", "Out"), "send_barrier": (), "recv": ("Out",),
         "fetch_barrier": (), "concat": ("X", "Out")}
DIST_ROLE = 0x0008


def _load(model, name):
    d = pb.ProgramDesc()
    with open(os.path.join(DIR, model, name), "rb") as f:
        d.ParseFromString(f.read())
    return d


def _attr(op, name):
    for a in op.attrs:
        if a.name == name:
            for field in ("strings", "ints", "longs", "blocks_idx"):
                if list(getattr(a, field)):
                    return list(getattr(a, field))
            for field in ("s", "i", "l", "b", "f", "block_idx"):
                if a.HasField(field):
                    return getattr(a, field)
            return []
    return None


def _slot(op, name, outputs=False):
    for v in (op.outputs if outputs else op.inputs):
        if v.parameter == name:
            return list(v.arguments)
    return []


def skeleton(block):
    """The RPC ops of a trainer block in order: (type, the variables they read / write,
    key attributes)."""
    out = []
    for op in block.ops:
        if op.type not in RPC_ATTRS:
            continue
        if op.type == "concat" and not (_attr(op, "op_role") or 0) & DIST_ROLE:
            continue        # a forward concat, not the one joining parameter blocks
        slots = tuple((s, tuple(_slot(op, s, s == "Out"))) for s in SLOTS[op.type])
        attrs = tuple((a, tuple(_attr(op, a) or ())) for a in RPC_ATTRS[op.type])
        out.append((op.type, slots, attrs))
    return out


def build(model):
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start), fluid.unique_name.guard():
        if model == "mlp":
            x = fluid.layers.data("x", [64])
            y = fluid.layers.data("y", [1])
            pred = fluid.layers.fc(fluid.layers.fc(x, 256, act="tanh"), 1)
            loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
            fluid.optimizer.SGD(0.1).minimize(loss)
        else:
            dense = fluid.layers.data("dense_input", [13])
            slots = [fluid.layers.data(f"C{i}", [1], dtype="int64", lod_level=1)
                     for i in (1, 2)]
            label = fluid.layers.data("label", [1], dtype="int64")
            embs = [fluid.layers.embedding(s, [10000, 8], is_sparse=True,
                                           is_distributed=True,
                                           param_attr=fluid.ParamAttr(name="dist_table"))
                    for s in slots]
            h = fluid.layers.fc(fluid.layers.concat(embs + [dense], axis=1), 32, act="relu")
            pred = fluid.layers.fc(h, 2, act="softmax")
            loss = fluid.layers.mean(fluid.layers.cross_entropy(pred, label))
            fluid.optimizer.SGD(0.05).minimize(loss)
    return main, start


def ours(model, trainer_id):
    main, start = build(model)
    t = fluid.DistributeTranspiler()
    t.transpile(trainer_id, program=main, pservers=",".join(EPS), trainers=2,
                sync_mode=True, startup_program=start)
    return t, start


@pytest.mark.parametrize("model", ["mlp", "ctr_dnn"])
@pytest.mark.parametrize("tid", [0, 1])
def test_trainer_rpc_skeleton_is_paddles(model, tid):
    t, start = ours(model, tid)
    mine = skeleton(t.get_trainer_program().desc.blocks[0])
    paddle = skeleton(_load(model, f"trainer_{tid}.pb").blocks[0])
    assert [s[0] for s in mine] == [s[0] for s in paddle]
    assert mine == paddle
    # the startup: the same parameters fetched from the same servers; the table fake
    want = [(op.type, tuple(_slot(op, "Out", True))) for op in
            _load(model, f"trainer_startup_{tid}.pb").blocks[0].ops
            if op.type in ("recv", "fake_init")]
    got = [(op.type, tuple(_slot(op, "Out", True))) for op in start.desc.blocks[0].ops
           if op.type in ("recv", "fake_init")]
    assert sorted(got) == sorted(want)


def _listen(desc):
    (ls,) = [op for op in desc.blocks[0].ops if op.type == "listen_and_serv"]
    return ls


@pytest.mark.parametrize("model", ["mlp", "ctr_dnn"])
@pytest.mark.parametrize("k", [0, 1])
def test_pserver_program_is_paddles(model, k):
    t, _start = ours(model, 0)
    mine = t.get_pserver_program(EPS[k]).desc
    paddle = _load(model, f"pserver_{k}.pb")
    a, b = _listen(mine), _listen(paddle)
    for name in ("endpoint", "Fanin", "lr_decay_block_id", "prefetch_var_name_to_block_id"):
        # (a registered listen_and_serv, as Paddle 1.x's, writes an empty list by default)
        assert (_attr(a, name) or []) == (_attr(b, name) or []), name

    def blocks_by_grad(desc, ls):
        out = {}
        for s in _attr(ls, "grad_to_block_id"):
            g, _, idx = s.rpartition(":")
            out[g] = [op.type for op in desc.blocks[int(idx)].ops]
        return out
    got, want = blocks_by_grad(mine, a), blocks_by_grad(paddle, b)
    assert sorted(got) == sorted(want)
    for g in want:      # the table's gradient is summed, not averaged, as in Paddle
        assert got[g] == want[g], g
    assert len(_attr(a, "optimize_blocks")) == len(_attr(b, "optimize_blocks"))
    assert _attr(a, "pserver_id") == _attr(b, "pserver_id") == k
    assert [(bd.idx, bd.parent_idx) for bd in mine.blocks] == \
        [(bd.idx, bd.parent_idx) for bd in paddle.blocks]
    if model == "ctr_dnn":       # the table's shard and the block that saves it
        save = _attr(a, "checkpint_block_id")
        assert save == _attr(b, "checkpoint_block_id")
        assert [op.type for op in mine.blocks[save].ops] == ["save"]
        shard = [v for v in mine.blocks[0].vars if v.name == "dist_table"][0]
        want_shard = [v for v in paddle.blocks[0].vars if v.name == "dist_table"][0]
        assert list(shard.type.selected_rows.dims) == list(want_shard.type.selected_rows.dims)
    table_grads = {n for n in _slot(a, "X") if n.startswith("dist_table@GRAD")}
    assert set(_slot(a, "X")) - table_grads == set(_slot(b, "X"))
    for entry in _attr(b, "prefetch_var_name_to_block_id") or []:
        idx = int(entry.rpartition(":")[2])
        assert [op.type for op in mine.blocks[idx].ops] == \
            [op.type for op in paddle.blocks[idx].ops] == ["lookup_sparse_table"]
    # the startup: the initializers of the same blocks, shaped as Paddle's (a learning
    # rate is [1] as Fluid 1.x makes it, where Paddle 3 writes 0-D)
    def inits(desc):
        def shape(op):
            s = tuple(_attr(op, "shape") or ())
            return (1,) if s == () else s
        return sorted((op.type, tuple(_slot(op, "Out", True)), shape(op))
                      for op in desc.blocks[0].ops if _slot(op, "Out", True) != ["dist_table"])
    assert inits(t.get_startup_program(EPS[k]).desc) == \
        inits(_load(model, f"pserver_startup_{k}.pb"))


@pytest.mark.parametrize("model", ["mlp", "ctr_dnn"])
def test_paddles_programs_load_here(model):
    meta = json.load(open(os.path.join(DIR, model, "meta.json")))
    assert meta["paddle"].startswith("3.") and meta["endpoints"] == EPS
    for name in sorted(os.listdir(os.path.join(DIR, model))):
        if not name.endswith(".pb"):
            continue
        with open(os.path.join(DIR, model, name), "rb") as f:
            prog = fluid.Program.parse_from_string(f.read())
        for block in prog.blocks:
            for op in block.ops:
                assert registry.has(op.type), f"{name}: {op.type}"
                registry.attrs_of(registry.get(op.type), op.all_attrs())
