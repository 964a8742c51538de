"""Which parameter server holds each variable block (Paddle's `ps_dispatcher.py`).

`dispatch(blocks)` takes block names (or objects with a `name`) and returns one endpoint
each. Trainer and pserver processes run the same transpile, so a dispatcher must give the
same answer in every process: HashName hashes with CRC-32, not Python's per-process
salted `hash`."""
import zlib


def _name(v):
    return v if isinstance(v, str) else v.name


class PSDispatcher:
    def __init__(self, pserver_endpoints):
        self._eps = list(pserver_endpoints)
        if not self._eps:
            raise ValueError("a dispatcher needs at least one parameter-server endpoint")
        self._step = 0

    @property
    def eps(self):
        return self._eps

    def reset(self):
        self._step = 0

    def dispatch(self, varlist):
        raise NotImplementedError


class RoundRobin(PSDispatcher):
    """Endpoints in turn, continuing from where the last dispatch stopped."""

    def dispatch(self, varlist):
        out = []
        for _v in varlist:
            out.append(self._eps[self._step])
            self._step = (self._step + 1) % len(self._eps)
        return out


class HashName(PSDispatcher):
    """The endpoint `crc32(block name) % len(endpoints)`."""

    def dispatch(self, varlist):
        return [self._eps[zlib.crc32(_name(v).encode()) % len(self._eps)] for v in varlist]
