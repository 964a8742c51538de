"""A bare RPC service (`service.start_server`) in a process of its own, for tests that
measure what a stranger can make it hold: every method answers nothing and counts its
calls. Prints "ready <port>", serves until its stdin closes, then prints "calls <n>".

    python service_server.py TOKEN"""
import sys
import threading

from fluidity.distributed import service
from fluidity.distributed.launch import free_ports


class Counting:
    def __init__(self):
        self.calls = 0
        self._lock = threading.Lock()

    def __getattr__(self, name):
        if name not in service.METHODS.values():
            raise AttributeError(name)

        def method(header, value):
            with self._lock:
                self.calls += 1
        return method


def main():
    (port,) = free_ports(1)
    handler = Counting()
    server = service.start_server(f"127.0.0.1:{port}", handler, token=sys.argv[1])
    print(f"ready {port}", flush=True)
    sys.stdin.read()
    server.stop(None)
    print(f"calls {handler.calls}", flush=True)


if __name__ == "__main__":
    main()
