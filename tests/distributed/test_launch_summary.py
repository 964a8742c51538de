"""`fluidity launch` when a process fails, as torchrun users expect: the role and rank that
failed first are named, the tail of its log (its traceback) is printed, the others are
stopped, and the launcher exits with the failed process's status."""
import os
import subprocess
import sys
import time

from fluidity.distributed.job_summary import exit_status, log_tail

SCRIPT = """
import os, sys, time
role, tid = os.environ["TRAINING_ROLE"], os.environ["PADDLE_TRAINER_ID"]
def read_batch(n):
    raise ValueError(f"batch {n} has 3 columns, the model takes 4")
if role == "TRAINER" and tid == "1":
    time.sleep(0.5)
    print("trainer 1 starts", flush=True)
    read_batch(42)
if role == "PSERVER" and os.environ.get("FAIL_SERVER"):
    sys.exit(5)
time.sleep(60)
"""


def _launch(tmp_path, **env):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "fluidity.cli", "launch", "--server_num", "1",
                        "--worker_num", "2", "--log_dir", str(tmp_path / "log"), str(script)],
                       capture_output=True, text=True, timeout=120, cwd=str(tmp_path),
                       env=dict(os.environ, **env))
    return r, time.monotonic() - t0


def test_a_failing_trainer_is_named_with_its_traceback_tail(tmp_path):
    r, took = _launch(tmp_path)
    assert r.returncode == 1, r.stderr
    assert took < 30                                  # the others were stopped, not awaited
    err = r.stderr
    assert "launch: trainer 1 (pid " in err and "failed first: it exited with status 1" in err
    assert f"The end of its log ({tmp_path / 'log' / 'workerlog.1'}):" in err
    assert "  | Traceback (most recent call last):" in err
    assert "  |     read_batch(42)" in err
    assert "  | ValueError: batch 42 has 3 columns, the model takes 4" in err
    assert "Traceback" not in r.stdout


def test_the_launcher_exits_with_the_failed_process_status(tmp_path):
    r, _ = _launch(tmp_path, FAIL_SERVER="1")
    assert r.returncode == 5, r.stderr
    assert "launch: pserver 0 (pid " in r.stderr and "exited with status 5" in r.stderr
    assert "(the log is empty)" in r.stderr


def test_log_tail_and_exit_status(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(b"".join(b"line %d\n" % i for i in range(100)) + b"\xff bad utf8")
    tail = log_tail(str(log), lines=3)
    assert tail == ["line 98", "line 99", "\ufffd bad utf8"]
    assert log_tail(str(tmp_path / "missing"))[0].startswith("(cannot read")
    assert exit_status(3) == 3 and exit_status(-9) == 137


def test_log_is_ignored_by_git():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, ".gitignore")) as f:
        assert "/log/" in f.read().split()
