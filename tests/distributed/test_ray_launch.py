"""`fluidity launch --backend ray`: the job's processes as Ray actors on a local Ray
instance started for the job; the same training script as the local launcher, the same
results; one failure stops every process and the logs come back."""
import os
import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip("ray", reason="Ray is not installed (pip install 'fluidity[ray]'; "
                                  "`make test` installs it)")

from dist_job import ROOT, load, single_process  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def _launch(tmp_path, script, *args, launcher=("-m", "fluidity.distributed.launch")):
    env = dict(os.environ, PYTHONPATH=ROOT, OPENBLAS_NUM_THREADS="1",
               FLAGS_rpc_deadline="60000", RAY_USAGE_STATS_ENABLED="0")
    cmd = [sys.executable, *launcher, "--backend", "ray", "--server_num", "2",
           "--worker_num", "2", "--log_dir", str(tmp_path / "log"), "--server_timeout", "10",
           script, *map(str, args)]
    return subprocess.run(cmd, env=env, cwd=str(tmp_path), capture_output=True, text=True,
                          timeout=240)


def test_sync_job_on_ray_matches_single_process(tmp_path):
    steps, lr = 4, 0.1
    r = _launch(tmp_path, os.path.join(HERE, "dist_mlp.py"), "sync", tmp_path, steps, lr)
    logs = {f.name: f.read_text() for f in (tmp_path / "log").iterdir()}
    assert r.returncode == 0, r.stderr[-3000:] + str(logs)
    assert "launch: 2 trainer(s) and 2 pserver(s) finished" in r.stdout   # as the local one
    assert sorted(logs) == ["serverlog.0", "serverlog.1", "workerlog.0", "workerlog.1"]
    init, final, _ = load(tmp_path / "trainer_0.npz")
    for k, v in single_process(init, steps, lr, 2).items():
        np.testing.assert_array_equal(final[k], v, err_msg=k)


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_one_failure_stops_the_ray_job(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import os, sys, time\n"
        "role, tid = os.environ['TRAINING_ROLE'], os.environ['PADDLE_TRAINER_ID']\n"
        "port = os.environ.get('PADDLE_PORT', '')\n"
        f"open(os.path.join({str(tmp_path)!r}, f'pid.{{role}}.{{tid}}.{{port}}'), 'w')"
        ".write(str(os.getpid()))\n"
        "print(role, os.environ['PADDLE_PSERVERS_IP_PORT_LIST'], 'token' if "
        "os.environ.get('FLUIDITY_RPC_TOKEN') else 'no token', flush=True)\n"
        "if role == 'TRAINER' and tid == '1':\n"
        "    time.sleep(1); print('trainer 1 fails', flush=True); sys.exit(3)\n"
        "time.sleep(120)\n")
    t0 = time.monotonic()
    r = _launch(tmp_path, str(bad), launcher=("-m", "fluidity.cli", "launch"))
    assert r.returncode == 3, r.stderr[-3000:]      # the failed trainer's status
    assert "trainer 1" in r.stderr and "status 3" in r.stderr, r.stderr[-3000:]
    assert "  | trainer 1 fails" in r.stderr, r.stderr[-3000:]     # its log's tail
    assert time.monotonic() - t0 < 120
    assert "trainer 1 fails" in (tmp_path / "log" / "workerlog.1").read_text()
    server_log = (tmp_path / "log" / "serverlog.0").read_text()
    assert server_log.startswith("PSERVER 127.0.0.1:") and "no token" not in server_log
    pids = [int(p.read_text()) for p in tmp_path.glob("pid.*")]
    assert len(pids) == 4
    assert not [p for p in pids if _alive(p)], "processes left behind"
