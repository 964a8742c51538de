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


SAMPLES = {
    "sequence_conv": seq_conv(),
}

EXTRA = {
    "sequence_conv trainable padding, window past both ends": (
        "sequence_conv", seq_conv(4, -2, True)),
    "sequence_conv window ahead, zero padding": ("sequence_conv", seq_conv(2, 0)),
}
