"""fluid.contrib.decoder (Fluid 1.0-1.5): a StateCell trained with TrainingDecoder (a
DynamicRNN over LoD targets) learns; BeamSearchDecoder decodes LoD beams into sentences of
the right structure, and with one beam it is the greedy decoding a numpy loop computes from
the fetched parameters; misuse raises clear errors."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.contrib.decoder import (BeamSearchDecoder, InitState, StateCell,
                                      TrainingDecoder)

L = fluid.layers
DICT, WORD, HID = 12, 8, 16
END = 1


def _state_cell(context):
    cell = StateCell(inputs={"x": None}, states={"h": InitState(init=context,
                                                                 need_reorder=True)},
                     out_state="h")

    @cell.state_updater
    def updater(state_cell):
        h = L.fc([state_cell.get_state("h"), state_cell.get_input("x")], HID, act="tanh",
                 param_attr=["cell_h", "cell_x"], bias_attr="cell_b")
        state_cell.set_state("h", h)
    return cell


def _lod(seqs):
    flat = np.array([t for s in seqs for t in s], "int64").reshape(-1, 1)
    return fluid.create_lod_tensor(flat, [[len(s) for s in seqs]], fluid.CPUPlace())


def test_training_decoder_learns_a_copy_task():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3
    with fluid.program_guard(main, startup):
        src = L.data("src", [1], dtype="int64", lod_level=1)
        emb = L.embedding(src, [DICT, WORD], param_attr="src_emb")
        context = L.sequence_last_step(L.fc(emb, HID, act="tanh"))
        cell = _state_cell(context)
        trg = L.data("trg", [1], dtype="int64", lod_level=1)
        trg_emb = L.embedding(trg, [DICT, WORD], param_attr="trg_emb")
        decoder = TrainingDecoder(cell)
        with decoder.block():
            word = decoder.step_input(trg_emb)
            decoder.state_cell.compute_state(inputs={"x": word})
            decoder.state_cell.update_states()
            decoder.output(L.fc(decoder.state_cell.get_state("h"), DICT, act="softmax"))
        probs = decoder()
        label = L.data("label", [1], dtype="int64", lod_level=1)
        loss = L.mean(L.cross_entropy(probs, label))
        fluid.optimizer.Adam(0.02).minimize(loss)
    ops = [op.type for op in main.global_block().ops]
    assert "while" in ops and "lod_rank_table" in ops
    rng = np.random.default_rng(0)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    losses = []
    for _ in range(60):
        seqs = [rng.integers(2, DICT, rng.integers(1, 4)).tolist() for _ in range(16)]
        # the target repeats the last source token: one the context must carry
        feed = {"src": _lod(seqs), "trg": _lod([[0, s[-1]] for s in seqs]),
                "label": _lod([[s[-1], END] for s in seqs])}
        (l,) = exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
        losses.append(float(np.asarray(l).reshape(-1)[0]))
    assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:5]), losses


def _decode_program(beam_size, max_len):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        context = fluid.data("context", [None, HID], "float32")
        cell = _state_cell(context)
        init_ids = L.data("init_ids", [1], dtype="int64", lod_level=2)
        init_scores = L.data("init_scores", [1], dtype="float32", lod_level=2)
        decoder = BeamSearchDecoder(cell, init_ids, init_scores, target_dict_dim=DICT,
                                    word_dim=WORD, topk_size=5, max_len=max_len,
                                    beam_size=beam_size, end_id=END)
        decoder.decode()
        ids, scores = decoder()
    return main, startup, ids, scores


def _decode(main, startup, ids, scores, n, seed):
    rng = np.random.default_rng(seed)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    params = {}
    for p in main.global_block().all_parameters():
        params[p.name] = rng.uniform(-1.5, 1.5, p.shape).astype("float32")
        scope.find_var(p.name).get_tensor().set(params[p.name], fluid.CPUPlace())
    lod = [[1] * n, [1] * n]
    feed = {"context": rng.normal(size=(n, HID)).astype("float32"),
            "init_ids": fluid.create_lod_tensor(np.zeros((n, 1), "int64"), lod,
                                                fluid.CPUPlace()),
            "init_scores": fluid.create_lod_tensor(np.ones((n, 1), "float32"), lod,
                                                   fluid.CPUPlace())}
    got_ids, got_scores = exe.run(main, feed=feed, fetch_list=[ids, scores], scope=scope,
                                  return_numpy=False)
    return got_ids, got_scores, params, feed


def _sentences(t):
    src, sent = t.lod()
    flat = np.asarray(t).reshape(-1).tolist()
    return [[flat[sent[j]:sent[j + 1]] for j in range(src[i], src[i + 1])]
            for i in range(len(src) - 1)]


def test_beam_search_decoder_gives_sentences_per_source():
    main, startup, ids, scores = _decode_program(beam_size=3, max_len=5)
    got_ids, got_scores, _, _ = _decode(main, startup, ids, scores, n=4, seed=1)
    assert len(got_ids.lod()) == 2 and got_ids.lod() == got_scores.lod()
    per_source = _sentences(got_ids)
    assert len(per_source) == 4
    for sents in per_source:
        assert 1 <= len(sents) <= 3
        for s in sents:
            assert s[0] == 0 and 2 <= len(s) <= 6          # <s>, then at most max_len
            assert s[-1] == END or len(s) == 6
            assert END not in s[1:-1]


@pytest.mark.parametrize("seed", [2, 3])
def test_one_beam_is_greedy_decoding(seed):
    max_len = 6
    main, startup, ids, scores = _decode_program(beam_size=1, max_len=max_len)
    got_ids, _, p, feed = _decode(main, startup, ids, scores, n=3, seed=seed)
    block = main.block(1)
    table = next(op.input("W")[0] for op in block.ops if op.type.startswith("lookup_table"))
    fc_w = next(op.input("Y")[0] for op in block.ops if op.type == "mul"
                and op.input("Y")[0] not in ("cell_h", "cell_x"))
    fc_b = next(n for n in p if n.startswith(fc_w.split(".")[0]) and ".b_" in n)
    want = []
    for h in feed["context"]:
        seq, prev = [0], 0
        for _ in range(max_len):
            h = np.tanh(h @ p["cell_h"] + p[table][prev] @ p["cell_x"] + p["cell_b"])
            prev = int(np.argmax(h @ p[fc_w] + p[fc_b]))
            seq.append(prev)
            if prev == END:
                break
        want.append([seq])
    assert _sentences(got_ids) == want


def test_contrib_decoder_misuse_is_refused():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        ctx = fluid.data("ctx", [None, HID], "float32")
        with pytest.raises(ValueError, match="must be an InitState"):
            StateCell(inputs={"x": None}, states={"h": ctx}, out_state="h")
        with pytest.raises(ValueError, match="out_state must be one state"):
            StateCell(inputs={"x": None}, states={"h": InitState(init=ctx)}, out_state="c")
        with pytest.raises(ValueError, match="init_boot must be provided"):
            InitState(shape=[HID])
        boot = InitState(shape=[-1, HID], value=0.5, init_boot=ctx)
        assert list(boot.value.shape) == [-1, HID]
        cell = _state_cell(ctx)
        with pytest.raises(ValueError, match="Invalid input x"):
            cell.get_input("x")
        decoder = TrainingDecoder(cell)
        with pytest.raises(ValueError, match="should be invoked inside block"):
            decoder.state_cell
        with pytest.raises(ValueError, match="only be visited outside the block"):
            decoder()
        with pytest.raises(ValueError, match="already entered a decoder"):
            TrainingDecoder(cell)
        ids = L.data("ids", [1], dtype="int64", lod_level=2)
        beam = BeamSearchDecoder(_state_cell(ctx), ids, ids, DICT, WORD)
        with pytest.raises(ValueError, match="read_array should be invoked inside block"):
            beam.read_array(ids)
        with pytest.raises(ValueError, match="can only be visited outside the block"):
            beam()
        with pytest.raises(ValueError, match="beam_size must be a positive int"):
            BeamSearchDecoder(_state_cell(ctx), ids, ids, DICT, WORD, beam_size=0)
