"""Wait until servers accept TCP connections (a trainer waits for its pservers)."""
import socket
import sys
import time

__all__ = ["wait_server_ready"]


def wait_server_ready(endpoints, timeout=None, interval=3.0):
    """Block until every "host:port" of `endpoints` accepts a connection, printing the ones
    not ready yet to stderr each round, as Fluid's does. `timeout` (seconds; None: wait
    forever, as Fluid) raises TimeoutError naming the endpoints still down."""
    if isinstance(endpoints, str):
        raise TypeError("wait_server_ready takes a list of 'host:port' strings")
    pending = list(endpoints)
    for ep in pending:
        host, sep, port = ep.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"wait_server_ready: endpoint {ep!r} is not 'host:port'")
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        down = []
        for ep in pending:
            host, _, port = ep.rpartition(":")
            try:
                with socket.create_connection((host, int(port)), timeout=2.0):
                    pass
            except OSError:
                down.append(ep)
        if not down:
            return
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeoutError(f"servers not ready after {timeout} s: {down}")
        sys.stderr.write(f"server not ready, wait {interval} sec to retry...\n"
                         f"not ready endpoints: {down}\n")
        sys.stderr.flush()
        time.sleep(interval)
