"""imikolov (PTB): n-grams over a vocabulary, the next word a fixed function of the context."""
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
        out = []
        for _ in range(count):
            ctx = [int(w) for w in r.randint(0, v, max(n - 1, 1))]
            nxt = (sum(ctx) * 31 + 7) % v
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
