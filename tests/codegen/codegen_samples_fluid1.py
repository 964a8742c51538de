"""Samples of the compiled forms of the Fluid 1.x ops (ops/sequence.py's sequence_conv,
ops/loss_fluid1.py's cos_sim, ops/crf.py's CRF ops, dropout's gradient, ...; runtime/seq.h):
LoD inputs with empty sequences among them. Compiled vs the numpy kernels by
test_emitters.py, gradients through the kernels' gradient ops."""
import numpy as np
from codegen_samples import f32, rng

from fluidity.core.tensor import LoDTensor


def lod(x, lens):
    t = LoDTensor(x)
    t.set_recursive_sequence_lengths([lens])
    return t


def seq_lens():
    """A few sequences, one of them empty, one longer than any context window here."""
    return [int(n) for n in rng.integers(1, 4, int(rng.integers(1, 4)))] + [0, 5]


def seq_conv(k=3, start=-1, trainable=False):
    def sample():
        m, n, lens = 3, int(rng.integers(1, 5)), seq_lens()
        ins = {"X": lod(f32(sum(lens), m), lens), "Filter": f32(k * m, n, lo=-1, hi=1)}
        wrt = ["X", "Filter"]
        if trainable:
            ins["PaddingData"] = f32(max(0, -start) + max(0, start + k - 1), m)
            wrt.append("PaddingData")
        return ins, {"contextLength": k, "contextStart": start,
                     "paddingTrainable": trainable}, wrt
    return sample


def cos_sim(y_rows=None):
    def sample():
        n = int(rng.integers(1, 6))
        return ({"X": f32(n, 2, 3), "Y": f32(y_rows or n, 2, 3)}, {}, ["X", "Y"])
    return sample


def batch_size_like(input_dim_idx=0, lod_input=True, **attrs):
    def sample():
        lens = seq_lens()
        x = f32(sum(lens), 3)
        return ({"Input": lod(x, lens) if lod_input else x},
                {"shape": [-1, 4] if input_dim_idx == 0 else [2, -1, 3],
                 "input_dim_idx": input_dim_idx, "output_dim_idx": 0 if input_dim_idx == 0
                 else 1, "value": 1.5, **attrs}, None)
    return sample


SAMPLES = {
    "sequence_conv": seq_conv(),
    "cos_sim": cos_sim(),
    "fill_constant_batch_size_like": batch_size_like(),
}

EXTRA = {
    "sequence_conv trainable padding, window past both ends": (
        "sequence_conv", seq_conv(4, -2, True)),
    "sequence_conv window ahead, zero padding": ("sequence_conv", seq_conv(2, 0)),
    "cos_sim one Y row for every X row": ("cos_sim", cos_sim(1)),
    "fill_constant_batch_size_like dim 1 of a dense Input, int64": (
        "fill_constant_batch_size_like", batch_size_like(1, False, dtype=3, str_value="7")),
    "fill_constant_batch_size_like rows of a dense Input": (
        "fill_constant_batch_size_like", batch_size_like(0, False)),
}
