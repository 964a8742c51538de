"""wmt14: (source ids, target ids, next target ids) with <s>=0, <e>=1, <unk>=2; the target
is a fixed relabelling of the source (learnable)."""
from ._synth import creator, rng

START, END, UNK = 0, 1, 2


def get_dict(dict_size, reverse=True):
    words = ["<s>", "<e>", "<unk>"] + [f"w{i}" for i in range(dict_size - 3)]
    if reverse:
        d = {i: w for i, w in enumerate(words)}
    else:
        d = {w: i for i, w in enumerate(words)}
    return d, dict(d)


def _samples(split, dict_size, count):
    def make():
        r = rng("wmt14", split)
        out = []
        for _ in range(count):
            length = int(r.randint(3, 12))
            src = [int(w) for w in r.randint(3, dict_size, length)]
            trg = [3 + (w * 7) % (dict_size - 3) for w in src]
            out.append(([START] + src + [END], [START] + trg, trg + [END]))
        return out
    return make


def train(dict_size):
    return creator(_samples("train", dict_size, 800))


def test(dict_size):
    return creator(_samples("test", dict_size, 200))


def gen(dict_size):
    return creator(_samples("gen", dict_size, 50))


def fetch():
    pass
