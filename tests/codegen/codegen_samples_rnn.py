"""Samples of the recurrent ops' compiled forms (fluidity/ops/rnn.py, runtime/rnn.h): Paddle
2.x's `rnn` in each mode, bidirectional, stacked, with SequenceLength; Fluid's `lstm` / `gru`
over LoD sequences (empty ones included) forward and reverse, with peepholes, initial states,
other activations; `lstm_unit`, `gru_unit`. Compiled vs the numpy kernels by
test_emitters.py; gradients through the kernels' gradient ops (the compiled forward's
intermediate outputs feed them)."""
import numpy as np
from codegen_samples import f32, rng

from fluidity.core.tensor import LoDTensor

GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def rnn(mode, layers=1, bidirec=False, with_len=False, len_dtype=np.int64, **attrs):
    """Inputs of the rnn op in Paddle's WeightList layout: Input [T, B, I], PreState
    [layers * dirs, B, H] (h, and c for LSTM), every (layer, direction)'s W_ih, W_hh, then
    their b_ih, b_hh."""
    def sample():
        t, b, i, h = int(rng.integers(2, 5)), int(rng.integers(1, 4)), 3, 4
        dirs, g = 2 if bidirec else 1, GATES[mode]
        ws, bs = [], []
        for layer in range(layers):
            for _ in range(dirs):
                ws += [f32(g * h, i if layer == 0 else h * dirs, lo=-0.7, hi=0.7),
                       f32(g * h, h, lo=-0.7, hi=0.7)]
                bs += [f32(g * h, lo=-0.3, hi=0.3), f32(g * h, lo=-0.3, hi=0.3)]
        n_states = 2 if mode == "LSTM" else 1
        ins = {"Input": f32(t, b, i),
               "PreState": [(f"s{k}", f32(layers * dirs, b, h, lo=-1, hi=1))
                            for k in range(n_states)],
               "WeightList": [(f"w{k}", w) for k, w in enumerate(ws + bs)]}
        if with_len:
            lens = rng.integers(0, t + 1, b).astype(len_dtype)
            lens[0] = t
            ins["SequenceLength"] = lens
        wrt = ["Input", ("PreState", 0), ("WeightList", 0), ("WeightList", 1),
               ("WeightList", len(ws) + 1)]
        return (ins, {"mode": mode, "num_layers": layers, "is_bidirec": bidirec,
                      "hidden_size": h, "input_size": i, **attrs}, wrt,
                {"Out": 1, "State": n_states, "Reserve": 1, "DropoutState": 1})
    return sample


def lod(x, lens):
    t = LoDTensor(x)
    t.set_recursive_sequence_lengths([lens])
    return t


def seq_lens():
    return [int(n) for n in rng.integers(0, 5, int(rng.integers(1, 5)))] + [2]


def lstm(peep=True, reverse=False, init=False, **attrs):
    def sample():
        d, lens = 3, seq_lens()
        ins = {"Input": lod(f32(sum(lens), 4 * d), lens), "Weight": f32(d, 4 * d, lo=-0.5, hi=0.5),
               "Bias": f32(1, (7 if peep else 4) * d, lo=-0.5, hi=0.5)}
        if init:
            ins.update(H0=f32(len(lens), d), C0=f32(len(lens), d))
        wrt = ["Input", "Weight", "Bias"] + (["H0", "C0"] if init else [])
        return ins, {"use_peepholes": peep, "is_reverse": reverse, **attrs}, wrt
    return sample


def gru(bias=True, reverse=False, init=False, origin=False, **attrs):
    def sample():
        d, lens = 3, seq_lens()
        ins = {"Input": lod(f32(sum(lens), 3 * d), lens), "Weight": f32(d, 3 * d, lo=-0.5, hi=0.5)}
        if bias:
            ins["Bias"] = f32(1, 3 * d, lo=-0.5, hi=0.5)
        if init:
            ins["H0"] = f32(len(lens), d)
        wrt = ["Input", "Weight"] + (["Bias"] if bias else []) + (["H0"] if init else [])
        return ins, {"is_reverse": reverse, "origin_mode": origin, **attrs}, wrt
    return sample


def gru_unit(bias=True, origin=False, **attrs):
    def sample():
        n, d = int(rng.integers(1, 5)), 3
        ins = {"Input": f32(n, 3 * d), "HiddenPrev": f32(n, d),
               "Weight": f32(d, 3 * d, lo=-0.5, hi=0.5)}
        if bias:
            ins["Bias"] = f32(1, 3 * d, lo=-0.5, hi=0.5)
        return ins, {"origin_mode": origin, **attrs}, list(ins)
    return sample


def lstm_unit():
    n, d = int(rng.integers(1, 5)), 3
    return ({"X": f32(n, 4 * d), "C_prev": f32(n, d)}, {"forget_bias": 0.5}, ["X", "C_prev"])


SAMPLES = {
    "rnn": rnn("LSTM", 2, is_test=True),
    "lstm": lstm(),
    "gru": gru(),
    "gru_unit": gru_unit(),
    # StaticRNN's hand-off (a copy), its gradient a copy of Out@GRAD; the recurrent ops
    # around them: tests/codegen/test_recurrent_compiled.py
    "rnn_memory_helper": lambda: ({"X": f32(3, 4)}, {}, ["X"]),
    "lstm_unit": lstm_unit,
}

EXTRA = {
    "rnn GRU bidirectional": ("rnn", rnn("GRU", 1, True)),
    "rnn LSTM bidirectional 3 layers, lengths": ("rnn", rnn("LSTM", 3, True, True,
                                                           dropout_prob=0.5, is_test=True)),
    "rnn GRU 2 layers, int32 lengths": ("rnn", rnn("GRU", 2, False, True, np.int32)),
    "rnn RNN_TANH bidirectional, lengths": ("rnn", rnn("RNN_TANH", 1, True, True)),
    "rnn RNN_RELU 2 layers": ("rnn", rnn("RNN_RELU", 2)),
    "rnn LSTM 1 layer, dropout (none with one layer)": ("rnn", rnn("LSTM", 1,
                                                                   dropout_prob=0.5)),
    "lstm reverse, initial states, no peepholes": ("lstm", lstm(False, True, True)),
    "lstm reverse, peepholes, other activations": ("lstm", lstm(
        True, True, False, gate_activation="tanh", cell_activation="relu",
        candidate_activation="identity")),
    "gru reverse, initial state, origin mode": ("gru", gru(True, True, True, True)),
    "gru without bias, relu": ("gru", gru(False, False, False, False, activation="relu")),
    "gru_unit origin mode, no bias": ("gru_unit", gru_unit(False, True)),
    "gru_unit relu, tanh gates (activation codes)": ("gru_unit", gru_unit(
        activation=3, gate_activation=2)),
}
