"""The examples run end to end as a user runs them, and learn."""
import os
import subprocess
import sys

import pytest
from paths import ROOT

sys.path.insert(0, os.path.join(ROOT, "examples"))


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_digits_reaches_95_percent_held_out(model):
    """sklearn's bundled digits, 450 held-out images, 6 epochs of Adam: at least 95%."""
    import digits
    acc = digits.train(model, getattr(digits, model), epochs=6, verbose=False)
    assert acc >= 0.95, f"{model}: held-out accuracy {acc:.4f} < 0.95"


def test_digits_script_runs():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "digits.py"),
                        "--epochs", "1", "--model", "mlp"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "held-out accuracy" in r.stdout


def test_demo_runs_end_to_end(tmp_path):
    """`make demo` on a tiny data set: data generated, Hogwild training on 2 workers,
    held-out report, saved model that `fluidity run` accepts, loss curve PNG."""
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "demo.py"),
                        "--lines", "6000", "--test-lines", "2000", "--files", "2",
                        "--epochs", "1", "--workers", "2", "--data-dir", str(tmp_path / "d"),
                        "--out-dir", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "examples/s" in r.stdout and "generating model (best)" in r.stdout
    assert (out / "ctr_loss.png").stat().st_size > 10000
    assert (out / "ctr_model" / "__model__").exists()
    r2 = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "demo.py"),
                         "--lines", "6000", "--test-lines", "2000", "--files", "2",
                         "--epochs", "1", "--workers", "1", "--data-dir", str(tmp_path / "d"),
                         "--out-dir", str(out)], capture_output=True, text=True, timeout=300)
    assert r2.returncode == 0 and "data: reusing" in r2.stdout
