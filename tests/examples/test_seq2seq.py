"""examples/seq2seq.py end to end, both of its models:

* the cell API: LSTMCell encoder and decoder trained compiled through layers.rnn, decoded by
  dynamic_decode greedily and with BeamSearchDecoder; it learns to reverse sequences, and a
  beam of one decodes exactly as greedy;
* LoD sequences: an encoder-decoder trained through two DynamicRNNs, and a greedy decoding
  While loop (stop at </s> or max_len) that reproduces the reversals on held-out sequences.
"""
import os
import subprocess
import sys

import numpy as np
from paths import EXAMPLES

sys.path.insert(0, EXAMPLES)
import seq2seq  # noqa: E402

import fluidity as fluid  # noqa: E402


def test_cell_api_model_learns_to_reverse_and_beam_one_is_greedy():
    losses, accuracy, model, scope = seq2seq.train_cells(steps=120, verbose=False,
                                                         eval_n=100)
    assert np.mean(losses[-10:]) < 0.25 * np.mean(losses[:5]), losses
    # exact reversal of 2..6 tokens over 8 symbols: chance is below 1/64
    assert accuracy["greedy"] >= 0.5 and accuracy["beam search (4)"] >= 0.5, accuracy
    srcs = seq2seq.random_sources(np.random.default_rng(99), 64)
    exe = fluid.Executor()
    greedy = seq2seq.decode_cells(exe, *model.build_decode(beam_size=None), srcs, scope)
    beam1 = seq2seq.decode_cells(exe, *model.build_decode(beam_size=1), srcs, scope)
    assert greedy == beam1
    # decoding compiled (as train_cells runs it) gives the interpreter's tokens
    program, ids = model.build_decode(beam_size=4)
    native = seq2seq.compiled(program, True, ["src", "src_len"], [ids])
    assert seq2seq.decode_cells(exe, native, ids, srcs, scope) == \
        seq2seq.decode_cells(exe, program, ids, srcs, scope)
    # the training program ran compiled where its ops compile: the recurrent ops in Python
    main, _, loss = model.build_train()
    plan = fluid.CompiledProgram(main).with_native_code(
        feed=["src", "src_len", "trg_in", "trg_len", "label"], fetch_list=[loss]).explain()
    assert "segment" in plan and "recurrent" in plan


def test_script_help_and_a_short_run():
    script = os.path.join(EXAMPLES, "seq2seq.py")
    r = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "--beam-size" in r.stdout and "--api {cell,lod}" in r.stdout
    r = subprocess.run([sys.executable, script, "--steps", "2", "--batch", "8",
                        "--interpreted"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "exact-match accuracy, greedy" in r.stdout
    assert "exact-match accuracy, beam search (4)" in r.stdout


def test_seq2seq_learns_to_reverse_and_decodes_greedily():
    losses, exact = seq2seq.train(steps=250, verbose=False, eval_n=200)
    first, last = losses[0], np.mean(losses[-20:])
    assert last < 0.1 * first, (first, last)
    # exact reversal of 2..6 tokens over 8 symbols: chance is below 1/64
    assert exact >= 0.8, exact


def test_decoding_loop_stops_at_the_end_token_or_max_len():
    rng = np.random.default_rng(5)
    exe, scope = fluid.Executor(), fluid.Scope()
    main, startup, _ = seq2seq.build_train()
    exe.run(startup, scope=scope)                 # untrained weights: no </s> guaranteed
    src = seq2seq.make_batch(rng, 4)[0]
    short, tokens = seq2seq.build_decode(max_len=3)
    got, steps = seq2seq.decode(exe, short, tokens, src, scope)
    assert steps <= 3 and len(got) == 4 and all(len(g) <= 3 for g in got)
    # bias the output layer towards </s>: every sequence ends at the first step
    b = scope.find_var("out.b").value
    b._array = np.where(np.arange(seq2seq.VOCAB) == seq2seq.END, 100.0, 0.0).astype("float32")
    long, tokens = seq2seq.build_decode(max_len=10)
    got, steps = seq2seq.decode(exe, long, tokens, src, scope)
    assert steps == 1 and got == [[]] * 4
