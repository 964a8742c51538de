"""The examples run end to end as a user runs them, and learn."""
import os
import subprocess
import sys

import pytest
from paths import ROOT

sys.path.insert(0, os.path.join(ROOT, "examples"))


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_digits_reaches_95_percent_held_out(model):
    """sklearn's bundled digits, 450 held-out images, 10 epochs of Adam: at least 95%."""
    import digits
    acc = digits.train(model, getattr(digits, model), epochs=10, verbose=False)
    assert acc >= 0.95, f"{model}: held-out accuracy {acc:.4f} < 0.95"


def test_digits_script_runs():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "digits.py"),
                        "--epochs", "1", "--model", "mlp"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "held-out accuracy" in r.stdout


def test_demo_runs_end_to_end(tmp_path):
    """`make demo` on a tiny data set: it says where it writes and how much, generates the
    data, trains with 2 Hogwild workers, reports held out, saves a loss curve PNG and a
    model, and prints a command that runs the model: run as printed, it works."""
    import shlex
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "demo.py"),
                        "--lines", "6000", "--test-lines", "2000", "--files", "2",
                        "--epochs", "1", "--workers", "2", "--data-dir", "d",
                        "--out-dir", "out"], capture_output=True, text=True, timeout=300,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "examples/s" in r.stdout and "generating model (best)" in r.stdout
    assert r.stdout.startswith("writes: ~2 MB of data to d (once; reused after), ~41 MB")
    assert (out / "ctr_loss.png").stat().st_size > 10000
    assert (out / "ctr_model" / "__model__").exists()
    lines = r.stdout.splitlines()
    cmd = lines[lines.index(next(x for x in lines if x.startswith("run the saved model"))) + 1]
    ran = subprocess.run(shlex.split(cmd), capture_output=True, text=True, cwd=tmp_path)
    assert ran.returncode == 0, (cmd, ran.stderr[-2000:])
    assert "save_infer_model/scale_0: float32 [8, 2]" in ran.stdout
    r2 = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "demo.py"),
                         "--lines", "6000", "--test-lines", "2000", "--files", "2",
                         "--epochs", "1", "--workers", "1", "--data-dir", str(tmp_path / "d"),
                         "--out-dir", str(out)], capture_output=True, text=True, timeout=300)
    assert r2.returncode == 0 and "data: reusing" in r2.stdout


@pytest.mark.parametrize("script,args,result", [
    ("ctr_dnn.py", ["--lines", "6000", "--epochs", "1"], r"held-out log-loss 0\.\d+ \(optimum"),
    ("textcls.py", ["--docs", "4000", "--epochs", "1"], r"held out: accuracy 0\.\d+ \(Bayes"),
    ("word2vec.py", ["--sentences", "300", "--epochs", "1"],
     r"word similarity .*: -?0\.\d+ untrained -> -?0\.\d+ trained"),
])
def test_model_examples_run_on_their_own_and_say_what_they_did(script, args, result):
    """Each AsyncExecutor example, run as a script, says what data it made, how it trains,
    each epoch, and the held-out result."""
    import re
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", script), *args],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout
    assert out.startswith("data: ") and "\ntrain: " in out and "\nepoch 1: mean loss" in out
    assert re.search(result, out), out
