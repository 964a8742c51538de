"""dynamic_decode and its decoders: teacher forcing (TrainingHelper + BasicDecoder) equals
rnn() over the same batch and is differentiable through the While loop; greedy decoding and
Fluid 1.8's beam search against numpy references over the fetched parameters (stopping
rules, lengths, layouts); beam 1 equals greedy; the beam helpers; sampling; errors."""
import numpy as np
import pytest
import rnn_numpy as ref
from test_control_flow import check_grads

import fluidity as fluid
from fluidity.layers import BeamSearchDecoder, utils

L = fluid.layers
RNG = np.random.default_rng(5)
B, T, D, H, V = 3, 4, 3, 5, 7
START, END = 0, 1


def _set_params(scope, program, scale=0.6, seed=0):
    rng = np.random.default_rng(seed)
    values = {}
    for p in program.global_block().all_parameters():
        values[p.name] = rng.uniform(-scale, scale, p.shape).astype("float32")
        scope.find_var(p.name).get_tensor().set(values[p.name], fluid.CPUPlace())
    return values


# --- teacher forcing ---------------------------------------------------------------------
def test_training_helper_decoding_equals_rnn_with_sequence_length():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, None, D], "float32")
        lens = fluid.data("lens", [None], "int64")
        h0 = fluid.data("h0", [None, H], "float32")
        c0 = fluid.data("c0", [None, H], "float32")
        cell = L.LSTMCell(H, name="dec")
        want, want_states = L.rnn(cell, x, initial_states=[h0, c0], sequence_length=lens)
        decoder = L.BasicDecoder(cell, L.TrainingHelper(x, lens))
        out, states, dec_lens = L.dynamic_decode(decoder, inits=[h0, c0],
                                                 impute_finished=True, return_length=True)
    assert isinstance(out, L.BasicDecoder.OutputWrapper)
    assert [op.type for op in main.global_block().ops].count("while") == 1
    lv = np.array([4, 2, 3], "int64")
    feed = {"x": RNG.normal(size=(B, T, D)).astype("float32"), "lens": lv,
            "h0": RNG.normal(size=(B, H)).astype("float32"),
            "c0": RNG.normal(size=(B, H)).astype("float32")}
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    _set_params(scope, main)
    got = exe.run(main, feed=feed, scope=scope,
                  fetch_list=[out.cell_outputs, out.sample_ids, *states, dec_lens, want,
                              *want_states])
    cell_out, ids, h, c, got_lens, rnn_out, rnn_h, rnn_c = got
    np.testing.assert_allclose(cell_out, rnn_out, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(ids, cell_out.argmax(-1))
    np.testing.assert_allclose(h, rnn_h, rtol=1e-5, atol=1e-6)   # states stop at the end
    np.testing.assert_allclose(c, rnn_c, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got_lens, lv)


def test_decoding_for_training_is_differentiable():
    feed = {"x": RNG.normal(size=(2, 3, 2)), "lens": np.array([3, 2], "int64")}

    def build():
        x = fluid.data("x", [None, 3, 2], "float64")
        x.stop_gradient = False
        lens = fluid.data("lens", [None], "int64")
        cell = L.GRUCell(3, dtype="float64", name="g")
        out, _ = L.dynamic_decode(L.BasicDecoder(cell, L.TrainingHelper(x, lens)),
                                  inits=cell.get_initial_states(x), impute_finished=True)
        return L.reduce_sum(out.cell_outputs * out.cell_outputs)
    check_grads(build, feed, ["x", "g/BasicGRUUnit_0.w_0", "g/BasicGRUUnit_0.b_1"],
                rtol=1e-4, atol=1e-7)


# --- greedy decoding and beam search -----------------------------------------------------
def _decoder_program(kind, beam_size=2, max_step_num=5, time_major=False):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        h0 = fluid.data("h0", [None, H], "float32")
        c0 = fluid.data("c0", [None, H], "float32")
        cell = L.LSTMCell(H, name="dec")

        def embed(ids):
            return fluid.embedding(ids, [V, D], param_attr="emb")

        def logits(h):
            return L.fc(h, V, num_flatten_dims=len(h.shape) - 1, param_attr="out_w",
                        bias_attr="out_b")
        if kind == "greedy":
            start = L.fill_constant_batch_size_like(h0, [-1], "int64", START)
            decoder = L.BasicDecoder(cell, L.GreedyEmbeddingHelper(embed, start, END),
                                     output_fn=logits)
        else:
            decoder = L.BeamSearchDecoder(cell, START, END, beam_size, embedding_fn=embed,
                                          output_fn=logits)
        out, states, lens = L.dynamic_decode(decoder, inits=[h0, c0],
                                             max_step_num=max_step_num,
                                             output_time_major=time_major, is_test=True,
                                             return_length=True)
        ids = out.sample_ids if kind == "greedy" else out
    return main, startup, ids, states, lens


def _run_decoder(main, startup, seed=0):
    feed = {"h0": RNG.normal(size=(B, H)).astype("float32"),
            "c0": RNG.normal(size=(B, H)).astype("float32")}
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    return exe, scope, feed, _set_params(scope, main, scale=1.5, seed=seed)


def _numpy_parts(p):
    w, b = p["dec/BasicLSTMUnit_0.w_0"], p["dec/BasicLSTMUnit_0.b_0"]

    def cell_step(x, states):
        h, c = ref.lstm_step(x, states[0], states[1], w, b)
        return h, [h, c]
    return cell_step, (lambda ids: p["emb"][ids]), (lambda h: h @ p["out_w"] + p["out_b"])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_greedy_decoding_matches_numpy(seed):
    main, startup, ids, _, lens = _decoder_program("greedy", max_step_num=5)
    exe, scope, feed, p = _run_decoder(main, startup, seed)
    got_ids, got_lens = exe.run(main, feed=feed, fetch_list=[ids, lens], scope=scope)
    want_ids, want_lens = ref.greedy_decode(*_numpy_parts(p), [feed["h0"], feed["c0"]],
                                            START, END, max_step_num=5)
    np.testing.assert_array_equal(got_ids, want_ids)
    np.testing.assert_array_equal(got_lens, want_lens)
    assert got_ids.shape[1] <= 6                   # at most max_step_num + 1 steps


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_beam_search_matches_numpy(seed):
    main, startup, ids, _, _ = _decoder_program("beam", beam_size=3, max_step_num=4)
    exe, scope, feed, p = _run_decoder(main, startup, seed)
    got, = exe.run(main, feed=feed, fetch_list=[ids], scope=scope)
    want, _ = ref.beam_search(*_numpy_parts(p), [feed["h0"], feed["c0"]], START, END,
                              beam=3, max_step_num=4)
    assert got.shape == want.shape and got.shape[0] == B and got.shape[2] == 3
    np.testing.assert_array_equal(got, want)


def test_beam_of_one_is_greedy_and_time_major_layout():
    main, startup, ids, _, _ = _decoder_program("greedy", max_step_num=6)
    exe, scope, feed, p = _run_decoder(main, startup, seed=4)
    greedy, = exe.run(main, feed=feed, fetch_list=[ids], scope=scope)
    bmain, bstartup, bids, _, _ = _decoder_program("beam", beam_size=1, max_step_num=6,
                                                   time_major=True)
    beam, = exe.run(bmain, feed=feed, fetch_list=[bids], scope=scope)
    assert beam.shape[1:] == (B, 1)                       # [time, batch, beam]
    beam = beam[:, :, 0].T

    def upto_end(row):
        row = list(row)
        return row[:row.index(END) + 1] if END in row else row
    assert [upto_end(r) for r in greedy] == [upto_end(r) for r in beam]


def test_beam_helpers_tile_split_and_merge():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, None, 2], "float32")
        tiled = BeamSearchDecoder.tile_beam_merge_with_batch(x, 3)
        dec = BeamSearchDecoder(L.GRUCell(2), START, END, beam_size=3)
        split = dec._split_batch_beams(fluid.data("y", [None, 2], "float32"))
        merged = dec._merge_batch_beams(split)
        expanded = dec._expand_to_beam_size(fluid.data("z", [None, 2], "float32"))
    assert list(tiled.shape)[-1] == 2 and list(split.shape) == [-1, 3, 2]
    xv = RNG.normal(size=(2, 4, 2)).astype("float32")
    yv = RNG.normal(size=(6, 2)).astype("float32")
    zv = RNG.normal(size=(2, 2)).astype("float32")
    t, s, m, e = fluid.Executor().run(main, feed={"x": xv, "y": yv, "z": zv},
                                      fetch_list=[tiled, split, merged, expanded])
    np.testing.assert_array_equal(t, np.repeat(xv, 3, axis=0))    # t0 t0 t0 t1 t1 t1
    np.testing.assert_array_equal(s, yv.reshape(2, 3, 2))
    np.testing.assert_array_equal(m, yv)
    np.testing.assert_array_equal(e, np.repeat(zv[:, None], 3, axis=1))


def test_sample_helper_draws_valid_ids():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        h0 = fluid.data("h0", [None, H], "float32")
        cell = L.GRUCell(H)
        start = L.fill_constant_batch_size_like(h0, [-1], "int64", START)
        helper = L.SampleEmbeddingHelper(lambda i: fluid.embedding(i, [V, D]), start, END,
                                         softmax_temperature=0.5, seed=3)
        out, _, lens = L.dynamic_decode(
            L.BasicDecoder(cell, helper, output_fn=lambda h: L.fc(h, V)), inits=h0,
            max_step_num=4, return_length=True)
    exe = fluid.Executor()
    exe.run(startup)
    ids, lv = exe.run(main, feed={"h0": RNG.normal(size=(8, H)).astype("float32")},
                      fetch_list=[out.sample_ids, lens])
    assert ids.dtype == np.int64 and ids.shape[0] == 8 and ((ids >= 0) & (ids < V)).all()
    for row, n in zip(ids.tolist(), lv):        # a length counts up to the first </s>
        assert n == (row.index(END) + 1 if END in row else len(row))


def test_decoder_interface_and_errors():
    d = L.Decoder()
    for call in (lambda: d.initialize(None), lambda: d.step(None, None, None),
                 lambda: d.finalize(None, None, None)):
        with pytest.raises(NotImplementedError):
            call()
    assert not d.tracks_own_finished
    assert BeamSearchDecoder(L.GRUCell(2), 0, 1, 2).tracks_own_finished
    with pytest.raises(ValueError, match="beam_size must be a positive int"):
        BeamSearchDecoder(L.GRUCell(2), 0, 1, 0)
    with pytest.raises(ValueError, match="end_token must be a non-negative int"):
        BeamSearchDecoder(L.GRUCell(2), 0, -1, 2)
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        h0 = fluid.data("h0", [None, H], "float32")
        with pytest.raises(TypeError, match="must be a Decoder"):
            L.dynamic_decode(object(), inits=h0)
        dec = BeamSearchDecoder(L.GRUCell(H), 0, 9, 2,
                                embedding_fn=lambda i: fluid.embedding(i, [V, D]),
                                output_fn=lambda h: L.fc(h, V, num_flatten_dims=2))
        with pytest.raises(ValueError, match="max_step_num must be a non-negative int"):
            L.dynamic_decode(dec, inits=h0, max_step_num=-1)
        with pytest.raises(ValueError, match="end_token 9 is not in the vocabulary of 7"):
            L.dynamic_decode(dec, inits=h0, max_step_num=3)
        with pytest.raises(TypeError, match="initial_cell_states must be a Variable"):
            BeamSearchDecoder(L.GRUCell(H), 0, 1, 2).initialize([3])
        with pytest.raises(ValueError, match="softmax_temperature must be > 0"):
            L.SampleEmbeddingHelper(lambda i: i, h0, 1, softmax_temperature=0.0)
        with pytest.raises(TypeError, match="start_tokens must be a Variable"):
            L.GreedyEmbeddingHelper(lambda i: i, [0, 0], 1)


def test_nested_state_structures_survive_the_loop():
    """A cell whose states are a dict of lists: dynamic_decode keeps the nesting."""
    class DictCell(L.RNNCell):
        def __init__(self):
            self.lstm = L.LSTMCell(H)

        def call(self, inputs, states):
            out, new = self.lstm(inputs, states["lstm"])
            return out, {"lstm": new, "step": states["step"] + 1.0}

    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, T, D], "float32")
        lens = fluid.data("lens", [None], "int64")
        cell = DictCell()
        inits = {"lstm": cell.lstm.get_initial_states(x),
                 "step": L.fill_constant_batch_size_like(x, [-1, 1], "float32", 0.0)}
        _, states = L.dynamic_decode(L.BasicDecoder(cell, L.TrainingHelper(x, lens)),
                                     inits=inits, impute_finished=True)
    utils.assert_same_structure(states, inits)
    exe = fluid.Executor()
    exe.run(startup)
    steps, = exe.run(main, feed={"x": RNG.normal(size=(B, T, D)).astype("float32"),
                                 "lens": np.array([4, 1, 2], "int64")},
                     fetch_list=[states["step"]])
    np.testing.assert_array_equal(steps[:, 0], [4, 1, 2])   # frozen once finished
