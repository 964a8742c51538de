import numpy as np

from ._synth import creator, rng

_PROTO = np.random.RandomState(5).uniform(0, 1, (100, 3072)).astype("float32")


def _samples(split, n, classes):
    def make():
        r = rng("cifar", split + str(classes))
        labels = r.randint(0, classes, n)
        x = np.clip(_PROTO[labels] + r.normal(0, 0.2, (n, 3072)), 0, 1).astype("float32")
        return [(x[i], int(labels[i])) for i in range(n)]
    return make


def train10(cycle=False):
    return creator(_samples("train", 640, 10), cycle)


def test10(cycle=False):
    return creator(_samples("test", 128, 10), cycle)


def train100():
    return creator(_samples("train", 640, 100))


def test100():
    return creator(_samples("test", 128, 100))


def fetch():
    pass
