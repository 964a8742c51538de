"""examples/dist_ctr.py as a user runs it: `fluidity launch --server_num 2 --worker_num 2
examples/dist_ctr.py ...` trains the CTR-DNN GEO-style on loopback; a trainer's bad data
line stops the whole job, naming the file and line."""
import os
import subprocess
import sys

import pytest

from paths import ROOT

sys.path.insert(0, os.path.join(ROOT, "examples"))
import dist_ctr  # noqa: E402

SCRIPT = os.path.join(ROOT, "examples", "dist_ctr.py")


def _launch(tmp_path, *args, timeout=120):
    env = dict(os.environ, PYTHONPATH=ROOT, OPENBLAS_NUM_THREADS="1",
               FLAGS_rpc_deadline="20000")
    cmd = [sys.executable, "-m", "fluidity.cli", "launch", "--server_num", "2",
           "--worker_num", "2", "--log_dir", str(tmp_path / "log"), "--server_timeout", "10",
           SCRIPT, *args]
    try:
        return subprocess.run(cmd, env=env, cwd=str(tmp_path), capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the launcher did not finish within {timeout} s\n{_logs(tmp_path)}")


def _logs(tmp_path):
    d = tmp_path / "log"
    if not d.exists():
        return ""
    return "\n".join(f"== {f.name}\n{f.read_text()[-3000:]}" for f in sorted(d.iterdir()))


def test_dist_ctr_trains_with_two_trainers_and_two_pservers(tmp_path):
    r = _launch(tmp_path, "--lines", "4000", "--files", "4", "--epochs", "1",
                "--push-nums", "8")
    assert r.returncode == 0, r.stderr + _logs(tmp_path)
    assert "2 trainer(s) and 2 pserver(s) finished" in r.stdout
    for k in range(2):
        log = (tmp_path / "log" / f"workerlog.{k}").read_text()
        assert f"trainer {k} epoch 1" in log and "(threads)" in log, log
        assert "held-out log-loss" in log and "syncs" in log, log
        loss = float(log.split("held-out log-loss ")[1].split()[0])
        assert loss < 0.69, log                    # better than a coin (ln 2)
    for k in range(2):
        assert "every trainer said goodbye" in (tmp_path / "log" / f"serverlog.{k}").read_text()


def test_a_bad_line_in_a_trainers_data_stops_the_job_naming_file_and_line(tmp_path):
    data = tmp_path / "data"
    train, _test = dist_ctr.make_data(str(data), 2000, 2, test_lines=200)
    bad = train["files"][1]                          # trainer 1's file
    lines = open(bad).read().splitlines()
    lines[40] = lines[40].replace(" ", " x", 1)
    open(bad, "w").write("\n".join(lines) + "\n")
    r = _launch(tmp_path, "--data-dir", str(data), "--epochs", "1")
    assert r.returncode != 0
    assert "trainer 1" in r.stderr, r.stderr
    log = (tmp_path / "log" / "workerlog.1").read_text()
    assert bad in log and "41" in log, log
