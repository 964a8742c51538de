"""What the synthetic data sets share: seeded draws and reader creators."""
import zlib

import numpy as np


def rng(name, split):
    """The same draws in every run and process (str hashes are salted per process)."""
    return np.random.RandomState(zlib.crc32(f"{name}/{split}".encode()))


def creator(samples, cycle=False):
    """A paddle reader creator over a list built on first use; `cycle`: it starts over at
    the end, without end (Paddle's cifar readers' cycle=True)."""
    cache = []

    def reader():
        if not cache:
            cache.extend(samples())
        while True:
            yield from cache
            if not cycle:
                return
    return reader


def word_dict(size, extra=("<unk>",)):
    words = [f"w{i}" for i in range(size - len(extra))] + list(extra)
    return {w: i for i, w in enumerate(words)}
