"""What a launcher says about a job's processes, whichever backend ran them (`launch.py`
over local processes, `ray_launch.py` over Ray actors): the exit status it passes on, the
summary of the process that failed first (with its log's tail), the summary of a success."""
import os
import signal

TAIL_LINES = 20          # of a failed process's log, printed by the launcher


def log_tail(path, lines=TAIL_LINES, max_bytes=64 << 10):
    """The last `lines` lines of a log file (at most `max_bytes` read), or why not."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            text = f.read().decode("utf-8", errors="replace")
    except OSError as e:
        return [f"(cannot read {path}: {e.strerror})"]
    tail = text.splitlines()[-lines:]
    return tail or ["(the log is empty)"]


def exit_status(rc):
    """The launcher's exit status for a process's returncode: itself, or 128 + N when
    signal N ended it (as a shell reports it)."""
    return 128 - rc if rc < 0 else rc


def _how(rc):
    if rc < 0:
        try:
            return f"was killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"was killed by signal {-rc}"
    return f"exited with status {rc}"


def failure_summary(role, idx, rc, log_path, where=""):
    """What the launcher prints when `role` `idx` failed first: who, how, its log's tail."""
    head = (f"launch: {role.lower()} {idx}{where} failed first: it {_how(rc)}; the others "
            f"are stopped. The end of its log ({log_path}):")
    return "\n".join([head] + [f"  | {ln}" for ln in log_tail(log_path)])


def success_summary(n_servers, n_trainers, log_dir):
    logs = f"{log_dir}/workerlog.<i>" + (" and serverlog.<i>" if n_servers else "")
    who = f"{n_trainers} trainer(s)" + (f" and {n_servers} pserver(s)" if n_servers else "")
    return f"launch: {who} finished; their output is in {logs}"
