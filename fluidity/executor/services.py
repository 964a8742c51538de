"""Run-time services an op reaches through its run environment (`env.service(name)`).

Some ops need something outside the program: the RPC ops (send, recv, barriers,
listen_and_serv) need a network client or server. Op modules never import such libraries;
a package above the executor (`fluidity.distributed`) registers a factory here under a
name, and an executor makes one instance per name on first use and closes it in
`Executor.close()` (where a trainer says goodbye to its parameter servers)."""
from ..errors import ExecutionError

_FACTORIES = {}


def register(name, factory):
    """`factory(executor)` makes the service `name` for one executor; the object may have a
    `close()` method."""
    _FACTORIES[name] = factory


def registered(name):
    return name in _FACTORIES


class Services:
    """One executor's service instances, made on first use."""

    def __init__(self, executor):
        self._executor = executor
        self._made = {}

    def get(self, name):
        svc = self._made.get(name)
        if svc is None:
            factory = _FACTORIES.get(name)
            if factory is None:
                raise ExecutionError(f"no run-time service '{name}' is registered (ops that "
                                     f"need it cannot run here; `import fluidity` registers the distributed ones)")
            svc = self._made[name] = factory(self._executor)
        return svc

    def close(self):
        made, self._made = self._made, {}
        errors = []
        for svc in made.values():
            close = getattr(svc, "close", None)
            if close is not None:
                try:
                    close()
                except Exception as e:  # close every service, then report
                    errors.append(e)
        if errors:
            raise errors[0]
