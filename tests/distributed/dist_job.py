"""A parameter-server job whose processes a test starts, kills and restarts one by one
(the launcher would stop the whole job at the first failure): each runs dist_steps.py with
the environment the launcher gives, its output in `<tmp>/<role>log.<i>`."""
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np

import fluidity as fluid
from fluidity.distributed.launch import free_ports

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(HERE, "dist_steps.py")
sys.path.insert(0, HERE)
import dist_mlp  # noqa: E402
from replay import replay  # noqa: E402


class Job:
    def __init__(self, tmp, args, servers=2, trainers=2, env=None, script=SCRIPT):
        self.tmp, self.args, self.script = tmp, [str(a) for a in args], script
        self.eps = [f"127.0.0.1:{p}" for p in free_ports(servers)]
        self.trainers = trainers
        self.env = dict(os.environ, PYTHONPATH=ROOT, OPENBLAS_NUM_THREADS="1",
                        PADDLE_PSERVERS_IP_PORT_LIST=",".join(self.eps),
                        PADDLE_TRAINERS_NUM=str(trainers), **(env or {}))
        self.procs = {}

    def log_path(self, role, i):
        return os.path.join(self.tmp, f"{role}log.{i}")

    def _start(self, role, i, env):
        log = open(self.log_path(role, i), "ab")
        p = subprocess.Popen([sys.executable, "-u", self.script, *self.args], env=env,
                             stdout=log, stderr=subprocess.STDOUT, cwd=str(self.tmp))
        log.close()
        self.procs[(role, i)] = p
        return p

    def start_server(self, i):
        ip, port = self.eps[i].rsplit(":", 1)
        return self._start("server", i, dict(self.env, TRAINING_ROLE="PSERVER", POD_IP=ip,
                                             PADDLE_PORT=port, PADDLE_TRAINER_ID="0"))

    def start_trainer(self, i):
        return self._start("worker", i, dict(self.env, TRAINING_ROLE="TRAINER",
                                             PADDLE_TRAINER_ID=str(i)))

    def start(self):
        for i in range(len(self.eps)):
            self.start_server(i)
        for i in range(self.trainers):
            self.start_trainer(i)

    def log(self, role, i):
        try:
            with open(self.log_path(role, i), errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def logs(self):
        return "\n".join(f"== {r}log.{i}\n{self.log(r, i)[-3000:]}" for r, i in self.procs)

    def wait_for(self, role, i, pattern, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if re.search(pattern, self.log(role, i)):
                return
            time.sleep(0.05)
        raise AssertionError(f"{role} {i} did not print {pattern!r} in {timeout} s\n"
                             f"{self.logs()}")

    def kill(self, role, i, sig=signal.SIGKILL):
        p = self.procs[(role, i)]
        p.send_signal(sig)
        p.wait(10)

    def wait(self, role, i, timeout):
        try:
            return self.procs[(role, i)].wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{role} {i} still runs after {timeout} s\n"
                                 f"{self.logs()}") from None

    def run_restarting_server(self, server, kill_at):
        """Run the job to the end, SIGKILLing `server` once trainer 0 prints step `kill_at`
        and restarting it on its endpoint (same recovery dir); every process must exit 0."""
        try:
            self.start()
            self.wait_for("worker", 0, rf"step {kill_at}\b", 60)
            self.kill("server", server, signal.SIGKILL)
            self.start_server(server)
            for i in range(self.trainers):
                assert self.wait("worker", i, 90) == 0, self.logs()
            for i in range(len(self.eps)):
                assert self.wait("server", i, 30) == 0, self.logs()
        finally:
            self.stop_all()

    def stop_all(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()


def single_process(init, steps, lr, trainers, opt="sgd"):
    """dist_mlp's sync job replayed in one process with its own arithmetic, from `init`
    (replay.py): the job must equal it bit for bit."""
    def trainer_feeds(step):
        x, y = dist_mlp.batch(step, trainers)
        return [{"x": x[k * dist_mlp.BATCH:(k + 1) * dist_mlp.BATCH],
                 "y": y[k * dist_mlp.BATCH:(k + 1) * dist_mlp.BATCH]} for k in range(trainers)]
    final, _losses = replay(lambda: dist_mlp.build(lr, opt), trainer_feeds, steps, init)
    return final


def load(path):
    z = np.load(path)
    init = {k[5:]: z[k] for k in z.files if k.startswith("init/")}
    final = {k[6:]: z[k] for k in z.files if k.startswith("final/")}
    return init, final, z["losses"]
