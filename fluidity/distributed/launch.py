"""Start a local parameter-server job: `python -m fluidity.distributed.launch --server_num 2
--worker_num 2 train.py [args]` (also `fluidity launch ...`).

Each process runs `train.py` with Paddle's environment variables: TRAINING_ROLE (PSERVER or
TRAINER), PADDLE_PSERVERS_IP_PORT_LIST, PADDLE_TRAINERS_NUM, PADDLE_TRAINER_ID, POD_IP and
PADDLE_PORT (a pserver's own address; free ports on 127.0.0.1 unless --servers names
them), PADDLE_CURRENT_ENDPOINT. Output goes to `<log_dir>/serverlog.<i>` and
`workerlog.<i>`. When a process fails, the launcher names the role and rank that failed
first (each process's exit is timed by a thread waiting on it), prints the last lines of
its log (its traceback, as torchrun does), stops every other one and exits with that
process's status (128 + N for a signal N); when all trainers are done the servers get
`--server_timeout` seconds to exit after the trainers' goodbyes, and the launcher says
where the logs are.

Every process gets the job's RPC token (FLUIDITY_RPC_TOKEN: the caller's, or a fresh random
one), so the pservers refuse calls from outside the job. `--checkpoint_dir` gives the
pservers a recovery directory (FLAGS_pserver_checkpoint_dir; `pserver.py`).
`--backend ray` places the processes as Ray actors on the cluster at `--ray_address`
(default: a local Ray instance started for the job; `ray_launch.py`).

`--collective --worker_num N` starts N trainers and no pservers, with the variables of
Paddle's `paddle.distributed.launch` (PADDLE_TRAINER_ENDPOINTS, PADDLE_CURRENT_ENDPOINT,
...), for the collective fleet (`launch_collective`)."""
import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time

from .job_summary import exit_status, failure_summary, success_summary  # noqa: F401
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
    p = argparse.ArgumentParser(prog="fluidity launch",
                                description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--server_num", type=int, default=1, help="parameter servers to start")
    p.add_argument("--worker_num", type=int, default=1, help="trainers to start")
    p.add_argument("--servers", default="",
                   help="comma-separated ip:port of the pservers ('': free local ports)")
    p.add_argument("--log_dir", default="log",
                   help="where each process's output goes (serverlog.<i>, workerlog.<i>)")
    p.add_argument("--server_timeout", type=float, default=30.0,
                   help="seconds the pservers get to exit after the trainers are done")
    p.add_argument("--checkpoint_dir", default="",
                   help="the pservers' recovery directory (FLAGS_pserver_checkpoint_dir): "
                        "a pserver restarted on its endpoint resumes from it")
    p.add_argument("--backend", choices=("local", "ray"), default="local",
                   help="local processes (default) or Ray actors on a Ray cluster")
    p.add_argument("--ray_address", default="",
                   help="the Ray cluster to run on (ray.init's address; '': a local "
                        "instance started for the job)")
    c = p.add_argument_group("collective mode (every process a trainer: Paddle's "
                             "paddle.distributed.launch)")
    c.add_argument("--collective", action="store_true",
                   help="start --worker_num trainers that all-reduce their gradients (the "
                        "collective fleet); no pservers")
    c.add_argument("--cluster_node_ips", default="127.0.0.1",
                   help="the job's nodes (only this one: local processes)")
    c.add_argument("--node_ip", default="127.0.0.1", help="this node's address")
    c.add_argument("--started_port", type=int, default=0,
                   help="the trainers' endpoints are node_ip:started_port+i (0: free "
                        "ports)")
    c.add_argument("--selected_gpus", default="",
                   help="Paddle's GPU list: on CPU its length is the number of trainers "
                        "when given")
    c.add_argument("--use_paddlecloud", action="store_true", help="accepted, ignored")
    c.add_argument("--print_config", action="store_true",
                   help="print the trainers' endpoints")
    p.add_argument("training_script", help="the script every process runs")
    p.add_argument("training_script_args", nargs=argparse.REMAINDER,
                   help="its arguments")
    return p


def launch_collective(a):
    """Start the trainers of a collective job on this node, each with Paddle's
    variables: PADDLE_TRAINER_ID, PADDLE_TRAINERS_NUM, PADDLE_TRAINER_ENDPOINTS,
    PADDLE_CURRENT_ENDPOINT (its own endpoint; rank 0's is where the rings meet) and
    FLAGS_selected_gpus; output in `<log_dir>/workerlog.<i>`."""
    nodes = [n.strip() for n in a.cluster_node_ips.split(",") if n.strip()]
    if nodes != [a.node_ip]:
        raise SystemExit(f"launch --collective: starts the trainers of this node only; "
                         f"--cluster_node_ips {a.cluster_node_ips} names others (run the "
                         f"launcher on each node with its --node_ip)")
    gpus = [g.strip() for g in a.selected_gpus.split(",") if g.strip()]
    n = len(gpus) if gpus else a.worker_num
    if n < 1:
        raise SystemExit("launch --collective: --worker_num must be at least 1")
    ports = [a.started_port + i for i in range(n)] if a.started_port else \
        free_ports(n, a.node_ip)
    eps = [f"{a.node_ip}:{p}" for p in ports]
    if a.print_config:
        print(f"launch --collective: {n} trainer(s) at {','.join(eps)}")
    os.makedirs(a.log_dir, exist_ok=True)
    cmd = [sys.executable, "-u", a.training_script] + list(a.training_script_args)
    trainers = []
    try:
        for i in range(n):
            env = dict(os.environ, PADDLE_TRAINER_ID=str(i), PADDLE_TRAINERS_NUM=str(n),
                       PADDLE_TRAINER_ENDPOINTS=",".join(eps), PADDLE_CURRENT_ENDPOINT=eps[i],
                       PADDLE_TRAINING_ROLE="TRAINER", TRAINING_ROLE="TRAINER",
                       FLAGS_selected_gpus=gpus[i] if gpus else str(i))
            trainers.append(_Proc("TRAINER", i, cmd, env,
                                  os.path.join(a.log_dir, f"workerlog.{i}")))
        rc = _watch([], trainers, a.server_timeout)
        if rc == 0:
            print(success_summary(0, n, a.log_dir))
        return rc
    finally:
        for p in trainers:
            p.stop()


class _Proc:
    def __init__(self, role, idx, cmd, env, log_path):
        self.role, self.idx, self.log_path = role, idx, log_path
        self.log = open(log_path, "wb")
        self.popen = subprocess.Popen(cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                      start_new_session=True)
        self.ended_at = None      # monotonic time of its exit, from the thread waiting on it
        threading.Thread(target=self._wait, daemon=True).start()

    def _wait(self):
        self.popen.wait()
        self.ended_at = time.monotonic()

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
    if a.collective:
        return launch_collective(a)
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
            print(success_summary(a.server_num, a.worker_num, a.log_dir))
        return rc
    finally:
        for p in servers + trainers:
            p.stop()


def _watch(servers, trainers, server_timeout):
    """0 when every process ended well; otherwise the exit status of the one that failed
    first, after saying which it was and printing its log's tail."""
    done_at = None
    while True:
        failed = [p for p in servers + trainers
                  if p.popen.poll() not in (None, 0) and p.ended_at is not None]
        if failed:
            first = min(failed, key=lambda p: p.ended_at)
            rc = first.popen.returncode
            first.log.flush()
            print(failure_summary(first.role, first.idx, rc, first.log_path,
                                  f" (pid {first.popen.pid})"), file=sys.stderr, flush=True)
            return exit_status(rc) or 1
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
