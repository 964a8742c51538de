"""imdb: variable-length reviews, the label from which half of the vocabulary dominates."""
from ._synth import creator, rng, word_dict as _dict

VOCAB = 5000


def word_dict(cutoff=150):
    return _dict(VOCAB)


def build_dict(pattern=None, cutoff=150):
    return word_dict()


def _samples(split, word_idx, count):
    def make():
        r = rng("imdb", split)
        v = len(word_idx)
        out = []
        for _ in range(count):
            label = int(r.randint(0, 2))
            length = int(r.randint(5, 60))
            lo, hi = (0, v // 2) if label == 0 else (v // 2, v)
            ids = [int(i) for i in r.randint(lo, hi, length)]
            out.append((ids, label))
        return out
    return make


def train(word_idx):
    return creator(_samples("train", word_idx, 1000))


def test(word_idx):
    return creator(_samples("test", word_idx, 200))


def fetch():
    pass
