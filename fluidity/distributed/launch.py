"""Start a local parameter-server job: `python -m fluidity.distributed.launch --server_num 2
--worker_num 2 train.py [args]` (also `fluidity launch ...`).

Each process runs `train.py` with Paddle's environment variables: TRAINING_ROLE (PSERVER or
TRAINER), PADDLE_PSERVERS_IP_PORT_LIST, PADDLE_TRAINERS_NUM, PADDLE_TRAINER_ID, POD_IP and
PADDLE_PORT (a pserver's own address; free ports on 127.0.0.1 unless --servers names
them), PADDLE_CURRENT_ENDPOINT. Output goes to `<log_dir>/serverlog.<i>` and
`workerlog.<i>`. When a process fails, every other one is stopped and the launcher exits
non-zero naming it; when all trainers are done the servers get `--server_timeout` seconds
to exit after the trainers' goodbyes.

Every process gets the job's RPC token (FLUIDITY_RPC_TOKEN: the caller's, or a fresh random
one), so the pservers refuse calls from outside the job. `--checkpoint_dir` gives the
pservers a recovery directory (FLAGS_pserver_checkpoint_dir; `pserver.py`).
`--backend ray` places the processes as Ray actors on the cluster at `--ray_address`
(default: a local Ray instance started for the job; `ray_launch.py`)."""
import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time

from .roles import job_environment, role_environment


def free_ports(n, host="127.0.0.1"):
    """`n` distinct ports free on `host` now."""
    socks, ports = [], []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


def _parser():
    p = argparse.ArgumentParser(prog="python -m fluidity.distributed.launch",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--server_num", type=int, default=1)
    p.add_argument("--worker_num", type=int, default=1)
    p.add_argument("--servers", default="",
                   help="comma-separated ip:port of the pservers (default: free local ports)")
    p.add_argument("--log_dir", default="log")
    p.add_argument("--server_timeout", type=float, default=30.0,
                   help="seconds the pservers get to exit after the trainers are done")
    p.add_argument("--checkpoint_dir", default="",
                   help="the pservers' recovery directory (FLAGS_pserver_checkpoint_dir): "
                        "a pserver restarted on its endpoint resumes from it")
    p.add_argument("--backend", choices=("local", "ray"), default="local",
                   help="local processes (default) or Ray actors on a Ray cluster")
    p.add_argument("--ray_address", default="",
                   help="the Ray cluster to run on (ray.init's address; default: a local "
                        "instance started for the job)")
    p.add_argument("training_script")
    p.add_argument("training_script_args", nargs=argparse.REMAINDER)
    return p


class _Proc:
    def __init__(self, role, idx, cmd, env, log_path):
        self.role, self.idx, self.log_path = role, idx, log_path
        self.log = open(log_path, "wb")
        self.popen = subprocess.Popen(cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                      start_new_session=True)

    @property
    def name(self):
        return f"{self.role.lower()} {self.idx} (pid {self.popen.pid}, log {self.log_path})"

    def stop(self, wait=5.0):
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, signal.SIGTERM)
                os.killpg(self.popen.pid, signal.SIGCONT)   # a stopped one handles it too
                self.popen.wait(wait)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                try:
                    os.killpg(self.popen.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.popen.wait()
        self.log.close()


def _terminated(signum, _frame):
    raise SystemExit(128 + signum)   # unwinds through launch()'s finally: children stopped


def launch(argv=None):
    a = _parser().parse_args(argv)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminated)
    if a.server_num < 1 or a.worker_num < 1:
        raise SystemExit("launch: --server_num and --worker_num must be at least 1")
    if a.servers:
        eps = [e.strip() for e in a.servers.split(",") if e.strip()]
        if len(eps) != a.server_num:
            raise SystemExit(f"launch: --servers names {len(eps)} endpoints, --server_num "
                             f"is {a.server_num}")
    elif a.backend == "local":
        eps = [f"127.0.0.1:{p}" for p in free_ports(a.server_num)]
    else:
        eps = None                                  # the Ray actors' own addresses
    os.makedirs(a.log_dir, exist_ok=True)
    job_env = job_environment(a, os.environ)
    if a.backend == "ray":
        from .ray_launch import launch_on_ray
        return launch_on_ray(a, job_env, eps)
    cmd = [sys.executable, "-u", a.training_script] + list(a.training_script_args)
    base = dict(os.environ, **job_env)
    servers, trainers = [], []
    try:
        for i in range(len(eps)):
            servers.append(_Proc("PSERVER", i, cmd,
                                 dict(base, **role_environment("PSERVER", i, eps)),
                                 os.path.join(a.log_dir, f"serverlog.{i}")))
        for i in range(a.worker_num):
            trainers.append(_Proc("TRAINER", i, cmd,
                                  dict(base, **role_environment("TRAINER", i, eps)),
                                  os.path.join(a.log_dir, f"workerlog.{i}")))
        rc = _watch(servers, trainers, a.server_timeout)
        if rc == 0:
            print(f"launch: {a.worker_num} trainer(s) and {a.server_num} pserver(s) "
                  f"finished; their output is in {a.log_dir}/workerlog.<i> and serverlog.<i>")
        return rc
    finally:
        for p in servers + trainers:
            p.stop()


def _watch(servers, trainers, server_timeout):
    done_at = None
    while True:
        for p in servers + trainers:
            rc = p.popen.poll()
            if rc not in (None, 0):
                print(f"launch: {p.name} exited with status {rc}; stopping the others",
                      file=sys.stderr)
                return 1
        if all(p.popen.poll() == 0 for p in trainers):
            if all(p.popen.poll() == 0 for p in servers):
                return 0
            done_at = done_at or time.monotonic()
            if time.monotonic() - done_at > server_timeout:
                left = [p.name for p in servers if p.popen.poll() is None]
                print(f"launch: the trainers are done but {left} did not exit within "
                      f"{server_timeout:g} s; stopping them", file=sys.stderr)
                return 1
        time.sleep(0.05)


def main(argv=None):
    sys.exit(launch(argv))


if __name__ == "__main__":
    main()
