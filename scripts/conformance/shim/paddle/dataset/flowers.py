import numpy as np

from ._synth import creator, rng


def _samples(split, n):
    def make():
        r = rng("flowers", split)
        labels = r.randint(1, 103, n)
        return [(r.uniform(0, 1, 3 * 224 * 224).astype("float32"), int(labels[i]))
                for i in range(n)]
    return make


def train(mapper=None, buffered_size=1024, use_xmap=True, cycle=False):
    return creator(_samples("train", 64))


def test(mapper=None, buffered_size=1024, use_xmap=True, cycle=False):
    return creator(_samples("test", 32))


def valid(mapper=None, buffered_size=1024, use_xmap=True):
    return creator(_samples("valid", 32))


def fetch():
    pass
