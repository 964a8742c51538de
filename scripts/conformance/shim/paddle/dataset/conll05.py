"""conll05 (semantic role labelling): nine parallel sequences per sample (word, five context
words, predicate, mark, label ids), labels a fixed function of the words."""
import os
import tempfile

import numpy as np

from ._synth import creator, rng

_WORDS, _VERBS, _LABELS, EMB_DIM = 4000, 300, 59, 32


def get_dict():
    word_dict = {f"w{i}": i for i in range(_WORDS)}
    verb_dict = {f"v{i}": i for i in range(_VERBS)}
    label_dict = {f"l{i}": i for i in range(_LABELS)}
    return word_dict, verb_dict, label_dict


def get_embedding():
    """A file as the real one: a 16-byte header, then float32 [words, 32]."""
    path = os.path.join(tempfile.gettempdir(), f"conll05_emb_{os.getuid()}.bin")
    if not os.path.exists(path):
        emb = np.random.RandomState(9).normal(0, 0.1, (_WORDS, EMB_DIM)).astype("float32")
        with open(path + ".tmp", "wb") as f:
            f.write(b"\0" * 16)
            emb.tofile(f)
        os.replace(path + ".tmp", path)
    return path


def _samples(split, count):
    def make():
        r = rng("conll05", split)
        out = []
        for _ in range(count):
            n = int(r.randint(4, 20))
            words = [int(w) for w in r.randint(0, _WORDS, n)]
            pos = int(r.randint(0, n))
            ctx = [[words[min(max(pos + d, 0), n - 1)]] * n for d in (-2, -1, 0, 1, 2)]
            pred = [int(r.randint(0, _VERBS))] * n
            mark = [1 if abs(i - pos) <= 2 else 0 for i in range(n)]
            labels = [w % _LABELS for w in words]
            out.append((words, *ctx, pred, mark, labels))
        return out
    return make


def test():
    return creator(_samples("test", 400))


def train():
    return creator(_samples("train", 400))


def fetch():
    pass
