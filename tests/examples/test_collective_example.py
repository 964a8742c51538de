"""examples/collective_mlp.py runs as a user runs it: alone (no extra library), and as 2
trainers under `fluidity launch --collective` (the collective library), and learns."""
import os
import re
import subprocess
import sys

import pytest
from paths import ROOT

from fluidity.distributed import collective

SCRIPT = os.path.join(ROOT, "examples", "collective_mlp.py")
ARGS = ["--epochs", "2", "--examples", "2048"]


def _accuracy(text):
    m = re.search(r"trainers: (\d+); held-out accuracy ([0-9.]+)", text)
    assert m, text
    return int(m.group(1)), float(m.group(2))


def test_one_trainer():
    r = subprocess.run([sys.executable, SCRIPT] + ARGS, capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    assert r.returncode == 0, r.stderr[-3000:]
    n, acc = _accuracy(r.stdout)
    assert n == 1 and acc >= 0.95


@pytest.mark.skipif(collective.library_missing() is not None,
                    reason=f"the collective library is absent: {collective.library_missing()}")
def test_two_trainers_under_the_launcher(tmp_path):
    cmd = [sys.executable, "-m", "fluidity.distributed.launch", "--collective", "--worker_num",
           "2", "--log_dir", str(tmp_path / "log"), SCRIPT] + ARGS + [
           "--model-dir", str(tmp_path / "model")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    log0 = (tmp_path / "log" / "workerlog.0").read_text()
    assert r.returncode == 0, r.stderr[-3000:] + log0[-3000:]
    n, acc = _accuracy(log0)
    assert n == 2 and acc >= 0.95
    assert (tmp_path / "model" / "__model__").exists()
