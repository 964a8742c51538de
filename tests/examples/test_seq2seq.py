"""examples/seq2seq.py end to end: an encoder-decoder trained through two DynamicRNNs learns
to reverse sequences, and a greedy decoding While loop (stop at </s> or max_len) reproduces
the reversals on held-out sequences."""
import os
import sys

import numpy as np
from paths import EXAMPLES

sys.path.insert(0, EXAMPLES)
import seq2seq  # noqa: E402

import fluidity as fluid  # noqa: E402


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
