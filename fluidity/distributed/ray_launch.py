"""`fluidity launch --backend ray`: the job's pservers and trainers as Ray actors.

Ray does the placing (an existing scheduler, not a home-made one): each process of the job
is one actor (`ProcessActor`, one CPU) that runs the training script as a child process
with Paddle's environment variables, exactly as the local launcher does, so the script is
the same. The pservers' endpoints are their actors' node addresses (127.0.0.1 on a local
instance) with a port free there. The driver polls each actor for new output and appends it
to `<log_dir>/serverlog.<i>` / `workerlog.<i>`; when a process exits non-zero (or its actor
dies with its node) every other one is stopped and the launch fails naming it; when all
trainers are done the servers get `--server_timeout` seconds to exit. The summary, on
success and on failure (the role and rank that failed, its log's tail, its exit status as
the launcher's), is the local launcher's (launch.py).

`--ray_address` names the cluster (ray.init's address: "auto", "ray://head:10001", ...);
without it a local instance is started for the job and shut down after. On a cluster the
script, fluidity and Python must be at the same paths on every node (a shared file system
or one image), as with mpirun; PYTHONPATH is passed on.

A child runs in its own session and dies with its actor (PR_SET_PDEATHSIG), so stopping
the job or losing the driver leaves no process behind."""
import os
import sys
import time

from .job_summary import exit_status, failure_summary, success_summary
from .roles import role_environment

POLL_S = 0.2
_PASSED_ON = ("PYTHONPATH", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")


def _import_ray():
    try:
        import ray
    except ImportError:
        raise SystemExit("launch --backend ray: Ray is not installed (pip install "
                         "'fluidity[ray]')") from None
    return ray


def _die_with_parent():
    """(in the child, before exec) receive SIGKILL when the actor process dies."""
    try:
        import ctypes
        import signal
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    os.setsid()


class ProcessActor:
    """One process of the job, run by a Ray actor on whatever node Ray placed it."""

    def __init__(self, name):
        import tempfile
        self.name = name
        self.proc = None
        self.dir = tempfile.mkdtemp(prefix="fluidity-launch-")
        self.log_path = os.path.join(self.dir, "log")

    def address(self, local):
        """(host, free port) for a pserver here."""
        import socket
        host = "127.0.0.1" if local else _node_ip()
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            return host, s.getsockname()[1]

    def start(self, script, args, env, local):
        import subprocess
        full = dict(os.environ, **env)
        if env.get("TRAINING_ROLE") == "TRAINER" and not local:
            full["POD_IP"] = _node_ip()          # a trainer's own address on its node
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen([sys.executable, "-u", script, *args], env=full,
                                         stdout=log, stderr=subprocess.STDOUT,
                                         preexec_fn=_die_with_parent)
        return self.proc.pid

    def poll(self):
        return None if self.proc is None else self.proc.poll()

    def output(self, offset):
        """The output written since byte `offset`."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                return f.read()
        except FileNotFoundError:
            return b""

    def stop(self, wait=5.0):
        import signal
        import subprocess
        p = self.proc
        if p is not None and p.poll() is None:
            for sig in (signal.SIGTERM, signal.SIGCONT):
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    pass
            try:
                p.wait(wait)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        return None if p is None else p.returncode


def _node_ip():
    import ray
    return ray.util.get_node_ip_address()


class _Member:
    """The driver's view of one process: its actor, its log file and what it has copied."""

    def __init__(self, ray, actor_cls, role, idx, log_dir):
        self.role, self.idx = role, idx
        self.actor = actor_cls.remote(f"{role.lower()} {idx}")
        self.log_path = os.path.join(log_dir, f"{'server' if role == 'PSERVER' else 'worker'}"
                                              f"log.{idx}")
        self.copied = 0
        self.rc = None
        open(self.log_path, "wb").close()

    @property
    def name(self):
        return f"{self.role.lower()} {self.idx} (Ray actor, log {self.log_path})"

    def collect(self, ray):
        try:
            data = ray.get(self.actor.output.remote(self.copied), timeout=30)
        except Exception:  # noqa: BLE001 - a dead actor has no more output
            return
        if data:
            with open(self.log_path, "ab") as f:
                f.write(data)
            self.copied += len(data)


def launch_on_ray(args, job_env, eps):
    """Run the job on Ray; the launcher's exit status."""
    ray = _import_ray()
    local = not args.ray_address
    n = args.server_num + args.worker_num
    if local:
        ray.init(num_cpus=max(n, os.cpu_count() or 1), include_dashboard=False,
                 log_to_driver=False, configure_logging=False)
    else:
        ray.init(address=args.ray_address, log_to_driver=False, configure_logging=False)
    actor_cls = ray.remote(num_cpus=1, max_concurrency=4)(ProcessActor)
    members = []
    try:
        servers = [_Member(ray, actor_cls, "PSERVER", i, args.log_dir)
                   for i in range(args.server_num)]
        trainers = [_Member(ray, actor_cls, "TRAINER", i, args.log_dir)
                    for i in range(args.worker_num)]
        members = servers + trainers
        if eps is None:
            eps = [f"{h}:{p}" for h, p in ray.get([s.actor.address.remote(local)
                                                    for s in servers])]
        env = dict(job_env, **{k: os.environ[k] for k in _PASSED_ON if k in os.environ})
        script = os.path.abspath(args.training_script)
        ray.get([m.actor.start.remote(script, list(args.training_script_args),
                                      dict(env, **role_environment(m.role, m.idx, eps)),
                                      local)
                 for m in members])
        rc = _watch(ray, servers, trainers, args.server_timeout)
        if rc == 0:
            print(success_summary(args.server_num, args.worker_num, args.log_dir))
        return rc
    finally:
        try:
            if members:
                ray.get([m.actor.stop.remote() for m in members], timeout=60)
                for m in members:
                    m.collect(ray)
                    ray.kill(m.actor)
        finally:
            if local:
                ray.shutdown()


def _watch(ray, servers, trainers, server_timeout):
    done_at = None
    while True:
        for m in servers + trainers:
            m.collect(ray)
            try:
                m.rc = ray.get(m.actor.poll.remote(), timeout=30)
            except Exception as e:  # noqa: BLE001 - the actor (or its node) is gone
                print(f"launch: {m.name} was lost: {type(e).__name__}: {e}; stopping the "
                      f"others", file=sys.stderr)
                return 1
            if m.rc not in (None, 0):
                m.collect(ray)                      # the last of its output, then its tail
                print(failure_summary(m.role, m.idx, m.rc, m.log_path, " (Ray actor)"),
                      file=sys.stderr, flush=True)
                return exit_status(m.rc) or 1
        if all(m.rc == 0 for m in trainers):
            if all(m.rc == 0 for m in servers):
                return 0
            done_at = done_at or time.monotonic()
            if time.monotonic() - done_at > server_timeout:
                left = [m.name for m in servers if m.rc is None]
                print(f"launch: the trainers are done but {left} did not exit within "
                      f"{server_timeout:g} s; stopping them", file=sys.stderr)
                return 1
        time.sleep(POLL_S)
