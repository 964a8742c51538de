"""imikolov (PTB): n-grams over a vocabulary whose words are drawn with Zipf frequencies, as
text's are, the next word a fixed function of the last one (so a language model learns it,
as it learns PTB: Paddle's book test trains until the cost is under 5)."""
import numpy as np

from ._synth import creator, rng, word_dict


class DataType:
    NGRAM = 1
    SEQ = 2


VOCAB = 2000


def build_dict(min_word_freq=50):
    return word_dict(VOCAB, extra=("<s>", "<e>", "<unk>"))


def _samples(split, word_idx, n, data_type, count):
    def make():
        r = rng("imikolov", split)
        v = len(word_idx)
        freq = 1.0 / np.arange(1, v + 1) ** 1.1
        follows = rng("imikolov", "bigrams").permutation(v)    # the same in every split
        out = []
        for _ in range(count):
            ctx = [int(w) for w in r.choice(v, max(n - 1, 1), p=freq / freq.sum())]
            nxt = int(follows[ctx[-1]])
            if data_type == DataType.NGRAM:
                out.append(tuple(ctx[:n - 1] + [nxt]))
            else:
                seq = ctx + [nxt]
                out.append((seq[:-1], seq[1:]))
        return out
    return make


def train(word_idx, n, data_type=DataType.NGRAM):
    return creator(_samples("train", word_idx, n, data_type, 3000))


def test(word_idx, n, data_type=DataType.NGRAM):
    return creator(_samples("test", word_idx, n, data_type, 500))


def fetch():
    pass
