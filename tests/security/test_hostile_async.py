"""The AsyncExecutor compiles a program that compiles whole and runs it on every batch, so a
crafted CTR model once ran its payload on every batch while training finished normally.
Here: a CTR model whose every variable but the data slots has a hostile name trains on the
compiled path exactly as the same model with plain names (bit for bit, one worker), and a
padding_idx holding a payload leaves the op to the interpreter; the canary never appears."""
import json
import logging
import os

import numpy as np
import pytest
from hostile import hostile_names, payloads, set_raw_attr

import fluidity as fluid
from fluidity.datafeed import DataFeedDesc
from fluidity.datafeed.generate import generate_ctr
from fluidity.executor.async_executor import AsyncExecutor
from fluidity.proto import framework_pb2 as pb


@pytest.fixture
def canary(tmp_path):
    path = tmp_path / "CANARY"
    yield str(path)
    assert not path.exists(), "a payload in the CTR model ran as code"


@pytest.fixture(scope="module")
def ctr(tmp_path_factory):
    d = tmp_path_factory.mktemp("ctr")
    info = generate_ctr(str(d), 1200, files=1, seed=4, vocab=300, sparse_slots=2,
                        dense_slots=2)
    return str(d), info["files"], json.load(open(info["model"]))


def _model(model):
    """Each sparse slot's ids embedded (one shared table, 2 wide), pooled, concatenated with
    the dense slot into a logistic regression trained by SGD."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 5
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        feats = [fluid.layers.data(model["dense_slot"], [len(model["dense_weights"])])]
        for slot in model["sparse_slots"]:
            ids = fluid.layers.data(slot, [1], dtype="int64", lod_level=1)
            emb = fluid.layers.embedding(ids, [model["vocab"], 2], is_sparse=True,
                                         param_attr=fluid.ParamAttr(name="table"))
            feats.append(fluid.layers.sequence_pool(emb, "sum"))
        logit = fluid.layers.fc(fluid.layers.concat(feats, axis=1), 1)
        label = fluid.layers.cast(fluid.layers.data(model["label_slot"], [1], dtype="int64"),
                                  "float32")
        loss = fluid.layers.reduce_mean(
            fluid.layers.sigmoid_cross_entropy_with_logits(logit, label))
        fluid.optimizer.SGD(0.05).minimize(loss)
    return main, startup, loss.name


def _rename(main, startup, keep, canary):
    names = hostile_names(canary)
    olds = sorted(n for n in main.global_block().vars if n not in keep)
    mapping = {old: (names[k] if k < len(names) else f"{k}{names[k % len(names)]}")
               for k, old in enumerate(olds)}
    for prog in (main, startup):
        block = prog.global_block()
        for old, new in mapping.items():
            if old in block.vars:
                block._rename_var(old, new)
    return mapping


def _train(ctr, canary, rename=False, bad_padding=False):
    d, files, model = ctr
    desc = DataFeedDesc(os.path.join(d, "data_feed.prototxt"))
    desc.set_batch_size(50)
    main, startup, loss = _model(model)
    slots = set(model["sparse_slots"]) | {model["dense_slot"], model["label_slot"]}
    mapping = _rename(main, startup, slots, canary) if rename else {}
    if bad_padding:
        for op in main.global_block().ops:
            if op.type == "lookup_table":
                set_raw_attr(op.desc, "padding_idx", pb.AttrType.STRING, payloads(canary)[6])
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    AsyncExecutor().run(main, desc, files, thread_num=1, fetch=[mapping.get(loss, loss)],
                        scope=scope)
    params = sorted((n for n, v in main.global_block().vars.items() if v.persistable and
                     scope.find_var(n) is not None and n not in ("feed", "fetch")),
                    key=lambda n: [k for k, v in mapping.items() if v == n] or [n])
    return [np.array(scope.find_var(n).get_tensor()) for n in params]


def test_hostile_names_train_on_the_compiled_path_as_plain_ones(ctr, canary, caplog):
    plain = _train(ctr, canary)
    with caplog.at_level(logging.INFO, logger="fluidity"):
        hostile = _train(ctr, canary, rename=True)
    assert "worker threads: the compiled worker loop runs whole chunks in C" in caplog.text
    assert len(plain) == len(hostile) and len(plain) >= 4
    for a, b in zip(plain, hostile):
        np.testing.assert_array_equal(a, b)


def test_a_payload_in_padding_idx_leaves_the_op_to_the_interpreter(ctr, canary, caplog):
    with caplog.at_level(logging.INFO, logger="fluidity"):
        try:
            _train(ctr, canary, bad_padding=True)
        except fluid.errors.FluidityError as e:        # the interpreter's own error
            assert "signal" not in str(e), e
    # the op runs interpreted: no compiled worker loop, whichever worker kind is picked
    assert "no compiled worker loop" in caplog.text and "lookup_table" in caplog.text
