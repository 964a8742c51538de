"""A trainer that dies (SIGKILL) or hangs (SIGSTOP) mid-run without saying goodbye: the
pservers notice its silence within FLAGS_pserver_trainer_timeout and the other trainers
fail with an error naming it, within seconds; under the launcher the whole job stops,
non-zero, leaving no process behind."""
import os
import signal
import subprocess
import sys
import time

from dist_job import ROOT, SCRIPT, Job

FAST = {"FLAGS_pserver_trainer_timeout": "2", "FLAGS_rpc_deadline": "60000",
        "FLUIDITY_TEST_STEP_SLEEP": "0.02"}


def test_killed_trainer_fails_the_others_naming_it(tmp_path):
    job = Job(tmp_path, ["sync", tmp_path, 100000, 0.01], env=FAST)
    try:
        job.start()
        job.wait_for("worker", 1, r"step 3\b", 60)
        t0 = time.monotonic()
        job.kill("worker", 1, signal.SIGKILL)
        assert job.wait("worker", 0, 20) != 0
        took = time.monotonic() - t0
        for i in range(2):
            assert job.wait("server", i, 20) != 0
    finally:
        job.stop_all()
    assert took < 12, took
    log = job.log("worker", 0)
    assert "trainer 1 has not been heard from" in log and "did not say goodbye" in log, \
        job.logs()
    assert "trainer 1 has not been heard from" in job.log("server", 0)


def _children(pid):
    """Pids of the processes whose parent is `pid`."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d))
    return out


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _trainer_pid(kids, tid):
    for p in kids:
        try:
            with open(f"/proc/{p}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if b"TRAINING_ROLE=TRAINER" in env and f"PADDLE_TRAINER_ID={tid}".encode() in env:
            return p
    return None


def _launch_and_break(tmp_path, sig):
    env = dict(os.environ, PYTHONPATH=ROOT, OPENBLAS_NUM_THREADS="1", **FAST)
    log_dir = tmp_path / "log"
    cmd = [sys.executable, "-m", "fluidity.distributed.launch", "--server_num", "2",
           "--worker_num", "2", "--log_dir", str(log_dir), SCRIPT, "sync", str(tmp_path),
           "100000", "0.01"]
    proc = subprocess.Popen(cmd, env=env, cwd=str(tmp_path), stderr=subprocess.PIPE,
                            text=True)
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end:
            if (log_dir / "workerlog.1").is_file() and \
                    "step 3" in (log_dir / "workerlog.1").read_text():
                break
            time.sleep(0.05)
        kids = _children(proc.pid)
        assert len(kids) == 4, kids
        t0 = time.monotonic()
        os.kill(_trainer_pid(kids, 1), sig)
        _out, err = proc.communicate(timeout=30)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0
    assert not [p for p in kids if _alive(p)], "processes left behind"
    return took, err, log_dir


def test_launcher_stops_the_job_when_a_trainer_hangs(tmp_path):
    took, err, log_dir = _launch_and_break(tmp_path, signal.SIGSTOP)
    assert took < 15, took
    log = (log_dir / "workerlog.0").read_text()
    assert "trainer 1 has not been heard from" in log, log[-3000:]
    assert "exited with status" in err


def test_launcher_stops_the_job_when_a_trainer_is_killed(tmp_path):
    took, err, _log_dir = _launch_and_break(tmp_path, signal.SIGKILL)
    assert took < 10, took
    assert "trainer 1" in err and "killed by SIGKILL" in err, err
